//! kube-rs watches: raw watch with bookmarks and 410, and a reflector that
//! survives a server restart by re-listing.

use crate::common::{self, eventually, within};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use mssql_cdc_test_apiserver::ServerOptions;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({ "metadata": { "name": name }, "data": { "a": "b" } }))
        .expect("cm")
}

fn fast_bookmarks() -> ServerOptions {
    ServerOptions {
        bookmark_interval: Duration::from_millis(200),
        ..Default::default()
    }
}

#[tokio::test]
async fn raw_watch_events_bookmarks_and_gone() {
    let env = common::start_with(fast_bookmarks()).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    let first = cms
        .create(&PostParams::default(), &cm("w1"))
        .await
        .expect("create");
    let rv = first.metadata.resource_version.clone().expect("rv");

    let mut stream = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    cms.create(&PostParams::default(), &cm("w2"))
        .await
        .expect("create");
    let mut saw_added = false;
    let mut saw_bookmark = false;
    within("ADDED and BOOKMARK", async {
        while !(saw_added && saw_bookmark) {
            match stream
                .try_next()
                .await
                .expect("watch stream")
                .expect("stream ended")
            {
                WatchEvent::Added(c) if c.metadata.name.as_deref() == Some("w2") => {
                    saw_added = true
                }
                WatchEvent::Bookmark(_) => saw_bookmark = true,
                _ => {}
            }
        }
    })
    .await;

    env.server.compact();
    let mut stale = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    let ev = within("410", stale.try_next())
        .await
        .expect("stream")
        .expect("event");
    match ev {
        WatchEvent::Error(e) => assert_eq!(e.code, 410),
        other => panic!("expected 410 ERROR event, got {other:?}"),
    }
}

#[tokio::test]
async fn reflector_relists_after_restart() {
    let mut env = common::start_with(fast_bookmarks()).await;
    let client = env.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &cm("before"))
        .await
        .expect("create");

    let (reader, writer) = reflector::store::<ConfigMap>();
    let inits = Arc::new(AtomicUsize::new(0));
    let counter = inits.clone();
    let stream = watcher(cms.clone(), watcher::Config::default())
        .default_backoff()
        .inspect(move |e| {
            if matches!(e, Ok(watcher::Event::Init)) {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        })
        .reflect(writer)
        .applied_objects();
    let task = tokio::spawn(async move {
        futures::pin_mut!(stream);
        while stream.next().await.is_some() {}
    });
    within("initial sync", reader.wait_until_ready())
        .await
        .expect("ready");
    let has = |name: &'static str| {
        let reader = reader.clone();
        move || {
            let found = reader
                .state()
                .iter()
                .any(|c| c.metadata.name.as_deref() == Some(name));
            async move { found.then_some(()) }
        }
    };
    eventually("reflector has 'before'", has("before")).await;

    env.server.restart().await.expect("restart");
    cms.create(&PostParams::default(), &cm("after"))
        .await
        .expect("create after restart");
    eventually("reflector has 'after'", has("after")).await;
    let inits = inits.clone();
    eventually("re-list after 410", move || {
        let n = inits.load(Ordering::SeqCst);
        async move { (n >= 2).then_some(()) }
    })
    .await;
    task.abort();
}
