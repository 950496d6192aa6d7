//! How long a stream's object store has refused it. A store that answers
//! 503 for hours is retried the whole time (it may come back, and nothing
//! is lost meanwhile), but the status must not go on saying only "retrying":
//! once every attempt has failed for `spec.alerts.storeOutageAfter` the
//! observer hears [`StoreDown`] (the stream's status says
//! `StoreUnavailable`), and once the store takes a write again it hears
//! that the outage ended. One tracker per run, shared by the run's retry
//! loop and its sink's in-place commit retries.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::error::EngineError;
use super::observer::Observer;

/// A store that has failed every attempt for longer than the stream's
/// `storeOutageAfter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreDown {
    /// The first failure of the outage (UTC).
    pub since: DateTime<Utc>,
    /// The store's latest answer, one line, with every URL's query (where
    /// a SAS token would be) hidden.
    pub answer: String,
}

/// Times the store's failures of one run.
pub struct StoreOutage {
    observer: Arc<dyn Observer>,
    after: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// When the store's current run of failures began.
    since: Option<(Instant, DateTime<Utc>)>,
    /// Whether the observer was told.
    reported: bool,
}

impl StoreOutage {
    /// A tracker telling `observer` once the store failed for `after`.
    pub fn new(observer: Arc<dyn Observer>, after: Duration) -> Arc<Self> {
        Arc::new(StoreOutage {
            observer,
            after,
            state: Mutex::new(State::default()),
        })
    }

    /// An attempt failed with `error`: one of the store's counts towards
    /// the outage (any other error passes by, as does a lost commit race).
    pub fn failed(&self, error: &EngineError) {
        if !error.is_store_failure() {
            return;
        }
        let down = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let (started, since) = *state.since.get_or_insert((Instant::now(), Utc::now()));
            if state.reported || started.elapsed() < self.after {
                return;
            }
            state.reported = true;
            StoreDown {
                since,
                answer: without_queries(&error.to_string()),
            }
        };
        tracing::error!(
            since = %down.since,
            "the object store has failed every attempt for longer than storeOutageAfter ({}): {}",
            humantime::format_duration(self.after),
            down.answer
        );
        self.observer.store_outage(Some(&down));
    }

    /// The store took a write (or the run got past what failed): an outage
    /// ends, and the observer hears so if it had heard of it.
    pub fn answered(&self) {
        let was_reported = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.since = None;
            std::mem::take(&mut state.reported)
        };
        if was_reported {
            tracing::info!("the object store answers again");
            self.observer.store_outage(None);
        }
    }
}

/// `text` on one line, with the query of every URL in it replaced by `?…`:
/// object_store's errors name the request's URL, and an Azure SAS token
/// travels in the query.
pub fn without_queries(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_query = false;
    let mut in_url = false;
    let mut previous = ' ';
    for (i, c) in text.char_indices() {
        let ends_token = c.is_whitespace() || matches!(c, ')' | '"' | '\'' | ',' | '>');
        if ends_token {
            in_url = false;
            in_query = false;
        } else if !in_url && text[i..].starts_with("://") {
            in_url = true;
        }
        if in_query {
            continue;
        }
        if in_url && c == '?' {
            in_query = true;
            out.push_str("?…");
            continue;
        }
        let c = if c == '\n' || c == '\r' { ' ' } else { c };
        if !(c == ' ' && previous == ' ') {
            out.push(c);
        }
        previous = c;
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Heard(Mutex<Vec<Option<StoreDown>>>);

    impl Observer for Heard {
        fn store_outage(&self, down: Option<&StoreDown>) {
            self.0.lock().unwrap().push(down.cloned());
        }
    }

    fn store_503() -> EngineError {
        EngineError::Checkpoint(crate::lake::checkpoint::CheckpointError::Store {
            location: "s3://lake/_checkpoints/orders/".into(),
            source: object_store::Error::Generic {
                store: "S3",
                source: "Error performing PUT https://acct.blob.core.windows.net/lake/x?sv=2024&sig=SECRET \
                         in 1s: HTTP status server error (503 Service Unavailable)"
                    .into(),
            },
        })
    }

    #[test]
    fn an_outage_is_told_once_after_its_limit_and_once_when_it_ends() {
        let heard = Arc::new(Heard::default());
        let patient = StoreOutage::new(heard.clone(), Duration::from_secs(3600));
        patient.failed(&store_503());
        patient.failed(&store_503());
        assert!(heard.0.lock().unwrap().is_empty(), "not before the limit");
        patient.answered();
        assert!(heard.0.lock().unwrap().is_empty(), "nor its end");

        let outage = StoreOutage::new(heard.clone(), Duration::ZERO);
        outage.failed(&store_503());
        outage.failed(&store_503());
        outage.answered();
        outage.answered();
        let said = heard.0.lock().unwrap().clone();
        assert_eq!(said.len(), 2, "{said:?}");
        let down = said[0].as_ref().expect("the outage");
        assert!(down.answer.contains("503 Service Unavailable"), "{down:?}");
        assert!(!down.answer.contains("SECRET"), "{down:?}");
        assert_eq!(said[1], None, "then its end");
    }

    #[test]
    fn a_store_that_answers_between_failures_starts_a_new_outage() {
        let heard = Arc::new(Heard::default());
        let outage = StoreOutage::new(heard.clone(), Duration::ZERO);
        outage.failed(&store_503());
        outage.answered();
        outage.failed(&store_503());
        let said = heard.0.lock().unwrap().clone();
        assert_eq!(said.len(), 3, "{said:?}");
        let (first, second) = (said[0].as_ref().unwrap(), said[2].as_ref().unwrap());
        assert!(second.since >= first.since);
    }

    #[test]
    fn errors_that_are_not_the_stores_are_not_counted() {
        let heard = Arc::new(Heard::default());
        let outage = StoreOutage::new(heard.clone(), Duration::ZERO);
        outage.failed(&EngineError::Checkpoint(
            crate::lake::checkpoint::CheckpointError::Store {
                location: "s3://lake/_checkpoints/orders/".into(),
                source: object_store::Error::PermissionDenied {
                    path: "offsets/7".into(),
                    source: "403 Forbidden".into(),
                },
            },
        ));
        assert!(heard.0.lock().unwrap().is_empty());
        outage.failed(&store_503());
        assert_eq!(heard.0.lock().unwrap().len(), 1);
    }

    #[test]
    fn queries_of_urls_are_hidden_and_the_answer_is_one_line() {
        assert_eq!(
            without_queries(
                "PUT https://a.example/x?sig=abc&sv=1 failed:\n503 (see http://b/y?k=v)"
            ),
            "PUT https://a.example/x?… failed: 503 (see http://b/y?…)"
        );
        assert_eq!(without_queries("why? no url here"), "why? no url here");
    }
}
