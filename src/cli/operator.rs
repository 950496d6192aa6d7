//! `mssql-cdc operator`: the Kubernetes controller for CdcStreams.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use mssql_cdc::metrics::MetricsServer;
use mssql_cdc::operator::children::WorkerDefaults;
use mssql_cdc::operator::controller::{Context, run_controller};
use mssql_cdc::operator::leader::{Leadership, LeaseConfig, lease_client};
use mssql_cdc::operator::metrics::OperatorMetrics;
use mssql_cdc::operator::policy::{DEFAULT_VOLUME_TYPES, WorkerPolicy};
use mssql_cdc::operator::secret_refs::{DEFAULT_SECRET_LABEL, SecretLabel};
use tokio_util::sync::CancellationToken;

/// Arguments of `operator`.
#[derive(clap::Args)]
pub struct OperatorArgs {
    /// Address of `/healthz` (the probes) and `/metrics`.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// Image of worker pods, unless a stream sets spec.worker.image.
    #[arg(long, env = "MSSQL_CDC_WORKER_IMAGE")]
    pub worker_image: String,
    /// ServiceAccount of worker pods, unless a stream sets
    /// spec.worker.serviceAccountName; always allowed.
    #[arg(long)]
    pub worker_service_account: Option<String>,
    /// Image prefixes a stream's spec.worker.image may name, comma
    /// separated (`registry.example.com/team/` or a repository such as
    /// `registry.example.com/cdc`); --worker-image is always allowed.
    #[arg(long, value_delimiter = ',')]
    pub worker_images: Vec<String>,
    /// ServiceAccounts a stream's spec.worker.serviceAccountName may name,
    /// comma separated, besides --worker-service-account.
    #[arg(long, value_delimiter = ',')]
    pub worker_service_accounts: Vec<String>,
    /// Volume types a stream's spec.worker.volumes may use, comma
    /// separated, as core/v1 Volume spells them. A projected volume passes
    /// when each of its sources does; a serviceAccountToken source always
    /// does. Add hostPath only if streams may mount their node.
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_VOLUME_TYPES)]
    pub worker_volume_types: Vec<String>,
    /// Names of the variables a stream's spec.worker.env may set, comma
    /// separated; NAME* allows every name starting with NAME. None by
    /// default.
    #[arg(long, value_delimiter = ',')]
    pub worker_env: Vec<String>,
    /// Let streams use spec.worker.envFrom, which imports every key of a
    /// ConfigMap or (labelled) Secret as a variable, names unchecked.
    #[arg(long)]
    pub worker_env_from: bool,
    /// The label every Secret a stream names must carry (KEY=VALUE, or
    /// KEY for any value): its password, env values, envFrom, volumes and
    /// pull secrets.
    #[arg(long, default_value = DEFAULT_SECRET_LABEL)]
    pub worker_secret_label: SecretLabel,
    /// Let streams name any Secret of their namespace, labelled or not:
    /// anyone who may create a CdcStream can then read them. For an
    /// upgrade, until the Secrets are labelled.
    #[arg(long)]
    pub worker_unlabelled_secrets: bool,
    /// Pull secrets of every worker pod, comma separated.
    #[arg(long, value_delimiter = ',')]
    pub worker_image_pull_secrets: Vec<String>,
    /// Labels of every worker pod, as KEY=VALUE, comma separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_label)]
    pub worker_pod_labels: Vec<(String, String)>,
    /// Log level of worker pods (`--log-level` of `mssql-cdc worker`):
    /// error, warn, info, debug or trace.
    #[arg(long)]
    pub worker_log_level: Option<String>,
    /// How often workers write moving numbers (progress, lags, snapshot
    /// counts) into their stream's status at most (their
    /// `--status-interval`; 30s when not set). A change of the phase or of
    /// a condition's status or reason is written at once. The operator
    /// allows a status twice this old before it judges a worker silent.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub worker_status_interval: Option<Duration>,
    /// Namespaces to watch, comma separated: the operator then needs
    /// rights in those namespaces only. Every namespace when not set.
    #[arg(long, value_delimiter = ',')]
    pub watch_namespaces: Vec<String>,
    /// Reconcile only while holding a coordination.k8s.io Lease, so that
    /// several replicas can run; without it, run a single replica.
    #[arg(long)]
    pub leader_election: bool,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "mssql-cdc-operator")]
    pub lease_name: String,
    /// Namespace of the Lease; the client's namespace when not set.
    #[arg(long, env = "POD_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// How long the Lease stays valid without renewal: how long replicas
    /// wait after the leader died (whole seconds, at least 2s).
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub lease_duration: Duration,
    /// How often each stream is looked at again without a change: a
    /// stopped worker cannot report, so this bounds how late Live turns
    /// False.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub resync: Duration,
}

/// Reconciles every CdcStream until SIGTERM or Ctrl-C; with leader
/// election, only while this replica holds the Lease. Losing the Lease is
/// an error: the process exits and Kubernetes restarts it as a candidate.
pub async fn run_operator(args: OperatorArgs) -> anyhow::Result<()> {
    let config = kube::Config::infer()
        .await
        .context("cannot configure the Kubernetes client (in-cluster or KUBECONFIG)")?;
    let client = kube::Client::try_from(config.clone())?;
    let metrics = Arc::new(OperatorMetrics::new());
    let server = MetricsServer::start(args.listen, Arc::clone(&metrics))
        .await
        .context("--listen")?;
    let defaults = WorkerDefaults {
        image: args.worker_image,
        service_account: args.worker_service_account,
        image_pull_secrets: non_empty(args.worker_image_pull_secrets),
        pod_labels: args.worker_pod_labels.into_iter().collect(),
        policy: WorkerPolicy {
            images: non_empty(args.worker_images),
            service_accounts: non_empty(args.worker_service_accounts),
            volume_types: non_empty(args.worker_volume_types),
            env: non_empty(args.worker_env),
            env_from: args.worker_env_from,
            secret_label: (!args.worker_unlabelled_secrets).then_some(args.worker_secret_label),
        },
        log_level: args.worker_log_level,
        status_interval: args.worker_status_interval,
    };
    let namespaces = non_empty(args.watch_namespaces);
    let instance = std::env::var("POD_NAME").ok();
    let shutdown = CancellationToken::new();
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            super::shutdown_signal().await;
            shutdown.cancel();
        }
    });
    match namespaces.as_slice() {
        [] => tracing::info!("operator started, watching every namespace"),
        some => tracing::info!("operator started, watching namespaces {}", some.join(", ")),
    }
    let context = Context::new(client.clone(), defaults, instance.clone())
        .with_resync(args.resync)
        .with_namespaces(namespaces);
    #[cfg(feature = "failpoints")]
    let context = match mssql_cdc::operator::test_clock::from_env(&client)? {
        Some(clock) => context.with_clock(clock),
        None => context,
    };
    if !args.leader_election {
        metrics.set_leader(true);
        run_controller(context, metrics, shutdown.cancelled_owned()).await;
        drop(server);
        tracing::info!("operator stopped");
        return Ok(());
    }

    let lease = LeaseConfig {
        name: args.lease_name,
        namespace: args
            .lease_namespace
            .unwrap_or_else(|| client.default_namespace().to_string()),
        identity: instance
            .unwrap_or_else(|| format!("mssql-cdc-operator-{}", uuid::Uuid::new_v4().simple())),
        duration_seconds: args.lease_duration.as_secs(),
    };
    let lease_client = lease_client(config, lease.grace_seconds()?)?;
    let Some(leadership) = Leadership::acquire(lease_client, lease, shutdown.cancelled()).await?
    else {
        tracing::info!("operator stopped before leading");
        return Ok(());
    };
    metrics.set_leader(true);
    let controller = run_controller(context, Arc::clone(&metrics), shutdown.cancelled_owned());
    tokio::pin!(controller);
    tokio::select! {
        // Dropping the controller abandons in-flight reconciles at once:
        // another replica may lead already, and every step is idempotent.
        lost = leadership.lost() => {
            metrics.set_leader(false);
            return Err(lost.into());
        }
        () = &mut controller => {}
    }
    leadership.release().await?;
    metrics.set_leader(false);
    drop(server);
    tracing::info!("operator stopped");
    Ok(())
}

/// The values of a comma-separated list flag, without empty ones (a chart
/// renders an empty list as `--flag=`).
fn non_empty(values: Vec<String>) -> Vec<String> {
    values
        .into_iter()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect()
}

/// `KEY=VALUE` of `--worker-pod-labels`.
fn parse_label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.trim().to_string()))
        }
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}
