//! Counts object-store requests, so the cost of a batch in requests (what
//! S3 bills and throttles) is measured rather than guessed
//! (`mssql-cdc bench --requests`, docs/performance.md).
//!
//! [`install`] wraps every store the process opens from then on (deltalake's
//! tables, the checkpoint, the lease, the claims), as the fault stores do,
//! in a [`CountingStore`] that records each call by [`Kind`] and by the
//! class a [`Classifier`] gives its full URL. Ranged reads are counted
//! after object_store coalesces them, one per request an S3 store would
//! send; a listing counts once per page of [`LIST_PAGE`] keys it returns, as
//! S3 sends them (an empty listing is one page).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, Once};

use async_trait::async_trait;
use deltalake::DeltaResult;
use deltalake::logstore::object_store::path::Path;
use deltalake::logstore::object_store::{
    self, CopyMode, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    RenameTargetMode,
};
use deltalake::logstore::{
    ObjectStoreFactory, ObjectStoreRef, StorageConfig, object_store_factories,
};
use futures::stream::{BoxStream, StreamExt};
use url::Url;

use super::storage::register_handlers;

/// The kind of request, as a store bills it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A whole-object GET.
    Get,
    /// A ranged GET (one per coalesced range).
    GetRange,
    /// A HEAD (metadata only).
    Head,
    /// An unconditional PUT.
    Put,
    /// A create-only PUT (`If-None-Match: *`).
    PutCreate,
    /// A conditional PUT (`If-Match`).
    PutUpdate,
    /// The start of a multipart upload (its parts are not counted apart).
    Multipart,
    /// A listing call.
    List,
    /// One object deleted.
    Delete,
    /// A copy or rename (overwriting).
    Copy,
    /// A copy or rename that must not overwrite.
    CopyCreate,
}

impl Kind {
    /// Every kind, in the order tables print them.
    pub const ALL: [Kind; 11] = [
        Kind::Get,
        Kind::GetRange,
        Kind::Head,
        Kind::Put,
        Kind::PutCreate,
        Kind::PutUpdate,
        Kind::Multipart,
        Kind::List,
        Kind::Delete,
        Kind::Copy,
        Kind::CopyCreate,
    ];

    /// The name tables print.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Get => "GET",
            Kind::GetRange => "GET range",
            Kind::Head => "HEAD",
            Kind::Put => "PUT",
            Kind::PutCreate => "PUT create",
            Kind::PutUpdate => "PUT if-match",
            Kind::Multipart => "multipart",
            Kind::List => "LIST",
            Kind::Delete => "DELETE",
            Kind::Copy => "COPY",
            Kind::CopyCreate => "COPY create",
        }
    }

    /// Whether S3 bills it as a write (PUT, COPY, POST, LIST) rather than
    /// a read (GET, HEAD); DELETE is free on S3 and counted as neither.
    pub fn is_write_class(self) -> bool {
        !matches!(self, Kind::Get | Kind::GetRange | Kind::Head | Kind::Delete)
    }
}

/// Names the class of a request's full URL (`file:///lake/bronze/_delta_log/…`):
/// which table or folder it touched; `None` leaves it uncounted (another
/// location than the one measured).
pub type Classifier = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Counts by class and kind (a snapshot, or the difference of two).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts(pub BTreeMap<(String, Kind), u64>);

impl Counts {
    /// What was counted after `earlier` was taken.
    pub fn since(&self, earlier: &Counts) -> Counts {
        let mut out = BTreeMap::new();
        for (key, n) in &self.0 {
            let before = earlier.0.get(key).copied().unwrap_or(0);
            if *n > before {
                out.insert(key.clone(), n - before);
            }
        }
        Counts(out)
    }

    /// Adds `other` in.
    pub fn add(&mut self, other: &Counts) {
        for (key, n) in &other.0 {
            *self.0.entry(key.clone()).or_default() += n;
        }
    }

    /// All requests.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Requests of one kind.
    pub fn of_kind(&self, kind: Kind) -> u64 {
        self.0
            .iter()
            .filter(|((_, k), _)| *k == kind)
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests of one class.
    pub fn of_class(&self, class: &str) -> u64 {
        self.0
            .iter()
            .filter(|((c, _), _)| c == class)
            .map(|(_, n)| n)
            .sum()
    }

    /// The classes seen, in order.
    pub fn classes(&self) -> Vec<String> {
        let mut classes: Vec<String> = self.0.keys().map(|(c, _)| c.clone()).collect();
        classes.dedup();
        classes
    }
}

/// The counter the installed stores report to.
pub struct RequestCounter {
    classify: Classifier,
    counts: Mutex<Counts>,
}

impl fmt::Debug for RequestCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestCounter").finish_non_exhaustive()
    }
}

impl RequestCounter {
    /// A counter that files each request under `classify(url)`.
    pub fn new(classify: Classifier) -> Arc<Self> {
        Arc::new(RequestCounter {
            classify,
            counts: Mutex::new(Counts::default()),
        })
    }

    /// What was counted so far.
    pub fn snapshot(&self) -> Counts {
        self.lock().clone()
    }

    fn record(&self, kind: Kind, url: &str) {
        if let Some(class) = (self.classify)(url) {
            *self.lock().0.entry((class, kind)).or_default() += 1;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

static COUNTERS: Mutex<Vec<Arc<RequestCounter>>> = Mutex::new(Vec::new());

fn counters() -> Vec<Arc<RequestCounter>> {
    COUNTERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone()
}

fn record(kind: Kind, url: &str) {
    for counter in counters() {
        counter.record(kind, url);
    }
}

/// Makes `counter` count the requests of every store the process opens
/// from now on (and wraps the store factories the first time).
pub fn install(counter: Arc<RequestCounter>) {
    static WRAP: Once = Once::new();
    WRAP.call_once(|| {
        register_handlers();
        let registry = object_store_factories();
        let schemes: Vec<Url> = registry.iter().map(|entry| entry.key().clone()).collect();
        for scheme in schemes {
            if let Some(inner) = registry.get(&scheme).map(|entry| entry.value().clone()) {
                registry.insert(scheme, Arc::new(CountingFactory { inner }));
            }
        }
    });
    COUNTERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(counter);
}

/// Stops `counter` counting.
pub fn remove(counter: &Arc<RequestCounter>) {
    COUNTERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .retain(|c| !Arc::ptr_eq(c, counter));
}

struct CountingFactory {
    inner: Arc<dyn ObjectStoreFactory>,
}

impl ObjectStoreFactory for CountingFactory {
    fn parse_url_opts(
        &self,
        url: &Url,
        config: &StorageConfig,
    ) -> DeltaResult<(ObjectStoreRef, Path)> {
        let (store, path) = self.inner.parse_url_opts(url, config)?;
        let base = format!("{}://{}/", url.scheme(), url.host_str().unwrap_or_default());
        Ok((Arc::new(CountingStore::new(store, base)), path))
    }
}

/// A store that reports each request to the installed counters.
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    base: String,
}

impl CountingStore {
    /// Wraps `inner`, whose paths are relative to the URL `base`
    /// (`file:///`, `s3://bucket/`).
    pub fn new(inner: Arc<dyn ObjectStore>, base: String) -> Self {
        CountingStore { inner, base }
    }

    fn count(&self, kind: Kind, location: &Path) {
        record(kind, &format!("{}{}", self.base, location));
    }

    /// Counts a listing's first page now and one more for each further
    /// [`LIST_PAGE`] keys as they arrive.
    fn paged(
        &self,
        prefix: Option<&Path>,
        listing: BoxStream<'static, object_store::Result<ObjectMeta>>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let url = format!("{}{}", self.base, prefix.cloned().unwrap_or_default());
        record(Kind::List, &url);
        let mut keys = 0usize;
        listing
            .inspect(move |_| {
                keys += 1;
                if keys > LIST_PAGE && keys % LIST_PAGE == 1 {
                    record(Kind::List, &url);
                }
            })
            .boxed()
    }
}

/// Keys in one page of an S3 listing.
pub const LIST_PAGE: usize = 1000;

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CountingStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let kind = match opts.mode {
            PutMode::Overwrite => Kind::Put,
            PutMode::Create => Kind::PutCreate,
            PutMode::Update(_) => Kind::PutUpdate,
        };
        self.count(kind, location);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.count(Kind::Multipart, location);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let kind = if options.head {
            Kind::Head
        } else if options.range.is_some() {
            Kind::GetRange
        } else {
            Kind::Get
        };
        self.count(kind, location);
        self.inner.get_opts(location, options).await
    }

    // `get_ranges` is left to the trait's default, which coalesces the
    // ranges and calls `get_opts` once per merged range, as S3 does.

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let base = self.base.clone();
        let counted = locations
            .map(move |location| {
                if let Ok(location) = &location {
                    record(Kind::Delete, &format!("{base}{location}"));
                }
                location
            })
            .boxed();
        self.inner.delete_stream(counted)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.paged(prefix, self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.paged(prefix, self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let listed = self.inner.list_with_delimiter(prefix).await;
        let keys = listed
            .as_ref()
            .map_or(0, |l| l.objects.len() + l.common_prefixes.len());
        for _ in 0..keys.div_ceil(LIST_PAGE).max(1) {
            self.count(Kind::List, &prefix.cloned().unwrap_or_default());
        }
        listed
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        let kind = match options.target_mode {
            RenameTargetMode::Overwrite => Kind::Copy,
            RenameTargetMode::Create => Kind::CopyCreate,
        };
        // S3 has no rename: a copy, then a delete of the source.
        self.count(kind, to);
        self.count(Kind::Delete, from);
        self.inner.rename_opts(from, to, options).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        let kind = match options.mode {
            CopyMode::Overwrite => Kind::Copy,
            CopyMode::Create => Kind::CopyCreate,
        };
        self.count(kind, to);
        self.inner.copy_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::logstore::object_store::ObjectStoreExt;
    use deltalake::logstore::object_store::memory::InMemory;

    fn counted(prefix: &'static str) -> (CountingStore, Arc<RequestCounter>) {
        let counter = RequestCounter::new(Arc::new(move |url: &str| {
            url.strip_prefix(prefix)
                .map(|rest| rest.split('/').next().unwrap_or_default().to_string())
        }));
        (
            CountingStore::new(Arc::new(InMemory::new()), "memory:///".into()),
            counter,
        )
    }

    fn count(counts: &Counts, class: &str, kind: Kind) -> u64 {
        counts
            .0
            .get(&(class.to_string(), kind))
            .copied()
            .unwrap_or(0)
    }

    #[tokio::test]
    async fn a_listing_counts_one_request_per_page_of_keys() {
        let (store, counter) = counted("memory:///c4/");
        install(counter.clone());
        for i in 0..(2 * LIST_PAGE + 1) {
            store
                .put(&Path::from(format!("c4/log/{i:05}")), "x".into())
                .await
                .unwrap();
        }
        let before = counter.snapshot();
        let all: Vec<_> = store.list(Some(&Path::from("c4/log"))).collect().await;
        assert_eq!(all.len(), 2 * LIST_PAGE + 1);
        let offset = Path::from(format!("c4/log/{:05}", 2 * LIST_PAGE - 1));
        let tail: Vec<_> = store
            .list_with_offset(Some(&Path::from("c4/log")), &offset)
            .collect()
            .await;
        assert_eq!(tail.len(), 1);
        let none: Vec<_> = store.list(Some(&Path::from("c4/empty"))).collect().await;
        assert!(none.is_empty());
        let counts = counter.snapshot().since(&before);
        remove(&counter);
        assert_eq!(count(&counts, "log", Kind::List), 3 + 1);
        assert_eq!(count(&counts, "empty", Kind::List), 1);
    }

    #[tokio::test]
    async fn each_call_is_counted_by_kind_and_class() {
        let (store, counter) = counted("memory:///c1/");
        install(counter.clone());
        let a = Path::from("c1/offsets/1");
        let b = Path::from("c1/_delta_log/00.json");
        store.put(&a, "0123456789".into()).await.unwrap();
        store
            .put_opts(&b, "x".into(), PutOptions::from(PutMode::Create))
            .await
            .unwrap();
        store.get(&a).await.unwrap().bytes().await.unwrap();
        store.get_range(&a, 0..2).await.unwrap();
        store.head(&a).await.unwrap();
        let listed: Vec<_> = store.list(Some(&Path::from("c1/offsets"))).collect().await;
        assert_eq!(listed.len(), 1);
        store.copy(&a, &Path::from("c1/offsets/2")).await.unwrap();
        store
            .copy_if_not_exists(&a, &Path::from("c1/offsets/3"))
            .await
            .unwrap();
        store.delete(&a).await.unwrap();
        let counts = counter.snapshot();
        remove(&counter);
        let expected = [
            ("offsets", Kind::Put, 1),
            ("_delta_log", Kind::PutCreate, 1),
            ("offsets", Kind::Get, 1),
            ("offsets", Kind::GetRange, 1),
            ("offsets", Kind::Head, 1),
            ("offsets", Kind::List, 1),
            ("offsets", Kind::Copy, 1),
            ("offsets", Kind::CopyCreate, 1),
            ("offsets", Kind::Delete, 1),
        ];
        for (class, kind, n) in expected {
            assert_eq!(count(&counts, class, kind), n, "{class} {kind:?}");
        }
        assert_eq!(counts.total(), 9);
        assert_eq!(counts.classes(), vec!["_delta_log", "offsets"]);
    }

    #[tokio::test]
    async fn ranged_reads_count_once_per_coalesced_request() {
        let (store, counter) = counted("memory:///c2/");
        install(counter.clone());
        let path = Path::from("c2/data/part.parquet");
        store.put(&path, vec![7u8; 4 << 20].into()).await.unwrap();
        let before = counter.snapshot();
        // Two ranges next to each other are one request; one far away is another.
        store
            .get_ranges(&path, &[0..10, 10..20, (3 << 20)..(3 << 20) + 10])
            .await
            .unwrap();
        let read = counter.snapshot().since(&before);
        remove(&counter);
        assert_eq!(count(&read, "data", Kind::GetRange), 2);
        assert_eq!(read.total(), 2);
    }

    #[test]
    fn differences_and_sums_keep_only_what_moved() {
        let key = |c: &str, k| (c.to_string(), k);
        let earlier = Counts(BTreeMap::from([(key("a", Kind::Get), 2)]));
        let later = Counts(BTreeMap::from([
            (key("a", Kind::Get), 2),
            (key("b", Kind::List), 3),
        ]));
        let moved = later.since(&earlier);
        assert_eq!(moved.0, BTreeMap::from([(key("b", Kind::List), 3)]));
        let mut sum = moved.clone();
        sum.add(&later);
        assert_eq!(sum.of_kind(Kind::List), 6);
        assert_eq!(sum.of_class("a"), 2);
        assert!(Kind::PutCreate.is_write_class() && !Kind::Head.is_write_class());
    }
}
