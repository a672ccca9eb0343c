//! The cgroups of a workload for `sim validate`. rt-app 1.0 (Debian's) has no `taskgroup` key
//! and no key for a weight. So a workload names each task's group with `taskgroup` (the
//! simulator's reader reads it; rt-app 1.0 ignores it) and the groups' weights in uxsched's
//! global key [`KEY`] (`{"/fast": 2048, "/slow": 512}`, `cpu.shares` units; without it a group
//! has 1024), which the simulator's reader reads and validate strips from rt-app's copy. On the
//! kernel side validate makes the simulator's groups with the simulator's shares under the
//! cgroup-v1 `cpu` hierarchy (`/sys/fs/cgroup/cpu/uxsched-validate-<pid>/…`, `cpu.shares`), moves
//! each thread named like a task into its task's group while rt-app runs (the `tasks` file: one
//! thread), and removes the groups afterwards. A thread in a cgroup other than the root is
//! outside autogroup, as in the simulator.

use crate::exit::bad_input;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use uxsched_sim::workload::Workload;

/// The global key with the groups' weights (the simulator's rt-app reader reads it; rt-app does
/// not know it, so it is stripped from rt-app's copy).
pub const KEY: &str = uxsched_sim::workload::rtapp::CGROUP_WEIGHTS;

const CPU_V1: &str = "/sys/fs/cgroup/cpu";

/// The groups of the simulator's workload, by `/path`, with the shares the simulator gives
/// them (1024 unless [`KEY`] says otherwise): the kernel side makes the same groups.
pub fn weights(w: &Workload) -> BTreeMap<String, u64> {
    w.groups
        .iter()
        .map(|g| (format!("/{}", g.path), g.shares))
        .collect()
}

/// Remove [`KEY`] from rt-app's copy of the workload.
pub fn strip(json: &mut serde_json::Value) {
    if let Some(g) = json.get_mut("global").and_then(|g| g.as_object_mut()) {
        g.remove(KEY);
    }
}

/// Each task's group (`taskgroup`), by task name as its threads' `comm`.
pub fn members(json: &serde_json::Value) -> Vec<(String, String)> {
    let Some(tasks) = json["tasks"].as_object() else {
        return Vec::new();
    };
    tasks
        .iter()
        .filter_map(|(name, t)| {
            let g = t["taskgroup"].as_str()?;
            Some((name.chars().take(15).collect(), g.to_string()))
        })
        .collect()
}

/// The groups made for one rt-app run; removed when dropped.
pub struct Groups {
    root: PathBuf,
    made: Vec<PathBuf>,
}

impl Groups {
    /// Make every group of `weights` under a root of its own.
    pub fn make(weights: &BTreeMap<String, u64>, run: &str) -> anyhow::Result<Groups> {
        let cpu = Path::new(CPU_V1);
        if !cpu.join("cpu.shares").exists() {
            return Err(bad_input(format!(
                "the workload's `taskgroup`s: validate places threads in cgroup-v1 `cpu` groups \
                 and finds no {CPU_V1}/cpu.shares on this machine"
            )));
        }
        let root = cpu.join(format!("uxsched-validate-{}-{run}", std::process::id()));
        let mut g = Groups {
            root: root.clone(),
            made: Vec::new(),
        };
        g.mkdir(&root)?;
        for (path, w) in weights {
            let mut dir = root.clone();
            for part in path.split('/').filter(|p| !p.is_empty()) {
                dir.push(part);
                if !g.made.contains(&dir) {
                    g.mkdir(&dir)?;
                }
            }
            std::fs::write(dir.join("cpu.shares"), w.to_string())
                .map_err(|e| bad_input(format!("{}: cpu.shares: {e}", dir.display())))?;
        }
        Ok(g)
    }

    fn mkdir(&mut self, dir: &Path) -> anyhow::Result<()> {
        std::fs::create_dir(dir).map_err(|e| {
            bad_input(format!(
                "{}: cannot make the cgroup ({e}); a workload with `taskgroup` needs root",
                dir.display()
            ))
        })?;
        self.made.push(dir.to_path_buf());
        Ok(())
    }

    /// The `tasks` file of group `path`.
    pub fn tasks_file(&self, path: &str) -> PathBuf {
        let mut dir = self.root.clone();
        dir.extend(path.split('/').filter(|p| !p.is_empty()));
        dir.join("tasks")
    }
}

impl Drop for Groups {
    fn drop(&mut self) {
        // Deepest first; a group still holding a thread (rt-app not reaped) stays, and says so.
        for dir in self.made.iter().rev() {
            if let Err(e) = std::fs::remove_dir(dir) {
                eprintln!("validate: cannot remove cgroup {}: {e}", dir.display());
            }
        }
    }
}

/// Move thread `tid` into the group whose `tasks` file is `tasks`.
pub fn place(tid: i32, tasks: &Path) -> std::io::Result<()> {
    std::fs::write(tasks, tid.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel side gets the simulator's groups with its shares (the key's, else 1024);
    /// rt-app's copy loses the key.
    #[test]
    fn the_kernel_gets_the_simulators_groups_and_rt_app_not_the_key() {
        let mut json = serde_json::json!({
            "global": {"duration": 1, KEY: {"/fast": 2048, "/slow": 512}},
            "tasks": {"a": {"taskgroup": "/fast", "run": 10}, "b": {"taskgroup": "/slow", "run": 10},
                      "d": {"taskgroup": "/other", "run": 10}, "c": {"run": 10}}
        });
        let w = uxsched_sim::workload::rtapp::parse(&json.to_string(), "t.json").unwrap();
        let w = weights(&w);
        assert_eq!(w.get("/fast"), Some(&2048));
        assert_eq!(w.get("/slow"), Some(&512));
        assert_eq!(w.get("/other"), Some(&1024));
        assert_eq!(w.len(), 3);
        assert_eq!(
            members(&json),
            vec![
                ("a".into(), "/fast".into()),
                ("b".into(), "/slow".into()),
                ("d".into(), "/other".into())
            ]
        );
        strip(&mut json);
        assert!(json["global"].get(KEY).is_none());
    }
}
