//! Volume ownership as the kubelet sets it for a pod's `fsGroup`
//! (`pkg/volume/volume_linux.go`, `SetVolumeOwnership`): every entry of the
//! volume, deepest first and the root last, is given the group `fsGroup`
//! (`lchown`, the owner kept) and its mode gains group read and write
//! (`0660`, or `0440` on a read-only volume); directories also gain group
//! search (`0110`) and setgid, so what the pod creates later belongs to
//! the group too. Symbolic links get the group but keep their mode. With
//! `fsGroupChangePolicy: OnRootMismatch` nothing is done when the root
//! already has the group, at least those permissions and setgid.

use serde_json::Value;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

const RW_MASK: u32 = 0o660;
const RO_MASK: u32 = 0o440;
const EXEC_MASK: u32 = 0o110;
const SETGID: u32 = 0o2000;

/// When the kubelet changes a volume's ownership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangePolicy {
    /// Every time the volume is set up (the default, and what emptyDirs
    /// and projected volumes always get).
    Always,
    /// Only when the volume's root does not look right already.
    OnRootMismatch,
}

/// The pod's `fsGroup` and `fsGroupChangePolicy`.
pub fn fs_group(pod: &Value) -> Option<(u32, ChangePolicy)> {
    let sc = pod.pointer("/spec/securityContext")?;
    let group = u32::try_from(sc.get("fsGroup")?.as_u64()?).ok()?;
    let policy = match sc.get("fsGroupChangePolicy").and_then(Value::as_str) {
        Some("OnRootMismatch") => ChangePolicy::OnRootMismatch,
        _ => ChangePolicy::Always,
    };
    Some((group, policy))
}

/// Whether the root of a volume needs the change (`requiresPermissionChange`).
pub fn root_mismatch(root: &Path, group: u32, read_only: bool) -> bool {
    let Ok(m) = std::fs::metadata(root) else {
        return true;
    };
    if m.gid() != group || !m.is_dir() {
        return true;
    }
    let want = if read_only { RO_MASK } else { RW_MASK } | EXEC_MASK;
    let perm = m.mode() & 0o777;
    perm & want != want || m.mode() & SETGID == 0
}

/// The mode a file of mode `mode` has on a read-only volume given to an
/// `fsGroup` (what [`set`] makes of it).
pub fn read_only_file_mode(mode: u32) -> u32 {
    mode | RO_MASK
}

/// Gives volume `root` to `group` as the kubelet does; `Err` names the
/// first entry that could not be read or changed.
pub fn set(root: &Path, group: u32, policy: ChangePolicy, read_only: bool) -> Result<(), String> {
    if policy == ChangePolicy::OnRootMismatch && !root_mismatch(root, group, read_only) {
        return Ok(());
    }
    let mask = if read_only { RO_MASK } else { RW_MASK };
    walk(root, group, mask)
}

fn walk(path: &Path, group: u32, mask: u32) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("{}: {e}", path.display());
    let m = std::fs::symlink_metadata(path).map_err(fail)?;
    if m.is_dir() {
        for e in std::fs::read_dir(path).map_err(fail)? {
            walk(&e.map_err(fail)?.path(), group, mask)?;
        }
    }
    lchown_group(path, group).map_err(fail)?;
    if m.file_type().is_symlink() {
        return Ok(());
    }
    let extra = if m.is_dir() {
        mask | EXEC_MASK | SETGID
    } else {
        mask
    };
    let mode = (m.mode() & 0o7777) | extra;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(fail)
}

fn lchown_group(path: &Path, group: u32) -> std::io::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: lchown(2) of a NUL-terminated path; uid -1 keeps the owner.
    let rc = unsafe { libc::lchown(c.as_ptr(), u32::MAX, group) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    fn gid(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().gid()
    }

    fn root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn the_pods_fs_group_and_policy_are_read_from_its_security_context() {
        let cases = [
            (json!({}), None),
            (json!({ "securityContext": {} }), None),
            (
                json!({ "securityContext": { "fsGroup": 2000 } }),
                Some((2000, ChangePolicy::Always)),
            ),
            (
                json!({ "securityContext": { "fsGroup": 7, "fsGroupChangePolicy": "OnRootMismatch" } }),
                Some((7, ChangePolicy::OnRootMismatch)),
            ),
            (
                json!({ "securityContext": { "fsGroup": 7, "fsGroupChangePolicy": "Always" } }),
                Some((7, ChangePolicy::Always)),
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(fs_group(&json!({ "spec": spec })), want, "{spec}");
        }
    }

    #[test]
    fn every_entry_gets_the_group_group_rw_and_directories_setgid() {
        if !root() {
            println!("skipped: changing groups needs root");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let vol = d.path().join("vol");
        std::fs::create_dir_all(vol.join("sub")).unwrap();
        std::fs::set_permissions(&vol, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(vol.join("sub"), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(vol.join("sub/f"), b"x").unwrap();
        std::fs::set_permissions(vol.join("sub/f"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        std::os::unix::fs::symlink("sub/f", vol.join("link")).unwrap();

        set(&vol, 4321, ChangePolicy::Always, false).unwrap();
        assert_eq!((gid(&vol), mode(&vol)), (4321, 0o2775));
        assert_eq!(
            (gid(&vol.join("sub")), mode(&vol.join("sub"))),
            (4321, 0o2770)
        );
        assert_eq!(
            (gid(&vol.join("sub/f")), mode(&vol.join("sub/f"))),
            (4321, 0o660)
        );
        assert_eq!(
            gid(&vol.join("link")),
            4321,
            "the link itself gets the group"
        );

        // Read-only volumes get group read only.
        let ro = d.path().join("ro");
        std::fs::create_dir(&ro).unwrap();
        std::fs::write(ro.join("f"), b"x").unwrap();
        std::fs::set_permissions(ro.join("f"), std::fs::Permissions::from_mode(0o400)).unwrap();
        set(&ro, 4321, ChangePolicy::Always, true).unwrap();
        assert_eq!(mode(&ro.join("f")), 0o440);
    }

    #[test]
    fn on_root_mismatch_leaves_a_volume_whose_root_is_right_alone() {
        if !root() {
            println!("skipped: changing groups needs root");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let vol = d.path().join("vol");
        std::fs::create_dir(&vol).unwrap();
        std::fs::write(vol.join("f"), b"x").unwrap();
        assert!(root_mismatch(&vol, 4321, false), "a root-owned 0755 root");
        set(&vol, 4321, ChangePolicy::OnRootMismatch, false).unwrap();
        assert!(!root_mismatch(&vol, 4321, false));
        assert_eq!(
            gid(&vol.join("f")),
            4321,
            "a mismatch changes the whole tree"
        );

        // A file the pod's group no longer has stays so: the root is right.
        std::fs::write(vol.join("g"), b"x").unwrap();
        lchown_group(&vol.join("g"), 0).unwrap();
        set(&vol, 4321, ChangePolicy::OnRootMismatch, false).unwrap();
        assert_eq!(gid(&vol.join("g")), 0);
        set(&vol, 4321, ChangePolicy::Always, false).unwrap();
        assert_eq!(gid(&vol.join("g")), 4321);

        // Another group on the root is a mismatch again.
        assert!(root_mismatch(&vol, 99, false));
    }
}
