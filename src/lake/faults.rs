//! Stores that fail on purpose, for the fault tests (built with the
//! `failpoints` feature only, like the crash points).
//!
//! [`install`] wraps every object store the process opens (deltalake's
//! tables, the checkpoint, the lease) in a [`FaultyStore`]; a
//! [`FaultPlan`] then makes chosen calls on paths under one location fail
//! the way real stores fail: a 503 after the client's own retries, a
//! timeout, a write that succeeded but answered 500, a multipart part that
//! failed, or a store that ignores conditional writes. Plans are keyed by
//! location, so tests running side by side do not see each other's faults.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};

use async_trait::async_trait;
use bytes::Bytes;
use deltalake::DeltaResult;
use deltalake::logstore::object_store::path::Path;
use deltalake::logstore::object_store::{
    self, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, UploadPart,
};
use deltalake::logstore::{
    ObjectStoreFactory, ObjectStoreRef, StorageConfig, object_store_factories,
};
use futures::stream::{self, BoxStream, StreamExt};
use url::Url;

use super::storage::register_handlers;

/// How a call fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The store answers 503 (after object_store's retries): nothing done.
    Unavailable,
    /// The call times out: nothing done.
    Timeout,
    /// A write is done, then answered with a 500: the caller cannot tell.
    SucceedThenFail,
    /// A conditional write is done, its answer lost, and the client's own
    /// retry refused: the caller sees "already exists" or "precondition
    /// failed" for its own write.
    RetriedAfterSuccess,
    /// A multipart upload loses a part: the object never appears.
    PartFails,
    /// Create-only and conditional puts overwrite: a store that accepts
    /// `If-None-Match` and ignores it.
    IgnoreConditions,
    /// A read finds nothing: the object expired or was removed by hand.
    Lost,
}

/// The kind of store call a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `put_opts`.
    Put,
    /// `put_multipart_opts` and its parts.
    Multipart,
    /// `get_opts` and ranged reads.
    Get,
    /// Listing.
    List,
    /// Deletes.
    Delete,
    /// Copies and renames.
    Copy,
}

/// One kind of fault on some paths.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Applies to paths containing this text (`_delta_log`, `offsets/`,
    /// `lease`, `.parquet`); empty for every path.
    pub path: String,
    /// The calls it applies to.
    pub calls: Vec<Call>,
    /// What happens.
    pub fault: Fault,
    /// The chance that a matching call fails (1.0: every one).
    pub odds: f64,
    /// At most this many faults, or no limit.
    pub limit: Option<u64>,
    /// Matching calls that pass before faults start (e.g. the lease's
    /// first write, so a process starts and then cannot renew).
    pub after: u64,
}

/// The faults of one test, on the locations under one URL prefix.
pub struct FaultPlan {
    prefix: String,
    /// Each rule, with the matching calls seen and the faults injected.
    rules: Mutex<Vec<(Rule, u64, u64)>>,
    enabled: AtomicBool,
    injected: AtomicU64,
}

impl fmt::Debug for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultPlan")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl FaultPlan {
    /// A plan for the locations under `prefix`, with no rule yet.
    pub fn new(prefix: &Url) -> Arc<Self> {
        Arc::new(FaultPlan {
            prefix: prefix.as_str().to_string(),
            rules: Mutex::new(Vec::new()),
            enabled: AtomicBool::new(true),
            injected: AtomicU64::new(0),
        })
    }

    /// Adds a rule.
    pub fn add(&self, rule: Rule) {
        self.lock().push((rule, 0, 0));
    }

    /// No fault from now on (the stream must then recover).
    pub fn stop(&self) {
        self.enabled.store(false, Ordering::SeqCst);
    }

    /// How many faults were injected.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Rule, u64, u64)>> {
        self.rules
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The fault for `call` on `location` (a full URL), if one is drawn.
    fn draw(&self, call: Call, location: &str) -> Option<Fault> {
        if !self.enabled.load(Ordering::SeqCst) || !location.starts_with(&self.prefix) {
            return None;
        }
        let mut rules = self.lock();
        let (rule, seen, count) = rules.iter_mut().find(|(rule, _, count)| {
            rule.calls.contains(&call)
                && location.contains(&rule.path)
                && rule.limit.is_none_or(|limit| *count < limit)
        })?;
        *seen += 1;
        if *seen <= rule.after || fastrand::f64() >= rule.odds {
            return None;
        }
        *count += 1;
        self.injected.fetch_add(1, Ordering::SeqCst);
        Some(rule.fault)
    }
}

static PLANS: Mutex<Vec<Arc<FaultPlan>>> = Mutex::new(Vec::new());

fn plans() -> std::sync::MutexGuard<'static, Vec<Arc<FaultPlan>>> {
    PLANS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Makes `plan` apply to every store the process opens from now on (and
/// wraps the store factories the first time).
pub fn install(plan: Arc<FaultPlan>) {
    static WRAP: Once = Once::new();
    WRAP.call_once(|| {
        register_handlers();
        let registry = object_store_factories();
        let schemes: Vec<Url> = registry.iter().map(|entry| entry.key().clone()).collect();
        for scheme in schemes {
            if let Some(inner) = registry.get(&scheme).map(|entry| entry.value().clone()) {
                registry.insert(scheme, Arc::new(FaultyFactory { inner }));
            }
        }
    });
    plans().push(plan);
}

/// The variable a process reads its fault plan from (see [`from_env`]).
pub const ENV: &str = "MSSQL_CDC_FAULTS";

/// Installs the plan `MSSQL_CDC_FAULTS` describes, for a whole process
/// (the binary run by a test): rules separated by `;`, each
/// `PATH:CALLS:FAULT[:ODDS[:LIMIT[:AFTER]]]` with CALLS among `put`, `multipart`,
/// `get`, `list`, `delete`, `copy` joined by `+`, and FAULT one of
/// `unavailable`, `timeout`, `succeed-then-fail`, `part-fails`,
/// `ignore-conditions`, `retried-after-success`. Returns the plan, or an
/// error naming the rule it cannot read.
pub fn from_env() -> Result<Option<Arc<FaultPlan>>, String> {
    let Ok(text) = std::env::var(ENV) else {
        return Ok(None);
    };
    let plan = Arc::new(FaultPlan {
        prefix: String::new(),
        rules: Mutex::new(Vec::new()),
        enabled: AtomicBool::new(true),
        injected: AtomicU64::new(0),
    });
    for rule in text.split(';').filter(|r| !r.trim().is_empty()) {
        plan.add(
            parse_rule(rule.trim()).ok_or_else(|| format!("{ENV}: cannot read rule {rule:?}"))?,
        );
    }
    install(plan.clone());
    Ok(Some(plan))
}

fn parse_rule(text: &str) -> Option<Rule> {
    let mut parts = text.split(':');
    let path = parts.next()?.to_string();
    let calls = parts
        .next()?
        .split('+')
        .map(|call| match call {
            "put" => Some(Call::Put),
            "multipart" => Some(Call::Multipart),
            "get" => Some(Call::Get),
            "list" => Some(Call::List),
            "delete" => Some(Call::Delete),
            "copy" => Some(Call::Copy),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    let fault = match parts.next()? {
        "unavailable" => Fault::Unavailable,
        "timeout" => Fault::Timeout,
        "succeed-then-fail" => Fault::SucceedThenFail,
        "part-fails" => Fault::PartFails,
        "ignore-conditions" => Fault::IgnoreConditions,
        "retried-after-success" => Fault::RetriedAfterSuccess,
        _ => return None,
    };
    let odds = parts.next().map_or(Some(1.0), |o| o.parse().ok())?;
    let limit = match parts.next() {
        Some("") | None => None,
        Some(limit) => Some(limit.parse().ok()?),
    };
    let after = parts.next().map_or(Some(0), |a| a.parse().ok())?;
    Some(Rule {
        path,
        calls,
        fault,
        odds,
        limit,
        after,
    })
}

/// Stops applying `plan`.
pub fn remove(plan: &Arc<FaultPlan>) {
    plans().retain(|p| !Arc::ptr_eq(p, plan));
}

fn draw(call: Call, location: &str) -> Option<Fault> {
    let plans: Vec<Arc<FaultPlan>> = plans().clone();
    plans.iter().find_map(|plan| plan.draw(call, location))
}

struct FaultyFactory {
    inner: Arc<dyn ObjectStoreFactory>,
}

impl ObjectStoreFactory for FaultyFactory {
    fn parse_url_opts(
        &self,
        url: &Url,
        config: &StorageConfig,
    ) -> DeltaResult<(ObjectStoreRef, Path)> {
        let (store, path) = self.inner.parse_url_opts(url, config)?;
        let base = format!("{}://{}/", url.scheme(), url.host_str().unwrap_or_default());
        Ok((Arc::new(FaultyStore::new(store, base)), path))
    }
}

/// A store whose calls fail as the installed plans say.
#[derive(Debug)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    base: String,
}

impl FaultyStore {
    /// Wraps `inner`, whose paths are relative to the URL `base`
    /// (`file:///`, `s3://bucket/`).
    pub fn new(inner: Arc<dyn ObjectStore>, base: String) -> Self {
        FaultyStore { inner, base }
    }

    fn fault(&self, call: Call, location: &Path) -> Option<Fault> {
        draw(call, &format!("{}{}", self.base, location))
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

fn failure(fault: Fault, location: &Path) -> object_store::Error {
    if fault == Fault::Lost {
        return object_store::Error::NotFound {
            path: location.to_string(),
            source: "the object is gone (injected)".into(),
        };
    }
    let what = match fault {
        Fault::Timeout => "operation timed out",
        Fault::SucceedThenFail => "500 Internal Server Error",
        _ => "503 Service Unavailable",
    };
    object_store::Error::Generic {
        store: "faults",
        source: format!("{what} (injected) for {location}").into(),
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        mut opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        match self.fault(Call::Put, location) {
            Some(Fault::SucceedThenFail) => {
                self.inner.put_opts(location, payload, opts).await?;
                Err(failure(Fault::SucceedThenFail, location))
            }
            Some(Fault::RetriedAfterSuccess) => {
                let mode = opts.mode.clone();
                let done = self.inner.put_opts(location, payload, opts).await?;
                let path = location.to_string();
                let source = "the retry of a write that had succeeded (injected)".into();
                match mode {
                    PutMode::Create => Err(object_store::Error::AlreadyExists { path, source }),
                    PutMode::Update(_) => Err(object_store::Error::Precondition { path, source }),
                    // A retried unconditional put just succeeds again.
                    PutMode::Overwrite => Ok(done),
                }
            }
            Some(Fault::IgnoreConditions) => {
                opts.mode = PutMode::Overwrite;
                self.inner.put_opts(location, payload, opts).await
            }
            Some(fault) => Err(failure(fault, location)),
            None => self.inner.put_opts(location, payload, opts).await,
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        match self.fault(Call::Multipart, location) {
            Some(Fault::PartFails) => {
                let inner = self.inner.put_multipart_opts(location, opts).await?;
                Ok(Box::new(LosingUpload {
                    inner,
                    location: location.clone(),
                }))
            }
            Some(fault @ (Fault::Unavailable | Fault::Timeout)) => Err(failure(fault, location)),
            _ => self.inner.put_multipart_opts(location, opts).await,
        }
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        match self.fault(Call::Get, location) {
            Some(fault) => Err(failure(fault, location)),
            None => self.inner.get_opts(location, options).await,
        }
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        match self.fault(Call::Get, location) {
            Some(fault) => Err(failure(fault, location)),
            None => self.inner.get_ranges(location, ranges).await,
        }
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let base = self.base.clone();
        let checked = locations
            .map(move |location| {
                let location = location?;
                match draw(Call::Delete, &format!("{base}{location}")) {
                    Some(fault) => Err(failure(fault, &location)),
                    None => Ok(location),
                }
            })
            .boxed();
        self.inner.delete_stream(checked)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let at = prefix.cloned().unwrap_or_default();
        match self.fault(Call::List, &at) {
            Some(fault) => stream::once(async move { Err(failure(fault, &at)) }).boxed(),
            None => self.inner.list(prefix),
        }
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let at = prefix.cloned().unwrap_or_default();
        match self.fault(Call::List, &at) {
            Some(fault) => stream::once(async move { Err(failure(fault, &at)) }).boxed(),
            None => self.inner.list_with_offset(prefix, offset),
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let at = prefix.cloned().unwrap_or_default();
        match self.fault(Call::List, &at) {
            Some(fault) => Err(failure(fault, &at)),
            None => self.inner.list_with_delimiter(prefix).await,
        }
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        match self.fault(Call::Copy, to) {
            Some(Fault::SucceedThenFail) => {
                self.inner.rename_opts(from, to, options).await?;
                Err(failure(Fault::SucceedThenFail, to))
            }
            Some(fault) => Err(failure(fault, to)),
            None => self.inner.rename_opts(from, to, options).await,
        }
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        match self.fault(Call::Copy, to) {
            Some(Fault::SucceedThenFail) => {
                self.inner.copy_opts(from, to, options).await?;
                Err(failure(Fault::SucceedThenFail, to))
            }
            Some(fault) => Err(failure(fault, to)),
            None => self.inner.copy_opts(from, to, options).await,
        }
    }
}

/// A multipart upload whose first part is lost.
#[derive(Debug)]
struct LosingUpload {
    inner: Box<dyn MultipartUpload>,
    location: Path,
}

#[async_trait]
impl MultipartUpload for LosingUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let _ = data;
        let error = failure(Fault::PartFails, &self.location);
        Box::pin(async move { Err(error) })
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        Err(failure(Fault::PartFails, &self.location))
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.inner.abort().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::logstore::object_store::ObjectStoreExt;
    use deltalake::logstore::object_store::memory::InMemory;

    fn store(prefix: &str) -> (FaultyStore, Arc<FaultPlan>) {
        let plan = FaultPlan::new(&Url::parse(prefix).unwrap());
        (
            FaultyStore::new(Arc::new(InMemory::new()), "memory:///".into()),
            plan,
        )
    }

    fn rule(path: &str, calls: &[Call], fault: Fault, limit: Option<u64>) -> Rule {
        Rule {
            path: path.into(),
            calls: calls.to_vec(),
            fault,
            odds: 1.0,
            limit,
            after: 0,
        }
    }

    #[test]
    fn rules_are_read_from_text() {
        let rule = parse_rule("lease:put+get:unavailable:0.5:3").unwrap();
        assert_eq!(rule.path, "lease");
        assert_eq!(rule.calls, vec![Call::Put, Call::Get]);
        assert_eq!(
            (rule.fault, rule.odds, rule.limit),
            (Fault::Unavailable, 0.5, Some(3))
        );
        let rule = parse_rule("_delta_log:copy:retried-after-success").unwrap();
        assert_eq!((rule.odds, rule.limit, rule.after), (1.0, None, 0));
        let rule = parse_rule("lease:put:unavailable:1::1").unwrap();
        assert_eq!((rule.limit, rule.after), (None, 1));
        for bad in [
            "lease",
            "lease:put",
            "lease:post:unavailable",
            "x:put:flaky",
            "x:put:timeout:often",
        ] {
            assert!(parse_rule(bad).is_none(), "{bad}");
        }
    }

    #[tokio::test]
    async fn faults_hit_only_their_plan_paths_and_calls() {
        let (store, plan) = store("memory:///t1/");
        plan.add(rule("offsets/", &[Call::Put], Fault::Unavailable, Some(1)));
        install(plan.clone());
        let offsets = Path::from("t1/offsets/1");
        let error = store.put(&offsets, "a".into()).await.unwrap_err();
        assert!(error.to_string().contains("503"), "{error}");
        // The limit is reached: the next put passes, reads never failed.
        store.put(&offsets, "a".into()).await.unwrap();
        store.get(&offsets).await.unwrap();
        // Another location is not this plan's.
        store
            .put(&Path::from("t2/offsets/1"), "b".into())
            .await
            .unwrap();
        assert_eq!(plan.injected(), 1);
        remove(&plan);
    }

    #[tokio::test]
    async fn an_ambiguous_write_is_done_and_reported_failed() {
        let (store, plan) = store("memory:///t3/");
        plan.add(rule("", &[Call::Put], Fault::SucceedThenFail, Some(1)));
        install(plan.clone());
        let path = Path::from("t3/lease");
        assert!(store.put(&path, "mine".into()).await.is_err());
        let body = store.get(&path).await.unwrap().bytes().await.unwrap();
        assert_eq!(&body[..], b"mine");
        remove(&plan);
    }

    #[tokio::test]
    async fn a_store_ignoring_conditions_overwrites_a_create() {
        let (store, plan) = store("memory:///t4/");
        plan.add(rule("", &[Call::Put], Fault::IgnoreConditions, None));
        install(plan.clone());
        let path = Path::from("t4/probe");
        let create = PutOptions::from(PutMode::Create);
        store
            .put_opts(&path, "1".into(), create.clone())
            .await
            .unwrap();
        store.put_opts(&path, "2".into(), create).await.unwrap();
        plan.stop();
        let create = PutOptions::from(PutMode::Create);
        let refused = store.put_opts(&path, "3".into(), create).await;
        assert!(matches!(
            refused,
            Err(object_store::Error::AlreadyExists { .. })
        ));
        remove(&plan);
    }
}
