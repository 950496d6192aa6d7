//! A CdcStream as the API server returns it, for the operator's unit tests.

use crate::spec::CdcStream;

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
