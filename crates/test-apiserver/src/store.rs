//! Versioned in-memory object store with a bounded event history and watch
//! fan-out. One global resourceVersion counter orders every write, like etcd's
//! revision, so watches can resume from any retained version and get 410 Gone
//! for compacted ones.

use crate::error::{ApiError, ApiResult};
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::broadcast;

/// Identifies a stored collection: API group and plural resource name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gr {
    pub group: String,
    pub plural: String,
}

impl Gr {
    /// Builds a group/resource pair.
    pub fn new(group: &str, plural: &str) -> Self {
        Self {
            group: group.into(),
            plural: plural.into(),
        }
    }
}

/// Watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    /// The wire name used in watch streams.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change to one object.
#[derive(Debug, Clone)]
pub struct Event {
    pub rv: u64,
    pub gr: Gr,
    pub namespace: String,
    pub kind: EventType,
    pub object: Arc<Value>,
}

/// What a mutation closure decided.
pub enum Mutation {
    /// Store this object (create or replace).
    Put(Value),
    /// Remove the object.
    Delete,
    /// Leave everything as it is.
    Keep,
}

/// Retained events after a version plus the live receiver.
pub type WatchStart = (Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>);

type Objects = BTreeMap<(String, String), Value>;

struct Inner {
    objects: BTreeMap<Gr, Objects>,
    rv: u64,
    history: VecDeque<Arc<Event>>,
    /// Smallest resourceVersion a watch may start from.
    oldest: u64,
}

/// The shared store.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Mutex<Inner>>,
    tx: broadcast::Sender<Arc<Event>>,
    capacity: usize,
    traffic: Option<crate::traffic::Traffic>,
}

impl Store {
    /// A store retaining at most `capacity` history events.
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(4096);
        Self {
            inner: Arc::new(Mutex::new(Inner {
                objects: BTreeMap::new(),
                rv: 1,
                history: VecDeque::new(),
                oldest: 1,
            })),
            tx,
            capacity,
            traffic: None,
        }
    }

    /// The store, counting each change it stores in `traffic`.
    pub fn counting(mut self, traffic: crate::traffic::Traffic) -> Self {
        self.traffic = Some(traffic);
        self
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Reads one object.
    pub fn get(&self, gr: &Gr, ns: &str, name: &str) -> Option<Value> {
        self.lock()
            .objects
            .get(gr)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
    }

    /// Lists a collection (optionally one namespace) with the resourceVersion of the snapshot.
    pub fn list(&self, gr: &Gr, ns: Option<&str>) -> (Vec<Value>, u64) {
        let inner = self.lock();
        let items = inner
            .objects
            .get(gr)
            .map(|m| {
                m.iter()
                    .filter(|((n, _), _)| ns.is_none_or(|x| x == n))
                    .map(|(_, v)| v.clone())
                    .collect()
            })
            .unwrap_or_default();
        (items, inner.rv)
    }

    /// Every object of every collection as `{"metadata": ...}` with only
    /// the fields garbage collection reads (who owns what, what is being
    /// deleted): it sweeps after every write, and copying whole objects
    /// made each write cost as much as the store's size.
    pub fn list_all_metadata(&self) -> Vec<(Gr, Value)> {
        const FIELDS: [&str; 7] = [
            "uid",
            "name",
            "namespace",
            "resourceVersion",
            "ownerReferences",
            "deletionTimestamp",
            "finalizers",
        ];
        let inner = self.lock();
        inner
            .objects
            .iter()
            .flat_map(|(gr, m)| {
                m.values().map(move |v| {
                    let mut kept = serde_json::Map::new();
                    if let Some(meta) = v.get("metadata").and_then(Value::as_object) {
                        for field in FIELDS {
                            if let Some(value) = meta.get(field) {
                                kept.insert(field.to_string(), value.clone());
                            }
                        }
                    }
                    (gr.clone(), json!({ "metadata": kept }))
                })
            })
            .collect()
    }

    /// Atomically reads, decides and writes one object. The closure sees the
    /// current object (if any) and returns the mutation; the store stamps
    /// `metadata.resourceVersion` and emits the watch event. Returns the stored
    /// (or deleted) object, or `None` when nothing changed and nothing existed.
    pub fn mutate<F>(&self, gr: &Gr, ns: &str, name: &str, f: F) -> ApiResult<Option<Value>>
    where
        F: FnOnce(Option<&Value>) -> ApiResult<Mutation>,
    {
        let mut inner = self.lock();
        let key = (ns.to_string(), name.to_string());
        let old = inner.objects.get(gr).and_then(|m| m.get(&key));
        let decision = f(old)?;
        let existed = old.is_some();
        let (kind, obj) = match decision {
            Mutation::Keep => return Ok(old.cloned()),
            Mutation::Put(obj) => (
                if existed {
                    EventType::Modified
                } else {
                    EventType::Added
                },
                obj,
            ),
            Mutation::Delete => match inner.objects.get_mut(gr).and_then(|m| m.remove(&key)) {
                Some(o) => (EventType::Deleted, o),
                None => return Ok(None),
            },
        };
        inner.rv += 1;
        if let Some(traffic) = &self.traffic {
            traffic.write(&gr.plural);
        }
        let rv = inner.rv;
        let mut obj = obj;
        if let Some(md) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            md.insert("resourceVersion".into(), json!(rv.to_string()));
        }
        if kind != EventType::Deleted {
            inner
                .objects
                .entry(gr.clone())
                .or_default()
                .insert(key, obj.clone());
        }
        let ev = Arc::new(Event {
            rv,
            gr: gr.clone(),
            namespace: ns.to_string(),
            kind,
            object: Arc::new(obj.clone()),
        });
        inner.history.push_back(ev.clone());
        while inner.history.len() > self.capacity {
            if let Some(e) = inner.history.pop_front() {
                inner.oldest = e.rv + 1;
            }
        }
        // Sending under the lock keeps history and live stream gap-free.
        let _ = self.tx.send(ev);
        Ok(Some(obj))
    }

    /// Events after `rv` plus a live receiver; 410 Gone if `rv` was compacted.
    pub fn watch_from(&self, rv: u64) -> ApiResult<WatchStart> {
        let inner = self.lock();
        if rv + 1 < inner.oldest {
            return Err(ApiError::Gone(format!(
                "too old resource version: {rv} ({})",
                inner.oldest
            )));
        }
        let past = inner
            .history
            .iter()
            .filter(|e| e.rv > rv)
            .cloned()
            .collect();
        Ok((past, self.tx.subscribe()))
    }

    /// Live receiver of all future events (for in-process controllers).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    /// Whether `rv` can still be resumed from.
    pub fn is_retained(&self, rv: u64) -> bool {
        rv + 1 >= self.lock().oldest
    }

    /// Drops the whole event history, as etcd compaction does: watches from any
    /// older resourceVersion get 410 Gone afterwards.
    pub fn compact(&self) {
        let mut inner = self.lock();
        // Advance past every version a client may hold, as writes made while
        // clients were away would, so resuming from any of them is too old.
        inner.rv += 1;
        inner.history.clear();
        inner.oldest = inner.rv + 1;
    }
}
