//! Turning a [`Workload`] and a [`SimConfig`] into a ready [`Sim`].

use super::program::compile;
use super::sync::SyncObjects;
use super::{Class, Cpu, Group, Segment, Sim, SimConfig, State, Task};
use crate::io::IoScheduler;
use crate::log::{DomainMeta, RunMeta, TaskMeta};
use crate::policy::{self, Entity, FairPolicy, FairRq, PolicyEnv};
use crate::workload::{FileSpec, GroupSpec, SchedPolicy, TaskSpec, Workload};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use uxsched_model::weights::{nice_to_weight, WEIGHT_IDLEPRIO};
use uxsched_model::Nanos;

/// A workload/configuration combination the engine cannot run; the message names the part.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BuildError(pub String);

fn policy_label(p: SchedPolicy) -> String {
    match p {
        SchedPolicy::Normal { nice } => format!("OTHER nice {nice}"),
        SchedPolicy::Batch { nice } => format!("BATCH nice {nice}"),
        SchedPolicy::Idle => "IDLE".into(),
        SchedPolicy::Fifo { prio } => format!("FIFO {prio}"),
        SchedPolicy::Rr { prio } => format!("RR {prio}"),
    }
}

/// A CPU bitmap from a list (`None` = every CPU); errors name the bad CPU.
fn cpu_mask(list: Option<&[usize]>, ncpus: usize) -> Result<Vec<u64>, String> {
    let mut mask = vec![0u64; ncpus.div_ceil(64)];
    match list {
        None => (0..ncpus).for_each(|c| mask[c / 64] |= 1 << (c % 64)),
        Some([]) => return Err("empty CPU affinity".into()),
        Some(list) => {
            for &c in list {
                if c >= ncpus {
                    return Err(format!(
                        "affinity names CPU {c} but the platform has {ncpus} CPUs"
                    ));
                }
                mask[c / 64] |= 1 << (c % 64);
            }
        }
    }
    Ok(mask)
}

/// The block device's `blockdev.` tunables.
fn device_params(d: &mut super::DeviceSpec, mut p: policy::Params) -> Result<(), String> {
    if let Some(v) = p.take_duration("blockdev.access")? {
        d.access = v;
    }
    if let Some(v) = p.take_num::<f64>("blockdev.mb_per_s")? {
        if !(v > 0.0 && v.is_finite()) {
            return Err("--param blockdev.mb_per_s must be positive".into());
        }
        d.bytes_per_sec = (v * 1e6) as u64;
    }
    if let Some(v) = p.take_num::<u64>("blockdev.read_ahead_kb")? {
        d.read_ahead_kb = v;
    }
    p.finish("blockdev")
}

impl Sim {
    /// Check the workload against the configuration and build the run's state, every task
    /// due to wake at its `delay`.
    pub fn new(w: &Workload, mut cfg: SimConfig) -> Result<Sim, BuildError> {
        cfg.platform.validate().map_err(BuildError)?;
        if cfg.hz == 0 || cfg.hz > 10_000 {
            return Err(BuildError(format!("hz {} is outside 1..=10000", cfg.hz)));
        }
        let ncpus = cfg.platform.cpu_count();
        let tick = cfg.tick();
        let Schedulers { io_sched, fair } = schedulers(w, &mut cfg, PolicyEnv { ncpus, tick })?;
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let cfg_seed = cfg.seed;
        let mut meta = RunMeta {
            workload: w.name.clone(),
            sched: cfg.sched.clone(),
            seed: cfg.seed,
            hz: cfg.hz,
            cpus: ncpus,
            ..Default::default()
        };
        let cpus = build_cpus(&cfg, tick, &mut rng, &mut meta);
        let groups = build_groups(w, &mut meta)?;
        let mut sync = SyncObjects::default();
        let mut ents = Vec::with_capacity(w.tasks.len() + groups.len() * ncpus);
        let tasks = TaskBuilder {
            ncpus,
            base_slice: fair.base_slice(),
            rr_quantum: cfg.rr_quantum,
            ra_pages: cfg.device.read_ahead_kb * 1024 / uxsched_model::size::PAGE,
            files: &w.files,
            sync: &mut sync,
            meta: &mut meta,
        }
        .build_all(&w.tasks, &mut ents)?;
        sync.finish_barriers();
        let rqs = (0..groups.len() * ncpus)
            .map(|i| FairRq::for_group(i / ncpus))
            .collect();
        let group_ents = push_group_entities(&groups, ncpus, fair.base_slice(), &mut ents);

        let domain_khz = cfg.platform.domains.iter().map(|d| d.initial_khz).collect();
        let mut sim = Sim {
            tick,
            cfg,
            now: 0,
            policy: fair,
            cpus,
            tasks,
            ents,
            overloaded: vec![0; ncpus.div_ceil(64)],
            mru_clock: 0,
            rqs,
            groups,
            group_ents,
            sync,
            blockdev: super::blockdev::BlockDev::new(io_sched),
            pagecache: super::pagecache::PageCache::new(w.files.iter().map(|f| f.size)),
            queue: Default::default(),
            domain_khz,
            meta,
            resched_list: Vec::new(),
            mechs: Vec::new(),
            out: Vec::new(),
            next_interaction: 0,
            events: 0,
            passes_now: 0,
            cost_rng: ChaCha8Rng::seed_from_u64(cfg_seed ^ WAKEUP_COST_STREAM),
        };
        for (i, t) in w.tasks.iter().enumerate() {
            sim.queue.push(
                t.delay,
                super::queue::Ev::Wake {
                    task: i as u32,
                    gen: 0,
                },
            );
        }
        Ok(sim)
    }
}

/// Mixed into the seed of the wake-up cost draws, so they are a stream of their own.
const WAKEUP_COST_STREAM: u64 = 0x7761_6b65_7570_636f;

/// The run's two schedulers.
struct Schedulers {
    io_sched: Box<dyn IoScheduler>,
    fair: Box<dyn FairPolicy>,
}

/// The block device's I/O scheduler and the fair policy. The I/O scheduler takes its own
/// `NAME.` tunables (and the device its `blockdev.` ones); the fair policy gets the rest.
fn schedulers(w: &Workload, cfg: &mut SimConfig, env: PolicyEnv) -> Result<Schedulers, BuildError> {
    let mut params = cfg.params.clone();
    device_params(&mut cfg.device, params.split_prefix("blockdev.")).map_err(BuildError)?;
    let io_params = params.split_prefix(&format!("{}.", cfg.io_sched));
    let io_sched = crate::io::scheduler_by_name(&cfg.io_sched, w.tasks.len(), io_params)
        .map_err(BuildError)?;
    let mut fair = policy::by_name(&cfg.sched, env, &params).map_err(BuildError)?;
    if let Some(t) = cfg.cfs_tunables {
        if cfg.sched != "cfs" {
            return Err(BuildError(
                "CFS tunables given for a non-cfs scheduler".into(),
            ));
        }
        fair = Box::new(policy::cfs::Cfs::new(t));
    }
    Ok(Schedulers { io_sched, fair })
}

/// The CPUs of every frequency domain, in order, each with a seeded tick phase; records the
/// domains and each CPU's domain in `meta`.
fn build_cpus(cfg: &SimConfig, tick: Nanos, rng: &mut ChaCha8Rng, meta: &mut RunMeta) -> Vec<Cpu> {
    let mut cpus = Vec::with_capacity(meta.cpus);
    for (d, dom) in cfg.platform.domains.iter().enumerate() {
        meta.domains.push(DomainMeta {
            name: dom.name.clone(),
            initial_khz: dom.initial_khz,
            max_khz: *dom.opps_khz.last().unwrap_or(&dom.initial_khz),
        });
        for _ in 0..dom.cpus {
            meta.cpu_domain.push(d as u16);
            cpus.push(Cpu {
                domain: d,
                speed: cfg.platform.speed(dom.capacity, dom.initial_khz),
                capacity: dom.capacity,
                curr: None,
                exec_start: 0,
                tick_armed: false,
                tick_phase: rng.gen_range(0..tick),
                next_balance: 0,
                need_resched: false,
                busy: 0,
                fair_tasks: Vec::new(),
                fair_load: 0,
                util: Default::default(),
                balance_failed: 0,
                next_load_balance: 0,
                rt: Default::default(),
            });
        }
    }
    cpus
}

/// The cgroup tree, index 0 the root, each group after its parent; records the paths in
/// `meta.groups` (the same indices).
fn build_groups(w: &Workload, meta: &mut RunMeta) -> Result<Vec<Group>, BuildError> {
    let mut groups = vec![Group {
        parent: None,
        shares: 1024,
        depth: 0,
        total_load: 0,
        bw: None,
    }];
    meta.groups.push(String::new());
    for g in &w.groups {
        let parent = group_parent(g, &meta.groups, &groups)?;
        groups.push(Group {
            parent: Some(parent),
            shares: g.shares.max(2),
            depth: groups[parent].depth + 1,
            total_load: 0,
            bw: g.bandwidth.map(super::bandwidth::Pool::new),
        });
        meta.groups.push(g.path.clone());
    }
    Ok(groups)
}

/// The index of a cgroup's parent among those declared so far (`paths`), after checking the
/// group itself: a new non-empty path, a usable bandwidth limit, a supported depth.
fn group_parent(g: &GroupSpec, paths: &[String], groups: &[Group]) -> Result<usize, BuildError> {
    let parent_path = g.path.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
    let parent = paths.iter().position(|p| p == parent_path).ok_or_else(|| {
        BuildError(format!(
            "cgroup `{}`: parent `{parent_path}` is not declared before it",
            g.path
        ))
    })?;
    if paths.contains(&g.path) || g.path.is_empty() {
        return Err(BuildError(format!(
            "cgroup `{}` is declared twice or has an empty path",
            g.path
        )));
    }
    if let Some(b) = g.bandwidth {
        if b.quota == 0 || b.period == 0 {
            return Err(BuildError(format!(
                "cgroup `{}`: quota and period must be > 0",
                g.path
            )));
        }
    }
    if groups[parent].depth + 1 > super::fair::MAX_DEPTH {
        return Err(BuildError(format!(
            "cgroup `{}` is nested {} levels deep; at most {} are supported",
            g.path,
            groups[parent].depth + 1,
            super::fair::MAX_DEPTH
        )));
    }
    Ok(parent)
}

/// What turning each [`TaskSpec`] into a [`Task`] needs from the rest of the build.
struct TaskBuilder<'a> {
    ncpus: usize,
    /// The fair policy's slice, for tasks that ask for none.
    base_slice: Nanos,
    rr_quantum: Nanos,
    /// The device's read-ahead window in pages.
    ra_pages: u64,
    files: &'a [FileSpec],
    sync: &'a mut SyncObjects,
    meta: &'a mut RunMeta,
}

impl TaskBuilder<'_> {
    /// Every task, in order: task `i` is entity `i` (pushed onto `ents`) and `meta.tasks[i]`.
    fn build_all(
        &mut self,
        specs: &[TaskSpec],
        ents: &mut Vec<Entity>,
    ) -> Result<Vec<Task>, BuildError> {
        let mut tasks = Vec::with_capacity(specs.len());
        for t in specs {
            let tid = tasks.len() as u32;
            let (task, ent) = self.build(tid, t)?;
            ents.push(ent);
            tasks.push(task);
        }
        Ok(tasks)
    }

    /// One task and its entity; records its [`TaskMeta`].
    fn build(&mut self, tid: u32, t: &TaskSpec) -> Result<(Task, Entity), BuildError> {
        let group = match &t.group {
            None => 0,
            Some(path) => self
                .meta
                .groups
                .iter()
                .position(|p| p == path)
                .ok_or_else(|| {
                    BuildError(format!(
                        "task `{}`: cgroup `{path}` is not declared",
                        t.name
                    ))
                })?,
        };
        let allowed = cpu_mask(t.affinity.as_deref(), self.ncpus)
            .map_err(|e| BuildError(format!("task `{}`: {e}", t.name)))?;
        let phase_masks = self.phase_masks(t)?;
        let (class, weight) = class_and_weight(t)?;
        let prog = compile(
            tid,
            t,
            phase_masks,
            self.sync,
            &mut self.meta.interactions,
            self.files,
        )
        .map_err(BuildError)?;
        let ent = self.entity(t, weight);
        self.meta.tasks.push(TaskMeta {
            name: t.name.clone(),
            process: if t.process.is_empty() {
                t.name.clone()
            } else {
                t.process.clone()
            },
            group: group as u32,
            policy: policy_label(t.policy),
            labels: t.labels.clone(),
            oom_adj: t.oom_adj,
        });
        let task = Task {
            class,
            group,
            base_allowed: allowed.clone(),
            allowed,
            state: State::NotStarted,
            cpu: 0,
            seg: Segment::None,
            prog,
            wake_gen: 0,
            carry: None,
            last_ran: 0,
            mru: 0,
            rr_left: self.rr_quantum,
            yielded: false,
            work_end: 0,
            ioprio: t
                .ioprio
                .unwrap_or_else(|| crate::io::IoPrio::of_policy(t.policy)),
            ra_pages: self.ra_pages,
            pending_read: None,
            wake_cost_pending: false,
            load: Default::default(),
        };
        Ok((task, ent))
    }

    /// Each phase's own CPU bitmap (`None`: the task's).
    fn phase_masks(&self, t: &TaskSpec) -> Result<Vec<Option<Vec<u64>>>, BuildError> {
        let mut phase_masks = Vec::with_capacity(t.phases.len());
        for p in &t.phases {
            let mask = match &p.affinity {
                None => None,
                Some(list) => Some(cpu_mask(Some(list), self.ncpus).map_err(|e| {
                    BuildError(format!("task `{}`, phase `{}`: {e}", t.name, p.name))
                })?),
            };
            phase_masks.push(mask);
        }
        Ok(phase_masks)
    }

    /// The task's fair entity: its weight, and its slice (its own, clamped, else the policy's).
    fn entity(&self, t: &TaskSpec, weight: u64) -> Entity {
        let (lo, hi) = policy::eevdf::CUSTOM_SLICE_RANGE;
        Entity {
            weight,
            slice: t.slice.map(|s| s.clamp(lo, hi)).unwrap_or(self.base_slice),
            custom_slice: t.slice.is_some(),
            is_idle: t.policy == SchedPolicy::Idle,
            no_wakeup_preempt: matches!(t.policy, SchedPolicy::Batch { .. } | SchedPolicy::Idle),
            ..Default::default()
        }
    }
}

/// A task's scheduling class and fair weight (0 for RT); RT priorities must be 1..=99.
fn class_and_weight(t: &TaskSpec) -> Result<(Class, u64), BuildError> {
    let (class, weight) = match t.policy {
        SchedPolicy::Normal { nice } | SchedPolicy::Batch { nice } => {
            (Class::Fair, nice_to_weight(nice))
        }
        SchedPolicy::Idle => (Class::Fair, WEIGHT_IDLEPRIO),
        SchedPolicy::Fifo { prio } => (Class::Rt { prio, rr: false }, 0),
        SchedPolicy::Rr { prio } => (Class::Rt { prio, rr: true }, 0),
    };
    if let Class::Rt { prio, .. } = class {
        if !(1..=99).contains(&prio) {
            return Err(BuildError(format!(
                "task `{}`: RT priority {prio} is outside 1..=99",
                t.name
            )));
        }
    }
    Ok((class, weight))
}

/// Each non-root group's entity on each CPU, queued on its parent's run-queue there, appended
/// to `ents`; returns the index of group `g`'s entity on CPU `c` at `g * ncpus + c`
/// (`usize::MAX` for the root).
fn push_group_entities(
    groups: &[Group],
    ncpus: usize,
    base_slice: Nanos,
    ents: &mut Vec<Entity>,
) -> Vec<usize> {
    let mut group_ents = vec![usize::MAX; groups.len() * ncpus];
    for (g, grp) in groups.iter().enumerate().skip(1) {
        for c in 0..ncpus {
            group_ents[g * ncpus + c] = ents.len();
            ents.push(Entity {
                weight: grp.shares,
                slice: base_slice,
                rq: grp.parent.unwrap_or(0) * ncpus + c,
                my_rq: Some(g * ncpus + c),
                ..Default::default()
            });
        }
    }
    group_ents
}
