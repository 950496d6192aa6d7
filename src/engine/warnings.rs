//! The run's warnings: logged when raised, and recorded once per run in the
//! `detail` of the next micro-batch row that reads a range, as
//! `{"warnings": [...]}`. A warning stays pending until a row carrying it
//! is durable, so a batch whose row an earlier (crashed) run had already
//! written passes them on to the next batch.

use std::collections::BTreeSet;

/// The warnings of one run.
#[derive(Debug, Default)]
pub struct Warnings {
    /// Raised and not yet in a durable facts row.
    pending: Vec<String>,
    /// Every warning raised this run, so each is recorded once.
    seen: BTreeSet<String>,
}

impl Warnings {
    /// Starts with warnings raised before the run (manifest warnings, which
    /// the caller has logged).
    pub fn new(initial: &[String]) -> Self {
        let mut warnings = Warnings::default();
        for text in initial {
            warnings.record(text.clone());
        }
        warnings
    }

    /// Logs `text` and keeps it for the next micro-batch row, once per run.
    pub fn raise(&mut self, text: String) {
        if !self.seen.contains(&text) {
            tracing::warn!("{text}");
        }
        self.record(text);
    }

    fn record(&mut self, text: String) {
        if self.seen.insert(text.clone()) {
            self.pending.push(text);
        }
    }

    /// The `detail` a micro-batch row carries, if warnings are pending.
    pub fn detail(&self) -> Option<String> {
        (!self.pending.is_empty())
            .then(|| serde_json::json!({ "warnings": self.pending }).to_string())
    }

    /// A row with `detail` is durable: its warnings are recorded.
    pub fn recorded(&mut self, detail: Option<&str>) {
        if detail.is_some() && detail == self.detail().as_deref() {
            self.pending.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Warnings;

    #[test]
    fn a_warning_is_recorded_once_and_only_by_the_row_that_carries_it() {
        let mut warnings = Warnings::new(&["unknown field spec.x".to_string()]);
        warnings.raise("computed columns left out".to_string());
        warnings.raise("computed columns left out".to_string());
        let detail = warnings.detail().unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&detail).unwrap();
        assert_eq!(parsed["warnings"].as_array().unwrap().len(), 2);

        // A row carrying another detail (an older run's) records nothing.
        warnings.recorded(Some(r#"{"warnings":["older"]}"#));
        assert_eq!(warnings.detail().as_deref(), Some(detail.as_str()));
        warnings.recorded(Some(&detail));
        assert_eq!(warnings.detail(), None);
        // Raised again later in the run: already recorded.
        warnings.raise("computed columns left out".to_string());
        assert_eq!(warnings.detail(), None);
    }
}
