//! Alerting and views out of the box: the chart renders the monitoring
//! guide's alerts (and the operator's) as a PrometheusRule that `promtool
//! check rules` accepts, a Grafana dashboard whose every query promtool
//! parses too, a PodDisruptionBudget when the operator runs as several
//! replicas, the log levels and the PodMonitor's stream label.

use std::time::Duration;

use crate::support::chart::{documents, render};
use crate::support::tools::PROMTOOL;

const VALUES: &str = r#"{
  "replicas": 2,
  "logLevel": "debug",
  "worker": {"logLevel": "warn"},
  "metrics": {
    "podMonitor": {"enabled": true},
    "prometheusRule": {"enabled": true},
    "grafanaDashboard": {"enabled": true}
  }
}"#;

/// `promtool check rules` on `groups` (a rule file's YAML value).
async fn promtool_accepts(groups: &serde_yaml::Value) {
    let Some(promtool) = PROMTOOL.find() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("rules.yaml");
    std::fs::write(&file, serde_yaml::to_string(groups).expect("yaml")).expect("write");
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(promtool)
            .args(["check", "rules"])
            .arg(&file)
            .output(),
    )
    .await
    .expect("promtool ends")
    .expect("promtool runs");
    assert!(
        out.status.success(),
        "promtool check rules:\n{}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        serde_yaml::to_string(groups).unwrap_or_default()
    );
}

#[tokio::test]
async fn the_chart_renders_alerts_promtool_accepts_and_a_dashboard() {
    let Some(rendered) = render("cdc", "ops", VALUES).await else {
        return;
    };
    let rule = documents(&rendered, "prometheusrule.yaml").remove(0);
    assert_eq!(rule["kind"], "PrometheusRule");
    let alerts: Vec<&str> = rule["spec"]["groups"][0]["rules"]
        .as_sequence()
        .expect("rules")
        .iter()
        .filter_map(|r| r["alert"].as_str())
        .collect();
    for expected in [
        "MssqlCdcFactsStopped",
        "MssqlCdcRetentionHeadroomLow",
        "MssqlCdcMetricsMissing",
        "MssqlCdcIngestionLagHigh",
        "MssqlCdcCaptureLagHigh",
        "MssqlCdcFinalizationStale",
        "MssqlCdcWorkerNotRunning",
        "MssqlCdcCaptureNotCurrent",
        "MssqlCdcDataLoss",
    ] {
        assert!(alerts.contains(&expected), "{expected} missing: {alerts:?}");
    }
    promtool_accepts(&rule["spec"]).await;

    let dashboard = documents(&rendered, "grafana-dashboard.yaml").remove(0);
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let json: serde_json::Value = serde_json::from_str(
        dashboard["data"]["mssql-cdc-streams.json"]
            .as_str()
            .expect("the dashboard JSON"),
    )
    .expect("the dashboard parses");
    let panels = json["panels"].as_array().expect("panels");
    let titles: Vec<&str> = panels.iter().filter_map(|p| p["title"].as_str()).collect();
    for title in [
        "Lag",
        "Retention headroom",
        "Rows per second",
        "Batch duration",
        "Snapshot progress",
        "Conditions",
    ] {
        assert!(titles.contains(&title), "{title} missing: {titles:?}");
    }
    // Every panel's query, with Grafana's variables filled in, as a
    // recording rule promtool parses.
    let records: Vec<serde_yaml::Value> = panels
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .enumerate()
        .map(|(i, t)| {
            let expr = t["expr"]
                .as_str()
                .unwrap_or_default()
                .replace("$target", ".*")
                .replace("$namespace", ".*");
            serde_yaml::to_value(
                serde_json::json!({"record": format!("dashboard:query_{i}"), "expr": expr}),
            )
            .expect("rule")
        })
        .collect();
    assert!(records.len() >= 7, "{records:?}");
    let groups = serde_yaml::to_value(serde_json::json!({
        "groups": [{"name": "dashboard", "rules": records}]
    }))
    .expect("groups");
    promtool_accepts(&groups).await;

    let pdb = documents(&rendered, "pdb.yaml");
    assert_eq!(pdb.len(), 1, "two replicas get a PodDisruptionBudget");
    assert_eq!(pdb[0]["spec"]["minAvailable"], 1);
    let args = documents(&rendered, "deployment.yaml")[0]["spec"]["template"]["spec"]["containers"]
        [0]["args"]
        .clone();
    let args: Vec<String> = serde_yaml::from_value(args).expect("args");
    assert!(args.contains(&"--log-level=debug".to_string()), "{args:?}");
    assert!(
        args.contains(&"--worker-log-level=warn".to_string()),
        "{args:?}"
    );
    let monitor = documents(&rendered, "podmonitor.yaml").remove(0);
    assert_eq!(monitor["spec"]["podTargetLabels"][0], "mssql-cdc.io/stream");

    let Some(single) = render("cdc", "ops", "{}").await else {
        return;
    };
    for template in ["pdb.yaml", "prometheusrule.yaml", "grafana-dashboard.yaml"] {
        let text = single[format!("mssql-cdc-operator/templates/{template}")]
            .as_str()
            .unwrap_or_default();
        assert!(
            text.trim().is_empty(),
            "{template} renders by default:\n{text}"
        );
    }
}
