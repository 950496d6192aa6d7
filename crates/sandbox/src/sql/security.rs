//! Logins, database users and roles, and permission checks: enough to
//! model sysadmin (`sa`), db_owner, db_datareader and a least-privilege
//! reader holding explicit GRANTs.
//!
//! Rules follow <https://learn.microsoft.com/en-us/sql/relational-databases/security/permissions-database-engine>:
//! a permission granted on the database covers its schemas and objects, one
//! granted on a schema covers its objects; members of db_owner may do
//! anything in the database; sysadmin members map to `dbo` everywhere.

use chrono::NaiveDateTime;

use super::catalog::same_name;

/// A server login (CREATE LOGIN ... WITH PASSWORD).
#[derive(Debug, Clone)]
pub struct Login {
    pub principal_id: i32,
    pub name: String,
    password: String,
    pub sid: Vec<u8>,
    pub is_sysadmin: bool,
    pub create_date: NaiveDateTime,
    /// Server-level grants, upper-case (e.g. `VIEW SERVER STATE`).
    pub permissions: Vec<String>,
}

impl Login {
    pub fn new(principal_id: i32, name: &str, password: &str, now: NaiveDateTime) -> Self {
        let mut sid = vec![0u8; 16];
        sid[..4].copy_from_slice(&principal_id.to_be_bytes());
        Self {
            principal_id,
            name: name.to_string(),
            password: password.to_string(),
            sid,
            is_sysadmin: false,
            create_date: now,
            permissions: Vec::new(),
        }
    }

    /// Exact comparison (SQL Server passwords are case-sensitive).
    pub fn password_matches(&self, password: &str) -> bool {
        self.password == password
    }

    pub fn has_server_permission(&self, permission: &str) -> bool {
        self.is_sysadmin
            || self
                .permissions
                .iter()
                .any(|p| p.eq_ignore_ascii_case(permission))
    }
}

/// The server's logins.
#[derive(Debug, Clone, Default)]
pub struct ServerSecurity {
    pub logins: Vec<Login>,
    next_principal_id: i32,
}

impl ServerSecurity {
    /// `sa` (principal 1) is a member of sysadmin.
    pub fn new(sa_password: &str, now: NaiveDateTime) -> Self {
        let mut sa = Login::new(1, "sa", sa_password, now);
        sa.is_sysadmin = true;
        sa.sid = vec![1];
        Self {
            logins: vec![sa],
            next_principal_id: 259,
        }
    }

    pub fn login(&self, name: &str) -> Option<&Login> {
        self.logins.iter().find(|l| same_name(&l.name, name))
    }

    pub fn login_mut(&mut self, name: &str) -> Option<&mut Login> {
        self.logins.iter_mut().find(|l| same_name(&l.name, name))
    }

    /// CREATE LOGIN; false when the name is taken.
    pub fn create_login(&mut self, name: &str, password: &str, now: NaiveDateTime) -> bool {
        if self.login(name).is_some() {
            return false;
        }
        let id = self.next_principal_id;
        self.next_principal_id += 1;
        self.logins.push(Login::new(id, name, password, now));
        true
    }
}

/// sys.database_principals.type: S (SQL user) or R (database role).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrincipalKind {
    User,
    Role,
}

/// A database user or role.
#[derive(Debug, Clone)]
pub struct DbPrincipal {
    pub id: i32,
    pub name: String,
    pub kind: PrincipalKind,
    /// The login a user is mapped to.
    pub login: Option<String>,
    /// Members of a role (principal ids).
    pub members: Vec<i32>,
    pub is_fixed_role: bool,
}

/// What a permission is granted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Securable {
    Database,
    Schema(i32),
    Object(i32),
}

/// One GRANT (or DENY) row of sys.database_permissions.
#[derive(Debug, Clone)]
pub struct PermissionGrant {
    pub grantee: i32,
    /// Upper-case permission name: SELECT, EXECUTE, VIEW DATABASE STATE...
    pub permission: String,
    pub securable: Securable,
    pub deny: bool,
}

/// Principal id of `public`, which every user belongs to.
pub const ROLE_PUBLIC: i32 = 0;
/// Principal id of `dbo`.
pub const USER_DBO: i32 = 1;
/// Principal id of `guest`.
pub const USER_GUEST: i32 = 2;
pub const ROLE_DB_OWNER: i32 = 16384;
pub const ROLE_DB_DATAREADER: i32 = 16390;
pub const ROLE_DB_DATAWRITER: i32 = 16391;

const FIXED_ROLES: &[(i32, &str)] = &[
    (ROLE_DB_OWNER, "db_owner"),
    (16385, "db_accessadmin"),
    (16386, "db_securityadmin"),
    (16387, "db_ddladmin"),
    (16389, "db_backupoperator"),
    (ROLE_DB_DATAREADER, "db_datareader"),
    (ROLE_DB_DATAWRITER, "db_datawriter"),
    (16392, "db_denydatareader"),
    (16393, "db_denydatawriter"),
];

/// Users, roles and grants of one database.
#[derive(Debug, Clone)]
pub struct DbSecurity {
    pub principals: Vec<DbPrincipal>,
    pub grants: Vec<PermissionGrant>,
    /// Whether `guest` may connect (true in master, as in SQL Server).
    pub guest_enabled: bool,
    next_principal_id: i32,
}

impl DbSecurity {
    /// The fixed principals of a new database; `dbo` maps to the owner.
    pub fn new(owner_login: &str) -> Self {
        let user = |id: i32, name: &str, login: Option<&str>| DbPrincipal {
            id,
            name: name.to_string(),
            kind: PrincipalKind::User,
            login: login.map(str::to_string),
            members: Vec::new(),
            is_fixed_role: false,
        };
        let mut principals = vec![
            DbPrincipal {
                id: ROLE_PUBLIC,
                name: "public".into(),
                kind: PrincipalKind::Role,
                login: None,
                members: Vec::new(),
                is_fixed_role: false,
            },
            user(USER_DBO, "dbo", Some(owner_login)),
            user(USER_GUEST, "guest", None),
            user(3, "INFORMATION_SCHEMA", None),
            user(4, "sys", None),
        ];
        for (id, name) in FIXED_ROLES {
            principals.push(DbPrincipal {
                id: *id,
                name: (*name).to_string(),
                kind: PrincipalKind::Role,
                login: None,
                members: if *id == ROLE_DB_OWNER {
                    vec![USER_DBO]
                } else {
                    Vec::new()
                },
                is_fixed_role: true,
            });
        }
        Self {
            principals,
            grants: Vec::new(),
            guest_enabled: false,
            next_principal_id: 5,
        }
    }

    pub fn principal(&self, name: &str) -> Option<&DbPrincipal> {
        self.principals.iter().find(|p| same_name(&p.name, name))
    }

    pub fn principal_by_id(&self, id: i32) -> Option<&DbPrincipal> {
        self.principals.iter().find(|p| p.id == id)
    }

    /// The user a login maps to here: dbo for sysadmin, its mapped user,
    /// else guest when guest may connect.
    pub fn user_for_login(&self, login: &str, is_sysadmin: bool) -> Option<i32> {
        if is_sysadmin {
            return Some(USER_DBO);
        }
        self.principals
            .iter()
            .find(|p| {
                p.kind == PrincipalKind::User
                    && p.login.as_deref().is_some_and(|l| same_name(l, login))
            })
            .map(|p| p.id)
            .or(if self.guest_enabled {
                Some(USER_GUEST)
            } else {
                None
            })
    }

    /// CREATE USER / CREATE ROLE; None when the name is taken.
    pub fn add_principal(
        &mut self,
        name: &str,
        kind: PrincipalKind,
        login: Option<&str>,
    ) -> Option<i32> {
        if self.principal(name).is_some() {
            return None;
        }
        let id = self.next_principal_id;
        self.next_principal_id += 1;
        self.principals.push(DbPrincipal {
            id,
            name: name.to_string(),
            kind,
            login: login.map(str::to_string),
            members: Vec::new(),
            is_fixed_role: false,
        });
        Some(id)
    }

    /// ALTER ROLE ... ADD MEMBER; false when the role is unknown.
    pub fn add_member(&mut self, role: &str, member: i32) -> bool {
        match self
            .principals
            .iter_mut()
            .find(|p| p.kind == PrincipalKind::Role && same_name(&p.name, role))
        {
            Some(r) => {
                if !r.members.contains(&member) {
                    r.members.push(member);
                }
                true
            }
            None => false,
        }
    }

    pub fn drop_member(&mut self, role: &str, member: i32) -> bool {
        match self
            .principals
            .iter_mut()
            .find(|p| p.kind == PrincipalKind::Role && same_name(&p.name, role))
        {
            Some(r) => {
                r.members.retain(|m| *m != member);
                true
            }
            None => false,
        }
    }

    /// The user and every role it belongs to, directly or through roles.
    pub fn effective_principals(&self, user: i32) -> Vec<i32> {
        let mut out = vec![user, ROLE_PUBLIC];
        let mut i = 0;
        while i < out.len() {
            let current = out[i];
            for p in &self.principals {
                if p.kind == PrincipalKind::Role
                    && p.members.contains(&current)
                    && !out.contains(&p.id)
                {
                    out.push(p.id);
                }
            }
            i += 1;
        }
        out
    }

    pub fn is_member(&self, user: i32, role: i32) -> bool {
        self.effective_principals(user).contains(&role)
    }

    /// Whether `user` holds `permission` on `object` (in `schema`), through
    /// fixed roles or grants on the object, its schema, or the database.
    pub fn has_object_permission(
        &self,
        user: i32,
        permission: &str,
        schema: i32,
        object: Option<i32>,
    ) -> bool {
        let principals = self.effective_principals(user);
        if principals.contains(&ROLE_DB_OWNER) {
            return true;
        }
        let covered = |s: &Securable| match s {
            Securable::Database => true,
            Securable::Schema(id) => *id == schema,
            Securable::Object(id) => Some(*id) == object,
        };
        let matching = |g: &&PermissionGrant| {
            principals.contains(&g.grantee)
                && covered(&g.securable)
                && (g.permission.eq_ignore_ascii_case(permission) || g.permission == "CONTROL")
        };
        if self.grants.iter().filter(matching).any(|g| g.deny) {
            return false;
        }
        let by_role = match permission {
            "SELECT" => principals.contains(&ROLE_DB_DATAREADER),
            "INSERT" | "UPDATE" | "DELETE" => principals.contains(&ROLE_DB_DATAWRITER),
            _ => false,
        };
        by_role || self.grants.iter().filter(matching).any(|g| !g.deny)
    }

    /// Whether `user` holds a database-level permission (VIEW DATABASE STATE...).
    pub fn has_database_permission(&self, user: i32, permission: &str) -> bool {
        let principals = self.effective_principals(user);
        principals.contains(&ROLE_DB_OWNER)
            || self.grants.iter().any(|g| {
                principals.contains(&g.grantee)
                    && g.securable == Securable::Database
                    && !g.deny
                    && (g.permission.eq_ignore_ascii_case(permission) || g.permission == "CONTROL")
            })
    }

    /// Whether `user` may see metadata of an object: any permission on it,
    /// its schema or the database (metadata visibility,
    /// <https://learn.microsoft.com/en-us/sql/relational-databases/security/metadata-visibility-configuration>).
    pub fn can_see_object(&self, user: i32, schema: i32, object: i32) -> bool {
        let principals = self.effective_principals(user);
        principals.contains(&ROLE_DB_OWNER)
            || principals.contains(&ROLE_DB_DATAREADER)
            || principals.contains(&ROLE_DB_DATAWRITER)
            || self.grants.iter().any(|g| {
                principals.contains(&g.grantee)
                    && !g.deny
                    && match g.securable {
                        Securable::Database => {
                            matches!(
                                g.permission.as_str(),
                                "SELECT" | "CONTROL" | "VIEW DEFINITION"
                            )
                        }
                        Securable::Schema(s) => s == schema,
                        Securable::Object(o) => o == object,
                    }
            })
    }

    pub fn grant(&mut self, grant: PermissionGrant) {
        self.grants.retain(|g| {
            !(g.grantee == grant.grantee
                && g.securable == grant.securable
                && g.permission == grant.permission)
        });
        self.grants.push(grant);
    }

    pub fn revoke(&mut self, grantee: i32, permission: &str, securable: Securable) {
        self.grants.retain(|g| {
            !(g.grantee == grantee && g.securable == securable && g.permission == permission)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_membership_is_transitive_and_grants_cover_schema_objects() {
        let mut s = DbSecurity::new("sa");
        let u = s
            .add_principal("reader", PrincipalKind::User, Some("reader_login"))
            .unwrap_or(-1);
        let r = s
            .add_principal("readers", PrincipalKind::Role, None)
            .unwrap_or(-1);
        assert!(s.add_member("readers", u));
        s.grant(PermissionGrant {
            grantee: r,
            permission: "SELECT".into(),
            securable: Securable::Schema(5),
            deny: false,
        });
        assert!(s.has_object_permission(u, "SELECT", 5, Some(100)));
        assert!(!s.has_object_permission(u, "SELECT", 1, Some(101)));
        assert!(!s.has_object_permission(u, "INSERT", 5, Some(100)));
        assert_eq!(s.user_for_login("READER_LOGIN", false), Some(u));
        assert_eq!(s.user_for_login("other", false), None);
        assert_eq!(s.user_for_login("other", true), Some(USER_DBO));
    }
}
