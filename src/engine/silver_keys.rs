//! Silver's key: which columns it is, and the check at start that they
//! identify one row of the source. A MERGE keyed by columns that repeat
//! would fold every row sharing a value into one, silently; so the key must
//! contain the columns of the table's primary key, a unique constraint or
//! a unique index (docs/adr/0009-silver-keys.md).

use super::change_source::ChangeSource;
use super::error::EngineError;
use crate::source::CaptureInfo;
use crate::source::unique_keys::UniqueKey;
use crate::spec::{SilverConfig, StreamConfig};

/// Silver's key does not contain the columns of any unique key of the
/// source table: rows sharing it would be merged into one.
#[derive(Debug, thiserror::Error)]
#[error(
    "stream {app_id}: silver table {silver} is keyed by {keys_from} ({keys}), which do not \
     identify one row of {table}: they hold the columns of none of its primary key, unique \
     constraints or unique indexes (it has: {unique}), so rows that share them would be \
     merged into one. Nothing was written. Name in spec.silver.keys the columns of one of \
     them, or give the table a unique index on the columns (see docs/runbooks.md, \
     \"SilverKeyNotUnique\")"
)]
pub struct SilverKeyNotUnique {
    /// The stream's appId.
    pub app_id: String,
    /// The silver table's name.
    pub silver: String,
    /// Where the keys come from, in words.
    pub keys_from: &'static str,
    /// The keys, comma-separated.
    pub keys: String,
    /// The source table.
    pub table: String,
    /// The unique keys the table has, in words.
    pub unique: String,
}

/// The silver key of a stream: the manifest's keys, else the capture
/// instance's index columns.
pub fn keys(spec: &SilverConfig, info: &CaptureInfo) -> Result<Vec<String>, EngineError> {
    match &spec.keys {
        Some(keys) => Ok(keys.clone()),
        None if !info.key_columns.is_empty() => Ok(info.key_columns.clone()),
        None => Err(EngineError::SilverKeyMissing {
            instance: info.instance.clone(),
        }),
    }
}

/// Refuses to start a stream whose silver key does not identify one row
/// of the source table. Nothing without silver.
pub async fn check<S: ChangeSource>(config: &StreamConfig, session: &S) -> Result<(), EngineError> {
    let Some(spec) = &config.silver else {
        return Ok(());
    };
    let keys = keys(spec, session.info())?;
    let unique = session.unique_keys().await?;
    refuse_non_unique(config, spec, &keys, &unique)
}

/// The pure part of [`check`]: `keys` must contain every column of one of
/// `unique` (compared as SQL Server compares names, case-insensitively).
pub fn refuse_non_unique(
    config: &StreamConfig,
    spec: &SilverConfig,
    keys: &[String],
    unique: &[UniqueKey],
) -> Result<(), EngineError> {
    let contains = |key: &UniqueKey| {
        key.columns
            .iter()
            .all(|c| keys.iter().any(|k| k.eq_ignore_ascii_case(c)))
    };
    if unique.iter().any(contains) {
        return Ok(());
    }
    Err(EngineError::SilverKeyNotUnique(Box::new(
        SilverKeyNotUnique {
            app_id: config.app_id.clone(),
            silver: spec.table.name.clone(),
            keys_from: if spec.keys.is_some() {
                "spec.silver.keys"
            } else {
                "the capture instance's index columns"
            },
            keys: keys.join(", "),
            table: config.source.table.to_string(),
            unique: describe(unique),
        },
    )))
}

/// `unique` as a message lists them: `PK_orders (id) primary key; ...`.
fn describe(unique: &[UniqueKey]) -> String {
    if unique.is_empty() {
        return "none".into();
    }
    unique
        .iter()
        .map(|k| {
            format!(
                "{} ({}) {}",
                k.name,
                k.columns.join(", "),
                k.kind.describe()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::unique_keys::UniqueKind;

    /// The orders fixture's stream with a silver table keyed by `keys`.
    fn config(keys: Option<&[&str]>) -> (StreamConfig, SilverConfig) {
        let manifest = include_str!("../../tests/fixtures/manifests/orders.yaml");
        let mut config = crate::spec::load_yaml(manifest)
            .expect("the fixture loads")
            .spec
            .validate()
            .expect("the fixture is valid");
        let spec = SilverConfig {
            table: crate::spec::TableConfig {
                name: "silver.orders".into(),
                location: crate::lake::StorageLocation::parse("/lake/silver/orders")
                    .expect("a location"),
            },
            keys: keys.map(strings),
            deletes: crate::spec::SilverDeletes::Hard,
        };
        config.silver = Some(spec.clone());
        (config, spec)
    }

    fn key(name: &str, kind: UniqueKind, columns: &[&str]) -> UniqueKey {
        UniqueKey {
            name: name.into(),
            kind,
            columns: columns.iter().map(|c| c.to_string()).collect(),
        }
    }

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_key_holding_a_unique_keys_columns_is_accepted() {
        let unique = [
            key("PK_orders", UniqueKind::PrimaryKey, &["id"]),
            key("UX_orders_ref", UniqueKind::UniqueIndex, &["tenant", "ref"]),
        ];
        let (config, spec) = config(Some(&["x"]));
        for keys in [
            &["id"][..],
            &["ID"],
            &["id", "note"],
            &["Ref", "tenant"],
            &["ref", "note", "tenant"],
        ] {
            refuse_non_unique(&config, &spec, &strings(keys), &unique)
                .unwrap_or_else(|e| panic!("{keys:?}: {e}"));
        }
    }

    #[test]
    fn a_key_without_a_unique_keys_columns_is_refused_naming_what_exists() {
        let unique = [
            key("PK_orders", UniqueKind::PrimaryKey, &["id"]),
            key("UQ_ref", UniqueKind::UniqueConstraint, &["tenant", "ref"]),
        ];
        let (named_config, named) = config(Some(&["note"]));
        let error = refuse_non_unique(&named_config, &named, &strings(&["note", "ref"]), &unique)
            .expect_err("not unique");
        assert_eq!(error.kind(), "silver_key");
        let said = error.to_string();
        for part in [
            "spec.silver.keys",
            "(note, ref)",
            "silver.orders",
            "PK_orders (id) primary key; UQ_ref (tenant, ref) unique constraint",
            "docs/runbooks.md",
        ] {
            assert!(said.contains(part), "{part:?} in {said}");
        }

        let (unnamed_config, unnamed) = config(None);
        let heap = refuse_non_unique(&unnamed_config, &unnamed, &strings(&["id"]), &[])
            .expect_err("a heap has no unique key")
            .to_string();
        assert!(heap.contains("index columns"), "{heap}");
        assert!(heap.contains("(it has: none)"), "{heap}");
    }

    #[test]
    fn the_keys_are_the_manifests_else_the_capture_instances() {
        let info = |keys: &[&str]| CaptureInfo {
            instance: crate::domain::CaptureInstance::new("dbo_orders").expect("a name"),
            change_table_id: 1,
            columns: Vec::new(),
            key_columns: strings(keys),
        };
        let (_, named) = config(Some(&["ref"]));
        assert_eq!(keys(&named, &info(&["id"])).expect("keys"), ["ref"]);
        let (_, unnamed) = config(None);
        assert_eq!(keys(&unnamed, &info(&["id"])).expect("keys"), ["id"]);
        assert!(keys(&unnamed, &info(&[])).is_err());
    }
}
