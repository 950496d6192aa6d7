//! Spark's `from_json(json, 'DDL schema')`: parses JSON text into a struct
//! of the given schema, so `from_json(detail, 'warnings ARRAY<STRING>').warnings`
//! reads the warnings list. Like Spark's default (PERMISSIVE) mode, NULL
//! text gives NULL and text that is not a JSON object of that schema gives
//! a struct of NULLs.

use std::sync::Arc;

use deltalake::arrow::array::{Array, ArrayRef, StringArray, StructArray, new_null_array};
use deltalake::arrow::compute::{cast, concat};
use deltalake::arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema};
use deltalake::arrow::json::ReaderBuilder;
use deltalake::datafusion::common::{ScalarValue, exec_err, plan_err};
use deltalake::datafusion::error::Result;
use deltalake::datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// `from_json`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct FromJson {
    signature: Signature,
}

impl FromJson {
    pub(super) fn new() -> Self {
        FromJson {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for FromJson {
    fn name(&self) -> &str {
        "from_json"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types.len() {
            2 => Ok(vec![DataType::Utf8, DataType::Utf8]),
            _ => plan_err!("from_json takes (json, schema)"),
        }
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        plan_err!("from_json needs its schema as a constant")
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let schema = match args.scalar_arguments.get(1).copied().flatten() {
            Some(ScalarValue::Utf8(Some(ddl))) => ddl,
            _ => return plan_err!("from_json: the schema must be a constant string"),
        };
        match parse_ddl(schema) {
            Ok(fields) => Ok(Arc::new(Field::new(
                self.name(),
                DataType::Struct(fields),
                true,
            ))),
            Err(e) => plan_err!("from_json schema {schema:?}: {e}"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let DataType::Struct(fields) = args.return_type().clone() else {
            return exec_err!("from_json: struct result expected");
        };
        let Some(json) = args.args.first() else {
            return exec_err!("from_json takes (json, schema)");
        };
        let json = cast(&json.to_array(args.number_rows)?, &DataType::Utf8)?;
        let Some(json) = json.as_any().downcast_ref::<StringArray>() else {
            return exec_err!("from_json: text expected");
        };
        let schema = Arc::new(Schema::new(fields.clone()));
        let struct_type = DataType::Struct(fields.clone());
        let mut rows: Vec<ArrayRef> = Vec::with_capacity(json.len());
        for text in json.iter() {
            let row = match text {
                None => new_null_array(&struct_type, 1),
                Some(text) => match decode_one(&schema, text) {
                    Some(row) => row,
                    None => {
                        decode_one(&schema, "{}").unwrap_or_else(|| new_null_array(&struct_type, 1))
                    }
                },
            };
            rows.push(row);
        }
        let refs: Vec<&dyn Array> = rows.iter().map(|r| r.as_ref()).collect();
        let out = if refs.is_empty() {
            new_null_array(&struct_type, 0)
        } else {
            concat(&refs)?
        };
        Ok(ColumnarValue::Array(out))
    }
}

/// One JSON object as a one-row struct array; `None` if it does not fit.
fn decode_one(schema: &Arc<Schema>, text: &str) -> Option<ArrayRef> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    if !value.is_object() {
        return None;
    }
    let mut decoder = ReaderBuilder::new(schema.clone()).build_decoder().ok()?;
    decoder.serialize(&[value]).ok()?;
    let batch = decoder.flush().ok()??;
    (batch.num_rows() == 1).then(|| Arc::new(StructArray::from(batch)) as ArrayRef)
}

/// Parses a Spark DDL schema such as `warnings ARRAY<STRING>, n INT` into
/// Arrow fields (all nullable, as Spark reads JSON).
fn parse_ddl(text: &str) -> Result<Fields, String> {
    let mut parser = Ddl { rest: text.trim() };
    let fields = parser.fields(None)?;
    if !parser.rest.trim().is_empty() {
        return Err(format!("unexpected {:?}", parser.rest.trim()));
    }
    Ok(fields)
}

struct Ddl<'a> {
    rest: &'a str,
}

impl Ddl<'_> {
    fn skip_space(&mut self) {
        self.rest = self.rest.trim_start();
    }

    fn eat(&mut self, token: char) -> bool {
        self.skip_space();
        match self.rest.strip_prefix(token) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    fn word(&mut self) -> Result<String, String> {
        self.skip_space();
        if let Some(rest) = self.rest.strip_prefix('`') {
            let end = rest.find('`').ok_or("unclosed `")?;
            let word = rest[..end].to_string();
            self.rest = &rest[end + 1..];
            return Ok(word);
        }
        let end = self
            .rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(self.rest.len());
        if end == 0 {
            return Err(format!("expected a name at {:?}", self.rest));
        }
        let word = self.rest[..end].to_string();
        self.rest = &self.rest[end..];
        Ok(word)
    }

    /// `name [:] TYPE, ...` up to `closing` (or the end).
    fn fields(&mut self, closing: Option<char>) -> Result<Fields, String> {
        let mut fields = Vec::new();
        loop {
            let name = self.word()?;
            self.eat(':');
            let data_type = self.data_type()?;
            fields.push(Field::new(name, data_type, true));
            if !self.eat(',') {
                break;
            }
        }
        if let Some(c) = closing
            && !self.eat(c)
        {
            return Err(format!("expected {c:?} at {:?}", self.rest));
        }
        Ok(fields.into())
    }

    fn data_type(&mut self) -> Result<DataType, String> {
        let name = self.word()?.to_ascii_uppercase();
        Ok(match name.as_str() {
            "STRING" | "VARCHAR" | "CHAR" => {
                if self.eat('(') {
                    self.word()?;
                    self.eat(')');
                }
                DataType::Utf8
            }
            "BOOLEAN" => DataType::Boolean,
            "TINYINT" | "BYTE" => DataType::Int8,
            "SMALLINT" | "SHORT" => DataType::Int16,
            "INT" | "INTEGER" => DataType::Int32,
            "BIGINT" | "LONG" => DataType::Int64,
            "FLOAT" | "REAL" => DataType::Float32,
            "DOUBLE" => DataType::Float64,
            "ARRAY" => {
                if !self.eat('<') {
                    return Err("ARRAY needs <element type>".into());
                }
                let element = self.data_type()?;
                if !self.eat('>') {
                    return Err(format!("expected '>' at {:?}", self.rest));
                }
                DataType::List(Arc::new(Field::new("element", element, true)))
            }
            "STRUCT" => {
                if !self.eat('<') {
                    return Err("STRUCT needs <fields>".into());
                }
                DataType::Struct(self.fields(Some('>'))?)
            }
            other => return Err(format!("type {other} is not supported")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::functions::test_support::eval;

    #[test]
    fn parses_ddl_schemas() {
        let fields =
            parse_ddl("warnings ARRAY<STRING>, n INT, s STRUCT<a: DOUBLE, `b c` BIGINT>").unwrap();
        let shown: Vec<String> = fields
            .iter()
            .map(|f| format!("{} {}", f.name(), f.data_type()))
            .collect();
        assert!(shown[0].starts_with("warnings List(Utf8"), "{}", shown[0]);
        assert_eq!(shown[1], "n Int32");
        assert!(shown[2].contains("b c"), "{}", shown[2]);
        for bad in ["", "x", "x ARRAY<INT", "x MAP<STRING, INT>", "x INT y"] {
            assert!(parse_ddl(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn reads_fields_like_spark_permissive_mode() {
        let (values, _) = eval(
            "from_json('{\"warnings\": [\"a\", \"b\"], \"other\": 1}', 'warnings ARRAY<STRING>').warnings, \
             from_json('not json', 'warnings ARRAY<STRING>').warnings, \
             from_json(CAST(NULL AS STRING), 'warnings ARRAY<STRING>') IS NULL, \
             from_json('not json', 'warnings ARRAY<STRING>') IS NULL, \
             from_json('{\"n\": 7}', 'n INT').n + 1",
        )
        .await;
        assert_eq!(values, ["[a, b]", "", "true", "false", "8"]);
    }
}
