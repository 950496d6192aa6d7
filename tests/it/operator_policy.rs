//! The operator's policy on what a stream may make its worker pod read or
//! mount, with the operator as the chart deploys it: the whole chart
//! rendered by Helm (its default policy) and applied with kubectl to the
//! test API server, whose harness kubelet runs the operator in its own pod
//! as the chart's operator ServiceAccount, under the chart's RBAC.
//!
//! - a stream naming a Secret without the label (`mssql-cdc.io/allow=true`),
//!   a Secret that does not exist, a `hostPath` volume, an `env` variable
//!   or `envFrom` gets no worker: Ready=False and phase Failed with the
//!   reason and the field, and a Warning Event; a stream naming a labelled
//!   Secret gets its worker (the chart's RBAC lets the operator read the
//!   Secrets' labels, as metadata);
//! - labelling the Secret lets the refused stream run; taking the label off
//!   removes a worker that ran (each at the stream's next reconcile, which
//!   the test brings on by annotating the stream rather than waiting for
//!   the resync);
//! - a Deployment or CronJob of the stream's name that the stream does not
//!   own is left alone (no ownerReference, none of its fields taken): the
//!   stream is refused with ChildNotOwned;
//! - without the chart's `get` on Secrets the operator runs no worker and
//!   says (ReconcileError) that it may not read the Secret's labels.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::CronJob;
use kube::Api;
use mssql_cdc::spec::{CdcStream, Phase};

use crate::support::chart::ChartRelease;
use crate::support::kube::{KubeEnv, eventually};
use crate::support::operator::{
    chart_values, condition, labelled_secret, once_warned, status_when, stream_manifest, wait_gone,
};

/// The chart installed with its default policy (the operator watching the
/// test's namespace, in its own pod with a network of its own, so it keeps
/// the chart's metrics port), the CRD applied apart; `None` when Helm
/// (Python) is missing and allowed to be.
async fn start() -> Option<KubeEnv> {
    start_with(|chart| chart).await
}

/// [`start`] with the rendered chart as `edit` leaves it.
async fn start_with(edit: impl FnOnce(ChartRelease) -> ChartRelease) -> Option<KubeEnv> {
    let binary = std::path::PathBuf::from(env!("CARGO_BIN_EXE_mssql-cdc"));
    let kube = KubeEnv::with_pod_network(binary).await;
    let values = chart_values(&kube);
    let chart = edit(ChartRelease::render(RELEASE, &kube.namespace, &values.to_string()).await?);
    kube.install_crd().await;
    chart.apply(&kube).await;
    Some(kube)
}

/// The Helm release of these tests.
const RELEASE: &str = "cdc";

/// Brings on a reconcile of the stream `name` now: any change of it does.
async fn poke(kube: &KubeEnv, name: &str, round: u32) {
    kube.kubectl_ok(&[
        "annotate",
        "-n",
        &kube.namespace,
        "--overwrite",
        "cdcs",
        name,
        &format!("example.com/poke={round}"),
    ])
    .await;
}

/// A stream `name` whose SQL password is the key `p` of the Secret
/// `secret`, with `worker` as `spec.worker`.
fn stream(name: &str, secret: &str, worker: &str) -> String {
    stream_manifest(name, worker).replace(
        "{secretKeyRef: {name: s, key: p}}",
        &format!("{{secretKeyRef: {{name: {secret}, key: p}}}}"),
    )
}

/// An unlabelled Secret: another team's, which no stream may read.
const OTHER_TEAMS_SECRET: &str =
    "apiVersion: v1\nkind: Secret\nmetadata: {name: other-team}\nstringData: {p: their-password}\n";

/// Waits for `name`'s refusal with `reason`, then checks what it says
/// (`says`, the field and the fix), that it failed without a worker, and
/// that a Warning Event says the same.
async fn refused(kube: &KubeEnv, name: &str, reason: &str, says: &[&str]) {
    let client = kube.client().await;
    let streams: Api<CdcStream> = Api::namespaced(client.clone(), &kube.namespace);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &kube.namespace);
    let status = status_when(
        &streams,
        name,
        &format!("{name} refused with {reason}"),
        |s| condition(s, "Ready").is_some_and(|c| c.reason == reason),
    )
    .await;
    let ready = condition(&status, "Ready").expect("Ready");
    assert_eq!(ready.status, "False");
    assert_eq!(status.phase, Some(Phase::Failed));
    for part in says {
        assert!(
            ready.message.contains(part),
            "{part:?} not in {}",
            ready.message
        );
    }
    assert!(!ready.message.contains('\n'), "one line: {}", ready.message);
    assert!(
        deployments.get_opt(name).await.expect("get").is_none(),
        "{name} has no worker"
    );
    let events = once_warned(&client, &kube.namespace, name, reason).await;
    assert!(
        events
            .iter()
            .any(|(_, r, note)| r == reason && note.contains(says[0])),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_stream_gets_no_worker_for_an_unlabelled_secret_a_host_path_or_a_variable() {
    let Some(kube) = start().await else {
        return;
    };
    let ns = kube.namespace.clone();
    let streams = [
        stream("allowed", "ours", "{}"),
        stream("unlabelled-secret", "other-team", "{}"),
        stream("missing-secret", "nowhere", "{}"),
        stream(
            "monitoring-secret",
            "ours",
            "{}",
        )
        .replace(
            "    credentials:\n      username: r\n",
            "    monitoring: {credentials: {username: m, passwordFrom: {secretKeyRef: {name: other-team, key: p}}}}\n    \
             credentials:\n      username: r\n",
        ),
        stream(
            "secret-volume",
            "ours",
            "{volumes: [{name: theirs, secret: {secretName: other-team}}], \
             volumeMounts: [{name: theirs, mountPath: /theirs}]}",
        ),
        stream(
            "host-path",
            "ours",
            "{volumes: [{name: lake, emptyDir: {}}, {name: node, hostPath: {path: /}}], \
             volumeMounts: [{name: node, mountPath: /node}]}",
        ),
        stream(
            "env-var",
            "ours",
            "{env: [{name: SSL_CERT_FILE, value: /etc/evil.pem}]}",
        ),
        stream(
            "env-from",
            "ours",
            "{envFrom: [{secretRef: {name: ours}}]}",
        ),
    ];
    let secrets = format!(
        "{}---\n{OTHER_TEAMS_SECRET}",
        labelled_secret("ours", "p: our-password")
    );
    let file = kube.write(
        "policy.yaml",
        &format!("{secrets}---\n{}", streams.join("---\n")),
    );
    kube.kubectl_ok(&["apply", "-n", &ns, "-f", &file]).await;

    let client = kube.client().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    eventually(
        "the worker of the stream naming a labelled Secret",
        || async { deployments.get_opt("allowed").await.ok().flatten() },
    )
    .await;
    refused(
        &kube,
        "unlabelled-secret",
        "SecretNotLabelled",
        &[
            "spec.source.credentials.passwordFrom.secretKeyRef.name: Secret \"other-team\" does not carry the label mssql-cdc.io/allow=true",
            "kubectl label secret other-team mssql-cdc.io/allow=true",
        ],
    )
    .await;
    refused(
        &kube,
        "missing-secret",
        "SecretNotFound",
        &["spec.source.credentials.passwordFrom.secretKeyRef.name: Secret \"nowhere\" does not exist"],
    )
    .await;
    refused(
        &kube,
        "monitoring-secret",
        "SecretNotLabelled",
        &["spec.source.monitoring.credentials.passwordFrom.secretKeyRef.name: Secret \"other-team\""],
    )
    .await;
    refused(
        &kube,
        "secret-volume",
        "SecretNotLabelled",
        &["spec.worker.volumes[0].secret.secretName: Secret \"other-team\""],
    )
    .await;
    refused(
        &kube,
        "host-path",
        "VolumeTypeNotAllowed",
        &[
            "spec.worker.volumes[1].hostPath: volumes of type hostPath are not allowed",
            "--worker-volume-types (chart value workerVolumeTypes)",
        ],
    )
    .await;
    refused(
        &kube,
        "env-var",
        "EnvNotAllowed",
        &[
            "spec.worker.env[0].name: the variable \"SSL_CERT_FILE\" is not allowed: streams may set no variables",
            "--worker-env (chart value workerEnv)",
        ],
    )
    .await;
    refused(
        &kube,
        "env-from",
        "EnvFromNotAllowed",
        &[
            "spec.worker.envFrom[0]: envFrom is not allowed",
            "--worker-env-from (chart value workerEnvFrom)",
        ],
    )
    .await;
    // No message carries a Secret's value.
    let streams_api: Api<CdcStream> = Api::namespaced(client.clone(), &ns);
    for stream in streams_api
        .list(&Default::default())
        .await
        .expect("list")
        .items
    {
        let status = serde_json::to_string(&stream.status).expect("JSON");
        assert!(!status.contains("password\""), "{status}");
        assert!(!status.contains("their-password"), "{status}");
    }

    // The fix the message gives: label the Secret, and the stream runs.
    kube.kubectl_ok(&[
        "label",
        "-n",
        &ns,
        "secret",
        "other-team",
        "mssql-cdc.io/allow=true",
    ])
    .await;
    poke(&kube, "unlabelled-secret", 1).await;
    eventually("the worker once the Secret is labelled", || async {
        deployments
            .get_opt("unlabelled-secret")
            .await
            .ok()
            .flatten()
    })
    .await;
    // A Secret whose label is taken off takes its streams' workers along.
    kube.kubectl_ok(&["label", "-n", &ns, "secret", "ours", "mssql-cdc.io/allow-"])
        .await;
    poke(&kube, "allowed", 1).await;
    wait_gone(&deployments, "allowed").await;
    refused(&kube, "allowed", "SecretNotLabelled", &["Secret \"ours\""]).await;
}

/// A Deployment someone else made, of the name a stream will take.
const FOREIGN_DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\n\
metadata: {name: orders, labels: {team: web}}\nspec:\n  replicas: 0\n  \
selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    \
spec: {containers: [{name: web, image: \"nginx:1.27\"}]}\n";

/// A CronJob someone else made, of the name a scheduled stream will take.
const FOREIGN_CRON_JOB: &str = "apiVersion: batch/v1\nkind: CronJob\n\
metadata: {name: nightly, labels: {team: web}}\nspec:\n  schedule: \"0 3 * * *\"\n  suspend: true\n  \
jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          \
containers: [{name: backup, image: \"busybox:1.36\"}]\n";

#[tokio::test]
async fn a_child_of_the_streams_name_that_it_does_not_own_is_not_taken_over() {
    let Some(kube) = start().await else {
        return;
    };
    let ns = kube.namespace.clone();
    let foreign = format!("{FOREIGN_DEPLOYMENT}---\n{FOREIGN_CRON_JOB}");
    kube.kubectl_ok(&[
        "apply",
        "-n",
        &ns,
        "-f",
        &kube.write("foreign.yaml", &foreign),
    ])
    .await;
    let scheduled = stream("nightly", "ours", "{}").replace(
        "trigger: {processingTime: 10s}",
        "trigger: {availableNow: true, schedule: \"@hourly\"}",
    );
    let streams = format!(
        "{}---\n{}---\n{scheduled}",
        labelled_secret("ours", "p: x"),
        stream("orders", "ours", "{}"),
    );
    kube.kubectl_ok(&[
        "apply",
        "-n",
        &ns,
        "-f",
        &kube.write("streams.yaml", &streams),
    ])
    .await;

    let client = kube.client().await;
    let streams_api: Api<CdcStream> = Api::namespaced(client.clone(), &ns);
    for (name, kind) in [("orders", "Deployment"), ("nightly", "CronJob")] {
        let status = status_when(&streams_api, name, "Ready=False with ChildNotOwned", |s| {
            condition(s, "Ready").is_some_and(|c| c.reason == "ChildNotOwned")
        })
        .await;
        let ready = condition(&status, "Ready").expect("Ready");
        assert_eq!(
            (ready.status.as_str(), status.phase),
            ("False", Some(Phase::Failed))
        );
        assert!(
            ready.message.contains(&format!(
                "{kind} {name} exists and this CdcStream does not own it"
            )),
            "{}",
            ready.message
        );
        let events = once_warned(&client, &ns, name, "ChildNotOwned").await;
        assert!(
            events
                .iter()
                .any(|(_, _, note)| note.contains("delete or rename")),
            "{events:?}"
        );
    }
    // Untouched: no owner (so garbage collection never deletes them), none
    // of the operator's fields or labels, their own spec.
    let deployment = Api::<Deployment>::namespaced(client.clone(), &ns)
        .get("orders")
        .await
        .expect("the foreign Deployment");
    let cron_job = Api::<CronJob>::namespaced(client.clone(), &ns)
        .get("nightly")
        .await
        .expect("the foreign CronJob");
    for meta in [&deployment.metadata, &cron_job.metadata] {
        assert_eq!(meta.owner_references, None, "{:?}", meta.name);
        let managers: Vec<String> = meta
            .managed_fields
            .iter()
            .flatten()
            .filter_map(|m| m.manager.clone())
            .collect();
        assert!(
            managers.iter().all(|m| m != "mssql-cdc-operator"),
            "{managers:?}"
        );
        let labels = meta.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("team").map(String::as_str), Some("web"));
        assert!(!labels.contains_key("mssql-cdc.io/stream"), "{labels:?}");
    }
    let image = |pod: Option<&k8s_openapi::api::core::v1::PodSpec>| {
        pod.and_then(|p| p.containers[0].image.clone())
    };
    assert_eq!(
        image(deployment.spec.template.spec.as_ref()).as_deref(),
        Some("nginx:1.27")
    );
    let job = cron_job.spec.job_template.spec.as_ref();
    assert_eq!(
        image(job.and_then(|j| j.template.spec.as_ref())).as_deref(),
        Some("busybox:1.36")
    );

    // Once the name is free, the stream makes its own worker.
    kube.kubectl_ok(&["delete", "-n", &ns, "deployment", "orders"])
        .await;
    poke(&kube, "orders", 1).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let own = eventually("the stream's own Deployment", || async {
        deployments
            .get_opt("orders")
            .await
            .ok()
            .flatten()
            .filter(|d| d.metadata.owner_references.is_some())
    })
    .await;
    let uid = streams_api
        .get("orders")
        .await
        .expect("stream")
        .metadata
        .uid;
    assert_eq!(
        own.metadata.owner_references.unwrap_or_default()[0].uid,
        uid.unwrap_or_default()
    );
}

#[tokio::test]
async fn without_get_on_secrets_the_operator_runs_nothing_and_says_what_it_needs() {
    let Some(kube) = start_with(|chart| chart.without_operator_rule_on("secrets")).await else {
        return;
    };
    let ns = kube.namespace.clone();
    let manifests = format!(
        "{}---\n{}",
        labelled_secret("ours", "p: x"),
        stream("orders", "ours", "{}")
    );
    kube.kubectl_ok(&[
        "apply",
        "-n",
        &ns,
        "-f",
        &kube.write("orders.yaml", &manifests),
    ])
    .await;
    let client = kube.client().await;
    let streams: Api<CdcStream> = Api::namespaced(client.clone(), &ns);
    let status = status_when(&streams, "orders", "Ready=False with ReconcileError", |s| {
        condition(s, "Ready").is_some_and(|c| c.reason == "ReconcileError")
    })
    .await;
    let message = &condition(&status, "Ready").expect("Ready").message;
    for part in [
        &format!("cannot read the labels of Secret {ns}/ours"),
        "forbidden",
        "the operator needs get on secrets",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    let deployments: Api<Deployment> = Api::namespaced(client, &ns);
    assert!(deployments.get_opt("orders").await.expect("get").is_none());
}
