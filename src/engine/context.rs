//! What every part of one run shares: the manifest, the caller's options,
//! the warnings raised so far and the tallies it returns.

use super::facts_row::Stream;
use super::observer::Observer;
use super::options::{RunOptions, RunSummary};
use super::plan::PlanOptions;
use super::warnings::Warnings;
use crate::domain::{FactRow, Lsn};
use crate::source::changed_tables::ChangeWindow;
use crate::source::round_marks::QuietWindow;
use crate::spec::{StreamConfig, Trigger};

/// One run of a stream.
pub struct Run<'a> {
    /// The manifest.
    pub config: &'a StreamConfig,
    /// How the caller asked it to run.
    pub options: &'a RunOptions,
    /// Warnings waiting for a facts row.
    pub warnings: Warnings,
    /// What the run has done.
    pub summary: RunSummary,
    /// `--once` or availableNow: the max LSN seen when the run started.
    pub once_target: Option<Lsn>,
    /// The facts row of a snapshot this run copied, kept until the run has
    /// reported it: a completion whose write answered an error is confirmed
    /// by the retry, which must still report it.
    pub copied_snapshot: Option<(u64, FactRow)>,
    /// Set by a step that leaves the stream caught up: the window its next
    /// batch would read, which a source's round asks about.
    pub caught_up: Option<ChangeWindow>,
    /// The source's round found the window of `caught_up` without a
    /// change and read what its idle batch needs: the next step plans it
    /// from that, asking the session nothing (`source::round_marks`).
    pub quiet: Option<QuietWindow>,
    /// A source's table holds one of `concurrency.reads` slots for a step.
    pub read_permit: Option<tokio::sync::OwnedSemaphorePermit>,
    /// A source's table is counted in a step while it may still add rows
    /// to the source's group commits (`source_writes.rs`); not while it
    /// copies a snapshot, which no group waits for.
    pub in_step: Option<super::source_writes::InStep>,
    /// The newest DDL statement for which the instance's column types were
    /// read again (`column_types`).
    pub types_read_for: Option<Lsn>,
    /// The columns this run widened in bronze, for the `schema_change` row
    /// of the statement that did it.
    pub widened: Vec<crate::lake::retype::Retype>,
    /// How long the lake's store has failed this run's attempts: the
    /// status names an outage past `spec.alerts.storeOutageAfter`.
    pub store_outage: std::sync::Arc<super::store_outage::StoreOutage>,
}

impl<'a> Run<'a> {
    /// A run that has done nothing yet.
    pub fn new(config: &'a StreamConfig, options: &'a RunOptions) -> Self {
        Run {
            config,
            options,
            warnings: Warnings::new(&options.warnings),
            summary: RunSummary::default(),
            once_target: None,
            copied_snapshot: None,
            caught_up: None,
            quiet: None,
            read_permit: None,
            in_step: None,
            types_read_for: None,
            widened: Vec::new(),
            store_outage: super::store_outage::StoreOutage::new(
                options.observer.clone(),
                config.alerts.store_outage_after,
            ),
        }
    }

    /// Whether the run stops once caught up.
    pub fn once(&self) -> bool {
        self.options.once || self.config.trigger == Trigger::AvailableNow
    }

    /// Where progress goes.
    pub fn observer(&self) -> &dyn Observer {
        self.options.observer.as_ref()
    }

    /// The stream's identity in its facts rows.
    pub fn stream(&self) -> Stream<'a> {
        Stream {
            target: &self.config.target.name,
            app_id: &self.config.app_id,
            source: self.config.source_name.as_deref(),
        }
    }

    /// The settings planning follows.
    pub fn plan_options(&self) -> PlanOptions {
        PlanOptions {
            once_target: self.once_target,
            max_commits: self.config.max_commits_per_batch.get(),
            on_data_loss: self.config.on_data_loss,
        }
    }
}
