//! Table columns for built-in kinds, computed from the objects the way the
//! real server's printers do, so `kubectl get deployments`/`pods` show the
//! READY/STATUS columns people and scripts expect.

use crate::table::age;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// Computes one cell from an object and "now".
pub type CellFn = fn(&Value, DateTime<Utc>) -> Value;

/// One printed column between Name and Age.
pub struct Column {
    pub name: &'static str,
    /// Table column type: `string` or `integer`.
    pub ty: &'static str,
    /// 0 is always shown; 1 only with `-o wide`.
    pub priority: u8,
    pub cell: CellFn,
}

const fn col(name: &'static str, ty: &'static str, priority: u8, cell: CellFn) -> Column {
    Column {
        name,
        ty,
        priority,
        cell,
    }
}

fn int(o: &Value, p: &str) -> i64 {
    o.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn text(o: &Value, p: &str) -> String {
    o.pointer(p)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn items<'a>(o: &'a Value, p: &str) -> &'a [Value] {
    o.pointer(p)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn joined(o: &Value, list: &str, field: &str) -> Value {
    let v: Vec<String> = items(o, list).iter().map(|c| text(c, field)).collect();
    json!(v.join(","))
}

fn none_if_empty(s: String) -> Value {
    json!(if s.is_empty() { "<none>".into() } else { s })
}

fn selector(o: &Value) -> Value {
    let labels = o
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object);
    let v: Vec<String> = labels
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    none_if_empty(v.join(","))
}

fn pod_ready(o: &Value, _: DateTime<Utc>) -> Value {
    let total = items(o, "/spec/containers").len();
    let ready = items(o, "/status/containerStatuses")
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    json!(format!("{ready}/{total}"))
}

/// Mirrors kubectl's pod status: a waiting/terminated container reason
/// wins over the phase, and a deleting pod is "Terminating".
fn pod_status(o: &Value, _: DateTime<Utc>) -> Value {
    if o.pointer("/metadata/deletionTimestamp").is_some() {
        return json!("Terminating");
    }
    let mut reason = text(o, "/status/reason");
    if reason.is_empty() {
        reason = text(o, "/status/phase");
    }
    for c in items(o, "/status/containerStatuses") {
        let waiting = text(c, "/state/waiting/reason");
        let terminated = text(c, "/state/terminated/reason");
        if !waiting.is_empty() {
            reason = waiting;
        } else if !terminated.is_empty() {
            reason = terminated;
        }
    }
    json!(if reason.is_empty() {
        "Pending".into()
    } else {
        reason
    })
}

fn pod_restarts(o: &Value, now: DateTime<Utc>) -> Value {
    let cs = items(o, "/status/containerStatuses");
    let restarts: i64 = cs.iter().map(|c| int(c, "/restartCount")).sum();
    let last = cs
        .iter()
        .filter_map(|c| c.pointer("/lastState/terminated/finishedAt"))
        .filter_map(Value::as_str)
        .max();
    match last {
        Some(t) if restarts > 0 => json!(format!("{restarts} ({} ago)", age(t, now))),
        _ => json!(restarts.to_string()),
    }
}

fn deploy_ready(o: &Value, _: DateTime<Utc>) -> Value {
    json!(format!(
        "{}/{}",
        int(o, "/status/readyReplicas"),
        int(o, "/spec/replicas")
    ))
}

fn job_status(o: &Value, _: DateTime<Utc>) -> Value {
    let has = |t: &str| {
        items(o, "/status/conditions")
            .iter()
            .any(|c| text(c, "/type") == t && text(c, "/status") == "True")
    };
    json!(if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else {
        "Running"
    })
}

fn service_ports(o: &Value, _: DateTime<Utc>) -> Value {
    let v: Vec<String> = items(o, "/spec/ports")
        .iter()
        .map(|p| {
            let proto = text(p, "/protocol");
            let proto = if proto.is_empty() {
                "TCP".into()
            } else {
                proto
            };
            match int(p, "/nodePort") {
                0 => format!("{}/{proto}", int(p, "/port")),
                n => format!("{}:{n}/{proto}", int(p, "/port")),
            }
        })
        .collect();
    none_if_empty(v.join(","))
}

fn map_len(o: &Value, p: &str) -> usize {
    o.pointer(p)
        .and_then(Value::as_object)
        .map_or(0, serde_json::Map::len)
}

const DEPLOYMENT: &[Column] = &[
    col("Ready", "string", 0, deploy_ready),
    col("Up-to-date", "integer", 0, |o, _| {
        json!(int(o, "/status/updatedReplicas"))
    }),
    col("Available", "integer", 0, |o, _| {
        json!(int(o, "/status/availableReplicas"))
    }),
    col("Containers", "string", 1, |o, _| {
        joined(o, "/spec/template/spec/containers", "/name")
    }),
    col("Images", "string", 1, |o, _| {
        joined(o, "/spec/template/spec/containers", "/image")
    }),
    col("Selector", "string", 1, |o, _| selector(o)),
];

const POD: &[Column] = &[
    col("Ready", "string", 0, pod_ready),
    col("Status", "string", 0, pod_status),
    col("Restarts", "string", 0, pod_restarts),
    col("IP", "string", 1, |o, _| {
        none_if_empty(text(o, "/status/podIP"))
    }),
    col("Node", "string", 1, |o, _| {
        none_if_empty(text(o, "/spec/nodeName"))
    }),
];

const REPLICA_SET: &[Column] = &[
    col("Desired", "integer", 0, |o, _| {
        json!(int(o, "/spec/replicas"))
    }),
    col("Current", "integer", 0, |o, _| {
        json!(int(o, "/status/replicas"))
    }),
    col("Ready", "integer", 0, |o, _| {
        json!(int(o, "/status/readyReplicas"))
    }),
];

const JOB: &[Column] = &[
    col("Status", "string", 0, job_status),
    col("Completions", "string", 0, |o, _| {
        let want = o.pointer("/spec/completions").and_then(Value::as_i64);
        let done = int(o, "/status/succeeded");
        json!(format!("{done}/{}", want.unwrap_or(1)))
    }),
];

const CRON_JOB: &[Column] = &[
    col("Schedule", "string", 0, |o, _| {
        json!(text(o, "/spec/schedule"))
    }),
    col("Suspend", "boolean", 0, |o, _| {
        json!(o.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true))
    }),
    col("Active", "integer", 0, |o, _| {
        json!(items(o, "/status/active").len())
    }),
    col("Last Schedule", "string", 0, |o, now| {
        let t = text(o, "/status/lastScheduleTime");
        json!(if t.is_empty() {
            "<none>".into()
        } else {
            age(&t, now)
        })
    }),
];

const SERVICE: &[Column] = &[
    col("Type", "string", 0, |o, _| json!(text(o, "/spec/type"))),
    col("Cluster-IP", "string", 0, |o, _| {
        none_if_empty(text(o, "/spec/clusterIP"))
    }),
    col("External-IP", "string", 0, |_, _| json!("<none>")),
    col("Port(s)", "string", 0, service_ports),
];

const NAMESPACE: &[Column] = &[col("Status", "string", 0, |o, _| {
    json!(text(o, "/status/phase"))
})];

const CONFIG_MAP: &[Column] = &[col("Data", "integer", 0, |o, _| {
    json!(map_len(o, "/data") + map_len(o, "/binaryData"))
})];

const SECRET: &[Column] = &[
    col("Type", "string", 0, |o, _| json!(text(o, "/type"))),
    col("Data", "integer", 0, |o, _| json!(map_len(o, "/data"))),
];

/// The age of the first of `paths` an Event has, as its columns show it.
fn age_of_first(o: &Value, paths: &[&str], now: DateTime<Utc>) -> Value {
    let t = paths.iter().map(|p| text(o, p)).find(|t| !t.is_empty());
    json!(t.map_or_else(|| "<unknown>".into(), |t| age(&t, now)))
}

fn event_last_seen(o: &Value, now: DateTime<Utc>) -> Value {
    let paths = [
        "/series/lastObservedTime",
        "/lastTimestamp",
        "/eventTime",
        "/metadata/creationTimestamp",
    ];
    age_of_first(o, &paths, now)
}

fn event_first_seen(o: &Value, now: DateTime<Utc>) -> Value {
    let paths = [
        "/firstTimestamp",
        "/eventTime",
        "/metadata/creationTimestamp",
    ];
    age_of_first(o, &paths, now)
}

/// kube-apiserver's Event columns, Name last (a wide column), not first.
const EVENT: &[Column] = &[
    col("Last Seen", "string", 0, event_last_seen),
    col("Type", "string", 0, |o, _| json!(text(o, "/type"))),
    col("Reason", "string", 0, |o, _| json!(text(o, "/reason"))),
    col("Object", "string", 0, |o, _| {
        json!(format!(
            "{}/{}",
            text(o, "/involvedObject/kind").to_lowercase(),
            text(o, "/involvedObject/name")
        ))
    }),
    col("Subobject", "string", 1, |o, _| {
        json!(text(o, "/involvedObject/fieldPath"))
    }),
    col("Source", "string", 1, |o, _| {
        let component = text(o, "/source/component");
        json!(if component.is_empty() {
            text(o, "/reportingComponent")
        } else {
            component
        })
    }),
    col("Message", "string", 0, |o, _| json!(text(o, "/message"))),
    col("First Seen", "string", 1, event_first_seen),
    col("Count", "integer", 1, |o, _| json!(int(o, "/count"))),
    col("Name", "string", 1, |o, _| json!(text(o, "/metadata/name"))),
];

/// The columns of a built-in kind whose table does not start with Name
/// and end with Age (an Event's), all of them.
pub fn builtin_table(group: &str, kind: &str) -> Option<&'static [Column]> {
    match (group, kind) {
        ("", "Event") => Some(EVENT),
        _ => None,
    }
}

/// The columns the real server prints for a built-in kind, if it has more
/// than Name and Age.
pub fn builtin_columns(group: &str, kind: &str) -> Option<&'static [Column]> {
    Some(match (group, kind) {
        ("apps", "Deployment") => DEPLOYMENT,
        ("apps", "ReplicaSet") => REPLICA_SET,
        ("", "Pod") => POD,
        ("", "Service") => SERVICE,
        ("", "Namespace") => NAMESPACE,
        ("", "ConfigMap") => CONFIG_MAP,
        ("", "Secret") => SECRET,
        ("batch", "Job") => JOB,
        ("batch", "CronJob") => CRON_JOB,
        _ => return None,
    })
}
