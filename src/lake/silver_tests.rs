use std::sync::Arc;

use deltalake::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::datafusion::prelude::SessionContext;
use futures::TryStreamExt;
use serde::Serialize;

use super::*;
use crate::domain::change::{BATCH_ID, Operation};
use crate::lake::test_support::query;

/// Source columns spelled the way SQL Server lets them be: mixed case, a
/// space, a dot.
fn captured() -> Vec<Field> {
    vec![
        Field::new("OrderId", DataType::Int64, false),
        Field::new("Customer Name", DataType::Utf8, true),
        Field::new("unit.price", DataType::Int64, true),
    ]
}

/// One change of a bronze commit: key, name, price, LSN, seqval, operation.
type Change = (i64, &'static str, i64, u32, u32, Operation);

fn lsn(n: u32) -> String {
    format!("0x{n:020X}")
}

/// [`lsn`] as an [`Lsn`].
fn lsn_of(n: u32) -> Lsn {
    lsn(n).parse().unwrap()
}

/// `changes` as a bronze commit's rows (the captured columns, then the CDC
/// columns), in the given order.
fn commit(changes: &[Change]) -> DataFrame {
    let names: Vec<Option<&str>> = changes.iter().map(|c| Some(c.1)).collect();
    commit_named(changes, &names)
}

/// [`commit`] with each change's name given by `names` (NULL as `None`).
fn commit_named(changes: &[Change], names: &[Option<&str>]) -> DataFrame {
    let mut fields = captured();
    for (name, data_type) in [
        (LSN, DataType::Utf8),
        (SEQVAL, DataType::Utf8),
        (OPERATION, DataType::Utf8),
        (COMMIT_TS, DataType::Timestamp(TimeUnit::Microsecond, None)),
        (BATCH_ID, DataType::Int64),
    ] {
        fields.push(Field::new(name, data_type, true));
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(changes.iter().map(|c| c.0))),
        Arc::new(StringArray::from_iter(names.iter().copied())),
        Arc::new(Int64Array::from_iter_values(changes.iter().map(|c| c.2))),
        Arc::new(StringArray::from_iter_values(
            changes.iter().map(|c| lsn(c.3)),
        )),
        Arc::new(StringArray::from_iter_values(
            changes.iter().map(|c| lsn(c.4)),
        )),
        Arc::new(StringArray::from_iter_values(
            changes.iter().map(|c| c.5.as_str()),
        )),
        Arc::new(
            deltalake::arrow::array::TimestampMicrosecondArray::from_iter_values(
                changes
                    .iter()
                    .map(|c| 1_790_000_000_000_000 + i64::from(c.3)),
            ),
        ),
        Arc::new(Int64Array::from_iter_values(changes.iter().map(|_| 1))),
    ];
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
    SessionContext::new().read_batch(batch).unwrap()
}

#[derive(Serialize)]
struct Record {
    test: bool,
}

async fn open(dir: &std::path::Path, deletes: Deletes) -> SilverTable {
    open_keyed(dir, deletes, &["orderid"]).await
}

async fn open_keyed(dir: &std::path::Path, deletes: Deletes, keys: &[&str]) -> SilverTable {
    let location = StorageLocation::parse(dir.join("silver").to_str().unwrap()).unwrap();
    SilverTable::open_or_create(
        &location,
        &StorageOptions::default(),
        &captured(),
        keys.iter().map(|k| k.to_string()).collect(),
        deletes,
    )
    .await
    .unwrap()
}

async fn apply(silver: &mut SilverTable, version: i64, changes: &[Change]) -> ApplyOutcome {
    let names: Vec<Option<&str>> = changes.iter().map(|c| Some(c.1)).collect();
    apply_named(silver, version, changes, &names).await
}

/// [`apply`] with each change's name given by `names` (NULL as `None`).
async fn apply_named(
    silver: &mut SilverTable,
    version: i64,
    changes: &[Change],
    names: &[Option<&str>],
) -> ApplyOutcome {
    let txn = Txn {
        app_id: "orders/silver".into(),
        version,
    };
    silver
        .apply(&txn, commit_named(changes, names), &Record { test: true })
        .await
        .unwrap()
}

/// Silver's rows, ordered by key: key, name, price, LSN (as its number).
async fn rows(silver: &SilverTable) -> Vec<String> {
    let deleted = if silver.deletes == Deletes::Soft {
        ", \"_deleted\""
    } else {
        ""
    };
    query(
        silver.delta_table(),
        &format!(
            "SELECT \"OrderId\", \"Customer Name\", \"unit.price\", \"_lsn\"{deleted} FROM t ORDER BY \"OrderId\""
        ),
    )
    .await
    .into_iter()
    .map(|r| {
        let mut r = r;
        r[3] = u32::from_str_radix(r[3].trim_start_matches("0x"), 16)
            .unwrap()
            .to_string();
        r.join(" ")
    })
    .collect()
}

use Operation::{Delete, Insert, Snapshot, UpdateAfter, UpdateBefore};

#[tokio::test]
async fn a_commit_leaves_each_key_at_its_last_change() {
    let dir = tempfile::tempdir().unwrap();
    let mut silver = open(dir.path(), Deletes::Hard).await;
    assert_eq!(
        silver.keys(),
        ["OrderId"],
        "the key as the column spells it"
    );
    let outcome = apply(
        &mut silver,
        1,
        &[
            // Touched many times in one batch, listed out of order.
            (1, "c", 30, 12, 1, UpdateAfter),
            (1, "a", 10, 10, 1, Insert),
            (1, "b", 20, 11, 1, UpdateAfter),
            (1, "a", 10, 11, 1, UpdateBefore),
            (1, "b", 20, 12, 1, UpdateBefore),
            // Deleted, then inserted again.
            (2, "x", 1, 10, 1, Insert),
            (2, "x", 1, 11, 1, Delete),
            (2, "y", 2, 13, 1, Insert),
            // A key update, captured as a delete and an insert.
            (3, "k", 5, 10, 1, Insert),
            (3, "k", 5, 14, 1, Delete),
            (4, "k", 6, 14, 2, Insert),
            // Inserted and deleted: never in silver.
            (5, "z", 9, 10, 1, Insert),
            (5, "z", 9, 15, 1, Delete),
        ],
    )
    .await;
    assert!(matches!(outcome, ApplyOutcome::Applied { .. }));
    assert_eq!(
        rows(&silver).await,
        ["1 c 30 12", "2 y 2 13", "4 k 6 14"],
        "the last change per key by LSN, seqval, then operation"
    );
}

#[tokio::test]
async fn within_one_seqval_the_after_image_and_the_insert_win() {
    let dir = tempfile::tempdir().unwrap();
    let mut silver = open(dir.path(), Deletes::Hard).await;
    apply(
        &mut silver,
        1,
        &[
            (1, "before", 1, 10, 1, UpdateBefore),
            (1, "after", 2, 10, 1, UpdateAfter),
            (2, "gone", 1, 10, 1, Delete),
            (2, "back", 2, 10, 1, Insert),
        ],
    )
    .await;
    assert_eq!(rows(&silver).await, ["1 after 2 10", "2 back 2 10"]);
}

#[tokio::test]
async fn a_replayed_commit_applies_nothing_and_older_changes_lose() {
    let dir = tempfile::tempdir().unwrap();
    let mut silver = open(dir.path(), Deletes::Hard).await;
    apply(&mut silver, 1, &[(1, "a", 1, 10, 1, Insert)]).await;
    apply(&mut silver, 2, &[(1, "b", 2, 20, 1, UpdateAfter)]).await;
    let before = silver.delta_table().version();
    assert_eq!(
        apply(&mut silver, 2, &[(1, "b", 2, 20, 1, UpdateAfter)]).await,
        ApplyOutcome::AlreadyApplied
    );
    assert_eq!(
        apply(&mut silver, 1, &[(1, "a", 1, 10, 1, Insert)]).await,
        ApplyOutcome::AlreadyApplied,
        "an older commit of the sequence is held too"
    );
    assert_eq!(silver.delta_table().version(), before);
    // Another sequence (a snapshot's chunks) cannot move a row back.
    let txn = Txn {
        app_id: "orders/silver/snapshot/1".into(),
        version: 0,
    };
    silver
        .apply(
            &txn,
            commit(&[
                (1, "stale", 0, 5, 0, Snapshot),
                (9, "new", 9, 5, 0, Snapshot),
            ]),
            &Record { test: true },
        )
        .await
        .unwrap();
    assert_eq!(rows(&silver).await, ["1 b 2 20", "9 new 9 5"]);
    let history: Vec<_> = silver
        .delta_table()
        .history(Some(1))
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        history.first().and_then(|c| c.info.get("test")),
        Some(&serde_json::Value::Bool(true)),
        "the commit records what applied it"
    );
}

#[tokio::test]
async fn an_update_that_moves_a_manifest_key_leaves_the_old_key() {
    // Keyed by a column that is not the capture index: the update comes
    // as a before- and an after-image with different keys.
    let dir = tempfile::tempdir().unwrap();
    let location = StorageLocation::parse(dir.path().join("s").to_str().unwrap()).unwrap();
    let mut silver = SilverTable::open_or_create(
        &location,
        &StorageOptions::default(),
        &captured(),
        vec!["Customer Name".into()],
        Deletes::Hard,
    )
    .await
    .unwrap();
    apply(&mut silver, 1, &[(1, "ann", 1, 10, 1, Insert)]).await;
    apply(
        &mut silver,
        2,
        &[
            (1, "ann", 1, 20, 1, UpdateBefore),
            (1, "bob", 1, 20, 1, UpdateAfter),
        ],
    )
    .await;
    assert_eq!(rows(&silver).await, ["1 bob 1 20"]);
}

#[tokio::test]
async fn soft_deletes_keep_the_row_marked_with_the_delete() {
    let dir = tempfile::tempdir().unwrap();
    let mut silver = open(dir.path(), Deletes::Soft).await;
    apply(
        &mut silver,
        1,
        &[(1, "a", 1, 10, 1, Insert), (2, "b", 2, 10, 2, Insert)],
    )
    .await;
    apply(&mut silver, 2, &[(1, "a", 1, 20, 1, Delete)]).await;
    assert_eq!(
        rows(&silver).await,
        ["1 a 1 20 true", "2 b 2 10 false"],
        "the delete's LSN on a kept row"
    );
    apply(&mut silver, 3, &[(1, "again", 3, 30, 1, Insert)]).await;
    assert_eq!(
        rows(&silver).await,
        ["1 again 3 30 false", "2 b 2 10 false"]
    );
}

#[tokio::test]
async fn after_a_resnapshot_the_keys_it_did_not_see_go() {
    for deletes in [Deletes::Hard, Deletes::Soft] {
        let dir = tempfile::tempdir().unwrap();
        let mut silver = open(dir.path(), deletes).await;
        apply(
            &mut silver,
            1,
            &[(1, "a", 1, 10, 1, Insert), (2, "b", 2, 10, 2, Insert)],
        )
        .await;
        let txn = Txn {
            app_id: "orders/silver/snapshot/2".into(),
            version: 0,
        };
        silver
            .apply(
                &txn,
                commit(&[(2, "b2", 2, 50, 0, Snapshot)]),
                &Record { test: true },
            )
            .await
            .unwrap();
        let resnapshot = lsn(50).parse::<Lsn>().unwrap();
        silver.drop_older_than(resnapshot).await.unwrap();
        silver.drop_older_than(resnapshot).await.unwrap();
        let expected: &[&str] = match deletes {
            Deletes::Hard => &["2 b2 2 50"],
            Deletes::Soft => &["1 a 1 10 true", "2 b2 2 50 false"],
        };
        assert_eq!(rows(&silver).await, expected, "{deletes:?}");
    }
}

#[tokio::test]
async fn a_table_keeps_its_keys_and_gains_columns() {
    let dir = tempfile::tempdir().unwrap();
    let mut silver = open(dir.path(), Deletes::Hard).await;
    apply(&mut silver, 1, &[(1, "a", 1, 10, 1, Insert)]).await;
    let location = StorageLocation::parse(dir.path().join("silver").to_str().unwrap()).unwrap();
    let refused = SilverTable::open_or_create(
        &location,
        &StorageOptions::default(),
        &captured(),
        vec!["Customer Name".into()],
        Deletes::Hard,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&refused, SilverError::KeysChanged { recorded, given, .. }
            if recorded == "OrderId" && given == "Customer Name"),
        "{refused}"
    );
    let unknown = SilverTable::open_or_create(
        &location,
        &StorageOptions::default(),
        &captured(),
        vec!["nope".into()],
        Deletes::Hard,
    )
    .await
    .unwrap_err();
    assert!(unknown.to_string().contains("key column nope"), "{unknown}");

    let mut wider = captured();
    wider.push(Field::new("Note", DataType::Utf8, true));
    silver.add_missing_columns(&wider).await.unwrap();
    silver.add_missing_columns(&wider).await.unwrap();
    assert_eq!(
        query(silver.delta_table(), "SELECT \"OrderId\", \"Note\" FROM t").await,
        [["1", ""]],
        "an existing row has no value for the new column"
    );
}

#[tokio::test]
async fn a_null_key_matches_its_row_so_updates_replace_it_and_deletes_land() {
    for deletes in [Deletes::Hard, Deletes::Soft] {
        let dir = tempfile::tempdir().unwrap();
        let mut silver = open_keyed(dir.path(), deletes, &["OrderId", "Customer Name"]).await;
        let null = [None, None];
        // Two changes of the NULL key in one commit reduce to the last.
        apply_named(
            &mut silver,
            1,
            &[(1, "", 1, 10, 1, Insert), (1, "", 2, 11, 1, UpdateAfter)],
            &null,
        )
        .await;
        apply_named(&mut silver, 2, &[(1, "", 3, 20, 1, UpdateAfter)], &[None]).await;
        let updated: &[&str] = match deletes {
            Deletes::Hard => &["1  3 20"],
            Deletes::Soft => &["1  3 20 false"],
        };
        assert_eq!(
            rows(&silver).await,
            updated,
            "{deletes:?}: one row, updated"
        );
        apply_named(&mut silver, 3, &[(1, "", 3, 30, 1, Delete)], &[None]).await;
        let deleted: &[&str] = match deletes {
            Deletes::Hard => &[],
            Deletes::Soft => &["1  3 30 true"],
        };
        assert_eq!(
            rows(&silver).await,
            deleted,
            "{deletes:?}: the delete landed"
        );
    }
}

#[test]
fn only_nullable_keys_are_matched_null_safely() {
    let keys = ["OrderId".to_string(), "Customer Name".to_string()];
    assert_eq!(nullable_among(&captured(), &keys), ["Customer Name"]);
    let on = on_keys(&keys, &nullable_among(&captured(), &keys)).to_string();
    assert_eq!(
        on,
        "target.OrderId = source.OrderId AND target.Customer Name IS NOT DISTINCT FROM source.Customer Name"
    );
}

#[tokio::test]
async fn a_not_null_key_still_lets_the_merge_skip_files() {
    // "OrderId" is declared NOT NULL: matched with `=`, which deltalake
    // turns into a key range that skips the files outside it.
    let dir = tempfile::tempdir().unwrap();
    let mut silver = open(dir.path(), Deletes::Hard).await;
    apply(
        &mut silver,
        1,
        &[(1, "a", 1, 10, 1, Insert), (2, "b", 2, 10, 2, Insert)],
    )
    .await;
    apply(&mut silver, 2, &[(100, "c", 3, 20, 1, Insert)]).await;
    let outcome = apply(&mut silver, 3, &[(2, "b2", 4, 30, 1, UpdateAfter)]).await;
    let ApplyOutcome::Applied { files_skipped, .. } = outcome else {
        panic!("applied: {outcome:?}");
    };
    assert!(files_skipped > 0, "{outcome:?}");
    assert_eq!(rows(&silver).await, ["1 a 1 10", "2 b2 4 30", "100 c 3 20"]);
}

/// A stream's bronze commits: a bootstrap at LSN 10, changes, a
/// resnapshot at LSN 20 that no longer sees keys 2 and 3 (deleted while
/// its changes were lost), and changes after it.
fn history() -> Vec<Vec<Change>> {
    vec![
        vec![
            (1, "a", 1, 10, 0, Snapshot),
            (2, "b", 2, 10, 0, Snapshot),
            (3, "c", 3, 10, 0, Snapshot),
        ],
        vec![
            (1, "a", 1, 11, 1, UpdateBefore),
            (1, "a2", 11, 11, 1, UpdateAfter),
            (2, "b", 2, 12, 1, Delete),
            (4, "d", 4, 13, 1, Insert),
        ],
        vec![
            (1, "a3", 12, 20, 0, Snapshot),
            (4, "d", 4, 20, 0, Snapshot),
            (5, "e", 5, 20, 0, Snapshot),
        ],
        vec![
            (5, "e", 5, 21, 1, UpdateBefore),
            (5, "e2", 55, 21, 1, UpdateAfter),
            (6, "f", 6, 22, 1, Insert),
        ],
    ]
}

/// Filling silver from all of bronze's rows at once leaves it as applying
/// the commits one by one did, resnapshot included, with hard and soft
/// deletes; a second fill does nothing, and a fill of nothing is recorded.
#[tokio::test]
async fn a_fill_from_every_bronze_row_equals_applying_each_commit() {
    let done = Txn {
        app_id: "orders/silver/fill".into(),
        version: 0,
    };
    for deletes in [Deletes::Hard, Deletes::Soft] {
        let kept = tempfile::tempdir().unwrap();
        let mut replayed = open(kept.path(), deletes).await;
        for (version, changes) in history().iter().enumerate() {
            apply(&mut replayed, version as i64, changes).await;
            if version == 2 {
                replayed.drop_older_than(lsn_of(20)).await.unwrap();
            }
        }
        let added = tempfile::tempdir().unwrap();
        let mut filled = open(added.path(), deletes).await;
        let all = history()
            .iter()
            .map(|changes| commit(changes))
            .reduce(|a, b| a.union(b).unwrap())
            .unwrap();
        let resnapshot = Some(lsn_of(20));
        let outcome = filled
            .fill(&done, all.clone(), resnapshot, &Record { test: true })
            .await
            .unwrap();
        assert!(
            matches!(outcome, ApplyOutcome::Applied { .. }),
            "{deletes:?}"
        );
        assert_eq!(rows(&filled).await, rows(&replayed).await, "{deletes:?}");
        let expected: &[&str] = match deletes {
            Deletes::Hard => &["1 a3 12 20", "4 d 4 20", "5 e2 55 21", "6 f 6 22"],
            Deletes::Soft => &[
                "1 a3 12 20 false",
                "2 b 2 12 true",
                "3 c 3 10 true",
                "4 d 4 20 false",
                "5 e2 55 21 false",
                "6 f 6 22 false",
            ],
        };
        assert_eq!(rows(&filled).await, expected, "{deletes:?}");
        let again = filled
            .fill(&done, all, resnapshot, &Record { test: true })
            .await
            .unwrap();
        assert_eq!(again, ApplyOutcome::AlreadyApplied, "{deletes:?}");
    }

    let dir = tempfile::tempdir().unwrap();
    let mut empty = open(dir.path(), Deletes::Hard).await;
    empty
        .fill(&done, commit(&[]), None, &Record { test: true })
        .await
        .unwrap();
    assert!(
        empty.holds(&done).await.unwrap(),
        "an empty fill is recorded"
    );
}
