//! The crate's layers, written once and checked against the code.
//!
//! A module may import from the layers below its own, never from its own
//! layer's other modules or from above; `docs/architecture.md` draws the
//! same order. The check reads every `crate::<module>` path in `src/` (not
//! in comments), so an upward `use` fails `layering::tests::the_code_follows_the_layers`
//! with the file, the line and the edge; `an_upward_import_is_reported`
//! shows the checker catching one.

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

/// The modules a line of code names as `crate::<module>`, ignoring
/// comments.
fn imported(line: &str) -> Vec<&str> {
    let code = line.split("//").next().unwrap_or("");
    code.match_indices("crate::")
        .filter(|(at, _)| {
            // `mssql_cdc_crate::` or `somecrate::` are not this crate.
            !code[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
        })
        .filter_map(|(at, _)| {
            let rest = &code[at + "crate::".len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            (end > 0).then(|| &rest[..end])
        })
        .collect()
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
        for (n, line) in text.lines().enumerate() {
            for to in imported(line) {
                if to == from {
                    continue;
                }
                let allowed = match (from_layer, layer_of(to)) {
                    (Some(a), Some(b)) => b < a,
                    _ => false,
                };
                if !allowed {
                    found.push(Violation {
                        file: file.clone(),
                        line: n + 1,
                        from: from.to_string(),
                        to: to.to_string(),
                    });
                }
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
