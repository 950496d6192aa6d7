//! A container's filesystem: its own mount namespace, built between fork
//! and exec. Everything is planned in the kubelet (paths, directory
//! listings, mount flags) and the forked child only replays the plan with
//! raw system calls (no allocation after fork), then execs.
//!
//! The container root is a tmpfs. The host's top-level entries are bind
//! mounted into it (recursively; `/dev` is a fresh tmpfs with the usual
//! device nodes instead), so the image is the host's filesystem. A mount
//! point that does not exist is made in a tmpfs, never on the host: at the
//! top level in the root tmpfs, deeper down by shadowing the nearest
//! existing directory with a tmpfs that binds each of its entries back.
//! With `readOnlyRootFilesystem` every one of those mounts is remounted
//! read-only (and `/sys` and `/proc/sys` always are); then the volumes are
//! bound at their mount paths, read-only where asked. The old root is
//! detached after `pivot_root`, and the namespace is private, so nothing
//! reaches the host's mount table and all of it vanishes with the last
//! process of the container.

use std::collections::{BTreeSet, HashMap};
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where the kubelet's binary appears in every container.
pub const BINARY_DIR: &str = "/.harness/bin";
const OLD_ROOT: &str = "/.harness/oldroot";

/// A volume (or file) to mount in the container.
#[derive(Debug, Clone)]
pub struct Mount {
    pub source: PathBuf,
    /// The mount path in the container.
    pub target: String,
    pub read_only: bool,
}

/// What a container's filesystem is made of.
#[derive(Debug, Clone)]
pub struct ContainerFs {
    /// An empty host directory the root tmpfs is mounted on.
    pub root_dir: PathBuf,
    pub hostname: String,
    pub mounts: Vec<Mount>,
    pub read_only_root: bool,
    /// The binary the container runs, bound at [`BINARY_DIR`].
    pub binary: PathBuf,
    pub working_dir: Option<String>,
}

enum Step {
    Unshare,
    Hostname(CString),
    Mount {
        source: Option<CString>,
        target: CString,
        fstype: Option<CString>,
        flags: libc::c_ulong,
        data: Option<CString>,
    },
    Mkdir(CString),
    Mkfile(CString),
    Symlink(CString, CString),
    PivotRoot(CString, CString),
    Chdir(CString),
    Detach(CString),
}

/// The replayable plan, with a description of each step for errors.
pub struct Plan {
    steps: Vec<(Step, Vec<u8>)>,
}

fn c(s: impl AsRef<[u8]>) -> Result<CString, String> {
    CString::new(s.as_ref()).map_err(|_| "a path holds a NUL byte".to_string())
}

fn join(base: &str, rel: &str) -> String {
    let rel = rel.trim_start_matches('/');
    if base == "/" {
        format!("/{rel}")
    } else if rel.is_empty() {
        base.to_string()
    } else {
        format!("{base}/{rel}")
    }
}

fn parent(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &p[..i],
    }
}

fn under(p: &str, dir: &str) -> bool {
    dir == "/" || p == dir || p.starts_with(&format!("{dir}/"))
}

/// One host mount: its mount point and the flags to keep on a remount.
struct HostMount {
    point: String,
    flags: libc::c_ulong,
}

fn host_mounts() -> Vec<HostMount> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let point = unescape(f.get(4)?);
            let opts = f.get(5)?;
            let mut flags = 0;
            for o in opts.split(',') {
                flags |= match o {
                    "nosuid" => libc::MS_NOSUID,
                    "nodev" => libc::MS_NODEV,
                    "noexec" => libc::MS_NOEXEC,
                    "noatime" => libc::MS_NOATIME,
                    "nodiratime" => libc::MS_NODIRATIME,
                    "relatime" => libc::MS_RELATIME,
                    _ => 0,
                };
            }
            Some(HostMount { point, flags })
        })
        .collect()
}

fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

#[derive(Debug, PartialEq)]
enum Kind {
    Dir,
    File,
    Link(PathBuf),
    Missing,
}

struct Planner<'a> {
    fs: &'a ContainerFs,
    root: String,
    steps: Vec<(Step, Vec<u8>)>,
    /// Container paths made in a tmpfs (dirs and files).
    created: HashMap<String, Kind>,
    /// Host-backed directories shadowed by a tmpfs.
    shadowed: BTreeSet<String>,
    /// Mounts that must be remounted read-only (container paths).
    read_only: Vec<(String, libc::c_ulong)>,
    host: Vec<HostMount>,
}

const DEV_NODES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

impl Planner<'_> {
    fn at(&self, p: &str) -> String {
        join(&self.root, p)
    }

    fn push(&mut self, step: Step, what: String) {
        self.steps.push((step, what.into_bytes()));
    }

    fn mount(
        &mut self,
        source: Option<&str>,
        target: &str,
        fstype: Option<&str>,
        flags: libc::c_ulong,
        data: Option<&str>,
    ) -> Result<(), String> {
        let what = format!(
            "mount {} on {target}",
            source.or(fstype).unwrap_or("(remount)")
        );
        let step = Step::Mount {
            source: source.map(c).transpose()?,
            target: c(target)?,
            fstype: fstype.map(c).transpose()?,
            flags,
            data: data.map(c).transpose()?,
        };
        self.push(step, what);
        Ok(())
    }

    fn flags_of(&self, host_path: &str) -> libc::c_ulong {
        self.host
            .iter()
            .filter(|m| under(host_path, &m.point))
            .max_by_key(|m| m.point.len())
            .map_or(0, |m| m.flags)
    }

    /// Makes `name` in the tmpfs directory `dir` (container path).
    fn make(&mut self, dir: &str, name: &str, file: bool) -> Result<(), String> {
        let p = join(dir, name);
        let host = self.at(&p);
        if file {
            self.push(Step::Mkfile(c(&host)?), format!("create {p}"));
            self.created.insert(p, Kind::File);
        } else {
            self.push(Step::Mkdir(c(&host)?), format!("mkdir {p}"));
            self.created.insert(p, Kind::Dir);
        }
        Ok(())
    }

    /// Binds every entry of host directory `host_dir` into container
    /// directory `dir` (a fresh tmpfs), recording them as read-only mounts.
    fn mirror(&mut self, host_dir: &str, dir: &str, skip: &[&str]) -> Result<(), String> {
        let mut entries: Vec<_> = std::fs::read_dir(host_dir)
            .map_err(|e| format!("read {host_dir}: {e}"))?
            .flatten()
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            if skip.contains(&name.as_str()) {
                continue;
            }
            let src = join(host_dir, &name);
            let dst = join(dir, &name);
            let Ok(meta) = std::fs::symlink_metadata(&src) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&src).map_err(|e| e.to_string())?;
                let link = self.at(&dst);
                self.push(
                    Step::Symlink(c(target.as_os_str().as_bytes())?, c(&link)?),
                    format!("symlink {dst}"),
                );
                continue;
            }
            let t = self.at(&dst);
            if meta.is_dir() {
                self.push(Step::Mkdir(c(&t)?), format!("mkdir {dst}"));
            } else {
                self.push(Step::Mkfile(c(&t)?), format!("create {dst}"));
            }
            self.mount(Some(&src), &t, None, libc::MS_BIND | libc::MS_REC, None)?;
            // /proc stays writable, as in a container (only /proc/sys is not).
            if dst != "/proc" {
                let flags = self.flags_of(&src);
                self.read_only.push((dst, flags));
            }
        }
        Ok(())
    }

    /// What is at container path `p` before the volumes are mounted, and
    /// the host path behind it when it is host-backed.
    fn lookup(&self, p: &str) -> (Kind, Option<String>) {
        if let Some(host) = self.volume_host(p, false) {
            return (host_kind(&host), Some(host));
        }
        if let Some(k) = self.created.get(p) {
            return (
                if *k == Kind::Dir {
                    Kind::Dir
                } else {
                    Kind::File
                },
                None,
            );
        }
        let tmpfs_parent =
            p == "/dev" || under(p, "/dev") || self.created.get(parent(p)) == Some(&Kind::Dir);
        if tmpfs_parent || p == "/" {
            return (
                if p == "/" || p == "/dev" {
                    Kind::Dir
                } else {
                    Kind::Missing
                },
                None,
            );
        }
        (host_kind(p), Some(p.to_string()))
    }

    /// The host path of container path `p` inside a volume (strictly
    /// inside unless `or_root`: a mount point itself belongs to the view
    /// below it).
    fn volume_host(&self, p: &str, or_root: bool) -> Option<String> {
        let m = self
            .fs
            .mounts
            .iter()
            .filter(|m| under(p, &m.target) && (or_root || p != m.target))
            .max_by_key(|m| m.target.len())?;
        let rest = p.strip_prefix(m.target.as_str()).unwrap_or_default();
        Some(format!("{}{rest}", m.source.display()))
    }

    /// Makes container path `path` exist (a directory, or a file when
    /// `file`), without touching the host's directories.
    /// Returns the path with symbolic links resolved in the container's
    /// view (the kernel would resolve an absolute link against the host's
    /// root before `pivot_root`).
    fn ensure(&mut self, path: &str, file: bool) -> Result<String, String> {
        let mut comps: Vec<String> = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let mut cur = "/".to_string();
        let (mut i, mut hops) = (0, 0);
        while i < comps.len() {
            let next = join(&cur, &comps[i]);
            let last = i + 1 == comps.len();
            match self.lookup(&next) {
                (Kind::Link(target), _) => {
                    hops += 1;
                    if hops > 40 {
                        return Err(format!("{path}: too many levels of symbolic links"));
                    }
                    let t = target.display().to_string();
                    let resolved = if t.starts_with('/') {
                        t
                    } else {
                        join(&cur, &t)
                    };
                    let mut rest: Vec<String> = resolved
                        .split('/')
                        .filter(|s| !s.is_empty() && *s != ".")
                        .map(String::from)
                        .collect();
                    rest.extend(comps.drain(i + 1..));
                    comps = normalize(rest);
                    cur = "/".into();
                    i = 0;
                    continue;
                }
                (Kind::Dir, _) => {}
                (Kind::File, _) if last && file => {}
                (Kind::File, _) => return Err(format!("{next}: not a directory")),
                (Kind::Missing, _) => self.create(&cur, &comps[i], last && file)?,
            }
            cur = next;
            i += 1;
        }
        Ok(cur)
    }

    fn create(&mut self, dir: &str, name: &str, file: bool) -> Result<(), String> {
        // Inside a volume: the mount point is made in the volume, as a
        // kubelet does.
        if let Some(host) = self.volume_host(dir, true) {
            let p = join(&host, name);
            let r = if file {
                std::fs::File::create(&p).map(drop)
            } else {
                std::fs::create_dir_all(&p)
            };
            return r.map_err(|e| format!("{p}: {e}"));
        }
        match self.lookup(dir) {
            (_, Some(host)) if !self.shadowed.contains(dir) => {
                if self.shadowed.iter().any(|d| under(d, dir)) {
                    return Err(format!(
                        "{dir}: the harness cannot make mount points at two depths of one missing tree"
                    ));
                }
                let t = self.at(dir);
                self.mount(
                    Some("tmpfs"),
                    &t,
                    Some("tmpfs"),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    Some("mode=0755"),
                )?;
                self.read_only
                    .push((dir.to_string(), libc::MS_NOSUID | libc::MS_NODEV));
                self.shadowed.insert(dir.to_string());
                self.mirror(&host, dir, &[])?;
                self.make(dir, name, file)
            }
            _ => self.make(dir, name, file),
        }
    }
}

fn normalize(comps: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in comps {
        if c == ".." {
            out.pop();
        } else {
            out.push(c);
        }
    }
    out
}

fn host_kind(p: &str) -> Kind {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::read_link(p).map_or(Kind::Missing, Kind::Link)
        }
        Ok(m) if m.is_dir() => Kind::Dir,
        Ok(_) => Kind::File,
        Err(_) => Kind::Missing,
    }
}

/// Plans the namespace of a container.
pub fn plan(fs: &ContainerFs) -> Result<Plan, String> {
    std::fs::create_dir_all(&fs.root_dir).map_err(|e| format!("{}: {e}", fs.root_dir.display()))?;
    let root = fs.root_dir.display().to_string();
    let mut p = Planner {
        fs,
        root: root.clone(),
        steps: Vec::new(),
        created: HashMap::new(),
        shadowed: BTreeSet::new(),
        read_only: Vec::new(),
        host: host_mounts(),
    };
    p.push(Step::Unshare, "unshare the mount and UTS namespaces".into());
    p.push(Step::Hostname(c(&fs.hostname)?), "set the hostname".into());
    p.mount(None, "/", None, libc::MS_REC | libc::MS_PRIVATE, None)?;
    p.mount(
        Some("tmpfs"),
        &root,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=0755"),
    )?;
    p.mount(None, &root, None, libc::MS_UNBINDABLE, None)?;
    p.mirror("/", "/", &["dev"])?;
    // /dev: a tmpfs with the usual nodes, shm and the /proc links.
    p.make("/", "dev", false)?;
    let dev = p.at("/dev");
    p.mount(
        Some("tmpfs"),
        &dev,
        Some("tmpfs"),
        libc::MS_NOSUID,
        Some("mode=0755"),
    )?;
    for node in DEV_NODES {
        p.make("/dev", node, true)?;
        let t = p.at(&format!("/dev/{node}"));
        p.mount(Some(&format!("/dev/{node}")), &t, None, libc::MS_BIND, None)?;
    }
    p.make("/dev", "shm", false)?;
    let shm = p.at("/dev/shm");
    p.mount(
        Some("shm"),
        &shm,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=1777"),
    )?;
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let link = p.at(&format!("/dev/{name}"));
        p.push(
            Step::Symlink(c(target)?, c(&link)?),
            format!("symlink /dev/{name}"),
        );
    }
    // Mount points: the volumes, the binary and the old root.
    let mut mounts = fs.mounts.clone();
    mounts.sort_by_key(|m| m.target.matches('/').count());
    for m in &mut mounts {
        let file = m.source.is_file();
        m.target = p.ensure(&m.target, file)?;
    }
    p.make("/", ".harness", false)?;
    p.make("/.harness", "bin", false)?;
    p.make("/.harness", "oldroot", false)?;
    let name = fs
        .binary
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "binary".into());
    p.make(BINARY_DIR, &name, true)?;
    // Read-only: /sys and /proc/sys always, everything of the image with
    // readOnlyRootFilesystem.
    let mut ro: Vec<(String, libc::c_ulong)> = Vec::new();
    for hm in &p.host {
        let rebound = hm.point != "/" && !under(&hm.point, "/dev") && !under(&hm.point, "/proc");
        let system = under(&hm.point, "/sys");
        if rebound && (fs.read_only_root || system) {
            ro.push((hm.point.clone(), hm.flags));
        }
    }
    let sys_flags = p.flags_of("/proc/sys");
    let proc_sys = p.at("/proc/sys");
    p.mount(
        Some(&proc_sys),
        &proc_sys,
        None,
        libc::MS_BIND | libc::MS_REC,
        None,
    )?;
    ro.push(("/proc/sys".into(), sys_flags));
    if fs.read_only_root {
        ro.extend(p.read_only.iter().cloned());
        ro.push(("/".into(), libc::MS_NOSUID | libc::MS_NODEV));
    } else {
        ro.extend(p.read_only.iter().filter(|(d, _)| d == "/sys").cloned());
    }
    for (dir, flags) in ro {
        let t = p.at(&dir);
        p.mount(
            None,
            &t,
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | flags,
            None,
        )?;
    }
    // The volumes, then the binary.
    for m in &mounts {
        let t = p.at(&m.target);
        let src = m.source.display().to_string();
        p.mount(Some(&src), &t, None, libc::MS_BIND | libc::MS_REC, None)?;
        if m.read_only {
            let flags = p.flags_of(&src);
            p.mount(
                None,
                &t,
                None,
                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | flags,
                None,
            )?;
        }
    }
    let bin = p.at(&format!("{BINARY_DIR}/{name}"));
    let src = fs.binary.display().to_string();
    p.mount(Some(&src), &bin, None, libc::MS_BIND, None)?;
    let flags = p.flags_of(&src);
    p.mount(
        None,
        &bin,
        None,
        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | flags,
        None,
    )?;
    // Into the new root; the old one detached.
    p.mount(None, &root, None, libc::MS_PRIVATE, None)?;
    p.push(Step::Chdir(c(&root)?), "chdir to the new root".into());
    p.push(
        Step::PivotRoot(c(".")?, c(format!(".{OLD_ROOT}"))?),
        "pivot_root".into(),
    );
    p.push(Step::Chdir(c("/")?), "chdir /".into());
    p.push(Step::Detach(c(OLD_ROOT)?), "detach the old root".into());
    let wd = fs
        .working_dir
        .clone()
        .filter(|w| !w.is_empty())
        .unwrap_or_else(|| "/".into());
    p.push(Step::Chdir(c(&wd)?), format!("chdir {wd}"));
    Ok(Plan { steps: p.steps })
}

/// The path of `binary` inside every container.
pub fn binary_in_container(binary: &Path) -> PathBuf {
    let name = binary
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "binary".into());
    Path::new(BINARY_DIR).join(name)
}

fn opt(p: &Option<CString>) -> *const libc::c_char {
    p.as_ref().map_or(std::ptr::null(), |s| s.as_ptr())
}

/// Writes "harness kubelet: WHAT: errno N" to stderr without allocating.
fn report(what: &[u8], errno: i32) {
    let mut num = [0u8; 12];
    let mut n = errno.unsigned_abs();
    let mut i = num.len();
    loop {
        i -= 1;
        num[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 || i == 0 {
            break;
        }
    }
    for part in [
        b"harness kubelet: cannot ".as_slice(),
        what,
        b": errno ",
        &num[i..],
        b"\n",
    ] {
        // SAFETY: write(2) of a valid buffer to our own stderr.
        unsafe {
            libc::write(2, part.as_ptr().cast(), part.len());
        }
    }
}

impl Plan {
    /// Replays the plan in the forked child. Only system calls on data
    /// prepared before the fork: safe between fork and exec.
    pub fn apply(&self) -> io::Result<()> {
        for (step, what) in &self.steps {
            // SAFETY: every pointer is a NUL-terminated string owned by
            // the plan, which outlives the calls.
            let rc = unsafe {
                match step {
                    Step::Unshare => libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWUTS),
                    Step::Hostname(h) => libc::sethostname(h.as_ptr(), h.as_bytes().len()),
                    Step::Mount {
                        source,
                        target,
                        fstype,
                        flags,
                        data,
                    } => libc::mount(
                        opt(source),
                        target.as_ptr(),
                        opt(fstype),
                        *flags,
                        opt(data).cast(),
                    ),
                    Step::Mkdir(p) => libc::mkdir(p.as_ptr(), 0o755),
                    Step::Mkfile(p) => {
                        let fd = libc::open(
                            p.as_ptr(),
                            libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                            0o644,
                        );
                        if fd >= 0 {
                            libc::close(fd);
                            0
                        } else {
                            -1
                        }
                    }
                    Step::Symlink(target, link) => libc::symlink(target.as_ptr(), link.as_ptr()),
                    Step::PivotRoot(new, old) => {
                        libc::syscall(libc::SYS_pivot_root, new.as_ptr(), old.as_ptr())
                            as libc::c_int
                    }
                    Step::Chdir(p) => libc::chdir(p.as_ptr()),
                    Step::Detach(p) => libc::umount2(p.as_ptr(), libc::MNT_DETACH),
                }
            };
            if rc != 0 {
                let err = io::Error::last_os_error();
                report(what, err.raw_os_error().unwrap_or(0));
                return Err(err);
            }
        }
        Ok(())
    }
}

/// Whether this process can give containers mount namespaces (root, and
/// `unshare` plus mounts allowed); `Err` says why not.
pub fn probe() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("the tests do not run as root".into());
    }
    let dir = std::env::temp_dir().join(format!("harness-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let target = c(dir.as_os_str().as_bytes())?;
    let mut cmd = std::process::Command::new("true");
    // SAFETY: the closure only makes system calls on a CString made before the fork.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || {
            let root = c"/";
            let tmpfs = c"tmpfs";
            if libc::unshare(libc::CLONE_NEWNS) != 0
                || libc::mount(
                    std::ptr::null(),
                    root.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) != 0
                || libc::mount(
                    tmpfs.as_ptr(),
                    target.as_ptr(),
                    tmpfs.as_ptr(),
                    0,
                    std::ptr::null(),
                ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let r = cmd.status();
    let _ = std::fs::remove_dir(&dir);
    match r {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("the probe exited with {s}")),
        Err(e) => Err(format!("unshare or mount failed: {e}")),
    }
}
