//! The operator with many CdcStreams: every one gets its worker Deployment
//! and a status, and the test prints the operator's peak RSS and how long
//! streams waited for their first status. 20 streams by default so that the
//! suite stays quick; `MSSQL_CDC_OPERATOR_STREAMS=1000` gives the figures in
//! docs/performance.md.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::ResourceExt;
use kube::api::{ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use mssql_cdc::spec::{CdcStream, Phase};
use serde::Deserialize;

use crate::support::kube::{KubeEnv, eventually, repo_file};
use crate::support::operator::{Operator, labelled_secret};

const STREAMS_ENV: &str = "MSSQL_CDC_OPERATOR_STREAMS";

/// The continuous example's CdcStream, renamed to `name`.
fn stream_named(example: &CdcStream, name: &str) -> CdcStream {
    let mut stream = example.clone();
    stream.metadata.name = Some(name.to_string());
    stream.spec.app_id = name.to_string();
    stream
}

fn example_stream() -> CdcStream {
    let text = std::fs::read_to_string(repo_file("examples/kubernetes/orders-continuous.yaml"))
        .expect("the example");
    serde_yaml::Deserializer::from_str(&text)
        .filter_map(|doc| serde_yaml::Value::deserialize(doc).ok())
        .find(|doc| doc["kind"] == "CdcStream")
        .map(|doc| serde_yaml::from_value(doc).expect("a CdcStream"))
        .expect("the example has a CdcStream")
}

/// The `q` quantile (0..=1) of sorted `values`.
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// CPU seconds (user and system) process `pid` used so far.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc stat");
    // Fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: f64 = fields[11..13]
        .iter()
        .map(|f| f.parse::<f64>().expect("utime and stime"))
        .sum();
    ticks / 100.0
}

/// Peak resident memory of process `pid` (`VmHWM`), in MB.
fn peak_rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let kb: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc status");
    kb / 1024.0
}

#[tokio::test]
async fn operator_reconciles_every_one_of_many_streams() {
    let count: usize = std::env::var(STREAMS_ENV)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20);
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let client = kube.client().await;
    let streams: Api<CdcStream> = Api::namespaced(client.clone(), "default");
    // Without leader election: a short Lease would measure how well the
    // test API server answers renewals under load, not the operator.
    let operator = Operator::alone(&kube, Path::new(env!("CARGO_BIN_EXE_mssql-cdc")));
    let pid = operator.process.id().expect("the operator runs");
    eventually("the operator to serve its metrics", || async {
        operator
            .sample("mssql_cdc_operator_leader")
            .await
            .filter(|v| *v == 1.0)
    })
    .await;

    // The first status of each stream, as the API server's watch shows it.
    let (first_status, mut statuses) = tokio::sync::mpsc::unbounded_channel();
    let watch = watcher(streams.clone(), watcher::Config::default())
        .applied_objects()
        .try_for_each(move |stream| {
            if stream.status.as_ref().and_then(|s| s.phase).is_some() {
                let _ = first_status.send((stream.name_any(), Instant::now()));
            }
            futures::future::ready(Ok(()))
        });
    let watch = tokio::spawn(watch);

    let example = example_stream();
    // The Secret every stream names, labelled for them (the example's).
    let secret = labelled_secret("shop-sql", "password: change-me");
    kube.kubectl_ok(&["apply", "-f", &kube.write("secret.yaml", &secret)])
        .await;
    let started = Instant::now();
    let created: HashMap<String, Instant> = futures::stream::iter(0..count)
        .map(|i| {
            let stream = stream_named(&example, &format!("orders-{i:04}"));
            let streams = streams.clone();
            async move {
                streams
                    .create(&PostParams::default(), &stream)
                    .await
                    .expect("create a CdcStream");
                (stream.name_any(), Instant::now())
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let all_created = started.elapsed();

    let budget = Duration::from_secs(60) + Duration::from_millis(600) * count as u32;
    let mut reconciled: HashMap<String, Instant> = HashMap::new();
    tokio::time::timeout(budget, async {
        while reconciled.len() < count {
            let Some((name, at)) = statuses.recv().await else {
                panic!("the watch of CdcStreams ended");
            };
            reconciled.entry(name).or_insert(at);
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "only {} of {count} streams got a status within {budget:?}",
            reconciled.len()
        )
    });
    let all_reconciled = started.elapsed();
    watch.abort();
    let peak_mb = peak_rss_mb(pid);
    let (operator_cpu, test_cpu) = (cpu_seconds(&pid.to_string()), cpu_seconds("self"));

    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    let workers = deployments
        .list(&ListParams::default())
        .await
        .expect("list Deployments")
        .items;
    assert_eq!(workers.len(), count, "one worker Deployment per stream");
    let pending = streams
        .list(&ListParams::default())
        .await
        .expect("list CdcStreams")
        .items
        .iter()
        .filter(|s| s.status.as_ref().and_then(|s| s.phase) == Some(Phase::Pending))
        .count();
    assert_eq!(pending, count, "every stream is Pending (no worker runs)");

    let mut latencies: Vec<Duration> = reconciled
        .iter()
        .map(|(name, at)| at.duration_since(created[name]))
        .collect();
    latencies.sort();
    let reconciles = operator
        .sample(r#"mssql_cdc_operator_reconciles_total{result="success"}"#)
        .await
        .unwrap_or_default();
    let seconds = operator
        .sample("mssql_cdc_operator_reconcile_duration_seconds_sum")
        .await
        .unwrap_or_default();
    println!(
        "operator with {count} CdcStreams: created in {all_created:.1?}, all reconciled after \
         {all_reconciled:.1?}; creation to first status p50 {:.0?}, p95 {:.0?}, max {:.0?}; \
         {reconciles} reconciles, {:.1} ms each on average; operator peak RSS {peak_mb:.1} MB; \
         CPU: operator {operator_cpu:.1} s, test API server and test {test_cpu:.1} s",
        quantile(&latencies, 0.5),
        quantile(&latencies, 0.95),
        quantile(&latencies, 1.0),
        seconds * 1000.0 / reconciles.max(1.0),
    );
}
