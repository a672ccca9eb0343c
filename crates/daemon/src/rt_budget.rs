//! The bound of the tracker's `rt` lever (issue 10): every thread uxsched runs at SCHED_FIFO is
//! watched through its scheduler statistics, and one that runs too long is demoted to the fair
//! lever for a cool-down — Qualcomm WALT's MVP rule (3 ms of continuous running, 12 ms in total
//! per episode) adapted to what a daemon can see from outside the kernel:
//!
//! - every [`CHECK`] the daemon reads the thread's total run time from
//!   `/proc/<pid>/task/<tid>/schedstat` (field 1, ns, `se.sum_exec_runtime`; fs/proc/base.c
//!   `proc_pid_schedstat`) and how often it blocked from `…/status` (`voluntary_ctxt_switches`,
//!   `nvcsw`; preemptions — by this daemon's own check among others — do not count). The
//!   schedstat file stays open (one `pread` per check: a seq_file read at offset 0 is generated
//!   afresh), and `status` is read only when schedstat's third field (`sched_info.pcount`, times
//!   switched in) moved: a thread never switched in since the last look cannot have blocked and
//!   come back, and one that blocked and stayed away shows no run time next time (see
//!   [`Reader`]); both files stay open. Measured: 3 µs against 29 + 40 µs for opening both.
//!   When a thread is first followed — on the way from an input to its boost — only schedstat
//!   is opened and read; `status` waits for the guard's first check, and the sleeps of that
//!   first interval, which have no baseline, count as none: it can only be demoted earlier;
//! - *continuous*: no sleep since the last check means the thread has run (or waited to run)
//!   without blocking since before that check, so its run time since then adds to the current
//!   stretch; with k sleeps the interval holds at most k + 1 stretches, so one of them lasted at
//!   least run / (k + 1). Either over `rt_continuous_ms` demotes;
//! - *episode*: a busy period ends when a whole check interval passes without any run time (the
//!   thread slept); the run time of the current busy period over `rt_episode_ms` demotes.
//!
//! The run time of a running thread is brought up to date at each scheduler tick (4 ms at
//! HZ=250), so a runaway is demoted within the limit plus one tick plus one check interval.
//! The checks run on a thread of their own at SCHED_FIFO 99 (`rt_guard.rs`).

use crate::identity::TaskId;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::io;
use std::time::{Duration, Instant};
use tracing::{debug, warn};
use uxsched_os::run_alarm::RunAlarm;

/// How often the RT-boosted threads' run time is read while any is boosted and busy.
pub const CHECK: Duration = Duration::from_millis(5);

/// How often it is read once none of them has run for [`QUIET_AFTER`] checks in a row (the
/// user stopped typing) — or for one check, when every one has its run-time alarm
/// ([`AlarmTo`]), which ends such a wait once a thread has run the continuous limit: 20
/// wake-ups a second instead of 200 while nothing happens. Without alarms a runaway that starts
/// out of such a quiet is seen up to this much later.
pub const QUIET_CHECK: Duration = Duration::from_millis(50);

/// Checks in a row without any run time (100 ms) before the guard slows to [`QUIET_CHECK`].
pub const QUIET_AFTER: u32 = 20;

/// Bound on the remembered demotions and "logged once" threads.
const MAX_REMEMBERED: usize = 4096;

/// A thread's scheduler statistics at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sample {
    /// Total time on a CPU, ns.
    pub run_ns: u64,
    /// Times it blocked (voluntary context switches); `None` until first read (see
    /// [`Reader`]).
    pub sleeps: Option<u64>,
}

/// Read a thread's run time and sleep count (two files opened and read: see [`Reader`] for
/// the cheap way).
pub fn read(task: &TaskId) -> io::Result<Sample> {
    let read = |name| uxsched_os::procfs::read_to_string(task_file(task, name));
    let (run_ns, _) = parse(&read("schedstat")?)?;
    let sleeps = voluntary(&read("status")?)?;
    Ok(Sample {
        run_ns,
        sleeps: Some(sleeps),
    })
}

/// A file of `task`'s directory in /proc (`/proc/PID/task/TID/NAME`).
fn task_file(task: &TaskId, name: &str) -> String {
    format!("/proc/{}/task/{}/{name}", task.pid, task.tid)
}

/// Reads watched threads' samples through their `schedstat` kept open, and their `status` only
/// when they were switched in since the last look — never at the first read, which is on the
/// input's path (`status` is opened at the first read that needs it). A descriptor names the
/// task it was opened for: once that task exits, reads fail with ESRCH, whoever takes its tid.
#[derive(Default)]
pub struct Reader {
    open: HashMap<TaskId, Open>,
    /// Where each watched thread's run-time alarm rings (`None`: no alarms).
    alarm_to: Option<AlarmTo>,
}

/// A [`RunAlarm`] per watched thread rings `signal` at thread `tid` after each `period_ns` of
/// its run time (`rt_guard.rs`: the guard may then sleep while they are idle).
#[derive(Debug, Clone, Copy)]
pub struct AlarmTo {
    pub signal: i32,
    pub tid: i32,
    pub period_ns: u64,
}

struct Open {
    schedstat: std::fs::File,
    /// `None` where perf_event_open was refused: the guard then keeps checking at full rate.
    alarm: Option<RunAlarm>,
    status: Option<std::fs::File>,
    /// `sched_info.pcount` at the last read, and `nvcsw` at the last `status` read.
    pcount: u64,
    sleeps: Option<u64>,
}

impl Reader {
    pub fn read(&mut self, task: &TaskId) -> io::Result<Sample> {
        use std::os::unix::fs::FileExt;
        let (o, first) = match self.open.entry(*task) {
            std::collections::hash_map::Entry::Occupied(o) => (o.into_mut(), false),
            std::collections::hash_map::Entry::Vacant(v) => {
                let schedstat = std::fs::File::open(task_file(task, "schedstat"))?;
                let alarm = self.alarm_to.and_then(|to| {
                    RunAlarm::arm(task.tid, to.period_ns, to.signal, to.tid)
                        .map_err(|e| debug!(tid = task.tid, "no run-time alarm ({e})"))
                        .ok()
                });
                // Both opened before the check: alive now, it was ours at either open.
                if !crate::identity::still_same(task) {
                    return Err(io::ErrorKind::NotFound.into()); // the tid was recycled
                }
                let o = Open {
                    schedstat,
                    alarm,
                    status: None,
                    pcount: 0,
                    sleeps: None,
                };
                (v.insert(o), true)
            }
        };
        let mut buf = [0u8; 96];
        let n = o.schedstat.read_at(&mut buf, 0)?;
        let (run_ns, pcount) = parse(&String::from_utf8_lossy(&buf[..n]))?;
        if !first && pcount != o.pcount {
            let status = match &o.status {
                Some(f) => f,
                // Opened by path, where a recycled tid would name another task: the schedstat
                // descriptor, bound to ours, is read once more after the open and fails (ESRCH)
                // once ours has exited — alive after the open, it was the one opened.
                None => {
                    let f = std::fs::File::open(task_file(task, "status"))?;
                    o.schedstat.read_at(&mut buf, 0)?;
                    o.status.insert(f)
                }
            };
            let mut text = [0u8; 4096];
            let n = status.read_at(&mut text, 0)?;
            o.sleeps = Some(voluntary(&String::from_utf8_lossy(&text[..n]))?);
        }
        o.pcount = pcount;
        Ok(Sample {
            run_ns,
            sleeps: o.sleeps,
        })
    }

    /// Close the descriptors of threads no longer watched.
    fn retain(&mut self, watched: impl Fn(&TaskId) -> bool) {
        self.open.retain(|t, _| watched(t));
    }

    /// Whether every open thread has its run-time alarm (and there is one at least).
    fn all_alarmed(&self) -> bool {
        !self.open.is_empty() && self.open.values().all(|o| o.alarm.is_some())
    }
}

fn voluntary(status: &str) -> io::Result<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "status: no voluntary_ctxt_switches",
            )
        })
}

/// The run time (ns) and the times switched in, from a schedstat line.
fn parse(text: &str) -> io::Result<(u64, u64)> {
    let f: Vec<u64> = text
        .split_whitespace()
        .map(|x| x.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("schedstat: {e}")))?;
    match f[..] {
        [run_ns, _, pcount, ..] => Ok((run_ns, pcount)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "schedstat: fewer than 3 fields",
        )),
    }
}

/// Whether a read failed because the thread is gone.
fn gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH)
}

/// The limits, from `[tracker]`.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub continuous: Duration,
    pub episode: Duration,
    pub cooldown: Duration,
}

impl Limits {
    pub fn of(cfg: &crate::config::Tracker) -> Limits {
        Limits {
            continuous: Duration::from_millis(cfg.rt_continuous_ms),
            episode: Duration::from_millis(cfg.rt_episode_ms),
            cooldown: Duration::from_millis(cfg.rt_cooldown_ms),
        }
    }
}

/// One watched thread.
#[derive(Debug, Clone, Copy)]
struct Track {
    last: Sample,
    /// When `last` was taken.
    at: Instant,
    /// Lower bound of the stretch it is running now, ns.
    continuous: u64,
    /// Run time in the current busy period, ns.
    episode: u64,
}

impl Track {
    fn new(last: Sample) -> Track {
        Track {
            last,
            at: Instant::now(),
            continuous: 0,
            episode: 0,
        }
    }

    /// Take a new sample at `now`; the longest stretch this interval proves and the episode
    /// so far.
    fn observe(&mut self, s: Sample, now: Instant) -> (u64, u64) {
        let run = s.run_ns.saturating_sub(self.last.run_ns);
        // No baseline yet (the first interval): no sleeps, which can only demote earlier.
        let sleeps = match (self.last.sleeps, s.sleeps) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let ins = sleeps.unwrap_or(0);
        let elapsed = now.saturating_duration_since(self.at).as_nanos() as u64;
        (self.last, self.at) = (s, now);
        if run == 0 {
            (self.continuous, self.episode) = (0, 0);
            return (0, 0);
        }
        // A busy period ends with a whole check interval without run time. An interval longer
        // than a check (the guard's quiet waits) can hold such a gap among run time: its idle
        // time is cut into at most sleeps + 2 gaps, so the longest is at least that share. At
        // the full rate the share is always under a check, as before.
        let gap = sleeps.map(|k| elapsed.saturating_sub(run) / (k + 2));
        if gap.is_some_and(|g| g >= CHECK.as_nanos() as u64) {
            self.episode = 0; // all of `run` counts in the new period: never later
        }
        self.continuous = if ins == 0 { self.continuous + run } else { 0 };
        self.episode += run;
        (self.continuous.max(run / (ins + 1)), self.episode)
    }
}

/// Why a thread was demoted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    Continuous,
    Episode,
    /// Its statistics could not be read although it exists: unbounded, so not real-time.
    Unreadable,
}

/// The watchdog: which threads are RT now, their budgets, and which are cooling down.
pub struct RtBudget {
    limits: Limits,
    tracks: HashMap<TaskId, Track>,
    demoted: HashMap<TaskId, Instant>,
    logged: HashSet<TaskId>,
    reader: Reader,
    /// Whether any watched thread ran between the last two checks.
    ran: bool,
}

impl RtBudget {
    pub fn new(limits: Limits) -> RtBudget {
        RtBudget {
            limits,
            tracks: HashMap::new(),
            demoted: HashMap::new(),
            logged: HashSet::new(),
            reader: Reader::default(),
            ran: false,
        }
    }

    /// The threads the policy asks to run real-time from now on: each is watched from a
    /// sample taken now, before the boost is written (never RT without the bound in force); a
    /// thread that cannot be read is left out of the RT set (`Err`) and gets the fair lever.
    pub fn follow(&mut self, wanted: impl IntoIterator<Item = TaskId>) -> Vec<TaskId> {
        let wanted: HashSet<TaskId> = wanted.into_iter().collect();
        self.tracks.retain(|t, _| wanted.contains(t));
        self.follow_more(wanted)
    }

    /// Like [`RtBudget::follow`], but keeps watching the threads followed so far (the fast
    /// path adds new critical threads between passes).
    pub fn follow_more(&mut self, wanted: impl IntoIterator<Item = TaskId>) -> Vec<TaskId> {
        let mut reader = std::mem::take(&mut self.reader);
        let unreadable = self.follow_with(wanted, |t| reader.read(t));
        reader.retain(|t| self.tracks.contains_key(t));
        self.reader = reader;
        unreadable
    }

    fn follow_with(
        &mut self,
        wanted: impl IntoIterator<Item = TaskId>,
        mut read: impl FnMut(&TaskId) -> io::Result<Sample>,
    ) -> Vec<TaskId> {
        let mut unreadable = Vec::new();
        for t in wanted {
            if self.tracks.contains_key(&t) {
                continue;
            }
            match read(&t) {
                Ok(last) => {
                    self.tracks.insert(t, Track::new(last));
                }
                Err(e) => {
                    debug!(tid = t.tid, "cannot read schedstat ({e}); not real-time");
                    unreadable.push(t);
                }
            }
        }
        unreadable
    }

    /// The threads watched now.
    pub fn followed(&self) -> BTreeSet<TaskId> {
        self.tracks.keys().copied().collect()
    }

    /// Whether any thread is watched (the daemon then checks every [`CHECK`]).
    pub fn active(&self) -> bool {
        !self.tracks.is_empty()
    }

    /// One check of every watched thread: the ones over their budget, no longer watched and
    /// cooling down from now (the caller demotes them).
    pub fn check(&mut self, now: Instant) -> Vec<TaskId> {
        let mut reader = std::mem::take(&mut self.reader);
        let over = self.check_with(now, |t| reader.read(t));
        reader.retain(|t| self.tracks.contains_key(t));
        self.reader = reader;
        over
    }

    fn check_with(
        &mut self,
        now: Instant,
        mut read: impl FnMut(&TaskId) -> io::Result<Sample>,
    ) -> Vec<TaskId> {
        let limits = self.limits;
        let mut over = Vec::new();
        let mut ran = false;
        self.tracks.retain(|t, track| {
            let s = match read(t) {
                Ok(s) => s,
                Err(e) if gone(&e) => return false, // exited: the reconciler forgets its row
                Err(_) => {
                    over.push((*t, Over::Unreadable, 0, 0));
                    return false;
                }
            };
            ran |= s.run_ns != track.last.run_ns;
            let (continuous, episode) = track.observe(s, now);
            let why = if continuous >= limits.continuous.as_nanos() as u64 {
                Some(Over::Continuous)
            } else if episode >= limits.episode.as_nanos() as u64 {
                Some(Over::Episode)
            } else {
                None
            };
            if let Some(why) = why {
                over.push((*t, why, continuous, episode));
            }
            why.is_none()
        });
        self.ran = ran;
        for &(t, why, continuous, episode) in &over {
            if self.demoted.len() < MAX_REMEMBERED {
                self.demoted.insert(t, now + limits.cooldown);
            }
            let first = self.logged.len() < MAX_REMEMBERED && self.logged.insert(t);
            let msg = "real-time budget used up; on the fair lever for the cool-down";
            let (cont_us, ep_us) = (continuous / 1000, episode / 1000);
            if first {
                warn!(tid = t.tid, pid = t.pid, ?why, cont_us, ep_us, "{msg}");
            } else {
                debug!(tid = t.tid, pid = t.pid, ?why, cont_us, ep_us, "{msg}");
            }
        }
        over.into_iter().map(|(t, ..)| t).collect()
    }

    /// Whether any watched thread ran between the last two checks.
    pub fn ran(&self) -> bool {
        self.ran
    }

    /// Arm a run-time alarm for each thread followed from now on.
    pub fn alarm_to(&mut self, to: AlarmTo) {
        self.reader.alarm_to = Some(to);
    }

    /// Whether every watched thread rings its alarm when it runs: idle, they need no polling.
    pub fn alarmed(&self) -> bool {
        self.active() && self.reader.all_alarmed()
    }

    /// Threads cooling down now (expired cool-downs are dropped).
    pub fn demoted(&mut self, now: Instant) -> BTreeSet<TaskId> {
        self.demoted.retain(|_, until| *until > now);
        self.demoted.keys().copied().collect()
    }
}

#[cfg(test)]
#[path = "rt_budget_tests.rs"]
mod tests;
