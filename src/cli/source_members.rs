//! Which CdcStreams a source's worker runs, and the watch that tells it
//! when that changed: a stream added to or removed from the source, or a
//! stream's spec edited. The worker then lets its tables finish their
//! current batches and starts them again from their checkpoints, in the
//! same process: no pod restart, no table's position touched.

use std::collections::BTreeMap;

use futures::StreamExt;
use kube::runtime::watcher;
use kube::runtime::watcher::Event;
use kube::{Api, ResourceExt};
use mssql_cdc::spec::CdcStream;
use tokio_util::sync::CancellationToken;

/// The streams run, by name, with the generation each was started at.
pub type Members = BTreeMap<String, Option<i64>>;

/// The streams of `streams` that name the source `source`.
pub fn members(streams: &[CdcStream], source: &str) -> Members {
    streams
        .iter()
        .filter(|s| names(s, source))
        .map(|s| (s.name_any(), s.metadata.generation))
        .collect()
}

fn names(stream: &CdcStream, source: &str) -> bool {
    stream
        .spec
        .source_ref
        .as_ref()
        .is_some_and(|r| r.name == source)
}

/// Whether `event` changes what a worker running `members` of `source`
/// should run.
pub fn changes(members: &Members, source: &str, event: &Event<CdcStream>) -> bool {
    match event {
        Event::Apply(stream) | Event::InitApply(stream) => {
            let started = members.get(&stream.name_any());
            match (names(stream, source), started) {
                (true, Some(generation)) => *generation != stream.metadata.generation,
                (true, None) => true,
                (false, Some(_)) => true,
                (false, None) => false,
            }
        }
        Event::Delete(stream) => members.contains_key(&stream.name_any()),
        Event::Init | Event::InitDone => false,
    }
}

/// Watches the namespace's streams until `restart` is cancelled, and
/// cancels it when the source's streams differ from `members`. A watch
/// error is retried with kube's backoff; it never stops the tables.
pub async fn watch(
    api: Api<CdcStream>,
    source: String,
    members: Members,
    restart: CancellationToken,
) {
    let mut events = watcher(api, watcher::Config::default()).boxed();
    loop {
        tokio::select! {
            () = restart.cancelled() => return,
            next = events.next() => match next {
                Some(Ok(event)) if changes(&members, &source, &event) => {
                    tracing::info!(source = %source, "the source's streams changed: starting its tables again");
                    restart.cancel();
                    return;
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => {
                    tracing::warn!(source = %source, "watching the source's CdcStreams: {error}; retrying");
                    tokio::select! {
                        () = restart.cancelled() => return,
                        () = tokio::time::sleep(std::time::Duration::from_secs(5)) => {}
                    }
                }
                None => return,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mssql_cdc::spec::SourceRef;

    /// A stream of the shipped example, renamed, in `source` or not.
    fn of(name: &str, source: Option<&str>, generation: i64) -> CdcStream {
        let example = include_str!("../../examples/kubernetes/orders-continuous.yaml");
        let mut s: CdcStream = serde_yaml::Deserializer::from_str(example)
            .filter_map(|doc| serde::Deserialize::deserialize(doc).ok())
            .find(|s: &CdcStream| !s.spec.source.table.is_empty())
            .expect("the example holds a CdcStream");
        s.metadata.name = Some(name.into());
        s.metadata.generation = Some(generation);
        s.spec.source_ref = source.map(|n| SourceRef { name: n.into() });
        s
    }

    #[test]
    fn only_a_change_to_the_sources_own_streams_starts_its_tables_again() {
        let running = members(
            &[
                of("orders", Some("sales"), 1),
                of("other", Some("hr"), 1),
                of("solo", None, 1),
            ],
            "sales",
        );
        assert_eq!(running.keys().collect::<Vec<_>>(), ["orders"]);
        let cases = [
            (
                Event::Apply(of("orders", Some("sales"), 1)),
                false,
                "a status update",
            ),
            (
                Event::Apply(of("orders", Some("sales"), 2)),
                true,
                "its spec edited",
            ),
            (
                Event::Apply(of("payments", Some("sales"), 1)),
                true,
                "a stream added",
            ),
            (
                Event::Apply(of("orders", None, 2)),
                true,
                "a stream moved out",
            ),
            (
                Event::Delete(of("orders", Some("sales"), 1)),
                true,
                "a stream deleted",
            ),
            (
                Event::Apply(of("other", Some("hr"), 3)),
                false,
                "another source's stream",
            ),
            (
                Event::InitApply(of("solo", None, 1)),
                false,
                "a stream of its own",
            ),
        ];
        for (event, restarts, what) in cases {
            assert_eq!(changes(&running, "sales", &event), restarts, "{what}");
        }
    }
}
