use super::*;
use crate::operator::test_fixtures::stream;
use serde_json::json;

/// A stream naming a Secret on every path the worker pod can read one.
fn naming_every_secret() -> CdcStream {
    stream(json!({"spec": {
        "source": {"monitoring": {"credentials": {"username": "mon",
            "passwordFrom": {"secretKeyRef": {"name": "mon-sql", "key": "password"}}}}},
        "worker": {
            "env": [
                {"name": "PLAIN", "value": "x"},
                {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "lake-key", "key": "k"}}},
                {"name": "CM", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}
            ],
            "envFrom": [{"configMapRef": {"name": "cm"}}, {"secretRef": {"name": "lake-env"}}],
            "imagePullSecrets": [{"name": "regcred"}],
            "volumes": [
                {"name": "ca", "secret": {"secretName": "ca-bundle"}},
                {"name": "p", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token"}},
                    {"secret": {"name": "projected-one"}}
                ]}},
                {"name": "vault", "csi": {"driver": "secrets-store.csi.k8s.io",
                    "nodePublishSecretRef": {"name": "csi-creds"}}},
                {"name": "share", "azureFile": {"secretName": "azure-share", "shareName": "s"}},
                {"name": "lake", "persistentVolumeClaim": {"claimName": "lake"}}
            ]
        }
    }}))
}

#[test]
fn every_path_to_a_secret_is_found_with_its_field() {
    let refs: Vec<(String, String)> = secret_refs(&naming_every_secret())
        .into_iter()
        .map(|r| (r.field, r.name))
        .collect();
    let expected = [
        (
            "spec.source.credentials.passwordFrom.secretKeyRef.name",
            "shop-sql",
        ),
        (
            "spec.source.monitoring.credentials.passwordFrom.secretKeyRef.name",
            "mon-sql",
        ),
        ("spec.worker.env[1].valueFrom.secretKeyRef.name", "lake-key"),
        ("spec.worker.envFrom[1].secretRef.name", "lake-env"),
        ("spec.worker.imagePullSecrets[0].name", "regcred"),
        ("spec.worker.volumes[0].secret.secretName", "ca-bundle"),
        (
            "spec.worker.volumes[1].projected.sources[1].secret.name",
            "projected-one",
        ),
        (
            "spec.worker.volumes[2].csi.nodePublishSecretRef.name",
            "csi-creds",
        ),
        ("spec.worker.volumes[3].azureFile.secretName", "azure-share"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(f, n)| (f.to_string(), n.to_string()))
        .collect();
    assert_eq!(refs, expected);
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn a_secret_passes_only_with_the_label_and_a_missing_one_never() {
    let label = SecretLabel::default();
    let refs = secret_refs(&naming_every_secret());
    let mut found: FoundSecrets = refs
        .iter()
        .map(|r| {
            (
                r.name.clone(),
                Some(labels(&[("mssql-cdc.io/allow", "true")])),
            )
        })
        .collect();
    assert_eq!(admit_secrets(&label, &refs, &found), Ok(()));

    found.insert(
        "lake-key".into(),
        Some(labels(&[("mssql-cdc.io/allow", "false"), ("team", "a")])),
    );
    let refused = admit_secrets(&label, &refs, &found).unwrap_err();
    assert_eq!(refused.reason(), "SecretNotLabelled");
    let message = refused.to_string();
    for part in [
        "spec.worker.env[1].valueFrom.secretKeyRef.name",
        "\"lake-key\"",
        "mssql-cdc.io/allow=true",
        "kubectl label secret lake-key mssql-cdc.io/allow=true",
    ] {
        assert!(message.contains(part), "{part:?} missing from {message}");
    }

    found.insert("lake-key".into(), None);
    let refused = admit_secrets(&label, &refs, &found).unwrap_err();
    assert_eq!(refused.reason(), "SecretNotFound");
    assert!(refused.to_string().contains("\"lake-key\" does not exist"));
}

#[test]
fn a_label_is_key_value_or_a_key_with_any_value() {
    let any: SecretLabel = "team".parse().expect("a key");
    assert!(any.carried_by(&labels(&[("team", "billing")])));
    assert!(!any.carried_by(&labels(&[("other", "x")])));
    let exact: SecretLabel = "team=billing".parse().expect("KEY=VALUE");
    assert!(exact.carried_by(&labels(&[("team", "billing")])));
    assert!(!exact.carried_by(&labels(&[("team", "sales")])));
    assert_eq!(exact.to_string(), "team=billing");
    assert_eq!(SecretLabel::default().to_string(), DEFAULT_SECRET_LABEL);
    assert_eq!(DEFAULT_SECRET_LABEL.parse(), Ok(SecretLabel::default()));
    for bad in ["", "=true", "a,b=c", " "] {
        assert!(bad.parse::<SecretLabel>().is_err(), "{bad:?}");
    }
}
