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

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io;
use std::time::{Duration, Instant};
use tracing::{debug, warn};
use uxsched_os::identity::TaskId;

/// How often the RT-boosted threads' run time is read while any is boosted and busy.
pub const CHECK: Duration = Duration::from_millis(5);

/// How often it is read once none of them has run for [`QUIET_AFTER`] checks in a row (the
/// user stopped typing): 20 wake-ups a second instead of 200 while nothing happens, at the price
/// of a runaway that starts out of such a quiet being seen up to this much later.
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
}

struct Open {
    schedstat: std::fs::File,
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
                if !uxsched_os::identity::still_same(task) {
                    return Err(io::ErrorKind::NotFound.into()); // the tid was recycled
                }
                let o = Open {
                    schedstat,
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
    /// Lower bound of the stretch it is running now, ns.
    continuous: u64,
    /// Run time in the current busy period, ns.
    episode: u64,
}

impl Track {
    /// Take a new sample; the longest stretch this interval proves and the episode so far.
    fn observe(&mut self, s: Sample) -> (u64, u64) {
        let run = s.run_ns.saturating_sub(self.last.run_ns);
        // No baseline yet (the first interval): no sleeps, which can only demote earlier.
        let ins = match (self.last.sleeps, s.sleeps) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        self.last = s;
        if run == 0 {
            (self.continuous, self.episode) = (0, 0);
            return (0, 0);
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
                    self.tracks.insert(
                        t,
                        Track {
                            last,
                            continuous: 0,
                            episode: 0,
                        },
                    );
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
            let (continuous, episode) = track.observe(s);
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

    /// Threads cooling down now (expired cool-downs are dropped).
    pub fn demoted(&mut self, now: Instant) -> BTreeSet<TaskId> {
        self.demoted.retain(|_, until| *until > now);
        self.demoted.keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    const T: TaskId = TaskId {
        tid: 7,
        pid: 7,
        start: 1,
    };

    fn limits() -> Limits {
        Limits {
            continuous: Duration::from_millis(3),
            episode: Duration::from_millis(12),
            cooldown: Duration::from_millis(100),
        }
    }

    fn ms(x: u64) -> u64 {
        x * 1_000_000
    }

    /// Feed (run ms, sleeps) increments one check at a time; the check that demoted, if any.
    fn run(steps: &[(u64, u64)]) -> Option<usize> {
        run_from(Some(0), steps)
    }

    /// [`run`] from a first sample whose sleep count is `sleeps` (`None`: not read).
    fn run_from(sleeps: Option<u64>, steps: &[(u64, u64)]) -> Option<usize> {
        let now = Cell::new(Sample { run_ns: 0, sleeps });
        let mut b = RtBudget::new(limits());
        b.follow_with([T], |_| Ok(now.get()));
        let start = Instant::now();
        for (i, &(run, ins)) in steps.iter().enumerate() {
            let s = now.get();
            now.set(Sample {
                run_ns: s.run_ns + ms(run),
                sleeps: Some(s.sleeps.unwrap_or(0) + ins),
            });
            if !b.check_with(start, |_| Ok(now.get())).is_empty() {
                assert!(b.demoted(start).contains(&T));
                assert!(!b.active(), "no longer watched");
                return Some(i);
            }
        }
        None
    }

    #[test]
    fn a_busy_loop_is_demoted_at_the_continuous_limit() {
        // Woke during the first interval (that stretch's start is unknown: counted from the
        // check), then ran through two more: 2 + 2 ms without a sleep.
        assert_eq!(run(&[(2, 1), (2, 0), (2, 0)]), Some(2));
        assert_eq!(run(&[(5, 0)]), Some(0));
    }

    #[test]
    fn a_first_interval_without_a_sleep_count_counts_as_one_stretch() {
        // Woke in the first interval and ran on: with a baseline the stretch starts at the
        // first check (demoted at the third); without one the whole interval counts (second).
        assert_eq!(run_from(Some(0), &[(2, 1), (2, 0), (2, 0)]), Some(2));
        assert_eq!(run_from(None, &[(2, 1), (2, 0), (2, 0)]), Some(1));
        // Later intervals have their baseline: sleeps reset the stretch as before.
        assert_eq!(run_from(None, &[(1, 1), (2, 1), (2, 1), (0, 0)]), None);
    }

    #[test]
    fn short_runs_with_sleeps_in_between_are_never_demoted() {
        // 1 ms of work per wake-up, a rest of a whole check interval between them.
        let steps: Vec<_> = (0..100)
            .map(|i| if i % 2 == 0 { (1, 1) } else { (0, 0) })
            .collect();
        assert_eq!(run(&steps), None);
    }

    #[test]
    fn many_short_runs_without_a_rest_use_up_the_episode() {
        // 2 ms per check in 2 stretches each (1 ms each): never 3 ms at once, 12 ms in total.
        assert_eq!(run(&[(2, 2); 10]), Some(5));
        // One long stretch among sleeps: 7 ms in at most 2 stretches proves one ≥ 3.5 ms.
        assert_eq!(run(&[(7, 1)]), Some(0));
    }

    #[test]
    fn cool_downs_expire_and_unreadable_threads_are_never_left_real_time() {
        let mut b = RtBudget::new(limits());
        let n = Cell::new(0u64);
        b.follow_with([T], |_| {
            Ok(Sample {
                run_ns: n.get(),
                sleeps: Some(0),
            })
        });
        n.set(ms(4));
        let t0 = Instant::now();
        let over = b.check_with(t0, |_| {
            Ok(Sample {
                run_ns: n.get(),
                sleeps: Some(0),
            })
        });
        assert_eq!(over, [T]);
        assert!(b.demoted(t0 + Duration::from_millis(99)).contains(&T));
        assert!(b.demoted(t0 + Duration::from_millis(101)).is_empty());
        let gone = b.follow_with([T], |_| Err(io::ErrorKind::NotFound.into()));
        assert_eq!(gone, [T], "unreadable: not real-time");
        assert!(!b.active());
        // Watched, then unreadable while it exists: demoted, not left unbounded.
        let t1 = t0 + Duration::from_secs(1);
        b.follow_with([T], |_| Ok(Sample::default()));
        let denied = || Err(io::Error::from_raw_os_error(libc::EACCES));
        assert_eq!(b.check_with(t1, |_| denied()), [T]);
        assert!(b.demoted(t1).contains(&T));
        // An exited thread is simply no longer watched.
        b.follow_with([T], |_| Ok(Sample::default()));
        assert!(b
            .check_with(t1, |_| Err(io::ErrorKind::NotFound.into()))
            .is_empty());
        assert!(!b.active());
    }

    #[test]
    fn schedstat_is_parsed_and_this_thread_has_run() {
        assert_eq!(parse("123 456 7\n").unwrap(), (123, 7));
        assert!(parse("1 2\n").is_err());
        assert_eq!(
            voluntary("Name:\tx\nvoluntary_ctxt_switches:\t42\n").unwrap(),
            42
        );
        assert!(voluntary("Name:\tx\n").is_err());
        let me = uxsched_os::identity::task_id(std::process::id() as i32).unwrap();
        assert!(read(&me).unwrap().run_ns > 0);
    }

    /// The kept-open reader sees the same run time and sleeps as opening the files afresh,
    /// and a thread's sleep shows up once it was switched in again.
    #[test]
    fn the_reader_follows_a_sleeping_thread_through_one_descriptor() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let me = uxsched_os::identity::task_id(tid).unwrap();
        let mut r = Reader::default();
        let run_and_sleep = || {
            let mut x = 0u64;
            for i in 0..2_000_000u64 {
                x = std::hint::black_box(x.wrapping_add(i));
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let a = r.read(&me).unwrap();
        assert_eq!(a.sleeps, None, "the first read leaves status for later");
        run_and_sleep();
        let b = r.read(&me).unwrap();
        run_and_sleep();
        let c = r.read(&me).unwrap();
        let fresh = read(&me).unwrap();
        assert!(
            b.run_ns > a.run_ns && c.run_ns > b.run_ns,
            "ran: {a:?} {b:?} {c:?}"
        );
        assert!(
            c.sleeps > b.sleeps && b.sleeps.is_some(),
            "slept: {b:?} {c:?}"
        );
        assert!(fresh.run_ns >= c.run_ns && fresh.sleeps >= c.sleeps);
        assert_eq!(r.open.len(), 1, "one descriptor per thread");
        r.retain(|_| false);
        assert!(r.open.is_empty());
    }
}
