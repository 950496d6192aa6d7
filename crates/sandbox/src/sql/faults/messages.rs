//! SQL Server's message texts for the errors tests inject, with their
//! placeholders filled from the failing session. The Always On (976, 978,
//! 983) and Azure SQL (10928, 10929, 40143, 40197, 40501, 40540, 40613)
//! texts are the ones Microsoft's client libraries quote for these
//! transient errors; the sandbox's stand-in values (a resource id, a
//! limit, an error code) are marked as such where SQL Server has its own.
//! Any other number gets "injected error N".

/// What the placeholders are filled with.
pub(super) struct Context {
    pub database: String,
    pub server: String,
    pub session_id: u16,
}

pub(super) fn text(number: i32, c: &Context) -> String {
    let db = &c.database;
    match number {
        596 => "Cannot continue the execution because the session is in the kill state.".into(),
        976 => format!(
            "The target database, '{db}', is participating in an availability group and is currently not accessible for queries. Either data movement is suspended or the availability replica is not enabled for read access. To allow read-only access to this and other databases in the availability group, enable read access to one or more secondary availability replicas in the group.  For more information, see the ALTER AVAILABILITY GROUP statement in SQL Server Books Online."
        ),
        978 => format!(
            "The target database ('{db}') is in an availability group and is currently accessible for connections when the application intent is set to read only. For more information about application intent, see SQL Server Books Online."
        ),
        983 => format!(
            "Unable to access availability database '{db}' because the database replica is not in the PRIMARY or SECONDARY role. Connections to an availability database is permitted only when the database replica is in the PRIMARY or SECONDARY role. Try the operation again later."
        ),
        1205 => format!(
            "Transaction (Process ID {}) was deadlocked on lock resources with another process and has been chosen as the deadlock victim. Rerun the transaction.",
            c.session_id
        ),
        1222 => "Lock request time out period exceeded.".into(),
        4060 => format!("Cannot open database \"{db}\" requested by the login. The login failed."),
        // Resource id, limit and usage are the sandbox's stand-ins.
        10928 => "Resource ID : 1. The request limit for the database is 400 and has been reached. See 'http://go.microsoft.com/fwlink/?LinkId=267637' for assistance.".into(),
        10929 => "Resource ID : 1. The request minimum guarantee is 0, maximum limit is 400 and the current usage for the database is 400. However, the server is currently too busy to support requests greater than 400 for this database. See 'http://go.microsoft.com/fwlink/?LinkId=267637' for assistance. Otherwise, please try again later.".into(),
        40143 | 40540 => {
            "The service has encountered an error processing your request. Please try again.".into()
        }
        // The error code is the sandbox's stand-in.
        40197 => "The service has encountered an error processing your request. Please try again. Error code 0.".into(),
        40501 => "The service is currently busy. Retry the request after 10 seconds. Code: 0.".into(),
        40613 => format!(
            "Database '{db}' on server '{}' is not currently available.  Please retry the connection later.  If the problem persists, contact customer support, and provide them the session tracing ID of '{}'.",
            c.server,
            uuid::Uuid::new_v4()
        ),
        n => format!("injected error {n}"),
    }
}
