//! The crate's layers, written once and checked against the code.
//!
//! A module may import from the layers below its own, never from its own
//! layer's other modules or from above; `docs/architecture.md` draws the
//! same order. The check reads every `crate::<module>` path in `src/` (not
//! in comments or string literals), grouped `use` trees included
//! (`use crate::{lake::bronze, engine::run}` names `lake` and `engine`), so
//! an upward `use` fails `layering::tests::the_code_follows_the_layers`
//! with the file, the line and the edge; `an_upward_import_is_reported`
//! shows the checker catching one. The SQL Server driver is the source
//! layer's alone: the engine reaches SQL Server only through its
//! `ChangeSource` seam, so `tiberius` named anywhere but `source/` (and the
//! binary) fails too.

use std::path::{Path, PathBuf};

/// The crate's top-level modules, bottom layer first. Modules on one line
/// are siblings: neither imports the other.
pub const LAYERS: &[&[&str]] = &[
    &["domain", "failpoint", "retry"],
    &["health", "lake"],
    &["spec"],
    &["source"],
    &["engine"],
    &["metrics"],
    &["operator", "query"],
];

/// An import that breaks the order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The file, relative to `src/`.
    pub file: String,
    /// Its line (1-based).
    pub line: usize,
    /// The importing module.
    pub from: String,
    /// The imported module.
    pub to: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "src/{}:{}: {} imports {}, which is not below it (see docs/architecture.md)",
            self.file, self.line, self.from, self.to
        )
    }
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The top-level module a file under `src/` belongs to (`engine/plan.rs`
/// and `engine.rs` are both `engine`); `None` for the crate root files.
fn module_of(file: &str) -> Option<&str> {
    match file.split_once('/') {
        Some((dir, _)) => Some(dir),
        None => file
            .strip_suffix(".rs")
            .filter(|m| !matches!(*m, "lib" | "main" | "layering")),
    }
}

/// The code of a file with its comments and the insides of its string and
/// char literals blanked out (newlines kept, so offsets keep their line).
fn code_only(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for b in &mut out[from..to] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |n| i + n);
            blank(&mut out, i, end);
            i = end;
        } else if rest.starts_with(b"/*") {
            // Block comments nest in Rust.
            let (mut depth, mut j) = (0usize, i);
            while j < bytes.len() {
                if bytes[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if bytes[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if let Some(end) = raw_string_end(bytes, i) {
            blank(&mut out, i, end);
            i = end;
        } else if rest[0] == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(bytes.len());
            blank(&mut out, i, end);
            i = end;
        } else if rest[0] == b'\'' {
            // A char literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            let close = match rest.get(1) {
                Some(b'\\') => rest.iter().skip(2).position(|&b| b == b'\'').map(|n| n + 2),
                Some(_) => (rest.get(2) == Some(&b'\'')).then_some(2),
                None => None,
            };
            match close {
                Some(n) => {
                    blank(&mut out, i, i + n + 1);
                    i += n + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Where a raw string literal (`r"..."`, `r#"..."#`, `br"..."`) starting
/// at `at` ends, if one starts there.
fn raw_string_end(bytes: &[u8], at: usize) -> Option<usize> {
    if at > 0 && is_ident(bytes[at - 1]) {
        return None;
    }
    let mut j = at;
    if bytes.get(j) == Some(&b'b') {
        j += 1;
    }
    if bytes.get(j) != Some(&b'r') {
        return None;
    }
    j += 1;
    let hashes = bytes[j..].iter().take_while(|&&b| b == b'#').count();
    j += hashes;
    if bytes.get(j) != Some(&b'"') {
        return None;
    }
    let mut close = vec![b'"'];
    close.extend(std::iter::repeat_n(b'#', hashes));
    let end = bytes[j + 1..]
        .windows(close.len())
        .position(|w| w == close.as_slice())
        .map_or(bytes.len(), |n| j + 1 + n + close.len());
    Some(end)
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Skips white space from `at`.
fn skip_space(code: &[u8], mut at: usize) -> usize {
    while code.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// The identifier at `at` (after white space) and where it ends.
fn ident_at(code: &[u8], at: usize) -> Option<(usize, usize)> {
    let start = skip_space(code, at);
    let len = code[start..].iter().take_while(|&&b| is_ident(b)).count();
    (len > 0).then_some((start, start + len))
}

/// The first segments of a path tree after `crate::`, starting at `at`:
/// `engine` in `crate::engine::run`, `a` and `b` in `crate::{a, b::c}`
/// (groups nest: `crate::{a::{x, y}, b}` names `a` and `b`). Returns each
/// module with its offset.
fn tree_heads(code: &[u8], at: usize) -> Vec<(usize, String)> {
    let start = skip_space(code, at);
    if code.get(start) != Some(&b'{') {
        return ident_at(code, start)
            .map(|(from, to)| {
                let name = String::from_utf8_lossy(&code[from..to]).into_owned();
                vec![(from, name)]
            })
            .unwrap_or_default();
    }
    // A group: the first identifier of each item at depth 1.
    let mut heads = Vec::new();
    let (mut depth, mut expect_item, mut j) = (0usize, true, start);
    while j < code.len() {
        match code[j] {
            b'{' => {
                depth += 1;
                expect_item = depth == 1;
                j += 1;
            }
            b'}' => {
                depth -= 1;
                j += 1;
                if depth == 0 {
                    break;
                }
            }
            b',' => {
                expect_item = depth == 1;
                j += 1;
            }
            b if expect_item && is_ident(b) => {
                let (from, to) = ident_at(code, j).unwrap_or((j, j + 1));
                let name = String::from_utf8_lossy(&code[from..to]).into_owned();
                // `self` names the crate root; `*` is no module.
                if name != "self" {
                    heads.push((from, name));
                }
                expect_item = false;
                j = to;
            }
            _ => j += 1,
        }
    }
    heads
}

/// The modules a file's code names as `crate::<module>`, in paths and in
/// grouped `use` trees, with the line (1-based) of each, ignoring comments
/// and string literals.
fn imported(text: &str) -> Vec<(usize, String)> {
    let code = code_only(text);
    let needle = b"crate::";
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(n) = code[at..].windows(needle.len()).position(|w| w == needle) {
        let hit = at + n;
        at = hit + needle.len();
        // `mssql_cdc_crate::` or `somecrate::` are not this crate, nor is
        // `$crate::` in a macro.
        if hit > 0 && (is_ident(code[hit - 1]) || code[hit - 1] == b'$') {
            continue;
        }
        for (offset, module) in tree_heads(&code, at) {
            let line = code[..offset].iter().filter(|&&b| b == b'\n').count() + 1;
            found.push((line, module));
        }
    }
    found
}

/// Every import among `files` (path relative to `src/`, text) that does
/// not point to a lower layer.
pub fn violations(files: &[(String, String)]) -> Vec<Violation> {
    let mut found = Vec::new();
    for (file, text) in files {
        let Some(from) = module_of(file) else {
            continue;
        };
        let from_layer = layer_of(from);
        for (line, to) in imported(text) {
            if to == from {
                continue;
            }
            let allowed = match (from_layer, layer_of(&to)) {
                (Some(a), Some(b)) => b < a,
                _ => false,
            };
            if !allowed {
                found.push(Violation {
                    file: file.clone(),
                    line,
                    from: from.to_string(),
                    to,
                });
            }
        }
    }
    found
}

/// The library's source files (the binary's `cli/` and `main.rs` sit on
/// top of everything and import through `mssql_cdc::`).
fn library_files(src: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut dirs: Vec<PathBuf> = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let relative = path
                .strip_prefix(src)
                .map(|p| p.to_string_lossy().replace('\\', "/"))
                .unwrap_or_default();
            if relative == "cli" || relative == "main.rs" {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if relative.ends_with(".rs") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                files.push((relative, text));
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> (String, String) {
        (path.to_string(), text.to_string())
    }

    #[test]
    fn the_code_follows_the_layers() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let files = library_files(&src);
        assert!(files.len() > 50, "read only {} files", files.len());
        let found: Vec<String> = violations(&files).iter().map(ToString::to_string).collect();
        assert!(
            found.is_empty(),
            "imports against the layers:\n{}",
            found.join("\n")
        );
        // Every top-level module has a layer, so a new one must be placed.
        for (path, _) in &files {
            if let Some(module) = module_of(path) {
                assert!(
                    layer_of(module).is_some(),
                    "module {module} ({path}) has no layer in LAYERS"
                );
            }
        }
    }

    #[test]
    fn an_upward_import_is_reported() {
        let files = [
            file(
                "lake/bronze.rs",
                "use crate::domain::Lsn;\nuse crate::engine::run; // upward\n",
            ),
            file("health/stream.rs", "use crate::lake::facts; // sibling\n"),
            file(
                "engine/plan.rs",
                "use crate::source::cdc;\nlet x = crate::domain::Lsn::ZERO;\n",
            ),
            file(
                "spec/types.rs",
                "// crate::engine is named in a comment only\n",
            ),
            file("query/session.rs", "use crate::brand_new::Thing;\n"),
        ];
        let found = violations(&files);
        let edges: Vec<(&str, usize, &str, &str)> = found
            .iter()
            .map(|v| (v.file.as_str(), v.line, v.from.as_str(), v.to.as_str()))
            .collect();
        assert_eq!(
            edges,
            [
                ("lake/bronze.rs", 2, "lake", "engine"),
                ("health/stream.rs", 1, "health", "lake"),
                ("query/session.rs", 1, "query", "brand_new"),
            ]
        );
        assert!(found[0].to_string().contains("src/lake/bronze.rs:2"));
    }

    #[test]
    fn grouped_and_multi_line_imports_are_read_as_trees() {
        let files = [
            file("lake/facts.rs", "use crate::{domain::Lsn, engine::run};\n"),
            file(
                "source/cdc.rs",
                "use crate::{\n    domain::{Lsn, BatchId},\n    lake::txn,\n    operator::{self, crd::Spec},\n};\n",
            ),
            file(
                "spec/load.rs",
                "let s = \"crate::engine in a string\"; /* crate::engine */ let r = r#\"crate::query\"#;\n",
            ),
            file(
                "domain/lsn.rs",
                "macro_rules! m { () => { $crate::engine::x } }\n",
            ),
        ];
        let edges: Vec<(String, usize, String)> = violations(&files)
            .into_iter()
            .map(|v| (v.file, v.line, v.to))
            .collect();
        assert_eq!(
            edges,
            [
                ("lake/facts.rs".to_string(), 1, "engine".to_string()),
                ("source/cdc.rs".to_string(), 4, "operator".to_string()),
            ]
        );
    }

    /// The driver's errors are also classified (transient or not) in the
    /// one place that classifies every library's errors.
    #[test]
    fn only_the_source_layer_names_the_sql_server_driver() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let outside: Vec<String> = library_files(&src)
            .into_iter()
            .filter(|(path, _)| !path.starts_with("source/"))
            .filter(|(path, _)| !path.starts_with("retry/classify"))
            .filter(|(_, text)| {
                let code = code_only(text);
                code.windows(b"tiberius".len()).any(|w| w == b"tiberius")
            })
            .map(|(path, _)| path)
            .collect();
        assert!(
            outside.is_empty(),
            "tiberius is named outside src/source/ and retry/classify (the engine reads SQL \
             Server through engine::ChangeSource, implemented in source/): {outside:?}"
        );
    }

    /// Every `.rs` path under `dir`, relative to the repository.
    fn rust_files(repo: &Path, dir: &Path, into: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                rust_files(repo, &path, into);
            } else if path.extension().is_some_and(|e| e == "rs")
                && let Ok(relative) = path.strip_prefix(repo)
            {
                into.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }

    #[test]
    fn every_file_the_architecture_doc_names_exists() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        for dir in ["src", "crates", "tests"] {
            rust_files(repo, &repo.join(dir), &mut files);
        }
        let doc = include_str!("../docs/architecture.md");
        // Each `name.rs` or `dir/name.rs` in backticks: a file of that
        // path (under src/ when it names no crate) must exist.
        let named: Vec<&str> = doc
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|quoted| {
                let stem = quoted.strip_suffix(".rs").unwrap_or_default();
                !stem.is_empty() && !stem.ends_with('/') && !quoted.contains(' ')
            })
            .collect();
        assert!(named.len() > 20, "the map names files: {named:?}");
        let missing: Vec<&str> = named
            .into_iter()
            .filter(|name| {
                !files
                    .iter()
                    .any(|f| f == name || f.ends_with(&format!("/{name}")))
            })
            .collect();
        assert!(
            missing.is_empty(),
            "docs/architecture.md names files that do not exist: {missing:?}"
        );
    }

    #[test]
    fn the_architecture_doc_draws_the_same_layers() {
        let doc = include_str!("../docs/architecture.md");
        let block = doc
            .split("```text\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("docs/architecture.md has a ```text block of the layers");
        // One line per module, top layer first: `<layer>  <module>  <what it
        // owns>`, with the binary's `cli` on top of the library's layers.
        let drawn: Vec<(usize, &str)> = block
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                let layer = words.next()?.parse().ok()?;
                Some((layer, words.next()?))
            })
            .collect();
        let mut expected: Vec<(usize, &str)> = LAYERS
            .iter()
            .enumerate()
            .flat_map(|(n, layer)| layer.iter().map(move |m| (n, *m)))
            .chain([(LAYERS.len(), "cli")])
            .collect();
        expected.reverse();
        let mut drawn_sorted = drawn.clone();
        drawn_sorted.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
        let mut expected_sorted = expected;
        expected_sorted.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
        assert_eq!(drawn_sorted, expected_sorted);
        assert!(
            drawn.windows(2).all(|w| w[0].0 >= w[1].0),
            "top layer first: {drawn:?}"
        );
    }
}
