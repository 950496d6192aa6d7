use std::sync::Arc;

use chrono::{TimeZone, Utc};
use deltalake::arrow::array::{
    ArrayRef, Decimal128Array, Int64Array, StringArray, TimestampMicrosecondArray,
};
use futures::stream;

use deltalake::arrow::datatypes::DataType;

use super::*;
use crate::domain::change::Operation;
use crate::domain::{BatchId, FactRow};
use crate::lake::records::BatchRecord;
use crate::lake::test_support::{query, reopen};

fn captured() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("total", DataType::Decimal128(18, 2), true),
    ])
}

/// `n` change rows of one batch, ids starting at `first`.
fn changes(schema: &SchemaRef, batch: u64, first: i64, n: i64) -> RecordBatch {
    let ids: Vec<i64> = (first..first + n).collect();
    let lsn = |i: &i64| format!("0x0000002A{:010X}", i);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.clone())),
        Arc::new(
            Decimal128Array::from(
                ids.iter()
                    .map(|i| i128::from(*i) * 1001)
                    .collect::<Vec<_>>(),
            )
            .with_precision_and_scale(18, 2)
            .unwrap(),
        ),
        Arc::new(StringArray::from_iter_values(ids.iter().map(lsn))),
        Arc::new(StringArray::from_iter_values(ids.iter().map(lsn))),
        Arc::new(StringArray::from_iter_values(
            ids.iter().map(|_| Operation::Insert.as_str()),
        )),
        Arc::new(TimestampMicrosecondArray::from(
            ids.iter()
                .map(|i| 1_790_000_000_000_000 + i)
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(vec![batch as i64; ids.len()])),
    ];
    RecordBatch::try_new(schema.clone(), columns).unwrap()
}

fn facts(batch: u64, rows: u64) -> FactRow {
    let at = Utc.timestamp_opt(1_790_000_000, 0).single().unwrap();
    let mut row = FactRow::new(
        "bronze.orders",
        "orders-v1",
        BatchId::new(batch).ok(),
        None,
        at,
    );
    row.rows = Some(rows);
    row
}

fn ok_stream(batches: Vec<RecordBatch>) -> impl Stream<Item = Result<RecordBatch, std::io::Error>> {
    stream::iter(batches.into_iter().map(Ok))
}

async fn open(dir: &tempfile::TempDir) -> (BronzeTable, StorageLocation, SchemaRef) {
    let location = StorageLocation::parse(dir.path().join("bronze").to_str().unwrap()).unwrap();
    let schema = bronze_schema(&captured()).unwrap();
    let table = BronzeTable::open_or_create(&location, &StorageOptions::default(), &schema)
        .await
        .unwrap();
    (table, location, schema)
}

fn id(n: u64) -> BatchId {
    BatchId::new(n).unwrap()
}

/// Stages `batches` and commits them as batch `batch` of appId orders-v1,
/// the way the engine does.
async fn write<S, E>(
    bronze: &mut BronzeTable,
    batch: BatchId,
    batches: S,
    facts: &FactRow,
) -> Result<BronzeOutcome, BronzeError>
where
    S: Stream<Item = Result<RecordBatch, E>>,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let staged = bronze.stage(batches).await?;
    let record = BatchRecord {
        facts: facts.clone(),
        events: Vec::new(),
        checkpoint: None,
        range: None,
    };
    bronze
        .commit_batch(&Txn::bronze_batch("orders-v1", batch), staged, &record)
        .await
}

async fn count(location: &StorageLocation) -> Vec<Vec<String>> {
    query(
        &reopen(location).await,
        "SELECT _batch_id, count(*), sum(total) FROM t GROUP BY _batch_id ORDER BY _batch_id",
    )
    .await
}

#[tokio::test]
async fn a_replayed_batch_is_not_written_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bronze, location, schema) = open(&dir).await;
    let batch0 = || vec![changes(&schema, 0, 1, 3), changes(&schema, 0, 4, 2)];

    let first = write(&mut bronze, id(0), ok_stream(batch0()), &facts(0, 5))
        .await
        .unwrap();
    assert_eq!(
        first,
        BronzeOutcome::Committed {
            version: 1,
            rows: 5
        }
    );
    let replay = write(&mut bronze, id(0), ok_stream(batch0()), &facts(0, 5))
        .await
        .unwrap();
    assert_eq!(replay, BronzeOutcome::AlreadyCommitted);

    let second = write(
        &mut bronze,
        id(1),
        ok_stream(vec![changes(&schema, 1, 6, 4)]),
        &facts(1, 4),
    )
    .await
    .unwrap();
    assert_eq!(
        second,
        BronzeOutcome::Committed {
            version: 2,
            rows: 4
        }
    );

    // A restarted process sees the same position and skips both batches.
    let (mut restarted, _, _) = open(&dir).await;
    assert_eq!(
        restarted.committed_version("orders-v1").await.unwrap(),
        Some(1)
    );
    for batch in [0, 1] {
        let again = write(
            &mut restarted,
            id(batch),
            ok_stream(batch0()),
            &facts(batch, 5),
        )
        .await
        .unwrap();
        assert_eq!(again, BronzeOutcome::AlreadyCommitted);
    }
    let expected = [["0", "5", "150.15"], ["1", "4", "300.30"]];
    assert_eq!(
        count(&location).await,
        expected.map(|r| r.map(String::from).to_vec()).to_vec()
    );
}

#[tokio::test]
async fn the_commit_carries_txn_and_facts() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bronze, _, schema) = open(&dir).await;
    write(
        &mut bronze,
        id(7),
        ok_stream(vec![changes(&schema, 7, 1, 2)]),
        &facts(7, 2),
    )
    .await
    .unwrap();
    let log = std::fs::read_to_string(
        dir.path()
            .join("bronze/_delta_log/00000000000000000001.json"),
    )
    .unwrap();
    let actions: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let txn = actions
        .iter()
        .find_map(|a| a.get("txn"))
        .expect("a txn action");
    assert_eq!(
        (txn["appId"].as_str(), txn["version"].as_i64()),
        (Some("orders-v1"), Some(7))
    );
    let info = actions
        .iter()
        .find_map(|a| a.get("commitInfo"))
        .expect("commitInfo");
    assert_eq!(info["mssql_cdc.facts"]["batch_id"], 7);
    assert_eq!(info["mssql_cdc.facts"]["rows"], 2);
}

#[tokio::test]
async fn a_batch_without_rows_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bronze, location, schema) = open(&dir).await;
    let outcomes = [
        write(&mut bronze, id(0), ok_stream(vec![]), &facts(0, 0))
            .await
            .unwrap(),
        write(
            &mut bronze,
            id(1),
            ok_stream(vec![changes(&schema, 1, 1, 0)]),
            &facts(1, 0),
        )
        .await
        .unwrap(),
    ];
    assert_eq!(outcomes, [BronzeOutcome::Empty, BronzeOutcome::Empty]);
    assert_eq!(reopen(&location).await.version(), Some(0));
    assert_eq!(bronze.committed_version("orders-v1").await.unwrap(), None);
}

#[tokio::test]
async fn a_failing_source_leaves_no_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bronze, location, schema) = open(&dir).await;
    let items = vec![
        Ok(changes(&schema, 0, 1, 3)),
        Err(std::io::Error::other("connection reset")),
    ];
    let err = write(&mut bronze, id(0), stream::iter(items), &facts(0, 3))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("connection reset"), "{err}");
    assert_eq!(reopen(&location).await.version(), Some(0));
    // The replay after the failure writes the batch once.
    let retry = write(
        &mut bronze,
        id(0),
        ok_stream(vec![changes(&schema, 0, 1, 3)]),
        &facts(0, 3),
    )
    .await
    .unwrap();
    assert_eq!(
        retry,
        BronzeOutcome::Committed {
            version: 1,
            rows: 3
        }
    );
    assert_eq!(count(&location).await, vec![vec!["0", "3", "60.06"]]);
}

#[tokio::test]
async fn large_batches_roll_files_within_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (bronze, location, schema) = open(&dir).await;
    let mut bronze = bronze.with_target_file_size(1);
    let batches: Vec<RecordBatch> = (0..4).map(|i| changes(&schema, 0, i * 100, 100)).collect();
    let outcome = write(&mut bronze, id(0), ok_stream(batches), &facts(0, 400))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        BronzeOutcome::Committed {
            version: 1,
            rows: 400
        }
    );
    let log = std::fs::read_to_string(
        dir.path()
            .join("bronze/_delta_log/00000000000000000001.json"),
    )
    .unwrap();
    let files = log.lines().filter(|l| l.starts_with("{\"add\"")).count();
    assert!(
        files > 1,
        "expected several files in one commit, got {files}"
    );
    assert_eq!(count(&location).await[0][1], "400");
}

#[test]
fn cdc_columns_follow_the_captured_ones() {
    let schema = bronze_schema(&captured()).unwrap();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        [
            "id",
            "total",
            "_lsn",
            "_seqval",
            "_operation",
            "_commit_ts",
            "_batch_id"
        ]
    );
    let clash = Schema::new(vec![Field::new("_LSN", DataType::Utf8, true)]);
    assert!(
        matches!(bronze_schema(&clash), Err(BronzeError::ReservedColumn(name)) if name == "_LSN")
    );
}

#[tokio::test]
async fn parts_staged_on_their_own_tasks_commit_as_one_version() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bronze, location, schema) = open(&dir).await;
    let mut tasks = Vec::new();
    for (first, n) in [(1, 3), (4, 2), (6, 4)] {
        let stager = bronze.stager().unwrap();
        let rows = vec![changes(&schema, 3, first, n)];
        tasks.push(tokio::spawn(async move {
            let mut staged = stager.stage(ok_stream(rows)).await?;
            staged.seal().await?;
            Ok::<_, BronzeError>(staged)
        }));
    }
    let mut parts = Vec::new();
    for task in tasks {
        parts.push(task.await.unwrap().unwrap());
    }
    let staged = StagedFiles::join(parts).expect("three parts");
    assert_eq!(staged.rows(), 9);
    let record = BatchRecord {
        facts: facts(3, 9),
        events: Vec::new(),
        checkpoint: None,
        range: None,
    };
    let txn = Txn::bronze_batch("orders-v1", id(3));
    let outcome = bronze.commit_batch(&txn, staged, &record).await.unwrap();
    assert_eq!(
        outcome,
        BronzeOutcome::Committed {
            version: 1,
            rows: 9
        }
    );
    assert_eq!(
        count(&location).await,
        vec![vec!["3".to_string(), "9".into(), "450.45".into()]]
    );
    assert_eq!(StagedFiles::join(Vec::new()).map(|s| s.rows()), None);
}

/// `len` hex digits that Snappy cannot shorten (xorshift from `seed`).
fn incompressible(seed: u64, len: usize) -> String {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = String::with_capacity(len);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push_str(&format!("{x:016x}"));
    }
    out.truncate(len);
    out
}

/// A bronze table of `id bigint` and one text `column` in `dir/name`.
async fn id_and_text_table(
    dir: &tempfile::TempDir,
    name: &str,
    column: &str,
) -> (BronzeTable, SchemaRef) {
    let location = StorageLocation::parse(dir.path().join(name).to_str().unwrap()).unwrap();
    let captured = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new(column, DataType::Utf8, true),
    ]);
    let schema = bronze_schema(&captured).unwrap();
    let bronze = BronzeTable::open_or_create(&location, &StorageOptions::default(), &schema)
        .await
        .unwrap();
    (bronze, schema)
}

/// Rows `ids` of [`id_and_text_table`]'s table: `text` of each id, one
/// LSN for all, a `_seqval` per row.
fn id_and_text_rows(schema: &SchemaRef, ids: &[i64], text: impl Fn(i64) -> String) -> RecordBatch {
    let seqval = |i: &i64| format!("0x0000002A{:010X}", i);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.to_vec())),
        Arc::new(StringArray::from_iter_values(ids.iter().map(|i| text(*i)))),
        Arc::new(StringArray::from_iter_values(
            ids.iter().map(|_| "0x0000002A000000010001"),
        )),
        Arc::new(StringArray::from_iter_values(ids.iter().map(seqval))),
        Arc::new(StringArray::from_iter_values(
            ids.iter().map(|_| Operation::Insert.as_str()),
        )),
        Arc::new(TimestampMicrosecondArray::from(vec![
            1_790_000_000_000_000;
            ids.len()
        ])),
        Arc::new(Int64Array::from(vec![0i64; ids.len()])),
    ];
    RecordBatch::try_new(schema.clone(), columns).unwrap()
}

/// The row groups' metadata of every Parquet file in `dir`.
fn row_groups(dir: &std::path::Path) -> Vec<deltalake::parquet::file::metadata::RowGroupMetaData> {
    use deltalake::parquet::file::reader::{FileReader, SerializedFileReader};
    let mut groups = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "parquet") {
            let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
            groups.extend(reader.metadata().row_groups().iter().cloned());
        }
    }
    groups
}

#[tokio::test]
async fn wide_rows_close_row_groups_by_bytes_before_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bronze, schema) = id_and_text_table(&dir, "wide", "payload").await;
    // 48 Ki rows of 2 KiB each: 96 MiB, far under ROW_GROUP_ROWS rows but
    // several times ROW_GROUP_BYTES.
    let rows_per_batch = 4096i64;
    let batches: Vec<RecordBatch> = (0..12)
        .map(|b| {
            let ids: Vec<i64> = (b * rows_per_batch..(b + 1) * rows_per_batch).collect();
            id_and_text_rows(&schema, &ids, |i| incompressible(i as u64, 2048))
        })
        .collect();
    let rows = 12 * rows_per_batch as u64;
    write(&mut bronze, id(0), ok_stream(batches), &facts(0, rows))
        .await
        .unwrap();
    let groups: Vec<i64> = row_groups(&dir.path().join("wide"))
        .iter()
        .map(|g| g.num_rows())
        .collect();
    assert_eq!(groups.iter().sum::<i64>(), rows as i64);
    assert!(
        groups.len() >= 3,
        "96 MiB of rows in row groups of at most {ROW_GROUP_BYTES} bytes: {groups:?}"
    );
}

#[tokio::test]
async fn keys_and_seqval_are_written_without_a_dictionary() {
    let dir = tempfile::tempdir().unwrap();
    let (bronze, schema) = id_and_text_table(&dir, "keys", "status").await;
    let mut bronze = bronze.with_unique_columns(&["id".to_string()]);
    let ids: Vec<i64> = (0..1000).collect();
    let status = |i: i64| ["open", "paid", "shipped"][(i % 3) as usize].to_string();
    let batch = id_and_text_rows(&schema, &ids, status);
    write(&mut bronze, id(0), ok_stream(vec![batch]), &facts(0, 1000))
        .await
        .unwrap();
    let mut dictionaries = std::collections::BTreeMap::new();
    for group in row_groups(&dir.path().join("keys")) {
        for column in group.columns() {
            dictionaries.insert(
                column.column_path().string(),
                column.dictionary_page_offset().is_some(),
            );
        }
    }
    let expected: std::collections::BTreeMap<String, bool> = [
        ("id", false),
        ("status", true),
        ("_lsn", true),
        ("_seqval", false),
        ("_operation", true),
        ("_commit_ts", true),
        ("_batch_id", true),
    ]
    .into_iter()
    .map(|(column, dictionary)| (column.to_string(), dictionary))
    .collect();
    assert_eq!(dictionaries, expected, "which columns carry a dictionary");
}

#[test]
fn a_log_entry_names_its_txns_and_what_a_restore_went_back_to() {
    let entry = concat!(
        r#"{"commitInfo":{"operation":"RESTORE","operationParameters":{"version":"3","datetime":null}}}"#,
        "\n",
        r#"{"txn":{"appId":"orders-v1","version":7}}"#,
        "\n",
        r#"{"add":{"path":"part%20one.parquet","size":1}}"#,
        "\n",
    );
    let commit = super::parse_commit(entry.as_bytes(), 9);
    assert_eq!(commit.version, 9);
    assert_eq!(commit.txns, [("orders-v1".to_string(), 7)]);
    assert_eq!(commit.files, ["part one.parquet"]);
    assert!(commit.carries(&Txn {
        app_id: "orders-v1".into(),
        version: 7
    }));
    assert!(!commit.carries(&Txn {
        app_id: "orders-v1".into(),
        version: 6
    }));
    // (restored to 3) against the checkpoint's newest commit's version.
    let cases = [(2, false), (3, false), (4, true), (8, true)];
    for (newest, lost) in cases {
        assert_eq!(
            commit.restores_before(newest),
            lost,
            "newest commit at {newest}"
        );
    }
    let unnamed = super::parse_commit(br#"{"commitInfo":{"operation":"RESTORE"}}"#, 2);
    assert!(
        unnamed.restores_before(0),
        "a restore to an unknown version may have lost it"
    );
    let optimize = super::parse_commit(br#"{"commitInfo":{"operation":"OPTIMIZE"}}"#, 2);
    assert!(!optimize.restores_before(5));
}
