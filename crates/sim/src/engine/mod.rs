//! The simulation engine: owns virtual time, the event queue, every run-queue and every task.
//!
//! One loop pops the next event (see [`queue`] for the total order), applies it, then runs
//! `schedule()` on every CPU that was asked to reschedule, in CPU order. Policies
//! ([`crate::policy`]) only decide; the engine applies their decisions and writes the one event
//! log ([`crate::log`]) that every metric and picture is computed from.
//!
//! Files: [`build`] (workload → runtime state), [`program`] (what a task does next), [`sync`]
//! (the synchronisation objects tasks share), [`fair`] (hierarchical fair class over cgroups),
//! [`rt`] (RT class and throttling), [`balance`] (CPU selection and load balancing), [`pelt`]
//! (the load and utilisation averages balancing reads),
//! [`bandwidth`] (cgroup CPU quotas), [`blockdev`] (the block device tasks read from), [`core`]
//! (dispatch, accounting, ticks, the scheduling loop).

mod balance;
mod bandwidth;
mod blockdev;
mod build;
mod core;
mod fair;
pub mod hooks;
mod pagecache;
mod pelt;
mod program;
mod queue;
mod rt;
mod sync;
mod wheel;

use crate::log::{Record, RunMeta, Sink};
use crate::platform::PlatformSpec;
use crate::policy::{Entity, FairPolicy, FairRq};
use uxsched_model::{Nanos, MS, SEC, US};

pub use build::BuildError;
pub use hooks::{Control, Mechanism};
pub use pagecache::{init_ra_size, next_ra_size, DeviceSpec};

/// Everything about a run that is not the workload.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Fair policy name (see [`crate::policy::POLICY_NAMES`]).
    pub sched: String,
    /// Policy tunables (`--param key=value`), checked by the policy.
    pub params: crate::policy::Params,
    pub hz: u32,
    pub seed: u64,
    /// Stop after this much simulated time.
    pub duration: Nanos,
    pub platform: PlatformSpec,
    /// `sysctl_sched_migration_cost`: a task that ran this recently is cache-hot and is not
    /// moved by load balancing.
    pub migration_cost: Nanos,
    /// RT throttling: RT tasks may use `rt_runtime` of every `rt_period` on each CPU.
    pub rt_period: Nanos,
    pub rt_runtime: Nanos,
    /// SCHED_RR quantum (`sched_rr_timeslice`).
    pub rr_quantum: Nanos,
    /// Periodic load balancing interval per CPU.
    pub balance_interval: Nanos,
    /// Replace the fair policy's tunables (`cfs` only: the paper's model vs the kernel's).
    pub cfs_tunables: Option<crate::policy::cfs::CfsTunables>,
    /// The block device's I/O scheduler (see [`crate::io::IO_SCHEDULER_NAMES`]); its tunables
    /// come from `params` under its name (`cfq.slice_idle`).
    pub io_sched: String,
    /// The block device behind `read` events (`--param blockdev.access=1ms`,
    /// `blockdev.mb_per_s=20`, `blockdev.read_ahead_kb=128`).
    pub device: DeviceSpec,
    /// Timer slack of fair tasks' sleeps and timers (`timer_slack_ns`, 50 µs by default on
    /// Linux; RT tasks get none, `hrtimer_nanosleep`): the wake-up comes this much after the
    /// requested time. 0 here by default (the ideal timer); `sim validate` sets the kernel's.
    pub timer_slack: Nanos,
    /// Wake-up cost of sleeps and timers: the time from a timer's expiry (after its slack) to
    /// the woken task being able to run — the timer interrupt, `try_to_wake_up` and the context
    /// switch, which the engine otherwise takes as free. The wake-up happens this much later.
    /// 0 by default; `sim validate` measures it on the running kernel (docs/fidelity.md) and
    /// never sets it from anything else. Wake-ups by other tasks (signal, resume, send) are
    /// not delayed: nothing measures their cost.
    pub wakeup_cost: Nanos,
    /// Measured wake-up costs of a fair task (ns), one per probe wake-up: when not empty, each
    /// sleep or timer wake-up of a fair task is delayed by one of them drawn with the run's seed,
    /// instead of by [`SimConfig::wakeup_cost`]. A fair wake-up on a busy CPU takes its own path
    /// (`enqueue_entity`, `place_entity`, `check_preempt_wakeup_fair`, the pick down the
    /// autogroup) and its cost varies from one wake-up to the next: a single median gives every
    /// wake-up that preempts at once the same latency, where the kernel's p90 of such wake-ups is
    /// 20–40 µs above its p50 (docs/fidelity.md). `sim validate` measures these with a fair
    /// probe; nothing else sets them.
    pub fair_wakeup_costs: Vec<Nanos>,
    /// Measured wake-up costs of a fair task woken onto an *idle* CPU (ns), where the CPU must
    /// leave its idle state first (on a VM, `haltpoll` and a VM exit). When not empty, a fair
    /// timer wake-up's cost is chosen when its timer fires: one of these if the CPU it would
    /// wake on is idle, else one of [`SimConfig::fair_wakeup_costs`]. `sim validate` measures
    /// them with a probe on idle CPUs; nothing else sets them.
    pub idle_wakeup_costs: Vec<Nanos>,
    /// Measured costs of a fair wake-up onto a CPU idle for at least
    /// [`SimConfig::long_idle`], used there instead of [`SimConfig::idle_wakeup_costs`]: the
    /// longer a CPU has been idle, the longer it takes to leave its idle state (docs/fidelity.md,
    /// "Wake-up costs"). `sim validate` measures them with a second idle probe.
    pub long_idle_wakeup_costs: Vec<Nanos>,
    /// From how long an idle CPU takes [`SimConfig::long_idle_wakeup_costs`].
    pub long_idle: Nanos,
}

impl SimConfig {
    pub fn new(sched: &str, platform: PlatformSpec) -> Self {
        SimConfig {
            sched: sched.to_string(),
            params: Default::default(),
            hz: 250,
            seed: 1,
            duration: 10 * SEC,
            platform,
            migration_cost: 500 * US,
            rt_period: SEC,
            rt_runtime: 950 * MS,
            rr_quantum: 100 * MS,
            balance_interval: 4 * MS,
            cfs_tunables: None,
            io_sched: "cfq".into(),
            device: DeviceSpec::default(),
            timer_slack: 0,
            wakeup_cost: 0,
            fair_wakeup_costs: Vec::new(),
            idle_wakeup_costs: Vec::new(),
            long_idle_wakeup_costs: Vec::new(),
            long_idle: Nanos::MAX,
        }
    }

    pub fn tick(&self) -> Nanos {
        SEC / self.hz.max(1) as u64
    }
}

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    NotStarted,
    /// On a run-queue, not running.
    Runnable,
    Running,
    Blocked,
    Exited,
}

/// What the task is doing on the CPU right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segment {
    /// Nothing in progress: the program must be advanced.
    None,
    /// Remaining work in reference-CPU ns (scales with speed).
    Work(u64),
    /// Busy until this instant, preempted or not: rt-app's `runtime` spins in `loadwait` until
    /// `CLOCK_MONOTONIC` says the duration has passed (rt-app.c), so time spent waiting for
    /// the CPU counts. A task switched in after that instant finishes at once.
    Busy(u64),
}

/// Scheduling class of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Fair,
    /// RT priority 1..=99 and whether it is SCHED_RR.
    Rt {
        prio: u8,
        rr: bool,
    },
}

struct Task {
    class: Class,
    group: usize,
    /// Allowed CPUs as a bitmap (the current phase's, else `base_allowed`).
    allowed: Vec<u64>,
    /// The task's own affinity.
    base_allowed: Vec<u64>,
    state: State,
    cpu: usize,
    seg: Segment,
    prog: program::Cursor,
    /// Bumped on every wake-up so stale timer events are ignored.
    wake_gen: u64,
    /// Interaction carried by this task, (id, kind) — propagated through messages and signals.
    carry: Option<(u64, u32)>,
    /// When it last stopped running (cache-hot test).
    last_ran: Nanos,
    /// Its place in its CPU's `cfs_tasks` list, which the kernel keeps most recently used
    /// first: stamped from [`Sim::mru_clock`] when it is enqueued (`account_entity_enqueue`:
    /// `list_add`) and when it is picked (`__set_next_task_fair`: `list_move` to the front).
    /// Balancing detaches from the other end, the smallest stamp first.
    mru: u64,
    /// Remaining SCHED_RR quantum.
    rr_left: Nanos,
    /// It left the CPU through `sched_yield`.
    yielded: bool,
    /// End of the last piece of work before a timer wait (rt-app slack).
    work_end: Nanos,
    /// I/O priority of its block-device requests.
    ioprio: crate::io::IoPrio,
    /// Maximum read-ahead window in pages (`ra_pages`).
    ra_pages: u64,
    /// A `read` (file, bytes) to retry when woken: it blocked on a page in flight.
    pending_read: Option<(usize, u64)>,
    /// Its timer has been armed without a wake-up cost: the cost is chosen when the timer
    /// fires, by whether the CPU it wakes on is idle ([`SimConfig::idle_wakeup_costs`]).
    wake_cost_pending: bool,
    /// Its load average, for balancing by load ([`pelt`]).
    load: pelt::TaskLoad,
}

impl Task {
    fn allows(&self, cpu: usize) -> bool {
        self.allowed[cpu / 64] >> (cpu % 64) & 1 == 1
    }
}

struct Cpu {
    domain: usize,
    /// Fixed-point speed (capacity × frequency), see [`crate::platform::SPEED_ONE`].
    speed: u64,
    capacity: u32,
    curr: Option<u32>,
    /// Start of the current accounting interval of `curr`; while idle, when it went idle.
    exec_start: Nanos,
    tick_armed: bool,
    /// Phase offset of this CPU's tick (seeded), so CPUs do not tick in lock-step.
    tick_phase: Nanos,
    next_balance: Nanos,
    need_resched: bool,
    /// Total time spent running tasks, up to `exec_start` (DVFS governors sample it).
    busy: Nanos,
    /// Runnable fair tasks on this CPU (including the running one).
    fair_tasks: Vec<u32>,
    /// `fair_tasks.len()` scaled to capacity, kept as the list changes (balancing reads it for
    /// every CPU on every tick; see `balance::cpu_load`).
    fair_load: u64,
    rt: rt::RtRq,
    /// Its utilisation average ([`pelt`]), for classifying it when balancing.
    util: pelt::CpuUtil,
    /// Balancing passes into this CPU in a row that found an imbalance and moved nothing
    /// (`sd->nr_balance_failed`).
    balance_failed: u32,
    /// When this CPU, busy, may next pull by load (`balance.rs`).
    next_load_balance: Nanos,
}

struct Group {
    parent: Option<usize>,
    shares: u64,
    depth: usize,
    /// Sum over CPUs of this group's run-queue load (for the per-CPU share of `shares`).
    total_load: u64,
    bw: Option<bandwidth::Pool>,
}

/// A running simulation.
pub struct Sim {
    cfg: SimConfig,
    tick: Nanos,
    now: Nanos,
    policy: Box<dyn FairPolicy>,
    cpus: Vec<Cpu>,
    tasks: Vec<Task>,
    /// Entity arena: task `i` is entity `i`; group entities follow.
    ents: Vec<Entity>,
    /// Fair run-queues, `group * ncpus + cpu`.
    rqs: Vec<FairRq>,
    groups: Vec<Group>,
    /// Entity of group `g` on CPU `c`, `g * ncpus + c` (`usize::MAX` for the root group).
    group_ents: Vec<usize>,
    sync: sync::SyncObjects,
    blockdev: blockdev::BlockDev,
    pagecache: pagecache::PageCache,
    queue: queue::EventQueue,
    meta: RunMeta,
    /// Current frequency of each domain (kHz).
    domain_khz: Vec<u32>,
    /// Bitmap of CPUs with at least two runnable fair tasks (the only ones balancing can pull
    /// from), kept by `refresh_cpu_load`, so balancing does not scan every CPU.
    overloaded: Vec<u64>,
    /// Source of [`Task::mru`] stamps.
    mru_clock: u64,
    /// CPUs with `need_resched` set, in the order they were asked.
    resched_list: Vec<usize>,
    /// Attached mechanisms ([`hooks`]).
    mechs: Vec<Box<dyn Mechanism>>,
    out: Vec<Record>,
    next_interaction: u64,
    events: u64,
    /// Schedule passes at the current instant (zero-time livelock guard).
    passes_now: u64,
    /// Draws of [`SimConfig::fair_wakeup_costs`], seeded apart from the build's generator so
    /// runs without measured costs keep their tick phases and digests.
    cost_rng: rand_chacha::ChaCha8Rng,
}

/// Statistics about the run itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunStats {
    /// Events popped from the queue.
    pub events: u64,
    /// Simulated time reached.
    pub end: Nanos,
}

/// A run that could not continue.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("at t={t}ns: {message}")]
    Stuck { t: Nanos, message: String },
}

impl Sim {
    pub fn meta(&self) -> &RunMeta {
        &self.meta
    }

    /// Run to the configured duration, streaming the log into `sink`. `progress` is called
    /// now and then with the simulated time reached.
    pub fn run(
        &mut self,
        sink: &mut dyn Sink,
        progress: &mut dyn FnMut(Nanos),
    ) -> Result<RunStats, SimError> {
        sink.begin(&self.meta);
        self.start();
        self.mechanisms_start();
        self.mechanisms_observe(0);
        self.schedule_pending()?;
        self.flush(sink);
        let until = self.cfg.duration;
        let mut last_progress = 0;
        while let Some((t, ev)) = self.queue.pop_until(until) {
            if t != self.now {
                self.passes_now = 0;
            }
            self.now = t;
            self.events += 1;
            self.handle(ev);
            self.schedule_pending()?;
            // Mechanisms act on what happened; their actions may reschedule and log more.
            let mut seen = 0;
            while seen < self.out.len() && !self.mechs.is_empty() {
                let upto = self.out.len();
                self.mechanisms_observe(seen);
                seen = upto.max(seen);
                self.schedule_pending()?;
            }
            self.flush(sink);
            if t - last_progress >= 100 * MS {
                last_progress = t;
                progress(t);
            }
        }
        self.now = until;
        self.finish();
        self.flush(sink);
        sink.end(until);
        progress(until);
        Ok(RunStats {
            events: self.events,
            end: until,
        })
    }

    fn emit(&mut self, r: Record) {
        self.out.push(r);
    }

    fn flush(&mut self, sink: &mut dyn Sink) {
        for r in self.out.drain(..) {
            sink.record(&r);
        }
    }

    fn ncpus(&self) -> usize {
        self.cpus.len()
    }

    fn rq_index(&self, group: usize, cpu: usize) -> usize {
        group * self.ncpus() + cpu
    }
}
