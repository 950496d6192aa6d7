//! The run's warnings: logged when raised, and recorded once per run in the
//! `detail` of the next micro-batch row that reads a range, as
//! `{"warnings": [...]}`. A warning stays pending until a row carrying it
//! is durable, so a batch whose row an earlier (crashed) run had already
//! written passes them on to the next batch.

use std::collections::BTreeSet;

use super::EngineError;
use super::stream::StreamRun;
use crate::source::cdc;

/// The warnings of one run.
#[derive(Debug, Default)]
pub(super) struct Warnings {
    /// Raised and not yet in a durable facts row.
    pending: Vec<String>,
    /// Every warning raised this run, so each is recorded once.
    seen: BTreeSet<String>,
}

impl Warnings {
    /// Starts with warnings raised before the run (manifest warnings, which
    /// the caller has logged).
    pub(super) fn new(initial: &[String]) -> Self {
        let mut warnings = Warnings::default();
        for text in initial {
            if warnings.seen.insert(text.clone()) {
                warnings.pending.push(text.clone());
            }
        }
        warnings
    }

    /// The `detail` a micro-batch row carries, if warnings are pending.
    pub(super) fn detail(&self) -> Option<String> {
        (!self.pending.is_empty())
            .then(|| serde_json::json!({ "warnings": self.pending }).to_string())
    }

    /// A row with `detail` is durable: its warnings are recorded.
    pub(super) fn recorded(&mut self, detail: Option<&str>) {
        if detail.is_some() && detail == self.detail().as_deref() {
            self.pending.clear();
        }
    }
}

impl StreamRun {
    /// Logs `text` and records it in the next micro-batch row, once per run.
    pub(super) fn warn(&mut self, text: String) {
        if self.warnings.seen.insert(text.clone()) {
            tracing::warn!("{text}");
            self.warnings.pending.push(text);
        }
    }

    /// The warnings about what the stream does not read, checked once
    /// connected: computed columns (CDC does not capture them) and captured
    /// columns `spec.source.columns` leaves out.
    pub(super) async fn check_columns(&mut self) -> Result<(), EngineError> {
        let table = self.config.source.table.clone();
        let computed = cdc::computed_columns(self.client()?, &table).await?;
        if !computed.is_empty() {
            self.warn(format!(
                "{}.{}: computed columns are not captured by CDC and are left out of bronze: {}",
                table.schema,
                table.table,
                computed.join(", ")
            ));
        }
        let info = self.info()?.clone();
        self.warn_left_out_columns(&info).await
    }
}
