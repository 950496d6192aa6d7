//! Small helpers over deltalake shared by the bronze and facts writers.

use deltalake::kernel::StructField;
use deltalake::protocol::SaveMode;
use deltalake::{DeltaTable, DeltaTableError};

use super::storage::{StorageLocation, StorageOptions, register_handlers};
use super::table_properties::{commit_properties, owned};

/// Opens the table at `location`, creating it with `fields` when no table is
/// there yet. Two processes creating it at once both end with the same table.
pub(crate) async fn open_or_create(
    location: &StorageLocation,
    options: &StorageOptions,
    fields: Vec<StructField>,
    comment: &str,
) -> Result<DeltaTable, DeltaTableError> {
    open_or_create_with(location, options, fields, comment, &[]).await
}

/// [`open_or_create`], giving a new table `configuration` entries (our own
/// `mssql_cdc.*` properties, which Delta readers ignore) besides the Delta
/// properties every table of ours has ([`owned`]).
pub(crate) async fn open_or_create_with(
    location: &StorageLocation,
    options: &StorageOptions,
    fields: Vec<StructField>,
    comment: &str,
    configuration: &[(&str, String)],
) -> Result<DeltaTable, DeltaTableError> {
    register_handlers();
    let url = location.url().clone();
    if let Ok(dir) = url.to_file_path() {
        // deltalake expects a local table directory to exist.
        std::fs::create_dir_all(&dir).map_err(|source| DeltaTableError::Io { source })?;
    }
    let table =
        DeltaTable::try_from_url_with_storage_options(url.clone(), options.to_map()).await?;
    if table.version().is_some() {
        return Ok(table);
    }
    // No retries: deltalake would commit a create that lost the race for
    // version 0 again as version 1 (a second protocol and metadata, with no
    // conflict check). With none it fails instead, and we open the winner's.
    let created = table
        .create()
        .with_columns(fields)
        .with_comment(comment)
        .with_configuration(
            owned()
                .iter()
                .chain(configuration)
                .map(|(key, value)| (key.to_string(), Some(value.clone()))),
        )
        // Our own properties (`mssql_cdc.*`) are not Delta's.
        .with_raise_if_key_not_exists(false)
        .with_save_mode(SaveMode::Ignore)
        .with_commit_properties(commit_properties().with_max_retries(0))
        .await;
    match created {
        Ok(table) => Ok(table),
        // Lost a creation race: the other writer's table is the table.
        Err(
            error
            @ (DeltaTableError::VersionAlreadyExists(_) | DeltaTableError::Transaction { .. }),
        ) => {
            let table =
                DeltaTable::try_from_url_with_storage_options(url, options.to_map()).await?;
            match table.version() {
                Some(_) => Ok(table),
                None => Err(error),
            }
        }
        Err(other) => Err(other),
    }
}

/// Schema evolution, the one way every table of ours does it: adds the
/// `fields` the table lacks (names compared case-insensitively, as SQL
/// Server and Delta readers do) as nullable columns after the existing
/// ones, in one metadata commit. Nothing written is rewritten; older rows
/// read the new columns as NULL. Returns the names it added.
///
/// Several writers may open the same table at once (the facts table is
/// shared). A commit of another writer that lands first, such as the same
/// columns added by a stream opening at the same moment, makes ours
/// conflict: the table is then read again and only what is still missing
/// is added, so the loser goes on instead of failing.
pub(crate) async fn add_missing_fields(
    table: &mut DeltaTable,
    fields: &[StructField],
) -> Result<Vec<String>, DeltaTableError> {
    const ATTEMPTS: usize = 5;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let current = table.snapshot()?.schema();
        let missing: Vec<StructField> = fields
            .iter()
            .filter(|f| {
                !current
                    .fields()
                    .any(|c| c.name().eq_ignore_ascii_case(f.name()))
            })
            .map(|f| StructField {
                nullable: true,
                ..f.clone()
            })
            .collect();
        if missing.is_empty() {
            return Ok(Vec::new());
        }
        let added = missing.iter().map(|f| f.name().clone()).collect();
        let adding = table
            .clone()
            .add_columns()
            .with_fields(missing)
            .with_commit_properties(commit_properties());
        match adding.await {
            Ok(evolved) => {
                *table = evolved;
                return Ok(added);
            }
            Err(DeltaTableError::VersionAlreadyExists(_) | DeltaTableError::Transaction { .. })
                if attempt < ATTEMPTS =>
            {
                table.update_state().await?
            }
            Err(other) => return Err(other),
        }
    }
}

/// The latest `txn.version` recorded for `app_id`, after catching up with
/// the log.
pub(crate) async fn txn_version(
    table: &mut DeltaTable,
    app_id: &str,
) -> Result<Option<i64>, DeltaTableError> {
    table.update_state().await?;
    let log_store = table.log_store();
    table
        .snapshot()?
        .transaction_version(log_store.as_ref(), app_id)
        .await
}

/// Whether a Delta table is at `location` (without creating one).
pub(crate) async fn table_exists(
    location: &StorageLocation,
    options: &StorageOptions,
) -> Result<bool, DeltaTableError> {
    match open_existing(location, options).await {
        Ok(_) => Ok(true),
        Err(DeltaTableError::NotATable(_)) => Ok(false),
        Err(other) => Err(other),
    }
}

/// Opens the existing table at `location`; an error when there is none
/// (for tools that read or maintain tables and must never create one).
pub(crate) async fn open_existing(
    location: &StorageLocation,
    options: &StorageOptions,
) -> Result<DeltaTable, DeltaTableError> {
    register_handlers();
    let url = location.url().clone();
    if url.to_file_path().is_ok_and(|dir| !dir.is_dir()) {
        return Err(DeltaTableError::NotATable(
            "the directory does not exist".into(),
        ));
    }
    let table = DeltaTable::try_from_url_with_storage_options(url, options.to_map()).await?;
    match table.version() {
        Some(_) => Ok(table),
        None => Err(DeltaTableError::NotATable("it has no _delta_log".into())),
    }
}
