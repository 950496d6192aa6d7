//! Where a batch's LSN range is split for a parallel read: how many changes
//! each commit of the range holds, and the cut points that give parts of
//! about equal size. Every change of a transaction carries the
//! transaction's commit LSN (`__$start_lsn`), so a part that ends at a
//! commit LSN never splits a transaction, and the parts together read
//! exactly what the whole range reads.

use tiberius::ColumnData;

use super::SourceError;
use super::cdc::{CaptureInfo, lsn_of};
use super::connection::SqlClient;
use crate::domain::Lsn;
use crate::lake::records::LsnRange;

/// The changes one commit of the instance holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitChanges {
    /// The commit LSN.
    pub lsn: Lsn,
    /// Change rows the batch's read returns for it (an update counts
    /// twice: its before and after images).
    pub changes: u64,
}

/// The query counting the change rows per commit in `[@P1, @P2]`: the same
/// function and row filter as the read, grouped by commit LSN, so SQL
/// Server scans the change table's clustered index over the range and
/// sends one row per commit instead of the changes.
pub fn counts_query(info: &CaptureInfo) -> String {
    format!(
        "SELECT c.__$start_lsn, COUNT_BIG(*) \
         FROM cdc.fn_cdc_get_all_changes_{}(@P1, @P2, N'all update old') AS c \
         GROUP BY c.__$start_lsn ORDER BY c.__$start_lsn",
        info.instance.as_str()
    )
}

/// The instance's change rows per commit in `[from, to]`, oldest first.
pub async fn change_counts(
    client: &mut SqlClient,
    info: &CaptureInfo,
    from: Lsn,
    to: Lsn,
) -> Result<Vec<CommitChanges>, SourceError> {
    let context = "counting the changes of the next batch";
    let (from, to) = (from.to_bytes(), to.to_bytes());
    let rows = client
        .query(counts_query(info).as_str(), &[&&from[..], &&to[..]])
        .await
        .map_err(SourceError::sql(context))?
        .into_first_result()
        .await
        .map_err(SourceError::sql(context))?;
    let mut counts = Vec::with_capacity(rows.len());
    for row in rows {
        let mut values = row.into_iter();
        let (Some(lsn), Some(count)) = (values.next(), values.next()) else {
            return Err(SourceError::Missing(context.into()));
        };
        let lsn = lsn_of(&lsn, context)?.ok_or_else(|| SourceError::Missing(context.into()))?;
        let changes = match count {
            ColumnData::I64(Some(n)) => u64::try_from(n).unwrap_or(0),
            ColumnData::I32(Some(n)) => u64::try_from(n).unwrap_or(0),
            other => {
                return Err(SourceError::UnexpectedValue {
                    column: "COUNT_BIG(*)".into(),
                    sql_type: "bigint".into(),
                    found: super::arrow_rows::wire_type(&other).to_string(),
                    row: format!("the commit at {lsn}"),
                });
            }
        };
        counts.push(CommitChanges { lsn, changes });
    }
    Ok(counts)
}

/// Splits `[start, end]` into at most `parts` ranges with about equal
/// numbers of changes, cutting only right after a commit of `counts`: part
/// `i + 1` starts at the LSN after the one part `i` ends at, the first
/// starts at `start` and the last ends at `end`. Empty when there is
/// nothing to split (fewer than two parts asked, or fewer than two commits
/// with changes): the range is then read whole.
pub fn split(start: Lsn, end: Lsn, counts: &[CommitChanges], parts: usize) -> Vec<LsnRange> {
    let commits: Vec<CommitChanges> = counts
        .iter()
        .copied()
        .filter(|c| c.changes > 0 && c.lsn >= start && c.lsn <= end)
        .collect();
    if parts < 2 || commits.len() < 2 {
        return Vec::new();
    }
    let total: u128 = commits.iter().map(|c| u128::from(c.changes)).sum();
    let mut cumulative = Vec::with_capacity(commits.len());
    let mut sum = 0u128;
    for commit in &commits {
        sum += u128::from(commit.changes);
        cumulative.push(sum);
    }
    // Cut after commit j for the part boundary k (of `parts`) whose target
    // share of the changes its running total is nearest; never after the
    // last commit, never twice after one.
    let parts_n = parts as u128;
    let last_cut = commits.len() - 2;
    let mut cuts: Vec<usize> = Vec::new();
    for k in 1..parts_n {
        let target = total * k;
        let reached = cumulative
            .iter()
            .position(|c| c * parts_n >= target)
            .unwrap_or(last_cut);
        let nearer = match reached.checked_sub(1) {
            Some(before)
                if target - cumulative[before] * parts_n
                    < cumulative[reached] * parts_n - target =>
            {
                before
            }
            _ => reached,
        };
        let floor = cuts.last().map_or(0, |c| c + 1);
        let cut = nearer.max(floor);
        if cut > last_cut {
            break;
        }
        cuts.push(cut);
    }
    let mut ranges = Vec::with_capacity(cuts.len() + 1);
    let mut from = start;
    for cut in cuts {
        let at = commits[cut].lsn;
        let Some(next) = at.checked_next() else {
            break;
        };
        ranges.push(LsnRange {
            start: from,
            end: at,
        });
        from = next;
    }
    ranges.push(LsnRange { start: from, end });
    if ranges.len() < 2 {
        return Vec::new();
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lsn(n: u8) -> Lsn {
        Lsn::from_low_byte(n)
    }

    fn counts(pairs: &[(u8, u64)]) -> Vec<CommitChanges> {
        pairs
            .iter()
            .map(|&(at, changes)| CommitChanges {
                lsn: lsn(at),
                changes,
            })
            .collect()
    }

    fn ends(ranges: &[LsnRange]) -> Vec<(u8, u8)> {
        ranges
            .iter()
            .map(|r| (r.start.to_bytes()[9], r.end.to_bytes()[9]))
            .collect()
    }

    #[test]
    fn a_range_is_cut_after_commits_into_parts_of_about_equal_changes() {
        type Case = (
            &'static str,
            &'static [(u8, u64)],
            usize,
            &'static [(u8, u8)],
        );
        let cases: [Case; 8] = [
            (
                "even commits, two parts",
                &[(10, 5), (20, 5), (30, 5), (40, 5)],
                2,
                &[(1, 20), (21, 99)],
            ),
            (
                "even commits, four parts",
                &[(10, 5), (20, 5), (30, 5), (40, 5)],
                4,
                &[(1, 10), (11, 20), (21, 30), (31, 99)],
            ),
            (
                "one large transaction stays whole",
                &[(10, 100), (20, 1), (30, 1)],
                2,
                &[(1, 10), (11, 99)],
            ),
            (
                "more parts asked than commits",
                &[(10, 3), (20, 3)],
                4,
                &[(1, 10), (11, 99)],
            ),
            ("one commit: read whole", &[(10, 50)], 4, &[]),
            ("one reader: read whole", &[(10, 5), (20, 5)], 1, &[]),
            (
                "commits without changes are not cut after",
                &[(10, 0), (20, 4), (30, 0), (40, 4), (50, 0)],
                2,
                &[(1, 20), (21, 99)],
            ),
            (
                "the nearer cut of two",
                &[(10, 4), (20, 5), (30, 1)],
                2,
                &[(1, 10), (11, 99)],
            ),
        ];
        for (name, pairs, parts, expected) in cases {
            let ranges = split(lsn(1), lsn(99), &counts(pairs), parts);
            assert_eq!(ends(&ranges), expected, "{name}");
        }
    }

    #[test]
    fn parts_cover_the_range_without_gap_or_overlap() {
        let pairs: Vec<(u8, u64)> = (1..=40).map(|i| (i * 2, u64::from(i % 7) + 1)).collect();
        for parts in 2..=16 {
            let ranges = split(lsn(1), lsn(200), &counts(&pairs), parts);
            assert!(ranges.len() <= parts, "{parts}: {ranges:?}");
            assert_eq!(ranges.first().map(|r| r.start), Some(lsn(1)));
            assert_eq!(ranges.last().map(|r| r.end), Some(lsn(200)));
            for pair in ranges.windows(2) {
                assert_eq!(pair[0].end.checked_next(), Some(pair[1].start), "{parts}");
                assert!(pair[0].start <= pair[0].end, "{parts}");
            }
        }
    }

    #[test]
    fn many_parts_share_the_changes_about_equally() {
        let pairs: Vec<(u8, u64)> = (1..=100).map(|i| (i, 10)).collect();
        let ranges = split(lsn(1), lsn(250), &counts(&pairs), 4);
        let sizes: Vec<u64> = ranges
            .iter()
            .map(|r| {
                pairs
                    .iter()
                    .filter(|(at, _)| lsn(*at) >= r.start && lsn(*at) <= r.end)
                    .map(|(_, n)| n)
                    .sum()
            })
            .collect();
        assert_eq!(sizes, vec![250, 250, 250, 250]);
    }
}
