//! Following a source column's type change in a Delta table we write.
//!
//! SQL Server propagates `ALTER COLUMN` of a captured column to the change
//! table, so after it every change row (older ones too) arrives in the new
//! type. A widening keeps every value, so the table follows it; anything
//! else would cut, wrap or drop values and is refused.
//!
//! delta-rs 1.1 can neither write nor read Delta's `typeWidening` table
//! feature, and a metadata-only type change leaves older Parquet files in
//! the old physical type, which Spark 3 refuses to read. So a widening
//! rewrites the table once, every row cast to the new types, in one
//! overwrite commit: every reader sees one plain column of the new type,
//! and time travel still finds the old files (see
//! docs/adr/0012-following-type-changes.md).

use deltalake::DeltaTable;
use deltalake::DeltaTableError;
use deltalake::arrow::datatypes::{DataType, Schema};
use deltalake::datafusion::prelude::{Expr, SessionContext, cast, ident};
use deltalake::kernel::transaction::CommitProperties;
use deltalake::operations::write::SchemaMode;
use deltalake::protocol::SaveMode;

use super::table_properties::commit_properties;

/// What a column's new type means for the table holding the old one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeChange {
    /// The same Delta type: nothing to do (a longer string, a finer
    /// `datetime2` that bronze keeps in microseconds anyway).
    Same,
    /// Every value of the old type is a value of the new one.
    Widening,
    /// Some value would be cut, wrapped or lost: the reason, in words.
    Refused(&'static str),
}

/// Whether `new` can replace `old` without losing a value.
pub fn classify(old: &DataType, new: &DataType) -> TypeChange {
    use DataType::{Decimal128, Float32, Float64, Int16, Int32, Int64};
    if old == new {
        return TypeChange::Same;
    }
    match (old, new) {
        (Int16, Int32 | Int64) | (Int32, Int64) | (Float32, Float64) => TypeChange::Widening,
        (Decimal128(p, s), Decimal128(q, t)) if s == t && q >= p => TypeChange::Widening,
        (Decimal128(_, s), Decimal128(_, t)) if s != t => TypeChange::Refused(
            "a decimal's scale changed, so every stored value would be rescaled",
        ),
        (Decimal128(..), Decimal128(..)) => {
            TypeChange::Refused("the new decimal has fewer digits than values already stored")
        }
        (Int32 | Int64, Int16 | Int32) | (Float64, Float32) => {
            TypeChange::Refused("the new type is narrower than the stored one")
        }
        _ => TypeChange::Refused("the new type is of another kind"),
    }
}

/// A column of the table and the type it is to have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retype {
    /// The column's name in the table.
    pub column: String,
    /// Its type now.
    pub from: DataType,
    /// Its type after the rewrite.
    pub to: DataType,
}

/// The widenings `wanted` (column name, new type) asks of a table whose
/// schema is `current`: columns it lacks, or already has in the new type,
/// ask nothing. Names compare case-insensitively, as SQL Server's do.
pub fn widenings_of(
    current: &Schema,
    wanted: &[(String, DataType)],
) -> Result<Vec<Retype>, (Retype, &'static str)> {
    let mut out = Vec::new();
    for (name, to) in wanted {
        let Some(field) = current
            .fields()
            .iter()
            .find(|f| f.name().eq_ignore_ascii_case(name))
        else {
            continue;
        };
        let retype = Retype {
            column: field.name().clone(),
            from: field.data_type().clone(),
            to: to.clone(),
        };
        match classify(field.data_type(), to) {
            TypeChange::Same => {}
            TypeChange::Widening => out.push(retype),
            TypeChange::Refused(reason) => return Err((retype, reason)),
        }
    }
    Ok(out)
}

/// Rewrites `table` with the columns of `retypes` cast to their new types,
/// in one overwrite commit carrying `properties`. Runs the rewrite as one
/// DataFusion plan, so memory stays bounded by batches, not by the table.
/// A widening another writer made first is not made again.
pub(crate) async fn rewrite_widened(
    table: &mut DeltaTable,
    retypes: &[Retype],
    properties: CommitProperties,
) -> Result<(), DeltaTableError> {
    table.update_state().await?;
    let schema = table.snapshot()?.snapshot().arrow_schema();
    let wanted: Vec<(String, DataType)> = retypes
        .iter()
        .map(|r| (r.column.clone(), r.to.clone()))
        .collect();
    let still = match widenings_of(&schema, &wanted) {
        Ok(still) => still,
        Err((retype, reason)) => {
            return Err(DeltaTableError::Generic(format!(
                "column {} cannot become {} ({reason})",
                retype.column, retype.to
            )));
        }
    };
    if still.is_empty() {
        return Ok(());
    }
    let ctx = SessionContext::new();
    table.update_datafusion_session(&ctx.state())?;
    let frame = ctx.read_table(table.table_provider().await?)?;
    let columns: Vec<Expr> = schema
        .fields()
        .iter()
        .map(|field| {
            let column = ident(field.name());
            match still.iter().find(|r| &r.column == field.name()) {
                Some(retype) => cast(column, retype.to.clone()).alias(field.name()),
                None => column,
            }
        })
        .collect();
    let plan = frame.select(columns)?.into_unoptimized_plan();
    let rewritten = table
        .clone()
        .write(Vec::new())
        .with_input_plan(plan)
        .with_save_mode(SaveMode::Overwrite)
        .with_schema_mode(SchemaMode::Overwrite)
        .with_commit_properties(properties)
        .await?;
    *table = rewritten;
    Ok(())
}

/// The commit of a rewrite, saying in its `commitInfo` which columns it
/// widened, for whoever reads the table's history.
pub(crate) fn widening_commit(retypes: &[Retype]) -> CommitProperties {
    let widened: Vec<serde_json::Value> = retypes
        .iter()
        .map(|r| {
            serde_json::json!({
                "column": r.column,
                "from": delta_type_name(&r.from),
                "to": delta_type_name(&r.to),
            })
        })
        .collect();
    commit_properties().with_metadata([(
        "mssql_cdc.widened".to_string(),
        serde_json::Value::Array(widened),
    )])
}

/// The Delta name of an Arrow type bronze uses, as readers print it
/// (`integer`, `long`, `decimal(18,2)`).
pub fn delta_type_name(ty: &DataType) -> String {
    match ty {
        DataType::Boolean => "boolean".into(),
        DataType::Int16 => "short".into(),
        DataType::Int32 => "integer".into(),
        DataType::Int64 => "long".into(),
        DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Decimal128(p, s) => format!("decimal({p},{s})"),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "binary".into(),
        DataType::Date32 => "date".into(),
        DataType::Timestamp(_, None) => "timestamp_ntz".into(),
        DataType::Timestamp(_, Some(_)) => "timestamp".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
#[path = "retype_tests.rs"]
mod tests;
