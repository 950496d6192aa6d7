//! Events are one resource seen through two APIs, as on kube-apiserver:
//! `events.k8s.io/v1` Events are stored as core/v1 Events, and each API
//! reads and writes them in its own shape. The conversion is the API
//! server's (`pkg/apis/events/v1/conversion.go`): `note` is `message`,
//! `regarding` is `involvedObject`, `deprecatedSource` is `source`,
//! `deprecatedFirstTimestamp`/`deprecatedLastTimestamp`/`deprecatedCount`
//! are `firstTimestamp`/`lastTimestamp`/`count`, and `reportingController`
//! is core's `reportingComponent`; `reportingInstance`, `eventTime`,
//! `series`, `action`, `related`, `reason` and `type` keep their names.

use crate::error::{ApiError, ApiResult};
use crate::selectors::FieldSelector;
use crate::state::{State, Target};
use crate::store::Gr;
use serde_json::{Map, Value};

const GROUP: &str = "events.k8s.io";

/// (events.k8s.io/v1 field, core/v1 field) of the renamed fields.
const RENAMED: &[(&str, &str)] = &[
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

/// (events.k8s.io/v1 field selector, core/v1 field selector), kube-apiserver's
/// field label conversion for the renamed fields.
const SELECTABLE: &[(&str, &str)] = &[
    ("regarding.kind", "involvedObject.kind"),
    ("regarding.namespace", "involvedObject.namespace"),
    ("regarding.name", "involvedObject.name"),
    ("regarding.uid", "involvedObject.uid"),
    ("regarding.apiVersion", "involvedObject.apiVersion"),
    (
        "regarding.resourceVersion",
        "involvedObject.resourceVersion",
    ),
    ("regarding.fieldPath", "involvedObject.fieldPath"),
    ("reportingController", "reportingComponent"),
];

/// Whether `group`/`plural` is events.k8s.io's view of core Events.
pub fn is_events_api(group: &str, plural: &str) -> bool {
    group == GROUP && plural == "events"
}

/// Where objects of `group`/`plural` are stored.
pub fn storage(group: &str, plural: &str) -> Gr {
    if is_events_api(group, plural) {
        Gr::new("", "events")
    } else {
        Gr::new(group, plural)
    }
}

fn rename(obj: Value, from_events: bool, api_version: &str) -> Value {
    let Value::Object(m) = obj else { return obj };
    let mut out = Map::new();
    for (k, v) in m {
        let renamed = RENAMED.iter().find_map(|(e, c)| {
            let (from, to) = if from_events { (e, c) } else { (c, e) };
            (k == *from).then_some(*to)
        });
        out.insert(renamed.map_or(k, String::from), v);
    }
    out.insert("apiVersion".into(), Value::from(api_version));
    Value::Object(out)
}

/// An events.k8s.io/v1 Event as the core/v1 Event that is stored.
pub fn to_core(obj: Value) -> Value {
    rename(obj, true, "v1")
}

/// A stored core/v1 Event as events.k8s.io/v1 shows it.
pub fn from_core(obj: Value) -> Value {
    rename(obj, false, "events.k8s.io/v1")
}

/// A field selector's field of events.k8s.io/v1 as core/v1 names it.
pub fn core_field(field: &str) -> &str {
    SELECTABLE
        .iter()
        .find(|(e, _)| *e == field)
        .map_or(field, |(_, c)| c)
}

/// A field selector of a request to `t` as it applies to stored objects.
pub fn stored_fields(t: &Target, s: &FieldSelector) -> FieldSelector {
    if is_events_api(&t.rt.group, &t.rt.plural) {
        s.renamed(core_field)
    } else {
        s.clone()
    }
}

/// The core/v1 Event target of an events.k8s.io/v1 request.
pub fn core_target(st: &State, t: &Target) -> ApiResult<Target> {
    let rt = st
        .registry
        .by_kind("", "Event")
        .ok_or_else(|| ApiError::BadRequest("core/v1 Events are not served".into()))?;
    Ok(Target {
        rt,
        version: "v1".into(),
        ..t.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_api_sees_the_others_fields_under_its_own_names() {
        let events = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": { "name": "e", "namespace": "ns" },
            "regarding": { "kind": "Pod", "name": "p" }, "note": "hello",
            "reason": "Started", "type": "Normal", "action": "Starting",
            "reportingController": "ctl", "reportingInstance": "ctl-1",
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "series": { "count": 3, "lastObservedTime": "2026-01-01T00:01:00.000000Z" },
            "deprecatedSource": { "component": "old" },
            "deprecatedFirstTimestamp": "2026-01-01T00:00:00Z",
            "deprecatedLastTimestamp": "2026-01-01T00:01:00Z", "deprecatedCount": 3,
        });
        let core = to_core(events.clone());
        assert_eq!(
            core,
            json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": { "name": "e", "namespace": "ns" },
                "involvedObject": { "kind": "Pod", "name": "p" }, "message": "hello",
                "reason": "Started", "type": "Normal", "action": "Starting",
                "reportingComponent": "ctl", "reportingInstance": "ctl-1",
                "eventTime": "2026-01-01T00:00:00.000000Z",
                "series": { "count": 3, "lastObservedTime": "2026-01-01T00:01:00.000000Z" },
                "source": { "component": "old" },
                "firstTimestamp": "2026-01-01T00:00:00Z",
                "lastTimestamp": "2026-01-01T00:01:00Z", "count": 3,
            })
        );
        assert_eq!(from_core(core), events);
    }

    #[test]
    fn field_selectors_name_the_core_fields() {
        assert_eq!(core_field("regarding.name"), "involvedObject.name");
        assert_eq!(core_field("reportingController"), "reportingComponent");
        assert_eq!(core_field("reason"), "reason");
    }

    #[test]
    fn both_apis_store_in_one_place() {
        assert_eq!(storage("events.k8s.io", "events"), storage("", "events"));
        assert_ne!(storage("apps", "deployments"), storage("", "events"));
    }
}
