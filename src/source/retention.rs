//! Where the retention headroom's retention comes from: the cleanup job's
//! retention as the reader may read it (sys.sp_cdc_help_jobs needs
//! db_owner, msdb.dbo.cdc_jobs SELECT in msdb), else as the monitoring
//! login (`spec.source.monitoring`) reads it; with neither, the warning
//! the run records.

use secrecy::SecretString;

use super::jobs::{Readable, cleanup_retention};
use super::{SourceError, SqlClient, connect};
use crate::spec::SourceConfig;

/// The retention in minutes (`None`: the database has no cleanup job), or
/// the warning that the headroom is measured from the low-water mark.
pub async fn read(
    reader: &mut SqlClient,
    source: &SourceConfig,
    monitoring: Option<&SecretString>,
) -> Result<Result<Option<i64>, String>, SourceError> {
    let refused = match cleanup_retention(reader).await? {
        Readable::Value(minutes) => return Ok(Ok(minutes)),
        Readable::Denied(message) => message,
    };
    let login = source.monitoring.as_ref();
    let monitored = match (login, monitoring) {
        (Some(login), Some(password)) => {
            let mut as_monitor = source.clone();
            as_monitor.username = login.username.clone();
            let mut client = connect(&as_monitor, password).await?;
            Some((
                login.username.as_str(),
                cleanup_retention(&mut client).await?,
            ))
        }
        _ => None,
    };
    let also = match monitored {
        Some((_, Readable::Value(minutes))) => return Ok(Ok(minutes)),
        Some((name, Readable::Denied(message))) => {
            format!("; nor may monitoring login {name} ({message})")
        }
        None => "; spec.source.monitoring names no login that may".to_string(),
    };
    Ok(Err(format!(
        "retention_headroom_hours is measured from CDC cleanup's low-water mark, which on a \
         database younger than its retention understates it: login {} may not read the cleanup \
         job's retention ({refused}){also}. Grant SELECT on msdb.dbo.cdc_jobs to the monitoring \
         login, or name one in spec.source.monitoring",
        source.username
    )))
}
