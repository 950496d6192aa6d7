use chrono::{DateTime, TimeZone, Utc};

use super::*;
use crate::lake::test_support::{query, reopen};

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_790_000_000 + seconds, 0)
        .single()
        .unwrap()
}

fn batch_key(target: &str, batch: u64) -> FactsKey {
    FactsKey {
        target: target.into(),
        app_id: "orders-v1".into(),
        sequence: FactSequence::Batch(BatchId::new(batch).unwrap()),
    }
}

fn batch_row(target: &str, batch: u64, event: Option<FactEvent>, rows: u64) -> FactRow {
    let mut row = FactRow::new(
        target,
        "orders-v1",
        BatchId::new(batch).ok(),
        event,
        at(batch as i64),
    );
    row.rows = Some(rows);
    row.end_lsn = "0x0000002A000001F40003".parse().ok();
    row.end_commit_ts = Some(at(0));
    row
}

async fn open(dir: &tempfile::TempDir) -> (FactsTable, StorageLocation) {
    let location = StorageLocation::parse(dir.path().join("facts").to_str().unwrap()).unwrap();
    let table = FactsTable::open_or_create(&location, &StorageOptions::default())
        .await
        .unwrap();
    (table, location)
}

#[tokio::test]
async fn creates_the_table_with_every_column_and_comment() {
    let dir = tempfile::tempdir().unwrap();
    let (_, location) = open(&dir).await;
    let table = reopen(&location).await;
    let schema = table.snapshot().unwrap().schema();
    let fields: Vec<_> = schema.fields().collect();
    assert_eq!(fields.len(), COLUMNS.len());
    for (field, column) in fields.iter().zip(COLUMNS) {
        assert_eq!(field.name(), column.name);
        assert_eq!(
            field.data_type(),
            &crate::lake::schema::delta_type(column.kind),
            "{}",
            column.name
        );
        assert_eq!(field.is_nullable(), column.nullable, "{}", column.name);
        let comment = field.metadata().get("comment").map(ToString::to_string);
        assert_eq!(comment.as_deref(), Some(column.comment), "{}", column.name);
    }
}

#[tokio::test]
async fn opening_twice_keeps_one_table() {
    let dir = tempfile::tempdir().unwrap();
    let (_, location) = open(&dir).await;
    let again = FactsTable::open_or_create(&location, &StorageOptions::default())
        .await
        .unwrap();
    assert_eq!(again.delta_table().version(), Some(0));
}

#[tokio::test]
async fn a_replayed_batch_adds_no_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (mut facts, location) = open(&dir).await;
    let key = batch_key("bronze.orders", 0);
    let first = facts
        .append(&key, &[batch_row("bronze.orders", 0, None, 3)])
        .await
        .unwrap();
    assert!(matches!(first, AppendOutcome::Written { version: 1 }));

    // Same key again, from this process and from a fresh one (a restart).
    let replay = [batch_row("bronze.orders", 0, None, 99)];
    assert_eq!(
        facts.append(&key, &replay).await.unwrap(),
        AppendOutcome::AlreadyWritten
    );
    let (mut restarted, _) = open(&dir).await;
    assert_eq!(
        restarted.append(&key, &replay).await.unwrap(),
        AppendOutcome::AlreadyWritten
    );

    let rows = query(
        &reopen(&location).await,
        "SELECT batch_id, rows, end_lsn, end_commit_ts FROM t",
    )
    .await;
    assert_eq!(
        rows,
        vec![vec![
            "0",
            "3",
            "0x0000002A000001F40003",
            "2026-09-21T14:13:20"
        ]]
    );
}

#[tokio::test]
async fn a_batch_commits_its_row_and_event_rows_together() {
    let dir = tempfile::tempdir().unwrap();
    let (mut facts, location) = open(&dir).await;
    for batch in 0..3 {
        let mut rows = vec![batch_row("bronze.orders", batch, None, batch * 10)];
        if batch == 1 {
            rows.push(batch_row(
                "bronze.orders",
                1,
                Some(FactEvent::SchemaChange),
                0,
            ));
            rows.push(batch_row(
                "bronze.orders",
                1,
                Some(FactEvent::DataSkipped),
                0,
            ));
        }
        facts
            .append(&batch_key("bronze.orders", batch), &rows)
            .await
            .unwrap();
    }
    // A second stream writing the same batch ids is a different key.
    facts
        .append(
            &batch_key("bronze.customers", 1),
            &[batch_row("bronze.customers", 1, None, 5)],
        )
        .await
        .unwrap();
    let rows = query(
        &reopen(&location).await,
        "SELECT target, batch_id, coalesce(event, 'batch'), rows FROM t ORDER BY target, batch_id, event NULLS FIRST",
    )
    .await;
    let expected = [
        ["bronze.customers", "1", "batch", "5"],
        ["bronze.orders", "0", "batch", "0"],
        ["bronze.orders", "1", "batch", "10"],
        ["bronze.orders", "1", "data_skipped", "0"],
        ["bronze.orders", "1", "schema_change", "0"],
        ["bronze.orders", "2", "batch", "20"],
    ];
    assert_eq!(
        rows,
        expected.map(|r| r.map(String::from).to_vec()).to_vec()
    );
}

#[tokio::test]
async fn snapshot_rows_are_keyed_by_snapshot_number() {
    let dir = tempfile::tempdir().unwrap();
    let (mut facts, location) = open(&dir).await;
    let key = |n| FactsKey {
        target: "bronze.orders".into(),
        app_id: "orders-v1".into(),
        sequence: FactSequence::Snapshot(n),
    };
    let row = |event| FactRow::new("bronze.orders", "orders-v1", None, Some(event), at(5));
    let outcomes = [
        facts
            .append(&key(0), &[row(FactEvent::Bootstrap)])
            .await
            .unwrap(),
        facts
            .append(&key(0), &[row(FactEvent::Bootstrap)])
            .await
            .unwrap(),
        facts
            .append(&key(1), &[row(FactEvent::Resnapshot)])
            .await
            .unwrap(),
    ];
    assert!(matches!(outcomes[0], AppendOutcome::Written { .. }));
    assert_eq!(outcomes[1], AppendOutcome::AlreadyWritten);
    assert!(matches!(outcomes[2], AppendOutcome::Written { .. }));
    let rows = query(
        &reopen(&location).await,
        "SELECT event FROM t ORDER BY event",
    )
    .await;
    assert_eq!(rows, vec![vec!["bootstrap"], vec!["resnapshot"]]);
}

#[tokio::test]
async fn rows_that_do_not_fit_the_key_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut facts, location) = open(&dir).await;
    let key = batch_key("bronze.orders", 4);
    let cases: Vec<(Vec<FactRow>, &str)> = vec![
        (vec![], "no rows"),
        (
            vec![batch_row("bronze.other", 4, None, 1)],
            "row of bronze.other/orders-v1",
        ),
        (
            vec![batch_row("bronze.orders", 5, None, 1)],
            "does not belong here",
        ),
        (
            vec![batch_row("bronze.orders", 4, Some(FactEvent::Bootstrap), 1)],
            "does not belong here",
        ),
        (
            vec![
                batch_row("bronze.orders", 4, None, 1),
                batch_row("bronze.orders", 4, None, 2),
            ],
            "two rows with event None",
        ),
    ];
    for (rows, needle) in cases {
        let err = facts.append(&key, &rows).await.unwrap_err().to_string();
        assert!(err.contains(needle), "{err}");
    }
    assert!(
        query(&reopen(&location).await, "SELECT * FROM t")
            .await
            .is_empty()
    );
}

/// The facts columns before `source` was added, as the first release
/// created the table.
fn columns_before_source() -> Vec<crate::domain::columns::Column> {
    COLUMNS.into_iter().filter(|c| c.name != "source").collect()
}

#[tokio::test]
async fn an_older_table_gets_the_source_column_once_though_two_writers_add_it() {
    let dir = tempfile::tempdir().unwrap();
    let location = StorageLocation::parse(dir.path().join("facts").to_str().unwrap()).unwrap();
    let old = delta_fields(&columns_before_source());
    open_or_create(&location, &StorageOptions::default(), old, TABLE_COMMENT)
        .await
        .unwrap();
    // A second stream that read the table before the first one evolved it.
    let mut stale = reopen(&location).await;

    let (mut facts, _) = open(&dir).await;
    let table = reopen(&location).await;
    assert_eq!(table.version(), Some(1), "one metadata commit");
    let schema = table.snapshot().unwrap().schema();
    let last = schema.fields().last().unwrap().clone();
    assert_eq!((last.name().as_str(), last.is_nullable()), ("source", true));
    assert_eq!(
        last.metadata()
            .get("comment")
            .map(ToString::to_string)
            .as_deref(),
        Some(COLUMNS[2].comment)
    );

    // The stale writer's add conflicts with the one that landed: it reads
    // the table again, finds the column and goes on without a commit.
    let added = add_missing_fields(&mut stale, &delta_fields(&COLUMNS))
        .await
        .unwrap();
    assert_eq!((added, stale.version()), (Vec::<String>::new(), Some(1)));
    let (_, _) = open(&dir).await;
    assert_eq!(reopen(&location).await.version(), Some(1), "no second add");

    // Appends match by name although `source` is last in this table.
    let mut row = batch_row("bronze.orders", 0, None, 1);
    row.source = Some("sales".into());
    facts
        .append(&batch_key("bronze.orders", 0), &[row])
        .await
        .unwrap();
    let rows = query(&reopen(&location).await, "SELECT target, source FROM t").await;
    assert_eq!(rows, vec![vec!["bronze.orders", "sales"]]);
}

#[tokio::test]
async fn a_group_append_commits_every_new_key_once_in_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (mut facts, location) = open(&dir).await;
    let (orders, items) = (batch_key("bronze.orders", 1), batch_key("bronze.items", 1));
    let orders_rows = [batch_row("bronze.orders", 1, None, 3)];
    let items_rows = [batch_row("bronze.items", 1, None, 5)];
    // orders was written on its own before: the group leaves it out.
    facts.append(&orders, &orders_rows).await.unwrap();
    let group = [
        FactsAppend {
            key: &orders,
            rows: &orders_rows,
            origin: Some("a"),
        },
        FactsAppend {
            key: &items,
            rows: &items_rows,
            origin: Some("b"),
        },
    ];
    let outcomes = facts.append_group(&group).await.unwrap();
    assert_eq!(
        outcomes,
        vec![
            AppendOutcome::AlreadyWritten,
            AppendOutcome::Written { version: 2 }
        ]
    );
    // Replayed whole, the group writes nothing.
    let again = facts.append_group(&group).await.unwrap();
    assert_eq!(again, vec![AppendOutcome::AlreadyWritten; 2]);
    let table = reopen(&location).await;
    assert_eq!(table.version(), Some(2));
    let rows = query(&table, "SELECT target, rows FROM t ORDER BY target").await;
    assert_eq!(
        rows,
        vec![
            vec!["bronze.items".to_string(), "5".to_string()],
            vec!["bronze.orders".to_string(), "3".to_string()]
        ]
    );
}

#[tokio::test]
async fn a_group_of_new_keys_is_one_commit_holding_each_keys_txn_and_origin() {
    let dir = tempfile::tempdir().unwrap();
    let (mut facts, location) = open(&dir).await;
    let keys: Vec<FactsKey> = ["bronze.a", "bronze.b", "bronze.c"]
        .iter()
        .map(|t| batch_key(t, 7))
        .collect();
    let rows: Vec<[FactRow; 1]> = ["bronze.a", "bronze.b", "bronze.c"]
        .iter()
        .map(|t| [batch_row(t, 7, None, 1)])
        .collect();
    let group: Vec<FactsAppend<'_>> = keys
        .iter()
        .zip(&rows)
        .zip(["x", "y", "x"])
        .map(|((key, rows), origin)| FactsAppend {
            key,
            rows,
            origin: Some(origin),
        })
        .collect();
    let outcomes = facts.append_group(&group).await.unwrap();
    assert_eq!(outcomes, vec![AppendOutcome::Written { version: 1 }; 3]);
    let mut table = reopen(&location).await;
    for key in &keys {
        let txn = key.txn();
        let done = crate::lake::delta::txn_version(&mut table, &txn.app_id)
            .await
            .unwrap();
        assert_eq!(done, Some(7), "{}", txn.app_id);
    }
    let history: Vec<_> = futures::TryStreamExt::try_collect(table.history(Some(1)))
        .await
        .unwrap();
    let info = &history.first().unwrap().info;
    assert_eq!(
        info.get("mssql_cdc.checkpoints"),
        Some(&serde_json::json!(["x", "y", "x"]))
    );
}

#[test]
fn one_origin_is_recorded_as_a_single_stream_has_always_recorded_it() {
    assert_eq!(
        origin_metadata(&["x"]),
        Some(("mssql_cdc.checkpoint".to_string(), serde_json::json!("x")))
    );
    assert_eq!(origin_metadata(&[]), None);
}
