//! Who a container runs as and what its volumes let it do, as on a
//! kubelet: `runAsUser`/`runAsGroup` (the container's over the pod's),
//! `fsGroup` and `supplementalGroups` as supplementary groups, a
//! provisioned claim that is root's with mode 0755 until an `fsGroup`
//! gives it to the pod's group, emptyDirs open to all, and projected
//! files with their `defaultMode` and the `fsGroup`'s group.

use crate::common::Env;
use crate::pods::{claim, create, finished, pod, start};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;

/// What the container printed to its termination log (exit code 0 asserted).
async fn report(env: &Env, name: &str, script: &str, spec: Value, container: Value) -> String {
    let script = format!("( {script} ) > /dev/termination-log 2>&1");
    let pods = create(env, pod(name, &script, spec, container)).await;
    let t = finished(&pods, name).await;
    t["message"].as_str().unwrap_or_default().trim().to_string()
}

fn groups(s: &str) -> BTreeSet<u32> {
    s.split_whitespace()
        .filter_map(|g| g.parse().ok())
        .collect()
}

#[tokio::test]
async fn containers_run_as_their_effective_user_and_groups() {
    let Some(env) = start().await else { return };
    let root = report(&env, "default", "id -u; id -g; id -G", json!({}), json!({})).await;
    assert_eq!(root.split_whitespace().collect::<Vec<_>>(), ["0", "0", "0"]);

    let spec = json!({ "securityContext": {
        "runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000, "supplementalGroups": [4000] } });
    let container = json!({ "securityContext": { "runAsUser": 65532 } });
    let out = report(&env, "custom", "id -u; id -g; id -G", spec, container).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[..2], ["65532", "3000"], "{out}");
    assert_eq!(
        groups(lines[2]),
        BTreeSet::from([2000, 3000, 4000]),
        "{out}"
    );
}

fn claim_pod_spec(claim: &str, security: Value) -> Value {
    json!({
        "securityContext": security,
        "volumes": [{ "name": "data", "persistentVolumeClaim": { "claimName": claim } }],
    })
}

fn data_mount() -> Value {
    json!({ "volumeMounts": [{ "name": "data", "mountPath": "/data" }] })
}

#[tokio::test]
async fn a_pod_as_65532_writes_a_fresh_claim_only_through_its_fs_group() {
    let Some(env) = start().await else { return };
    claim(&env, "lake", None).await;
    let write = "touch /data/x && echo wrote; stat -c '%a %u %g' /data";

    let refused = report(
        &env,
        "no-fsgroup",
        write,
        claim_pod_spec("lake", json!({ "runAsUser": 65532, "runAsGroup": 65532 })),
        data_mount(),
    )
    .await;
    assert!(refused.contains("Permission denied"), "{refused}");
    assert!(!refused.contains("wrote"), "{refused}");
    assert!(
        refused.ends_with("755 0 0"),
        "a fresh volume is root's: {refused}"
    );

    let ok = report(
        &env,
        "fsgroup",
        write,
        claim_pod_spec(
            "lake",
            json!({ "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
                "fsGroupChangePolicy": "OnRootMismatch" }),
        ),
        data_mount(),
    )
    .await;
    assert_eq!(
        ok.lines().collect::<Vec<_>>(),
        ["wrote", "2775 0 65532"],
        "the root is the fsGroup's, group rw, setgid"
    );
    let later = report(
        &env,
        "reader",
        "stat -c '%u %g' /data/x",
        claim_pod_spec("lake", json!({ "runAsUser": 0 })),
        data_mount(),
    )
    .await;
    assert_eq!(
        later, "65532 65532",
        "what the pod made keeps its owner and the group"
    );
}

#[tokio::test]
async fn empty_dirs_are_open_to_all_and_projected_files_get_the_fs_group() {
    let Some(env) = start().await else { return };
    let secret = json!({ "metadata": { "name": "sec" }, "stringData": { "password": "s3cret" } });
    Api::<Secret>::namespaced(env.client().await, "default")
        .create(
            &PostParams::default(),
            &serde_json::from_value(secret).expect("secret"),
        )
        .await
        .expect("secret");
    let spec = |security: Value| {
        json!({ "securityContext": security, "volumes": [
            { "name": "scratch", "emptyDir": {} },
            { "name": "sec", "secret": { "secretName": "sec", "defaultMode": 0o400 } },
        ]})
    };
    let container = json!({ "volumeMounts": [
        { "name": "scratch", "mountPath": "/scratch" }, { "name": "sec", "mountPath": "/sec" }] });
    let script = "stat -c '%a' /scratch; touch /scratch/f && echo scratch-ok; \
                  stat -L -c '%a %g' /sec/password; cat /sec/password";

    let without = report(
        &env,
        "plain",
        script,
        spec(json!({ "runAsUser": 1000 })),
        container.clone(),
    )
    .await;
    let lines: Vec<&str> = without.lines().collect();
    assert_eq!(lines[..3], ["777", "scratch-ok", "400 0"], "{without}");
    assert!(lines[3].contains("Permission denied"), "{without}");

    let with = report(
        &env,
        "grouped",
        script,
        spec(json!({ "runAsUser": 1000, "fsGroup": 2000 })),
        container,
    )
    .await;
    assert_eq!(
        with.lines().collect::<Vec<_>>(),
        ["2777", "scratch-ok", "440 2000", "s3cret"],
        "{with}"
    );
}

#[tokio::test]
async fn the_provisioner_makes_each_volume_root_owned_0755() {
    let Some(env) = start().await else { return };
    claim(&env, "fresh", None).await;
    let pv = crate::common::eventually("the claim to bind", || async {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client().await, "default");
        claims.get("fresh").await.ok()?.spec?.volume_name
    })
    .await;
    let pvs: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(env.client().await);
    let path = pvs
        .get(&pv)
        .await
        .expect("pv")
        .spec
        .and_then(|s| s.local)
        .expect("a local volume, as a disk is")
        .path;
    let m = std::fs::metadata(&path).expect("the volume's directory");
    assert_eq!((m.mode() & 0o7777, m.uid(), m.gid()), (0o755, 0, 0));
}
