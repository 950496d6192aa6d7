//! Exactly-once rests on one idea (docs/adr/0002-exactly-once.md): every
//! commit that adds rows a batch or snapshot chunk brings (bronze, silver,
//! facts) carries a Delta `txn` action, an application id and a version
//! that only grows, and a commit whose version the table already records
//! is not made again. This file builds every application id the product
//! writes and states the "already done" rule once.
//!
//! Some commits carry no `txn`, because repeating them changes nothing:
//! adding missing columns (bronze's and silver's `add_missing_columns`,
//! which add only what is still missing), silver's `drop_older_than`
//! after a resnapshot (deletes or marks rows older than an LSN, the same
//! rows each time), the finalization table's MERGE (never moves a verdict
//! back) and maintenance (OPTIMIZE, VACUUM).

use crate::domain::BatchId;

/// The Delta `txn` of one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Txn {
    /// The application id: which sequence of commits this is.
    pub app_id: String,
    /// The commit's place in that sequence.
    pub version: i64,
}

/// Which sequence of a stream's facts a facts commit belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FactSequence {
    /// The rows of one micro-batch: its row (event NULL) and the event rows
    /// (schema_change, capture_instance_switched, data_skipped) it carries.
    Batch(BatchId),
    /// The row of one snapshot (bootstrap or resnapshot), numbered by the
    /// engine from 0 in the order the stream took them.
    Snapshot(u64),
}

impl Txn {
    /// A micro-batch's bronze commit: the stream's bare appId, versioned
    /// by batch id (so an appId is also a bronze table's writer identity).
    pub fn bronze_batch(app_id: &str, batch: BatchId) -> Txn {
        Txn {
            app_id: app_id.to_string(),
            version: batch.txn_version(),
        }
    }

    /// The sequence of snapshot `snapshot`'s chunks in bronze, versioned by
    /// chunk number.
    pub fn snapshot_chunks(app_id: &str, snapshot: u64) -> String {
        format!("{app_id}/snapshot/{snapshot}")
    }

    /// One chunk of snapshot `snapshot`.
    pub fn snapshot_chunk(app_id: &str, snapshot: u64, chunk: u64) -> Txn {
        Txn {
            app_id: Self::snapshot_chunks(app_id, snapshot),
            version: saturating_version(chunk),
        }
    }

    /// The silver commit that applies a micro-batch's bronze commit:
    /// silver's own sequence, versioned by batch id like the bronze one.
    pub fn silver_batch(app_id: &str, batch: BatchId) -> Txn {
        Txn {
            app_id: format!("{app_id}/silver"),
            version: batch.txn_version(),
        }
    }

    /// The sequence of silver commits applying snapshot `snapshot`'s chunks.
    pub fn silver_chunks(app_id: &str, snapshot: u64) -> String {
        format!("{app_id}/silver/snapshot/{snapshot}")
    }

    /// The silver commit that applies chunk `chunk` of snapshot `snapshot`.
    pub fn silver_chunk(app_id: &str, snapshot: u64, chunk: u64) -> Txn {
        Txn {
            app_id: Self::silver_chunks(app_id, snapshot),
            version: saturating_version(chunk),
        }
    }

    /// The silver commit that fills a silver table added to a stream that
    /// already ran, from bronze's rows (`engine::silver_fill`): done once.
    pub fn silver_fill(app_id: &str) -> Txn {
        Txn {
            app_id: format!("{app_id}/silver/fill"),
            version: 0,
        }
    }

    /// The commit in words, as an error names it: a batch, or a snapshot's
    /// chunk (read from the shape the constructors above give the id).
    pub fn describe(&self) -> String {
        match self.app_id.rsplit_once("/snapshot/") {
            Some((_, snapshot)) => format!("chunk {} of snapshot {snapshot}", self.version),
            None => format!("batch {}", self.version),
        }
    }

    /// A stream's facts commit. The facts table is shared by many streams,
    /// so the id names the stream (appId and target) and the sequence.
    pub fn facts(target: &str, app_id: &str, sequence: FactSequence) -> Txn {
        let (kind, version) = match sequence {
            FactSequence::Batch(id) => ("batch", id.txn_version()),
            FactSequence::Snapshot(n) => ("snapshot", saturating_version(n)),
        };
        Txn {
            app_id: format!("mssql-cdc/facts/{kind}/{app_id}/{target}"),
            version,
        }
    }

    /// Whether a table whose newest version for this application id is
    /// `committed` already holds this commit. Versions only grow, so any
    /// version at or past this one means it was made.
    pub fn is_done(&self, committed: Option<i64>) -> bool {
        committed.is_some_and(|version| version >= self.version)
    }
}

fn saturating_version(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: u64) -> BatchId {
        BatchId::new(n).unwrap()
    }

    #[test]
    fn app_ids_keep_the_forms_existing_tables_hold() {
        assert_eq!(
            Txn::bronze_batch("orders-v1", batch(7)),
            Txn {
                app_id: "orders-v1".into(),
                version: 7
            }
        );
        assert_eq!(
            Txn::snapshot_chunk("orders-v1", 0, 3),
            Txn {
                app_id: "orders-v1/snapshot/0".into(),
                version: 3
            }
        );
        let facts = Txn::facts("bronze.orders", "orders-v1", FactSequence::Batch(batch(2)));
        assert_eq!(
            facts.app_id,
            "mssql-cdc/facts/batch/orders-v1/bronze.orders"
        );
        assert_eq!(
            Txn::silver_batch("orders-v1", batch(7)),
            Txn {
                app_id: "orders-v1/silver".into(),
                version: 7
            }
        );
        assert_eq!(
            Txn::silver_chunk("orders-v1", 1, 2).app_id,
            "orders-v1/silver/snapshot/1"
        );
        let snapshot = Txn::facts("bronze.orders", "orders-v1", FactSequence::Snapshot(1));
        assert_eq!(
            (snapshot.app_id.as_str(), snapshot.version),
            ("mssql-cdc/facts/snapshot/orders-v1/bronze.orders", 1)
        );
    }

    #[test]
    fn a_commit_is_done_once_its_version_or_a_later_one_is_recorded() {
        let txn = Txn::bronze_batch("a", batch(5));
        let cases = [
            (None, false),
            (Some(4), false),
            (Some(5), true),
            (Some(9), true),
        ];
        for (committed, done) in cases {
            assert_eq!(txn.is_done(committed), done, "{committed:?}");
        }
    }
}
