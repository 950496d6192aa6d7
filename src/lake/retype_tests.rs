use std::sync::Arc;

use deltalake::arrow::array::{Decimal128Array, Int32Array, StringArray};
use deltalake::arrow::datatypes::{Field, Schema};
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::{DataType as DeltaType, PrimitiveType, StructField, Transaction};

use super::*;
use crate::lake::delta::{open_or_create_with, txn_version};
use crate::lake::test_support::query;
use crate::lake::{StorageLocation, StorageOptions};

#[test]
fn widenings_keep_every_value_and_the_rest_is_refused() {
    use DataType::*;
    let cases = [
        (Int16, Int32, true),
        (Int16, Int64, true),
        (Int32, Int64, true),
        (Float32, Float64, true),
        (Decimal128(10, 2), Decimal128(18, 2), true),
        (Decimal128(10, 2), Decimal128(38, 2), true),
        (Int64, Int32, false),
        (Int32, Int16, false),
        (Float64, Float32, false),
        (Decimal128(18, 2), Decimal128(10, 2), false),
        (Decimal128(10, 2), Decimal128(12, 4), false),
        (Int32, Utf8, false),
        (Utf8, Int32, false),
    ];
    for (old, new, widening) in cases {
        let got = classify(&old, &new);
        assert_eq!(
            matches!(got, TypeChange::Widening),
            widening,
            "{old} -> {new}: {got:?}"
        );
        assert!(
            widening || matches!(got, TypeChange::Refused(_)),
            "{old} -> {new}: {got:?}"
        );
    }
    assert_eq!(classify(&Utf8, &Utf8), TypeChange::Same);
}

#[test]
fn only_columns_the_table_has_in_another_type_are_asked_for() {
    let schema = Schema::new(vec![
        Field::new("Id", DataType::Int32, true),
        Field::new("v", DataType::Int64, true),
    ]);
    let wanted = [
        ("id".to_string(), DataType::Int64),
        ("v".to_string(), DataType::Int64),
        ("absent".to_string(), DataType::Int64),
    ];
    let asked = widenings_of(&schema, &wanted).expect("a widening");
    assert_eq!(
        asked,
        [Retype {
            column: "Id".into(),
            from: DataType::Int32,
            to: DataType::Int64
        }]
    );
    let refused = widenings_of(&schema, &[("v".to_string(), DataType::Int32)]);
    assert!(
        matches!(&refused, Err((r, _)) if r.column == "v" && r.to == DataType::Int32),
        "{refused:?}"
    );
}

fn field(name: &str, ty: PrimitiveType) -> StructField {
    StructField::new(name, DeltaType::Primitive(ty), true)
}

#[tokio::test]
async fn a_rewrite_holds_every_row_in_the_new_types_and_keeps_the_tables_txn_and_properties() {
    let dir = tempfile::tempdir().unwrap();
    let location = StorageLocation::parse(dir.path().join("t").to_str().unwrap()).unwrap();
    let fields = vec![
        field("id", PrimitiveType::Integer),
        field("amount", PrimitiveType::decimal(10, 2).unwrap()),
        field("note", PrimitiveType::String),
    ];
    let mut table = open_or_create_with(
        &location,
        &StorageOptions::default(),
        fields,
        "test",
        &[("mssql_cdc.keys", "id".to_string())],
    )
    .await
    .unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, true),
        Field::new("amount", DataType::Decimal128(10, 2), true),
        Field::new("note", DataType::Utf8, true),
    ]));
    for (ids, version) in [([1, 2], 1), ([3, i32::MAX], 2)] {
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int32Array::from(ids.to_vec())),
                Arc::new(
                    Decimal128Array::from(vec![12_345_678_i128, -99_999_999])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
                Arc::new(StringArray::from(vec![Some("a"), None])),
            ],
        )
        .unwrap();
        table = table
            .write(vec![batch])
            .with_commit_properties(
                CommitProperties::default()
                    .with_application_transaction(Transaction::new("app", version)),
            )
            .await
            .unwrap();
    }
    let retypes = [
        Retype {
            column: "id".into(),
            from: DataType::Int32,
            to: DataType::Int64,
        },
        Retype {
            column: "amount".into(),
            from: DataType::Decimal128(10, 2),
            to: DataType::Decimal128(18, 2),
        },
    ];
    rewrite_widened(&mut table, &retypes, CommitProperties::default())
        .await
        .unwrap();

    let reread = crate::lake::test_support::reopen(&location).await;
    let schema = reread.snapshot().unwrap().snapshot().arrow_schema();
    let types: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| format!("{}:{}", f.name(), f.data_type()))
        .collect();
    assert_eq!(
        types,
        ["id:Int64", "amount:Decimal128(18, 2)", "note:Utf8"],
        "the new types, in the same order"
    );
    let rows = query(&reread, "SELECT id, amount, note FROM t ORDER BY id").await;
    assert_eq!(
        rows,
        [
            ["1", "123456.78", "a"],
            ["2", "-999999.99", ""],
            ["3", "123456.78", "a"],
            [&i32::MAX.to_string(), "-999999.99", ""],
        ]
    );
    let mut reread = reread;
    assert_eq!(txn_version(&mut reread, "app").await.unwrap(), Some(2));
    assert_eq!(
        reread
            .snapshot()
            .unwrap()
            .metadata()
            .configuration()
            .get("mssql_cdc.keys")
            .cloned(),
        Some("id".to_string()),
        "our properties survive the rewrite"
    );

    // Asked again (a replay after a crash), nothing is rewritten.
    let version = reread.version();
    rewrite_widened(&mut reread, &retypes, CommitProperties::default())
        .await
        .unwrap();
    assert_eq!(reread.version(), version);
}
