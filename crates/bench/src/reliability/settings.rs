//! Every setting the daemon may change, read straight from the kernel, and the differences
//! between two readings: per thread nice, policy, flags, slice, I/O priority and cgroups; per
//! process (= per session) the autogroup nice; per cgroup its CPU weight.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use uxsched_os::{autogroup, ioprio, sched};

/// What one thread looks like to the scheduler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    pub policy: u32,
    pub flags: u64,
    pub nice: i32,
    /// The fair slice in ns (`sched_runtime`), the kernel's default unless someone set one.
    pub slice: u64,
    pub ioprio: u16,
    /// `/proc/<tid>/cgroup`, every hierarchy.
    pub cgroups: String,
    /// The session's autogroup nice (`/proc/<tid>/autogroup`); `None` where the kernel shows
    /// none (autogroup off, or the boot session).
    pub autogroup: Option<i32>,
}

impl Thread {
    /// `None` once the thread has exited (any read failing with ESRCH/ENOENT).
    pub fn read(tid: i32) -> Option<Thread> {
        let a = sched::get(tid).ok()?;
        Some(Thread {
            policy: a.policy,
            flags: a.flags,
            nice: a.nice,
            slice: a.runtime,
            ioprio: ioprio::get(tid).ok()?,
            cgroups: std::fs::read_to_string(format!("/proc/{tid}/cgroup")).ok()?,
            autogroup: autogroup::get(tid).ok(),
        })
    }

    /// Each field that differs from `want`, as `name want→now`.
    pub fn diff(&self, want: &Thread) -> Vec<String> {
        let mut d = Vec::new();
        let mut field = |name: &str, a: String, b: String| {
            if a != b {
                d.push(format!("{name} {a}→{b}"));
            }
        };
        field("policy", want.policy.to_string(), self.policy.to_string());
        field("flags", want.flags.to_string(), self.flags.to_string());
        field("nice", want.nice.to_string(), self.nice.to_string());
        field("slice_ns", want.slice.to_string(), self.slice.to_string());
        field("ioprio", want.ioprio.to_string(), self.ioprio.to_string());
        field("cgroup", one_line(&want.cgroups), one_line(&self.cgroups));
        field(
            "autogroup",
            format!("{:?}", want.autogroup),
            format!("{:?}", self.autogroup),
        );
        d
    }
}

fn one_line(cgroups: &str) -> String {
    cgroups.trim().replace('\n', " ")
}

/// A setting left changed: which task (and whose), and what differs.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Leftover {
    pub what: String,
    pub changes: Vec<String>,
}

impl fmt::Display for Leftover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.changes.join(", "))
    }
}

/// The CPU weight files of every cgroup directory named in `cgroups` (`/proc/<pid>/cgroup`
/// text): v1 `cpu.shares` under the `cpu` mount, v2 `cpu.weight` under the unified mount (a
/// root cgroup has none).
pub fn cgroup_weights(cgroups: &str) -> io::Result<BTreeMap<String, String>> {
    let mounts = cgroup_mounts()?;
    let mut out = BTreeMap::new();
    for line in cgroups.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(ctrls), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let (mount, file) = if id == "0" {
            (mounts.iter().find(|(_, v2)| *v2), "cpu.weight")
        } else if ctrls.split(',').any(|c| c == "cpu") {
            (
                mounts.iter().find(|(m, v2)| !v2 && is_cpu_mount(m)),
                "cpu.shares",
            )
        } else {
            continue;
        };
        let Some((mount, _)) = mount else { continue };
        let p = format!("{mount}{}/{file}", path.trim_end_matches('/'));
        match std::fs::read_to_string(&p) {
            Ok(v) => {
                out.insert(p, v.trim().to_owned());
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io::Error::new(e.kind(), format!("{p}: {e}"))),
        }
    }
    Ok(out)
}

fn is_cpu_mount(mount: &str) -> bool {
    std::path::Path::new(mount).join("cpu.shares").exists()
}

/// Mount points of cgroup hierarchies, with whether each is v2.
pub fn cgroup_mounts() -> io::Result<Vec<(String, bool)>> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(info
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let fstype = right.split_whitespace().next()?;
            let mount = left.split_whitespace().nth(4)?.to_owned();
            match fstype {
                "cgroup2" => Some((mount, true)),
                "cgroup" => Some((mount, false)),
                _ => None,
            }
        })
        .collect())
}

/// Directories named `<name>-*` left under any cgroup mount (the daemon's groups).
pub fn leftover_groups(name: &str) -> io::Result<Vec<String>> {
    let prefix = format!("{name}-");
    let mut out = Vec::new();
    for (mount, _) in cgroup_mounts()? {
        for e in std::fs::read_dir(mount)? {
            let e = e?;
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                out.push(e.path().display().to_string());
            }
        }
    }
    Ok(out)
}

/// The threads of a process (empty once it has exited).
pub fn threads(pid: i32) -> Vec<i32> {
    uxsched_os::identity::threads(pid)
}

/// RSS of a process in KiB (`VmRSS`).
pub fn rss_kib(pid: i32) -> Option<u64> {
    crate::sys::status_kib(pid, "VmRSS")
}
