//! The limit on an object's annotations, as kube-apiserver's
//! `ValidateAnnotationsSize` enforces it: keys and values together may not
//! exceed 256 KiB. This is what makes client-side `kubectl apply` fail on
//! a large object, whose JSON it stores in
//! `kubectl.kubernetes.io/last-applied-configuration`.

use crate::error::Cause;
use serde_json::Value;

/// `TotalAnnotationSizeLimitB` of k8s.io/apimachinery.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// The bytes of an object's annotations: every key and value.
pub fn total_size(obj: &Value) -> usize {
    obj.pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
                .sum()
        })
        .unwrap_or(0)
}

/// The `metadata.annotations: Too long` cause, when the annotations pass
/// the limit (`field.TooLong`, which shows no value).
pub fn validate(obj: &Value) -> Option<Cause> {
    (total_size(obj) > TOTAL_ANNOTATION_SIZE_LIMIT).then(|| {
        Cause::new(
            "FieldValueTooLong",
            "metadata.annotations",
            format!("Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with_annotation(len: usize) -> Value {
        json!({"metadata": {"annotations": {"k": "x".repeat(len)}}})
    }

    #[test]
    fn keys_and_values_count_up_to_the_limit() {
        // "k" is one byte of the budget.
        assert_eq!(total_size(&with_annotation(10)), 11);
        assert!(validate(&with_annotation(TOTAL_ANNOTATION_SIZE_LIMIT - 1)).is_none());
        let cause = validate(&with_annotation(TOTAL_ANNOTATION_SIZE_LIMIT)).expect("too long");
        assert_eq!(cause.field, "metadata.annotations");
        assert_eq!(cause.message, "Too long: may not be more than 262144 bytes");
        assert!(validate(&json!({"metadata": {}})).is_none());
    }
}
