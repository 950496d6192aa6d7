//! The `CdcStream` manifest: one schema for local runs and the Kubernetes
//! resource.
//!
//! `types` is the serde/schemars/kube shape users write (`source`: the
//! `CdcSource` of a database whose tables one worker streams); `load` reads YAML and
//! refuses unknown fields; `validate` turns a manifest into a trusted
//! [`StreamConfig`] or errors that name the field and the value;
//! `alerts` holds the health limits; `discovery` which captured tables no
//! stream covers; `credentials` resolves the password
//! without ever showing it; `schedule` checks a cron schedule as a
//! CronJob takes it; `status` is what a stream reports back and
//! `worker` how the operator runs its pod (`worker_schema`: the closed
//! CRD schemas of its volumes, affinity and topology spread).

mod alerts;
mod credentials;
mod discovery;
mod load;
mod schedule;
mod source;
mod status;
mod types;
mod validate;
mod worker;
mod worker_schema;

pub use alerts::{AlertLimits, AlertsSpec, DEFAULT_LIVE_CAPTURE_LAG};
pub use credentials::{CredentialError, PasswordSource, resolve_password};
pub use discovery::{
    DiscoverySpec, DiscoveryStatus, MAX_DISCOVERED_NAMES, PatternError, TableFilter,
    connection_config as source_connection_config, uncovered,
};
pub use load::{
    LoadError, Manifests, UnknownField, UnknownFields, load_documents, load_source_yaml, load_yaml,
};
pub use source::{
    CdcSource, CdcSourceSpec, CdcSourceStatus, ConcurrencySpec, ConnectionSpec, ConnectionStatus,
    DEFAULT_IDLE_COMMIT_INTERVAL, MEMBER_STORAGE_OPTIONS, Membership, SOURCE_KIND, SourcePacing,
    SourceRefError, StreamDefaults, TableCounts, membership as source_membership,
    resolve as resolve_source_stream, stream_config as source_stream_config,
};
pub use status::{
    CaptureErrorStatus, CaptureStatus, DataLossAction, DataLossStatus, FinalizationStatus,
    LatestOffset, Phase, Progress, SnapshotPhase, SnapshotStatus, WorkerState, WorkerStatus,
};
pub use types::{
    CdcStream, CdcStreamSpec, CdcStreamStatus, CredentialsSpec, DEFAULT_MAX_VALUE_BYTES, Encrypt,
    FinalizationSpec, HeartbeatSpec, MAX_VALUE_BYTES_LIMIT, MonitoringSpec, OnDataLoss,
    PasswordFrom, SecretKeyRef, SilverDeletes, SilverSpec, SnapshotMode, SnapshotSpec, SourceRef,
    SourceSpec, TableSpec, TriggerSpec,
};
pub use validate::{
    API_VERSION, FinalizationConfig, HeartbeatConfig, KIND, MAX_READERS, MonitoringLogin,
    SilverConfig, SourceConfig, SpecError, StreamConfig, TableConfig, Trigger, ValidationErrors,
};
pub use worker::{FsGroupChangePolicy, TMP_VOLUME, WorkerPodSecurity, WorkerSpec};
pub use worker_schema::MAX_VOLUMES;
