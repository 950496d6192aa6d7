//! Whether this process may write a local lake location, asked before a
//! stream starts. A volume whose storage ignores `fsGroup` (a hostPath or
//! NFS volume, an unformatted disk mounted by hand) leaves its root owned
//! by root with mode 0755: found here, the worker stops with the
//! directory, its owner and mode and the worker's own ids, instead of
//! failing later on whichever Delta file it first writes.

use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::storage::{StorageKind, StorageLocation};

/// A local location the worker cannot write, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot write {location}: {directory} {why} ({error}); the worker runs as uid {uid}, gid \
     {gid}, groups {groups}"
)]
pub struct NotWritable {
    /// The location the stream would write (a table or the checkpoint).
    pub location: PathBuf,
    /// Its nearest existing directory: the one that is not writable.
    pub directory: PathBuf,
    /// The directory's owner and mode, or that its filesystem is read-only.
    pub why: String,
    /// What the operating system said.
    pub error: String,
    /// This process's effective user.
    pub uid: u32,
    /// This process's effective group.
    pub gid: u32,
    /// Its supplementary groups, comma-separated.
    pub groups: String,
}

/// Checks that each local location of `locations` can be written: the
/// location itself when it exists, else the nearest directory above it
/// (where the engine will create it). Remote locations are skipped.
pub fn check_writable<'a>(
    locations: impl IntoIterator<Item = &'a StorageLocation>,
) -> Result<(), Box<NotWritable>> {
    for location in locations {
        if location.kind() != StorageKind::Local {
            continue;
        }
        let Ok(path) = location.url().to_file_path() else {
            continue;
        };
        check_path(&path)?;
    }
    Ok(())
}

fn check_path(location: &Path) -> Result<(), Box<NotWritable>> {
    let Some(directory) = location.ancestors().find(|p| p.is_dir()) else {
        return Ok(());
    };
    let Err(error) = may_write(directory) else {
        return Ok(());
    };
    let why = if error.raw_os_error() == Some(libc::EROFS) {
        "is on a read-only filesystem".to_string()
    } else {
        match std::fs::metadata(directory) {
            Ok(meta) => format!(
                "is owned by {}:{} with mode {:04o}",
                meta.uid(),
                meta.gid(),
                meta.mode() & 0o7777
            ),
            Err(_) => "cannot be read".to_string(),
        }
    };
    let (uid, gid, groups) = identity();
    Err(Box::new(NotWritable {
        location: location.to_path_buf(),
        directory: directory.to_path_buf(),
        why,
        error: error.to_string(),
        uid,
        gid,
        groups,
    }))
}

/// `faccessat(W_OK | X_OK, AT_EACCESS)`: whether this process, by its
/// effective ids and groups, may create entries in `directory`; a
/// read-only mount answers `EROFS`.
fn may_write(directory: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(directory.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(ErrorKind::InvalidInput))?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call;
    // faccessat reads it and touches no other memory.
    let answer = unsafe {
        libc::faccessat(
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::W_OK | libc::X_OK,
            libc::AT_EACCESS,
        )
    };
    if answer == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The effective user and group, and the supplementary groups.
fn identity() -> (u32, u32, String) {
    // SAFETY: geteuid and getegid cannot fail and take no arguments.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let mut groups = vec![0 as libc::gid_t; 256];
    // SAFETY: the buffer holds `groups.len()` gid_t values, the size given.
    let count = unsafe { libc::getgroups(groups.len() as libc::c_int, groups.as_mut_ptr()) };
    groups.truncate(usize::try_from(count).unwrap_or(0));
    let groups = if groups.is_empty() {
        "none".to_string()
    } else {
        groups
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    (uid, gid, groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn local(path: &Path) -> StorageLocation {
        StorageLocation::parse(path.to_str().expect("utf-8 temp path")).expect("a local path")
    }

    #[test]
    fn a_missing_location_under_a_writable_directory_passes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let deep = dir.path().join("lake/bronze/orders");
        assert_eq!(check_writable([&local(&deep)]), Ok(()));
    }

    #[test]
    fn remote_locations_are_not_looked_at() {
        let s3 = StorageLocation::parse("s3://bucket/lake/orders").expect("s3 location");
        assert_eq!(check_writable([&s3]), Ok(()));
    }

    #[test]
    fn a_directory_the_worker_may_not_write_is_named_with_its_owner_and_mode() {
        // root may write anything: this runs as a user only (the
        // harness's workers, run as 65532, cover it under root: see
        // tests/it/operator_examples.rs).
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            eprintln!("skipped: root may write any directory");
            return;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("volume");
        std::fs::create_dir(&root).expect("mkdir");
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o555)).expect("chmod");
        let location = root.join("lake/bronze");
        let error = check_writable([&local(&location)]).expect_err("not writable");
        assert_eq!(error.directory, root);
        assert_eq!(error.location, location);
        assert!(error.why.contains("mode 0555"), "{}", error.why);
        let said = error.to_string();
        assert!(said.contains(&format!("uid {}", error.uid)), "{said}");
    }
}
