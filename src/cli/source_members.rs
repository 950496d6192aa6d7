//! Which CdcStreams a source's worker runs, and the watch that tells it
//! when that changed: a stream added to or removed from the source, or a
//! stream's spec edited. The worker then starts the added stream's table,
//! stops the removed one's, and starts an edited one's again once it has
//! finished its batch; the other tables run on, untouched.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use kube::runtime::watcher;
use kube::runtime::watcher::Event;
use kube::{Api, ResourceExt};
use mssql_cdc::spec::{CdcSource, CdcStream, Membership, source_membership};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The streams run, by name, with the generation each was started at.
pub type Members = BTreeMap<String, Option<i64>>;

/// The streams of `streams` that are tables of `source`.
pub fn members(streams: &[CdcStream], source: &CdcSource) -> Members {
    streams
        .iter()
        .filter(|s| is_member(s, source))
        .map(|s| (s.name_any(), s.metadata.generation))
        .collect()
}

/// Whether the worker runs `stream` as a table of `source`: it names the
/// source and matches its `spec.members` (a stream refused says why in
/// its status, which the operator writes; the worker leaves it alone).
pub fn is_member(stream: &CdcStream, source: &CdcSource) -> bool {
    matches!(source_membership(source, stream), Membership::Member)
}

/// Whether `event` changes what a worker running `members` of `source`
/// should run. A watch that starts over (`InitDone`) counts as a change:
/// a stream deleted while it was not watching sends no event. A label
/// edit that takes a stream into or out of `spec.members` is one too.
pub fn changes(members: &Members, source: &CdcSource, event: &Event<CdcStream>) -> bool {
    match event {
        Event::Apply(stream) | Event::InitApply(stream) => {
            let started = members.get(&stream.name_any());
            match (is_member(stream, source), started) {
                (true, Some(generation)) => *generation != stream.metadata.generation,
                (true, None) => true,
                (false, Some(_)) => true,
                (false, None) => false,
            }
        }
        Event::Delete(stream) => members.contains_key(&stream.name_any()),
        Event::InitDone => true,
        Event::Init => false,
    }
}

/// How the source's streams moved from `running` to `now`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Moves {
    /// Streams to start.
    pub added: Vec<String>,
    /// Streams to stop.
    pub removed: Vec<String>,
    /// Streams whose spec changed: stopped, then started again.
    pub edited: Vec<String>,
}

/// What changed between the streams `running` and the streams `now`.
pub fn moves(running: &Members, now: &Members) -> Moves {
    let mut moves = Moves::default();
    for (name, generation) in now {
        match running.get(name) {
            None => moves.added.push(name.clone()),
            Some(started) if started != generation => moves.edited.push(name.clone()),
            Some(_) => {}
        }
    }
    moves.removed = running
        .keys()
        .filter(|name| !now.contains_key(*name))
        .cloned()
        .collect();
    moves
}

/// Watches the namespace's streams until `stop`, and says on `changed`
/// when the source's streams differ from `members` (which the worker
/// keeps up to date). A watch error is retried with kube's backoff; it
/// never stops the tables.
pub async fn watch(
    api: Api<CdcStream>,
    source: CdcSource,
    members: Arc<Mutex<Members>>,
    changed: mpsc::UnboundedSender<()>,
    stop: CancellationToken,
) {
    let mut events = watcher(api, watcher::Config::default()).boxed();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            next = events.next() => match next {
                Some(Ok(event)) => {
                    let news = {
                        let members = members.lock().unwrap_or_else(PoisonError::into_inner);
                        changes(&members, &source, &event)
                    };
                    if news && changed.send(()).is_err() {
                        return;
                    }
                }
                Some(Err(error)) => {
                    tracing::warn!(source = %source.name_any(), "watching the source's CdcStreams: {error}; retrying");
                    tokio::select! {
                        () = stop.cancelled() => return,
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
    use std::collections::BTreeMap;

    /// The shipped source example, named `name`, admitting `members`.
    fn source(
        name: &str,
        members: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    ) -> CdcSource {
        let example = include_str!("../../examples/kubernetes/shop-source.yaml");
        let mut source: CdcSource = serde_yaml::Deserializer::from_str(example)
            .filter_map(|doc| serde::Deserialize::deserialize(doc).ok())
            .find(|s: &CdcSource| s.spec.connection.database == "shop")
            .expect("the example holds a CdcSource");
        source.metadata.name = Some(name.into());
        source.spec.members = members;
        source
    }

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
    fn only_a_change_to_the_sources_own_streams_is_news() {
        let running = members(
            &[
                of("orders", Some("sales"), 1),
                of("other", Some("hr"), 1),
                of("solo", None, 1),
            ],
            &source("sales", None),
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
        let sales = source("sales", None);
        for (event, restarts, what) in cases {
            assert_eq!(changes(&running, &sales, &event), restarts, "{what}");
        }
        assert!(
            changes(&running, &sales, &Event::InitDone),
            "a watch started over looks again"
        );
    }

    #[test]
    fn a_source_with_members_runs_only_the_streams_its_selector_admits() {
        let sales = source(
            "sales",
            Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                    match_labels: Some(BTreeMap::from([("team".into(), "shop".into())])),
                    ..Default::default()
                },
            ),
        );
        let labelled = |name: &str, team: &str, generation: i64| {
            let mut s = of(name, Some("sales"), generation);
            s.metadata.labels = Some(BTreeMap::from([("team".into(), team.into())]));
            s
        };
        let running = members(
            &[
                labelled("orders", "shop", 1),
                labelled("payroll", "hr", 1),
                of("unlabelled", Some("sales"), 1),
            ],
            &sales,
        );
        assert_eq!(running.keys().collect::<Vec<_>>(), ["orders"]);
        assert!(
            changes(&running, &sales, &Event::Apply(labelled("orders", "hr", 1))),
            "a member relabelled out of the selector is stopped"
        );
        assert!(
            !changes(
                &running,
                &sales,
                &Event::Apply(labelled("payroll", "hr", 2))
            ),
            "a refused stream's edits are none of the worker's business"
        );
        assert!(
            changes(
                &running,
                &sales,
                &Event::Apply(labelled("payroll", "shop", 1))
            ),
            "a stream relabelled into the selector joins"
        );
    }

    #[test]
    fn moves_name_the_streams_to_start_stop_and_start_again() {
        let running = members(
            &[
                of("orders", Some("sales"), 1),
                of("items", Some("sales"), 1),
                of("notes", Some("sales"), 4),
            ],
            &source("sales", None),
        );
        let now = members(
            &[
                of("orders", Some("sales"), 1),
                of("items", Some("sales"), 2),
                of("payments", Some("sales"), 1),
                of("notes", None, 5),
            ],
            &source("sales", None),
        );
        assert_eq!(
            moves(&running, &now),
            Moves {
                added: vec!["payments".into()],
                removed: vec!["notes".into()],
                edited: vec!["items".into()],
            }
        );
        assert_eq!(moves(&now, &now), Moves::default(), "nothing moved");
    }
}
