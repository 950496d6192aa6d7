//! A pod's volumes on the host, before its containers mount them:
//! `emptyDir` (a directory of the pod, deleted with it), `persistentVolumeClaim`
//! (the bound PersistentVolume's directory, which outlives pods), `hostPath`,
//! and the projected kinds (`secret`, `configMap`, `downwardAPI`, `projected`
//! with the ServiceAccount token) written as files the way the kubelet's
//! atomic writer does: a timestamped directory, `..data` pointing at it,
//! and each top-level entry a symlink through `..data`.

use super::meta;
use super::ownership::{self, ChangePolicy};
use crate::auth::tokens::{self, TokenSpec};
use crate::state::State;
use crate::store::Gr;
use base64::Engine;
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A volume ready to be mounted.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub name: String,
    pub host_path: PathBuf,
    /// Mounted read-only whatever the volumeMount says (projected kinds,
    /// `readOnly` claims).
    pub read_only: bool,
    /// Whether `subPath` directories may be created in it.
    pub writable_source: bool,
}

/// The files of a projected volume: relative path → (content, mode).
type Files = BTreeMap<String, (Vec<u8>, u32)>;

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

fn mode(v: &Value, key: &str) -> Option<u32> {
    v.get(key).and_then(Value::as_u64).map(|m| m as u32)
}

/// The host directory of the pod's state.
pub fn pod_dir(data_dir: &Path, pod: &Value) -> PathBuf {
    data_dir.join("pods").join(meta(pod, "uid"))
}

/// Prepares every volume of `pod`; `Err` is the FailedMount message.
pub fn prepare(st: &State, data_dir: &Path, pod: &Value) -> Result<Vec<Prepared>, String> {
    let dir = pod_dir(data_dir, pod).join("volumes");
    let fs_group = ownership::fs_group(pod);
    // The pod's fsGroupChangePolicy holds for claims; emptyDirs and
    // projected volumes are changed at every set-up.
    let owned = |path: &Path, claim: bool, read_only: bool| match fs_group {
        Some((group, policy)) => {
            let policy = if claim { policy } else { ChangePolicy::Always };
            ownership::set(path, group, policy, read_only)
        }
        None => Ok(()),
    };
    let mut out = Vec::new();
    for v in pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = s(v, "/name").to_string();
        let host = dir.join(&name);
        let fail = |e: String| format!("MountVolume.SetUp failed for volume \"{name}\" : {e}");
        let prepared = if v.get("emptyDir").is_some() {
            make_dir(&host, 0o777).map_err(fail)?;
            owned(&host, false, false).map_err(fail)?;
            Prepared {
                name: name.clone(),
                host_path: host,
                read_only: false,
                writable_source: true,
            }
        } else if let Some(claim) = v.get("persistentVolumeClaim") {
            let (path, plugin) =
                claim_path(st, meta(pod, "namespace"), s(claim, "/claimName")).map_err(fail)?;
            let ro = claim
                .get("readOnly")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            // As the kubelet's volume plugins do: a `local` volume's root
            // goes to the fsGroup, a `hostPath` one is left as it is.
            if plugin == VolumePlugin::Local {
                owned(&path, true, ro).map_err(fail)?;
            }
            Prepared {
                name: name.clone(),
                host_path: path,
                read_only: ro,
                writable_source: true,
            }
        } else if let Some(hp) = v.get("hostPath") {
            let path = PathBuf::from(s(hp, "/path"));
            if s(hp, "/type") == "DirectoryOrCreate" {
                make_dir(&path, 0o755).map_err(fail)?;
            } else if !path.exists() {
                return Err(fail(format!("hostPath {} does not exist", path.display())));
            }
            Prepared {
                name: name.clone(),
                host_path: path,
                read_only: false,
                writable_source: true,
            }
        } else if v.get("secret").is_some()
            || v.get("configMap").is_some()
            || v.get("downwardAPI").is_some()
            || v.get("projected").is_some()
        {
            let files = projected_files(st, pod, v).map_err(fail)?;
            write_atomic(&host, &files, fs_group.map(|(group, _)| group))
                .map_err(|e| fail(e.to_string()))?;
            owned(&host, false, true).map_err(fail)?;
            Prepared {
                name: name.clone(),
                host_path: host,
                read_only: true,
                writable_source: false,
            }
        } else {
            return Err(fail(
                "this volume type is not supported by the harness kubelet".into(),
            ));
        };
        out.push(prepared);
    }
    Ok(out)
}

/// Rewrites the projected volumes whose content changed (Secrets and
/// ConfigMaps updated while the pod runs), as the kubelet's sync does.
pub fn refresh(st: &State, data_dir: &Path, pod: &Value) {
    let dir = pod_dir(data_dir, pod).join("volumes");
    for v in pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let projected = v.get("secret").is_some()
            || v.get("configMap").is_some()
            || v.get("downwardAPI").is_some();
        // Token volumes keep their token: a new one per sync would only churn.
        if !projected {
            continue;
        }
        if let Ok(files) = projected_files(st, pod, v) {
            let host = dir.join(s(v, "/name"));
            let group = ownership::fs_group(pod).map(|(group, _)| group);
            if write_atomic(&host, &files, group).is_ok()
                && let Some(group) = group
            {
                let _ = ownership::set(&host, group, ChangePolicy::Always, true);
            }
        }
    }
}

fn make_dir(path: &Path, mode: u32) -> Result<(), String> {
    std::fs::create_dir_all(path).map_err(|e| format!("mkdir {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|e| e.to_string())
}

/// Which kind of PersistentVolume a claim is bound to: it decides whether
/// the kubelet applies the pod's `fsGroup` to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VolumePlugin {
    /// `spec.local`: a disk the kubelet manages the ownership of.
    Local,
    /// `spec.hostPath`: a node directory whose ownership the kubelet never
    /// changes (as with NFS and other shares that ignore `fsGroup`).
    HostPath,
}

/// The directory of the PersistentVolume bound to claim `name`, and its
/// plugin.
fn claim_path(st: &State, ns: &str, name: &str) -> Result<(PathBuf, VolumePlugin), String> {
    let pvc = st
        .store
        .get(&Gr::new("", "persistentvolumeclaims"), ns, name)
        .ok_or_else(|| format!("persistentvolumeclaim \"{name}\" not found"))?;
    let pv_name = s(&pvc, "/spec/volumeName");
    let pv = st
        .store
        .get(&Gr::new("", "persistentvolumes"), "", pv_name)
        .filter(|_| s(&pvc, "/status/phase") == "Bound")
        .ok_or_else(|| format!("persistentvolumeclaim \"{name}\" is not bound"))?;
    let (path, plugin) = [
        (s(&pv, "/spec/hostPath/path"), VolumePlugin::HostPath),
        (s(&pv, "/spec/local/path"), VolumePlugin::Local),
    ]
    .into_iter()
    .find(|(p, _)| !p.is_empty())
    .ok_or_else(|| format!("persistentvolume \"{pv_name}\" has no hostPath or local path"))?;
    // The volume's root is as its filesystem has it (the provisioner makes
    // it root's, 0755, as a fresh disk is): the kubelet only changes it
    // for an fsGroup, and only on a `local` volume.
    if !Path::new(path).is_dir() {
        return Err(format!(
            "persistentvolume \"{pv_name}\": {path} is not a directory"
        ));
    }
    Ok((PathBuf::from(path), plugin))
}

/// Makes the missing directories of `sub` in volume `root`, each with the
/// root's mode, as the kubelet makes a `subPath` (its group follows the
/// root's setgid).
pub fn make_sub_path(root: &Path, sub: &str) -> std::io::Result<()> {
    let mode = std::fs::metadata(root)?.permissions().mode() & 0o7777;
    let mut at = root.to_path_buf();
    for part in Path::new(sub).components() {
        at.push(part);
        if !at.exists() {
            std::fs::create_dir(&at)?;
            std::fs::set_permissions(&at, std::fs::Permissions::from_mode(mode))?;
        }
    }
    Ok(())
}

/// The key/value data of a ConfigMap or Secret (decoded); `None` when it
/// is missing.
fn data(st: &State, ns: &str, secret: bool, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
    let plural = if secret { "secrets" } else { "configmaps" };
    let obj = st.store.get(&Gr::new("", plural), ns, name)?;
    let b64 = |v: &Value| {
        base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .unwrap_or_default()
    };
    let mut out = BTreeMap::new();
    for (k, v) in obj
        .get("data")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let bytes = if secret {
            b64(v)
        } else {
            v.as_str().unwrap_or_default().as_bytes().to_vec()
        };
        out.insert(k.clone(), bytes);
    }
    for (k, v) in obj
        .get("binaryData")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        out.insert(k.clone(), b64(v));
    }
    Some(out)
}

/// Files of a `secret`/`configMap` source with `items` and modes.
fn keyed_files(
    st: &State,
    ns: &str,
    secret: bool,
    src: &Value,
    default_mode: u32,
    files: &mut Files,
) -> Result<(), String> {
    let name = if secret {
        s(src, "/secretName")
    } else {
        s(src, "/name")
    };
    let name = if name.is_empty() {
        s(src, "/name")
    } else {
        name
    };
    let optional = src
        .get("optional")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let (kind, what) = if secret {
        ("secret", "secret")
    } else {
        ("configmap", "config")
    };
    let Some(data) = data(st, ns, secret, name) else {
        return if optional {
            Ok(())
        } else {
            Err(format!("{kind} \"{name}\" not found"))
        };
    };
    let mode_of = |item: &Value| mode(item, "mode").unwrap_or(default_mode);
    match src.get("items").and_then(Value::as_array) {
        Some(items) => {
            for item in items {
                let key = s(item, "/key");
                match data.get(key) {
                    Some(v) => {
                        files.insert(s(item, "/path").to_string(), (v.clone(), mode_of(item)));
                    }
                    None if optional => {}
                    None => {
                        return Err(format!("{kind} references non-existent {what} key: {key}"));
                    }
                }
            }
        }
        None => {
            for (k, v) in data {
                files.insert(k, (v, default_mode));
            }
        }
    }
    Ok(())
}

fn downward_files(pod: &Value, src: &Value, default_mode: u32, files: &mut Files) {
    for item in src
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let path = s(item, "/fieldRef/fieldPath");
        let value = super::pods::field_ref(pod, path);
        files.insert(
            s(item, "/path").to_string(),
            (
                value.into_bytes(),
                mode(item, "mode").unwrap_or(default_mode),
            ),
        );
    }
}

fn projected_files(st: &State, pod: &Value, v: &Value) -> Result<Files, String> {
    let ns = meta(pod, "namespace");
    let mut files = Files::new();
    if let Some(src) = v.get("secret") {
        keyed_files(
            st,
            ns,
            true,
            src,
            mode(src, "defaultMode").unwrap_or(0o644),
            &mut files,
        )?;
    } else if let Some(src) = v.get("configMap") {
        keyed_files(
            st,
            ns,
            false,
            src,
            mode(src, "defaultMode").unwrap_or(0o644),
            &mut files,
        )?;
    } else if let Some(src) = v.get("downwardAPI") {
        downward_files(
            pod,
            src,
            mode(src, "defaultMode").unwrap_or(0o644),
            &mut files,
        );
    } else if let Some(p) = v.get("projected") {
        let default_mode = mode(p, "defaultMode").unwrap_or(0o644);
        for src in p
            .get("sources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(x) = src.get("secret") {
                keyed_files(st, ns, true, x, default_mode, &mut files)?;
            } else if let Some(x) = src.get("configMap") {
                keyed_files(st, ns, false, x, default_mode, &mut files)?;
            } else if let Some(x) = src.get("downwardAPI") {
                downward_files(pod, x, default_mode, &mut files);
            } else if let Some(x) = src.get("serviceAccountToken") {
                let audience = s(x, "/audience");
                let spec = TokenSpec {
                    namespace: ns,
                    service_account: s(pod, "/spec/serviceAccountName"),
                    audiences: if audience.is_empty() {
                        vec![]
                    } else {
                        vec![audience.to_string()]
                    },
                    expiration_seconds: x
                        .get("expirationSeconds")
                        .and_then(Value::as_i64)
                        .unwrap_or(3607),
                    pod: Some((meta(pod, "name"), meta(pod, "uid"))),
                    extended: audience.is_empty(),
                };
                let issued = tokens::issue(st, &spec).ok_or_else(|| {
                    format!(
                        "failed to fetch token: serviceaccounts \"{}\" not found",
                        spec.service_account
                    )
                })?;
                files.insert(
                    s(x, "/path").to_string(),
                    (issued.token.into_bytes(), default_mode),
                );
            }
        }
    }
    Ok(files)
}

/// The current content of an atomic-writer directory.
fn current(dir: &Path) -> Option<Files> {
    let data = dir.join("..data");
    let mut out = Files::new();
    fn walk(base: &Path, rel: &Path, out: &mut Files) -> Option<()> {
        for e in std::fs::read_dir(base.join(rel)).ok()? {
            let e = e.ok()?;
            let rel = rel.join(e.file_name());
            let meta = e.metadata().ok()?;
            if meta.is_dir() {
                walk(base, &rel, out)?;
            } else {
                let content = std::fs::read(base.join(&rel)).ok()?;
                out.insert(
                    rel.display().to_string(),
                    (content, meta.permissions().mode() & 0o7777),
                );
            }
        }
        Some(())
    }
    walk(&data, Path::new(""), &mut out)?;
    Some(out)
}

/// Writes `files` into `dir` through a new timestamped directory swapped
/// in with one rename of `..data`; unchanged content is left alone.
pub fn write_atomic(dir: &Path, files: &Files, fs_group: Option<u32>) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777))?;
    // What the volume holds once given to the pod's fsGroup, which is
    // what a container sees and what a refresh compares with.
    let wanted: Files = match fs_group {
        Some(_) => files
            .iter()
            .map(|(k, (content, mode))| {
                (
                    k.clone(),
                    (content.clone(), ownership::read_only_file_mode(*mode)),
                )
            })
            .collect(),
        None => files.clone(),
    };
    if current(dir).as_ref() == Some(&wanted) {
        return Ok(());
    }
    let old = std::fs::read_link(dir.join("..data")).ok();
    let stamp = format!("..{}", chrono::Utc::now().format("%Y_%m_%d_%H_%M_%S.%f"));
    let ts = dir.join(&stamp);
    std::fs::create_dir_all(&ts)?;
    for (rel, (content, mode)) in files {
        let path = ts.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, content)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode))?;
    }
    std::fs::set_permissions(&ts, std::fs::Permissions::from_mode(0o755))?;
    // Owned before it is swapped in: a container never sees the new files
    // without their group.
    if let Some(group) = fs_group {
        ownership::set(&ts, group, ChangePolicy::Always, true).map_err(std::io::Error::other)?;
    }
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&stamp, &tmp)?;
    std::fs::rename(&tmp, dir.join("..data"))?;
    let tops: std::collections::BTreeSet<String> = files
        .keys()
        .filter_map(|k| k.split('/').next().map(String::from))
        .collect();
    for top in &tops {
        let link = dir.join(top);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{top}"), &link)?;
        }
    }
    for e in std::fs::read_dir(dir)?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("..") && !tops.contains(&name) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    if let Some(old) = old.filter(|o| o.as_os_str() != stamp.as_str()) {
        let _ = std::fs::remove_dir_all(dir.join(old));
    }
    Ok(())
}
