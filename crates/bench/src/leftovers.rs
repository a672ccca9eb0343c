//! What a bench run changed beyond its own processes, written down before it changes it, so a
//! run that is killed outright (SIGKILL, the end of a login session) can be undone later.
//!
//! A run's per-thread settings die with its processes; four things do not: the
//! `kernel.sched_autogroup_enabled` switch (the `no-autogroup` layout, the `s76` mode), the
//! CPU cgroups it made (`units`, `android`), its scratch directory, and the processes it
//! started (the load, the model app, a daemon, Xvfb), which run in sessions of their own and
//! would go on burning CPU or holding what they changed. Each run keeps a
//! record of them in [`DIR`], one file per run named by its pid and start time, rewritten
//! whole (temporary file, rename) before each change and removed once all is restored.
//! [`recover`] undoes the records of runs that are gone; every `uxsched bench` and `uxsched
//! demo` calls it first, `uxsched bench restore` on its own, and `make test` before the suite.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use uxsched_os::identity::stat;

/// Where the records live: tmpfs, so a reboot (which undoes all of it) also clears them.
pub const DIR: &str = "/run/uxsched-bench";

#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
struct Record {
    pid: i32,
    /// The run's start time (clock ticks after boot, /proc/<pid>/stat): a recycled pid is not it.
    start: u64,
    /// The autogroup switch before the run first changed it, while it stays changed.
    autogroup_before: Option<bool>,
    /// Cgroups the run created and has not removed yet.
    cgroups: Vec<PathBuf>,
    /// The run's scratch directory, while it exists.
    scratch: Option<PathBuf>,
    /// Processes the run started, each the leader of what it spawns: (pid, start time).
    /// Dead ones are dropped at each update.
    #[serde(default)]
    processes: Vec<(i32, u64)>,
}

impl Record {
    fn is_empty(&self) -> bool {
        self.autogroup_before.is_none()
            && self.cgroups.is_empty()
            && self.scratch.is_none()
            && self.processes.is_empty()
    }
}

/// This process's record, when it has anything in it.
static MINE: Mutex<Option<Record>> = Mutex::new(None);

fn path_of(pid: i32, start: u64) -> PathBuf {
    Path::new(DIR).join(format!("{pid}-{start}.json"))
}

/// Change this process's record with `edit` and write it down (or remove it once empty).
fn update(edit: impl FnOnce(&mut Record)) -> Result<()> {
    let mut mine = MINE.lock().unwrap_or_else(|p| p.into_inner());
    let record = match mine.as_mut() {
        Some(r) => r,
        None => {
            let me = std::process::id() as i32;
            let start = stat(me).context("reading this process's start time")?.start;
            mine.insert(Record {
                pid: me,
                start,
                ..Record::default()
            })
        }
    };
    edit(record);
    record
        .processes
        .retain(|&(pid, start)| same_process(pid, start));
    let path = path_of(record.pid, record.start);
    if record.is_empty() {
        return match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", path.display()))
            }
            _ => Ok(()),
        };
    }
    fs::create_dir_all(DIR).with_context(|| format!("creating {DIR} (needs root)"))?;
    let tmp = path.with_extension("tmp");
    let text = serde_json::to_string_pretty(record).expect("a record serialises");
    fs::write(&tmp, text)
        .and_then(|()| fs::rename(&tmp, &path))
        .with_context(|| format!("writing {}", path.display()))
}

/// Before switching autogroup away from `before` (the first change of a run counts).
pub fn autogroup_changing(before: bool) -> Result<()> {
    update(|r| {
        r.autogroup_before.get_or_insert(before);
    })
}

/// After autogroup is back to what it was before the run.
pub fn autogroup_restored() -> Result<()> {
    update(|r| r.autogroup_before = None)
}

/// Before creating cgroup `dir`.
pub fn cgroup_creating(dir: &Path) -> Result<()> {
    update(|r| {
        if !r.cgroups.iter().any(|c| c == dir) {
            r.cgroups.push(dir.to_path_buf());
        }
    })
}

/// After cgroup `dir` was removed.
pub fn cgroup_removed(dir: &Path) -> Result<()> {
    update(|r| r.cgroups.retain(|c| c != dir))
}

/// Before creating the run's scratch directory, and (`None`) after removing it.
pub fn scratch(dir: Option<&Path>) -> Result<()> {
    update(|r| r.scratch = dir.map(Path::to_path_buf))
}

/// `cmd.spawn()` for a process that must not outlive the run, written down right after it
/// started (pid and start time) so that [`recover`] stops it, with its session and everything
/// below it, if the run is killed; the child is killed if it cannot be written down.
pub fn spawn(cmd: &mut std::process::Command) -> Result<std::process::Child> {
    let mut child = cmd.spawn()?;
    let pid = child.id() as i32;
    let written = stat(pid)
        .with_context(|| format!("reading the start time of process {pid}, just started"))
        .and_then(|s| update(|r| r.processes.push((pid, s.start))));
    if let Err(e) = written {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    Ok(child)
}

/// Drop the processes that have ended (and the record, once nothing is left in it).
pub fn settle() -> Result<()> {
    update(|_| ())
}

/// `pid` still names the process that started at `start` and has not exited.
fn same_process(pid: i32, start: u64) -> bool {
    stat(pid).is_ok_and(|s| s.start == start && s.state != 'Z')
}

/// Undo what runs that are gone left behind; one line per thing undone, for the user.
/// A record whose run is still alive is left alone; so is a value someone changed since
/// (autogroup already back on, a cgroup that is gone).
pub fn recover() -> Result<Vec<String>> {
    let mut done = Vec::new();
    let entries = match fs::read_dir(DIR) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(done),
        Err(e) => return Err(e).with_context(|| format!("listing {DIR}")),
    };
    for entry in entries {
        let path = entry.with_context(|| format!("listing {DIR}"))?.path();
        if path.extension().is_some_and(|e| e == "json") {
            undo_file(&path, &mut done)?;
        }
    }
    Ok(done)
}

fn undo_file(path: &Path, done: &mut Vec<String>) -> Result<()> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let record: Record = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not a bench record ({}); remove it by hand after checking \
             kernel.sched_autogroup_enabled and the uxsched-bench cgroups",
            path.display(),
            text.len()
        )
    })?;
    if same_process(record.pid, record.start) {
        return Ok(());
    }
    let who = format!(
        "a bench run (pid {}) that ended without restoring",
        record.pid
    );
    stop_processes(&record.processes, &who, done);
    if let Some(before) = record.autogroup_before {
        if crate::sys::autogroup() == Some(!before) {
            crate::sys::set_autogroup(before)?;
            done.push(format!(
                "{who} left kernel.sched_autogroup_enabled={}: set back to {}",
                u8::from(!before),
                u8::from(before)
            ));
        }
    }
    for dir in record.cgroups.iter().rev() {
        if dir.exists() {
            crate::cgroup::remove_dir(dir)?;
            done.push(format!("{who} left cgroup {}: removed", dir.display()));
        }
    }
    let scratch = record.scratch.as_deref();
    let runtime = scratch.map(crate::runtime_dir);
    for dir in [scratch, runtime.as_deref()].into_iter().flatten() {
        if dir.exists() {
            fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
            done.push(format!("{who} left {}: removed", dir.display()));
        }
    }
    fs::remove_file(path).with_context(|| format!("removing {}", path.display()))
}

/// SIGTERM first (a daemon restores what it changed on SIGTERM), then, after at most 2 s,
/// SIGKILL to each process with its session and descendants. Only a process that is still
/// the one recorded: a recycled pid is someone else's.
fn stop_processes(recorded: &[(i32, u64)], who: &str, done: &mut Vec<String>) {
    let alive: Vec<(i32, String)> = recorded
        .iter()
        .filter_map(|&(pid, start)| {
            let s = stat(pid)
                .ok()
                .filter(|s| s.start == start && s.state != 'Z')?;
            Some((pid, s.comm))
        })
        .collect();
    for &(pid, _) in &alive {
        crate::sys::signal(pid, libc::SIGTERM);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while std::time::Instant::now() < deadline
        && recorded
            .iter()
            .any(|&(pid, start)| same_process(pid, start))
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for (pid, comm) in alive {
        crate::sys::kill_session(pid);
        done.push(format!(
            "{who} left process {pid} ({comm}) running: stopped"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_an_empty_one_is_empty() {
        let r = Record {
            pid: 7,
            start: 99,
            autogroup_before: Some(true),
            cgroups: vec!["/sys/fs/cgroup/cpu/uxsched-bench-units-7".into()],
            scratch: Some("/var/tmp/uxsched-bench-7".into()),
            processes: vec![(8, 100)],
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), r);
        assert!(!r.is_empty() && Record::default().is_empty());
        assert_eq!(path_of(7, 99), Path::new(DIR).join("7-99.json"));
    }

    #[test]
    #[ignore = "needs root (writes in /run or /dev/shm): make test runs it as root"]
    fn undoing_a_record_removes_its_scratch_and_runtime_directories() {
        let name = format!("uxsched-bench-undo-test-{}", std::process::id());
        let scratch = Path::new("/var/tmp").join(&name);
        let runtime = crate::runtime_dir(&scratch);
        crate::assert_runtime_dir(&runtime, &name);
        for d in [&scratch, &runtime] {
            fs::create_dir_all(d.join("daemon-uxsched")).unwrap();
        }
        let dir = std::env::temp_dir().join(format!("{name}-records"));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("0-1.json");
        // pid 0 is no process: the run is gone.
        let r = Record {
            pid: 0,
            start: 1,
            scratch: Some(scratch.clone()),
            ..Default::default()
        };
        fs::write(&path, serde_json::to_string(&r).unwrap()).unwrap();
        let mut done = Vec::new();
        undo_file(&path, &mut done).unwrap();
        let _ = fs::remove_dir(&dir);
        assert!(
            !scratch.exists() && !runtime.exists() && !path.exists(),
            "{done:?}"
        );
        assert_eq!(done.len(), 2, "{done:?}");
    }
}
