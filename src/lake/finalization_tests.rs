use chrono::TimeZone;

use super::*;
use crate::domain::Granularity;
use crate::lake::test_support::{query, reopen};

fn utc(text: &str) -> DateTime<Utc> {
    let naive = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f").unwrap();
    Utc.from_utc_datetime(&naive)
}

fn update(table: &str, until: Option<&str>, snapshot: Option<&str>) -> VerdictUpdate {
    VerdictUpdate {
        table_name: table.into(),
        app_id: format!("{table}-v1"),
        granularity: Granularity::Hour,
        finalized_until: until.map(utc),
        updated_at: Utc::now(),
        open_snapshot_lsn: snapshot.map(|l| l.parse().unwrap()),
        applied_lsn: None,
    }
}

async fn open(dir: &tempfile::TempDir) -> (FinalizationTable, StorageLocation) {
    let location = StorageLocation::parse(dir.path().join("control").to_str().unwrap()).unwrap();
    let table = FinalizationTable::open_or_create(&location, &StorageOptions::default())
        .await
        .unwrap();
    (table, location)
}

async fn rows(location: &StorageLocation) -> Vec<Vec<String>> {
    let table = reopen(location).await;
    query(
        &table,
        "SELECT table_name, app_id, granularity, CAST(finalized_until AS VARCHAR), \
         coalesce(open_snapshot_lsn, '-'), coalesce(applied_lsn, '-') FROM t ORDER BY table_name",
    )
    .await
}

#[tokio::test]
async fn the_table_has_exactly_the_documented_schema() {
    let dir = tempfile::tempdir().unwrap();
    let (_, location) = open(&dir).await;
    let table = reopen(&location).await;
    let schema = table.snapshot().unwrap().schema();
    let fields: Vec<String> = schema
        .fields()
        .map(|f| {
            format!(
                "{} {} {}",
                f.name(),
                f.data_type(),
                if f.is_nullable() { "NULL" } else { "NOT NULL" }
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            "table_name string NOT NULL",
            "app_id string NOT NULL",
            "granularity string NOT NULL",
            "finalized_until timestamp_ntz NULL",
            "updated_at timestamp_ntz NOT NULL",
            "open_snapshot_lsn string NULL",
            "applied_lsn string NULL",
        ]
    );
}

#[tokio::test]
async fn the_verdict_is_held_during_a_snapshot_advances_and_never_goes_back() {
    let dir = tempfile::tempdir().unwrap();
    let (mut table, location) = open(&dir).await;
    let lsn = "0x0000002A000001F40003";

    table
        .upsert(&update("bronze.orders", None, Some(lsn)))
        .await
        .unwrap();
    assert_eq!(
        rows(&location).await,
        [["bronze.orders", "bronze.orders-v1", "hour", "", lsn, "-"]]
    );

    table
        .upsert(&update(
            "bronze.orders",
            Some("2026-11-29 10:00:00.0"),
            None,
        ))
        .await
        .unwrap();
    table
        .upsert(&update(
            "bronze.orders",
            Some("2026-11-29 09:00:00.0"),
            None,
        ))
        .await
        .unwrap();
    table
        .upsert(&update("bronze.orders", None, None))
        .await
        .unwrap();
    assert_eq!(
        rows(&location).await,
        [[
            "bronze.orders",
            "bronze.orders-v1",
            "hour",
            "2026-11-29T10:00:00",
            "-",
            "-"
        ]],
        "an older or missing verdict keeps the row's"
    );

    table
        .upsert(&update(
            "bronze.orders",
            Some("2026-11-29 11:00:00.0"),
            None,
        ))
        .await
        .unwrap();
    assert_eq!(rows(&location).await[0][3], "2026-11-29T11:00:00");
}

#[tokio::test]
async fn streams_sharing_one_table_keep_each_others_rows() {
    const STREAMS: usize = 3;
    const UPDATES: usize = 3;
    let dir = tempfile::tempdir().unwrap();
    let (_, location) = open(&dir).await;
    let mut tasks = Vec::new();
    for stream in 0..STREAMS {
        let location = location.clone();
        tasks.push(tokio::spawn(async move {
            let mut table =
                FinalizationTable::open_or_create(&location, &StorageOptions::default())
                    .await
                    .unwrap();
            for hour in 0..UPDATES {
                let until = format!("2026-11-29 {:02}:00:00.0", 10 + hour);
                table
                    .upsert(&update(&format!("bronze.t{stream}"), Some(&until), None))
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let rows = rows(&location).await;
    let expected: Vec<Vec<String>> = (0..STREAMS)
        .map(|s| {
            vec![
                format!("bronze.t{s}"),
                format!("bronze.t{s}-v1"),
                "hour".into(),
                format!("2026-11-29T{:02}:00:00", 10 + UPDATES - 1),
                "-".into(),
                "-".into(),
            ]
        })
        .collect();
    assert_eq!(rows, expected);
}

#[tokio::test]
async fn a_group_of_tables_is_upserted_in_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (mut table, location) = open(&dir).await;
    table
        .upsert_group(&[
            update("bronze.a", Some("2026-01-01 10:00:00"), None),
            update("bronze.b", Some("2026-01-01 11:00:00"), None),
        ])
        .await
        .unwrap();
    assert_eq!(reopen(&location).await.version(), Some(1));
    assert_eq!(
        rows(&location).await,
        vec![
            vec![
                "bronze.a".to_string(),
                "bronze.a-v1".into(),
                "hour".into(),
                "2026-01-01T10:00:00".into(),
                "-".into(),
                "-".into()
            ],
            vec![
                "bronze.b".to_string(),
                "bronze.b-v1".into(),
                "hour".into(),
                "2026-01-01T11:00:00".into(),
                "-".into(),
                "-".into()
            ],
        ]
    );
}

#[tokio::test]
async fn two_updates_of_one_row_in_a_group_are_merged_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (mut table, location) = open(&dir).await;
    table
        .upsert_group(&[
            update("bronze.a", Some("2026-01-01 10:00:00"), None),
            update("bronze.b", None, None),
            update(
                "bronze.a",
                Some("2026-01-01 12:00:00"),
                Some("0x0000002A000001F40003"),
            ),
        ])
        .await
        .unwrap();
    // Two MERGEs: a row cannot be matched twice by one.
    assert_eq!(reopen(&location).await.version(), Some(2));
    let a = rows(&location).await.into_iter().next().unwrap();
    assert_eq!(a[3], "2026-01-01T12:00:00");
    assert_eq!(a[4], "0x0000002A000001F40003");
}

#[test]
fn updates_are_split_only_where_a_table_repeats() {
    let a = update("a", None, None);
    let b = update("b", None, None);
    let updates = [a.clone(), b.clone(), a, b.clone(), b];
    let merges = distinct_rows(&updates);
    let names: Vec<Vec<&str>> = merges
        .iter()
        .map(|m| m.iter().map(|u| u.table_name.as_str()).collect())
        .collect();
    assert_eq!(names, vec![vec!["a", "b"], vec!["a", "b"], vec!["b"]]);
}
