use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, PersistentVolumeClaimVolumeSource, Volume};

use super::*;

fn claim(name: &str) -> Volume {
    Volume {
        name: name.into(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: "lake".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn one_source_each_passes() {
    assert_eq!(
        check_one_source_each(&[claim("lake"), claim("ckpt")]),
        Ok(())
    );
    assert_eq!(check_one_source_each(&[]), Ok(()));
}

#[test]
fn a_name_only_volume_is_refused_by_its_path() {
    // What `{name: ckpt, persistentVolumeClam: {claimName: x}}` reads as.
    let read: Volume =
        serde_json::from_str(r#"{"name":"ckpt","persistentVolumeClam":{"claimName":"x"}}"#)
            .expect("serde drops the unknown key");
    let err = check_one_source_each(&[claim("lake"), read]).expect_err("refused");
    let text = err.to_string();
    assert!(text.starts_with("spec.worker.volumes[1]: "), "{text}");
    assert!(text.contains("\"ckpt\" has no source"), "{text}");
    assert_eq!(err.reason(), "InvalidSpec");
}

#[test]
fn two_sources_are_refused_and_named() {
    let mut both = claim("both");
    both.empty_dir = Some(EmptyDirVolumeSource::default());
    let text = check_one_source_each(&[both])
        .expect_err("refused")
        .to_string();
    assert!(
        text.contains("2 sources (emptyDir, persistentVolumeClaim)"),
        "{text}"
    );
}

#[test]
fn the_operator_builds_no_worker_for_a_name_only_volume() {
    use crate::operator::children::{WorkerDefaults, desired_workload};
    use crate::operator::test_fixtures::stream;

    let stream = stream(serde_json::json!({"spec": {"worker": {
        "volumes": [{"name": "ckpt", "persistentVolumeClam": {"claimName": "x"}}],
        "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}]
    }}}));
    let err =
        desired_workload(&stream, &WorkerDefaults::new("mssql-cdc:test")).expect_err("no worker");
    assert!(
        err.to_string()
            .starts_with("spec.worker.volumes[0]: volume \"ckpt\" has no source"),
        "{err}"
    );
}
