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
    promtool(groups, None).await;
}

/// `promtool test rules` on `tests` (a test file without `rule_files`)
/// against the rule file of `groups`.
async fn promtool_tests_pass(groups: &serde_yaml::Value, tests: &str) {
    promtool(groups, Some(tests)).await;
}

/// Writes `groups` as `rules.yaml` and runs `promtool check rules` on it,
/// or with `tests` `promtool test rules` on those tests of it.
async fn promtool(groups: &serde_yaml::Value, tests: Option<&str>) {
    let Some(promtool) = PROMTOOL.find() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, serde_yaml::to_string(groups).expect("yaml")).expect("write");
    let (command, file) = match tests {
        None => ("check", rules),
        Some(tests) => {
            let file = dir.path().join("tests.yaml");
            std::fs::write(&file, format!("rule_files: [rules.yaml]\n{tests}")).expect("write");
            ("test", file)
        }
    };
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(promtool)
            .args([command, "rules"])
            .arg(&file)
            .current_dir(dir.path())
            .output(),
    )
    .await
    .expect("promtool ends")
    .expect("promtool runs");
    assert!(
        out.status.success(),
        "promtool {command} rules:\n{}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        serde_yaml::to_string(groups).unwrap_or_default()
    );
}

/// The GitHub anchors of docs/runbooks.md's headings.
fn runbook_anchors() -> Vec<String> {
    let text = std::fs::read_to_string(crate::support::kube::repo_file("docs/runbooks.md"))
        .expect("docs/runbooks.md");
    text.lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|heading| {
            heading
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-')
                .collect::<String>()
                .replace(' ', "-")
        })
        .collect()
}

/// `promtool test rules` cases of the Ready and Live alerts: a stream
/// False for ten minutes fires, one False for nine does not, and the
/// alert names the stream's own namespace (the series' label, kept by
/// `honorLabels`).
const NOT_READY_TESTS: &str = r#"
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'mssql_cdc_operator_stream_condition{namespace="shop", name="orders", type="Ready", status="False"}'
        values: '1x15'
      - series: 'mssql_cdc_operator_stream_condition{namespace="shop", name="items", type="Ready", status="False"}'
        values: '0x5 1x9'
      - series: 'mssql_cdc_operator_stream_condition{namespace="shop", name="orders", type="Live", status="False"}'
        values: '1x15'
    alert_rule_test:
      - eval_time: 9m
        alertname: MssqlCdcStreamNotReady
        exp_alerts: []
      - eval_time: 14m
        alertname: MssqlCdcStreamNotReady
        exp_alerts:
          - exp_labels: {severity: critical, namespace: shop, name: orders, type: Ready, status: "False"}
            exp_annotations:
              summary: "shop/orders: the stream is not Ready"
              description: "kubectl get cdcs orders -n shop shows the reason and its fix."
              runbook_url: "https://github.com/mssql-cdc/mssql-cdc/blob/main/docs/runbooks.md#ready-is-false"
      - eval_time: 11m
        alertname: MssqlCdcStreamNotLive
        exp_alerts:
          - exp_labels: {severity: critical, namespace: shop, name: orders, type: Live, status: "False"}
            exp_annotations:
              summary: "shop/orders: the stream wrote no batch for a while"
              description: "The worker runs but its batches stopped: see the Live condition's reason."
              runbook_url: "https://github.com/mssql-cdc/mssql-cdc/blob/main/docs/runbooks.md#live-is-false-factsstopped"
"#;

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
        "MssqlCdcStreamNotReady",
        "MssqlCdcStreamNotLive",
    ] {
        assert!(alerts.contains(&expected), "{expected} missing: {alerts:?}");
    }
    for rule in rule["spec"]["groups"][0]["rules"]
        .as_sequence()
        .expect("rules")
    {
        let alert = rule["alert"].as_str().unwrap_or_default();
        if alert.starts_with("MssqlCdcStreamNot") {
            let url = rule["annotations"]["runbook_url"]
                .as_str()
                .unwrap_or_default();
            assert!(
                url.starts_with(
                    "https://github.com/mssql-cdc/mssql-cdc/blob/main/docs/runbooks.md#"
                ),
                "{alert}: {url}"
            );
            let anchor = url.rsplit('#').next().unwrap_or_default();
            assert!(
                runbook_anchors().contains(&anchor.to_string()),
                "{alert}: no #{anchor}"
            );
        }
    }
    promtool_accepts(&rule["spec"]).await;
    promtool_tests_pass(&rule["spec"], NOT_READY_TESTS).await;

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
    assert_eq!(
        monitor["spec"]["podMetricsEndpoints"][0]["honorLabels"],
        true
    );
    let Some(scraped) = render(
        "cdc",
        "ops",
        r#"{"metrics": {"serviceMonitor": {"enabled": true}}}"#,
    )
    .await
    else {
        return;
    };
    let service_monitor = documents(&scraped, "servicemonitor.yaml").remove(0);
    assert_eq!(
        service_monitor["spec"]["endpoints"][0]["honorLabels"], true,
        "the operator's series keep the stream's namespace label"
    );

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
