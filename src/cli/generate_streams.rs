//! `mssql-cdc generate-streams --source FILE --lake URI`: one `CdcStream`
//! manifest per captured table of a `CdcSource`'s database that no stream
//! in the file covers yet, printed as YAML for a GitOps repository (kubectl,
//! Helm, Argo CD and Flux read it the same: see `operator::yaml`).

use std::collections::HashSet;
use std::path::PathBuf;

use anyhow::{Context, anyhow, bail};
use mssql_cdc::domain::TableName;
use mssql_cdc::operator::yaml::to_yaml;
use mssql_cdc::source::cdc::captured_tables;
use mssql_cdc::source::connect;
use mssql_cdc::spec::{
    CdcSource, CdcStream, PasswordSource, TableFilter, load_source_yaml, load_yaml,
    resolve_password, source_connection_config, source_stream_config, uncovered,
};
use serde::Deserialize;

/// Arguments of `generate-streams`.
#[derive(clap::Args)]
pub struct GenerateArgs {
    /// A file holding the CdcSource, and any of its CdcStreams (their
    /// tables are left out); other documents (Secrets, volumes) are skipped.
    #[arg(long = "source")]
    pub file: PathBuf,
    /// Only tables whose `schema.table` matches (`*` any run, `?` one
    /// character, case-insensitive); repeat for several. All when absent.
    #[arg(long = "include", value_name = "PATTERN")]
    pub include: Vec<String>,
    /// Leave out tables whose `schema.table` matches; repeatable.
    #[arg(long = "exclude", value_name = "PATTERN")]
    pub exclude: Vec<String>,
    /// Where the generated streams write: bronze at
    /// `URI/bronze/<schema>/<table>`, checkpoints at
    /// `URI/_checkpoints/<schema>/<table>`.
    #[arg(long, value_name = "URI")]
    pub lake: String,
    /// Connect here instead of the source's `connection.host` and `port`
    /// (`HOST` or `HOST:PORT`), e.g. through a port-forward.
    #[arg(long, value_name = "HOST[:PORT]")]
    pub server: Option<String>,
    /// Read the password from this environment variable instead of the
    /// source's `passwordFrom` (a Secret cannot be read from here).
    #[arg(long, value_name = "VAR")]
    pub password_env: Option<String>,
}

/// Prints the manifests; a summary line goes to stderr.
pub async fn run_generate(args: GenerateArgs) -> anyhow::Result<()> {
    let file = args.file.display().to_string();
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read --source {file}"))?;
    let (source, streams) = read_file(&text).with_context(|| format!("--source {file}"))?;
    let name = source
        .metadata
        .name
        .clone()
        .ok_or_else(|| anyhow!("--source {file}: the CdcSource has no metadata.name"))?;
    let filter = TableFilter::new(&args.include, &args.exclude, ("--include", "--exclude"))?;

    // The source's connection, as any of its tables would connect.
    let mut connection = source_connection_config(&name, &source.spec)
        .with_context(|| format!("--source {file}: CdcSource {name}"))?;
    if let Some(server) = &args.server {
        let (host, port) = match server.rsplit_once(':') {
            Some((host, port)) => (
                host.to_string(),
                port.parse()
                    .map_err(|_| anyhow!("--server {server}: the port is not a number"))?,
            ),
            None => (server.clone(), connection.port),
        };
        (connection.host, connection.port) = (host, port);
    }
    if let Some(var) = &args.password_env {
        connection.password = PasswordSource::Env(var.clone());
    }
    let password = resolve_password(&connection.password, |v| std::env::var(v).ok())
        .context("the source's password (give --password-env VAR when it is a Secret)")?;
    let mut client = connect(&connection, &password).await?;
    let captured = captured_tables(&mut client).await?;

    let covered: Vec<&str> = streams
        .iter()
        .map(|s| s.spec.source.table.as_str())
        .collect();
    let tables = uncovered(&captured, &covered, &filter);
    let mut printed = 0;
    for stream in named_streams(&name, &tables, &args.lake, &streams)? {
        let table = &stream.spec.source.table;
        // What is printed must run: resolve it against the source.
        let stream_name = stream.metadata.name.clone().unwrap_or_default();
        source_stream_config(&name, &source.spec, &stream_name, &stream.spec)
            .with_context(|| format!("the stream generated for {table}"))?;
        let value = serde_json::to_value(&stream)?;
        print!("---\n{}", to_yaml(&value));
        printed += 1;
    }
    eprintln!(
        "{printed} CdcStream(s) for CdcSource {name}: {} captured table(s), {} already streamed in {file}",
        captured.len(),
        covered.len()
    );
    Ok(())
}

/// One stream per table, each with a name and a target name no other
/// stream of the file and no other generated one has: two tables whose
/// names map to the same DNS label (`a_b`, `a-b`) or the same target name
/// (`dbo.a_b`, `a.b`) must not become one object or write one target, so
/// the later one gets a suffix of its table's hash.
fn named_streams(
    source: &str,
    tables: &[&TableName],
    lake: &str,
    existing: &[CdcStream],
) -> anyhow::Result<Vec<CdcStream>> {
    let mut names: HashSet<String> = existing
        .iter()
        .filter_map(|s| s.metadata.name.clone())
        .collect();
    let mut targets: HashSet<String> = existing
        .iter()
        .map(|s| s.spec.target.name.to_lowercase())
        .collect();
    let mut named = Vec::with_capacity(tables.len());
    for table in tables {
        let mut stream = generated(source, table, lake, None)?;
        let name = stream.metadata.name.clone().unwrap_or_default();
        if names.contains(&name) || targets.contains(&stream.spec.target.name.to_lowercase()) {
            stream = generated(source, table, lake, Some(&name_hash(table)))?;
        }
        names.extend(stream.metadata.name.clone());
        targets.insert(stream.spec.target.name.to_lowercase());
        named.push(stream);
    }
    Ok(named)
}

/// The CdcSource of `text` and its CdcStreams, each checked as `run -f`
/// checks them.
fn read_file(text: &str) -> anyhow::Result<(CdcSource, Vec<CdcStream>)> {
    let mut source = None;
    let mut streams = Vec::new();
    for (n, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = serde_yaml::Value::deserialize(document)
            .with_context(|| format!("document {}", n + 1))?;
        let kind = value
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or_default();
        let document = || serde_yaml::to_string(&value);
        match kind {
            "CdcSource" if source.is_some() => bail!("the file holds more than one CdcSource"),
            "CdcSource" => source = Some(load_source_yaml(&document()?)?),
            "CdcStream" => streams.push(load_yaml(&document()?)?),
            _ => {}
        }
    }
    let source = source.ok_or_else(|| anyhow!("the file holds no CdcSource"))?;
    let name = source.metadata.name.as_deref().unwrap_or_default();
    streams.retain(|s| s.spec.source_ref.as_ref().is_some_and(|r| r.name == name));
    Ok((source, streams))
}

/// The stream of `table` in the source `source`: named and identified
/// after both (and `suffix`, when given), writing under `lake`.
fn generated(
    source: &str,
    table: &TableName,
    lake: &str,
    suffix: Option<&str>,
) -> anyhow::Result<CdcStream> {
    let dns = |text: &str| -> String {
        let mapped: String = text
            .to_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        mapped.trim_matches('-').to_string()
    };
    let mut name = if table.schema.eq_ignore_ascii_case("dbo") {
        format!("{}-{}", dns(source), dns(&table.table))
    } else {
        format!(
            "{}-{}-{}",
            dns(source),
            dns(&table.schema),
            dns(&table.table)
        )
    };
    // appId gets a "-v1"; both stay a DNS label.
    let room = 60 - suffix.map_or(0, |s| s.len() + 1);
    name.truncate(room);
    let mut name = name.trim_end_matches('-').to_string();
    if let Some(suffix) = suffix {
        name = format!("{name}-{suffix}");
    }
    let lake = lake.trim_end_matches('/');
    let path = format!("{}/{}", table.schema, table.table);
    let mut target = if table.schema.eq_ignore_ascii_case("dbo") {
        format!("bronze.{}", table.table)
    } else {
        format!("bronze.{}_{}", table.schema, table.table)
    };
    if let Some(suffix) = suffix {
        target = format!("{target}_{suffix}");
    }
    let manifest = serde_json::json!({
        "apiVersion": "mssql-cdc.io/v1alpha1",
        "kind": "CdcStream",
        "metadata": {"name": name},
        "spec": {
            "sourceRef": {"name": source},
            "appId": format!("{name}-v1"),
            "source": {"table": table.to_string()},
            "target": {"name": target, "location": format!("{lake}/bronze/{path}")},
            "checkpoint": format!("{lake}/_checkpoints/{path}"),
        }
    });
    Ok(load_yaml(&serde_yaml::to_string(&manifest)?)?)
}

/// 8 hex digits of the SHA-256 of `schema.table`: tells apart two tables
/// whose generated names are the same.
fn name_hash(table: &TableName) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(table.to_string().as_bytes())
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_stream_is_named_after_its_source_and_table() {
        let table = TableName::parse("Sales.Order Lines").unwrap();
        let stream = generated("shop", &table, "s3://lake/", None).unwrap();
        assert_eq!(
            stream.metadata.name.as_deref(),
            Some("shop-sales-order-lines")
        );
        assert_eq!(stream.spec.app_id, "shop-sales-order-lines-v1");
        assert_eq!(
            stream.spec.checkpoint,
            "s3://lake/_checkpoints/Sales/Order Lines"
        );
        let long = TableName::parse(&format!("dbo.{}", "x".repeat(80))).unwrap();
        let other = generated("shop", &long, "/lake", Some(&name_hash(&long))).unwrap();
        let name = other.metadata.name.unwrap_or_default();
        assert!(
            name.len() <= 60 && name.ends_with(&name_hash(&long)),
            "{name}"
        );
    }

    #[test]
    fn tables_whose_names_or_targets_would_clash_get_their_own() {
        let tables: Vec<TableName> = ["dbo.a_b", "a.b", "dbo.a-b"]
            .iter()
            .map(|t| TableName::parse(t).unwrap())
            .collect();
        let refs: Vec<&TableName> = tables.iter().collect();
        let streams = named_streams("shop", &refs, "/lake", &[]).unwrap();
        let names: HashSet<_> = streams.iter().map(|s| s.metadata.name.clone()).collect();
        let targets: HashSet<_> = streams.iter().map(|s| s.spec.target.name.clone()).collect();
        assert_eq!((names.len(), targets.len()), (3, 3), "{streams:?}");
        // The first keeps the plain names; the later ones say whose they are.
        assert_eq!(streams[0].spec.target.name, "bronze.a_b");
        assert_eq!(
            streams[1].spec.target.name,
            format!("bronze.a_b_{}", name_hash(&tables[1]))
        );
        // A stream of the file already holding a target name keeps it.
        let again = named_streams("shop", &refs[1..2], "/lake", &streams[..1]).unwrap();
        assert_ne!(again[0].spec.target.name, "bronze.a_b");
    }
}
