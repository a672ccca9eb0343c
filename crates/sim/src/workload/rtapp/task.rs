//! rt-app thread objects → [`TaskSpec`]s.
//!
//! Task keys: `instance` (threads made from this object, named `NAME-0`..`NAME-{n-1}` when
//! n > 1), `loop` (passes over the phases, −1 = forever, the default), `policy`, `priority`,
//! `cpus`, `delay` (µs), `taskgroup`, `dl-runtime` (µs; on a fair task, its EEVDF custom slice),
//! and either `phases` (ordered; each with `loop`, default 1, and `cpus`) or events written
//! directly in the task: then, as in rt-app's `parse_thread_data`, they form one phase named
//! `main` whose `loop` is the task's, and the task runs once (forever without `loop`). Timers whose
//! name starts with `unique` are per instance, as in rt-app; other names are shared.

use super::json::{Member, Pos};
use super::{
    cpu_list, events, int_value, legacy, object, positive, str_value, Ctx, Global, Sourced,
};
use crate::workload::{Event, Phase, TaskSpec, WorkloadError};
use uxsched_model::{Nanos, US};

/// Keys rt-app accepts that the simulator cannot honour, with the reason.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("dl-period", "SCHED_DEADLINE is not modelled"),
    ("dl-deadline", "SCHED_DEADLINE is not modelled"),
    ("util_min", "uclamp is not modelled"),
    ("util_max", "uclamp is not modelled"),
    ("nodes_membind", "NUMA is not modelled"),
];

pub fn read(
    src: &Sourced,
    global: &Global,
    resources: &legacy::ResourceTable,
    process: &str,
) -> Result<Vec<TaskSpec>, WorkloadError> {
    let key = src.member.key.as_str();
    let base = Ctx {
        file: src.file,
        ..Ctx::default()
    };
    let ctx = base.task(key);
    let members = object(&ctx, &src.member.value)?;
    if legacy::is_legacy(members) {
        let spec = legacy::read_task(&ctx, key, members, global, resources, process)?;
        return Ok(vec![spec]);
    }
    let TaskKeys {
        instances,
        mut loops,
        policy,
        priority,
        affinity,
        delay,
        group,
        custom_slice,
        mut phases,
        direct,
    } = TaskKeys::read(&ctx, members, key, global)?;
    if !direct.is_empty() {
        if !phases.is_empty() {
            return Err(ctx.err(
                src.member.key_pos,
                "events are written both in `phases` and directly in the task; use one",
            ));
        }
        // As rt-app does: the task's `loop` counts passes over this one phase, and the task
        // itself runs once — or forever when `loop` is absent or −1.
        let passes = loops.unwrap_or(1);
        loops = loops.map(|_| 1);
        phases.push(Phase {
            name: "main".into(),
            loops: passes,
            events: direct,
            affinity: None,
        });
    }
    // Since rt-app 1.1 `dl-runtime` on a fair task sets its custom slice (sched_runtime).
    let slice = match (custom_slice, policy) {
        (None, _) => None,
        (Some((ns, _)), super::PolicyKind::Other | super::PolicyKind::Batch) => Some(ns),
        (Some((_, pos)), _) => {
            return Err(ctx.err(
                pos,
                "`dl-runtime` sets a custom slice only for SCHED_OTHER/SCHED_BATCH tasks",
            ))
        }
    };
    let template = TaskSpec {
        name: key.to_string(),
        slice,
        process: process.to_string(),
        policy: policy.with_priority(&ctx, priority)?,
        affinity,
        group,
        delay,
        loops,
        phases,
        ..TaskSpec::default()
    };
    let tasks = if instances == 1 {
        vec![instance(&template, key.to_string())]
    } else {
        (0..instances)
            .map(|i| instance(&template, format!("{key}-{i}")))
            .collect()
    };
    Ok(tasks)
}

/// A (modern) thread object's keys as written, before they are combined into a task.
struct TaskKeys {
    instances: u64,
    loops: Option<u64>,
    policy: super::PolicyKind,
    priority: Option<(i64, Pos)>,
    affinity: Option<Vec<usize>>,
    delay: Nanos,
    group: Option<String>,
    /// `dl-runtime`, and where it is written.
    custom_slice: Option<(Nanos, Pos)>,
    phases: Vec<Phase>,
    /// Events written directly in the task rather than in `phases`.
    direct: Vec<Event>,
}

impl TaskKeys {
    /// Read every key of the thread object `key`; unknown keys are errors.
    fn read(
        ctx: &Ctx,
        members: &[Member],
        key: &str,
        global: &Global,
    ) -> Result<TaskKeys, WorkloadError> {
        let mut k = TaskKeys {
            instances: 1,
            loops: None,
            policy: global.default_policy,
            priority: None,
            affinity: None,
            delay: 0,
            group: None,
            custom_slice: None,
            phases: Vec::new(),
            direct: Vec::new(),
        };
        for m in members {
            let node = &m.value;
            match m.key.as_str() {
                "instance" => k.instances = positive(ctx, node)?,
                "loop" => k.loops = read_loop(ctx, m)?,
                "policy" => k.policy = super::PolicyKind::parse(ctx, node)?,
                "priority" => k.priority = Some((int_value(ctx, node)?, node.pos)),
                "cpus" => k.affinity = Some(cpu_list(ctx, node)?),
                "delay" => k.delay = super::count(ctx, node)? * US,
                "taskgroup" => k.group = Some(taskgroup(ctx, m)?),
                "dl-runtime" => k.custom_slice = Some((super::count(ctx, node)? * US, node.pos)),
                "phases" => {
                    for p in object(ctx, node)? {
                        k.phases.push(read_phase(ctx, p, key, global)?);
                    }
                }
                other => match events::kind_of(other) {
                    Some(kind) => {
                        k.direct
                            .push(events::read(&ctx.phase("main"), kind, m, key, global)?)
                    }
                    None => return Err(unknown_key(&ctx.phase("main"), m, "task")),
                },
            }
        }
        Ok(k)
    }
}

/// One thread of a thread object: its own name and its own `unique*` timers.
fn instance(template: &TaskSpec, name: String) -> TaskSpec {
    let mut task = template.clone();
    for phase in &mut task.phases {
        for event in &mut phase.events {
            if let Event::Timer { name: timer, .. } = event {
                if timer.starts_with("unique") {
                    *timer = format!("{name}/{timer}");
                }
            }
        }
    }
    task.name = name;
    task
}

fn read_phase(
    task_ctx: &Ctx,
    member: &Member,
    task_key: &str,
    global: &Global,
) -> Result<Phase, WorkloadError> {
    let ctx = task_ctx.phase(&member.key);
    let mut phase = Phase {
        name: member.key.clone(),
        loops: 1,
        events: Vec::new(),
        affinity: None,
    };
    for m in object(&ctx, &member.value)? {
        match m.key.as_str() {
            "loop" => phase.loops = positive(&ctx, &m.value)?,
            "cpus" => phase.affinity = Some(cpu_list(&ctx, &m.value)?),
            k @ ("policy" | "priority" | "taskgroup" | "dl-runtime" | "dl-period"
            | "dl-deadline") => {
                return Err(ctx.event(k).err(
                    m.key_pos,
                    format!("per-phase `{k}` is not supported: scheduling parameters and the cgroup are per task in the simulator"),
                ))
            }
            k => match events::kind_of(k) {
                Some(kind) => phase
                    .events
                    .push(events::read(&ctx, kind, m, task_key, global)?),
                None => return Err(unknown_key(&ctx, m, "phase")),
            },
        }
    }
    Ok(phase)
}

/// rt-app's task `loop`: −1 (or any negative) = forever.
pub fn read_loop(ctx: &Ctx, m: &Member) -> Result<Option<u64>, WorkloadError> {
    match int_value(ctx, &m.value)? {
        v if v < 0 => Ok(None),
        0 => Err(ctx.err(
            m.value.pos,
            "loop 0 runs nothing; use -1 (forever) or a count",
        )),
        v => Ok(Some(v as u64)),
    }
}

fn taskgroup(ctx: &Ctx, m: &Member) -> Result<String, WorkloadError> {
    let path = str_value(ctx, &m.value)?.trim_matches('/').to_string();
    if path.is_empty() {
        return Err(ctx.err(m.value.pos, "taskgroup path is empty"));
    }
    Ok(path)
}

fn unknown_key(ctx: &Ctx, m: &Member, level: &str) -> WorkloadError {
    let reason = UNSUPPORTED
        .iter()
        .find(|(k, _)| *k == m.key)
        .map(|(_, why)| format!("`{}` is not supported: {why}", m.key))
        .unwrap_or_else(|| match level {
            "phase" => format!(
                "unknown event `{}` (this reader knows run, runtime, sleep, timer, lock, unlock, wait, signal, broad, sync, barrier, suspend, resume, yield, mem, iorun)",
                m.key
            ),
            _ => format!("unknown {level} key or event `{}`", m.key),
        });
    ctx.event(&m.key).err(m.key_pos, reason)
}
