//! The native workload format (TOML), documented in `docs/workloads.md`.
//!
//! It has the shape of the model: `[platform]`, `[[group]]`, `[[task]]` with `events = [...]`
//! or `[[task.phase]]`s. It adds what rt-app cannot say — cgroups with shares and bandwidth,
//! custom slices, labels, `oom_adj`, `send`/`recv` channels and `begin`/`end` interaction
//! markers — and uses human durations. Errors carry `file:line:col` and name the key.

mod events;
mod schema;

use std::ops::Range;
use std::path::Path;

use schema::{EventDef, File, PhaseDef, PlatformDef, PolicyName, TaskDef};
use toml::Spanned;
use uxsched_model::MS;

use super::{
    Bandwidth, Event, GroupSpec, Phase, SchedPolicy, Subject, TaskSpec, Workload, WorkloadError,
};
use crate::platform::{DomainSpec, PlatformSpec};

/// Read a native workload file.
pub fn load(path: &Path) -> Result<Workload, WorkloadError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| WorkloadError::new(path.display().to_string(), format!("cannot read: {e}")))?;
    parse(&text, &path.display().to_string())
}

/// Read native TOML from text; `file_name` is used in messages and (its stem) as the default
/// workload name.
pub fn parse(text: &str, file_name: &str) -> Result<Workload, WorkloadError> {
    let at = Locator { text, file_name };
    let file: File = toml::from_str(text).map_err(|e| {
        let message = e.message().trim_end().to_string();
        match e.span() {
            Some(span) => at.err(span, message),
            None => WorkloadError::new(file_name, message),
        }
    })?;
    let stem = Path::new(file_name)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut workload = Workload {
        name: file.name.clone().unwrap_or(stem),
        duration: file.duration.map(|d| d.0),
        platform: match &file.platform {
            Some(p) => Some(platform(p).map_err(|m| at.err(at.platform_span(), m))?),
            None => None,
        },
        ..Workload::default()
    };
    for g in &file.group {
        let def = g.get_ref();
        let bandwidth = match (def.quota, def.period) {
            (Some(quota), period) => Some(Bandwidth {
                quota: quota.0,
                period: period.map_or(100 * MS, |p| p.0),
            }),
            (None, Some(_)) => return Err(at.err(g.span(), "`period` without `quota`")),
            (None, None) => None,
        };
        workload.groups.push(GroupSpec {
            path: def.path.clone(),
            shares: def.shares,
            bandwidth,
        });
    }
    for f in &file.file {
        let def = f.get_ref();
        workload.files.push(crate::workload::FileSpec {
            name: def.name.clone(),
            size: def.size.0,
        });
    }
    let file_spans: Vec<Range<usize>> = file.file.iter().map(|f| f.span()).collect();
    // The TOML table each expanded task came from, to place validation errors.
    let mut origins = Vec::new();
    let group_spans: Vec<Range<usize>> = file.group.iter().map(|g| g.span()).collect();
    for t in file.task {
        let span = t.span();
        for spec in task(&at, span.clone(), t.into_inner())? {
            origins.push(span.clone());
            workload.tasks.push(spec);
        }
    }
    workload.validate().map_err(|invalid| {
        let span = match invalid.subject {
            Subject::Task(i) => origins[i].clone(),
            Subject::Group(i) => group_spans[i].clone(),
            Subject::File(i) => file_spans[i].clone(),
            Subject::Workload => at.platform_span(),
        };
        at.err(span, invalid.message)
    })?;
    Ok(workload)
}

/// Turns byte spans into `file:line:col` locations.
struct Locator<'a> {
    text: &'a str,
    file_name: &'a str,
}

impl Locator<'_> {
    /// Where the platform is declared (its first table header), else the file start.
    fn platform_span(&self) -> Range<usize> {
        let start = self.text.find("[platform").unwrap_or(0);
        start..start
    }

    fn err(&self, span: Range<usize>, message: impl Into<String>) -> WorkloadError {
        let before = &self.text[..span.start.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        WorkloadError::new(format!("{}:{line}:{col}", self.file_name), message)
    }
}

fn platform(def: &PlatformDef) -> Result<PlatformSpec, String> {
    match (def.cpus, def.domain.is_empty()) {
        (Some(n), true) => Ok(PlatformSpec::uniform(n)),
        (None, false) => Ok(PlatformSpec {
            domains: def
                .domain
                .iter()
                .map(|d| DomainSpec {
                    name: d.name.clone(),
                    cpus: d.cpus,
                    capacity: d.capacity,
                    opps_khz: d.opps_khz.clone(),
                    initial_khz: d
                        .initial_khz
                        .or_else(|| d.opps_khz.iter().copied().max())
                        .unwrap_or(0),
                })
                .collect(),
        }),
        _ => Err("platform: give either `cpus = N` or `[[platform.domain]]` tables".into()),
    }
}

/// One `[[task]]` table → its instances.
fn task(at: &Locator, span: Range<usize>, def: TaskDef) -> Result<Vec<TaskSpec>, WorkloadError> {
    let here = |m: String| at.err(span.clone(), format!("task `{}`: {m}", def.name));
    let policy = policy(&def).map_err(|(s, m)| at.err(s.unwrap_or(span.clone()), m))?;
    let ioprio = def
        .ioprio
        .as_ref()
        .map(|p| crate::io::IoPrio::parse(p.get_ref()).map_err(|m| at.err(p.span(), m)))
        .transpose()?;
    let phases = match (def.events, def.phase.is_empty()) {
        (Some(events), true) => vec![Phase {
            name: "main".into(),
            loops: 1,
            events: convert_events(at, events)?,
            affinity: None,
        }],
        (None, false) => def
            .phase
            .into_iter()
            .enumerate()
            .map(|(i, p)| phase(at, i, p.into_inner()))
            .collect::<Result<_, _>>()?,
        (Some(_), false) => {
            return Err(here(
                "give either `events` or `[[task.phase]]`, not both".into(),
            ))
        }
        (None, true) => return Err(here("no `events` and no `[[task.phase]]`".into())),
    };
    let template = TaskSpec {
        name: def.name.clone(),
        process: def.process.clone().unwrap_or_else(|| def.name.clone()),
        policy,
        slice: def.slice.as_ref().map(|s| s.get_ref().0),
        affinity: def.cpus.clone(),
        group: def.group.as_ref().map(|g| g.get_ref().clone()),
        delay: def.delay.map_or(0, |d| d.0),
        loops: def.loops,
        phases,
        labels: def.labels.clone(),
        oom_adj: def.oom_adj,
        ioprio,
    };
    Ok(match def.instances {
        None | Some(1) => vec![template],
        Some(0) => return Err(here("`instances` must be at least 1".into())),
        Some(n) => {
            let stagger = def.stagger.map_or(0, |d| d.0);
            (0..n).map(|i| instance(&template, i, stagger)).collect()
        }
    })
}

/// Instance `i` of an instanced task: named `NAME-i`, started `i × stagger` later, with `{i}`
/// in event names replaced by `i` (so instances can own timers and channels).
fn instance(template: &TaskSpec, i: u64, stagger: u64) -> TaskSpec {
    let mut task = template.clone();
    task.name = format!("{}-{i}", template.name);
    task.delay += i * stagger;
    let index = i.to_string();
    for phase in &mut task.phases {
        for event in &mut phase.events {
            if let Some(name) = event.name_mut() {
                *name = name.replace("{i}", &index);
            }
            if let Event::Wait { mutex, .. } | Event::SignalWait { mutex, .. } = event {
                *mutex = mutex.replace("{i}", &index);
            }
        }
    }
    task
}

type SpanError = (Option<Range<usize>>, String);

fn policy(def: &TaskDef) -> Result<SchedPolicy, SpanError> {
    let kind = def.policy.unwrap_or(PolicyName::Normal);
    let nice = match (&def.nice, kind) {
        (None, _) => 0,
        (Some(n), PolicyName::Normal | PolicyName::Batch) => {
            let v = *n.get_ref();
            if !(-20..=19).contains(&v) {
                return Err((Some(n.span()), format!("`nice` {v} is outside -20..=19")));
            }
            v as i32
        }
        (Some(n), _) => {
            return Err((
                Some(n.span()),
                "`nice` applies to normal and batch tasks only".into(),
            ))
        }
    };
    let prio = match (&def.prio, kind) {
        (Some(p), PolicyName::Fifo | PolicyName::Rr) => {
            let v = *p.get_ref();
            if !(1..=99).contains(&v) {
                return Err((Some(p.span()), format!("`prio` {v} is outside 1..=99")));
            }
            v as u8
        }
        (None, PolicyName::Fifo | PolicyName::Rr) => {
            return Err((None, "fifo and rr tasks need `prio` (1..=99)".into()))
        }
        (Some(p), _) => {
            return Err((
                Some(p.span()),
                "`prio` applies to fifo and rr tasks only".into(),
            ))
        }
        (None, _) => 0,
    };
    if let Some(slice) = &def.slice {
        let ns = slice.get_ref().0;
        if !(super::validate::SLICE_MIN..=super::validate::SLICE_MAX).contains(&ns) {
            return Err((
                Some(slice.span()),
                "`slice` must be within 0.1ms..=100ms".into(),
            ));
        }
    }
    Ok(match kind {
        PolicyName::Normal => SchedPolicy::Normal { nice },
        PolicyName::Batch => SchedPolicy::Batch { nice },
        PolicyName::Idle => SchedPolicy::Idle,
        PolicyName::Fifo => SchedPolicy::Fifo { prio },
        PolicyName::Rr => SchedPolicy::Rr { prio },
    })
}

fn phase(at: &Locator, index: usize, def: PhaseDef) -> Result<Phase, WorkloadError> {
    Ok(Phase {
        name: def.name.unwrap_or_else(|| format!("phase{index}")),
        loops: def.loops,
        events: convert_events(at, def.events)?,
        affinity: def.cpus,
    })
}

fn convert_events(
    at: &Locator,
    events: Vec<Spanned<EventDef>>,
) -> Result<Vec<Event>, WorkloadError> {
    events
        .into_iter()
        .map(|e| {
            let span = e.span();
            events::convert(e.into_inner()).map_err(|m| at.err(span, m))
        })
        .collect()
}
