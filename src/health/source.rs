//! The database-wide verdict of a CdcSource: up to which LSN and commit
//! time every one of its tables is complete, judged on each table's newest
//! micro-batch row. No table of a source is ahead of the source as a whole,
//! so the answer is the table furthest behind.

use chrono::{DateTime, Utc};

use crate::domain::Lsn;

/// What one target's newest micro-batch row says, for the source verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceTable {
    /// The target table.
    pub target: String,
    /// The CdcSource named by the newest row; `None` for a stream of its
    /// own or a row written before the `source` column existed.
    pub source: Option<String>,
    /// Where that batch stopped reading; the target is complete up to it.
    pub end_lsn: Option<Lsn>,
    /// Commit time of `end_lsn`.
    pub end_commit_ts: Option<DateTime<Utc>>,
}

/// How far the tables of one source are complete.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceCompleteness {
    /// No target's newest row names the source: nothing can be vouched for.
    NoTables,
    /// A table's newest batch has no end position (`end_lsn` NULL), so the
    /// source has none either.
    Unknown {
        /// That table.
        target: String,
    },
    /// Every table holds every change committed up to `lsn`.
    UpTo {
        /// The smallest end LSN over the tables.
        lsn: Lsn,
        /// Its commit time, when the batch knew it.
        commit_ts: Option<DateTime<Utc>>,
        /// The table that holds the minimum (the one holding the source back).
        target: String,
    },
}

/// The verdict on one source.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceVerdict {
    /// The CdcSource's name.
    pub source: String,
    /// The targets whose newest row names it, sorted.
    pub tables: Vec<String>,
    /// Up to where all of them are complete.
    pub completeness: SourceCompleteness,
}

impl SourceVerdict {
    /// Whether the verdict should alert: a source with no table in the
    /// facts, or without a known position, is complete up to nothing.
    pub fn fires(&self) -> bool {
        !matches!(self.completeness, SourceCompleteness::UpTo { .. })
    }
}

/// Judges source `name` over the newest row of every target. A target
/// counts when its newest row names `name`: a stream moved out of the
/// source stops counting with its first row of its own. Ties on the LSN go
/// to the first target by name, so the report is stable.
pub fn assess_source(name: &str, tables: &[SourceTable]) -> SourceVerdict {
    let mut members: Vec<&SourceTable> = tables
        .iter()
        .filter(|t| t.source.as_deref() == Some(name))
        .collect();
    members.sort_by(|a, b| a.target.cmp(&b.target));
    let completeness = if let Some(unknown) = members.iter().find(|t| t.end_lsn.is_none()) {
        SourceCompleteness::Unknown {
            target: unknown.target.clone(),
        }
    } else {
        members
            .iter()
            .filter_map(|t| t.end_lsn.map(|lsn| (lsn, *t)))
            .min_by_key(|(lsn, _)| *lsn)
            .map_or(SourceCompleteness::NoTables, |(lsn, t)| {
                SourceCompleteness::UpTo {
                    lsn,
                    commit_ts: t.end_commit_ts,
                    target: t.target.clone(),
                }
            })
    };
    SourceVerdict {
        source: name.to_string(),
        tables: members.iter().map(|t| t.target.clone()).collect(),
        completeness,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn lsn(n: u8) -> Lsn {
        Lsn::from_low_byte(n)
    }

    fn at(minutes: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap() + chrono::Duration::minutes(minutes)
    }

    fn table(target: &str, source: Option<&str>, end: Option<u8>) -> SourceTable {
        SourceTable {
            target: target.into(),
            source: source.map(String::from),
            end_lsn: end.map(lsn),
            end_commit_ts: end.map(|n| at(i64::from(n))),
        }
    }

    #[test]
    fn the_source_is_complete_up_to_its_slowest_table() {
        use SourceCompleteness::*;
        let up_to = |n: u8, target: &str| UpTo {
            lsn: lsn(n),
            commit_ts: Some(at(i64::from(n))),
            target: target.into(),
        };
        // (case, the newest row of each target, tables counted, verdict)
        let cases: Vec<(&str, Vec<SourceTable>, Vec<&str>, SourceCompleteness)> = vec![
            ("no facts at all", vec![], vec![], NoTables),
            (
                "only streams of their own and older rows",
                vec![table("bronze.a", None, Some(5))],
                vec![],
                NoTables,
            ),
            (
                "one table",
                vec![table("bronze.a", Some("sales"), Some(5))],
                vec!["bronze.a"],
                up_to(5, "bronze.a"),
            ),
            (
                "the minimum over the source's tables, others ignored",
                vec![
                    table("bronze.c", Some("sales"), Some(9)),
                    table("bronze.b", Some("sales"), Some(4)),
                    table("bronze.x", Some("hr"), Some(1)),
                    table("bronze.y", None, Some(2)),
                ],
                vec!["bronze.b", "bronze.c"],
                up_to(4, "bronze.b"),
            ),
            (
                "a tie goes to the first table by name",
                vec![
                    table("bronze.d", Some("sales"), Some(4)),
                    table("bronze.b", Some("sales"), Some(4)),
                ],
                vec!["bronze.b", "bronze.d"],
                up_to(4, "bronze.b"),
            ),
            (
                "a table without an end position",
                vec![
                    table("bronze.a", Some("sales"), Some(4)),
                    table("bronze.b", Some("sales"), None),
                ],
                vec!["bronze.a", "bronze.b"],
                Unknown {
                    target: "bronze.b".into(),
                },
            ),
        ];
        for (case, rows, tables, expected) in cases {
            let verdict = assess_source("sales", &rows);
            assert_eq!(verdict.source, "sales", "{case}");
            assert_eq!(verdict.tables, tables, "{case}");
            assert_eq!(verdict.fires(), !matches!(expected, UpTo { .. }), "{case}");
            assert_eq!(verdict.completeness, expected, "{case}");
        }
    }

    #[test]
    fn an_unknown_commit_time_keeps_the_lsn() {
        let mut slow = table("bronze.a", Some("sales"), Some(3));
        slow.end_commit_ts = None;
        let verdict = assess_source("sales", &[slow, table("bronze.b", Some("sales"), Some(7))]);
        assert_eq!(
            verdict.completeness,
            SourceCompleteness::UpTo {
                lsn: lsn(3),
                commit_ts: None,
                target: "bronze.a".into()
            }
        );
        assert!(!verdict.fires());
    }
}
