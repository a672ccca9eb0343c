//! Block devices and what their I/O schedulers honour. An I/O class set with `ioprio_set(2)` or
//! a cgroup's `io.prio.class` is only a label on each request: the device's elevator decides
//! whether it matters. `bfq` and `mq-deadline` (per-priority queues since Linux 5.14) serve the
//! classes; `kyber` and `none` (the default for NVMe) ignore them (include/uapi/linux/ioprio.h,
//! block/mq-deadline.c; docs/storage.md). Weights are BFQ's alone (`io.bfq.weight`) unless
//! blk-iocost is enabled on the device (`io.cost.qos`, then `io.weight`). This module only
//! reads: `/sys/block`, `/sys/dev/block`, `/proc/self/mountinfo` and the cgroup v2 tree.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One whole disk (partitions resolve to the disk they are on).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Device {
    pub name: String,
    /// `major:minor` of the disk.
    pub dev: (u32, u32),
    /// The active elevator (the bracketed word of `queue/scheduler`); `None` for a bio-based
    /// device (zram, dm, md) that has no elevator of its own: its I/O is scheduled where it
    /// lands, on the devices in `slaves`.
    pub scheduler: Option<String>,
    /// The elevators the kernel offers for this device.
    pub available: Vec<String>,
    pub rotational: Option<bool>,
    /// Devices under a dm/md device (`slaves/`).
    pub slaves: Vec<String>,
    /// Whether the root filesystem lives on it.
    pub root: bool,
}

impl Device {
    /// Whether requests' I/O classes (RT, BE, IDLE) change the order this device serves them.
    pub fn honours_classes(&self) -> bool {
        matches!(self.scheduler.as_deref(), Some("bfq" | "mq-deadline"))
    }

    /// Whether per-cgroup weights reach this device without blk-iocost (`io.bfq.weight`).
    pub fn honours_bfq_weight(&self) -> bool {
        self.scheduler.as_deref() == Some("bfq")
    }

    /// One line for `status`/`doctor` and bench reports, e.g.
    /// "vda: mq-deadline (honours I/O classes; no io.bfq.weight), rotational=0, root filesystem".
    pub fn describe(&self) -> String {
        let what = match self.scheduler.as_deref() {
            Some("bfq") => "bfq (honours I/O classes and io.bfq.weight)".to_owned(),
            Some("mq-deadline") => "mq-deadline (honours I/O classes; no io.bfq.weight)".to_owned(),
            Some(s @ ("none" | "kyber")) => {
                format!("{s} (ignores I/O classes and io.bfq.weight)")
            }
            Some(s) => format!("{s} (unknown elevator: I/O classes not known to be honoured)"),
            None if self.slaves.is_empty() => "no elevator (bio-based device)".to_owned(),
            None => format!(
                "no elevator of its own (requests go to {})",
                self.slaves.join(", ")
            ),
        };
        let mut s = format!("{}: {what}", self.name);
        if let Some(r) = self.rotational {
            s.push_str(&format!(", rotational={}", u8::from(r)));
        }
        if self.root {
            s.push_str(", root filesystem");
        }
        s
    }
}

/// The cgroup v2 io controller, as far as a reader of the tree can see it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CgroupIo {
    /// Where cgroup2 is mounted (`/sys/fs/cgroup` on a pure v2 system).
    pub mount: Option<PathBuf>,
    /// `io` is in the root's `cgroup.controllers` (it is not while v1's blkio holds it).
    pub available: bool,
    /// `io` is in the root's `cgroup.subtree_control`: children have io.* files.
    pub delegated: bool,
    /// The io.* files that exist at the root (io.cost.qos, io.cost.model, io.stat …).
    pub root_files: Vec<String>,
    /// The io.* files of a child group (io.weight, io.bfq.weight, io.latency, io.max,
    /// io.prio.class …), from the first child that has any.
    pub child_files: Vec<String>,
}

impl CgroupIo {
    fn describe(&self) -> String {
        let Some(mount) = &self.mount else {
            return "cgroup v2: not mounted (no io.* levers)".into();
        };
        if !self.available {
            return format!(
                "cgroup v2 at {}: no io controller (held by cgroup v1 blkio?): no io.* levers",
                mount.display()
            );
        }
        let mut files = self.root_files.clone();
        files.extend(self.child_files.iter().cloned());
        files.sort();
        files.dedup();
        // A group's files were seen and blk-ioprio's is not among them: the kernel lacks it.
        let no_prio =
            !self.child_files.is_empty() && !self.child_files.iter().any(|f| f == "io.prio.class");
        format!(
            "cgroup v2 at {}: io controller{}; files: {}{}",
            mount.display(),
            if self.delegated {
                " enabled for children"
            } else {
                " not enabled in the root's subtree_control"
            },
            if files.is_empty() {
                "none".into()
            } else {
                files.join(", ")
            },
            if no_prio {
                "; no io.prio.class (a kernel without CONFIG_BLK_CGROUP_IOPRIO): the groups' \
                 I/O class cannot act"
            } else {
                ""
            }
        )
    }
}

/// Every disk's elevator and the cgroup io controller, read once.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Probe {
    pub devices: Vec<Device>,
    pub cgroup: CgroupIo,
}

impl Probe {
    /// Probe this machine.
    /// A root filesystem with no disk behind it (an initramfs, tmpfs: an anonymous device) is
    /// no error: the disks are listed, none marked as the root's.
    pub fn read() -> io::Result<Probe> {
        let root = device_number(Path::new("/")).ok();
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
        let cg = cgroup2_mount(&mountinfo);
        Probe::read_at(Path::new("/sys"), cg.as_deref(), root)
    }

    /// Probe a sysfs tree at `sys` and a cgroup2 tree at `cgroup` (tests pass fixtures);
    /// `root` is the `major:minor` of the root filesystem's device (a partition or a disk).
    pub fn read_at(
        sys: &Path,
        cgroup: Option<&Path>,
        root: Option<(u32, u32)>,
    ) -> io::Result<Probe> {
        let root_disk = match root {
            Some((ma, mi)) => disk_of(sys, ma, mi).ok(),
            None => None,
        };
        let mut devices = Vec::new();
        let dir = sys.join("block");
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| io::Error::new(e.kind(), format!("reading {}: {e}", dir.display())))?;
        for entry in entries {
            let name = entry?.file_name().to_string_lossy().into_owned();
            let is_root = root_disk.as_deref() == Some(name.as_str());
            if is_virtual(&name) && !is_root && !writable_loop(sys, &name) {
                continue;
            }
            devices.push(read_device(sys, &name, is_root)?);
        }
        devices.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Probe {
            devices,
            cgroup: cgroup.map(read_cgroup).unwrap_or_default(),
        })
    }

    /// The disk the root filesystem lives on.
    pub fn root(&self) -> Option<&Device> {
        self.devices.iter().find(|d| d.root)
    }

    pub fn device(&self, name: &str) -> Option<&Device> {
        self.devices.iter().find(|d| d.name == name)
    }

    /// Plain words for `status`/`doctor`: one line per disk, then the cgroup io controller.
    pub fn describe(&self) -> String {
        let mut lines: Vec<String> = self.devices.iter().map(Device::describe).collect();
        if lines.is_empty() {
            lines.push("no block devices found".into());
        }
        lines.push(self.cgroup.describe());
        lines.join("\n")
    }
}

/// RAM-backed and loop devices say nothing about the disk the user waits on (but see
/// [`writable_loop`]).
fn is_virtual(name: &str) -> bool {
    ["loop", "ram", "zram"].iter().any(|p| name.starts_with(p))
}

/// A loop device attached to a file and writable (`loop/backing_file` exists, `ro` is 0): a
/// disk image in use, whose elevator decides like a disk's (the QEMU guest's test disk). A
/// read-only one (a snap's squashfs, mounted `ro`) stays skipped.
fn writable_loop(sys: &Path, name: &str) -> bool {
    let base = sys.join("block").join(name);
    name.starts_with("loop")
        && base.join("loop/backing_file").exists()
        && read_trim(&base.join("ro")).as_deref() == Some("0")
}

fn read_device(sys: &Path, name: &str, root: bool) -> io::Result<Device> {
    let base = sys.join("block").join(name);
    let dev = read_trim(&base.join("dev"))
        .and_then(|s| parse_dev(&s))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}/dev is missing or not MAJOR:MINOR", base.display()),
            )
        })?;
    let (scheduler, available) = match read_trim(&base.join("queue/scheduler")) {
        Some(line) => parse_scheduler(&line),
        None => (None, Vec::new()),
    };
    let rotational = read_trim(&base.join("queue/rotational")).map(|s| s == "1");
    let mut slaves: Vec<String> = std::fs::read_dir(base.join("slaves"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    slaves.sort();
    Ok(Device {
        name: name.to_owned(),
        dev,
        scheduler,
        available,
        rotational,
        slaves,
        root,
    })
}

/// `none [mq-deadline] kyber bfq` → (active, offered). A line without brackets is a device
/// with a single elevator the kernel prints bare (`none`).
pub fn parse_scheduler(line: &str) -> (Option<String>, Vec<String>) {
    let mut active = None;
    let offered = line
        .split_whitespace()
        .map(
            |w| match w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
                Some(inner) => {
                    active = Some(inner.to_owned());
                    inner.to_owned()
                }
                None => w.to_owned(),
            },
        )
        .collect::<Vec<_>>();
    if active.is_none() && offered.len() == 1 {
        active = offered.first().cloned();
    }
    (active, offered)
}

fn parse_dev(s: &str) -> Option<(u32, u32)> {
    let (ma, mi) = s.trim().split_once(':')?;
    Some((ma.parse().ok()?, mi.parse().ok()?))
}

/// Whether this kernel has BFQ as a module (not built in): Debian and Ubuntu build it as one,
/// which a disk's `queue/scheduler` does not offer until it is loaded — writing `bfq` there
/// has the kernel load it. Read from `/lib/modules/<release>/modules.dep`.
pub fn bfq_is_a_module() -> bool {
    let dep = Path::new("/lib/modules")
        .join(crate::procfs::kernel_release())
        .join("modules.dep");
    std::fs::read_to_string(dep).is_ok_and(|d| lists_module(&d, "bfq"))
}

/// Whether a `modules.dep` text lists the module `name` (`…/name.ko`, compressed or not).
pub fn lists_module(modules_dep: &str, name: &str) -> bool {
    let file = format!("{name}.ko");
    modules_dep
        .lines()
        .filter_map(|l| l.split(':').next())
        .filter_map(|path| path.rsplit('/').next())
        .any(|f| {
            f == file
                || f.strip_prefix(file.as_str())
                    .is_some_and(|c| c.starts_with('.'))
        })
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned())
}

/// The whole disk `major:minor` belongs to: `/sys/dev/block/M:m` links into the device tree,
/// and a partition's directory (it has a `partition` file) sits inside its disk's.
pub fn disk_of(sys: &Path, major: u32, minor: u32) -> io::Result<String> {
    let link = sys.join(format!("dev/block/{major}:{minor}"));
    let real = std::fs::canonicalize(&link).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "{} ({major}:{minor} is not a block device here): {e}",
                link.display()
            ),
        )
    })?;
    let disk = if real.join("partition").exists() {
        real.parent().unwrap_or(&real).to_path_buf()
    } else {
        real
    };
    disk.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| io::Error::other(format!("{} has no name", disk.display())))
}

/// Whether `path` is on a tmpfs (`statfs(2)`'s `f_type`): no disk behind it.
// `f_type` and the magic are `i64` on x86-64, other integer types on other architectures.
#[allow(clippy::unnecessary_cast)]
pub fn on_tmpfs(path: &Path) -> bool {
    rustix::fs::statfs(path).is_ok_and(|st| st.f_type as i64 == libc::TMPFS_MAGIC as i64)
}

/// The `major:minor` of the block device holding `path`. Filesystems that report an anonymous
/// device (btrfs, overlayfs: major 0) are looked up in `/proc/self/mountinfo`, whose mount
/// source names the real device.
pub fn device_number(path: &Path) -> io::Result<(u32, u32)> {
    let dev = std::fs::metadata(path)?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    if major != 0 {
        return Ok((major, minor));
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    let source = mount_source(&mountinfo, major, minor).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{} is on an anonymous device 0:{minor} without a /dev source in /proc/self/mountinfo (tmpfs?): no disk behind it",
                path.display()
            ),
        )
    })?;
    let rdev = std::fs::metadata(&source)?.rdev();
    Ok((libc::major(rdev), libc::minor(rdev)))
}

/// The `/dev/…` mount source of the mount whose device is `major:minor`.
fn mount_source(mountinfo: &str, major: u32, minor: u32) -> Option<String> {
    let want = format!("{major}:{minor}");
    mountinfo.lines().find_map(|l| {
        let fields: Vec<&str> = l.split_whitespace().collect();
        let sep = fields.iter().position(|f| *f == "-")?;
        let source = fields.get(sep + 2)?;
        (fields.get(2) == Some(&want.as_str()) && source.starts_with("/dev/"))
            .then(|| source.to_string())
    })
}

/// The disk the file or directory `path` lives on, looked up in `probe`.
pub fn device_for<'a>(probe: &'a Probe, path: &Path) -> io::Result<&'a Device> {
    let (ma, mi) = device_number(path)?;
    let name = disk_of(Path::new("/sys"), ma, mi)?;
    probe.device(&name).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{} is on {name}, which the probe skipped (loop/ram device)",
                path.display()
            ),
        )
    })
}

/// Where cgroup2 is mounted, from `/proc/self/mountinfo` text.
pub fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|l| {
        let fields: Vec<&str> = l.split_whitespace().collect();
        let sep = fields.iter().position(|f| *f == "-")?;
        (fields.get(sep + 1) == Some(&"cgroup2")).then(|| PathBuf::from(fields[4]))
    })
}

fn io_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("io.") && n != "io.pressure")
        .collect();
    v.sort();
    v
}

fn read_cgroup(mount: &Path) -> CgroupIo {
    let words = |f: &str| {
        read_trim(&mount.join(f))
            .unwrap_or_default()
            .split_whitespace()
            .any(|w| w == "io")
    };
    let child_files = std::fs::read_dir(mount)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| io_files(&e.path()))
        .find(|f| !f.is_empty())
        .unwrap_or_default();
    CgroupIo {
        mount: Some(mount.to_owned()),
        available: words("cgroup.controllers"),
        delegated: words("cgroup.subtree_control"),
        root_files: io_files(mount),
        child_files,
    }
}

/// Bytes an unprivileged writer may still use on the filesystem holding `path` (statvfs).
pub fn available_bytes(path: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path has a NUL byte"))?;
    // SAFETY: `c` is a valid C string and `st` a valid out-pointer.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Sequential direct-I/O throughput measured in a scratch file, bytes per second.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Sequential {
    pub write_bps: f64,
    pub read_bps: f64,
}

const CHUNK: usize = 1 << 20;

/// Write `dir/.uxsched-seq.tmp` with O_DIRECT 1 MiB at a time for at most `budget` (and at
/// most `max_bytes`), fdatasync it, read it back with O_DIRECT for at most `budget`, then
/// remove it. O_DIRECT bypasses the page cache, so the figures are the device's, not RAM's;
/// a filesystem without O_DIRECT (tmpfs) is an error that says so.
pub fn measure_sequential(dir: &Path, budget: Duration, max_bytes: u64) -> io::Result<Sequential> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let path = dir.join(".uxsched-seq.tmp");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "opening {} with O_DIRECT (tmpfs cannot): {e}",
                    path.display()
                ),
            )
        })?;
    let result = (|| {
        let mut buf = AlignedBuf::new(CHUNK);
        buf.as_mut()
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = (i * 7 + 3) as u8);
        let (start, mut written) = (Instant::now(), 0u64);
        while start.elapsed() < budget && written + CHUNK as u64 <= max_bytes {
            file.write_all_at(buf.as_mut(), written)?;
            written += CHUNK as u64;
        }
        file.sync_data()?;
        let write_bps = written as f64 / start.elapsed().as_secs_f64().max(1e-9);
        let (start, mut read) = (Instant::now(), 0u64);
        while start.elapsed() < budget && read < written {
            file.read_exact_at(buf.as_mut(), read)?;
            read += CHUNK as u64;
        }
        let read_bps = read as f64 / start.elapsed().as_secs_f64().max(1e-9);
        Ok(Sequential {
            write_bps,
            read_bps,
        })
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// A heap buffer aligned for O_DIRECT (4 KiB covers every logical block size in use).
struct AlignedBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        let layout = std::alloc::Layout::from_size_align(len, 4096).expect("valid layout");
        // SAFETY: non-zero size; the allocation is checked below and freed in Drop.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, layout }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` points at `layout.size()` initialized bytes we own.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

#[cfg(test)]
#[path = "block_tests.rs"]
mod tests;
