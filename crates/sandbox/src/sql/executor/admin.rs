//! Security statements: CREATE LOGIN/USER/ROLE, ALTER ROLE, GRANT, DENY,
//! REVOKE (<https://learn.microsoft.com/en-us/sql/t-sql/statements/grant-transact-sql>).
//! These change the catalog immediately and are not journaled.

use super::context::WriteCtx;
use super::resolve::{Resolved, resolve};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::parse::{GrantDef, GrantVerb};
use crate::sql::security::{PermissionGrant, PrincipalKind, Securable};

const ROLE_DB_SECURITYADMIN: i32 = 16386;
const ROLE_DB_ACCESSADMIN: i32 = 16385;

fn no_permission() -> SqlError {
    SqlError::new(
        15247,
        "User does not have permission to perform this action.",
    )
    .with_class(16)
}

/// Server-level permissions are granted to logins, in master.
fn is_server_permission(p: &str) -> bool {
    matches!(
        p,
        "VIEW SERVER STATE"
            | "VIEW ANY DATABASE"
            | "VIEW ANY DEFINITION"
            | "ALTER ANY LOGIN"
            | "ALTER ANY DATABASE"
            | "CONTROL SERVER"
            | "CONNECT SQL"
            | "CREATE ANY DATABASE"
            | "VIEW SERVER PERFORMANCE STATE"
            | "VIEW SERVER SECURITY STATE"
            | "ALTER ANY CONNECTION"
    )
}

pub fn create_login(w: &mut WriteCtx<'_>, name: &str, password: &str) -> SqlResult<()> {
    if !w.info.is_sysadmin {
        return Err(no_permission());
    }
    let now = w.read().now_utc();
    if !w.state.security.create_login(name, password, now) {
        return Err(SqlError::new(
            15025,
            format!("The server principal '{name}' already exists."),
        ));
    }
    Ok(())
}

pub fn create_user(w: &mut WriteCtx<'_>, name: &str, login: Option<&str>) -> SqlResult<()> {
    let db_id = w.info.db_id;
    w.require_db_role(db_id, ROLE_DB_ACCESSADMIN, "CREATE USER")?;
    if let Some(l) = login
        && w.state.security.login(l).is_none()
    {
        return Err(SqlError::new(
            15007,
            format!("'{l}' is not a valid login or you do not have permission."),
        ));
    }
    let db = w
        .state
        .database_by_id_mut(db_id)
        .ok_or_else(|| SqlError::invalid_object(name))?;
    db.security
        .add_principal(name, PrincipalKind::User, login)
        .map(|_| ())
        .ok_or_else(|| {
            SqlError::new(
                15023,
                format!("User, group, or role '{name}' already exists in the current database."),
            )
        })
}

pub fn create_role(w: &mut WriteCtx<'_>, name: &str) -> SqlResult<()> {
    let db_id = w.info.db_id;
    w.require_db_role(db_id, ROLE_DB_SECURITYADMIN, "CREATE ROLE")?;
    let db = w
        .state
        .database_by_id_mut(db_id)
        .ok_or_else(|| SqlError::invalid_object(name))?;
    db.security
        .add_principal(name, PrincipalKind::Role, None)
        .map(|_| ())
        .ok_or_else(|| {
            SqlError::new(
                15023,
                format!("User, group, or role '{name}' already exists in the current database."),
            )
        })
}

/// ALTER ROLE role ADD|DROP MEMBER principal.
pub fn alter_role_member(
    w: &mut WriteCtx<'_>,
    role: &str,
    member: &str,
    add: bool,
) -> SqlResult<()> {
    let db_id = w.info.db_id;
    w.require_db_role(db_id, ROLE_DB_SECURITYADMIN, "ALTER ROLE")?;
    let db = w
        .state
        .database_by_id_mut(db_id)
        .ok_or_else(|| SqlError::invalid_object(role))?;
    let member_id = db.security.principal(member).map(|p| p.id).ok_or_else(|| {
        SqlError::new(15151, format!("Cannot add the principal '{member}', because it does not exist or you do not have permission."))
    })?;
    let ok = if add {
        db.security.add_member(role, member_id)
    } else {
        db.security.drop_member(role, member_id)
    };
    if ok {
        Ok(())
    } else {
        Err(SqlError::new(
            15151,
            format!(
                "Cannot alter the role '{role}', because it does not exist or you do not have permission."
            ),
        ))
    }
}

/// GRANT / DENY / REVOKE on the database, a schema, an object, or (for
/// server permissions) the server.
pub fn grant(w: &mut WriteCtx<'_>, g: &GrantDef) -> SqlResult<()> {
    let server_level = g.on.is_none() && g.permissions.iter().all(|p| is_server_permission(p));
    if server_level {
        if !w.info.is_sysadmin {
            return Err(no_permission());
        }
        for p in &g.principals {
            let login = w.state.security.login_mut(&p.value).ok_or_else(|| {
                SqlError::new(15151, format!("Cannot find the login '{}', because it does not exist or you do not have permission.", p.value))
            })?;
            for perm in &g.permissions {
                login.permissions.retain(|x| x != perm);
                if g.verb == GrantVerb::Grant {
                    login.permissions.push(perm.clone());
                }
            }
        }
        return Ok(());
    }
    let db_id = w.info.db_id;
    w.require_db_role(db_id, ROLE_DB_SECURITYADMIN, "GRANT")?;
    let securable = {
        let ctx = w.read();
        let db = ctx.current_db()?;
        match &g.on {
            None => Securable::Database,
            Some((Some(class), name)) if class == "SCHEMA" => {
                let n = name.to_string();
                let n = n.trim_matches(|c| c == '[' || c == ']');
                Securable::Schema(db.schema_by_name(n).map(|s| s.id).ok_or_else(|| {
                    SqlError::new(15151, format!("Cannot find the schema '{n}', because it does not exist or you do not have permission."))
                })?)
            }
            Some((Some(class), _)) if class == "DATABASE" => Securable::Database,
            Some((class, name)) if class.as_deref().is_none_or(|c| c == "OBJECT") => {
                match resolve(&ctx, name) {
                    Ok(Resolved::Table { table, .. }) => Securable::Object(table.meta.object_id),
                    Ok(Resolved::View { view, .. }) => Securable::Object(view.object_id),
                    Err(_) => {
                        return Err(SqlError::new(
                            15151,
                            format!(
                                "Cannot find the object '{name}', because it does not exist or you do not have permission."
                            ),
                        ));
                    }
                }
            }
            Some((class, _)) => {
                return Err(SqlError::unsupported(&format!(
                    "{}::",
                    class.as_deref().unwrap_or("")
                )));
            }
        }
    };
    let db = w
        .state
        .database_by_id_mut(db_id)
        .ok_or_else(|| SqlError::invalid_object("database"))?;
    for p in &g.principals {
        let grantee = db.security.principal(&p.value).map(|x| x.id).ok_or_else(|| {
            SqlError::new(15151, format!("Cannot find the user '{}', because it does not exist or you do not have permission.", p.value))
        })?;
        for perm in &g.permissions {
            match g.verb {
                GrantVerb::Revoke => db.security.revoke(grantee, perm, securable),
                verb => db.security.grant(PermissionGrant {
                    grantee,
                    permission: perm.clone(),
                    securable,
                    deny: verb == GrantVerb::Deny,
                }),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "admin_tests.rs"]
mod tests;
