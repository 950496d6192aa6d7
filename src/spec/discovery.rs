//! Discovery, report only: which captured tables of a source's database
//! no `CdcStream` covers yet. `spec.discovery` of a `CdcSource` and the
//! `--include`/`--exclude` flags of `generate-streams` take the same
//! patterns over `schema.table` ([`TableFilter`]); [`uncovered`] is the one
//! rule both apply, and [`DiscoveryStatus`] what the source's worker
//! reports of it: a count and the first [`MAX_DISCOVERED_NAMES`] names,
//! never one entry per table.

use std::collections::{BTreeMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::domain::TableName;

use super::source::{CdcSourceSpec, SourceRefError, stream_config};
use super::types::{CdcStreamSpec, Encrypt, SourceRef, SourceSpec, TableSpec, TriggerSpec};
use super::validate::SourceConfig;

/// The most table names `status.discovery.tables` lists.
pub const MAX_DISCOVERED_NAMES: usize = 20;

/// Which captured tables of the database the source's worker looks for
/// streams of (`spec.discovery`): all when `include` is empty, less those
/// `exclude` matches. Patterns are over `schema.table`, `*` any run and `?`
/// one character, case-insensitive.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverySpec {
    /// Only tables whose `schema.table` matches one of these (e.g.
    /// `sales.*`); every captured table when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 300)))]
    pub include: Vec<String>,
    /// Tables whose `schema.table` matches one of these are left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 300)))]
    pub exclude: Vec<String>,
}

/// What discovery found (`status.discovery`): captured tables that match
/// `spec.discovery` and that no stream of the source covers.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveryStatus {
    /// How many such tables there are.
    pub count: u32,
    /// The first of them by `schema.table`, at most 20;
    /// `mssql-cdc generate-streams` prints a CdcStream for each of them all.
    #[schemars(length(max = 20))]
    pub tables: Vec<String>,
}

/// Why a discovery pattern cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{field}: pattern {pattern:?}: {source}")]
pub struct PatternError {
    /// Where the pattern is (`spec.discovery.include`, `--exclude`).
    pub field: String,
    /// The pattern.
    pub pattern: String,
    /// Why the regex library refused it.
    #[source]
    pub source: regex::Error,
}

/// `include` and `exclude` patterns, compiled once.
#[derive(Debug, Clone, Default)]
pub struct TableFilter {
    include: Vec<regex::Regex>,
    exclude: Vec<regex::Regex>,
}

impl TableFilter {
    /// Compiles `include` and `exclude`; `fields` name them in errors.
    pub fn new(
        include: &[String],
        exclude: &[String],
        fields: (&str, &str),
    ) -> Result<Self, PatternError> {
        Ok(TableFilter {
            include: compiled(include, fields.0)?,
            exclude: compiled(exclude, fields.1)?,
        })
    }

    /// The filter of a source's `spec.discovery`.
    pub fn of_spec(spec: &DiscoverySpec) -> Result<Self, PatternError> {
        Self::new(
            &spec.include,
            &spec.exclude,
            ("spec.discovery.include", "spec.discovery.exclude"),
        )
    }

    /// Whether `table` is included and not excluded.
    pub fn matches(&self, table: &TableName) -> bool {
        let name = table.to_string();
        (self.include.is_empty() || self.include.iter().any(|p| p.is_match(&name)))
            && !self.exclude.iter().any(|p| p.is_match(&name))
    }
}

/// A glob as a regex matched whole and case-insensitively: `*` any run,
/// `?` one character, anything else itself.
fn compiled(patterns: &[String], field: &str) -> Result<Vec<regex::Regex>, PatternError> {
    patterns
        .iter()
        .map(|pattern| {
            let mut body = String::from("(?is)^");
            for c in pattern.chars() {
                match c {
                    '*' => body.push_str(".*"),
                    '?' => body.push('.'),
                    c => body.push_str(&regex::escape(c.encode_utf8(&mut [0; 4]))),
                }
            }
            body.push('$');
            regex::Regex::new(&body).map_err(|source| PatternError {
                field: field.to_string(),
                pattern: pattern.clone(),
                source,
            })
        })
        .collect()
}

/// The tables of `captured` that `filter` matches and that none of
/// `streamed` (the `spec.source.table` of the source's streams, as
/// written) names, in the order of `captured`. Names compare as SQL
/// Server's default collation does, without case; one pass with a set, so
/// a thousand tables cost a thousand lookups.
pub fn uncovered<'a, S: AsRef<str>>(
    captured: &'a [TableName],
    streamed: &[S],
    filter: &TableFilter,
) -> Vec<&'a TableName> {
    let key = |t: &TableName| (t.schema.to_lowercase(), t.table.to_lowercase());
    let covered: HashSet<(String, String)> = streamed
        .iter()
        .filter_map(|s| TableName::parse(s.as_ref()))
        .map(|t| key(&t))
        .collect();
    captured
        .iter()
        .filter(|t| filter.matches(t) && !covered.contains(&key(t)))
        .collect()
}

impl DiscoveryStatus {
    /// The count of `tables` and the first [`MAX_DISCOVERED_NAMES`] of
    /// them by name.
    pub fn of(tables: &[&TableName]) -> Self {
        let mut names: Vec<String> = tables.iter().map(ToString::to_string).collect();
        names.sort();
        names.truncate(MAX_DISCOVERED_NAMES);
        DiscoveryStatus {
            count: u32::try_from(tables.len()).unwrap_or(u32::MAX),
            tables: names,
        }
    }
}

/// The connection of the source `source_name` alone, as any of its
/// tables would connect (the same checks, the same password source): what
/// discovery and `generate-streams` ask the database's catalog on.
pub fn connection_config(
    source_name: &str,
    source: &CdcSourceSpec,
) -> Result<SourceConfig, SourceRefError> {
    Ok(stream_config(source_name, source, "probe", &probe(source_name))?.source)
}

/// A stream of the source that only connects: every table field set, so
/// that no default of the source is needed for it to be valid.
fn probe(source_name: &str) -> CdcStreamSpec {
    let table = |name: &str| TableSpec {
        name: format!("probe.{name}"),
        location: format!("/probe/{name}"),
    };
    CdcStreamSpec {
        app_id: "probe".into(),
        source: SourceSpec {
            host: None,
            port: 0,
            database: None,
            table: "dbo.probe".into(),
            capture_instance: None,
            columns: None,
            source_time_zone: None,
            credentials: None,
            monitoring: None,
            encrypt: Encrypt::default(),
            trust_server_certificate: false,
            readers: 1,
        },
        target: table("target"),
        checkpoint: "/probe/checkpoint".into(),
        source_ref: Some(SourceRef {
            name: source_name.into(),
        }),
        facts: Some(table("facts")),
        adopt_target: false,
        storage_options: BTreeMap::new(),
        trigger: TriggerSpec::default(),
        max_commits_per_batch: None,
        max_value_bytes: None,
        snapshot: None,
        suspend: false,
        worker: None,
        finalization: None,
        silver: None,
        on_data_loss: None,
        heartbeat: None,
        alerts: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables(names: &[&str]) -> Vec<TableName> {
        names.iter().filter_map(|n| TableName::parse(n)).collect()
    }

    fn filter(include: &[&str], exclude: &[&str]) -> TableFilter {
        let own = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        TableFilter::new(&own(include), &own(exclude), ("include", "exclude")).unwrap()
    }

    #[test]
    fn patterns_match_the_whole_name_without_case() {
        let cases = [
            ("sales.*", "SALES.Orders", true),
            ("sales.*", "presales.orders", false),
            ("dbo.ord?rs", "dbo.orders", true),
            ("dbo.ord?rs", "dbo.orders2", false),
            ("dbo.a+b", "dbo.a+b", true),
            ("dbo.a+b", "dbo.aab", false),
            ("dbo.[x]", "dbo.[x]", true),
        ];
        for (include, name, expected) in cases {
            let (schema, table) = name.split_once('.').unwrap();
            let table = TableName {
                schema: schema.into(),
                table: table.into(),
            };
            assert_eq!(
                filter(&[include], &[]).matches(&table),
                expected,
                "{include} {name}"
            );
        }
    }

    #[test]
    fn uncovered_tables_are_those_matched_and_without_a_stream() {
        let captured = tables(&[
            "dbo.customers",
            "dbo.orders",
            "dbo.orders_archive",
            "sales.Lines",
        ]);
        let streamed = ["[dbo].[Orders]", "not a table"];
        let found = uncovered(
            &captured,
            &streamed,
            &filter(&["dbo.*", "sales.*"], &["*_archive"]),
        );
        let names: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["dbo.customers", "sales.Lines"]);
        assert_eq!(
            uncovered(&captured, &streamed, &TableFilter::default()).len(),
            3
        );
    }

    #[test]
    fn the_status_counts_every_table_and_names_the_first_twenty() {
        let captured: Vec<TableName> = (0..25)
            .rev()
            .map(|i| TableName {
                schema: "dbo".into(),
                table: format!("t{i:02}"),
            })
            .collect();
        let all: Vec<&TableName> = captured.iter().collect();
        let status = DiscoveryStatus::of(&all);
        assert_eq!(status.count, 25);
        assert_eq!(status.tables.len(), MAX_DISCOVERED_NAMES);
        assert_eq!(status.tables.first().map(String::as_str), Some("dbo.t00"));
        assert_eq!(status.tables.last().map(String::as_str), Some("dbo.t19"));
    }

    #[test]
    fn a_source_connects_without_any_stream_or_default() {
        let source = crate::spec::load_source_yaml(
            "apiVersion: mssql-cdc.io/v1alpha1\nkind: CdcSource\nmetadata: {name: shop}\n\
             spec:\n  connection:\n    host: sql.internal\n    port: 14330\n    database: shop\n    \
             credentials: {username: reader, passwordFrom: {env: PW}}\n",
        )
        .unwrap();
        let connection = connection_config("shop", &source.spec).unwrap();
        assert_eq!(
            (
                connection.host.as_str(),
                connection.port,
                connection.database.as_str()
            ),
            ("sql.internal", 14330, "shop")
        );
        assert_eq!(connection.username, "reader");
        assert_eq!(
            connection.password,
            crate::spec::PasswordSource::Env("PW".into())
        );
    }
}
