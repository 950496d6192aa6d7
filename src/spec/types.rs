//! The manifest as users write it. Field names are camelCase in YAML; defaults
//! are applied here, checks in `validate`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::alerts::AlertsSpec;
use super::status::{
    CaptureStatus, DataLossStatus, FinalizationStatus, Phase, Progress, SnapshotStatus,
    WorkerStatus,
};
use super::worker::WorkerSpec;

/// One stream: a captured SQL Server table into a bronze Delta table, with
/// one facts row per micro-batch.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "mssql-cdc.io",
    version = "v1alpha1",
    kind = "CdcStream",
    namespaced,
    shortname = "cdcs",
    category = "mssql-cdc",
    status = "CdcStreamStatus",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase","description":"Where the stream is in its life cycle."}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status","description":"Whether the stream is healthy."}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason","description":"Why the stream is (not) Ready."}"#,
    printcolumn = r#"{"name":"Lag","type":"integer","jsonPath":".status.progress.ingestionLagSeconds","description":"Whole seconds the last batch trailed the source's newest commit."}"#,
    printcolumn = r#"{"name":"Headroom","type":"integer","jsonPath":".status.progress.retentionHeadroomHours","description":"Whole hours before CDC cleanup reaches the read position."}"#,
    printcolumn = r#"{"name":"Finalized","type":"string","jsonPath":".status.finalization.finalizedUntil","description":"Everything committed before this instant is in the target."}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Silver","type":"string","priority":1,"jsonPath":".status.silver.appliedLsn","description":"The end LSN of the newest batch the silver table applied."}"#,
    printcolumn = r#"{"name":"Table","type":"string","priority":1,"jsonPath":".spec.source.table","description":"The captured SQL Server table."}"#,
    printcolumn = r#"{"name":"Target","type":"string","priority":1,"jsonPath":".spec.target.name","description":"The bronze Delta table."}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"jsonPath":".status.conditions[?(@.type==\"Ready\")].message","description":"What Ready says, and what to do."}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.sourceRef) || (!has(self.source.host) && !has(self.source.database) && !has(self.source.credentials))",
        "message": "with sourceRef, source.host, source.database and source.credentials come from the CdcSource; leave them out here"
    },
    {
        "rule": "has(self.sourceRef) || (has(self.source.host) && has(self.source.database) && has(self.source.credentials) && has(self.facts))",
        "message": "a stream without sourceRef needs source.host, source.database, source.credentials and facts (or name a CdcSource with sourceRef)"
    }
]))]
pub struct CdcStreamSpec {
    /// Identity of the stream's writes: the Delta `txn` appId of every bronze
    /// commit. Changing it makes the stream a new writer.
    #[schemars(length(min = 1), extend("x-kubernetes-validations" = [
        {
            "rule": "self == oldSelf",
            "message": "appId is immutable: a new appId is a new writer; create a new CdcStream instead"
        },
        {
            "rule": "!self.contains('/')",
            "message": "appId may not contain '/': it separates the parts of the stream's Delta txn ids"
        }
    ]))]
    pub app_id: String,
    /// The SQL Server table to read.
    #[schemars(extend("x-kubernetes-validations" = [
        {
            "rule": "!has(self.host) || !has(oldSelf.host) || self.host == oldSelf.host",
            "message": "source.host is immutable: the checkpoint holds positions of that server's log; create a new CdcStream (or adopt the target) instead",
            "fieldPath": ".host"
        },
        {
            "rule": "!has(self.database) || !has(oldSelf.database) || self.database == oldSelf.database",
            "message": "source.database is immutable: the checkpoint holds positions of that database's log; create a new CdcStream (or adopt the target) instead",
            "fieldPath": ".database"
        },
        {
            "rule": "self.table == oldSelf.table",
            "message": "source.table is immutable: the target holds that table's changes; create a new CdcStream instead",
            "fieldPath": ".table"
        }
    ]))]
    pub source: SourceSpec,
    /// The bronze Delta table the changes go to.
    #[schemars(extend("x-kubernetes-validations" = [
        {
            "rule": "self.location == oldSelf.location",
            "message": "target.location is immutable: the checkpoint belongs to this table; create a new CdcStream instead",
            "fieldPath": ".location"
        },
        {
            "rule": "self.name == oldSelf.name",
            "message": "target.name is immutable: facts rows are keyed by it, so a replayed batch would get a second row; create a new CdcStream instead",
            "fieldPath": ".name"
        },
        {
            "rule": "!self.name.contains('/')",
            "message": "target.name may not contain '/': it separates the parts of the stream's Delta txn ids",
            "fieldPath": ".name"
        }
    ]))]
    pub target: TableSpec,
    /// Directory (path or URI) of the stream's offsets and commits.
    #[schemars(length(min = 1), extend("x-kubernetes-validations" = [{
        "rule": "self == oldSelf",
        "message": "checkpoint is immutable: moving it loses the stream's position; create a new CdcStream instead"
    }]))]
    pub checkpoint: String,
    /// A `CdcSource` in the same namespace whose worker streams this
    /// table: the connection comes from it, and it fills the fields this
    /// stream leaves out from its `defaults`. Without it the stream runs
    /// a worker of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ref: Option<SourceRef>,
    /// The shared Delta table of per-batch facts; with `sourceRef`, the
    /// source's `defaults.facts` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.location == oldSelf.location",
        "message": "facts.location is immutable: the stream's facts rows are idempotent in that table only; create a new CdcStream instead",
        "fieldPath": ".location"
    }]))]
    pub facts: Option<TableSpec>,
    /// Take over a target that holds commits of this appId made by another
    /// checkpoint (one that was replaced, emptied or restored): the stream
    /// goes on after the position the target's newest commit recorded,
    /// in a new, empty checkpoint. See the user guide's "Moving or
    /// rebuilding a stream".
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adopt_target: bool,
    /// object_store options (endpoint, region...) for every location.
    #[serde(default)]
    pub storage_options: BTreeMap<String, String>,
    /// When micro-batches run.
    #[serde(default)]
    pub trigger: TriggerSpec,
    /// Upper bound of source transactions read by one micro-batch
    /// (default 10000, or the source's `defaults`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_commits_per_batch: Option<u64>,
    /// The largest value of one column, in bytes, the stream reads (default
    /// 64 MiB, at most 1 GiB, or the source's `defaults`). A larger value
    /// stops the table with ValueTooLarge before it is sent, so a worker's
    /// memory is bounded whatever the data; leave the column out with
    /// `source.columns`, or raise this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1073741824))]
    pub max_value_bytes: Option<u64>,
    /// Whether and how the current table contents are copied first
    /// (default: an initial snapshot, or the source's `defaults`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotSpec>,
    /// Kubernetes only: stop the worker (scale it to zero) without deleting
    /// the stream; its position is kept. Ignored by `mssql-cdc run`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
    /// Kubernetes only: how the operator runs the worker pod. Ignored by
    /// `mssql-cdc run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<WorkerSpec>,
    /// The control table that says up to which instant the target is
    /// complete; none when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalization: Option<FinalizationSpec>,
    /// A silver table kept from the changes: the source table's current
    /// state, one row per key; none when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silver: Option<SilverSpec>,
    /// What to do when CDC cleanup purged changes the stream had not read
    /// (default `fail`, or the source's `defaults`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_data_loss: Option<OnDataLoss>,
    /// A table on the source the worker writes to, so the max LSN keeps
    /// moving on a quiet database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<HeartbeatSpec>,
    /// Kubernetes: limits of the health conditions, with the defaults of
    /// `mssql-cdc health`'s flags (suited to a continuous stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alerts: Option<AlertsSpec>,
}

/// The policy for changes purged before the stream read them.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnDataLoss {
    /// Stop with DataLossError; nothing is written.
    #[default]
    Fail,
    /// Take a new snapshot, then stream on from it.
    Resnapshot,
    /// Stream on from the oldest change still kept, recording the gap.
    Skip,
}

/// The heartbeat table: one row the worker updates every `interval`.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatSpec {
    /// The CDC-enabled table as `schema.table` (created by the DBA).
    pub table: String,
    /// Time between two writes, e.g. `10s` (default `10s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
}

/// The built-in `maxCommitsPerBatch`.
pub(super) const DEFAULT_MAX_COMMITS_PER_BATCH: u64 = 10_000;

/// `maxValueBytes` when neither the stream nor its source sets it: far
/// above any ordinary value, far below what would strain a worker.
pub const DEFAULT_MAX_VALUE_BYTES: u64 = 64 * 1024 * 1024;

/// The largest `maxValueBytes` allowed: one value and a full record batch
/// together stay below Arrow's 2 GiB offsets of one column.
pub const MAX_VALUE_BYTES_LIMIT: u64 = 1024 * 1024 * 1024;

/// Names the `CdcSource` a stream belongs to.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct SourceRef {
    /// Name of a `CdcSource` in the stream's namespace.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// Connection and table on the SQL Server side.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceSpec {
    /// Host name or address of SQL Server; with `spec.sourceRef`, the
    /// source's and left out here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// TCP port of SQL Server.
    #[serde(default = "default_port")]
    #[schemars(range(min = 1))]
    pub port: u16,
    /// Database holding the table; with `spec.sourceRef`, the source's
    /// and left out here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// The captured table as `schema.table`.
    #[schemars(regex(pattern = r"^[^.]+\.[^.]+$"))]
    pub table: String,
    /// Capture instance to read; the table's newest when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_instance: Option<String>,
    /// Columns to copy; every captured column when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub columns: Option<Vec<String>>,
    /// Time zone of the server's clock (IANA name such as `Europe/Oslo`, or
    /// `UTC`); taken from the server when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_time_zone: Option<String>,
    /// Login of the (least-privilege) CDC reader; with `spec.sourceRef`,
    /// the source's and left out here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<CredentialsSpec>,
    /// Kubernetes: a separate monitoring login that may read capture's
    /// health (the CDC log scan and error views, the capture job); none
    /// when absent. Never the reader's login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring: Option<MonitoringSpec>,
    /// TLS policy of the connection.
    #[serde(default)]
    pub encrypt: Encrypt,
    /// Accept any server certificate (development only).
    #[serde(default)]
    pub trust_server_certificate: bool,
    /// Sessions that read at once: a batch's changes are split at commit
    /// boundaries into this many parts of about equal size, and a snapshot
    /// into this many key ranges, each read on a session of its own. A
    /// batch is still one bronze commit.
    #[serde(default = "default_readers")]
    #[schemars(range(min = 1, max = 16))]
    pub readers: u32,
}

fn default_readers() -> u32 {
    1
}

fn default_port() -> u16 {
    1433
}

/// A SQL login whose password comes from outside the manifest.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialsSpec {
    /// SQL login name.
    pub username: String,
    /// Where the password is read from; never the password itself.
    pub password_from: PasswordFrom,
}

/// The monitoring login: VIEW DATABASE STATE (VIEW DATABASE PERFORMANCE
/// STATE on SQL Server 2022) in the source database, and SELECT on
/// msdb.dbo.cdc_jobs, msdb.dbo.sysjobs and msdb.dbo.sysjobactivity.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MonitoringSpec {
    /// The monitoring login and where its password is read from.
    pub credentials: CredentialsSpec,
}

/// Where the password is read from: exactly one of the three keys.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PasswordFrom {
    /// An environment variable of the process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// A file (one trailing newline ignored), e.g. a mounted Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// A key of a Kubernetes Secret in the stream's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<SecretKeyRef>,
}

/// A key of a Kubernetes Secret.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct SecretKeyRef {
    /// Secret name.
    pub name: String,
    /// Key within the Secret.
    pub key: String,
}

/// TLS policy, as SQL Server clients name it.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Encrypt {
    /// TLS for the whole session; fail without it.
    #[default]
    Required,
    /// TLS when the server offers it.
    Optional,
    /// No TLS at all.
    Off,
}

/// A Delta table: its catalog-style name and where it is stored.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct TableSpec {
    /// Name used in facts rows (`target`) and reports, e.g. `bronze.orders`.
    pub name: String,
    /// Path or URI of the table.
    pub location: String,
}

/// When micro-batches run: at most one of `processingTime` and
/// `availableNow`; `schedule` only with `availableNow`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!(has(self.processingTime) && has(self.availableNow))",
        "message": "trigger: processingTime and availableNow are exclusive; set one of them"
    },
    {
        "rule": "!has(self.schedule) || (has(self.availableNow) && self.availableNow)",
        "message": "trigger.schedule needs availableNow: true (a scheduled stream runs to the current max LSN, then exits)"
    }
]))]
pub struct TriggerSpec {
    /// Interval between batch starts, e.g. `10s`, `5m` (default `10s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processing_time: Option<String>,
    /// Read up to the source's current max LSN in batches, then stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_now: Option<bool>,
    /// Kubernetes only, with `availableNow`: a cron schedule (five fields or
    /// a macro such as `@hourly`) on which the operator starts the worker as
    /// a CronJob. Ignored by `mssql-cdc run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1), extend("x-kubernetes-validations" = [{
        "rule": "self.matches('^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|[0-9A-Za-z*?,/-]+( +[0-9A-Za-z*?,/-]+){4})$')",
        "message": "trigger.schedule: expected five cron fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly, @yearly"
    }]))]
    pub schedule: Option<String>,
}

/// The initial copy of the table's current rows.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotSpec {
    /// `initial` copies the table before streaming changes; `never` does not.
    #[serde(default)]
    pub mode: SnapshotMode,
    /// Rows per snapshot chunk (one bronze commit each).
    #[serde(default = "default_chunk_rows")]
    #[schemars(range(min = 1))]
    pub chunk_rows: u64,
}

impl Default for SnapshotSpec {
    fn default() -> Self {
        SnapshotSpec {
            mode: SnapshotMode::default(),
            chunk_rows: default_chunk_rows(),
        }
    }
}

fn default_chunk_rows() -> u64 {
    100_000
}

/// Whether the stream starts with a snapshot.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SnapshotMode {
    /// Copy the current rows, then stream changes from the snapshot's LSN.
    #[default]
    Initial,
    /// Stream changes only.
    Never,
}

/// The finalization control table a stream keeps its target's row in.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct FinalizationSpec {
    /// Name of the control table in reports, e.g. `ops.table_finalization`.
    pub name: String,
    /// Path or URI of the control table (shared by many streams).
    pub location: String,
    /// The period verdicts are rounded down to: `minute`, `hour` (default)
    /// or `day`.
    #[serde(default)]
    pub granularity: crate::domain::Granularity,
}

/// A silver table: the source table's current state, kept by the stream
/// from each batch's changes (docs/silver.md).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SilverSpec {
    /// Name of the silver table in reports and the finalization control
    /// table, e.g. `silver.orders`.
    pub name: String,
    /// Path or URI of the silver Delta table.
    pub location: String,
    /// The columns identifying a row; default: the capture instance's index
    /// columns (the primary key, or the unique index CDC was enabled with).
    /// They must hold every column of the table's primary key, a unique
    /// constraint or a unique index, or the stream refuses to start; a NULL
    /// in a key column is matched like a value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<Vec<String>>,
    /// What a delete on the source does to the row: `hard` (default)
    /// removes it; `soft` keeps it with `_deleted = true` and the delete's
    /// commit time.
    #[serde(default)]
    pub deletes: SilverDeletes,
}

/// How silver records deletes.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SilverDeletes {
    /// The row goes.
    #[default]
    Hard,
    /// The row stays, marked `_deleted`.
    Soft,
}

/// What the operator and the worker report about a stream.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CdcStreamStatus {
    /// The spec generation the conditions were computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Where the stream is in its life cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Health conditions (liveness, retention headroom, lags...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The facts row of the worker's last batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// The target's row of the finalization control table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalization: Option<FinalizationStatus>,
    /// The silver table's row of the finalization control table, with the
    /// position silver applied (`appliedLsn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silver: Option<FinalizationStatus>,
    /// Purged changes the running worker met, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_loss: Option<DataLossStatus>,
    /// The snapshot the worker runs or ran last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotStatus>,
    /// Capture's health, read with `spec.source.monitoring`'s login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureStatus>,
    /// The worker's own last word: running, or why it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<WorkerStatus>,
}
