//! The row shapes `bench` measures: a narrow table (`bigint, int,
//! varchar(20)`), where per-row overhead dominates, and a wide one (eleven
//! columns of the types that cost the most to decode and encode: Unicode
//! text, decimals, `datetime2(7)`, GUIDs, binary), where per-value work
//! does. Each shape knows its table, how to fill it from one seed row by
//! doubling, and how to make the same rows in memory for the write-only
//! pass.

use std::sync::Arc;

use deltalake::arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array,
    Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use deltalake::arrow::error::ArrowError;

/// A benchmark table's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shape {
    /// `bigint, int, varchar(20)`.
    Narrow,
    /// Eleven columns: `bigint, int, nvarchar(200), decimal(18,4),
    /// datetime2(7), uniqueidentifier, varbinary(64), bit, float,
    /// nvarchar(50), date`.
    Wide,
}

impl Shape {
    /// Its name in the output.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Narrow => "narrow",
            Shape::Wide => "wide",
        }
    }

    /// The column list of `CREATE TABLE` (the key is `id`).
    pub fn columns_ddl(self) -> &'static str {
        match self {
            Shape::Narrow => {
                "id bigint NOT NULL PRIMARY KEY, v int NOT NULL, s varchar(20) NOT NULL"
            }
            Shape::Wide => {
                "id bigint NOT NULL PRIMARY KEY, v int NOT NULL, name nvarchar(200) NOT NULL, \
                 amount decimal(18,4) NOT NULL, at datetime2(7) NOT NULL, \
                 guid uniqueidentifier NOT NULL, blob varbinary(64) NOT NULL, flag bit NOT NULL, \
                 ratio float NOT NULL, label nvarchar(50) NOT NULL, day date NOT NULL"
            }
        }
    }

    /// The key columns (bronze writes them without a dictionary).
    pub fn key_columns(self) -> Vec<String> {
        vec!["id".to_string()]
    }

    /// The values of the first seed row (id 0).
    pub fn first_row(self) -> &'static str {
        match self {
            Shape::Narrow => "0, 0, 'event-0'",
            Shape::Wide => {
                "0, 0, N'Kundenname Ærøskøbing — order placed through the partner portal, row 0', \
                 12345.6789, '2026-11-30T10:11:12.1234567', '6F9619FF-8B86-D011-B42D-00C04FC964FF', \
                 0x000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F, 1, 0.125, \
                 N'label-0', '2026-11-30'"
            }
        }
    }

    /// The `SELECT` list that derives row `id + offset` from seed row
    /// `id` (`{offset}` is replaced by the caller's number).
    pub fn doubling_select(self, offset: u64) -> String {
        match self {
            Shape::Narrow => {
                format!("id + {offset}, v + 1, 'event-' + CAST(id + {offset} AS varchar(12))")
            }
            Shape::Wide => format!(
                "id + {offset}, v + 1, name, amount + 1, at, guid, blob, flag, ratio * 2, \
                 N'label-' + CAST(id + {offset} AS nvarchar(20)), day"
            ),
        }
    }

    /// `SELECT` list copying seed row `id` as row `id + offset`.
    pub fn copy_select(self, offset: u64) -> String {
        let rest: Vec<String> = self
            .captured()
            .fields()
            .iter()
            .skip(1)
            .map(|f| f.name().clone())
            .collect();
        format!("id + {offset}, {}", rest.join(", "))
    }

    /// The captured columns as Arrow types (as bronze holds them).
    pub fn captured(self) -> SchemaRef {
        let field = |name: &str, data_type: DataType| Field::new(name, data_type, true);
        let fields = match self {
            Shape::Narrow => vec![
                field("id", DataType::Int64),
                field("v", DataType::Int32),
                field("s", DataType::Utf8),
            ],
            Shape::Wide => vec![
                field("id", DataType::Int64),
                field("v", DataType::Int32),
                field("name", DataType::Utf8),
                field("amount", DataType::Decimal128(18, 4)),
                field("at", DataType::Timestamp(TimeUnit::Microsecond, None)),
                field("guid", DataType::Utf8),
                field("blob", DataType::Binary),
                field("flag", DataType::Boolean),
                field("ratio", DataType::Float64),
                field("label", DataType::Utf8),
                field("day", DataType::Date32),
            ],
        };
        Arc::new(Schema::new(fields))
    }

    /// Captured columns of rows `from..to`, made in memory like the
    /// source's.
    pub fn synthetic_columns(self, from: u64, to: u64) -> Result<Vec<ArrayRef>, ArrowError> {
        let ids: Vec<i64> = (from..to)
            .map(|i| i64::try_from(i).unwrap_or(i64::MAX))
            .collect();
        let n = ids.len();
        let v = Int32Array::from_iter_values(ids.iter().map(|i| (i % 1000) as i32));
        Ok(match self {
            Shape::Narrow => vec![
                Arc::new(Int64Array::from(ids.clone())),
                Arc::new(v),
                Arc::new(StringArray::from_iter_values(
                    ids.iter().map(|i| format!("event-{i}")),
                )),
            ],
            Shape::Wide => vec![
                Arc::new(Int64Array::from(ids.clone())),
                Arc::new(v),
                Arc::new(StringArray::from(vec![
                    "Kundenname Ærøskøbing — order placed through the partner portal, row 0";
                    n
                ])),
                Arc::new(
                    Decimal128Array::from_iter_values(
                        ids.iter().map(|i| 123_456_789 + i128::from(*i)),
                    )
                    .with_precision_and_scale(18, 4)?,
                ),
                Arc::new(TimestampMicrosecondArray::from(vec![
                    1_795_947_072_123_456i64;
                    n
                ])),
                Arc::new(StringArray::from(vec![
                    "6F9619FF-8B86-D011-B42D-00C04FC964FF";
                    n
                ])),
                Arc::new(BinaryArray::from_iter_values(
                    ids.iter().map(|_| (0u8..32).collect::<Vec<u8>>()),
                )),
                Arc::new(BooleanArray::from(vec![true; n])),
                Arc::new(Float64Array::from(vec![0.125; n])),
                Arc::new(StringArray::from_iter_values(
                    ids.iter().map(|i| format!("label-{i}")),
                )),
                Arc::new(Date32Array::from(vec![20_787; n])),
            ],
        })
    }

    /// Rows `from..to` with bronze's CDC columns appended, for `schema`
    /// (the bronze schema of [`Shape::captured`]).
    pub fn synthetic(
        self,
        schema: &SchemaRef,
        from: u64,
        to: u64,
    ) -> Result<RecordBatch, ArrowError> {
        let n = usize::try_from(to.saturating_sub(from)).unwrap_or(0);
        let mut columns = self.synthetic_columns(from, to)?;
        columns.extend([
            Arc::new(StringArray::from(vec![format!("0x{from:020X}"); n])) as ArrayRef,
            Arc::new(StringArray::from_iter_values(
                (from..to).map(|i| format!("0x{i:020X}")),
            )),
            Arc::new(StringArray::from(vec!["insert"; n])),
            Arc::new(TimestampMicrosecondArray::from(vec![
                1_700_000_000_000_000i64;
                n
            ])),
            Arc::new(Int64Array::from(vec![1i64; n])),
        ]);
        RecordBatch::try_new(schema.clone(), columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mssql_cdc::lake::bronze::bronze_schema;

    #[test]
    fn synthetic_rows_fit_the_bronze_schema_of_each_shape() {
        for shape in [Shape::Narrow, Shape::Wide] {
            let schema = bronze_schema(&shape.captured()).unwrap();
            let batch = shape.synthetic(&schema, 10, 15).unwrap();
            assert_eq!(batch.num_rows(), 5, "{}", shape.name());
            assert_eq!(
                shape.columns_ddl().matches(" NOT NULL").count(),
                shape.captured().fields().len(),
                "{}: the table and the Arrow schema have the same columns",
                shape.name()
            );
        }
    }
}
