//! A table on SQL Server, as `schema.table`.

use std::fmt;

/// A `schema.table` name on SQL Server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableName {
    /// Schema, e.g. `dbo`.
    pub schema: String,
    /// Table, e.g. `orders`.
    pub table: String,
}

impl TableName {
    /// Reads `schema.table`, either part optionally in brackets
    /// (`[dbo].[orders]`); `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let parts: Vec<&str> = text
            .split('.')
            .map(|p| p.trim_matches(['[', ']']))
            .collect();
        match parts.as_slice() {
            [schema, table] if !schema.trim().is_empty() && !table.trim().is_empty() => {
                Some(TableName {
                    schema: schema.to_string(),
                    table: table.to_string(),
                })
            }
            _ => None,
        }
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.schema, self.table)
    }
}

#[cfg(test)]
mod tests {
    use super::TableName;

    #[test]
    fn parses_schema_dot_table() {
        let cases = [
            ("dbo.orders", Some(("dbo", "orders"))),
            ("[sales].[Order Lines]", Some(("sales", "Order Lines"))),
            ("orders", None),
            ("a.b.c", None),
            (".orders", None),
        ];
        for (text, expected) in cases {
            let parsed = TableName::parse(text);
            assert_eq!(
                parsed
                    .as_ref()
                    .map(|t| (t.schema.as_str(), t.table.as_str())),
                expected,
                "{text}"
            );
        }
    }
}
