//! Collations: the few SQL Server knows that the sandbox emulates, each
//! with its code page (which characters a `char`/`varchar` can hold), its
//! comparison rule and its TDS form (MS-TDS 2.2.5.1.2: LCID in 20 bits,
//! the flags fIgnoreCase (bit 20), fIgnoreAccent (21), fIgnoreWidth (22),
//! fIgnoreKana (23), fBinary (24), fBinary2 (25), fUTF8 (26), a 4-bit
//! version (28-31), then the SQL sort id byte).
//!
//! <https://learn.microsoft.com/sql/t-sql/statements/collations>
//! <https://learn.microsoft.com/sql/relational-databases/collations/collation-and-unicode-support>

use std::borrow::Cow;
use std::cmp::Ordering;

use encoding_rs::{EncoderResult, Encoding, SHIFT_JIS, UTF_8, WINDOWS_1251, WINDOWS_1252};

use super::error::{SqlError, SqlResult};
use super::types::DataType;

const IGNORE_CASE: u32 = 1 << 20;
const IGNORE_WIDTH: u32 = 1 << 22;
const IGNORE_KANA: u32 = 1 << 23;
const BINARY2: u32 = 1 << 25;
const UTF8: u32 = 1 << 26;
/// Version 1: the `_100` collations.
const VERSION_100: u32 = 1 << 28;

/// How a collation orders strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Case-insensitive: upper-cased characters, trailing spaces ignored.
    CaseInsensitive,
    /// Case-sensitive (Windows collations): compared case-insensitively
    /// first, then lower case before upper case.
    CaseSensitive,
    /// Case-sensitive SQL collation (sort order 51, "dictionary order,
    /// case-sensitive"): as `CaseSensitive` but upper case first.
    CaseSensitiveUpperFirst,
    /// BIN2: code point order, trailing spaces ignored.
    Binary,
}

/// One known collation.
#[derive(Debug, PartialEq, Eq)]
pub struct CollationInfo {
    /// The name as SQL Server spells it (sys.columns.collation_name).
    pub name: &'static str,
    /// LCID and flags: the first four bytes of the TDS form.
    pub info: u32,
    /// SQL sort id (0 for Windows collations).
    pub sort_id: u8,
    /// The Windows code page of `char`/`varchar` data (65001 for UTF-8).
    pub code_page: u16,
    /// How values compare.
    pub rule: Rule,
}

/// A collation: a reference into the table of known ones.
pub type Collation = &'static CollationInfo;

const LATIN1: u32 = 0x0409;
const CYRILLIC: u32 = 0x0419;
const JAPANESE: u32 = 0x0411;
const CI_AS: u32 = IGNORE_CASE | IGNORE_WIDTH | IGNORE_KANA;
const CS_AS: u32 = IGNORE_WIDTH | IGNORE_KANA;

/// Every collation the sandbox knows; the first is the default.
pub static KNOWN: [CollationInfo; 8] = [
    CollationInfo {
        name: "SQL_Latin1_General_CP1_CI_AS",
        info: LATIN1 | CI_AS,
        sort_id: 52,
        code_page: 1252,
        rule: Rule::CaseInsensitive,
    },
    CollationInfo {
        name: "SQL_Latin1_General_CP1_CS_AS",
        info: LATIN1 | CS_AS,
        sort_id: 51,
        code_page: 1252,
        rule: Rule::CaseSensitiveUpperFirst,
    },
    CollationInfo {
        name: "Latin1_General_CI_AS",
        info: LATIN1 | CI_AS,
        sort_id: 0,
        code_page: 1252,
        rule: Rule::CaseInsensitive,
    },
    CollationInfo {
        name: "Latin1_General_CS_AS",
        info: LATIN1 | CS_AS,
        sort_id: 0,
        code_page: 1252,
        rule: Rule::CaseSensitive,
    },
    CollationInfo {
        name: "Latin1_General_100_CI_AS_SC_UTF8",
        info: LATIN1 | CI_AS | UTF8 | VERSION_100,
        sort_id: 0,
        code_page: 65001,
        rule: Rule::CaseInsensitive,
    },
    CollationInfo {
        name: "Latin1_General_BIN2",
        info: LATIN1 | BINARY2,
        sort_id: 0,
        code_page: 1252,
        rule: Rule::Binary,
    },
    CollationInfo {
        name: "Cyrillic_General_CI_AS",
        info: CYRILLIC | CI_AS,
        sort_id: 0,
        code_page: 1251,
        rule: Rule::CaseInsensitive,
    },
    CollationInfo {
        name: "Japanese_CI_AS",
        info: JAPANESE | CI_AS,
        sort_id: 0,
        code_page: 932,
        rule: Rule::CaseInsensitive,
    },
];

/// A value's collation and how it got it: `explicit` from a COLLATE
/// clause, else implicit (a column's). Explicit wins over implicit when
/// two values meet (collation precedence,
/// <https://learn.microsoft.com/sql/t-sql/statements/collation-precedence-transact-sql>).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label {
    pub collation: Collation,
    pub explicit: bool,
}

impl Label {
    /// The collation of an expression over two labelled values: an explicit
    /// label first, then an implicit one, left before right.
    pub fn pick(a: Option<Label>, b: Option<Label>) -> Option<Collation> {
        let explicit = |l: &Option<Label>| l.filter(|l| l.explicit);
        explicit(&a)
            .or(explicit(&b))
            .or(a)
            .or(b)
            .map(|l| l.collation)
    }
}

/// The server's and every database's collation,
/// SQL_Latin1_General_CP1_CI_AS.
pub fn default_collation() -> Collation {
    &KNOWN[0]
}

/// A collation by name (case-insensitive; `database_default` is the
/// database's); 448 for an unknown one.
pub fn lookup(name: &str) -> SqlResult<Collation> {
    if name.eq_ignore_ascii_case("database_default") {
        return Ok(default_collation());
    }
    KNOWN
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| SqlError::new(448, format!("Invalid collation '{name}'.")))
}

/// 447: COLLATE on a value that is not a character string.
pub fn not_collatable(ty: &DataType) -> SqlError {
    SqlError::new(
        447,
        format!(
            "Expression type {} is invalid for COLLATE clause.",
            ty.name()
        ),
    )
}

/// The encoding of a Windows code page the sandbox knows (1252 otherwise).
fn encoding_of_code_page(code_page: u16) -> &'static Encoding {
    match code_page {
        65001 => UTF_8,
        1251 => WINDOWS_1251,
        932 => SHIFT_JIS,
        _ => WINDOWS_1252,
    }
}

impl CollationInfo {
    /// The 5-byte TDS COLLATION.
    pub fn tds(&self) -> [u8; 5] {
        let b = self.info.to_le_bytes();
        [b[0], b[1], b[2], b[3], self.sort_id]
    }

    /// The encoding of `char`/`varchar` data.
    pub fn encoding(&self) -> &'static Encoding {
        encoding_of_code_page(self.code_page)
    }

    /// Compares two strings under this collation; trailing spaces never
    /// count.
    pub fn compare(&self, a: &str, b: &str) -> Ordering {
        let (a, b) = (a.trim_end_matches(' '), b.trim_end_matches(' '));
        match self.rule {
            Rule::CaseInsensitive => a.chars().map(fold).cmp(b.chars().map(fold)),
            Rule::CaseSensitive => a
                .chars()
                .map(fold)
                .cmp(b.chars().map(fold))
                .then_with(|| a.cmp(b).reverse()),
            Rule::CaseSensitiveUpperFirst => a
                .chars()
                .map(fold)
                .cmp(b.chars().map(fold))
                .then_with(|| a.cmp(b)),
            Rule::Binary => a.cmp(b),
        }
    }

    /// A grouping key: equal exactly when [`Self::compare`] says equal.
    pub fn key(&self, s: &str) -> String {
        let s = s.trim_end_matches(' ');
        match self.rule {
            Rule::CaseInsensitive => s.chars().map(fold).collect(),
            Rule::CaseSensitive | Rule::CaseSensitiveUpperFirst | Rule::Binary => s.to_string(),
        }
    }

    /// `s` as a `char`/`varchar` of this collation holds it: characters
    /// the code page lacks become `?`.
    pub fn to_code_page<'a>(&self, s: &'a str) -> Cow<'a, str> {
        through(self.encoding(), s)
    }
}

/// Upper case, the case-insensitive comparison's fold.
pub fn fold(c: char) -> char {
    c.to_uppercase().next().unwrap_or(c)
}

/// Encodes `s` in `encoding`, unmappable characters as `?`.
pub fn encode(encoding: &'static Encoding, s: &str) -> Vec<u8> {
    if encoding == UTF_8 {
        return s.as_bytes().to_vec();
    }
    let mut encoder = encoding.new_encoder();
    let mut out = Vec::with_capacity(s.len());
    let mut rest = s;
    loop {
        out.reserve(rest.len() + 16);
        let (result, read) =
            encoder.encode_from_utf8_to_vec_without_replacement(rest, &mut out, true);
        rest = &rest[read..];
        match result {
            EncoderResult::InputEmpty => return out,
            EncoderResult::OutputFull => {}
            EncoderResult::Unmappable(_) => out.push(b'?'),
        }
    }
}

/// Decodes bytes in `encoding` (malformed sequences as U+FFFD).
pub fn decode(encoding: &'static Encoding, bytes: &[u8]) -> String {
    encoding.decode_without_bom_handling(bytes).0.into_owned()
}

/// `s` after a round trip through `encoding`: what a `varchar` in that
/// code page keeps.
pub fn through<'a>(encoding: &'static Encoding, s: &'a str) -> Cow<'a, str> {
    if s.is_ascii() || encoding == UTF_8 {
        return Cow::Borrowed(s);
    }
    let kept = decode(encoding, &encode(encoding, s));
    if kept == s {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(kept)
    }
}

/// The encoding of `varchar` bytes described by a TDS COLLATION: UTF-8
/// when fUTF8 is set, else the code page of the SQL sort id or the LCID
/// (1252 when unknown or absent).
pub fn encoding_for_tds(collation: Option<[u8; 5]>) -> &'static Encoding {
    let Some(c) = collation else {
        return WINDOWS_1252;
    };
    let info = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    if info & UTF8 != 0 {
        return UTF_8;
    }
    if c[4] != 0 {
        // The SQL collations the sandbox knows are all code page 1252.
        return WINDOWS_1252;
    }
    match info & 0xF_FFFF {
        CYRILLIC => WINDOWS_1251,
        JAPANESE => SHIFT_JIS,
        _ => WINDOWS_1252,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_collations_by_name_case_insensitively() {
        let c = lookup("cyrillic_general_ci_as").unwrap();
        assert_eq!(c.name, "Cyrillic_General_CI_AS");
        assert_eq!(c.code_page, 1251);
        assert_eq!(default_collation().name, "SQL_Latin1_General_CP1_CI_AS");
        let err = lookup("Klingon_CI_AS").unwrap_err();
        assert_eq!(err.number, 448);
        assert_eq!(err.message, "Invalid collation 'Klingon_CI_AS'.");
    }

    #[test]
    fn tds_forms() {
        assert_eq!(default_collation().tds(), [0x09, 0x04, 0xD0, 0x00, 0x34]);
        assert_eq!(
            lookup("SQL_Latin1_General_CP1_CS_AS").unwrap().tds(),
            [0x09, 0x04, 0xC0, 0x00, 0x33]
        );
        assert_eq!(
            lookup("Latin1_General_100_CI_AS_SC_UTF8").unwrap().tds(),
            [0x09, 0x04, 0xD0, 0x14, 0x00]
        );
        assert_eq!(
            lookup("Latin1_General_BIN2").unwrap().tds(),
            [0x09, 0x04, 0x00, 0x02, 0x00]
        );
        assert_eq!(
            lookup("Cyrillic_General_CI_AS").unwrap().tds(),
            [0x19, 0x04, 0xD0, 0x00, 0x00]
        );
        for c in &KNOWN {
            assert_eq!(encoding_for_tds(Some(c.tds())), c.encoding(), "{}", c.name);
        }
    }

    #[test]
    fn code_pages_keep_what_they_can_hold() {
        let latin = default_collation();
        assert_eq!(latin.to_code_page("Жук café"), "??? café");
        let cyr = lookup("Cyrillic_General_CI_AS").unwrap();
        assert_eq!(cyr.to_code_page("Жук café"), "Жук caf?");
        let jp = lookup("Japanese_CI_AS").unwrap();
        assert_eq!(jp.to_code_page("日本語 Ж"), "日本語 Ж");
        assert_eq!(jp.to_code_page("é"), "?");
        let utf8 = lookup("Latin1_General_100_CI_AS_SC_UTF8").unwrap();
        assert_eq!(utf8.to_code_page("日本 Жук 😀"), "日本 Жук 😀");
    }

    #[test]
    fn comparison_rules() {
        let ci = default_collation();
        let cs = lookup("Latin1_General_CS_AS").unwrap();
        let bin = lookup("Latin1_General_BIN2").unwrap();
        assert_eq!(ci.compare("abc", "ABC  "), Ordering::Equal);
        assert_ne!(cs.compare("abc", "ABC"), Ordering::Equal);
        assert_eq!(cs.compare("abc", "abc "), Ordering::Equal);
        // Case-sensitive still sorts 'a' next to 'A', before 'b'.
        assert_eq!(cs.compare("a", "B"), Ordering::Less);
        // BIN2: code point order, upper case first.
        assert_eq!(bin.compare("a", "B"), Ordering::Greater);
        assert_eq!(bin.compare("B", "a"), Ordering::Less);
        let sql_cs = lookup("SQL_Latin1_General_CP1_CS_AS").unwrap();
        assert_eq!(cs.compare("a", "A"), Ordering::Less);
        assert_eq!(sql_cs.compare("a", "A"), Ordering::Greater);
        assert_eq!(sql_cs.compare("A", "b"), Ordering::Less);
        assert_eq!(ci.key("Ab "), ci.key("aB"));
        assert_ne!(cs.key("Ab"), cs.key("aB"));
    }
}
