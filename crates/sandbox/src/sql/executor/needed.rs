//! Which columns of a SELECT's FROM clause the query can read, so scans,
//! joins and table functions need not copy the others (they come back
//! NULL, which nothing sees). Decided conservatively from the query's
//! text: a column is needed when its name occurs anywhere in the
//! statement's SELECT (subqueries, ON, WHERE, GROUP BY, HAVING included)
//! or its ORDER BY, case-insensitively; every column is needed when the
//! text has a `*` (wildcards, `COUNT(*)`, `CHECKSUM(*)`, multiplication)
//! or a name has quoting characters, whose printed form could differ.

use sqlparser::ast::{OrderBy, Select};

/// The columns a query may read.
#[derive(Debug, Clone, Default)]
pub struct NeededColumns {
    /// The query's text in lower case; `None` when every column is needed.
    text: Option<String>,
}

impl NeededColumns {
    /// Every column (DML targets, and anything not analysed).
    pub fn all() -> Self {
        Self::default()
    }

    /// The columns `sel` with `order_by` can name.
    pub fn for_select(sel: &Select, order_by: Option<&OrderBy>) -> Self {
        let mut text = sel.to_string();
        if let Some(ob) = order_by {
            text.push(' ');
            text.push_str(&ob.to_string());
        }
        if text.contains('*') {
            return Self::all();
        }
        Self {
            text: Some(text.to_lowercase()),
        }
    }

    /// Whether a column called `name` may be read.
    pub fn wants(&self, name: &str) -> bool {
        let Some(text) = &self.text else {
            return true;
        };
        if name.is_empty() || name.contains(['"', '[', ']', '`', '\'']) {
            return true;
        }
        text.contains(&name.to_lowercase())
    }

    /// [`Self::wants`] for each of `names`.
    pub fn mask<'n>(&self, names: impl Iterator<Item = &'n str>) -> Vec<bool> {
        names.map(|n| self.wants(n)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::ast::{SetExpr, Statement};
    use sqlparser::dialect::MsSqlDialect;
    use sqlparser::parser::Parser;

    fn needed(sql: &str) -> NeededColumns {
        let stmts = Parser::parse_sql(&MsSqlDialect {}, sql).unwrap();
        let Statement::Query(q) = &stmts[0] else {
            panic!("not a query")
        };
        let SetExpr::Select(sel) = q.body.as_ref() else {
            panic!("not a select")
        };
        NeededColumns::for_select(sel, q.order_by.as_ref())
    }

    #[test]
    fn names_anywhere_in_the_query_are_needed() {
        let n = needed(
            "SELECT c.A FROM t AS c JOIN m ON m.K = c.[Key] \
             WHERE EXISTS (SELECT 1 FROM u WHERE u.x = c.Outer_Ref) ORDER BY c.Sorted",
        );
        for name in ["a", "K", "key", "outer_ref", "SORTED", "x"] {
            assert!(n.wants(name), "{name}");
        }
        assert!(!n.wants("tran_id"));
        assert!(!n.wants("__$update_mask"));
        // Quoting characters in a name: kept.
        assert!(n.wants("we]ird"));
    }

    #[test]
    fn a_star_anywhere_needs_everything() {
        for sql in [
            "SELECT * FROM t",
            "SELECT t.* FROM t",
            "SELECT COUNT(*) FROM t",
            "SELECT a * 2 FROM t",
        ] {
            assert!(needed(sql).wants("unmentioned"), "{sql}");
        }
        assert!(NeededColumns::all().wants("anything"));
    }
}
