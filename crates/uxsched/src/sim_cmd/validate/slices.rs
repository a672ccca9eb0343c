//! Custom EEVDF slices for the kernel side of `sim validate`. A workload gives a fair task a
//! custom slice with `dl-runtime` (rt-app 1.1+ passes it as `sched_attr.sched_runtime`, and the
//! simulator reads it so); Debian's rt-app 1.0 ignores it on a SCHED_OTHER thread (measured on
//! 6.18: `se.slice` stays the base slice, 1.4 ms). So while rt-app runs, validate sets it
//! itself, as the daemon does: `sched_setattr(SCHED_OTHER, nice, sched_runtime)` on every
//! thread named like the task, re-applied whenever the thread's `se.slice` differs (rt-app sets
//! its own parameters when a thread starts). The first loops of such a thread may run before the
//! slice is set: [`Applied`] says how long after rt-app's start that was. Once every task's
//! threads hold their slice and group and nothing needed writing for [`SETTLE`], the watch slows
//! from every millisecond to every [`SLOW`]: a poller waking every millisecond beside rt-app
//! for the whole run was itself load on the workloads it measures (the `nice-slices` and
//! `cgroups` rows, docs/fidelity.md).

use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the watch looks while threads are starting or being set.
const FAST: Duration = Duration::from_millis(1);
/// How long nothing must need writing, once every task was set, before the watch slows down.
const SETTLE: Duration = Duration::from_millis(100);
/// How often the watch looks after that (rt-app resetting a thread is still undone).
const SLOW: Duration = Duration::from_millis(100);

/// A fair task of the workload that asks for a custom slice.
#[derive(Debug, Clone, PartialEq)]
pub struct Wanted {
    /// The rt-app task name (its threads' `comm`, up to 15 bytes).
    pub name: String,
    pub nice: i32,
    pub slice_ns: u64,
}

/// How the slices were applied during one rt-app run.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Applied {
    pub task: String,
    pub slice_ns: u64,
    /// Milliseconds from rt-app's start to the first `sched_setattr` that held.
    pub first_ms: Option<f64>,
    pub calls: u32,
    pub errors: Vec<String>,
}

/// The fair tasks of the rt-app workload `json` that set `dl-runtime` (µs).
pub fn wanted(json: &serde_json::Value) -> Vec<Wanted> {
    let default_policy = json["global"]["default_policy"]
        .as_str()
        .unwrap_or("SCHED_OTHER");
    let Some(tasks) = json["tasks"].as_object() else {
        return Vec::new();
    };
    tasks
        .iter()
        .filter_map(|(name, t)| {
            let policy = t["policy"].as_str().unwrap_or(default_policy);
            let fair = matches!(policy, "SCHED_OTHER" | "SCHED_BATCH");
            let us = t["dl-runtime"].as_u64().filter(|&u| u > 0 && fair)?;
            Some(Wanted {
                name: name.chars().take(15).collect(),
                nice: t["priority"].as_i64().unwrap_or(0) as i32,
                slice_ns: us * 1000,
            })
        })
        .collect()
}

/// The enforcing thread of one rt-app run.
/// Dropped without [`Enforcer::finish`] (rt-app failed), it stops the thread all the same.
pub struct Enforcer {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Vec<Applied>>>,
}

impl Enforcer {
    /// Watch rt-app's threads (`pid`) every millisecond until [`Enforcer::finish`]: set the
    /// `wanted` slices, and move each thread named like a `placements` task into that group's
    /// `tasks` file ([`super::cgroups`]) once.
    pub fn start(pid: u32, wanted: Vec<Wanted>, placements: Vec<(String, PathBuf)>) -> Enforcer {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let start = Instant::now();
            let mut applied: Vec<Applied> = wanted
                .iter()
                .map(|w| Applied {
                    task: w.name.clone(),
                    slice_ns: w.slice_ns,
                    ..Default::default()
                })
                .collect();
            let mut placed = std::collections::BTreeSet::new();
            let mut groups_seen = std::collections::BTreeSet::new();
            let mut quiet_since = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                let wrote = sweep(pid, &wanted, &mut applied, start);
                let moved = place(pid, &placements, &mut placed, &mut groups_seen);
                if wrote || moved {
                    quiet_since = Instant::now();
                }
                let every_task_set = applied.iter().all(|a| a.first_ms.is_some())
                    && placements.iter().all(|(c, _)| groups_seen.contains(c));
                std::thread::sleep(poll_interval(every_task_set, quiet_since.elapsed()));
            }
            applied
        });
        Enforcer {
            stop,
            handle: Some(handle),
        }
    }

    pub fn finish(mut self) -> Vec<Applied> {
        self.stop.store(true, Ordering::Relaxed);
        let handle = self.handle.take().expect("finished once");
        handle.join().unwrap_or_default()
    }
}

impl Drop for Enforcer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The watch's next sleep: [`FAST`] until every task was set and nothing needed writing for
/// [`SETTLE`], then [`SLOW`].
fn poll_interval(every_task_set: bool, quiet: Duration) -> Duration {
    if every_task_set && quiet >= SETTLE {
        SLOW
    } else {
        FAST
    }
}

/// One pass over rt-app's threads; true when it called `sched_setattr`.
fn sweep(pid: u32, wanted: &[Wanted], applied: &mut [Applied], start: Instant) -> bool {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut wrote = false;
    for entry in dir.flatten() {
        let path = entry.path();
        let Ok(tid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let Some(i) = wanted.iter().position(|w| w.name == comm.trim_end()) else {
            continue;
        };
        let w = &wanted[i];
        if slice_of(&path.join("sched")) == Some(w.slice_ns) {
            continue;
        }
        let a = &mut applied[i];
        a.calls += 1;
        wrote = true;
        match set_slice(tid, w.nice, w.slice_ns) {
            Ok(()) => {
                if a.first_ms.is_none() {
                    a.first_ms = Some(start.elapsed().as_secs_f64() * 1e3);
                }
            }
            Err(e) if a.errors.len() < 3 => a.errors.push(format!("tid {tid}: {e}")),
            Err(_) => {}
        }
    }
    wrote
}

/// One line for the report (the first kernel run's).
pub fn describe(a: &Applied) -> String {
    let when = a.first_ms.map_or("never held".to_string(), |ms| {
        format!("set {ms:.1} ms after rt-app started")
    });
    let errors = if a.errors.is_empty() {
        String::new()
    } else {
        format!("; errors: {}", a.errors.join("; "))
    };
    format!(
        "custom slice of `{}`: {} µs, set by validate (rt-app 1.0 ignores dl-runtime on fair \
         tasks): {when}, {} sched_setattr call(s){errors}",
        a.task,
        a.slice_ns / 1000,
        a.calls
    )
}

/// Move every new thread named like a placed task into its group (`groups_seen`: the tasks
/// with a thread moved); true when it moved one.
fn place(
    pid: u32,
    placements: &[(String, PathBuf)],
    placed: &mut std::collections::BTreeSet<i32>,
    groups_seen: &mut std::collections::BTreeSet<String>,
) -> bool {
    if placements.is_empty() {
        return false;
    }
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut moved = false;
    for entry in dir.flatten() {
        let Ok(tid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if placed.contains(&tid) {
            continue;
        }
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if let Some((name, tasks)) = placements.iter().find(|(c, _)| c == comm.trim_end()) {
            moved = true;
            groups_seen.insert(name.clone());
            match super::cgroups::place(tid, tasks) {
                Ok(()) => {
                    placed.insert(tid);
                }
                Err(e) => {
                    eprintln!(
                        "validate: cannot move thread {tid} to {}: {e}",
                        tasks.display()
                    );
                    placed.insert(tid); // said once
                }
            }
        }
    }
    moved
}

fn slice_of(sched: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(sched).ok()?;
    super::sched_info::parse_slice(&text)
}

/// `struct sched_attr`, version 1 layout (`include/uapi/linux/sched/types.h`).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
    util_min: u32,
    util_max: u32,
}

/// SCHED_OTHER at `nice` with the custom slice `slice_ns` (`sched_runtime`, Linux 6.12+).
fn set_slice(tid: i32, nice: i32, slice_ns: u64) -> std::io::Result<()> {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        nice,
        runtime: slice_ns,
        ..Default::default()
    };
    // SAFETY: `attr` is a valid, initialised sched_attr of the size it declares; the kernel only
    // reads it.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &attr as *const SchedAttr, 0) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watch_slows_only_once_every_task_was_set_and_nothing_changed() {
        assert_eq!(
            poll_interval(false, Duration::from_secs(5)),
            FAST,
            "a task not yet set"
        );
        assert_eq!(
            poll_interval(true, Duration::from_millis(20)),
            FAST,
            "just written"
        );
        assert_eq!(poll_interval(true, SETTLE), SLOW);
    }

    #[test]
    fn fair_tasks_with_dl_runtime_want_a_slice() {
        let json = serde_json::json!({
            "global": {"default_policy": "SCHED_OTHER"},
            "tasks": {
                "short": {"priority": -3, "dl-runtime": 500},
                "plain": {"priority": 0},
                "rt": {"policy": "SCHED_FIFO", "dl-runtime": 500},
                "a-very-long-task-name": {"dl-runtime": 2000}
            }
        });
        let w = wanted(&json);
        assert_eq!(w.len(), 2, "{w:?}");
        // In the file's order (serde_json keeps it: `preserve_order`).
        assert_eq!(
            (w[0].name.as_str(), w[0].nice, w[0].slice_ns),
            ("short", -3, 500_000)
        );
        assert_eq!(
            w[1],
            Wanted {
                name: "a-very-long-tas".into(),
                nice: 0,
                slice_ns: 2_000_000
            }
        );
    }
}
