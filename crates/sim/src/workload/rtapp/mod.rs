//! rt-app JSON reader (rt-app's `doc/tutorial.txt` is the reference for every key).
//!
//! The input is "JSON as workgen accepts it" — see [`json`] for the extensions. Semantics:
//! - `global`: `duration` (s, −1 = until the tasks end), `default_policy`, `mem_buffer_size` and
//!   `io_device` (for `mem`/`iorun`). `calibration` is ignored because the simulator's `run`
//!   is already expressed in reference-CPU time, which is what calibration approximates on real
//!   hardware; the logging keys (`logdir`, `log_*`, `ftrace`, `gnuplot`, `lock_pages`, `frag`)
//!   have no simulated effect. `pi_enabled`/`cumulative_slack` set to true are errors
//!   (priority inheritance and cumulative slack are not modelled).
//! - `tasks`: see [`task`]; `resources` (old style) is accepted: modern rt-app creates
//!   resources on use, and the legacy `exec`/`period`/`lock_order` tasks of rt-app ≤ 0.3 read
//!   their types from it (see [`legacy`]).
//! - Several fragments can be merged in order ([`load_many`]), as rt-app's `merge.py` does:
//!   sections are combined and a later task of the same name replaces an earlier one.

mod events;
mod json;
mod legacy;
mod task;

use std::path::Path;

use json::{Member, Node, Pos, Value};
use uxsched_model::SEC;

use super::{GroupSpec, SchedPolicy, Subject, Workload, WorkloadError};

/// Read one rt-app file.
pub fn load(path: &Path) -> Result<Workload, WorkloadError> {
    load_many(&[path])
}

/// Read rt-app fragments (e.g. `merge/global.json`, `merge/resources.json`, `merge/thread*.json`)
/// and merge them in order.
pub fn load_many<P: AsRef<Path>>(paths: &[P]) -> Result<Workload, WorkloadError> {
    let mut texts = Vec::new();
    for path in paths {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            WorkloadError::new(path.display().to_string(), format!("cannot read: {e}"))
        })?;
        texts.push((path.display().to_string(), text));
    }
    // One file is named by its stem; merged fragments by their directory (`merge`).
    let name_from = |p: Option<&std::ffi::OsStr>| p.map(|s| s.to_string_lossy().into_owned());
    let name = match paths {
        [one] => name_from(one.as_ref().file_stem()),
        [first, ..] => name_from(first.as_ref().parent().and_then(Path::file_name)),
        [] => None,
    }
    .unwrap_or_else(|| "rt-app".into());
    let sources: Vec<(&str, &str)> = texts
        .iter()
        .map(|(f, t)| (f.as_str(), t.as_str()))
        .collect();
    parse_fragments(&sources, &name)
}

/// Read rt-app JSON from text; `file_name` is used in messages and names the workload.
pub fn parse(text: &str, file_name: &str) -> Result<Workload, WorkloadError> {
    let stem = Path::new(file_name)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| file_name.to_string());
    parse_fragments(&[(file_name, text)], &stem)
}

/// Where an error is: file, position, and the task/phase/event being read.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ctx<'a> {
    pub file: &'a str,
    pub task: Option<&'a str>,
    pub phase: Option<&'a str>,
    pub event: Option<&'a str>,
}

impl<'a> Ctx<'a> {
    pub fn err(&self, pos: Pos, message: impl Into<String>) -> WorkloadError {
        let mut location = format!("{}:{pos}", self.file);
        let parts: Vec<String> = [
            ("task", self.task),
            ("phase", self.phase),
            ("event", self.event),
        ]
        .iter()
        .filter_map(|(what, name)| name.map(|n| format!("{what} `{n}`")))
        .collect();
        if !parts.is_empty() {
            location = format!("{location}: {}", parts.join(", "));
        }
        WorkloadError::new(location, message)
    }

    pub fn task(&self, name: &'a str) -> Self {
        Ctx {
            task: Some(name),
            ..self.clone()
        }
    }

    pub fn phase(&self, name: &'a str) -> Self {
        Ctx {
            phase: Some(name),
            ..self.clone()
        }
    }

    pub fn event(&self, name: &'a str) -> Self {
        Ctx {
            event: Some(name),
            ..self.clone()
        }
    }
}

/// A member together with the file it came from.
#[derive(Clone, Copy)]
pub(crate) struct Sourced<'a> {
    pub file: &'a str,
    pub member: &'a Member,
}

/// The `global` settings that shape tasks.
pub(crate) struct Global {
    pub default_policy: PolicyKind,
    pub mem_buffer_size: u64,
    pub io_device: String,
    /// [`CGROUP_WEIGHTS`]: each group path's `cpu.shares`, with where it was written.
    pub weights: Vec<(String, u64, Pos)>,
}

/// uxsched's global key for the weights of `taskgroup`s (`{"/heavy": 2048}`, `cpu.shares`
/// units): rt-app has no key for a group's weight, so without it every group has 1024.
/// `sim validate` makes the same groups with these shares on the kernel and strips the key from
/// the copy rt-app reads.
pub const CGROUP_WEIGHTS: &str = "uxsched_cgroup_weights";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PolicyKind {
    Other,
    Batch,
    Idle,
    Fifo,
    Rr,
}

impl PolicyKind {
    pub fn parse(ctx: &Ctx, node: &Node) -> Result<Self, WorkloadError> {
        let s = str_value(ctx, node)?;
        Ok(match s {
            "SCHED_OTHER" | "SCHED_NORMAL" => PolicyKind::Other,
            "SCHED_BATCH" => PolicyKind::Batch,
            "SCHED_IDLE" => PolicyKind::Idle,
            "SCHED_FIFO" => PolicyKind::Fifo,
            "SCHED_RR" => PolicyKind::Rr,
            "SCHED_DEADLINE" => {
                return Err(ctx.err(node.pos, "SCHED_DEADLINE is not modelled by the simulator"))
            }
            other => {
                return Err(ctx.err(
                    node.pos,
                    format!("unknown policy `{other}` (use SCHED_OTHER, SCHED_BATCH, SCHED_IDLE, SCHED_FIFO or SCHED_RR)"),
                ))
            }
        })
    }

    /// rt-app's `priority` is the nice value for fair policies and the RT priority otherwise;
    /// it defaults to 0 and 10 respectively.
    pub fn with_priority(
        self,
        ctx: &Ctx,
        priority: Option<(i64, Pos)>,
    ) -> Result<SchedPolicy, WorkloadError> {
        let fair = |p: Option<(i64, Pos)>| -> Result<i32, WorkloadError> {
            match p {
                None => Ok(0),
                Some((v, _)) if (-20..=19).contains(&v) => Ok(v as i32),
                Some((v, pos)) => Err(ctx.err(pos, format!("nice {v} is outside -20..=19"))),
            }
        };
        let rt = |p: Option<(i64, Pos)>| -> Result<u8, WorkloadError> {
            match p {
                None => Ok(10),
                Some((v, _)) if (1..=99).contains(&v) => Ok(v as u8),
                Some((v, pos)) => Err(ctx.err(pos, format!("RT priority {v} is outside 1..=99"))),
            }
        };
        Ok(match self {
            PolicyKind::Other => SchedPolicy::Normal {
                nice: fair(priority)?,
            },
            PolicyKind::Batch => SchedPolicy::Batch {
                nice: fair(priority)?,
            },
            PolicyKind::Idle => SchedPolicy::Idle,
            PolicyKind::Fifo => SchedPolicy::Fifo {
                prio: rt(priority)?,
            },
            PolicyKind::Rr => SchedPolicy::Rr {
                prio: rt(priority)?,
            },
        })
    }
}

fn parse_fragments(sources: &[(&str, &str)], name: &str) -> Result<Workload, WorkloadError> {
    let mut docs = Vec::new();
    for (file, text) in sources {
        let node = json::parse(text).map_err(|e| {
            WorkloadError::new(
                format!("{file}:{}", e.pos),
                format!("syntax: {}", e.message),
            )
        })?;
        docs.push((*file, node));
    }
    let Sections {
        global,
        tasks,
        resources,
    } = Sections::merge(&docs)?;
    let (duration, settings) = read_global(&global)?;
    if tasks.is_empty() {
        let file = sources.first().map(|s| s.0).unwrap_or_default();
        return Err(WorkloadError::new(
            file,
            "no `tasks` section: nothing to run",
        ));
    }
    let table = legacy::ResourceTable::read(&resources)?;
    let mut workload = Workload {
        name: name.to_string(),
        duration,
        ..Workload::default()
    };
    let mut origins = Vec::new();
    for t in &tasks {
        let expanded = task::read(t, &settings, &table, name)?;
        for spec in expanded {
            if let Some(group) = &spec.group {
                add_group_path(&mut workload.groups, group);
            }
            origins.push(*t);
            workload.tasks.push(spec);
        }
    }
    for (path, shares, pos) in &settings.weights {
        let group = workload
            .groups
            .iter_mut()
            .find(|g| g.path == path.trim_matches('/'))
            .ok_or_else(|| {
                let ctx = Ctx {
                    file: global
                        .iter()
                        .rev()
                        .find(|s| s.member.key == CGROUP_WEIGHTS)
                        .map_or("", |s| s.file),
                    ..Ctx::default()
                };
                ctx.err(
                    *pos,
                    format!("{CGROUP_WEIGHTS}: no task has `taskgroup` {path}"),
                )
            })?;
        group.shares = *shares;
    }
    workload.validate().map_err(|invalid| {
        let at = match invalid.subject {
            Subject::Task(i) => origins[i],
            _ => tasks[0],
        };
        let ctx = Ctx {
            file: at.file,
            ..Ctx::default()
        };
        ctx.err(at.member.key_pos, invalid.message)
    })?;
    Ok(workload)
}

/// The members of every fragment's sections, in order, each with its file.
struct Sections<'a> {
    global: Vec<Sourced<'a>>,
    /// Merged as `merge.py` does ([`merge_task`]).
    tasks: Vec<Sourced<'a>>,
    resources: Vec<Sourced<'a>>,
}

impl<'a> Sections<'a> {
    /// Every fragment's sections in order; an unknown section is an error.
    fn merge(docs: &'a [(&'a str, Node)]) -> Result<Sections<'a>, WorkloadError> {
        let mut global: Vec<Sourced> = Vec::new();
        let mut tasks: Vec<Sourced> = Vec::new();
        let mut resources: Vec<Sourced> = Vec::new();
        for (file, doc) in docs {
            let ctx = Ctx {
                file,
                ..Ctx::default()
            };
            for section in object(&ctx, doc)? {
                let members = || -> Result<Vec<Sourced>, WorkloadError> {
                    Ok(object(&ctx, &section.value)?
                        .iter()
                        .map(|member| Sourced { file, member })
                        .collect())
                };
                match section.key.as_str() {
                    "global" => global.extend(members()?),
                    "tasks" => {
                        for t in members()? {
                            merge_task(&ctx, &mut tasks, t)?;
                        }
                    }
                    "resources" => match &section.value.value {
                        // rt-app ≤ 0.2: a number of anonymous mutexes "0".."n-1".
                        Value::Int(_) => resources.push(Sourced {
                            file,
                            member: section,
                        }),
                        _ => resources.extend(members()?),
                    },
                    other => {
                        return Err(ctx.err(
                            section.key_pos,
                            format!(
                                "unknown section `{other}` (expected tasks, global, resources)"
                            ),
                        ))
                    }
                }
            }
        }
        Ok(Sections {
            global,
            tasks,
            resources,
        })
    }
}

/// merge.py semantics across files; a name repeated inside one file is an error.
fn merge_task<'a>(
    ctx: &Ctx,
    tasks: &mut Vec<Sourced<'a>>,
    new: Sourced<'a>,
) -> Result<(), WorkloadError> {
    match tasks.iter_mut().find(|t| t.member.key == new.member.key) {
        Some(old) if old.file == new.file => Err(ctx.err(
            new.member.key_pos,
            format!("task `{}` is defined twice", new.member.key),
        )),
        Some(old) => {
            *old = new;
            Ok(())
        }
        None => {
            tasks.push(new);
            Ok(())
        }
    }
}

/// rt-app's `taskgroup` is a cgroup path like `/tg1/tg2`; each level is a group with the
/// default weight.
fn add_group_path(groups: &mut Vec<GroupSpec>, path: &str) {
    let mut prefix = String::new();
    for part in path.split('/') {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        if !groups.iter().any(|g| g.path == prefix) {
            groups.push(GroupSpec {
                path: prefix.clone(),
                shares: 1024,
                bandwidth: None,
            });
        }
    }
}

/// [`CGROUP_WEIGHTS`]: an object of `/group` path → `cpu.shares` (2..=262144, cgroup v1's
/// `MIN_SHARES`..=`MAX_SHARES`).
fn read_weights(ctx: &Ctx, node: &Node) -> Result<Vec<(String, u64, Pos)>, WorkloadError> {
    object(ctx, node)?
        .iter()
        .map(|m| {
            if !m.key.starts_with('/') || m.key.contains("..") || m.key.trim_matches('/').is_empty()
            {
                return Err(ctx.err(
                    m.key_pos,
                    format!("{CGROUP_WEIGHTS}: `{}` is not a /group path", m.key),
                ));
            }
            match count(ctx, &m.value)? {
                w @ 2..=262_144 => Ok((m.key.clone(), w, m.key_pos)),
                w => Err(ctx.err(
                    m.value.pos,
                    format!(
                        "{CGROUP_WEIGHTS}: {} has weight {w}; a cpu.shares weight is 2..=262144",
                        m.key
                    ),
                )),
            }
        })
        .collect()
}

fn read_global(members: &[Sourced]) -> Result<(Option<u64>, Global), WorkloadError> {
    let mut duration = None;
    let mut settings = Global {
        default_policy: PolicyKind::Other,
        mem_buffer_size: 4 * 1024 * 1024,
        io_device: "/dev/null".into(),
        weights: Vec::new(),
    };
    for s in members {
        let ctx = Ctx {
            file: s.file,
            ..Ctx::default()
        };
        let node = &s.member.value;
        match s.member.key.as_str() {
            "duration" => {
                duration = match int_value(&ctx, node)? {
                    d if d > 0 => Some(d as u64 * SEC),
                    _ => None,
                }
            }
            "default_policy" => settings.default_policy = PolicyKind::parse(&ctx, node)?,
            "mem_buffer_size" => settings.mem_buffer_size = positive(&ctx, node)?,
            "io_device" => settings.io_device = str_value(&ctx, node)?.to_string(),
            key @ ("pi_enabled" | "cumulative_slack") => {
                if node.value == Value::Bool(true) {
                    return Err(ctx.err(
                        node.pos,
                        format!("`{key}: true` is not modelled by the simulator; remove it or set it to false"),
                    ));
                }
            }
            CGROUP_WEIGHTS => settings.weights = read_weights(&ctx, node)?,
            "calibration" | "logdir" | "log_basename" | "log_size" | "ftrace" | "gnuplot"
            | "lock_pages" | "frag" => {}
            other => return Err(ctx.err(s.member.key_pos, format!("unknown global key `{other}`"))),
        }
    }
    Ok((duration, settings))
}

// ---- typed accessors shared by the submodules ----

pub(crate) fn object<'n>(ctx: &Ctx, node: &'n Node) -> Result<&'n [Member], WorkloadError> {
    match &node.value {
        Value::Object(m) => Ok(m),
        other => Err(ctx.err(
            node.pos,
            format!("expected an object, found {}", other.type_name()),
        )),
    }
}

pub(crate) fn int_value(ctx: &Ctx, node: &Node) -> Result<i64, WorkloadError> {
    match node.value {
        Value::Int(v) => Ok(v),
        ref other => Err(ctx.err(
            node.pos,
            format!("expected an integer, found {}", other.type_name()),
        )),
    }
}

/// A non-negative integer.
pub(crate) fn count(ctx: &Ctx, node: &Node) -> Result<u64, WorkloadError> {
    let v = int_value(ctx, node)?;
    u64::try_from(v).map_err(|_| ctx.err(node.pos, format!("{v} must not be negative")))
}

pub(crate) fn positive(ctx: &Ctx, node: &Node) -> Result<u64, WorkloadError> {
    match count(ctx, node)? {
        0 => Err(ctx.err(node.pos, "must be at least 1")),
        v => Ok(v),
    }
}

pub(crate) fn str_value<'n>(ctx: &Ctx, node: &'n Node) -> Result<&'n str, WorkloadError> {
    match &node.value {
        Value::Str(s) => Ok(s),
        other => Err(ctx.err(
            node.pos,
            format!("expected a string, found {}", other.type_name()),
        )),
    }
}

/// A field of an event object such as `timer: {"ref": .., "period": ..}`.
pub(crate) fn field<'n>(
    ctx: &Ctx,
    node: &'n Node,
    name: &str,
) -> Result<Option<&'n Node>, WorkloadError> {
    Ok(object(ctx, node)?
        .iter()
        .rev()
        .find(|m| m.key == name)
        .map(|m| &m.value))
}

pub(crate) fn cpu_list(ctx: &Ctx, node: &Node) -> Result<Vec<usize>, WorkloadError> {
    match &node.value {
        Value::Array(items) => items
            .iter()
            .map(|n| count(ctx, n).map(|v| v as usize))
            .collect(),
        other => Err(ctx.err(
            node.pos,
            format!(
                "`cpus` must be an array of CPU numbers, found {}",
                other.type_name()
            ),
        )),
    }
}
