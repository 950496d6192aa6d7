//! Turning a manifest into a trusted [`StreamConfig`]. Every check reports the
//! field path and the offending value; all problems are reported at once.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::num::NonZeroU64;
use std::time::Duration;

use super::alerts::{AlertLimits, parse_duration};
use super::credentials::PasswordSource;
use super::schedule::check_schedule;
use super::types::{
    CdcStreamSpec, Encrypt, FinalizationSpec, HeartbeatSpec, OnDataLoss, SilverDeletes, SilverSpec,
    SnapshotMode, TableSpec,
};
use crate::domain::{CaptureInstance, Granularity, TableName};
use crate::lake::StorageLocation;

/// The `apiVersion` of this schema.
pub const API_VERSION: &str = "mssql-cdc.io/v1alpha1";
/// The `kind` of this schema.
pub const KIND: &str = "CdcStream";

/// Interval between batches when the manifest sets no trigger.
const DEFAULT_PROCESSING_TIME: Duration = Duration::from_secs(10);

/// The most sessions `spec.source.readers` may open for one stream: enough
/// to saturate a server's scan of one change table, few enough that a
/// stream cannot exhaust its worker threads.
pub const MAX_READERS: u32 = 16;

/// Interval between heartbeat writes when the manifest sets none.
const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);

/// One invalid value in a manifest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A required text is empty.
    #[error("{field}: must not be empty")]
    Empty {
        /// Field path.
        field: String,
    },
    /// A count or port that must be positive.
    #[error("{field}: must be > 0, got {value}")]
    NotPositive {
        /// Field path.
        field: String,
        /// The value given.
        value: u64,
    },
    /// A count outside the range the product supports.
    #[error("{field}: must be between {min} and {max}, got {value}")]
    OutOfRange {
        /// Field path.
        field: String,
        /// The smallest value allowed.
        min: u64,
        /// The largest value allowed.
        max: u64,
        /// The value given.
        value: u64,
    },
    /// A two-part SQL Server name without its schema (or with more parts).
    #[error("{field}: expected schema.table, got {value:?}")]
    TableName {
        /// Field path.
        field: String,
        /// The value given.
        value: String,
    },
    /// Two keys that cannot be set together.
    #[error("{field}: {first} and {second} are exclusive")]
    Exclusive {
        /// Field path of the parent.
        field: String,
        /// One key.
        first: &'static str,
        /// The other key.
        second: &'static str,
    },
    /// None or several of a set of alternatives.
    #[error("{field}: set exactly one of {choices}, got {got}")]
    ExactlyOne {
        /// Field path of the parent.
        field: String,
        /// The alternatives.
        choices: &'static str,
        /// The keys that were set.
        got: String,
    },
    /// Any other invalid value, with the reason.
    #[error("{field}: {reason}, got {value:?}")]
    Invalid {
        /// Field path.
        field: String,
        /// The value given.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
}

/// Every problem of one manifest, one per line when displayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationErrors(pub Vec<SpecError>);

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

/// When batches run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// Continuously, one batch per interval.
    ProcessingTime(Duration),
    /// Up to the source's max LSN at start, then exit.
    AvailableNow,
}

/// A Delta table with a parsed location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableConfig {
    /// Name written into facts rows.
    pub name: String,
    /// Where it is stored.
    pub location: StorageLocation,
}

/// The validated finalization control table of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalizationConfig {
    /// The control table.
    pub table: TableConfig,
    /// The period verdicts are rounded down to.
    pub granularity: Granularity,
}

/// The validated silver table of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SilverConfig {
    /// The table.
    pub table: TableConfig,
    /// Its key columns, when the manifest names them (else the capture
    /// instance's).
    pub keys: Option<Vec<String>>,
    /// Whether deletes remove rows or mark them.
    pub deletes: SilverDeletes,
}

/// The validated source side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceConfig {
    /// Host name or address.
    pub host: String,
    /// TCP port (never 0).
    pub port: u16,
    /// Database name.
    pub database: String,
    /// The captured table.
    pub table: TableName,
    /// Capture instance to read, or the newest when `None`.
    pub capture_instance: Option<CaptureInstance>,
    /// Columns to read (non-empty, distinct), or all captured when `None`.
    pub columns: Option<Vec<String>>,
    /// SQL login.
    pub username: String,
    /// Where the password is.
    pub password: PasswordSource,
    /// TLS policy.
    pub encrypt: Encrypt,
    /// Whether any server certificate is accepted.
    pub trust_server_certificate: bool,
    /// The server clock's zone when the manifest names it; the server's
    /// own offset is used otherwise.
    pub source_time_zone: Option<chrono_tz::Tz>,
    /// Sessions that read at once (1 to [`MAX_READERS`]).
    pub readers: usize,
    /// The monitoring login (`spec.source.monitoring`), when given.
    pub monitoring: Option<MonitoringLogin>,
}

/// A login that may read capture's health, never the reader's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonitoringLogin {
    /// SQL login.
    pub username: String,
    /// Where its password is.
    pub password: PasswordSource,
}

/// The validated heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatConfig {
    /// The table written to.
    pub table: TableName,
    /// Time between writes.
    pub interval: Duration,
}

/// A manifest that passed every check: what the engine runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamConfig {
    /// The Delta `txn` appId of bronze commits.
    pub app_id: String,
    /// SQL Server side.
    pub source: SourceConfig,
    /// Bronze table.
    pub target: TableConfig,
    /// Offsets and commits directory.
    pub checkpoint: StorageLocation,
    /// Facts table.
    pub facts: TableConfig,
    /// object_store options from the manifest.
    pub storage_options: BTreeMap<String, String>,
    /// When batches run.
    pub trigger: Trigger,
    /// Most source transactions per batch.
    pub max_commits_per_batch: NonZeroU64,
    /// The largest value of one column the stream reads (`maxValueBytes`).
    pub max_value_bytes: u64,
    /// Whether the stream snapshots first.
    pub snapshot_mode: SnapshotMode,
    /// Rows per snapshot chunk.
    pub snapshot_chunk_rows: NonZeroU64,
    /// What purged changes make the stream do.
    pub on_data_loss: OnDataLoss,
    /// Take over a target another checkpoint wrote (`spec.adoptTarget`).
    pub adopt_target: bool,
    /// The heartbeat, if any.
    pub heartbeat: Option<HeartbeatConfig>,
    /// The finalization control table, when the manifest names one.
    pub finalization: Option<FinalizationConfig>,
    /// The silver table, when the manifest names one.
    pub silver: Option<SilverConfig>,
    /// The health limits (`spec.alerts` with its defaults).
    pub alerts: AlertLimits,
    /// The CdcSource whose worker runs this stream; None for a stream of
    /// its own. Its facts rows carry it in `source`, so a database's
    /// tables can be judged together (`mssql-cdc health --source`).
    pub source_name: Option<String>,
}

/// Collects errors while checking fields, so one run reports them all.
#[derive(Default)]
struct Checker(Vec<SpecError>);

impl Checker {
    /// A text the manifest must set (an absent one is reported as empty).
    fn required_text(&mut self, field: &str, value: Option<&str>) -> String {
        self.text(field, value.unwrap_or_default())
    }

    fn text(&mut self, field: &str, value: &str) -> String {
        if value.trim().is_empty() {
            self.0.push(SpecError::Empty {
                field: field.into(),
            });
        }
        value.to_string()
    }

    /// A name that becomes one part of the stream's Delta `txn` ids
    /// (`lake::txn`): a `/` in it would let two streams' ids read alike
    /// (appId `a/b` with target `c`, appId `a` with target `b/c`).
    fn id_part(&mut self, field: &str, value: &str) {
        if value.contains('/') {
            self.0.push(SpecError::Invalid {
                field: field.into(),
                value: value.into(),
                reason: "may not contain '/', which separates the parts of the stream's Delta \
                         txn ids"
                    .into(),
            });
        }
    }

    fn positive(&mut self, field: &str, value: u64) -> NonZeroU64 {
        NonZeroU64::new(value).unwrap_or_else(|| {
            self.0.push(SpecError::NotPositive {
                field: field.into(),
                value,
            });
            NonZeroU64::MIN
        })
    }

    fn within(&mut self, field: &str, value: u32, min: u32, max: u32) -> u32 {
        let within = self.within_u64(field, value.into(), min.into(), max.into());
        u32::try_from(within).unwrap_or(min)
    }

    fn within_u64(&mut self, field: &str, value: u64, min: u64, max: u64) -> u64 {
        if (min..=max).contains(&value) {
            return value;
        }
        self.0.push(SpecError::OutOfRange {
            field: field.into(),
            min,
            max,
            value,
        });
        min
    }

    fn location(&mut self, field: &str, value: &str) -> Option<StorageLocation> {
        StorageLocation::parse(value)
            .map_err(|e| {
                self.0.push(SpecError::Invalid {
                    field: field.into(),
                    value: value.into(),
                    reason: match e {
                        crate::lake::StorageError::Location { reason, .. } => reason,
                        other => other.to_string(),
                    },
                })
            })
            .ok()
    }

    fn table(&mut self, field: &str, spec: &TableSpec) -> Option<TableConfig> {
        let name = self.text(&format!("{field}.name"), &spec.name);
        let location = self.location(&format!("{field}.location"), &spec.location)?;
        Some(TableConfig { name, location })
    }

    /// Maintenance vacuums every file of a table's directory that no
    /// commit added: a checkpoint or another table inside it would be
    /// deleted. `(field, location, is a Delta table)`.
    fn none_exposed_inside_a_table(
        &mut self,
        locations: &[(&str, Option<&StorageLocation>, bool)],
    ) {
        for (field, location, _) in locations {
            let Some(location) = location else { continue };
            let around = locations.iter().find(|(_, table, is_table)| {
                *is_table && table.is_some_and(|table| location.exposed_inside(table))
            });
            if let Some((table_field, _, _)) = around {
                self.0.push(SpecError::Invalid {
                    field: (*field).into(),
                    value: location.to_string(),
                    reason: format!(
                        "it lies inside the Delta table of {table_field}, whose maintenance \
                         deletes every file no commit added; give it a location of its own, or a \
                         folder of that table whose name starts with _"
                    ),
                });
            }
        }
    }

    fn finalization(&mut self, spec: Option<&FinalizationSpec>) -> Option<FinalizationConfig> {
        let spec = spec?;
        let table = self.table(
            "spec.finalization",
            &TableSpec {
                name: spec.name.clone(),
                location: spec.location.clone(),
            },
        )?;
        Some(FinalizationConfig {
            table,
            granularity: spec.granularity,
        })
    }

    fn silver(
        &mut self,
        spec: Option<&SilverSpec>,
        target: Option<&TableConfig>,
    ) -> Option<SilverConfig> {
        let spec = spec?;
        let table = self.table(
            "spec.silver",
            &TableSpec {
                name: spec.name.clone(),
                location: spec.location.clone(),
            },
        )?;
        if target.is_some_and(|t| t.location == table.location || t.name == table.name) {
            self.0.push(SpecError::Invalid {
                field: "spec.silver".into(),
                value: spec.location.clone(),
                reason: "silver must be a table of its own, not the target".into(),
            });
        }
        let keys = match &spec.keys {
            Some(keys) if keys.is_empty() || keys.iter().any(|k| k.trim().is_empty()) => {
                self.0.push(SpecError::Invalid {
                    field: "spec.silver.keys".into(),
                    value: keys.join(","),
                    reason: "name at least one column, none empty (or leave keys out for the capture instance's)".into(),
                });
                None
            }
            keys => keys.clone(),
        };
        Some(SilverConfig {
            table,
            keys,
            deletes: spec.deletes,
        })
    }

    fn table_name(&mut self, field: &str, value: &str) -> Option<TableName> {
        let parsed = TableName::parse(value);
        if parsed.is_none() {
            self.0.push(SpecError::TableName {
                field: field.into(),
                value: value.into(),
            });
        }
        parsed
    }

    fn trigger(&mut self, spec: &super::types::TriggerSpec) -> Trigger {
        if let Some(schedule) = &spec.schedule {
            if spec.available_now != Some(true) {
                self.0.push(SpecError::Invalid {
                    field: "spec.trigger.schedule".into(),
                    value: schedule.clone(),
                    reason: "needs availableNow: true".into(),
                });
            }
            if let Err(reason) = check_schedule(schedule) {
                self.0.push(SpecError::Invalid {
                    field: "spec.trigger.schedule".into(),
                    value: schedule.clone(),
                    reason,
                });
            }
        }
        match (&spec.processing_time, spec.available_now) {
            (Some(_), Some(_)) => {
                self.0.push(SpecError::Exclusive {
                    field: "spec.trigger".into(),
                    first: "processingTime",
                    second: "availableNow",
                });
                Trigger::AvailableNow
            }
            (None, Some(true)) => Trigger::AvailableNow,
            (None, Some(false) | None) => Trigger::ProcessingTime(DEFAULT_PROCESSING_TIME),
            (Some(text), None) => Trigger::ProcessingTime(
                parse_duration(
                    "spec.trigger.processingTime",
                    Some(text),
                    DEFAULT_PROCESSING_TIME,
                )
                .unwrap_or_else(|error| {
                    self.0.push(error);
                    DEFAULT_PROCESSING_TIME
                }),
            ),
        }
    }

    fn heartbeat(&mut self, spec: Option<&HeartbeatSpec>) -> Option<HeartbeatConfig> {
        let spec = spec?;
        let table = self.table_name("spec.heartbeat.table", &spec.table);
        let interval = parse_duration(
            "spec.heartbeat.interval",
            spec.interval.as_deref(),
            DEFAULT_HEARTBEAT_INTERVAL,
        )
        .unwrap_or_else(|error| {
            self.0.push(error);
            DEFAULT_HEARTBEAT_INTERVAL
        });
        Some(HeartbeatConfig {
            table: table?,
            interval,
        })
    }

    fn time_zone(&mut self, value: Option<&String>) -> Option<chrono_tz::Tz> {
        let value = value?;
        value
            .parse::<chrono_tz::Tz>()
            .map_err(|_| {
                self.0.push(SpecError::Invalid {
                    field: "spec.source.sourceTimeZone".into(),
                    value: value.clone(),
                    reason: "expected an IANA time zone name such as Europe/Oslo, or UTC".into(),
                })
            })
            .ok()
    }

    fn monitoring(
        &mut self,
        spec: Option<&super::types::MonitoringSpec>,
        reader: &str,
    ) -> Option<MonitoringLogin> {
        let credentials = &spec?.credentials;
        let field = "spec.source.monitoring.credentials";
        let username = self.text(&format!("{field}.username"), &credentials.username);
        if username.eq_ignore_ascii_case(reader) {
            self.0.push(SpecError::Invalid {
                field: format!("{field}.username"),
                value: username.clone(),
                reason: "must be a login of its own, not the reader's: the reader keeps least \
                         privilege"
                    .into(),
            });
        }
        let password =
            self.password_at(&format!("{field}.passwordFrom"), &credentials.password_from)?;
        Some(MonitoringLogin { username, password })
    }

    fn password(&mut self, spec: &super::types::PasswordFrom) -> Option<PasswordSource> {
        self.password_at("spec.source.credentials.passwordFrom", spec)
    }

    fn password_at(
        &mut self,
        field: &str,
        spec: &super::types::PasswordFrom,
    ) -> Option<PasswordSource> {
        let mut set = Vec::new();
        if let Some(name) = &spec.env {
            set.push((
                "env",
                PasswordSource::Env(self.text(&format!("{field}.env"), name)),
            ));
        }
        if let Some(path) = &spec.file {
            self.text(&format!("{field}.file"), &path.to_string_lossy());
            set.push(("file", PasswordSource::File(path.clone())));
        }
        if let Some(reference) = &spec.secret_key_ref {
            let name = self.text(&format!("{field}.secretKeyRef.name"), &reference.name);
            let key = self.text(&format!("{field}.secretKeyRef.key"), &reference.key);
            set.push(("secretKeyRef", PasswordSource::SecretKeyRef { name, key }));
        }
        if set.len() == 1 {
            return set.pop().map(|(_, source)| source);
        }
        let got: Vec<&str> = set.iter().map(|(key, _)| *key).collect();
        self.0.push(SpecError::ExactlyOne {
            field: field.to_string(),
            choices: "env, file, secretKeyRef",
            got: if got.is_empty() {
                "none".into()
            } else {
                got.join(", ")
            },
        });
        None
    }

    fn columns(&mut self, columns: &Option<Vec<String>>) -> Option<Vec<String>> {
        let columns = columns.as_ref()?;
        let field = "spec.source.columns";
        if columns.is_empty() {
            self.0.push(SpecError::Empty {
                field: field.into(),
            });
        }
        let mut seen = HashSet::new();
        for (i, column) in columns.iter().enumerate() {
            let item = format!("{field}[{i}]");
            self.text(&item, column);
            // SQL Server compares column names case-insensitively by default.
            if !seen.insert(column.to_lowercase()) {
                self.0.push(SpecError::Invalid {
                    field: item,
                    value: column.clone(),
                    reason: "listed twice".into(),
                });
            }
        }
        Some(columns.clone())
    }
}

impl StreamConfig {
    /// Options the manifest sets that cannot take effect, as warnings: they
    /// change nothing, but whoever wrote them expects them to.
    pub fn unusable_options(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.source.trust_server_certificate && self.source.encrypt == Encrypt::Off {
            warnings.push(
                "spec.source.trustServerCertificate: true has no effect with encrypt: off \
                 (the connection uses no TLS at all)"
                    .to_string(),
            );
        }
        warnings
    }
}

impl CdcStreamSpec {
    /// Checks every field; returns the config the engine runs, or every
    /// problem found.
    pub fn validate(&self) -> Result<StreamConfig, ValidationErrors> {
        let mut c = Checker::default();
        let app_id = c.text("spec.appId", &self.app_id);
        c.id_part("spec.appId", &app_id);
        if let Some(source) = &self.source_ref {
            c.0.push(super::source::needs_its_source(&source.name));
        }
        let s = &self.source;
        let host = c.required_text("spec.source.host", s.host.as_deref());
        if s.port == 0 {
            c.positive("spec.source.port", 0);
        }
        let database = c.required_text("spec.source.database", s.database.as_deref());
        let table = c.table_name("spec.source.table", &s.table);
        let capture_instance = s.capture_instance.as_ref().and_then(|name| {
            CaptureInstance::new(name.clone())
                .map_err(|_| {
                    c.0.push(SpecError::Invalid {
                        field: "spec.source.captureInstance".into(),
                        value: name.clone(),
                        reason: "expected 1 to 100 printable characters".into(),
                    })
                })
                .ok()
        });
        let columns = c.columns(&s.columns);
        let (username, password) = match &s.credentials {
            Some(credentials) => (
                c.text("spec.source.credentials.username", &credentials.username),
                c.password(&credentials.password_from),
            ),
            None => {
                c.0.push(SpecError::Empty {
                    field: "spec.source.credentials".into(),
                });
                (String::new(), None)
            }
        };
        let monitoring = c.monitoring(s.monitoring.as_ref(), &username);
        c.id_part("spec.target.name", &self.target.name);
        let target = c.table("spec.target", &self.target);
        let checkpoint = c.location("spec.checkpoint", &self.checkpoint);
        let facts = match &self.facts {
            Some(facts) => c.table("spec.facts", facts),
            None => {
                c.0.push(SpecError::Empty {
                    field: "spec.facts".into(),
                });
                None
            }
        };
        let trigger = c.trigger(&self.trigger);
        let max_commits_per_batch = c.positive(
            "spec.maxCommitsPerBatch",
            self.max_commits_per_batch
                .unwrap_or(super::types::DEFAULT_MAX_COMMITS_PER_BATCH),
        );
        let max_value_bytes = c.within_u64(
            "spec.maxValueBytes",
            self.max_value_bytes
                .unwrap_or(super::types::DEFAULT_MAX_VALUE_BYTES),
            1,
            super::types::MAX_VALUE_BYTES_LIMIT,
        );
        let snapshot = self.snapshot.clone().unwrap_or_default();
        let snapshot_chunk_rows = c.positive("spec.snapshot.chunkRows", snapshot.chunk_rows);
        let readers = c.within("spec.source.readers", s.readers, 1, MAX_READERS);
        let source_time_zone = c.time_zone(s.source_time_zone.as_ref());
        let heartbeat = c.heartbeat(self.heartbeat.as_ref());
        let finalization = c.finalization(self.finalization.as_ref());
        let silver = c.silver(self.silver.as_ref(), target.as_ref());
        let alerts = match self.alerts.as_ref().map(|a| a.limits()) {
            None => AlertLimits::default(),
            Some(Ok(limits)) => limits,
            Some(Err(errors)) => {
                c.0.extend(errors);
                AlertLimits::default()
            }
        };

        c.none_exposed_inside_a_table(&[
            (
                "spec.target.location",
                target.as_ref().map(|t| &t.location),
                true,
            ),
            ("spec.checkpoint", checkpoint.as_ref(), false),
            (
                "spec.facts.location",
                facts.as_ref().map(|t| &t.location),
                true,
            ),
            (
                "spec.finalization.location",
                finalization.as_ref().map(|f| &f.table.location),
                true,
            ),
            (
                "spec.silver.location",
                silver.as_ref().map(|s| &s.table.location),
                true,
            ),
        ]);

        match (table, password, target, checkpoint, facts) {
            (Some(table), Some(password), Some(target), Some(checkpoint), Some(facts))
                if c.0.is_empty() =>
            {
                Ok(StreamConfig {
                    app_id,
                    source: SourceConfig {
                        host,
                        port: s.port,
                        database,
                        table,
                        capture_instance,
                        columns,
                        username,
                        password,
                        encrypt: s.encrypt,
                        trust_server_certificate: s.trust_server_certificate,
                        source_time_zone,
                        readers: usize::try_from(readers).unwrap_or(1),
                        monitoring,
                    },
                    target,
                    checkpoint,
                    facts,
                    storage_options: self.storage_options.clone(),
                    trigger,
                    max_commits_per_batch,
                    max_value_bytes,
                    snapshot_mode: snapshot.mode,
                    snapshot_chunk_rows,
                    on_data_loss: self.on_data_loss.unwrap_or_default(),
                    adopt_target: self.adopt_target,
                    heartbeat,
                    finalization,
                    silver,
                    alerts,
                    // A CdcStream validated on its own runs its own worker.
                    source_name: None,
                })
            }
            _ => Err(ValidationErrors(c.0)),
        }
    }
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
