//! `mssql-cdc health --facts URI [--control URI]`: the five stream alerts
//! per target and, with the control table, each verdict's staleness.
//! With `--source NAME`, only the tables of that CdcSource, and the
//! position every one of them is complete up to.
//! Exit status: 0 nothing fires, 1 something fires, 2 error (for cron).

use chrono::{DateTime, Utc};
use mssql_cdc::health::{
    Alert, FinalizationHealth, FreshnessLimits, SourceCompleteness, SourceVerdict, StaleReason,
    StreamHealth, Thresholds, assess_finalization, assess_source, assess_stream,
};
use mssql_cdc::query::monitoring::{CONTROL, FACTS, latest_batches, source_tables, verdicts};
use serde_json::{Value, json};

use super::lake_query::QueryClockArgs;

/// Arguments of `health`.
#[derive(clap::Args)]
pub struct HealthArgs {
    /// The facts Delta table.
    #[arg(long)]
    pub facts: String,
    /// The finalization control Delta table: also judge each verdict.
    #[arg(long)]
    pub control: Option<String>,
    /// Judge only the tables of this CdcSource (those whose newest facts
    /// rows name it) and report the LSN and time every one of them is
    /// complete up to.
    #[arg(long)]
    pub source: Option<String>,
    /// Print JSON instead of lines of text.
    #[arg(long)]
    pub json: bool,
    /// Alert when a target wrote no micro-batch row for longer than this
    /// (use the schedule interval for scheduled jobs).
    #[arg(long, default_value_t = Thresholds::default().silence.into())]
    pub silence: humantime::Duration,
    /// Alert when retention headroom minus the time since the last row
    /// falls below this.
    #[arg(long, default_value_t = Thresholds::default().min_headroom.into())]
    pub min_headroom: humantime::Duration,
    /// Alert when the stream trails capture by more than this.
    #[arg(long, default_value_t = Thresholds::default().max_ingestion_lag.into())]
    pub max_ingestion_lag: humantime::Duration,
    /// Alert when capture trails the database by more than this.
    #[arg(long, default_value_t = Thresholds::default().max_capture_lag.into())]
    pub max_capture_lag: humantime::Duration,
    /// The streams' trigger or schedule interval, part of the verdict's
    /// age limit (one period + trigger + margin).
    #[arg(long, default_value_t = FreshnessLimits::default().trigger.into())]
    pub trigger: humantime::Duration,
    /// Slack added to the verdict's age limit.
    #[arg(long, default_value_t = FreshnessLimits::default().margin.into())]
    pub margin: humantime::Duration,
    #[command(flatten)]
    pub clock: QueryClockArgs,
}

/// The report: what fires decides the exit status.
pub struct HealthReport {
    streams: Vec<StreamHealth>,
    verdicts: Vec<(FinalizationHealth, &'static str)>,
    source: Option<SourceVerdict>,
}

impl HealthReport {
    /// Whether any alert fires. A verdict held by an open snapshot is
    /// expected and does not count.
    pub fn fires(&self) -> bool {
        self.streams.iter().any(StreamHealth::fires)
            || self.verdicts.iter().any(|(v, _)| v.fires())
            || self.source.as_ref().is_some_and(SourceVerdict::fires)
    }
}

/// Reads the tables, judges every target and prints the report.
pub async fn run_health(args: HealthArgs) -> anyhow::Result<HealthReport> {
    let now = args.clock.now();
    let session = args.clock.session()?;
    args.clock.register(&session, FACTS, &args.facts).await?;
    let mut batches = latest_batches(&session).await?;
    let source = match &args.source {
        Some(name) => Some(assess_source(name, &source_tables(&session).await?)),
        None => None,
    };
    // With --source, the source's tables are the whole report.
    let member = |target: &str| {
        source
            .as_ref()
            .is_none_or(|s| s.tables.iter().any(|t| t == target))
    };
    batches.retain(|b| member(&b.target));
    let thresholds = Thresholds {
        silence: *args.silence,
        min_headroom: *args.min_headroom,
        max_ingestion_lag: *args.max_ingestion_lag,
        max_capture_lag: *args.max_capture_lag,
    };
    let streams = batches
        .iter()
        .map(|b| assess_stream(b, now, &thresholds))
        .collect();
    let mut judged = Vec::new();
    if let Some(control) = &args.control {
        args.clock.register(&session, CONTROL, control).await?;
        let limits = FreshnessLimits {
            trigger: *args.trigger,
            margin: *args.margin,
            silence: *args.silence,
        };
        for verdict in verdicts(&session).await? {
            if !member(&verdict.table_name) {
                continue;
            }
            let batch = batches.iter().find(|b| b.target == verdict.table_name);
            judged.push((
                assess_finalization(&verdict, batch, now, &limits),
                verdict.granularity.as_str(),
            ));
        }
    }
    let report = HealthReport {
        streams,
        verdicts: judged,
        source,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&report, now))?);
    } else {
        print!("{}", to_text(&report));
    }
    Ok(report)
}

fn alert_json(alert: Alert) -> Value {
    json!({"name": alert.name(), "message": alert.message()})
}

fn to_json(report: &HealthReport, now: DateTime<Utc>) -> Value {
    let streams: Vec<Value> = report
        .streams
        .iter()
        .map(|s| {
            json!({
                "target": s.target,
                "hours_since_last": s.hours_since_last,
                "headroom_hours": s.headroom_hours,
                "ingestion_lag_seconds": s.ingestion_lag_seconds,
                "capture_lag_seconds": s.capture_lag_seconds,
                "alerts": s.alerts.iter().map(|a| alert_json(*a)).collect::<Vec<_>>(),
            })
        })
        .collect();
    let finalization: Vec<Value> = report
        .verdicts
        .iter()
        .map(|(v, granularity)| {
            json!({
                "table_name": v.table_name,
                "granularity": granularity,
                "age_seconds": v.age_seconds,
                "seconds_since_update": v.seconds_since_update,
                "seconds_since_batch": v.seconds_since_batch,
                "stale_reason": v.stale.map(StaleReason::as_str),
                "stale": v.stale.map(|r| json!({"name": r.name(), "message": r.message()})),
            })
        })
        .collect();
    let mut out = json!({
        "now": ntz(now),
        "firing": report.fires(),
        "streams": streams,
        "finalization": finalization,
    });
    if let Some(source) = &report.source {
        out["source"] = source_json(source);
    }
    out
}

fn ntz(t: DateTime<Utc>) -> String {
    t.naive_utc().format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
}

/// `complete_up_to` is null when no position holds for every table; then
/// `reason` says why.
fn source_json(source: &SourceVerdict) -> Value {
    let (complete, reason) = match &source.completeness {
        SourceCompleteness::UpTo {
            lsn,
            commit_ts,
            target,
        } => (
            json!({"lsn": lsn.to_string(), "commit_ts": commit_ts.map(ntz), "target": target}),
            Value::Null,
        ),
        SourceCompleteness::NoTables => (Value::Null, json!("no tables")),
        SourceCompleteness::Unknown { target } => {
            (Value::Null, json!(format!("{target} has no end LSN")))
        }
    };
    json!({
        "name": source.source,
        "tables": source.tables,
        "complete_up_to": complete,
        "reason": reason,
    })
}

/// The source's one line: "every table of `sales` is complete up to ...".
fn source_text(source: &SourceVerdict) -> String {
    let name = &source.source;
    match &source.completeness {
        SourceCompleteness::UpTo {
            lsn,
            commit_ts,
            target,
        } => {
            let time = commit_ts.map_or_else(|| "unknown".to_string(), ntz);
            format!(
                "every table of `{name}` ({} tables) is complete up to LSN {lsn} / time {time} \
                 (the minimum is {target}'s)\n",
                source.tables.len()
            )
        }
        SourceCompleteness::NoTables => format!(
            "source `{name}`: no table's newest facts row names it, so nothing is known complete\n"
        ),
        SourceCompleteness::Unknown { target } => format!(
            "source `{name}` ({} tables): {target}'s newest batch has no end LSN, so no position \
             holds for every table\n",
            source.tables.len()
        ),
    }
}

fn number(value: Option<f64>, unit: &str) -> String {
    value.map_or_else(|| "NULL".to_string(), |v| format!("{v:.1}{unit}"))
}

fn to_text(report: &HealthReport) -> String {
    let mut out = report.source.as_ref().map(source_text).unwrap_or_default();
    if report.streams.is_empty() {
        out.push_str("no micro-batch facts in the facts table\n");
    }
    for s in &report.streams {
        let state = if s.alerts.is_empty() {
            "ok".to_string()
        } else {
            s.alerts
                .iter()
                .map(|a| a.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "{}: {} (last batch {:.2} h ago, headroom {}, ingestion lag {}, capture lag {})\n",
            s.target,
            state,
            s.hours_since_last,
            number(s.headroom_hours, " h"),
            number(s.ingestion_lag_seconds, " s"),
            number(s.capture_lag_seconds, " s"),
        ));
        for alert in &s.alerts {
            out.push_str(&format!("  {}: {}\n", alert.name(), alert.message()));
        }
    }
    for (v, granularity) in &report.verdicts {
        let age = v.age_seconds.map_or_else(
            || "no verdict yet".to_string(),
            |a| format!("{:.0} min old", a / 60.0),
        );
        let state = v
            .stale
            .map_or_else(|| "fresh".to_string(), |r| format!("stale ({r})"));
        out.push_str(&format!(
            "finalization {}: {state}, {age} ({granularity}), updated {:.0} min ago\n",
            v.table_name,
            v.seconds_since_update / 60.0,
        ));
        if let Some(reason) = v.stale {
            out.push_str(&format!("  {}: {}\n", reason.name(), reason.message()));
        }
    }
    out
}
