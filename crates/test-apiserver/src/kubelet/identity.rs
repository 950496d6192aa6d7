//! Who a container's process is, as a container runtime sets it: the
//! effective `runAsUser` and `runAsGroup` (the container's securityContext
//! over the pod's; unset means the image's default, root here, since the
//! harness's image is the host), and as supplementary groups the primary
//! group, the pod's `fsGroup` and its `supplementalGroups`. Computed in
//! the kubelet; the forked child only makes the three system calls
//! (`setgroups`, `setgid`, `setuid`) on the prepared list, after its mount
//! namespace is built and before exec.

use serde_json::Value;
use std::io;

/// A container's user, group and supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    /// The supplementary groups, the primary group first, no duplicates.
    pub groups: Vec<libc::gid_t>,
}

fn id(v: Option<&Value>) -> Option<u32> {
    v.and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
}

impl Identity {
    /// The identity of `container` in `pod`.
    pub fn of(pod: &Value, container: &Value) -> Self {
        let pod_sc = pod.pointer("/spec/securityContext");
        let c_sc = container.get("securityContext");
        let pick = |key: &str| {
            id(c_sc.and_then(|s| s.get(key))).or_else(|| id(pod_sc.and_then(|s| s.get(key))))
        };
        let uid = pick("runAsUser").unwrap_or(0);
        let gid = pick("runAsGroup").unwrap_or(0);
        let mut groups = vec![gid];
        let fs_group = id(pod_sc.and_then(|s| s.get("fsGroup")));
        let supplemental = pod_sc
            .and_then(|s| s.get("supplementalGroups"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|g| id(Some(g)));
        for g in fs_group.into_iter().chain(supplemental) {
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
        Self { uid, gid, groups }
    }

    /// Becomes this identity. Only system calls on data prepared before
    /// the fork: safe between fork and exec.
    pub fn apply(&self) -> io::Result<()> {
        // SAFETY: setgroups(2) reads `groups.len()` ids from a live buffer;
        // setgid(2) and setuid(2) take plain integers.
        let ok = unsafe {
            libc::setgroups(self.groups.len(), self.groups.as_ptr()) == 0
                && libc::setgid(self.gid) == 0
                && libc::setuid(self.uid) == 0
        };
        if ok {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_container_wins_over_the_pod_and_root_is_the_default() {
        let cases = [
            (json!({}), json!({}), (0, 0, vec![0])),
            (
                json!({ "runAsUser": 1000, "runAsGroup": 3000 }),
                json!({}),
                (1000, 3000, vec![3000]),
            ),
            (
                json!({ "runAsUser": 1000, "runAsGroup": 3000 }),
                json!({ "runAsUser": 65532 }),
                (65532, 3000, vec![3000]),
            ),
            (
                json!({ "runAsUser": 1000, "fsGroup": 2000, "supplementalGroups": [4000, 2000, 3000] }),
                json!({ "runAsGroup": 3000 }),
                (1000, 3000, vec![3000, 2000, 4000]),
            ),
            (json!({ "fsGroup": 2000 }), json!({}), (0, 0, vec![0, 2000])),
        ];
        for (pod_sc, c_sc, (uid, gid, groups)) in cases {
            let pod = json!({ "spec": { "securityContext": pod_sc } });
            let c = json!({ "securityContext": c_sc });
            assert_eq!(
                Identity::of(&pod, &c),
                Identity { uid, gid, groups },
                "{pod_sc} {c_sc}"
            );
        }
    }
}
