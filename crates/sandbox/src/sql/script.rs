//! Scripts: T-SQL batches separated by `GO` lines. `GO` is a client-side
//! separator (sqlcmd, SSMS), not T-SQL, so only scripts understand it
//! (<https://learn.microsoft.com/en-us/sql/t-sql/language-elements/sql-server-utilities-statements-go>).

use super::engine::Engine;
use super::error::SqlResult;
use super::request::{CancelToken, Output, Request};

/// Splits a script into batches at lines holding only `GO` (optionally
/// `GO n`, which repeats the batch n times).
pub fn split_batches(script: &str) -> Vec<String> {
    let mut batches = Vec::new();
    let mut current = String::new();
    for line in script.lines() {
        let t = line.trim();
        let mut words = t.split_whitespace();
        let is_go = words.next().is_some_and(|w| w.eq_ignore_ascii_case("go"));
        let count = words.next().map(|n| n.parse::<usize>());
        if is_go && words.next().is_none() && !matches!(count, Some(Err(_))) {
            let n = match count {
                Some(Ok(n)) => n,
                _ => 1,
            };
            if !current.trim().is_empty() {
                for _ in 0..n {
                    batches.push(current.clone());
                }
            }
            current.clear();
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    if !current.trim().is_empty() {
        batches.push(current);
    }
    batches
}

/// Runs each batch as `sa` in one session; the first error stops it.
pub fn run_script(engine: &Engine, script: &str) -> SqlResult<()> {
    let mut session = engine.sa_session();
    let cancel = CancelToken::default();
    for batch in split_batches(script) {
        let out = session.execute(Request::Batch { sql: batch }, &cancel);
        for o in out {
            if let Output::Message(e) = o
                && (e.class > 10 || e.is_cancelled())
            {
                return Err(e);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_separates_batches() {
        let b = split_batches("select 1\nGO\nselect 2\n  go  \nselect 3\nGO 2\nselect 'go'\n");
        assert_eq!(b.len(), 5);
        assert!(b[4].contains("'go'"));
    }
}
