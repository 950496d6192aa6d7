//! `spec.alerts`: the limits a stream's health is judged against, written
//! as durations (`15m`, `24h`). The operator's conditions and the `health`
//! command share the defaults, which are those of [`health::Thresholds`]
//! and [`health::FreshnessLimits`].

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::validate::SpecError;
use crate::health::{FreshnessLimits, Thresholds};

/// Limits of the health conditions; each absent field keeps its default.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AlertsSpec {
    /// Live turns False when the worker reported no batch for longer than
    /// this, e.g. `15m` (default `15m`). For a scheduled stream use at least
    /// the schedule interval plus one run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silence: Option<String>,
    /// RetentionHeadroom turns False when the retention headroom, less the
    /// time since the last batch, falls below this (default `24h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_headroom: Option<String>,
    /// IngestionLag turns False when the stream trails CDC capture by more
    /// than this (default `1h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ingestion_lag: Option<String>,
    /// CaptureLag turns False when CDC capture trails the database by more
    /// than this (default `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_capture_lag: Option<String>,
    /// CaptureCurrent turns False when the live capture lag (the time since
    /// the commit of the source's max LSN, read on every trigger, idle ones
    /// included) passes this (default `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_lag: Option<String>,
    /// Slack on the finalization verdict's age limit (one period plus the
    /// trigger interval plus this) before Finalized turns False (default
    /// `15m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalization_margin: Option<String>,
    /// After the stream's object store has failed every attempt for this
    /// long, its status says StoreUnavailable (with the store's answer)
    /// while the worker keeps retrying (default `5m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_outage_after: Option<String>,
}

/// `spec.alerts` with every default applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlertLimits {
    /// The stream alert limits.
    pub thresholds: Thresholds,
    /// Slack added to the finalization verdict's age limit.
    pub finalization_margin: Duration,
    /// The live capture lag above which capture counts as not current.
    pub capture_lag: Duration,
    /// How long the store fails before the status names the outage.
    pub store_outage_after: Duration,
}

/// How long a store fails before the status says StoreUnavailable when
/// `spec.alerts` sets no `storeOutageAfter`: longer than object_store's
/// own retries of one request (3 minutes), so a blip never shows.
pub const DEFAULT_STORE_OUTAGE_AFTER: Duration = Duration::from_secs(5 * 60);

/// The live capture lag limit when `spec.alerts` sets none: the monitoring
/// guide's limit on capture lag.
pub const DEFAULT_LIVE_CAPTURE_LAG: Duration = Duration::from_secs(10 * 60);

impl Default for AlertLimits {
    fn default() -> Self {
        AlertLimits {
            thresholds: Thresholds::default(),
            finalization_margin: FreshnessLimits::default().margin,
            capture_lag: DEFAULT_LIVE_CAPTURE_LAG,
            store_outage_after: DEFAULT_STORE_OUTAGE_AFTER,
        }
    }
}

impl AlertLimits {
    /// The finalization limits of a stream whose batches start every
    /// `trigger` (the stream's silence limit included).
    pub fn freshness(&self, trigger: Duration) -> FreshnessLimits {
        FreshnessLimits {
            trigger,
            margin: self.finalization_margin,
            silence: self.thresholds.silence,
        }
    }
}

impl AlertsSpec {
    /// The limits, or one error per field that is not a positive duration.
    pub fn limits(&self) -> Result<AlertLimits, Vec<SpecError>> {
        let mut errors = Vec::new();
        let defaults = AlertLimits::default();
        let mut parse = |field: &str, text: &Option<String>, default: Duration| {
            parse_duration(&format!("spec.alerts.{field}"), text.as_deref(), default)
                .unwrap_or_else(|error| {
                    errors.push(error);
                    default
                })
        };
        let d = defaults.thresholds;
        let limits = AlertLimits {
            thresholds: Thresholds {
                silence: parse("silence", &self.silence, d.silence),
                min_headroom: parse("minHeadroom", &self.min_headroom, d.min_headroom),
                max_ingestion_lag: parse(
                    "maxIngestionLag",
                    &self.max_ingestion_lag,
                    d.max_ingestion_lag,
                ),
                max_capture_lag: parse("maxCaptureLag", &self.max_capture_lag, d.max_capture_lag),
            },
            finalization_margin: parse(
                "finalizationMargin",
                &self.finalization_margin,
                defaults.finalization_margin,
            ),
            capture_lag: parse("captureLag", &self.capture_lag, defaults.capture_lag),
            store_outage_after: parse(
                "storeOutageAfter",
                &self.store_outage_after,
                defaults.store_outage_after,
            ),
        };
        if errors.is_empty() {
            Ok(limits)
        } else {
            Err(errors)
        }
    }
}

/// A positive duration such as `10s` or `1h 30m`, or `default` when absent.
pub(super) fn parse_duration(
    field: &str,
    text: Option<&str>,
    default: Duration,
) -> Result<Duration, SpecError> {
    let Some(text) = text else {
        return Ok(default);
    };
    match humantime::parse_duration(text) {
        Ok(duration) if !duration.is_zero() => Ok(duration),
        result => Err(SpecError::Invalid {
            field: field.into(),
            value: text.into(),
            reason: result.err().map_or("must be > 0".into(), |e| e.to_string()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_fields_keep_the_health_defaults() {
        let limits = AlertsSpec::default().limits().unwrap();
        assert_eq!(limits, AlertLimits::default());
        assert_eq!(limits.thresholds, Thresholds::default());
        assert_eq!(limits.finalization_margin, Duration::from_secs(15 * 60));
    }

    #[test]
    fn the_documented_defaults_are_the_health_defaults() {
        // The CRD and docs/crd-reference.md show these doc comments; the
        // values live in `health` alone.
        let schema = serde_json::to_value(schemars::schema_for!(AlertsSpec)).unwrap();
        let defaults = AlertLimits::default();
        let t = defaults.thresholds;
        let cases = [
            ("silence", t.silence),
            ("minHeadroom", t.min_headroom),
            ("maxIngestionLag", t.max_ingestion_lag),
            ("maxCaptureLag", t.max_capture_lag),
            ("finalizationMargin", defaults.finalization_margin),
            ("captureLag", defaults.capture_lag),
            ("storeOutageAfter", defaults.store_outage_after),
        ];
        for (field, default) in cases {
            let description: String = schema["properties"][field]["description"]
                .as_str()
                .unwrap_or_else(|| panic!("{field} has a description"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let documented = description
                .split("(default `")
                .nth(1)
                .and_then(|rest| rest.split('`').next())
                .unwrap_or_else(|| panic!("{field}: no (default `...`) in {description:?}"));
            assert_eq!(
                humantime::parse_duration(documented).ok(),
                Some(default),
                "{field}"
            );
        }
    }

    #[test]
    fn durations_are_parsed_and_bad_ones_name_their_field() {
        let spec = AlertsSpec {
            silence: Some("2h".into()),
            min_headroom: Some("36h".into()),
            max_ingestion_lag: Some("5m".into()),
            max_capture_lag: Some("90s".into()),
            finalization_margin: Some("1h 30m".into()),
            capture_lag: Some("2m".into()),
            store_outage_after: Some("30s".into()),
        };
        let limits = spec.limits().unwrap();
        assert_eq!(limits.thresholds.silence, Duration::from_secs(7200));
        assert_eq!(
            limits.thresholds.min_headroom,
            Duration::from_secs(36 * 3600)
        );
        assert_eq!(
            limits.thresholds.max_ingestion_lag,
            Duration::from_secs(300)
        );
        assert_eq!(limits.thresholds.max_capture_lag, Duration::from_secs(90));
        assert_eq!(limits.finalization_margin, Duration::from_secs(5400));
        assert_eq!(limits.capture_lag, Duration::from_secs(120));
        assert_eq!(
            limits.freshness(Duration::from_secs(10)),
            FreshnessLimits {
                trigger: Duration::from_secs(10),
                margin: Duration::from_secs(5400),
                silence: Duration::from_secs(7200),
            }
        );

        let bad = AlertsSpec {
            silence: Some("soon".into()),
            max_capture_lag: Some("0s".into()),
            ..AlertsSpec::default()
        };
        let errors: Vec<String> = bad
            .limits()
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].starts_with("spec.alerts.silence:"), "{errors:?}");
        assert!(errors[0].contains("\"soon\""), "{errors:?}");
        assert_eq!(
            errors[1],
            "spec.alerts.maxCaptureLag: must be > 0, got \"0s\""
        );
    }
}
