//! A CdcStream as the API server returns it, for the operator's unit tests.

use crate::spec::{CdcSource, CdcStream};

const STREAM: &str = r#"
apiVersion: mssql-cdc.io/v1alpha1
kind: CdcStream
metadata: {name: orders, namespace: shop, uid: 7f3c-uid, generation: 1}
spec:
  appId: orders-v1
  source:
    host: sql
    database: shop
    table: dbo.orders
    credentials:
      username: reader
      passwordFrom: {secretKeyRef: {name: shop-sql, key: password}}
  target: {name: bronze.orders, location: /lake/orders}
  checkpoint: /lake/_checkpoints/orders
  facts: {name: ops.facts, location: /lake/facts}
"#;

const SOURCE: &str = r#"
apiVersion: mssql-cdc.io/v1alpha1
kind: CdcSource
metadata: {name: shop, namespace: shop, uid: 5a1e-uid, generation: 1}
spec:
  connection:
    host: sql
    database: shop
    credentials:
      username: reader
      passwordFrom: {secretKeyRef: {name: shop-sql, key: password}}
  defaults:
    facts: {name: ops.facts, location: /lake/facts}
"#;

/// A CdcSource fixture with `patch` applied, as [`stream`].
pub fn source(patch: serde_json::Value) -> CdcSource {
    let mut value: serde_json::Value = serde_yaml::from_str(SOURCE).expect("fixture");
    merge(&mut value, patch);
    serde_json::from_value(value).expect("a CdcSource")
}

/// A stream of the fixture source `shop`: the table's fields only.
pub fn source_stream(name: &str) -> CdcStream {
    stream(serde_json::json!({
        "metadata": {"name": name, "uid": format!("{name}-uid")},
        "spec": {
            "sourceRef": {"name": "shop"},
            "appId": format!("{name}-v1"),
            "source": {"host": null, "database": null, "credentials": null, "table": format!("dbo.{name}")},
            "target": {"name": format!("bronze.{name}"), "location": format!("/lake/{name}")},
            "checkpoint": format!("/lake/_checkpoints/{name}"),
            "facts": null,
        }
    }))
}

/// The fixture with `patch` (a JSON merge patch of the whole object) applied.
pub fn stream(patch: serde_json::Value) -> CdcStream {
    let mut value: serde_json::Value = serde_yaml::from_str(STREAM).expect("fixture");
    merge(&mut value, patch);
    serde_json::from_value(value).expect("a CdcStream")
}

fn merge(target: &mut serde_json::Value, patch: serde_json::Value) {
    match (target, patch) {
        (serde_json::Value::Object(t), serde_json::Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(&k);
                } else {
                    merge(t.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
        }
        (t, p) => *t = p,
    }
}
