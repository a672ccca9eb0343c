//! The real-time request API (protocol v1, docs/api.md; seed 002 §III.B): an app asks, for a
//! thread of its own process, for real time (SCHED_FIFO/RR), a higher priority (nice) or a
//! latency hint (a custom slice). A grant is one more source of desired settings: [`Grants`]
//! merges them into the mode's [`Desired`], so the reconciler applies, journals and restores
//! them exactly like everything else (and crash recovery undoes them).
//!
//! Approval and limits, checked in this order, each refusal with its reason: the API is on;
//! the thread is the caller's own ([`peer`]); a `[[rtapi.allow]]` rule lets this uid and
//! executable ask for that much; real time only while RT is not suspended by the [`canary`],
//! below the machine-wide bound, and for a process whose hard RLIMIT_RTTIME is at most
//! `rttime_max_us` (rtkit's rule); the user's thread and process caps; the user's rate.
//!
//! A grant ends on `reset`, when its thread exits, when the connection that asked closes
//! (unless it asked `until: exit`), when the canary trips (RT only) and when the daemon stops.
//!
//! The other requests — dependencies ([`deps`]), performance-hint sessions ([`hint`]) and
//! interaction hints ([`interact`]) — are routed in `more.rs` and merged after the grants.

pub mod canary;
pub mod deps;
pub mod hint;
pub mod interact;
mod more;
pub mod rtkit;

use crate::config::rtapi::RtApi;
use crate::types::{Desired, Rt, RtPolicy};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};
use tracing::{info, warn};
use uxsched_client::proto::{Ask, Policy, Refusal, Request, Until};
use uxsched_os::identity::{self, TaskId};
use uxsched_os::peer::{self, Caller, Peer};

/// A refusal: the machine-readable reason and what to do, in words.
pub type Refused = (Refusal, String);

/// One thread's grant.
#[derive(Debug, Clone)]
struct Grant {
    uid: u32,
    /// The connection that asked (its closing ends a `Close` grant).
    conn: u64,
    until: Until,
    ask: Ask,
}

pub struct Grants {
    cfg: RtApi,
    grants: BTreeMap<TaskId, Grant>,
    /// Each user's granted requests within the rate window.
    recent: HashMap<u32, VecDeque<Instant>>,
    /// RT is refused until then (the canary tripped).
    rt_suspended_until: Option<Instant>,
    /// The RT bound was hit and not yet left (logged once per episode).
    at_bound: bool,
    deps: deps::Deps,
    hints: hint::Hints,
    interactions: interact::Interactions,
    /// The last request changed nothing the kernel holds (a hint report within a level).
    quiet: bool,
}

impl Grants {
    pub fn new(cfg: RtApi) -> Grants {
        let d = crate::config::Config::default();
        let ui = interact::UiBoost {
            nice: d.min_nice,
            slice_ns: d.uxsched.slice_us * 1000,
        };
        let max = Duration::from_millis(cfg.interaction_max_ms);
        let uclamp_high = cfg.hint_uclamp_max;
        Grants {
            cfg,
            grants: BTreeMap::new(),
            recent: HashMap::new(),
            rt_suspended_until: None,
            at_bound: false,
            deps: deps::Deps::default(),
            // EEVDF's base slice before scaling by CPUs; the daemon passes the measured one.
            hints: hint::Hints::new(3_000_000, uclamp_high),
            interactions: interact::Interactions::new(ui, max),
            quiet: false,
        }
    }

    /// The daemon's user-interactive boost (interaction hints get it) and the kernel's default
    /// slice (hint sessions never get a longer one).
    pub fn with_boosts(mut self, ui: interact::UiBoost, default_slice_ns: u64) -> Grants {
        let max = Duration::from_millis(self.cfg.interaction_max_ms);
        self.interactions = interact::Interactions::new(ui, max);
        self.hints = hint::Hints::new(default_slice_ns, self.cfg.hint_uclamp_max);
        self
    }

    /// Check `req` from `peer` on connection `conn` and record it; the caller then reconciles
    /// and answers with [`Grants::answer`].
    pub fn request(&mut self, peer: &Peer, conn: u64, req: &Request) -> Result<TaskId, Refused> {
        if !self.cfg.enabled {
            return Err((
                Refusal::Disabled,
                "the real-time API is off here (`[rtapi] enabled = false`)".into(),
            ));
        }
        let caller = peer::thread_of(peer, req.tid).map_err(|e| (Refusal::Identity, e))?;
        self.quiet = false;
        if req.ask == Ask::Reset {
            self.grants.remove(&caller.task);
            self.deps.forget(&caller.task);
            self.interactions.end(&caller.task);
            return Ok(caller.task);
        }
        if let Some(done) = self.more(&caller, conn, req) {
            return done.map(|()| caller.task);
        }
        self.approve(&caller, &req.ask)?;
        self.limits(&caller, &req.ask)?;
        let now = Instant::now();
        self.recent.entry(caller.uid).or_default().push_back(now);
        let grant = Grant {
            uid: caller.uid,
            conn,
            until: req.until,
            ask: req.ask,
        };
        info!(
            tid = caller.task.tid,
            pid = caller.task.pid,
            uid = caller.uid,
            "grant: {:?} until {:?}",
            req.ask,
            req.until
        );
        self.grants.insert(caller.task, grant);
        Ok(caller.task)
    }

    /// The approval rules: what this uid and executable may ask for.
    fn approve(&self, c: &Caller, ask: &Ask) -> Result<(), Refused> {
        let exe = c.exe.as_deref();
        let who = format!(
            "uid {} running {}",
            c.uid,
            exe.map_or("(unknown executable)".into(), |e| e.display().to_string())
        );
        let Some(rule) = self.cfg.rule(c.uid, exe) else {
            return Err((
                Refusal::NotAllowed,
                format!("no `[[rtapi.allow]]` rule matches {who}; the administrator can add one"),
            ));
        };
        let bad = |m: String| Err((Refusal::BadRequest, m));
        match *ask {
            Ask::Realtime { priority, .. } if !(1..=99).contains(&priority) => bad(format!(
                "priority {priority} is not a real-time priority (1..=99)"
            )),
            Ask::Realtime { priority, .. } if priority > rule.max_rt_priority => Err((
                Refusal::NotAllowed,
                format!(
                    "priority {priority} is above {} for {who} (`max_rt_priority` of its \
                     `[[rtapi.allow]]` rule); ask for at most that",
                    rule.max_rt_priority
                ),
            )),
            Ask::HighPriority { nice } if !(-20..=19).contains(&nice) => {
                bad(format!("nice {nice} is not a nice level (-20..=19)"))
            }
            Ask::HighPriority { nice } if nice < rule.min_nice => Err((
                Refusal::NotAllowed,
                format!(
                    "nice {nice} is below {} for {who} (`min_nice` of its `[[rtapi.allow]]` \
                     rule); ask for at least that",
                    rule.min_nice
                ),
            )),
            Ask::Latency { slice_us } if !(100..=100_000).contains(&slice_us) => bad(format!(
                "slice {slice_us} µs is outside the kernel's 100..=100000 µs"
            )),
            // A default slice of 0: a kernel before 6.12, which gives a fair thread no slice of
            // its own.
            Ask::Latency { .. } if self.hints.default_slice_ns() == 0 => Err((
                Refusal::NotApplied,
                "this kernel gives fair threads no slice of their own (Linux 6.12 added \
                 custom slices): ask for high_priority instead"
                    .into(),
            )),
            _ => Ok(()),
        }
    }

    /// rtkit's limits: the canary, the RT bound, RLIMIT_RTTIME, per-user caps, the rate.
    fn limits(&mut self, c: &Caller, ask: &Ask) -> Result<(), Refused> {
        let others = || self.grants.iter().filter(move |(t, _)| **t != c.task);
        if matches!(ask, Ask::Realtime { .. }) {
            if let Some(until) = self.rt_suspended_until.filter(|u| *u > Instant::now()) {
                return Err((
                    Refusal::Canary,
                    format!(
                        "real time is suspended for {} s more: the canary found ordinary \
                         threads starved by real-time ones",
                        until.saturating_duration_since(Instant::now()).as_secs()
                    ),
                ));
            }
            let rt = others().filter(|(_, g)| is_rt(&g.ask)).count();
            if rt >= self.cfg.max_rt_threads {
                if !self.at_bound {
                    warn!(
                        rt,
                        "real-time grants at their bound (`max_rt_threads`): refusing more — \
                         many apps claiming real time at once defeat it (seed 002)"
                    );
                }
                self.at_bound = true;
                return Err((
                    Refusal::RtBound,
                    format!(
                        "{rt} threads already hold real-time grants, the machine's bound \
                         (`max_rt_threads`); try again later or ask for high_priority"
                    ),
                ));
            }
            self.at_bound = false;
            self.rttime_ok(c.task.pid)?;
        }
        let mine: Vec<_> = others().filter(|(_, g)| g.uid == c.uid).collect();
        if mine.len() >= self.cfg.max_threads_per_user {
            return Err((
                Refusal::UserCap,
                format!(
                    "uid {} already has grants on {} threads (`max_threads_per_user`); reset some",
                    c.uid,
                    mine.len()
                ),
            ));
        }
        let pids: HashSet<i32> = mine.iter().map(|(t, _)| t.pid).collect();
        if !pids.contains(&c.task.pid) && pids.len() >= self.cfg.max_processes_per_user {
            return Err((
                Refusal::UserCap,
                format!(
                    "uid {} already has grants in {} processes (`max_processes_per_user`)",
                    c.uid,
                    pids.len()
                ),
            ));
        }
        self.rate(c.uid)
    }

    /// The user's rate: at most `rate_max` granted requests per `rate_window_ms`.
    fn rate(&mut self, uid: u32) -> Result<(), Refused> {
        let window = Duration::from_millis(self.cfg.rate_window_ms);
        let recent = self.recent.entry(uid).or_default();
        while recent.front().is_some_and(|t| t.elapsed() > window) {
            recent.pop_front();
        }
        if recent.len() >= self.cfg.rate_max as usize {
            return Err((
                Refusal::RateLimit,
                format!(
                    "uid {} made {} requests in the last {} ms (`rate_max`); slow down",
                    uid,
                    recent.len(),
                    self.cfg.rate_window_ms
                ),
            ));
        }
        Ok(())
    }

    fn rttime_ok(&self, pid: i32) -> Result<(), Refused> {
        let max = self.cfg.rttime_max_us;
        let how = format!(
            "set the process's hard RLIMIT_RTTIME to at most {max} µs first (setrlimit(2), \
             `prlimit --rttime={max}:{max} --pid {pid}`, or uxsched_client::limit_rttime), so \
             the kernel stops a runaway real-time thread"
        );
        match peer::rttime_hard(pid) {
            Ok(Some(hard)) if hard <= max => Ok(()),
            Ok(Some(hard)) => Err((
                Refusal::Rttime,
                format!("hard RLIMIT_RTTIME is {hard} µs; {how}"),
            )),
            Ok(None) => Err((
                Refusal::Rttime,
                format!("hard RLIMIT_RTTIME is unlimited; {how}"),
            )),
            Err(e) => Err((
                Refusal::Identity,
                format!("cannot read process {pid}'s RLIMIT_RTTIME: {e}"),
            )),
        }
    }

    /// The connection `conn` closed: its `Close` grants end. Whether anything changed.
    pub fn closed(&mut self, conn: u64) -> bool {
        let before = self.grants.len();
        self.grants
            .retain(|_, g| g.conn != conn || g.until == Until::Exit);
        let more =
            self.deps.closed(conn) | self.hints.closed(conn) | self.interactions.closed(conn);
        before != self.grants.len() || more
    }

    /// The canary tripped: every RT grant ends, and RT is refused for `canary_refuse_ms`.
    pub fn suspend_rt(&mut self) {
        self.grants.retain(|_, g| !is_rt(&g.ask));
        self.rt_suspended_until =
            Some(Instant::now() + Duration::from_millis(self.cfg.canary_refuse_ms));
    }

    /// Forget grants whose thread exited, and RT grants whose process raised its hard
    /// RLIMIT_RTTIME above the bound since (only root can).
    pub fn prune(&mut self) {
        let max = self.cfg.rttime_max_us;
        self.grants.retain(|task, g| {
            identity::still_same(task)
                && (!is_rt(&g.ask)
                    || matches!(peer::rttime_hard(task.pid), Ok(Some(h)) if h <= max))
        });
        self.recent.retain(|_, r| !r.is_empty());
        let now = Instant::now();
        self.deps.prune();
        self.hints.prune(now);
        self.interactions.prune(now);
    }

    /// Remove the grant of `task` (its answer could not be given).
    pub fn drop_grant(&mut self, task: &TaskId) {
        self.grants.remove(task);
    }

    /// Whether no RT grant is held (the canary's list then stays empty).
    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    /// Add every grant to the mode's desired settings: real time replaces the thread's fair
    /// settings; a nice is the lower of the mode's and the grant's; a slice is the grant's.
    /// Then hint sessions and interactions (the stronger of theirs and what a thread has), then
    /// dependencies (which follow what their depending thread ends up with).
    pub fn merge_into(&mut self, desired: &mut Desired) {
        self.merge_grants(desired);
        self.hints.merge_into(desired);
        self.interactions.merge_into(desired);
        self.deps
            .merge_into(desired, self.cfg.max_dependency_threads);
    }

    fn merge_grants(&self, desired: &mut Desired) {
        for (task, g) in &self.grants {
            let t = desired.threads.entry(*task).or_default();
            match g.ask {
                Ask::Realtime { policy, priority } => {
                    let policy = match policy {
                        Policy::Fifo => RtPolicy::Fifo,
                        Policy::Rr => RtPolicy::Rr,
                    };
                    t.rt = Some(Rt { policy, priority });
                }
                Ask::HighPriority { nice } => {
                    t.nice = Some(t.nice.map_or(nice, |n| n.min(nice)));
                }
                Ask::Latency { slice_us } => t.slice_ns = Some(slice_us * 1000),
                _ => {}
            }
        }
    }

    /// The answer to `req` once reconciled: what the kernel holds for the thread now, or why
    /// it does not hold what was asked (then the grant is dropped; the caller reconciles).
    pub fn answer(
        &mut self,
        peer: &Peer,
        req: &Request,
        task: TaskId,
    ) -> Result<uxsched_client::Granted, Refused> {
        let now = uxsched_os::sched::get(task.tid);
        let result = match now {
            _ if !peer.alive() || !identity::still_same(&task) => Err((
                Refusal::Identity,
                format!("tid {} exited or changed while being granted", task.tid),
            )),
            Err(e) => Err((Refusal::Identity, format!("tid {}: {e}", task.tid))),
            Ok(a) => {
                let got = granted(task.tid, &a, req.until);
                if holds(&req.ask, &a) {
                    Ok(got)
                } else {
                    Err((
                        Refusal::NotApplied,
                        format!(
                            "the thread keeps {}{}{}: uxsched changes only fair-class \
                             (SCHED_OTHER/BATCH) threads and never one someone else changed (see `uxsched status`)",
                            got.policy,
                            got.priority
                                .map_or(String::new(), |p| format!(" priority {p}")),
                            got.nice.map_or(String::new(), |n| format!(" nice {n}")),
                        ),
                    ))
                }
            }
        };
        if result.is_err() {
            self.grants.remove(&task);
        }
        result
    }
}

fn is_rt(ask: &Ask) -> bool {
    matches!(ask, Ask::Realtime { .. })
}

/// Whether the kernel's attributes `a` give what `ask` asked.
fn holds(ask: &Ask, a: &uxsched_os::sched::SchedAttr) -> bool {
    match *ask {
        Ask::Realtime { policy, priority } => {
            let p = match policy {
                Policy::Fifo => RtPolicy::Fifo,
                Policy::Rr => RtPolicy::Rr,
            };
            a.policy == p.number() && a.priority == priority
        }
        Ask::HighPriority { nice } => a.is_fair() && a.nice <= nice,
        Ask::Latency { slice_us } => a.is_fair() && a.runtime == slice_us * 1000,
        _ => true,
    }
}

/// The kernel's attributes as the reply shows them.
fn granted(tid: i32, a: &uxsched_os::sched::SchedAttr, until: Until) -> uxsched_client::Granted {
    use uxsched_os::sched::*;
    let policy = match a.policy {
        SCHED_OTHER => "other",
        SCHED_FIFO => "fifo",
        SCHED_RR => "rr",
        SCHED_BATCH => "batch",
        SCHED_IDLE => "idle",
        SCHED_DEADLINE => "deadline",
        _ => "unknown",
    };
    uxsched_client::Granted {
        tid,
        policy: policy.into(),
        priority: a.is_rt().then_some(a.priority),
        nice: (!a.is_rt()).then_some(a.nice),
        slice_us: (!a.is_rt()).then_some(a.runtime / 1000),
        reset_on_fork: a.flags & SCHED_FLAG_RESET_ON_FORK != 0,
        until,
    }
}
