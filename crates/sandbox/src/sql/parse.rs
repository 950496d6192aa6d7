//! Turns a batch into statements. Most statements come straight from
//! sqlparser's MsSqlDialect; the T-SQL forms it does not parse (CREATE
//! TABLE with computed columns and `PRIMARY KEY CLUSTERED`, ALTER TABLE
//! ... ALTER COLUMN, CREATE LOGIN, CREATE USER ... FOR LOGIN, GRANT with
//! `OBJECT::`/`SCHEMA::` or `VIEW ... STATE`) are read here with the same
//! parser's token primitives, so both paths share one tokenizer.
//!
//! Statements need no semicolons between them, as in T-SQL.

use sqlparser::ast::{self, Expr, Ident, ObjectName};
use sqlparser::dialect::MsSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use super::error::{SqlError, SqlResult};

/// One statement of a batch and the line it starts on.
#[derive(Debug, Clone)]
pub struct Stmt {
    pub kind: StmtKind,
    pub line: u32,
}

/// The statements the executor knows.
#[derive(Debug, Clone)]
pub enum StmtKind {
    Sql(Box<ast::Statement>),
    CreateTable {
        name: ObjectName,
        elements: Vec<TableElement>,
    },
    AlterTable {
        name: ObjectName,
        action: AlterAction,
    },
    CreateLogin {
        name: Ident,
        password: String,
    },
    CreateUser {
        name: Ident,
        login: Option<Ident>,
    },
    Grant(GrantDef),
}

/// A column or constraint of CREATE TABLE / ALTER TABLE ADD.
#[derive(Debug, Clone)]
pub enum TableElement {
    Column(Box<ColumnSpec>),
    PrimaryKey {
        name: Option<Ident>,
        columns: Vec<Ident>,
        clustered: bool,
    },
}

/// One column definition as written.
#[derive(Debug, Clone)]
pub struct ColumnSpec {
    pub name: Ident,
    /// None for a computed column.
    pub data_type: Option<ast::DataType>,
    pub computed: Option<Expr>,
    pub nullable: Option<bool>,
    pub default: Option<Expr>,
    /// IDENTITY(seed, increment) as expressions; (1, 1) when bare.
    pub identity: Option<(Expr, Expr)>,
    /// Column-level PRIMARY KEY: (constraint name, clustered).
    pub primary_key: Option<(Option<Ident>, bool)>,
    /// `COLLATE name`.
    pub collation: Option<Ident>,
}

/// What ALTER TABLE does.
#[derive(Debug, Clone)]
pub enum AlterAction {
    Add(Vec<TableElement>),
    DropColumns(Vec<Ident>),
    AlterColumn {
        name: Ident,
        data_type: ast::DataType,
        /// `COLLATE name`; without it the column takes the database's.
        collation: Option<Ident>,
        nullable: Option<bool>,
    },
}

/// GRANT / DENY / REVOKE.
#[derive(Debug, Clone)]
pub struct GrantDef {
    pub verb: GrantVerb,
    /// Upper-case permission names, e.g. `SELECT`, `VIEW DATABASE STATE`.
    pub permissions: Vec<String>,
    /// `ON [class::]name`; None for database/server-level permissions.
    pub on: Option<(Option<String>, ObjectName)>,
    pub principals: Vec<Ident>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantVerb {
    Grant,
    Deny,
    Revoke,
}

/// Parses a batch; 102 on a syntax error (nothing of the batch runs).
pub fn parse_batch(sql: &str) -> SqlResult<Vec<Stmt>> {
    let dialect = MsSqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .map_err(|e| syntax_error(&e.to_string(), sql))?;
    let tokens = end_exec_statements(tokens);
    let mut parser = Parser::new(&dialect).with_tokens_with_locations(tokens);
    let mut out = Vec::new();
    loop {
        while parser.consume_token(&Token::SemiColon) {}
        let next = parser.peek_token();
        if next.token == Token::EOF {
            break;
        }
        let line = u32::try_from(next.span.start.line).unwrap_or(1).max(1);
        let kind = parse_statement(&mut parser).map_err(|e| syntax_error(&e.to_string(), sql))?;
        out.push(Stmt { kind, line });
    }
    Ok(out)
}

/// Keywords that begin a statement; none can continue an EXEC argument
/// list unless nested in parentheses or after `,` or `=`.
const STATEMENT_STARTS: &[Keyword] = &[
    Keyword::ALTER,
    Keyword::BEGIN,
    Keyword::COMMIT,
    Keyword::CREATE,
    Keyword::DECLARE,
    Keyword::DELETE,
    Keyword::DENY,
    Keyword::DROP,
    Keyword::EXEC,
    Keyword::EXECUTE,
    Keyword::GRANT,
    Keyword::IF,
    Keyword::INSERT,
    Keyword::PRINT,
    Keyword::RETURN,
    Keyword::REVOKE,
    Keyword::ROLLBACK,
    Keyword::SELECT,
    Keyword::SET,
    Keyword::TRUNCATE,
    Keyword::UPDATE,
    Keyword::USE,
    Keyword::WAITFOR,
    Keyword::WHILE,
];

/// T-SQL lets `EXEC proc args` be followed by the next statement without a
/// semicolon (`EXEC a EXEC b`); sqlparser would read the next statement as
/// another argument. Ends the EXEC's argument list with a `;` token where
/// a statement keyword appears at its top level.
fn end_exec_statements(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut in_exec = false;
    let mut depth = 0usize;
    // The last significant token; the procedure name follows EXEC itself.
    let mut previous: Option<Token> = None;
    for t in tokens {
        if matches!(t.token, Token::Whitespace(_)) {
            out.push(t);
            continue;
        }
        match &t.token {
            Token::SemiColon => in_exec = false,
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            Token::Word(w) if depth == 0 && STATEMENT_STARTS.contains(&w.keyword) => {
                let after_name = !matches!(
                    &previous,
                    None | Some(Token::Comma | Token::Eq | Token::LParen)
                ) && !matches!(&previous, Some(Token::Word(p)) if matches!(p.keyword, Keyword::EXEC | Keyword::EXECUTE));
                if in_exec && after_name {
                    out.push(TokenWithSpan::wrap(Token::SemiColon));
                }
                in_exec = matches!(w.keyword, Keyword::EXEC | Keyword::EXECUTE);
            }
            _ => {}
        }
        previous = Some(t.token.clone());
        out.push(t);
    }
    out
}

/// Parses one data type (for parameter declarations and CAST targets).
pub fn parse_param_declarations(text: &str) -> SqlResult<Vec<(String, ast::DataType, bool)>> {
    let dialect = MsSqlDialect {};
    let mut parser = Parser::new(&dialect)
        .try_with_sql(text)
        .map_err(|e| syntax_error(&e.to_string(), text))?;
    let mut out = Vec::new();
    if parser.peek_token().token == Token::EOF {
        return Ok(out);
    }
    loop {
        let name = parser
            .parse_identifier()
            .map_err(|e| syntax_error(&e.to_string(), text))?;
        let _ = parser.parse_keyword(Keyword::AS);
        let ty = parser
            .parse_data_type()
            .map_err(|e| syntax_error(&e.to_string(), text))?;
        let output = parser
            .parse_one_of_keywords(&[Keyword::OUTPUT, Keyword::OUT])
            .is_some();
        out.push((name.value, ty, output));
        if !parser.consume_token(&Token::Comma) {
            break;
        }
    }
    if parser.peek_token().token != Token::EOF {
        return Err(SqlError::syntax(&parser.peek_token().token.to_string()));
    }
    Ok(out)
}

/// Parses an object name given as text (`OBJECT_ID('dbo.t')`).
pub fn parse_object_name_text(text: &str) -> Option<ObjectName> {
    let dialect = MsSqlDialect {};
    let mut parser = Parser::new(&dialect).try_with_sql(text).ok()?;
    let name = parser.parse_object_name(false).ok()?;
    (parser.peek_token().token == Token::EOF).then_some(name)
}

fn syntax_error(message: &str, sql: &str) -> SqlError {
    let near = message
        .split_once("found: ")
        .map(|(_, rest)| {
            rest.split(" at Line:")
                .next()
                .unwrap_or(rest)
                .trim()
                .to_string()
        })
        .filter(|n| !n.is_empty() && n != "EOF")
        .unwrap_or_else(|| last_word(sql));
    let line = message
        .split_once("Line: ")
        .and_then(|(_, rest)| rest.split(',').next())
        .and_then(|n| n.trim().parse::<u32>().ok())
        .unwrap_or(1);
    SqlError::syntax(&near).with_line(line)
}

fn last_word(sql: &str) -> String {
    sql.split_whitespace().last().unwrap_or("").to_string()
}

fn word_is(parser: &Parser, n: usize, word: &str) -> bool {
    matches!(&parser.peek_nth_token(n).token, Token::Word(w) if w.value.eq_ignore_ascii_case(word))
}

fn parse_statement(p: &mut Parser) -> Result<StmtKind, ParserError> {
    if word_is(p, 0, "CREATE") && word_is(p, 1, "TABLE") {
        p.next_token();
        p.next_token();
        let name = p.parse_object_name(false)?;
        p.expect_token(&Token::LParen)?;
        let elements = p.parse_comma_separated(parse_table_element)?;
        p.expect_token(&Token::RParen)?;
        return Ok(StmtKind::CreateTable { name, elements });
    }
    if word_is(p, 0, "ALTER") && word_is(p, 1, "TABLE") {
        p.next_token();
        p.next_token();
        let name = p.parse_object_name(false)?;
        return Ok(StmtKind::AlterTable {
            name,
            action: parse_alter_action(p)?,
        });
    }
    if word_is(p, 0, "CREATE") && word_is(p, 1, "LOGIN") {
        p.next_token();
        p.next_token();
        let name = p.parse_identifier()?;
        p.expect_keyword(Keyword::WITH)?;
        p.expect_keyword(Keyword::PASSWORD)?;
        p.expect_token(&Token::Eq)?;
        let password = p.parse_literal_string()?;
        // Further options (CHECK_POLICY = OFF, DEFAULT_DATABASE = x) are accepted and ignored.
        while p.consume_token(&Token::Comma) {
            p.parse_identifier()?;
            p.expect_token(&Token::Eq)?;
            p.next_token();
        }
        return Ok(StmtKind::CreateLogin { name, password });
    }
    if word_is(p, 0, "CREATE") && word_is(p, 1, "USER") {
        p.next_token();
        p.next_token();
        let name = p.parse_identifier()?;
        let login = if p
            .parse_one_of_keywords(&[Keyword::FOR, Keyword::FROM])
            .is_some()
        {
            if !word_is(p, 0, "LOGIN") {
                return p.expected("LOGIN", p.peek_token());
            }
            p.next_token();
            Some(p.parse_identifier()?)
        } else if p.parse_keyword(Keyword::WITHOUT) {
            if !word_is(p, 0, "LOGIN") {
                return p.expected("LOGIN", p.peek_token());
            }
            p.next_token();
            None
        } else {
            Some(name.clone())
        };
        if p.parse_keyword(Keyword::WITH) {
            // WITH DEFAULT_SCHEMA = x: the sandbox's default schema is dbo.
            p.parse_identifier()?;
            p.expect_token(&Token::Eq)?;
            p.parse_identifier()?;
        }
        return Ok(StmtKind::CreateUser { name, login });
    }
    if word_is(p, 0, "GRANT") || word_is(p, 0, "DENY") || word_is(p, 0, "REVOKE") {
        return parse_grant(p).map(StmtKind::Grant);
    }
    Ok(StmtKind::Sql(Box::new(p.parse_statement()?)))
}

fn parse_table_element(p: &mut Parser) -> Result<TableElement, ParserError> {
    let is_constraint = word_is(p, 0, "CONSTRAINT") || word_is(p, 0, "PRIMARY");
    if !is_constraint {
        return parse_column(p).map(|c| TableElement::Column(Box::new(c)));
    }
    let name = if p.parse_keyword(Keyword::CONSTRAINT) {
        Some(p.parse_identifier()?)
    } else {
        None
    };
    if !p.parse_keywords(&[Keyword::PRIMARY, Keyword::KEY]) {
        return p.expected(
            "PRIMARY KEY (other constraints are not supported)",
            p.peek_token(),
        );
    }
    let clustered = parse_clustered(p);
    p.expect_token(&Token::LParen)?;
    let columns = p.parse_comma_separated(|p| {
        let c = p.parse_identifier()?;
        let _ = p.parse_one_of_keywords(&[Keyword::ASC, Keyword::DESC]);
        Ok(c)
    })?;
    p.expect_token(&Token::RParen)?;
    Ok(TableElement::PrimaryKey {
        name,
        columns,
        clustered,
    })
}

fn parse_clustered(p: &mut Parser) -> bool {
    if word_is(p, 0, "NONCLUSTERED") {
        p.next_token();
        return false;
    }
    if word_is(p, 0, "CLUSTERED") {
        p.next_token();
    }
    true
}

fn parse_column(p: &mut Parser) -> Result<ColumnSpec, ParserError> {
    let name = p.parse_identifier()?;
    let mut spec = ColumnSpec {
        name,
        data_type: None,
        computed: None,
        nullable: None,
        default: None,
        identity: None,
        primary_key: None,
        collation: None,
    };
    if p.parse_keyword(Keyword::AS) {
        spec.computed = Some(p.parse_expr()?);
        let _ = word_is(p, 0, "PERSISTED") && {
            p.next_token();
            true
        };
    } else {
        spec.data_type = Some(p.parse_data_type()?);
    }
    loop {
        let constraint_name = if p.parse_keyword(Keyword::CONSTRAINT) {
            Some(p.parse_identifier()?)
        } else {
            None
        };
        if p.parse_keyword(Keyword::NULL) {
            spec.nullable = Some(true);
        } else if p.parse_keywords(&[Keyword::NOT, Keyword::NULL]) {
            spec.nullable = Some(false);
        } else if p.parse_keywords(&[Keyword::PRIMARY, Keyword::KEY]) {
            spec.primary_key = Some((constraint_name, parse_clustered(p)));
        } else if p.parse_keyword(Keyword::DEFAULT) {
            spec.default = Some(p.parse_expr()?);
        } else if p.parse_keyword(Keyword::IDENTITY) {
            let one = || Expr::value(ast::Value::Number("1".into(), false));
            if p.consume_token(&Token::LParen) {
                let seed = p.parse_expr()?;
                p.expect_token(&Token::Comma)?;
                let inc = p.parse_expr()?;
                p.expect_token(&Token::RParen)?;
                spec.identity = Some((seed, inc));
            } else {
                spec.identity = Some((one(), one()));
            }
        } else if p.parse_keyword(Keyword::COLLATE) {
            spec.collation = Some(p.parse_identifier()?);
        } else if constraint_name.is_some() {
            return p.expected("PRIMARY KEY or DEFAULT", p.peek_token());
        } else {
            break;
        }
    }
    match p.peek_token().token {
        Token::Comma | Token::RParen | Token::EOF | Token::SemiColon => Ok(spec),
        // Inside ALTER TABLE ADD a new statement may follow directly.
        Token::Word(_) => Ok(spec),
        _ => p.expected("',' or ')' after column definition", p.peek_token()),
    }
}

fn parse_alter_action(p: &mut Parser) -> Result<AlterAction, ParserError> {
    if p.parse_keyword(Keyword::ADD) {
        let elements = p.parse_comma_separated(parse_table_element)?;
        return Ok(AlterAction::Add(elements));
    }
    if p.parse_keywords(&[Keyword::DROP, Keyword::COLUMN]) {
        let cols = p.parse_comma_separated(|p| p.parse_identifier())?;
        return Ok(AlterAction::DropColumns(cols));
    }
    if p.parse_keywords(&[Keyword::ALTER, Keyword::COLUMN]) {
        let name = p.parse_identifier()?;
        let data_type = p.parse_data_type()?;
        let collation = if p.parse_keyword(Keyword::COLLATE) {
            Some(p.parse_identifier()?)
        } else {
            None
        };
        let nullable = if p.parse_keyword(Keyword::NULL) {
            Some(true)
        } else if p.parse_keywords(&[Keyword::NOT, Keyword::NULL]) {
            Some(false)
        } else {
            None
        };
        return Ok(AlterAction::AlterColumn {
            name,
            data_type,
            collation,
            nullable,
        });
    }
    p.expected("ADD, DROP COLUMN or ALTER COLUMN", p.peek_token())
}

fn parse_grant(p: &mut Parser) -> Result<GrantDef, ParserError> {
    let verb = match p.next_token().token {
        Token::Word(w) if w.value.eq_ignore_ascii_case("GRANT") => GrantVerb::Grant,
        Token::Word(w) if w.value.eq_ignore_ascii_case("DENY") => GrantVerb::Deny,
        _ => GrantVerb::Revoke,
    };
    let mut permissions = Vec::new();
    loop {
        let mut words = Vec::new();
        while let Token::Word(w) = &p.peek_token().token {
            let upper = w.value.to_uppercase();
            if upper == "ON" || upper == "TO" || upper == "FROM" {
                break;
            }
            words.push(upper);
            p.next_token();
        }
        if words.is_empty() {
            return p.expected("a permission", p.peek_token());
        }
        permissions.push(words.join(" "));
        if !p.consume_token(&Token::Comma) {
            break;
        }
    }
    let on = if p.parse_keyword(Keyword::ON) {
        let class = if matches!(p.peek_nth_token(1).token, Token::DoubleColon) {
            let c = p.parse_identifier()?.value.to_uppercase();
            p.next_token();
            Some(c)
        } else {
            None
        };
        Some((class, p.parse_object_name(false)?))
    } else {
        None
    };
    if p.parse_one_of_keywords(&[Keyword::TO, Keyword::FROM])
        .is_none()
    {
        return p.expected("TO", p.peek_token());
    }
    let principals = p.parse_comma_separated(|p| p.parse_identifier())?;
    Ok(GrantDef {
        verb,
        permissions,
        on,
        principals,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(sql: &str) -> Vec<StmtKind> {
        match parse_batch(sql) {
            Ok(v) => v.into_iter().map(|s| s.kind).collect(),
            Err(e) => panic!("{sql}: {e}"),
        }
    }

    #[test]
    fn statements_need_no_semicolons() {
        assert_eq!(kinds("select 1 select 2; select 3").len(), 3);
    }

    #[test]
    fn create_table_with_computed_and_clustered_key() {
        let k = kinds(
            "CREATE TABLE dbo.t (id int IDENTITY(1,1) NOT NULL PRIMARY KEY CLUSTERED, \
             n nvarchar(10) CONSTRAINT df DEFAULT N'x', c AS id * 2, CONSTRAINT pk PRIMARY KEY NONCLUSTERED (id))",
        );
        let StmtKind::CreateTable { elements, .. } = &k[0] else {
            panic!("{k:?}")
        };
        assert_eq!(elements.len(), 4);
        let TableElement::Column(c) = &elements[2] else {
            panic!()
        };
        assert!(c.computed.is_some() && c.data_type.is_none());
    }

    #[test]
    fn security_statements() {
        let k = kinds(
            "CREATE LOGIN r WITH PASSWORD = 'p@ss'; CREATE USER r FOR LOGIN r \
             GRANT SELECT ON OBJECT::dbo.t TO r GRANT VIEW DATABASE STATE TO r \
             DENY SELECT ON SCHEMA::dbo TO r",
        );
        assert!(matches!(&k[0], StmtKind::CreateLogin { password, .. } if password == "p@ss"));
        assert!(matches!(&k[1], StmtKind::CreateUser { login: Some(l), .. } if l.value == "r"));
        let StmtKind::Grant(g) = &k[3] else { panic!() };
        assert_eq!(g.permissions, vec!["VIEW DATABASE STATE".to_string()]);
        let StmtKind::Grant(g) = &k[4] else { panic!() };
        assert_eq!(g.verb, GrantVerb::Deny);
        assert_eq!(
            g.on.as_ref().and_then(|o| o.0.clone()),
            Some("SCHEMA".into())
        );
    }

    #[test]
    fn syntax_errors_are_102_with_the_token() {
        let e = parse_batch("select 1\nselect * frm t").err();
        let e = e.as_ref();
        assert_eq!(e.map(|e| e.number), Some(102));
        assert_eq!(e.map(|e| e.line), Some(2));
    }

    #[test]
    fn parameter_declarations() {
        let d = parse_param_declarations("@P1 int, @P2 nvarchar(4000) OUTPUT").ok();
        let d = d.unwrap_or_default();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].0, "@P1");
        assert!(d[1].2);
    }
}
