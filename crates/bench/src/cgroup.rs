//! A temporary low-share CPU group for background processes (Android's `background` group),
//! on cgroup v1 (`cpu.shares` under /sys/fs/cgroup/cpu) or v2 (`cpu.weight`). It is removed
//! on restore after its members are moved back to where they came from (the parent).

use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};

const V1_ROOT: &str = "/sys/fs/cgroup/cpu";
const V2_ROOT: &str = "/sys/fs/cgroup";

#[derive(Debug)]
pub struct CpuGroup {
    dir: PathBuf,
    v1: bool,
}

/// Which hierarchy carries the cpu controller here (v1 first: VISION's hybrid layout).
fn cpu_root() -> Result<(PathBuf, bool)> {
    if Path::new(V1_ROOT).join("cpu.shares").exists() {
        return Ok((V1_ROOT.into(), true));
    }
    let controllers = fs::read_to_string(Path::new(V2_ROOT).join("cgroup.controllers"));
    if controllers.is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu")) {
        return Ok((V2_ROOT.into(), false));
    }
    bail!("no cpu cgroup controller: neither {V1_ROOT}/cpu.shares nor cpu in {V2_ROOT}/cgroup.controllers")
}

impl CpuGroup {
    /// Create `name` (a path below the cpu root; its parent must exist) with `shares` in v1 units (1024 = a nice-0 task); v2 weight = shares·100/1024.
    pub fn create(name: &str, shares: u64) -> Result<CpuGroup> {
        let (root, v1) = cpu_root()?;
        let dir = root.join(name);
        if !dir.exists() {
            crate::leftovers::cgroup_creating(&dir)?;
            fs::create_dir(&dir).with_context(|| format!("creating cgroup {}", dir.display()))?;
        }
        let group = CpuGroup { dir, v1 };
        let (file, value) = if v1 {
            ("cpu.shares", shares)
        } else {
            ("cpu.weight", (shares * 100 / 1024).max(1))
        };
        fs::write(group.dir.join(file), value.to_string())
            .with_context(|| format!("writing {}/{file}", group.dir.display()))?;
        Ok(group)
    }

    /// Move a process (all its threads) into the group.
    pub fn add(&self, pid: i32) -> Result<()> {
        match fs::write(self.dir.join("cgroup.procs"), pid.to_string()) {
            Ok(()) => Ok(()),
            // The process exited between listing and moving it.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
            Err(e) => {
                Err(e).with_context(|| format!("moving pid {pid} into {}", self.dir.display()))
            }
        }
    }

    pub fn contains(&self, pid: i32) -> bool {
        fs::read_to_string(self.dir.join("cgroup.procs"))
            .is_ok_and(|s| s.lines().any(|l| l.trim() == pid.to_string()))
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Whether this is the v1 `cpu` hierarchy (`cpu.shares`) rather than v2 (`cpu.weight`).
    pub fn is_v1(&self) -> bool {
        self.v1
    }

    /// Let child groups have their own weight: v2 needs `+cpu` in the parent's
    /// `cgroup.subtree_control`; v1 controllers apply at every level already.
    pub fn delegate_cpu(&self) -> Result<()> {
        if self.v1 {
            return Ok(());
        }
        let file = self.dir.join("cgroup.subtree_control");
        fs::write(&file, "+cpu").with_context(|| format!("writing +cpu to {}", file.display()))
    }

    /// Move the members back to the parent and remove the directory.
    pub fn remove(&self) -> Result<()> {
        remove_dir(&self.dir)?;
        crate::leftovers::cgroup_removed(&self.dir)
    }
}

/// Move a cgroup's members back to its parent and remove it.
pub fn remove_dir(dir: &Path) -> Result<()> {
    let parent = dir.parent().context("cgroup without parent")?;
    for _ in 0..50 {
        let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines() {
            let _ = fs::write(parent.join("cgroup.procs"), pid);
        }
        if fs::remove_dir(dir).is_ok() || !dir.exists() {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    bail!(
        "could not remove cgroup {} (still busy); remove it by hand with rmdir once empty",
        dir.display()
    )
}
