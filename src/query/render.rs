//! Query results as an aligned text table, JSON or CSV.

use deltalake::arrow::array::Array;
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::json::writer::{JsonArray, WriterBuilder};
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::arrow::util::display::array_value_to_string;
use deltalake::arrow::util::pretty::pretty_format_batches;

/// How to print a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A boxed, aligned table for people.
    Text,
    /// One JSON array of objects, NULLs as `null`.
    Json,
    /// RFC 4180 CSV with a header; NULL as an empty field.
    Csv,
}

/// Renders `batches` in `format`.
pub fn render(batches: &[RecordBatch], format: Format) -> Result<String, ArrowError> {
    match format {
        Format::Text => {
            let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
            let table = pretty_format_batches(batches)?.to_string();
            let noun = if rows == 1 { "row" } else { "rows" };
            Ok(format!("{table}\n({rows} {noun})\n"))
        }
        Format::Json => {
            let mut out = Vec::new();
            let mut writer = WriterBuilder::new()
                .with_explicit_nulls(true)
                .build::<_, JsonArray>(&mut out);
            for batch in batches {
                writer.write(batch)?;
            }
            writer.finish()?;
            drop(writer);
            let text = String::from_utf8(out).map_err(|e| ArrowError::JsonError(e.to_string()))?;
            Ok(if text.is_empty() {
                "[]\n".into()
            } else {
                format!("{text}\n")
            })
        }
        Format::Csv => {
            let mut out = String::new();
            if let Some(first) = batches.first() {
                let names: Vec<String> = first
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| csv_field(f.name()))
                    .collect();
                out.push_str(&names.join(","));
                out.push('\n');
            }
            for batch in batches {
                for row in 0..batch.num_rows() {
                    let cells = batch
                        .columns()
                        .iter()
                        .map(|c| {
                            if c.is_null(row) {
                                Ok(String::new())
                            } else {
                                array_value_to_string(c, row).map(|v| csv_field(&v))
                            }
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    out.push_str(&cells.join(","));
                    out.push('\n');
                }
            }
            Ok(out)
        }
    }
}

fn csv_field(value: &str) -> String {
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use deltalake::arrow::array::{Int64Array, StringArray};
    use deltalake::arrow::datatypes::{DataType, Field, Schema};

    fn batch() -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("name", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(StringArray::from(vec![Some("a,\"b\""), None])),
                Arc::new(Int64Array::from(vec![Some(1), None])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn renders_each_format() {
        let b = [batch()];
        assert_eq!(
            render(&b, Format::Csv).unwrap(),
            "name,n\n\"a,\"\"b\"\"\",1\n,\n"
        );
        assert_eq!(
            render(&b, Format::Json).unwrap(),
            "[{\"name\":\"a,\\\"b\\\"\",\"n\":1},{\"name\":null,\"n\":null}]\n"
        );
        let text = render(&b, Format::Text).unwrap();
        assert!(text.contains("| a,\"b\" | 1 |"), "{text}");
        assert!(text.ends_with("(2 rows)\n"), "{text}");
        assert_eq!(render(&[], Format::Json).unwrap(), "[]\n");
    }
}
