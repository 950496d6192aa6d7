//! The `CdcSource` manifest: one per source database, so that one worker
//! streams many tables (the `CdcStream`s naming it in `spec.sourceRef`).
//!
//! A stream of a source keeps only its table's own fields; [`resolve`]
//! gives it the source's connection and, for every per-table field it
//! leaves out, the source's `defaults`, and then it is validated like a
//! stream of its own. So one check (`CdcStreamSpec::validate`) guards
//! both modes, and moving a stream into or out of a source changes
//! nothing the checkpoint records (appId, target, checkpoint stay the
//! stream's).

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use kube::ResourceExt;
use kube::core::{Selector, SelectorExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::alerts::{AlertsSpec, parse_duration};
use super::discovery::{DiscoverySpec, DiscoveryStatus};
use super::types::{
    CdcStream, CdcStreamSpec, CredentialsSpec, Encrypt, FinalizationSpec, HeartbeatSpec,
    MonitoringSpec, OnDataLoss, SnapshotSpec, TableSpec, TriggerSpec,
};
use super::validate::{SpecError, StreamConfig, ValidationErrors};
use super::worker::WorkerSpec;
use crate::lake::StorageLocation;

/// The `kind` of a source manifest.
pub const SOURCE_KIND: &str = "CdcSource";

/// One SQL Server database whose CDC tables one worker streams.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "mssql-cdc.io",
    version = "v1alpha1",
    kind = "CdcSource",
    namespaced,
    shortname = "cdcsrc",
    category = "mssql-cdc",
    status = "CdcSourceStatus",
    printcolumn = r#"{"name":"Database","type":"string","jsonPath":".spec.connection.database","description":"The source database."}"#,
    printcolumn = r#"{"name":"Tables","type":"string","jsonPath":".status.tablesReady","description":"Tables Ready of the source's tables (ready/total)."}"#,
    printcolumn = r#"{"name":"Failed","type":"integer","jsonPath":".status.tables.failed","description":"Tables stopped by an error of their own."}"#,
    printcolumn = r#"{"name":"Max lag","type":"integer","jsonPath":".status.maxIngestionLagSeconds","description":"Whole seconds the most lagging table's last batch trailed the source."}"#,
    printcolumn = r#"{"name":"Min headroom","type":"integer","jsonPath":".status.minHeadroomHours","description":"Whole hours before CDC cleanup reaches the table it is closest to."}"#,
    printcolumn = r#"{"name":"Finalized","type":"string","jsonPath":".status.finalizedUntil","description":"Every table is complete up to this instant."}"#,
    printcolumn = r#"{"name":"Uncovered","type":"integer","priority":1,"jsonPath":".status.discovery.count","description":"Captured tables spec.discovery matches that no CdcStream covers yet."}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CdcSourceSpec {
    /// The database's server and logins, shared by every table.
    #[schemars(extend("x-kubernetes-validations" = [
        {
            "rule": "self.host == oldSelf.host",
            "message": "connection.host is immutable: its streams' checkpoints hold positions of that server's log; create a new CdcSource instead",
            "fieldPath": ".host"
        },
        {
            "rule": "self.database == oldSelf.database",
            "message": "connection.database is immutable: its streams' checkpoints hold positions of that database's log; create a new CdcSource instead",
            "fieldPath": ".database"
        }
    ]))]
    pub connection: ConnectionSpec,
    /// When rounds run (as a stream's `spec.trigger`).
    #[serde(default)]
    pub trigger: TriggerSpec,
    /// A table the worker writes to so the max LSN keeps moving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<HeartbeatSpec>,
    /// How many tables the worker reads and snapshots at once.
    #[serde(default)]
    pub concurrency: ConcurrencySpec,
    /// A quiet table commits an empty batch this often (e.g. `5m`), so its
    /// position, headroom, lag and verdict keep moving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_commit_interval: Option<String>,
    /// Kubernetes only: stop the source's worker without deleting anything.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
    /// Kubernetes only: how the operator runs the source's one worker pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<WorkerSpec>,
    /// Per-table fields a stream of this source takes when it leaves them out.
    #[serde(default)]
    pub defaults: StreamDefaults,
    /// Report only: the worker counts the captured tables these patterns
    /// match that no CdcStream covers yet in `status.discovery` (it never
    /// streams them; `mssql-cdc generate-streams` writes their streams).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<DiscoverySpec>,
    /// Which CdcStreams may be tables of this source: a label selector a
    /// stream naming the source in `sourceRef` must match to join. A
    /// member runs with the source's login and its pod's cloud identity;
    /// when absent, any stream of the namespace that names the source joins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<LabelSelector>,
    /// URI prefixes (or local directories) every member's target, silver,
    /// facts, finalization and checkpoint locations must lie under; any
    /// location when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_locations: Vec<String>,
}

/// What `CdcStream.spec.source` holds today, less the table's own fields.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionSpec {
    /// Host name or address of SQL Server.
    #[schemars(length(min = 1))]
    pub host: String,
    /// TCP port of SQL Server.
    #[serde(default = "default_port")]
    #[schemars(range(min = 1))]
    pub port: u16,
    /// The source database.
    #[schemars(length(min = 1))]
    pub database: String,
    /// Login of the (least-privilege) CDC reader.
    pub credentials: CredentialsSpec,
    /// A separate monitoring login that may read capture's health.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring: Option<MonitoringSpec>,
    /// TLS policy of the connections.
    #[serde(default)]
    pub encrypt: Encrypt,
    /// Accept any server certificate (development only).
    #[serde(default)]
    pub trust_server_certificate: bool,
    /// Time zone of the server's clock; taken from the server when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_time_zone: Option<String>,
    /// Sessions one table's batch or snapshot reads on at once.
    #[serde(default = "default_readers")]
    #[schemars(range(min = 1, max = 16))]
    pub readers: u32,
}

fn default_port() -> u16 {
    1433
}

fn default_readers() -> u32 {
    1
}

/// How much of the worker a source's tables share at once.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrencySpec {
    /// Tables whose changes are read at once (default 4).
    #[serde(default = "default_reads")]
    #[schemars(range(min = 1, max = 64))]
    pub reads: u32,
    /// Tables snapshotting at once (default 1).
    #[serde(default = "default_snapshots")]
    #[schemars(range(min = 1, max = 16))]
    pub snapshots: u32,
}

impl Default for ConcurrencySpec {
    fn default() -> Self {
        ConcurrencySpec {
            reads: default_reads(),
            snapshots: default_snapshots(),
        }
    }
}

fn default_reads() -> u32 {
    4
}

fn default_snapshots() -> u32 {
    1
}

/// The per-table fields a stream of the source inherits when it leaves
/// them out. A stream's own value replaces the default whole (no deep
/// merge), except `storageOptions`, whose keys the stream's override.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamDefaults {
    /// The facts table the source's tables usually share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<TableSpec>,
    /// The finalization control table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalization: Option<FinalizationSpec>,
    /// What purged changes make a table do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_data_loss: Option<OnDataLoss>,
    /// Health limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alerts: Option<AlertsSpec>,
    /// Whether and how a table is copied first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotSpec>,
    /// Upper bound of source transactions per batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_commits_per_batch: Option<u64>,
    /// The largest value of one column a table reads, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1073741824))]
    pub max_value_bytes: Option<u64>,
    /// object_store options for every location.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub storage_options: BTreeMap<String, String>,
}

/// Why a stream cannot be run as a table of a source.
#[derive(Debug, thiserror::Error)]
pub enum SourceRefError {
    /// The stream names another source, or none.
    #[error("spec.sourceRef: {stream} names {named:?}, not CdcSource {source_name:?}")]
    OtherSource {
        /// The stream's name.
        stream: String,
        /// What its sourceRef names (None: no sourceRef).
        named: Option<String>,
        /// The source it was given with.
        source_name: String,
    },
    /// A field that belongs to the source is set on the stream.
    #[error(
        "{field}: {stream} is a table of CdcSource {source_name:?}, which sets this for all its \
         tables; remove it from the stream (or from spec.sourceRef to run the stream alone)"
    )]
    SourceField {
        /// The stream's name.
        stream: String,
        /// The field path.
        field: &'static str,
        /// The source's name.
        source_name: String,
    },
    /// The resolved stream is invalid.
    #[error("{stream}: {errors}")]
    Invalid {
        /// The stream's name.
        stream: String,
        /// Every problem found.
        errors: ValidationErrors,
    },
    /// The stream names the source, but its labels do not match the
    /// source's `spec.members`.
    #[error(
        "spec.sourceRef: {stream} names CdcSource {source_name:?}, whose spec.members ({selector}) \
         its labels do not match, so it is not one of its tables: give the stream the labels the \
         source's owner asks for (kubectl get cdcsrc {source_name} -o jsonpath='{{.spec.members}}'), \
         or remove spec.sourceRef to run it with a connection of its own"
    )]
    NotAMember {
        /// The stream's name.
        stream: String,
        /// The source's name.
        source_name: String,
        /// The selector, as `kubectl -l` writes one.
        selector: String,
    },
    /// A location of the stream lies outside the source's `allowedLocations`.
    #[error(
        "{field}: {location} lies under none of CdcSource {source_name:?}'s \
         spec.allowedLocations ({allowed}): move it under one of them, or ask the source's owner \
         to allow it"
    )]
    LocationNotAllowed {
        /// The field, e.g. `spec.target.location`.
        field: &'static str,
        /// The location, normalized.
        location: String,
        /// The source's name.
        source_name: String,
        /// The allowed prefixes, comma-separated.
        allowed: String,
    },
    /// The stream sets a storage option only its source may set.
    #[error(
        "spec.storageOptions.{key}: a table of CdcSource {source_name:?} may not set this key: \
         where the worker sends its requests and credentials is the source's to say (its \
         spec.defaults.storageOptions); remove it from the stream. A table may set only {allowed}"
    )]
    StorageOptionNotAllowed {
        /// The key (never its value, which may be a secret).
        key: String,
        /// The source's name.
        source_name: String,
        /// The keys a member may set, comma-separated.
        allowed: String,
    },
    /// A field of the source itself is wrong, so none of its tables runs.
    #[error("CdcSource {source_name:?}: {field}: {problem}")]
    SourceInvalid {
        /// The source's name.
        source_name: String,
        /// The source's field, e.g. `spec.members`.
        field: String,
        /// What is wrong.
        problem: String,
    },
}

impl SourceRefError {
    /// The reason a stream's status gives for this refusal.
    pub fn reason(&self) -> &'static str {
        match self {
            SourceRefError::NotAMember { .. } => "NotAMemberOfSource",
            SourceRefError::LocationNotAllowed { .. } => "LocationNotAllowed",
            SourceRefError::StorageOptionNotAllowed { .. } => "StorageOptionNotAllowed",
            SourceRefError::OtherSource { .. }
            | SourceRefError::SourceField { .. }
            | SourceRefError::Invalid { .. }
            | SourceRefError::SourceInvalid { .. } => "InvalidSpec",
        }
    }
}

/// The `storageOptions` keys a table of a source may set itself (in any
/// case): client timeouts and the region. Every other key (endpoints,
/// proxies, credentials, tokens, profiles, TLS and HTTP switches, and any
/// key object_store or delta-rs adds later) decides where or how the
/// worker's requests and credentials go, so only the source's
/// `defaults.storageOptions` may set it.
pub const MEMBER_STORAGE_OPTIONS: &[&str] = &[
    "region",
    "aws_region",
    "aws_default_region",
    "timeout",
    "connect_timeout",
    "pool_idle_timeout",
    "pool_max_idle_per_host",
    "http2_keep_alive_interval",
    "http2_keep_alive_timeout",
    "http2_keep_alive_while_idle",
];

/// What a source reports: bounded aggregates over its tables only (never
/// an entry per table, so its size does not grow with the database); each
/// table's own health is in its CdcStream's status.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CdcSourceStatus {
    /// The spec generation the status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// How many of the source's tables are in which state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tables: Option<TableCounts>,
    /// `ready/total`, as `kubectl get cdcsrc` shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tables_ready: Option<String>,
    /// The largest ingestion lag of its tables' last batches, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ingestion_lag_seconds: Option<f64>,
    /// The smallest retention headroom of its tables, in hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_headroom_hours: Option<f64>,
    /// The earliest of its tables' finalized-until instants: every table
    /// is complete up to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalized_until: Option<String>,
    /// What the source's worker last found of SQL Server (the worker
    /// writes it, under its own field manager).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<ConnectionStatus>,
    /// Capture's health as the monitoring login reads it, once for the
    /// source (the worker writes it, with `spec.connection.monitoring`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<super::status::CaptureStatus>,
    /// Captured tables `spec.discovery` matches that no CdcStream covers,
    /// written by the source's worker under its own field manager.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<DiscoveryStatus>,
    /// SourceConnected, CaptureHealthy, TablesDegraded and Ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
}

/// Whether the source's worker reads SQL Server: one entry for the whole
/// source, so 1,000 tables down for one reason are one fact here.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionStatus {
    /// True while the worker's rounds read the database's max LSN.
    pub connected: bool,
    /// `Connected`, or why not (`SourceUnreachable`, `TlsFailed`,
    /// `LoginFailed`, `DatabaseUnavailable`, `NoMaxLsn`).
    pub reason: String,
    /// One line: what the worker met and what to check. Never a secret.
    pub message: String,
    /// Since when (UTC).
    #[schemars(schema_with = "super::status::date_time")]
    pub since: chrono::DateTime<chrono::Utc>,
}

/// The source's tables by state.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TableCounts {
    /// Its CdcStreams.
    pub total: u32,
    /// Those Ready.
    pub ready: u32,
    /// Those taking a snapshot.
    pub snapshotting: u32,
    /// Those stopped by an error of their own.
    pub failed: u32,
    /// Those suspended.
    pub suspended: u32,
}

/// How often a quiet table of a source commits an empty batch when the
/// manifest leaves `idleCommitInterval` out.
pub const DEFAULT_IDLE_COMMIT_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// How the source's worker shares itself among its tables: what
/// `engine::run_tables` paces them by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourcePacing {
    /// A table with no change in its window commits an empty batch this
    /// often, so its position, headroom and verdict keep moving.
    pub idle_commit_interval: Duration,
    /// Tables that read their changes (or connect) at once.
    pub reads: NonZeroUsize,
    /// Tables that copy a snapshot at once.
    pub snapshots: NonZeroUsize,
}

impl CdcSourceSpec {
    /// The source's pacing, checked: `idleCommitInterval` a positive
    /// duration, each concurrency at least 1 (the CRD's bounds say so too;
    /// a file run locally is checked here).
    pub fn pacing(&self) -> Result<SourcePacing, SpecError> {
        let idle_commit_interval = parse_duration(
            "spec.idleCommitInterval",
            self.idle_commit_interval.as_deref(),
            DEFAULT_IDLE_COMMIT_INTERVAL,
        )?;
        let at_least_one = |field: &str, value: u32| {
            usize::try_from(value)
                .ok()
                .and_then(NonZeroUsize::new)
                .ok_or_else(|| SpecError::Invalid {
                    field: field.into(),
                    value: value.to_string(),
                    reason: "must be at least 1".into(),
                })
        };
        Ok(SourcePacing {
            idle_commit_interval,
            reads: at_least_one("spec.concurrency.reads", self.concurrency.reads)?,
            snapshots: at_least_one("spec.concurrency.snapshots", self.concurrency.snapshots)?,
        })
    }
}

/// Whether `stream` is a table of `source`: it names the source in
/// `spec.sourceRef` and its labels match the source's `spec.members`. The
/// one answer the operator (the stream's status) and the source's worker
/// (which tables it runs) both ask.
pub fn membership(source: &CdcSource, stream: &CdcStream) -> Membership {
    let source_name = source.metadata.name.as_deref().unwrap_or_default();
    let names_it = stream
        .spec
        .source_ref
        .as_ref()
        .is_some_and(|r| r.name == source_name);
    if !names_it {
        return Membership::Elsewhere;
    }
    let Some(members) = &source.spec.members else {
        return Membership::Member;
    };
    let refused = |error| Membership::Refused(Box::new(error));
    let selector = match Selector::try_from(members.clone()) {
        Ok(selector) => selector,
        Err(error) => {
            return refused(SourceRefError::SourceInvalid {
                source_name: source_name.into(),
                field: "spec.members".into(),
                problem: format!("{error}; no stream joins until it is fixed"),
            });
        }
    };
    if selector.matches(stream.labels()) {
        Membership::Member
    } else {
        refused(SourceRefError::NotAMember {
            stream: stream.metadata.name.clone().unwrap_or_default(),
            source_name: source_name.into(),
            selector: selector.to_string(),
        })
    }
}

/// What [`membership`] found.
#[derive(Debug)]
pub enum Membership {
    /// A table of the source.
    Member,
    /// The stream names the source but may not join it.
    Refused(Box<SourceRefError>),
    /// The stream names another source, or none.
    Elsewhere,
}

/// The stream as if it ran alone: the source's connection, then the
/// stream's fields over the source's defaults. `stream` names the stream in
/// errors. Whether the stream may join at all is [`membership`]'s answer;
/// this refuses what a member may not choose (a location outside the
/// source's `allowedLocations`, a storage option only the source sets).
pub fn resolve(
    source_name: &str,
    source: &CdcSourceSpec,
    stream_name: &str,
    stream: &CdcStreamSpec,
) -> Result<CdcStreamSpec, SourceRefError> {
    let named = stream.source_ref.as_ref().map(|r| r.name.clone());
    if named.as_deref() != Some(source_name) {
        return Err(SourceRefError::OtherSource {
            stream: stream_name.into(),
            named,
            source_name: source_name.into(),
        });
    }
    let source_field = |field| SourceRefError::SourceField {
        stream: stream_name.into(),
        field,
        source_name: source_name.into(),
    };
    let own = &stream.source;
    for (set, field) in [
        (own.host.is_some(), "spec.source.host"),
        (own.database.is_some(), "spec.source.database"),
        (own.credentials.is_some(), "spec.source.credentials"),
        (own.monitoring.is_some(), "spec.source.monitoring"),
        (own.source_time_zone.is_some(), "spec.source.sourceTimeZone"),
        (stream.heartbeat.is_some(), "spec.heartbeat"),
        (stream.worker.is_some(), "spec.worker"),
        (stream.trigger != TriggerSpec::default(), "spec.trigger"),
    ] {
        if set {
            return Err(source_field(field));
        }
    }
    member_storage_options(source_name, stream)?;
    let connection = &source.connection;
    let defaults = &source.defaults;
    let mut resolved = stream.clone();
    resolved.source_ref = None;
    resolved.source.host = Some(connection.host.clone());
    resolved.source.port = connection.port;
    resolved.source.database = Some(connection.database.clone());
    resolved.source.credentials = Some(connection.credentials.clone());
    resolved.source.monitoring = connection.monitoring.clone();
    resolved.source.encrypt = connection.encrypt;
    resolved.source.trust_server_certificate = connection.trust_server_certificate;
    resolved.source.source_time_zone = connection.source_time_zone.clone();
    resolved.source.readers = connection.readers;
    resolved.trigger = source.trigger.clone();
    resolved.heartbeat = source.heartbeat.clone();
    resolved.suspend = source.suspend || stream.suspend;
    resolved.facts = stream.facts.clone().or_else(|| defaults.facts.clone());
    resolved.finalization = stream
        .finalization
        .clone()
        .or_else(|| defaults.finalization.clone());
    resolved.on_data_loss = stream.on_data_loss.or(defaults.on_data_loss);
    resolved.alerts = stream.alerts.clone().or_else(|| defaults.alerts.clone());
    resolved.snapshot = stream
        .snapshot
        .clone()
        .or_else(|| defaults.snapshot.clone());
    resolved.max_commits_per_batch = stream
        .max_commits_per_batch
        .or(defaults.max_commits_per_batch);
    resolved.max_value_bytes = stream.max_value_bytes.or(defaults.max_value_bytes);
    let mut options = defaults.storage_options.clone();
    options.extend(stream.storage_options.clone());
    resolved.storage_options = options;
    allowed_locations(source_name, source, &resolved)?;
    Ok(resolved)
}

/// Refuses a member's storage option outside [`MEMBER_STORAGE_OPTIONS`].
fn member_storage_options(source_name: &str, stream: &CdcStreamSpec) -> Result<(), SourceRefError> {
    let refused = stream.storage_options.keys().find(|key| {
        let key = key.to_ascii_lowercase();
        !MEMBER_STORAGE_OPTIONS.contains(&key.as_str())
    });
    match refused {
        None => Ok(()),
        Some(key) => Err(SourceRefError::StorageOptionNotAllowed {
            key: key.clone(),
            source_name: source_name.into(),
            allowed: MEMBER_STORAGE_OPTIONS.join(", "),
        }),
    }
}

/// Refuses a location of the resolved stream (its own or a default) that
/// lies under none of the source's `allowedLocations`. Locations are
/// compared as normalized directory URLs (`..` resolved, a trailing `/`),
/// so `s3://lake/shop` allows `s3://lake/shop/orders` but not
/// `s3://lake/shop-other`. A location that does not parse is left to the
/// stream's own validation, which names it.
fn allowed_locations(
    source_name: &str,
    source: &CdcSourceSpec,
    resolved: &CdcStreamSpec,
) -> Result<(), SourceRefError> {
    if source.allowed_locations.is_empty() {
        return Ok(());
    }
    let mut allowed = Vec::with_capacity(source.allowed_locations.len());
    for (index, prefix) in source.allowed_locations.iter().enumerate() {
        let parsed =
            StorageLocation::parse(prefix).map_err(|error| SourceRefError::SourceInvalid {
                source_name: source_name.into(),
                field: format!("spec.allowedLocations[{index}]"),
                problem: error.to_string(),
            })?;
        allowed.push(parsed);
    }
    let locations = [
        ("spec.target.location", Some(&resolved.target.location)),
        ("spec.checkpoint", Some(&resolved.checkpoint)),
        (
            "spec.facts.location",
            resolved.facts.as_ref().map(|f| &f.location),
        ),
        (
            "spec.silver.location",
            resolved.silver.as_ref().map(|s| &s.location),
        ),
        (
            "spec.finalization.location",
            resolved.finalization.as_ref().map(|f| &f.location),
        ),
    ];
    for (field, location) in locations {
        let Some(Ok(location)) = location.map(|l| StorageLocation::parse(l)) else {
            continue;
        };
        if !allowed.iter().any(|prefix| location.lies_under(prefix)) {
            return Err(SourceRefError::LocationNotAllowed {
                field,
                location: location.to_string(),
                source_name: source_name.into(),
                allowed: allowed
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    Ok(())
}

/// [`resolve`], then the stream's own checks: the config the worker runs
/// for this table, marked with the source's name (its facts rows carry it).
pub fn stream_config(
    source_name: &str,
    source: &CdcSourceSpec,
    stream_name: &str,
    stream: &CdcStreamSpec,
) -> Result<StreamConfig, SourceRefError> {
    let resolved = resolve(source_name, source, stream_name, stream)?;
    let mut config = resolved
        .validate()
        .map_err(|errors| SourceRefError::Invalid {
            stream: stream_name.into(),
            errors,
        })?;
    config.source_name = Some(source_name.to_string());
    Ok(config)
}

/// The error `CdcStreamSpec::validate` gives a stream of a source checked
/// alone: it can run only with its source.
pub(super) fn needs_its_source(name: &str) -> SpecError {
    SpecError::Invalid {
        field: "spec.sourceRef".into(),
        value: name.into(),
        reason: "this stream is one table of that CdcSource and runs only with it: locally \
                 `mssql-cdc run -f` a file holding the CdcSource and its CdcStreams; in \
                 Kubernetes apply the CdcSource too, and the operator runs the stream in the \
                 source's one worker"
            .into(),
    }
}

#[cfg(test)]
#[path = "source_tests.rs"]
mod tests;
