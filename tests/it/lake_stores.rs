//! The lake layer (facts table, bronze table, checkpoint) on each kind of
//! store a manifest may name: a local directory, S3 (moto) and Azure Blob
//! Storage / ADLS (Azurite). What matters on the object stores is that
//! create-only puts fence writers there too: a second plan of a batch is
//! refused, and replayed writes add nothing. The local tables are then read
//! by an independent Delta reader (DuckDB) to check what users will see.

use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use deltalake::arrow::array::{
    ArrayRef, Decimal128Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use futures::stream;
use mssql_cdc::domain::change::Operation;
use mssql_cdc::domain::columns::ColumnKind;
use mssql_cdc::domain::facts::COLUMNS;
use mssql_cdc::domain::{BatchId, CaptureInstance, FactRow};
use mssql_cdc::lake::bronze::{BronzeOutcome, BronzeTable, bronze_schema};
use mssql_cdc::lake::checkpoint::{
    Checkpoint, CheckpointError, CheckpointState, CommittedBatch, PlannedBatch,
};
use mssql_cdc::lake::facts::{AppendOutcome, FactsKey, FactsTable};
use mssql_cdc::lake::records::BatchRecord;
use mssql_cdc::lake::txn::{FactSequence, Txn};

use crate::support::duckdb::read_delta;
use crate::support::objectstores::{Azurite, LocalStore, Moto, TestStore};

const TARGET: &str = "bronze.orders";
const APP_ID: &str = "orders-v1";
const FACTS: &str = "facts";
const BRONZE: &str = "bronze/orders";
const CHECKPOINT: &str = "checkpoints/orders";

/// Rows per batch the scenario writes: batch 0 in two record batches.
const BATCH0_ROWS: [i64; 2] = [3, 2];
const BATCH1_ROWS: i64 = 4;

#[tokio::test]
async fn lake_on_a_local_directory_reads_back_in_duckdb() {
    let store = LocalStore::new();
    exercise(&store).await;

    let Some(bronze) = read_delta(
        &store.path(BRONZE),
        Some(
            "SELECT _batch_id, count(*), CAST(sum(total) AS VARCHAR), \
             CAST(max(_commit_ts) AS VARCHAR), CAST(max(ordered_at) AS VARCHAR) \
             FROM t GROUP BY _batch_id ORDER BY _batch_id",
        ),
    )
    .await
    else {
        return;
    };
    let total_rows = BATCH0_ROWS.iter().sum::<i64>() + BATCH1_ROWS;
    assert_eq!(bronze.rows, total_rows as u64);
    assert_eq!(
        bronze.column_names(),
        [
            "id",
            "total",
            "ordered_at",
            "_lsn",
            "_seqval",
            "_operation",
            "_commit_ts",
            "_batch_id"
        ]
    );
    let types: Vec<(&str, &str)> = bronze
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.ty.as_str()))
        .collect();
    assert_eq!(
        types,
        [
            ("id", "BIGINT"),
            ("total", "DECIMAL(18,2)"),
            ("ordered_at", "TIMESTAMP WITH TIME ZONE"),
            ("_lsn", "VARCHAR"),
            ("_seqval", "VARCHAR"),
            ("_operation", "VARCHAR"),
            ("_commit_ts", "TIMESTAMP"),
            ("_batch_id", "BIGINT"),
        ]
    );
    // Per batch: count, exact decimal sum, and the newest commit time as
    // the wall-clock UTC value it was written with.
    let batch0 = BATCH0_ROWS.iter().sum::<i64>();
    let expected = [(0, 1, batch0), (1, batch0 + 1, BATCH1_ROWS)].map(|(batch, first, n)| {
        let ids = first..first + n;
        let sum: i64 = ids.clone().map(|i| i * 1001).sum();
        let last = first + n - 1;
        serde_json::json!([
            batch,
            n,
            format!("{}.{:02}", sum / 100, sum % 100),
            commit_ts(last).format("%Y-%m-%d %H:%M:%S").to_string(),
            // DuckDB shows TIMESTAMPTZ in its session zone, UTC by default.
            format!("{}+00", ordered_at(last).format("%Y-%m-%d %H:%M:%S")),
        ])
    });
    let seen: Vec<serde_json::Value> = bronze.query.iter().map(|r| r.clone().into()).collect();
    assert_eq!(seen, expected);

    let facts = read_delta(
        &store.path(FACTS),
        Some(
            "SELECT batch_id, \"rows\", end_lsn, CAST(written_at AS VARCHAR) \
             FROM t ORDER BY batch_id",
        ),
    )
    .await
    .expect("the test Python was found above");
    assert_eq!(facts.rows, 2);
    assert_eq!(facts.columns.len(), COLUMNS.len());
    for column in COLUMNS {
        let duckdb = match column.kind {
            ColumnKind::String => "VARCHAR",
            ColumnKind::Long => "BIGINT",
            ColumnKind::Double => "DOUBLE",
            ColumnKind::TimestampNtz => "TIMESTAMP",
        };
        assert_eq!(facts.column_type(column.name), duckdb, "{}", column.name);
    }
    let expected: Vec<serde_json::Value> = [(0, batch0), (1, BATCH1_ROWS)]
        .map(|(batch, rows)| {
            serde_json::json!([
                batch,
                rows,
                end_lsn(batch),
                written_at(batch).format("%Y-%m-%d %H:%M:%S").to_string()
            ])
        })
        .into();
    let seen: Vec<serde_json::Value> = facts.query.iter().map(|r| r.clone().into()).collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn lake_on_s3_with_moto() {
    let Some(store) = Moto::start().await else {
        return;
    };
    exercise(&store).await;
}

#[tokio::test]
async fn lake_on_azure_with_azurite() {
    let Some(store) = Azurite::start().await else {
        return;
    };
    exercise(&store).await;
}

/// The engine's sequence for two batches, with the replays and the second
/// writer a crash or a misconfiguration produces, on `store`.
async fn exercise(store: &dyn TestStore) {
    let where_ = store.base_uri();

    // Two writers creating the facts table at once end with one table.
    let (facts_location, options) = store.location(FACTS);
    let (first, second) = tokio::join!(
        FactsTable::open_or_create(&facts_location, &options),
        FactsTable::open_or_create(&facts_location, &options),
    );
    let mut facts = first.unwrap_or_else(|e| panic!("facts table on {where_}: {e}"));
    let other_facts = second.unwrap_or_else(|e| panic!("second facts opener on {where_}: {e}"));
    assert_eq!(facts.delta_table().version(), Some(0), "{where_}");
    assert_eq!(other_facts.delta_table().version(), Some(0), "{where_}");

    let (bronze_location, options) = store.location(BRONZE);
    let schema = bronze_schema(&captured()).expect("bronze schema");
    let mut bronze = BronzeTable::open_or_create(&bronze_location, &options, &schema)
        .await
        .unwrap_or_else(|e| panic!("bronze table on {where_}: {e}"));

    let (checkpoint_location, options) = store.location(CHECKPOINT);
    let checkpoint = Checkpoint::open(&checkpoint_location, &options)
        .unwrap_or_else(|e| panic!("checkpoint on {where_}: {e}"));
    let state = checkpoint.state().await.expect("empty checkpoint state");
    assert_eq!(state, CheckpointState::default(), "{where_}");

    // Batch 0: planned once; a second planner (another process on the same
    // checkpoint) is refused and the first plan stays as it was.
    let plan0 = plan(0);
    checkpoint.plan(&plan0).await.expect("plan batch 0");
    let intruder = Checkpoint::open(&checkpoint_location, &options).expect("second checkpoint");
    let mut other_plan = plan(0);
    other_plan.end_lsn = plan(1).end_lsn;
    match intruder.plan(&other_plan).await {
        Err(CheckpointError::AlreadyPlanned {
            batch_id: refused, ..
        }) => {
            assert_eq!(refused, batch_id(0), "{where_}")
        }
        other => {
            panic!("second plan of batch 0 on {where_}: expected AlreadyPlanned, got {other:?}")
        }
    }
    // The very same plan again is what a retry of a write that succeeded
    // but answered an error sends: it is taken as done, not refused, and
    // the stored plan is unchanged.
    assert!(
        checkpoint.plan(&plan0).await.is_ok(),
        "{where_}: the same plan again is an idempotent retry"
    );
    assert_eq!(
        checkpoint.planned(batch_id(0)).await.expect("read plan"),
        Some(plan0.clone()),
        "{where_}"
    );
    assert_eq!(
        checkpoint.state().await.expect("state").pending(),
        Some(&plan0),
        "{where_}: a plan without a commit marker is pending"
    );

    // Bronze: written once; the replay and a second writer add nothing.
    let rows0 = BATCH0_ROWS.iter().sum::<i64>();
    assert_eq!(
        write_batch0(&mut bronze, &schema, &where_).await,
        BronzeOutcome::Committed {
            version: 1,
            rows: rows0 as u64
        },
        "{where_}"
    );
    let replayed = BronzeOutcome::AlreadyCommitted;
    let replay = write_batch0(&mut bronze, &schema, &where_).await;
    assert_eq!(replay, replayed, "{where_}: replay");
    let (_, options) = store.location(BRONZE);
    let mut other_bronze = BronzeTable::open_or_create(&bronze_location, &options, &schema)
        .await
        .unwrap_or_else(|e| panic!("reopening bronze on {where_}: {e}"));
    assert_eq!(other_bronze.delta_table().version(), Some(1), "{where_}");
    let other = write_batch0(&mut other_bronze, &schema, &where_).await;
    assert_eq!(other, replayed, "{where_}: second writer");

    // Facts: one row per batch, however often it is appended.
    let key0 = key(0);
    assert_eq!(
        facts
            .append(&key0, &[fact(0, rows0)])
            .await
            .unwrap_or_else(|e| panic!("facts batch 0 on {where_}: {e}")),
        AppendOutcome::Written { version: 1 },
        "{where_}"
    );
    let mut other_facts = other_facts;
    assert_eq!(
        other_facts
            .append(&key0, &[fact(0, rows0)])
            .await
            .unwrap_or_else(|e| panic!("facts replay on {where_}: {e}")),
        AppendOutcome::AlreadyWritten,
        "{where_}"
    );

    // The commit marker: written once, kept on a replay.
    assert!(
        checkpoint.commit(&commit(0)).await.expect("commit batch 0"),
        "{where_}"
    );
    // A different marker for the same batch does not replace the first;
    // the very same one again is an idempotent retry.
    let mut other_commit = commit(0);
    other_commit.committed_at = commit(1).committed_at;
    assert!(
        !intruder
            .commit(&other_commit)
            .await
            .expect("commit batch 0 again"),
        "{where_}: a second commit marker must not replace the first"
    );
    assert_eq!(
        checkpoint
            .committed(batch_id(0))
            .await
            .expect("read marker"),
        Some(commit(0)),
        "{where_}"
    );
    let state = checkpoint.state().await.expect("state after batch 0");
    assert_eq!(state.latest_committed, Some(batch_id(0)), "{where_}");
    assert_eq!(state.pending(), None, "{where_}");
    let next = state.next_batch_id().expect("next batch id");
    assert_eq!(next.get(), 1, "{where_}");

    // Batch 1 moves every table one version on.
    checkpoint.plan(&plan(1)).await.expect("plan batch 1");
    let rows1 = changes(&schema, 1, rows0 + 1, BATCH1_ROWS);
    assert_eq!(
        commit_batch(
            &mut bronze,
            next,
            vec![rows1],
            fact(1, BATCH1_ROWS),
            &where_
        )
        .await,
        BronzeOutcome::Committed {
            version: 2,
            rows: BATCH1_ROWS as u64
        },
        "{where_}"
    );
    assert_eq!(
        facts
            .append(&key(1), &[fact(1, BATCH1_ROWS)])
            .await
            .unwrap_or_else(|e| panic!("facts batch 1 on {where_}: {e}")),
        AppendOutcome::Written { version: 2 },
        "{where_}"
    );
    assert!(checkpoint.commit(&commit(1)).await.expect("commit batch 1"));
    let state = intruder.state().await.expect("state after batch 1");
    assert_eq!(state.latest_planned, Some(plan(1)), "{where_}");
    assert_eq!(state.latest_committed, Some(next), "{where_}");
    assert_eq!(
        other_bronze
            .committed_version(APP_ID)
            .await
            .expect("bronze txn"),
        Some(next.txn_version()),
        "{where_}: another writer sees the newest batch"
    );
}

/// Writes batch 0 (in two record batches) to `bronze`.
async fn write_batch0(bronze: &mut BronzeTable, schema: &SchemaRef, where_: &str) -> BronzeOutcome {
    let mut first = 1;
    let batches = BATCH0_ROWS.map(|n| {
        let batch = changes(schema, 0, first, n);
        first += n;
        batch
    });
    let rows = BATCH0_ROWS.iter().sum::<i64>();
    commit_batch(bronze, batch_id(0), batches.to_vec(), fact(0, rows), where_).await
}

/// Stages `batches` and commits them as batch `batch`, as the engine does.
async fn commit_batch(
    bronze: &mut BronzeTable,
    batch: BatchId,
    batches: Vec<RecordBatch>,
    facts: FactRow,
    where_: &str,
) -> BronzeOutcome {
    let staged = bronze
        .stage(ok_stream(batches))
        .await
        .unwrap_or_else(|e| panic!("staging batch {batch} on {where_}: {e}"));
    let record = BatchRecord {
        facts,
        events: Vec::new(),
        checkpoint: None,
        range: None,
    };
    bronze
        .commit_batch(&Txn::bronze_batch(APP_ID, batch), staged, &record)
        .await
        .unwrap_or_else(|e| panic!("bronze batch {batch} on {where_}: {e}"))
}

/// The captured columns: a key, a money value and a zoned timestamp.
fn captured() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("total", DataType::Decimal128(18, 2), true),
        Field::new(
            "ordered_at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
    ])
}

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_790_000_000 + seconds, 0)
        .single()
        .expect("a valid time")
}

fn ordered_at(id: i64) -> DateTime<Utc> {
    at(id * 60)
}

fn commit_ts(id: i64) -> DateTime<Utc> {
    at(3_600 + id)
}

fn written_at(batch: i64) -> DateTime<Utc> {
    at(7_200 + batch)
}

fn lsn(id: i64) -> String {
    format!("0x0000002A{id:012X}")
}

fn end_lsn(batch: i64) -> String {
    format!("0x0000002B{batch:012X}")
}

fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// `n` inserted rows of one batch, ids from `first`.
fn changes(schema: &SchemaRef, batch: i64, first: i64, n: i64) -> RecordBatch {
    let ids: Vec<i64> = (first..first + n).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.clone())),
        Arc::new(
            Decimal128Array::from(
                ids.iter()
                    .map(|i| i128::from(*i) * 1001)
                    .collect::<Vec<_>>(),
            )
            .with_precision_and_scale(18, 2)
            .expect("decimal(18,2)"),
        ),
        Arc::new(
            TimestampMicrosecondArray::from(
                ids.iter()
                    .map(|i| micros(ordered_at(*i)))
                    .collect::<Vec<_>>(),
            )
            .with_timezone("UTC"),
        ),
        Arc::new(StringArray::from_iter_values(ids.iter().map(|i| lsn(*i)))),
        Arc::new(StringArray::from_iter_values(ids.iter().map(|i| lsn(*i)))),
        Arc::new(StringArray::from_iter_values(
            ids.iter().map(|_| Operation::Insert.as_str()),
        )),
        Arc::new(TimestampMicrosecondArray::from(
            ids.iter()
                .map(|i| micros(commit_ts(*i)))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(vec![batch; ids.len()])),
    ];
    RecordBatch::try_new(schema.clone(), columns).expect("rows match the bronze schema")
}

fn ok_stream(
    batches: impl IntoIterator<Item = RecordBatch>,
) -> impl futures::Stream<Item = Result<RecordBatch, std::io::Error>> {
    let batches: Vec<RecordBatch> = batches.into_iter().collect();
    stream::iter(batches.into_iter().map(Ok))
}

fn batch_id(batch: i64) -> BatchId {
    BatchId::new(batch as u64).expect("a valid batch id")
}

fn plan(batch: i64) -> PlannedBatch {
    PlannedBatch {
        batch_id: batch_id(batch),
        start_lsn: lsn(batch * 100).parse().expect("an LSN"),
        end_lsn: end_lsn(batch).parse().expect("an LSN"),
        capture_instance: CaptureInstance::new("dbo_orders").expect("a capture instance"),
        end_commit_ts: None,
        planned_at: at(batch),
        events: Vec::new(),
        parts: Vec::new(),
        columns: Vec::new(),
    }
}

fn commit(batch: i64) -> CommittedBatch {
    CommittedBatch {
        batch_id: batch_id(batch),
        bronze_version: Some(batch + 1),
        committed_at: at(batch + 10),
        bronze_mark: None,
    }
}

fn key(batch: i64) -> FactsKey {
    FactsKey {
        target: TARGET.into(),
        app_id: APP_ID.into(),
        sequence: FactSequence::Batch(batch_id(batch)),
    }
}

fn fact(batch: i64, rows: i64) -> FactRow {
    let mut row = FactRow::new(
        TARGET,
        APP_ID,
        Some(batch_id(batch)),
        None,
        written_at(batch),
    );
    row.rows = Some(rows as u64);
    row.end_lsn = end_lsn(batch).parse().ok();
    row.end_commit_ts = Some(commit_ts(batch));
    row
}
