//! Watch streams (`?watch=true`): newline-delimited JSON events from a
//! resourceVersion, with BOOKMARKs, timeouts, and 410 Expired as an ERROR
//! event (what client-go and kube-rs react to by re-listing).

use crate::error::ApiError;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::state::{State, Target};
use crate::store::{Event, EventType};
use crate::table;
use crate::write::view;
use bytes::Bytes;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, watch};

/// Parameters of one watch request.
pub struct WatchParams {
    pub rv: Option<u64>,
    pub labels: Option<LabelSelector>,
    pub fields: Option<FieldSelector>,
    pub bookmarks: bool,
    pub timeout: Duration,
    pub table: bool,
}

struct Sink {
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    t: Target,
    table: bool,
    columns_sent: bool,
    st: State,
}

impl Sink {
    async fn send(&mut self, ty: &str, obj: Value) -> bool {
        let obj = if self.table && ty != "ERROR" && ty != "BOOKMARK" {
            let mut tb = table::table(
                &self.t.rt,
                &self.t.version,
                &[obj],
                "",
                None,
                self.st.clock.now(),
            );
            if self.columns_sent
                && let Some(m) = tb.as_object_mut()
            {
                m.remove("columnDefinitions");
            }
            self.columns_sent = true;
            tb
        } else {
            obj
        };
        let mut line = json!({ "type": ty, "object": obj }).to_string();
        line.push('\n');
        self.tx.send(Ok(Bytes::from(line))).await.is_ok()
    }
}

fn matches(t: &Target, p: &WatchParams, e: &Event) -> bool {
    e.gr == t.gr()
        && (t.namespace.is_empty() || e.namespace == t.namespace)
        && p.labels.as_ref().is_none_or(|s| s.matches(&e.object))
        && p.fields.as_ref().is_none_or(|s| s.matches(&e.object))
}

/// Starts a watch; returns the receiving end of the response body.
pub fn start(
    st: State,
    t: Target,
    p: WatchParams,
    mut shutdown: watch::Receiver<bool>,
) -> mpsc::Receiver<Result<Bytes, std::io::Error>> {
    let (tx, rx) = mpsc::channel(64);
    let mut p = p;
    p.fields = p
        .fields
        .as_ref()
        .map(|s| crate::events::stored_fields(&t, s));
    tokio::spawn(async move {
        let mut sink = Sink {
            tx,
            t: t.clone(),
            table: p.table,
            columns_sent: false,
            st: st.clone(),
        };
        // rv unset or "0": synthetic ADDED events for the current state first.
        let (initial, from) = match p.rv {
            Some(rv) if rv > 0 => (vec![], rv),
            _ => {
                let ns = (!t.namespace.is_empty()).then_some(t.namespace.as_str());
                let (items, rv) = st.store.list(&t.gr(), ns);
                let items: Vec<Value> = items
                    .into_iter()
                    .filter(|o| p.labels.as_ref().is_none_or(|s| s.matches(o)))
                    .filter(|o| p.fields.as_ref().is_none_or(|s| s.matches(o)))
                    .collect();
                (items, rv)
            }
        };
        let (past, mut rx) = match st.store.watch_from(from) {
            Ok(x) => x,
            Err(e @ ApiError::Gone(_)) => {
                let _ = sink.send("ERROR", e.status()).await;
                return;
            }
            Err(e) => {
                let _ = sink.send("ERROR", e.status()).await;
                return;
            }
        };
        for o in initial {
            if !sink.send("ADDED", view(&t, o)).await {
                return;
            }
        }
        let mut last = from;
        for e in past {
            last = e.rv;
            if matches(&t, &p, &e)
                && !sink
                    .send(e.kind.as_str(), view(&t, (*e.object).clone()))
                    .await
            {
                return;
            }
        }
        let deadline = tokio::time::sleep(p.timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(st.bookmark_interval);
        tick.tick().await;
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(e) => {
                        last = e.rv;
                        if matches(&t, &p, &e) && !send_event(&mut sink, &t, &e).await {
                            return;
                        }
                    }
                    // A lagging watcher is dropped; the client resumes from its last version.
                    Err(broadcast::error::RecvError::Lagged(_)) | Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = tick.tick(), if p.bookmarks => {
                    let bm = json!({
                        "kind": t.rt.kind,
                        "apiVersion": t.api_version(),
                        "metadata": { "resourceVersion": last.to_string() },
                    });
                    if !sink.send("BOOKMARK", bm).await {
                        return;
                    }
                }
                _ = &mut deadline => return,
                _ = shutdown.changed() => return,
            }
        }
    });
    rx
}

async fn send_event(sink: &mut Sink, t: &Target, e: &Arc<Event>) -> bool {
    let ty = match e.kind {
        EventType::Added => "ADDED",
        EventType::Modified => "MODIFIED",
        EventType::Deleted => "DELETED",
    };
    sink.send(ty, view(t, (*e.object).clone())).await
}
