//! A pid-recycling storm: short-lived processes are named to the daemon (`focus`) while they
//! exit, and each freed pid is at once given to a new process (through
//! `/proc/sys/kernel/ns_last_pid`). A recycler is never named: any setting it carries a moment
//! later is a change that landed on a recycled task (identity when named ≠ identity changed).
//!
//! The daemon's identity is (pid, start time), and the start time counts clock ticks (10 ms at
//! USER_HZ 100): a pid re-taken within the same tick is indistinguishable by it. Only root can
//! re-take a pid that fast (`ns_last_pid`; an unprivileged fork loop needs a whole pid_max
//! wrap-around), so the storm waits for the next tick before recycling and counts any recycler
//! that still shares the tick apart (`same_tick`, not inspected).

use super::daemon::Daemon;
use super::settings::{Leftover, Thread};
use anyhow::{Context, Result};
use rand::Rng;
use std::collections::VecDeque;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use uxsched_os::identity::{still_same, task_id, TaskId};

/// How long after its birth a recycler is inspected: past the focus coalescing (100 ms) and a
/// rescan (200 ms).
const SETTLE: Duration = Duration::from_millis(400);
/// More than one clock tick at USER_HZ 100.
const TICK: Duration = Duration::from_millis(12);

#[derive(Debug, Clone, serde::Serialize)]
pub struct StormResult {
    pub mode: String,
    pub processes: u32,
    /// Focus requests the daemon accepted (the rest named a process already gone).
    pub focus_accepted: u32,
    /// Pids taken over by a new process right after the named one exited (in a later tick).
    pub recycled: u32,
    /// Recyclers born in the named process's clock tick (same identity): left out.
    pub same_tick: u32,
    /// Recyclers inspected while still running (all of `recycled` unless one died early).
    pub inspected: u32,
    /// Recyclers found with a changed setting: the daemon acted on the wrong task.
    pub landed_on_recycled: Vec<Leftover>,
    pub journal_rows: usize,
    pub daemon_crashes: u32,
}

/// `sleep SECS` in a session of its own (so no autogroup is shared with this process).
fn spawn_sleep(secs: &str) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new("sleep");
    cmd.arg(secs).stdin(Stdio::null());
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    cmd.spawn()
}

/// A new process on exactly `pid`, or `None` when another process took it first.
fn recycle(pid: i32) -> Result<Option<(Child, TaskId)>> {
    std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string())
        .context("writing /proc/sys/kernel/ns_last_pid (needs root)")?;
    let mut c = spawn_sleep("60")?;
    if c.id() as i32 != pid {
        let _ = c.kill();
        let _ = c.wait();
        return Ok(None);
    }
    match task_id(pid) {
        Ok(id) => Ok(Some((c, id))),
        Err(_) => Ok(None),
    }
}

pub fn run(
    exe: &Path,
    scratch: &Path,
    mode: &str,
    processes: u32,
    rng: &mut impl Rng,
) -> Result<StormResult> {
    // What an untouched process of this kind looks like.
    let mut reference = spawn_sleep("5")?;
    std::thread::sleep(Duration::from_millis(20));
    let want = Thread::read(reference.id() as i32).context("reading a fresh process")?;
    let _ = reference.kill();
    let _ = reference.wait();

    let mut daemon = Daemon::new(exe, &scratch.join(format!("storm-{mode}")))?;
    daemon.start(mode)?;
    let mut r = StormResult {
        mode: mode.to_owned(),
        processes,
        focus_accepted: 0,
        recycled: 0,
        same_tick: 0,
        inspected: 0,
        landed_on_recycled: Vec::new(),
        journal_rows: 0,
        daemon_crashes: 0,
    };
    let mut pending: VecDeque<(Instant, Child, TaskId, TaskId)> = VecDeque::new();
    for _ in 0..processes {
        let life = format!("0.00{}", rng.gen_range(1..10));
        let born = Instant::now();
        let mut named = spawn_sleep(&life)?;
        let pid = named.id() as i32;
        let named_id = task_id(pid).ok();
        if daemon.focus(Some(pid)).is_ok() {
            r.focus_accepted += 1;
        }
        named.wait()?;
        // Past the named process's clock tick (see above).
        std::thread::sleep(TICK.saturating_sub(born.elapsed()));
        if let (Some(named_id), Some((mut c, id))) = (named_id, recycle(pid)?) {
            if id.start == named_id.start {
                r.same_tick += 1;
                let _ = c.kill();
                let _ = c.wait();
            } else {
                r.recycled += 1;
                pending.push_back((Instant::now(), c, named_id, id));
            }
        }
        while pending.front().is_some_and(|p| p.0.elapsed() > SETTLE) {
            let (_, c, named_id, id) = pending.pop_front().unwrap();
            r.inspected += u32::from(inspect(c, named_id, id, &want, &mut r.landed_on_recycled));
        }
        if !daemon.alive() {
            daemon.start(mode)?;
        }
    }
    std::thread::sleep(SETTLE);
    for (_, c, named_id, id) in pending.drain(..) {
        r.inspected += u32::from(inspect(c, named_id, id, &want, &mut r.landed_on_recycled));
    }
    daemon.stop()?;
    r.journal_rows = daemon.journal_rows()?;
    r.daemon_crashes = daemon.crashes;
    Ok(r)
}

/// Compare a live recycler with an untouched process. A recycler is our unreaped child, so its
/// pid cannot be taken again; it must still run (an exited task shows the root cgroups).
fn inspect(
    mut c: Child,
    named: TaskId,
    id: TaskId,
    want: &Thread,
    out: &mut Vec<Leftover>,
) -> bool {
    let now = Thread::read(id.tid).filter(|_| still_same(&id));
    let inspected = now.is_some();
    if let Some(now) = now {
        let changes = now.diff(want);
        if !changes.is_empty() {
            out.push(Leftover {
                what: format!(
                    "pid {} named with start time {}, recycled by a process started at {}",
                    id.pid, named.start, id.start
                ),
                changes,
            });
        }
    }
    let _ = c.kill();
    let _ = c.wait();
    inspected
}
