//! Two cgroups of different weight for `sim validate`. rt-app 1.0 (Debian's) has no
//! `taskgroup` key and no key for a weight, and the simulator's rt-app reader gives every
//! `taskgroup` the default 1024 shares. So a workload names each task's group with `taskgroup`
//! (the simulator reads it; rt-app 1.0 ignores it) and the groups' weights in a validate-only
//! global key, [`KEY`] (`{"/fast": 2048, "/slow": 512}`, `cpu.shares` units), which validate
//! removes before either side reads the file. On the kernel side it makes the groups under the
//! cgroup-v1 `cpu` hierarchy (`/sys/fs/cgroup/cpu/uxsched-validate-<pid>/…`, `cpu.shares`), moves
//! each thread named like a task into its task's group while rt-app runs (the `tasks` file: one
//! thread), and removes the groups afterwards; on the simulator's side it sets the groups'
//! shares. A thread in a cgroup other than the root is outside autogroup, as in the simulator.

use crate::exit::bad_input;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The validate-only global key with the groups' weights.
pub const KEY: &str = "uxsched_cgroup_weights";

const CPU_V1: &str = "/sys/fs/cgroup/cpu";

/// The weights the workload asks for, by group path.
pub fn weights(json: &serde_json::Value) -> anyhow::Result<BTreeMap<String, u64>> {
    let Some(obj) = json["global"].get(KEY) else {
        return Ok(BTreeMap::new());
    };
    let obj = obj
        .as_object()
        .ok_or_else(|| bad_input(format!("global.{KEY}: an object of group path → weight")))?;
    obj.iter()
        .map(|(path, w)| {
            let w = w
                .as_u64()
                .filter(|w| (2..=262_144).contains(w))
                .ok_or_else(|| {
                    bad_input(format!(
                        "global.{KEY}.{path}: a cpu.shares weight, 2..=262144"
                    ))
                })?;
            if !path.starts_with('/') || path.contains("..") {
                return Err(bad_input(format!(
                    "global.{KEY}: `{path}` is not a /group path"
                )));
            }
            Ok((path.clone(), w))
        })
        .collect()
}

/// Remove [`KEY`] from the workload (rt-app and the simulator's reader both refuse or ignore it).
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
                "{KEY}: validate places threads in cgroup-v1 `cpu` groups and finds no \
                 {CPU_V1}/cpu.shares on this machine"
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
                "{}: cannot make the cgroup ({e}); {KEY} needs root",
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

    #[test]
    fn weights_are_read_checked_and_stripped() {
        let mut json = serde_json::json!({
            "global": {"duration": 1, KEY: {"/fast": 2048, "/slow": 512}},
            "tasks": {"a": {"taskgroup": "/fast"}, "b": {"taskgroup": "/slow"}, "c": {}}
        });
        let w = weights(&json).unwrap();
        assert_eq!(w.get("/fast"), Some(&2048));
        assert_eq!(w.get("/slow"), Some(&512));
        assert_eq!(
            members(&json),
            vec![("a".into(), "/fast".into()), ("b".into(), "/slow".into())]
        );
        strip(&mut json);
        assert!(json["global"].get(KEY).is_none());
        assert!(weights(&json).unwrap().is_empty());
        let bad = serde_json::json!({"global": {KEY: {"/x": 1}}});
        assert!(weights(&bad).is_err());
        let bad = serde_json::json!({"global": {KEY: {"x/../y": 100}}});
        assert!(weights(&bad).is_err());
    }
}
