//! YAML that every reader reads the same. kubectl, Helm, Argo CD and Flux
//! read YAML through go-yaml, which keeps YAML 1.1's scalars: an unquoted
//! `off`, `on`, `yes`, `no`, `y` or `n` is a boolean there, and a string
//! in YAML 1.2 (serde_yaml). A CRD whose enum lists `off` unquoted is
//! stored with `false` in it, and then refuses `encrypt: "off"`.
//!
//! [`to_yaml`] writes block-style YAML in which a string is plain only when
//! it cannot be read as anything else under either version (it starts with
//! a letter, is not one of the YAML 1.1 words, and holds nothing that ends
//! a plain scalar); every other string is double-quoted, with JSON's
//! escapes, which both versions read.

use std::fmt::Write as _;

use serde_json::Value;

/// Words YAML 1.1 reads as booleans or null (compared case-insensitively,
/// which also quotes harmless spellings such as `yEs`).
const YAML_1_1_WORDS: [&str; 12] = [
    "y", "yes", "n", "no", "true", "false", "on", "off", "null", "~", "", "<<",
];

/// `value` as a YAML document (block style, two-space indentation).
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => write_map(&mut out, map, 0),
        Value::Array(items) if !items.is_empty() => write_seq(&mut out, items, 0),
        scalar => {
            out.push_str(&inline(scalar));
            out.push('\n');
        }
    }
    out
}

/// A string as a YAML scalar: plain when that is unambiguous, else
/// double-quoted.
pub fn scalar(text: &str) -> String {
    if plain_is_safe(text) {
        text.to_string()
    } else {
        // JSON's escapes are a subset of YAML's double-quoted ones.
        serde_json::Value::String(text.to_string()).to_string()
    }
}

fn plain_is_safe(text: &str) -> bool {
    let Some(first) = text.chars().next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || first == '/' || first == '_')
        && !YAML_1_1_WORDS.contains(&text.to_ascii_lowercase().as_str())
        && !text.ends_with([' ', ':'])
        && !text.contains(": ")
        && !text.contains(" #")
        && !text.chars().any(char::is_control)
}

/// A scalar or an empty collection, on one line.
fn inline(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => scalar(s),
        Value::Array(_) => "[]".to_string(),
        Value::Object(_) => "{}".to_string(),
    }
}

fn is_block(value: &Value) -> bool {
    match value {
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
        _ => false,
    }
}

/// A multi-line string as a literal block (`|` or `|-`) indented by
/// `indent`, when its text survives one unchanged; `None` otherwise.
fn literal(text: &str, indent: usize) -> Option<String> {
    let (body, chomp) = match text.strip_suffix('\n') {
        Some(body) => (body, "|"),
        None => (text, "|-"),
    };
    let readable = body.contains('\n')
        && !body.starts_with([' ', '\n'])
        && !body.ends_with('\n')
        && body.lines().all(|l| !l.ends_with([' ', '\t']))
        && !body.chars().any(|c| c.is_control() && c != '\n');
    if !readable {
        return None;
    }
    let pad = " ".repeat(indent);
    let mut block = chomp.to_string();
    for line in body.split('\n') {
        block.push('\n');
        if !line.is_empty() {
            block.push_str(&pad);
            block.push_str(line);
        }
    }
    Some(block)
}

fn write_map(out: &mut String, map: &serde_json::Map<String, Value>, indent: usize) {
    let pad = " ".repeat(indent);
    for (key, value) in map {
        let key = scalar(key);
        if let Some(block) = value.as_str().and_then(|t| literal(t, indent + 2)) {
            let _ = writeln!(out, "{pad}{key}: {block}");
            continue;
        }
        if !is_block(value) {
            let _ = writeln!(out, "{pad}{key}: {}", inline(value));
            continue;
        }
        let _ = writeln!(out, "{pad}{key}:");
        match value {
            Value::Object(inner) => write_map(out, inner, indent + 2),
            Value::Array(items) => write_seq(out, items, indent + 2),
            _ => {}
        }
    }
}

fn write_seq(out: &mut String, items: &[Value], indent: usize) {
    let pad = " ".repeat(indent);
    for item in items {
        if !is_block(item) {
            let _ = writeln!(out, "{pad}- {}", inline(item));
            continue;
        }
        // The item's first line goes after the dash, the rest below it.
        let mut nested = String::new();
        match item {
            Value::Object(inner) => write_map(&mut nested, inner, indent + 2),
            Value::Array(inner) => write_seq(&mut nested, inner, indent + 2),
            _ => {}
        }
        let _ = write!(out, "{pad}- {}", &nested[indent + 2..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_1_1_words_and_ambiguous_strings_are_quoted() {
        let cases = [
            ("off", "\"off\""),
            ("On", "\"On\""),
            ("y", "\"y\""),
            ("N", "\"N\""),
            ("yes", "\"yes\""),
            ("null", "\"null\""),
            ("~", "\"~\""),
            ("", "\"\""),
            ("10s", "\"10s\""),
            ("1.0", "\"1.0\""),
            ("0x0000002A", "\"0x0000002A\""),
            ("2026-11-29", "\"2026-11-29\""),
            ("1:30", "\"1:30\""),
            (".inf", "\".inf\""),
            ("@hourly", "\"@hourly\""),
            ("*", "\"*\""),
            ("a: b", "\"a: b\""),
            ("a #b", "\"a #b\""),
            ("ends:", "\"ends:\""),
            ("two\nlines", "\"two\\nlines\""),
            ("required", "required"),
            ("self == oldSelf", "self == oldSelf"),
            ("http://x/y", "http://x/y"),
            ("/lake/orders", "/lake/orders"),
            ("x-kubernetes-validations", "x-kubernetes-validations"),
            (
                "Whole hours, e.g. `15m` [a] {b}",
                "Whole hours, e.g. `15m` [a] {b}",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(scalar(text), expected, "{text:?}");
        }
    }

    #[test]
    fn a_document_reads_back_as_the_same_value() {
        let value = json!({
            "apiVersion": "v1",
            "enum": ["required", "optional", "off"],
            "empty": {},
            "none": [],
            "nested": [[1, 2], [], {"a": {"b": [true, null, 2.5, "no"]}}],
            "list": [{"name": "x", "items": [{"k": "y"}]}, "plain"],
            "text": "line one\nline \"two\"\twith tab",
            "description": "First line,\nsecond line.\n\nA paragraph.",
            "kept": "ends with a newline\nhere\n",
            "spaced": "  leading spaces\nnext",
            "number": 42,
        });
        let text = to_yaml(&value);
        let back: Value = serde_yaml::from_str(&text).expect("valid YAML");
        assert_eq!(back, value, "\n{text}");
        assert!(text.contains("- \"off\""), "{text}");
        assert!(
            text.contains("description: |-\n  First line,\n  second line.\n\n  A paragraph.\n"),
            "{text}"
        );
        assert!(text.contains("kept: |\n  ends with"), "{text}");
        assert!(
            text.contains("  - items:\n      - k: \"y\"\n    name: x\n"),
            "{text}"
        );
    }
}
