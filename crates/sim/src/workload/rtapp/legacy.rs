//! rt-app ≤ 0.3's periodic tasks, as in `examples/merge/thread*.json`.
//!
//! A legacy task has `exec` and `period` (µs), an optional `deadline`, a `lock_order` (the
//! resources it takes each period, in order) and per-resource `duration`/`access`. Resource
//! types come from the top-level `resources` section. Each period, rt-app 0.3 (`run()` in
//! `rt-app.c`) did, for every resource R in `lock_order`: take the resources R `access`es
//! (recursively) and then R itself — a mutex is locked, a `wait` waits on R's condition with
//! the mutex before it, `signal`/`broadcast`/`sync` act on their `target` — busy-loop R's
//! `duration` (counted against `exec`; a `sleep` resource sleeps it instead), release the
//! mutexes in reverse order; then it busy-loops what is left of `exec` and sleeps until the
//! next period (an absolute, drift-free timer). Translated here into the same event sequence.
//!
//! `deadline` only moved rt-app's logged slack; the simulator measures slack at the period's
//! end (the timer), so a deadline shorter than the period is read but has no effect.

use uxsched_model::{Nanos, US};

use super::json::{Member, Node, Pos, Value};
use super::{count, cpu_list, field, int_value, object, str_value, task, Ctx, Global, Sourced};
use crate::workload::{Event, Phase, TaskSpec, WorkloadError};

/// Keys that mark a task as legacy.
const MARKERS: &[&str] = &["exec", "period", "lock_order"];

pub fn is_legacy(members: &[Member]) -> bool {
    members.iter().any(|m| MARKERS.contains(&m.key.as_str()))
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Mutex,
    Wait,
    Signal(String),
    Broadcast(String),
    Sync(String),
    Sleep,
    Run,
}

/// The top-level `resources` section: name → type.
pub struct ResourceTable {
    entries: Vec<(String, Kind)>,
}

impl ResourceTable {
    pub fn read(members: &[Sourced]) -> Result<Self, WorkloadError> {
        let mut entries = Vec::new();
        for s in members {
            let ctx = Ctx {
                file: s.file,
                ..Ctx::default()
            };
            if let Value::Int(_) = s.member.value.value {
                let n = count(&ctx, &s.member.value)?;
                entries.extend((0..n).map(|i| (i.to_string(), Kind::Mutex)));
                continue;
            }
            let kind = read_kind(&ctx, &s.member.value)?;
            entries.retain(|(name, _)| *name != s.member.key);
            entries.push((s.member.key.clone(), kind));
        }
        Ok(ResourceTable { entries })
    }

    fn kind(&self, name: &str) -> Option<&Kind> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, k)| k)
    }
}

fn read_kind(ctx: &Ctx, node: &Node) -> Result<Kind, WorkloadError> {
    let target = || -> Result<String, WorkloadError> {
        let t = field(ctx, node, "target")?
            .ok_or_else(|| ctx.err(node.pos, "this resource type needs a `target`"))?;
        str_value(ctx, t).map(str::to_string)
    };
    let kind = match field(ctx, node, "type")? {
        None => "mutex",
        Some(t) => str_value(ctx, t)?,
    };
    Ok(match kind {
        "mutex" => Kind::Mutex,
        "wait" => Kind::Wait,
        "signal" => Kind::Signal(target()?),
        "broadcast" => Kind::Broadcast(target()?),
        "sync" => Kind::Sync(target()?),
        "sleep" => Kind::Sleep,
        "run" => Kind::Run,
        other => {
            return Err(ctx.err(
                node.pos,
                format!("resource type `{other}` is not supported in legacy tasks"),
            ))
        }
    })
}

pub fn read_task(
    ctx: &Ctx,
    name: &str,
    members: &[Member],
    global: &Global,
    table: &ResourceTable,
    process: &str,
) -> Result<TaskSpec, WorkloadError> {
    let mut exec = None;
    let mut period = None;
    let mut lock_order: Option<&Node> = None;
    let mut uses: Option<&Node> = None;
    let mut policy = global.default_policy;
    let mut priority = None;
    let mut affinity = None;
    let mut loops = None;
    let mut delay = 0;
    for m in members {
        let node = &m.value;
        match m.key.as_str() {
            "exec" => exec = Some((count(ctx, node)? * US, node.pos)),
            "period" => period = Some(count(ctx, node)? * US),
            "deadline" => {
                count(ctx, node)?;
            }
            "lock_order" => lock_order = Some(node),
            "resources" => uses = Some(node),
            "policy" => policy = super::PolicyKind::parse(ctx, node)?,
            "priority" => priority = Some((int_value(ctx, node)?, node.pos)),
            "cpus" => affinity = Some(cpu_list(ctx, node)?),
            "loop" => loops = task::read_loop(ctx, m)?,
            "delay" => delay = count(ctx, node)? * US,
            other => {
                return Err(ctx.err(
                    m.key_pos,
                    format!("unknown key `{other}` in a legacy (exec/period) task"),
                ))
            }
        }
    }
    let at = members[0].key_pos;
    let (exec, exec_pos) = exec.ok_or_else(|| ctx.err(at, "legacy task needs `exec` (µs)"))?;
    let period = period
        .filter(|p| *p > 0)
        .ok_or_else(|| ctx.err(at, "legacy task needs a positive `period` (µs)"))?;
    if exec > period {
        return Err(ctx.err(exec_pos, "`exec` is longer than `period`"));
    }
    let mut events = Vec::new();
    let mut left = exec;
    if let Some(order) = lock_order {
        let Value::Array(items) = &order.value else {
            return Err(ctx.err(order.pos, "`lock_order` must be an array of resource names"));
        };
        for item in items {
            let resource = str_value(ctx, item)?;
            left = left.saturating_sub(take(ctx, item.pos, resource, uses, table, &mut events)?);
        }
    }
    if left > 0 {
        events.push(Event::Run(left));
    }
    events.push(Event::Timer {
        name: format!("{name}/period"),
        period,
        absolute: true,
    });
    Ok(TaskSpec {
        name: name.to_string(),
        process: process.to_string(),
        policy: policy.with_priority(ctx, priority)?,
        affinity,
        delay,
        loops,
        phases: vec![Phase {
            name: "main".into(),
            loops: 1,
            events,
            affinity: None,
        }],
        ..TaskSpec::default()
    })
}

/// Emit the events for one `lock_order` entry; returns the busy time counted against `exec`.
fn take(
    ctx: &Ctx,
    pos: Pos,
    resource: &str,
    uses: Option<&Node>,
    table: &ResourceTable,
    events: &mut Vec<Event>,
) -> Result<Nanos, WorkloadError> {
    let mut chain = Vec::new();
    access_chain(ctx, resource, uses, &mut chain)?;
    // rt-app puts the resource itself after the ones it accesses.
    chain.remove(0);
    chain.push(resource.to_string());

    let mut busy = true;
    let mut prev: Option<&str> = None;
    for name in &chain {
        let kind = table.kind(name).ok_or_else(|| {
            ctx.err(
                pos,
                format!("resource `{name}` is not declared in `resources`"),
            )
        })?;
        match kind {
            Kind::Mutex => events.push(Event::Lock(name.clone())),
            Kind::Wait => {
                let mutex = prev.ok_or_else(|| {
                    ctx.err(
                        pos,
                        format!("wait resource `{name}` needs a mutex in its `access` list"),
                    )
                })?;
                events.push(Event::Wait {
                    cond: name.clone(),
                    mutex: mutex.to_string(),
                });
            }
            Kind::Signal(target) => events.push(Event::Signal(target.clone())),
            Kind::Broadcast(target) => events.push(Event::Broadcast(target.clone())),
            Kind::Sync(target) => {
                let mutex = prev.ok_or_else(|| {
                    ctx.err(
                        pos,
                        format!("sync resource `{name}` needs a mutex in its `access` list"),
                    )
                })?;
                events.push(Event::SignalWait {
                    cond: target.clone(),
                    mutex: mutex.to_string(),
                });
            }
            Kind::Sleep => busy = false,
            Kind::Run => {}
        }
        prev = Some(name);
    }
    let duration = duration_of(ctx, resource, uses)?;
    if duration > 0 {
        events.push(if busy {
            Event::Run(duration)
        } else {
            Event::Sleep(duration)
        });
    }
    for name in chain.iter().rev() {
        if table.kind(name) == Some(&Kind::Mutex) {
            events.push(Event::Unlock(name.clone()));
        }
    }
    Ok(if busy { duration } else { 0 })
}

/// `resource` followed by everything it accesses, depth first, each once.
fn access_chain(
    ctx: &Ctx,
    resource: &str,
    uses: Option<&Node>,
    chain: &mut Vec<String>,
) -> Result<(), WorkloadError> {
    if chain.iter().any(|c| c == resource) {
        return Ok(());
    }
    chain.push(resource.to_string());
    let Some(entry) = uses.map(|u| field(ctx, u, resource)).transpose()?.flatten() else {
        return Ok(());
    };
    if let Some(access) = field(ctx, entry, "access")? {
        let Value::Array(items) = &access.value else {
            return Err(ctx.err(access.pos, "`access` must be an array of resource names"));
        };
        for item in items {
            access_chain(ctx, str_value(ctx, item)?, uses, chain)?;
        }
    }
    Ok(())
}

fn duration_of(ctx: &Ctx, resource: &str, uses: Option<&Node>) -> Result<Nanos, WorkloadError> {
    let Some(entry) = uses.map(|u| field(ctx, u, resource)).transpose()?.flatten() else {
        return Ok(0);
    };
    for m in object(ctx, entry)? {
        if !matches!(m.key.as_str(), "duration" | "access") {
            return Err(ctx.err(
                m.key_pos,
                format!("unknown key `{}` in a resource use", m.key),
            ));
        }
    }
    match field(ctx, entry, "duration")? {
        Some(d) => Ok(count(ctx, d)? * US),
        None => Ok(0),
    }
}
