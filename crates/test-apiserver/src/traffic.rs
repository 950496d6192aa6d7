//! What clients asked of the server and what it wrote, for tests and
//! benchmarks that measure API traffic: every request counted by verb and
//! resource (`GET cdcstreams`, `PATCH cdcstreams/status`, `WATCH pods`),
//! every stored change by resource. A write is what etcd would write: a
//! new resourceVersion. A no-op write (an apply that changes nothing) is
//! a request but no write.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// A request's verb and what it addressed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestKind {
    /// `GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`, `DELETE`.
    pub verb: String,
    /// The plural resource and subresource (`cdcstreams/status`), or
    /// `discovery` for everything that is not a resource path.
    pub resource: String,
}

/// Counts since the server started (or since [`Traffic::reset`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests by kind.
    pub requests: BTreeMap<RequestKind, u64>,
    /// Stored changes by plural resource.
    pub writes: BTreeMap<String, u64>,
}

impl Counts {
    /// Every request.
    pub fn total_requests(&self) -> u64 {
        self.requests.values().sum()
    }

    /// Every stored change.
    pub fn total_writes(&self) -> u64 {
        self.writes.values().sum()
    }

    /// Requests whose verb is `verb`.
    pub fn requests_of(&self, verb: &str) -> u64 {
        self.requests
            .iter()
            .filter(|(k, _)| k.verb == verb)
            .map(|(_, n)| n)
            .sum()
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            requests: minus(&self.requests, &earlier.requests),
            writes: minus(&self.writes, &earlier.writes),
        }
    }
}

/// Each count of `now` less the same key's in `then`, zeros left out.
fn minus<K: Ord + Clone>(now: &BTreeMap<K, u64>, then: &BTreeMap<K, u64>) -> BTreeMap<K, u64> {
    now.iter()
        .map(|(k, n)| {
            (
                k.clone(),
                n.saturating_sub(then.get(k).copied().unwrap_or(0)),
            )
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// The server's counters, shared by the HTTP layer and the store.
#[derive(Debug, Clone, Default)]
pub struct Traffic {
    counts: Arc<Mutex<Counts>>,
}

impl Traffic {
    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one request of `method` on `path` (`watch` when its query asks to watch).
    pub fn request(&self, method: &str, path: &str, watch: bool) {
        let kind = classify(method, path, watch);
        *self.lock().requests.entry(kind).or_default() += 1;
    }

    /// Counts one stored change of `plural`.
    pub fn write(&self, plural: &str) {
        *self.lock().writes.entry(plural.to_string()).or_default() += 1;
    }

    /// The counts now.
    pub fn snapshot(&self) -> Counts {
        self.lock().clone()
    }

    /// Starts counting from zero.
    pub fn reset(&self) {
        *self.lock() = Counts::default();
    }
}

/// The verb (GET of a collection is LIST) and resource of a request.
fn classify(method: &str, path: &str, watch: bool) -> RequestKind {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest = match segs.as_slice() {
        ["api", "v1", rest @ ..] => rest,
        ["apis", _, _, rest @ ..] => rest,
        _ => &[],
    };
    let rest = match rest {
        ["namespaces", _, more @ ..] if !more.is_empty() => more,
        other => other,
    };
    let (resource, named) = match rest {
        [] => ("discovery".to_string(), false),
        [plural] => (plural.to_string(), false),
        [plural, _name] => (plural.to_string(), true),
        [plural, _name, sub, ..] => (format!("{plural}/{sub}"), true),
    };
    let verb = match method {
        "GET" if watch => "WATCH".to_string(),
        "GET" if !named && resource != "discovery" => "LIST".to_string(),
        other => other.to_string(),
    };
    RequestKind { verb, resource }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_verb_and_resource() {
        let cases = [
            (
                "GET",
                "/apis/mssql-cdc.io/v1alpha1/namespaces/shop/cdcstreams/orders",
                false,
                "GET",
                "cdcstreams",
            ),
            (
                "GET",
                "/apis/mssql-cdc.io/v1alpha1/cdcstreams",
                false,
                "LIST",
                "cdcstreams",
            ),
            (
                "GET",
                "/apis/mssql-cdc.io/v1alpha1/namespaces/shop/cdcstreams",
                true,
                "WATCH",
                "cdcstreams",
            ),
            (
                "PATCH",
                "/apis/mssql-cdc.io/v1alpha1/namespaces/shop/cdcstreams/orders/status",
                false,
                "PATCH",
                "cdcstreams/status",
            ),
            ("GET", "/api/v1/namespaces/shop/pods", false, "LIST", "pods"),
            ("GET", "/api/v1/namespaces/shop", false, "GET", "namespaces"),
            ("GET", "/apis", false, "GET", "discovery"),
        ];
        for (method, path, watch, verb, resource) in cases {
            let kind = classify(method, path, watch);
            assert_eq!(
                (kind.verb.as_str(), kind.resource.as_str()),
                (verb, resource),
                "{path}"
            );
        }
        let traffic = Traffic::default();
        traffic.request("PATCH", "/api/v1/namespaces/a/pods/p", false);
        let before = traffic.snapshot();
        traffic.request("PATCH", "/api/v1/namespaces/a/pods/p", false);
        traffic.write("pods");
        let since = traffic.snapshot().since(&before);
        assert_eq!((since.total_requests(), since.total_writes()), (1, 1));
        assert_eq!(since.requests_of("PATCH"), 1);
    }
}
