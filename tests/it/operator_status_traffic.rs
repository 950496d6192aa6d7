//! What many streams cost the API server in steady state, when nothing
//! changes but time: N simulated workers (each the real `StatusObserver`
//! and `publish_status`, driven by a fake trigger loop that reports a look
//! at the source and a batch on every trigger) and the real controller, in
//! this process, against the test API server, which counts every request
//! and every write. After every stream has its status and the workers
//! have settled, the test counts one window and prints requests and writes
//! per stream per minute, by verb and resource.
//!
//! 10 streams at a 2 s trigger for a 60 s window by default; set
//! `MSSQL_CDC_TRAFFIC_STREAMS`, `MSSQL_CDC_TRAFFIC_TRIGGER` and
//! `MSSQL_CDC_TRAFFIC_WINDOW` (and `MSSQL_CDC_TRAFFIC_SETTLE`, how long
//! the streams may take to settle) for the figures in docs/performance.md
//! (which also says how the "before" column was measured).

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ListParams, PostParams};
use mssql_cdc::domain::{BatchId, FactRow, Lsn};
use mssql_cdc::engine::{Observer, PositionMeasures, SourceCheck};
use mssql_cdc::metrics::Exposition;
use mssql_cdc::operator::children::WorkerDefaults;
use mssql_cdc::operator::controller::{Context, run_controller};
use mssql_cdc::operator::metrics::OperatorMetrics;
use mssql_cdc::operator::worker::{StatusObserver, StatusReports, publish_status};
use mssql_cdc::spec::{CdcStream, Phase};
use mssql_cdc_test_apiserver::traffic::Counts;
use serde::Deserialize;

use crate::support::kube::{KubeEnv, repo_file};
use crate::support::operator::labelled_secret;

const STREAMS_ENV: &str = "MSSQL_CDC_TRAFFIC_STREAMS";
const TRIGGER_ENV: &str = "MSSQL_CDC_TRAFFIC_TRIGGER";
const WINDOW_ENV: &str = "MSSQL_CDC_TRAFFIC_WINDOW";
/// How long every stream may take to reach `Streaming` before the window
/// (default: 2 minutes plus 0.6 s per stream).
const SETTLE_ENV: &str = "MSSQL_CDC_TRAFFIC_SETTLE";

/// The workers' status interval: the default of `mssql-cdc worker`.
const STATUS_INTERVAL: Duration = Duration::from_secs(30);

/// The steady-state target of issue 31, per stream per minute.
const MAX_WRITES: f64 = 3.0;

/// Requests per stream per minute in steady state, at any trigger: two
/// worker writes and one look by the controller (a few requests).
const MAX_REQUESTS: f64 = 8.0;

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn env_duration(name: &str, default: Duration) -> Duration {
    std::env::var(name)
        .ok()
        .and_then(|d| humantime::parse_duration(&d).ok())
        .unwrap_or(default)
}

/// The continuous example's CdcStream as `name`, triggered every `trigger`.
fn stream_named(name: &str, trigger: Duration) -> CdcStream {
    let text = std::fs::read_to_string(repo_file("examples/kubernetes/orders-continuous.yaml"))
        .expect("the example");
    let mut doc: serde_json::Value = serde_yaml::Deserializer::from_str(&text)
        .filter_map(|doc| serde_yaml::Value::deserialize(doc).ok())
        .find(|doc| doc["kind"] == "CdcStream")
        .map(|doc| serde_json::to_value(doc).expect("JSON"))
        .expect("the example has a CdcStream");
    doc["metadata"] = serde_json::json!({"name": name});
    doc["spec"]["appId"] = serde_json::json!(name);
    doc["spec"]["trigger"] = serde_json::json!({
        "processingTime": humantime::format_duration(trigger).to_string()
    });
    serde_json::from_value(doc).expect("a CdcStream")
}

/// What the engine tells the observer on each trigger of a busy, healthy
/// stream: a look at the source, then a batch, with numbers that move.
async fn fake_triggers(
    observer: StatusObserver,
    stream: CdcStream,
    trigger: Duration,
    offset: Duration,
) {
    let lsn: Lsn = "0x0000002A000001F00003".parse().expect("an LSN");
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + offset, trigger);
    for batch in 1_u64.. {
        ticks.tick().await;
        let now = Utc::now();
        let committed = now - chrono::Duration::milliseconds(800);
        let wobble = (batch % 10) as f64 / 10.0;
        let measures = PositionMeasures {
            retention_headroom_hours: Some(71.5 + wobble),
            ingestion_lag_seconds: Some(0.5 + wobble),
            capture_lag_seconds: Some(1.0 + wobble),
        };
        observer.source_checked(&SourceCheck {
            observed_at: now,
            max_lsn: lsn,
            max_commit_ts: Some(committed),
            position: lsn,
            measures,
        });
        let Ok(id) = BatchId::new(batch) else { return };
        let mut row = FactRow::new(
            stream.spec.target.name.clone(),
            stream.spec.app_id.clone(),
            Some(id),
            None,
            now,
        );
        row.rows = Some(batch % 7);
        row.end_lsn = Some(lsn);
        row.end_commit_ts = Some(committed);
        row.retention_headroom_hours = measures.retention_headroom_hours;
        row.ingestion_lag_seconds = measures.ingestion_lag_seconds;
        row.capture_lag_seconds = measures.capture_lag_seconds;
        observer.batch_done(&row);
    }
}

/// The reconciles the controller counted so far.
fn reconciles(metrics: &OperatorMetrics) -> f64 {
    metrics
        .encode()
        .unwrap_or_default()
        .lines()
        .filter(|line| line.starts_with("mssql_cdc_operator_reconciles_total"))
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn operator_status_traffic_grows_with_changes_not_with_triggers() {
    let count = env_count(STREAMS_ENV, 10);
    let trigger = env_duration(TRIGGER_ENV, Duration::from_secs(2));
    let window = env_duration(WINDOW_ENV, Duration::from_secs(60));
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let client = kube.client().await;
    let server = kube.server().expect("the test API server");
    let secret: Secret = serde_yaml::from_str(&labelled_secret("shop-sql", "password: change-me"))
        .expect("a Secret");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create the Secret");
    let streams: Api<CdcStream> = Api::namespaced(client.clone(), "default");
    let started = std::time::Instant::now();
    let created: Vec<CdcStream> = futures::stream::iter(0..count)
        .map(|i| {
            let streams = streams.clone();
            async move {
                let name = format!("orders-{i:04}");
                streams
                    .create(&PostParams::default(), &stream_named(&name, trigger))
                    .await
                    .expect("create a CdcStream")
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    eprintln!("{count} streams created after {:.1?}", started.elapsed());

    let metrics = Arc::new(OperatorMetrics::new());
    let context = Context::new(client.clone(), WorkerDefaults::new("mssql-cdc:bench"), None)
        .with_namespaces(vec!["default".to_string()]);
    let controller = tokio::spawn(run_controller(
        context,
        Arc::clone(&metrics),
        std::future::pending(),
    ));
    let mut workers = Vec::new();
    // Each worker starts from its stream as created (a real one reads it).
    for (i, stream) in created.into_iter().enumerate() {
        let (observer, latest) = StatusObserver::new(&stream);
        let reports = Arc::new(StatusReports::default());
        let (api, reported) = (streams.clone(), stream.clone());
        workers.push(tokio::spawn(async move {
            publish_status(api, &reported, latest, reports, STATUS_INTERVAL).await
        }));
        let offset = trigger.mul_f64(i as f64 / count as f64);
        workers.push(tokio::spawn(fake_triggers(
            observer, stream, trigger, offset,
        )));
    }

    // Every stream streams and has its conditions; then one more status
    // interval, so that the window sees only the steady state.
    let budget = env_duration(
        SETTLE_ENV,
        Duration::from_secs(120) + Duration::from_millis(600) * count as u32,
    );
    tokio::time::timeout(budget, async {
        loop {
            let listed = streams.list(&ListParams::default()).await;
            let settled = listed.is_ok_and(|list| {
                list.items.iter().all(|s| {
                    s.status.as_ref().is_some_and(|status| {
                        status.phase == Some(Phase::Streaming) && !status.conditions.is_empty()
                    })
                })
            });
            if settled {
                return;
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("not every one of {count} streams was Streaming within {budget:?}"));
    eprintln!("every stream Streaming after {:.1?}", started.elapsed());
    tokio::time::sleep(STATUS_INTERVAL + Duration::from_secs(5)).await;

    let traffic = server.traffic();
    let (start, reconciled) = (traffic.snapshot(), reconciles(&metrics));
    tokio::time::sleep(window).await;
    let counts: Counts = traffic.snapshot().since(&start);
    let reconciled = reconciles(&metrics) - reconciled;
    controller.abort();
    for worker in workers {
        worker.abort();
    }

    let per_minute = |n: f64| n / count as f64 / window.as_secs_f64() * 60.0;
    println!(
        "status traffic, {count} streams, trigger {}, status interval {}, window {}: per stream \
         per minute {:.2} requests, {:.2} writes, {:.2} reconciles",
        humantime::format_duration(trigger),
        humantime::format_duration(STATUS_INTERVAL),
        humantime::format_duration(window),
        per_minute(counts.total_requests() as f64),
        per_minute(counts.total_writes() as f64),
        per_minute(reconciled),
    );
    println!("| per stream per minute | count |\n|---|---|");
    for (kind, n) in &counts.requests {
        println!(
            "| {} {} | {:.2} |",
            kind.verb,
            kind.resource,
            per_minute(*n as f64)
        );
    }
    for (resource, n) in &counts.writes {
        println!("| write {resource} | {:.2} |", per_minute(*n as f64));
    }
    let writes = per_minute(counts.total_writes() as f64);
    assert!(
        writes <= MAX_WRITES,
        "{writes:.2} writes per stream per minute, more than {MAX_WRITES}: {counts:?}"
    );
    let requests = per_minute(counts.total_requests() as f64);
    assert!(
        requests <= MAX_REQUESTS,
        "{requests:.2} requests per stream per minute, more than {MAX_REQUESTS}: {counts:?}"
    );
}
