//! A panic in one table of a source is that table's failure, not the
//! worker's: [`catch`] runs a table's attempt and turns a panic into a
//! [`TablePanic`], which stops and retries that table alone, as an error
//! would.
//!
//! What the status shows of a panic is where it happened (the source file
//! and line) and the batch in flight, never the panic's message: a
//! message can quote a value that was being converted, and row values
//! never reach a status. The pod's log keeps the message, as Rust's panic
//! hook prints it.

use std::any::Any;
use std::cell::RefCell;
use std::panic::AssertUnwindSafe;
use std::sync::Once;

use futures::FutureExt;

use crate::domain::BatchId;

/// Where a table's pipeline panicked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the table's pipeline panicked at {location}{during}: a bug in mssql-cdc or a library it \
     uses, not in the data's meaning. The table retries on its own backoff while the source's \
     other tables go on; if it panics again, report it with the pod's log (which has the \
     panic's message) and, to move on, leave the column being converted out of spec.source.columns",
    during = .batch.map(|b| format!(" during batch {b}")).unwrap_or_default()
)]
pub struct TablePanic {
    /// The source file and line, or `unknown` when the hook did not run.
    pub location: String,
    /// The batch planned but not committed when it panicked, if any.
    pub batch: Option<BatchId>,
}

thread_local! {
    /// The location of the newest panic on this thread, set by the hook
    /// and taken by [`catch`] on the same thread (a panic unwinds within
    /// one poll, which runs on one thread).
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Wraps the process's panic hook (once) so that each panic's location is
/// kept for [`catch`]; the previous hook still runs and prints it.
fn keep_locations() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let location = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()));
            LAST_PANIC.with(|last| *last.borrow_mut() = location);
            previous(info);
        }));
    });
}

/// Runs `attempt`; its panic becomes `Err` with where it happened (the
/// batch is filled in by the caller, which can read the checkpoint).
pub async fn catch<T>(attempt: impl Future<Output = T>) -> Result<T, TablePanic> {
    keep_locations();
    AssertUnwindSafe(attempt)
        .catch_unwind()
        .await
        .map_err(|payload: Box<dyn Any + Send>| {
            drop(payload);
            TablePanic {
                location: LAST_PANIC
                    .with(|last| last.borrow_mut().take())
                    .unwrap_or_else(|| "unknown".to_string()),
                batch: None,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_its_location_without_its_message() {
        let caught = catch(async {
            let value = "a row value";
            panic!("cannot convert {value}");
        })
        .await
        .unwrap_err();
        assert!(
            caught.location.starts_with("src/engine/table_panic.rs:"),
            "{caught:?}"
        );
        let said = caught.to_string();
        assert!(!said.contains("a row value"), "{said}");
        assert_eq!(catch(async { 7 }).await, Ok(7));
    }
}
