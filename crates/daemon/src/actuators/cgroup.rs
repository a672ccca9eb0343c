//! uxsched's own CPU cgroups: `<cpu hierarchy>/<name>-fg` (high weight) and `<name>-bg` (low
//! weight), created at start and removed at stop. They are siblings directly under the root:
//! a weight only competes with its siblings, so under a common parent of default weight the
//! foreground's 71755 would still be worth one nice-0 autogroup, and an idle foreground would
//! hand the parent's whole weight to the background group.
//!
//! Why cgroups and not only nice: with `kernel.sched_autogroup_enabled=1` every session (setsid)
//! is its own task group, and nice only orders threads *inside* one group — a nice −19 UI thread
//! still gets half the CPU against a nice 0 hog in another session. A cgroup is a task group of
//! its own (tasks in a non-root cgroup leave their autogroup), so the foreground group's weight
//! competes directly with every session's autogroup.
//!
//! cgroup v1 (`cpu` controller, `cpu.shares`) moves single threads through `tasks`; cgroup v2
//! (`cpu.weight`) moves whole processes through `cgroup.procs` (a non-threaded v2 group holds
//! all threads of a process), so restoring one thread there restores its process.

use crate::types::Group;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Which cgroup hierarchy carries the CPU controller uxsched uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// A v1 hierarchy with the `cpu` controller mounted at `mount`.
    V1 { mount: PathBuf },
    /// The v2 hierarchy mounted at `mount`; `cpu` tells whether the cpu controller is enabled.
    V2 { mount: PathBuf, cpu: bool },
}

/// What moving one task into a group moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    Thread,
    Process,
}

/// Parse `/proc/self/mountinfo` text for the v1 `cpu` and the v2 mounts.
pub fn find_mounts(mountinfo: &str) -> (Option<PathBuf>, Option<PathBuf>) {
    let (mut v1_cpu, mut v2) = (None, None);
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mount_point = left.split_whitespace().nth(4);
        let mut r = right.split_whitespace();
        let (fstype, _source, opts) = (r.next(), r.next(), r.next().unwrap_or(""));
        match (fstype, mount_point) {
            (Some("cgroup"), Some(mp)) if opts.split(',').any(|o| o == "cpu") => {
                v1_cpu.get_or_insert_with(|| PathBuf::from(mp));
            }
            (Some("cgroup2"), Some(mp)) => {
                v2.get_or_insert_with(|| PathBuf::from(mp));
            }
            _ => {}
        }
    }
    (v1_cpu, v2)
}

impl Hierarchy {
    /// The hierarchy to use on this machine: v2 if it has the cpu controller (pure v2 systems),
    /// else v1 `cpu`, else v2 without weights (placement only), else none.
    pub fn detect() -> Option<Hierarchy> {
        let info = uxsched_os::procfs::read_to_string("/proc/self/mountinfo").ok()?;
        let (v1, v2) = find_mounts(&info);
        let v2_cpu = v2.as_ref().is_some_and(|m| {
            uxsched_os::procfs::read_to_string(m.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu"))
        });
        match (v1, v2) {
            (_, Some(m)) if v2_cpu => Some(Hierarchy::V2 {
                mount: m,
                cpu: true,
            }),
            (Some(m), _) => Some(Hierarchy::V1 { mount: m }),
            (None, Some(m)) => Some(Hierarchy::V2 {
                mount: m,
                cpu: false,
            }),
            (None, None) => None,
        }
    }

    pub fn mount(&self) -> &Path {
        match self {
            Hierarchy::V1 { mount } | Hierarchy::V2 { mount, .. } => mount,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Hierarchy::V1 { mount } => format!("v1 cpu at {}", mount.display()),
            Hierarchy::V2 { mount, cpu } => format!(
                "v2 at {}{}",
                mount.display(),
                if *cpu {
                    ""
                } else {
                    " (no cpu controller: placement only)"
                }
            ),
        }
    }

    /// A task's cgroup in this hierarchy, relative to the mount ("/" = root), from
    /// `/proc/<tid>/cgroup`.
    pub fn current(&self, tid: i32) -> io::Result<String> {
        let text = uxsched_os::procfs::read_to_string(format!("/proc/{tid}/cgroup"))?;
        self.find_in(&text)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no cpu cgroup line"))
    }

    fn find_in(&self, proc_cgroup: &str) -> Option<String> {
        proc_cgroup.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, ctrls, path) = (f.next()?, f.next()?, f.next()?);
            let hit = match self {
                Hierarchy::V1 { .. } => id != "0" && ctrls.split(',').any(|c| c == "cpu"),
                Hierarchy::V2 { .. } => id == "0" && ctrls.is_empty(),
            };
            hit.then(|| path.to_owned())
        })
    }

    /// Move a task into the cgroup at `rel` (relative to the mount). On v2 this moves its whole
    /// process.
    pub fn move_to(&self, tid: i32, rel: &str) -> io::Result<()> {
        let file = match self {
            Hierarchy::V1 { .. } => "tasks",
            Hierarchy::V2 { .. } => "cgroup.procs",
        };
        let path = self.abs(rel).join(file);
        let mut f = std::fs::OpenOptions::new().write(true).open(&path)?;
        // One write(2) per task: the kernel parses exactly one id per write.
        f.write_all(tid.to_string().as_bytes())
    }

    /// What one placement moves: a thread on v1, a whole process on v2 (a non-threaded v2
    /// group holds every thread of a process; `cgroup.procs` moves them all).
    pub fn granularity(&self) -> Granularity {
        match self {
            Hierarchy::V1 { .. } => Granularity::Thread,
            Hierarchy::V2 { .. } => Granularity::Process,
        }
    }

    /// `shares` in this hierarchy's weight unit: itself on v1, the equivalent `cpu.weight` on v2
    /// (100 ≡ 1024 shares, `uxsched_model::weights::shares_to_cgroup_weight`).
    pub fn native_weight(&self, shares: u64) -> u64 {
        match self {
            Hierarchy::V1 { .. } => shares,
            Hierarchy::V2 { .. } => uxsched_model::weights::shares_to_cgroup_weight(shares),
        }
    }

    fn abs(&self, rel: &str) -> PathBuf {
        self.mount().join(rel.trim_start_matches('/'))
    }
}

/// uxsched's groups in one hierarchy.
#[derive(Debug)]
pub struct Groups {
    pub hierarchy: Hierarchy,
    name: String,
    /// The fg group accepts real-time threads ([`Groups::allow_rt`]).
    takes_rt: bool,
    /// A group other than the root without `cpu.rt_runtime_us` still refuses real-time
    /// threads: cgroup v2 with RT group scheduling ([`Groups::probe_rt`]).
    refuses_rt_without_file: bool,
    /// The thread that makes the moves, once started ([`Groups::move_off_thread`]).
    pub(super) mover: Option<super::mover::Mover>,
}

/// The share of the parent's real-time runtime the fg group gets where RT group scheduling is
/// on: half, so other real-time groups can still be made beside it.
const FG_RT_RUNTIME_SHARE: (u64, u64) = (1, 2);

impl Groups {
    /// Create `<mount>/<name>-fg` and `-bg` (reusing them if a killed daemon left them) and set their
    /// weights.
    pub fn create(
        hierarchy: Hierarchy,
        name: &str,
        fg_shares: u64,
        bg_shares: u64,
    ) -> io::Result<Groups> {
        let mut g = Groups {
            hierarchy,
            name: name.to_owned(),
            takes_rt: false,
            refuses_rt_without_file: false,
            mover: None,
        };
        for group in [Group::Fg, Group::Bg] {
            std::fs::create_dir_all(g.hierarchy.abs(&g.rel(group)))?;
        }
        g.set_weight(Group::Fg, fg_shares)?;
        g.set_weight(Group::Bg, bg_shares)?;
        if let Hierarchy::V2 { cpu: true, .. } = g.hierarchy {
            g.refuses_rt_without_file = g.probe_rt(&g.rel(Group::Fg)).unwrap_or_else(|e| {
                tracing::warn!(
                    "cannot tell whether cgroup v2 groups take real-time threads ({e}); \
                     assuming they do not: the rt lever raises only threads in the root group"
                );
                true
            });
        }
        g.takes_rt = match g.allow_rt() {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(
                    "uxsched's fg group cannot take real-time threads ({e}): the rt lever's \
                     apps stay in their own cgroup, and threads where real time is refused get \
                     the fair boost"
                );
                false
            }
        };
        Ok(g)
    }

    /// Whether the fg group accepts real-time threads, so the rt lever's threads can join it.
    pub fn takes_rt(&self) -> bool {
        self.takes_rt
    }

    /// Whether the cgroup thread `tid` is in now refuses real-time threads (RT group scheduling
    /// with no runtime there: `sched_setscheduler` would fail with EPERM). An unreadable
    /// answer counts as refusing: the caller then uses the fair boost.
    pub fn refuses_rt(&self, tid: i32) -> bool {
        self.hierarchy
            .current(tid)
            .map_or(true, |rel| self.refuses_rt_at(&rel))
    }

    /// Whether the cgroup at `rel` (relative to the mount) refuses real-time threads; an
    /// unreadable answer counts as refusing.
    pub fn refuses_rt_at(&self, rel: &str) -> bool {
        // The root, and our fg group once it was given real-time runtime, need no read (the
        // fast path asks for every new member of the critical set).
        if rel == "/" || (self.takes_rt && self.which(rel) == Some(Group::Fg)) {
            return false;
        }
        let file = self.hierarchy.abs(rel).join("cpu.rt_runtime_us");
        match uxsched_os::procfs::read_to_string(&file) {
            Ok(text) => text.trim() == "0",
            Err(e) if e.kind() == io::ErrorKind::NotFound => self.refuses_rt_without_file,
            Err(_) => true,
        }
    }

    /// Ask the kernel whether the group at `rel` refuses real-time threads: a child process
    /// that only waits is moved there and made `SCHED_FIFO` 1, then killed. cgroup v2 needs
    /// the question: with RT group scheduling (`CONFIG_RT_GROUP_SCHED`) every group but the
    /// root has no real-time runtime, `sched_setscheduler` fails there with EPERM and a
    /// real-time task cannot be moved in (EINVAL), yet v2 has no `cpu.rt_runtime_us` to read
    /// or raise. A refusal counts only if the root takes the same child (so it is the group's,
    /// not a missing `CAP_SYS_NICE`).
    pub fn probe_rt(&self, rel: &str) -> io::Result<bool> {
        let child = Waiter::fork()?;
        self.hierarchy.move_to(child.pid, rel)?;
        match child.make_fifo() {
            Ok(()) => Ok(false),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                self.hierarchy.move_to(child.pid, "/")?;
                child.make_fifo().map(|()| true).map_err(|e| {
                    io::Error::new(e.kind(), format!("no thread can be real-time here: {e}"))
                })
            }
            Err(e) => Err(e),
        }
    }

    /// Let the fg group hold real-time threads. With RT group scheduling (cgroup v1
    /// `cpu.rt_runtime_us`) a new group has no real-time runtime and refuses them; it gets
    /// [`FG_RT_RUNTIME_SHARE`] of the parent's per period — a kernel-enforced bound on the
    /// group's real-time threads beneath the rt lever's own per-thread budget. Without the
    /// file, nothing limits real-time threads by group.
    fn allow_rt(&self) -> io::Result<()> {
        let file = self
            .hierarchy
            .abs(&self.rel(Group::Fg))
            .join("cpu.rt_runtime_us");
        let now = match read_u64(&file) {
            None if !file.exists() && self.refuses_rt_without_file => {
                return Err(io::Error::other(
                    "cgroup v2 with RT group scheduling (CONFIG_RT_GROUP_SCHED) gives every \
                     group but the root no real-time runtime, and v2 has no cpu.rt_runtime_us \
                     to give it some",
                ))
            }
            None if !file.exists() => return Ok(()),
            None => return Err(io::Error::other(format!("{} unreadable", file.display()))),
            Some(now) => now,
        };
        if now > 0 {
            return Ok(());
        }
        // The root's runtime is `kernel.sched_rt_runtime_us`; -1 (no limit) counts as the period.
        let parent =
            uxsched_os::procfs::read_to_string(self.hierarchy.mount().join("cpu.rt_runtime_us"))?;
        let parent = match parent.trim().parse::<i64>() {
            Ok(r) if r >= 0 => r as u64,
            _ => read_u64(&file.with_file_name("cpu.rt_period_us")).unwrap_or(0),
        };
        let want = parent * FG_RT_RUNTIME_SHARE.0 / FG_RT_RUNTIME_SHARE.1;
        if want == 0 {
            return Err(io::Error::other(
                "the parent group has no real-time runtime",
            ));
        }
        std::fs::write(&file, want.to_string()).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("writing {want} to {}: {e}", file.display()),
            )
        })
    }

    /// A group's path relative to the mount, e.g. `/uxsched-fg`.
    pub fn rel(&self, group: Group) -> String {
        format!("/{}-{}", self.name, group.dir())
    }

    /// Which of uxsched's groups a cgroup path is, if any.
    pub fn which(&self, rel: &str) -> Option<Group> {
        [Group::Fg, Group::Bg]
            .into_iter()
            .find(|&g| self.rel(g) == rel)
    }

    /// Set a group's weight given in `cpu.shares` units (written as the equivalent `cpu.weight`
    /// on v2, see [`Hierarchy::native_weight`]); a weight that already holds is not rewritten.
    /// A v2 hierarchy without the cpu controller has no weight to set.
    pub fn set_weight(&self, group: Group, shares: u64) -> io::Result<()> {
        self.ensure_weight(group, shares).map(|_| ())
    }

    /// The current weight in the hierarchy's own unit (`cpu.shares` on v1, `cpu.weight` on v2),
    /// if it has one — compare it with [`Hierarchy::native_weight`], never with shares.
    pub fn weight(&self, group: Group) -> Option<u64> {
        read_u64(&self.weight_file(group)?)
    }

    /// Make a group's weight the equivalent of `shares`, comparing in the hierarchy's own unit
    /// so that a correct value is left alone; `Ok(true)` when it had to be written.
    pub fn ensure_weight(&self, group: Group, shares: u64) -> io::Result<bool> {
        let Some(file) = self.weight_file(group) else {
            return Ok(false);
        };
        let want = self.hierarchy.native_weight(shares);
        match uxsched_os::procfs::read_to_string(&file) {
            Ok(now) if now.trim().parse::<u64>().ok() == Some(want) => return Ok(false),
            // Absent: write it (a cgroupfs without the file then fails the write, saying so).
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        std::fs::write(&file, want.to_string())?;
        Ok(true)
    }

    fn weight_file(&self, group: Group) -> Option<PathBuf> {
        let dir = self.hierarchy.abs(&self.rel(group));
        match &self.hierarchy {
            Hierarchy::V1 { .. } => Some(dir.join("cpu.shares")),
            Hierarchy::V2 { cpu: true, .. } => Some(dir.join("cpu.weight")),
            Hierarchy::V2 { cpu: false, .. } => None,
        }
    }

    /// What can be moved out of a group now: threads on v1, processes on v2.
    pub fn members(&self, group: Group) -> io::Result<Vec<i32>> {
        let file = match self.hierarchy {
            Hierarchy::V1 { .. } => "tasks",
            Hierarchy::V2 { .. } => "cgroup.procs",
        };
        let text =
            uxsched_os::procfs::read_to_string(self.hierarchy.abs(&self.rel(group)).join(file))?;
        Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
    }

    /// Remove the groups (they must be empty: the reconciler moves every task out first).
    pub fn remove(&self) -> io::Result<()> {
        for group in [Group::Fg, Group::Bg] {
            remove_if_present(&self.hierarchy.abs(&self.rel(group)))?;
        }
        Ok(())
    }
}

/// A child process that only waits, for [`Groups::probe_rt`]; killed and reaped on drop.
struct Waiter {
    pid: i32,
}

impl Waiter {
    fn fork() -> io::Result<Waiter> {
        // SAFETY: between fork and its death the child calls only async-signal-safe functions
        // (prctl, getppid, pause, _exit), as a child of a multi-threaded process must.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            0 => unsafe {
                // Dies with the daemon, should it die before the drop below.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() == 1 {
                    libc::_exit(0);
                }
                loop {
                    libc::pause();
                }
            },
            pid => Ok(Waiter { pid }),
        }
    }

    /// `SCHED_FIFO` 1 (reset on fork) for the waiting child.
    fn make_fifo(&self) -> io::Result<()> {
        use uxsched_os::sched::{self, SchedAttr};
        let mut fifo = SchedAttr::ordinary();
        fifo.policy = sched::SCHED_FIFO;
        fifo.priority = 1;
        fifo.flags = sched::SCHED_FLAG_RESET_ON_FORK;
        sched::set(self.pid, &fifo)
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        // SAFETY: `pid` is our child, not yet reaped, so the pid cannot name another process.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

fn remove_if_present(dir: &Path) -> io::Result<()> {
    match std::fs::remove_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

fn read_u64(path: &Path) -> Option<u64> {
    uxsched_os::procfs::read_to_string(path)
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn finds_the_hybrid_layouts_mounts() {
        let (v1, v2) = find_mounts(MOUNTINFO);
        assert_eq!(v1.unwrap(), Path::new("/sys/fs/cgroup/cpu"));
        assert_eq!(v2.unwrap(), Path::new("/sys/fs/cgroup/unified"));
        let (v1, _) = find_mounts("1 1 0:1 / /x rw - cgroup cgroup rw,cpu,cpuacct\n");
        assert_eq!(v1.unwrap(), Path::new("/x"));
    }

    /// The weight files are plain files to these functions: a directory stands in for the mount.
    fn weight_text(dir: &Path, group: &str, file: &str) -> String {
        std::fs::read_to_string(dir.join(format!("ux-{group}")).join(file)).unwrap()
    }

    #[test]
    fn with_rt_group_scheduling_the_fg_group_gets_half_the_parents_rt_runtime() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cpu.rt_runtime_us"), "950000").unwrap();
        for g in ["fg", "bg"] {
            std::fs::create_dir(dir.path().join(format!("ux-{g}"))).unwrap();
            std::fs::write(dir.path().join(format!("ux-{g}/cpu.rt_runtime_us")), "0").unwrap();
        }
        let h = Hierarchy::V1 {
            mount: dir.path().into(),
        };
        let g = Groups::create(h.clone(), "ux", 71755, 128).unwrap();
        assert!(g.takes_rt());
        assert_eq!(weight_text(dir.path(), "fg", "cpu.rt_runtime_us"), "475000");
        assert_eq!(weight_text(dir.path(), "bg", "cpu.rt_runtime_us"), "0");
        // A parent without real-time runtime leaves the fg group refusing them: said, not hidden.
        std::fs::write(dir.path().join("cpu.rt_runtime_us"), "0").unwrap();
        std::fs::write(dir.path().join("ux-fg/cpu.rt_runtime_us"), "0").unwrap();
        assert!(!Groups::create(h, "ux", 71755, 128).unwrap().takes_rt());
        // Without the file (no RT group scheduling, cgroup v2) nothing refuses them.
        let plain = tempfile::tempdir().unwrap();
        let h = Hierarchy::V1 {
            mount: plain.path().into(),
        };
        assert!(Groups::create(h, "ux", 71755, 128).unwrap().takes_rt());
    }

    #[test]
    fn v2_weights_are_the_kernels_equivalent_and_a_correct_one_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let h = Hierarchy::V2 {
            mount: dir.path().into(),
            cpu: true,
        };
        assert_eq!(h.granularity(), Granularity::Process);
        let g = Groups::create(h, "ux", 71755, 128).unwrap();
        assert_eq!(weight_text(dir.path(), "fg", "cpu.weight"), "7007");
        assert_eq!(weight_text(dir.path(), "bg", "cpu.weight"), "13");
        assert_eq!(g.weight(Group::Fg), Some(7007));
        assert!(
            !g.ensure_weight(Group::Fg, 71755).unwrap(),
            "7007 is already right"
        );
        std::fs::write(dir.path().join("ux-fg/cpu.weight"), "2737").unwrap();
        assert!(
            g.ensure_weight(Group::Fg, 71755).unwrap(),
            "a wrong weight is rewritten"
        );
        assert_eq!(weight_text(dir.path(), "fg", "cpu.weight"), "7007");
        std::fs::remove_file(dir.path().join("ux-bg/cpu.weight")).unwrap();
        std::fs::create_dir(dir.path().join("ux-bg/cpu.weight")).unwrap();
        assert!(
            g.ensure_weight(Group::Bg, 128).is_err(),
            "a read error is an error"
        );
    }

    #[test]
    fn v1_weights_are_shares_and_v2_without_cpu_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let h = Hierarchy::V1 {
            mount: dir.path().into(),
        };
        assert_eq!(h.granularity(), Granularity::Thread);
        let g = Groups::create(h, "ux", 71755, 128).unwrap();
        assert_eq!(weight_text(dir.path(), "fg", "cpu.shares"), "71755");
        assert!(!g.ensure_weight(Group::Fg, 71755).unwrap());
        assert!(g.ensure_weight(Group::Fg, 1024).unwrap());
        assert_eq!(g.weight(Group::Fg), Some(1024));
        let dir = tempfile::tempdir().unwrap();
        let h = Hierarchy::V2 {
            mount: dir.path().into(),
            cpu: false,
        };
        let g = Groups::create(h, "ux", 71755, 128).unwrap();
        assert_eq!(g.weight(Group::Fg), None);
        assert!(!g.ensure_weight(Group::Fg, 71755).unwrap());
        assert!(!dir.path().join("ux-fg/cpu.weight").exists());
    }

    #[test]
    fn reads_the_right_line_of_proc_cgroup() {
        let text = "2:cpuacct:/\n1:cpu,cpuacct:/user/a\n0::/init.scope\n";
        let v1 = Hierarchy::V1 { mount: "/m".into() };
        let v2 = Hierarchy::V2 {
            mount: "/m".into(),
            cpu: false,
        };
        assert_eq!(v1.find_in(text).unwrap(), "/user/a");
        assert_eq!(v2.find_in(text).unwrap(), "/init.scope");
    }
}
