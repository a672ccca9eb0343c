//! Checks every reader applies to the workload it built, so the engine can trust its input.
//!
//! Errors point at a task or group by index; each reader turns that into a file:line.
//! References that the engine resolves at run time are deliberately *not* errors: an unlock of
//! a name never locked, a barrier used by a single task, a channel nobody reads — rt-app accepts
//! them too and they are legitimate (if odd) workloads.

use std::collections::HashSet;

use uxsched_model::{Nanos, MS, US};

use super::{Event, GroupSpec, Phase, SchedPolicy, TaskSpec, Workload};

/// What an [`Invalid`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    Workload,
    Group(usize),
    Task(usize),
    File(usize),
}

/// A broken rule: the subject and a message a user can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub subject: Subject,
    pub message: String,
}

/// `sched_attr.sched_runtime` bounds for an EEVDF custom slice (kernel ≥ 6.12).
pub const SLICE_MIN: Nanos = 100 * US;
pub const SLICE_MAX: Nanos = 100 * MS;

/// cgroup v1 `cpu.shares` bounds (`MIN_SHARES`, `MAX_SHARES`).
pub const SHARES_MIN: u64 = 2;
pub const SHARES_MAX: u64 = 262_144;

impl Workload {
    /// Check the rules the engine relies on (see the module doc for what is allowed).
    pub fn validate(&self) -> Result<(), Invalid> {
        let whole = |message: String| Invalid {
            subject: Subject::Workload,
            message,
        };
        if let Some(platform) = &self.platform {
            platform
                .validate()
                .map_err(|m| whole(format!("platform: {m}")))?;
        }
        if self.duration == Some(0) {
            return Err(whole("duration is zero: nothing would run".into()));
        }
        if self.tasks.is_empty() {
            return Err(whole("the workload has no tasks".into()));
        }
        let mut paths = HashSet::new();
        for (i, group) in self.groups.iter().enumerate() {
            check_group(group, &paths).map_err(|message| Invalid {
                subject: Subject::Group(i),
                message,
            })?;
            paths.insert(group.path.as_str());
        }
        let mut files = HashSet::new();
        for (i, f) in self.files.iter().enumerate() {
            let at = |message: String| Invalid {
                subject: Subject::File(i),
                message: format!("file `{}`: {message}", f.name),
            };
            if f.name.is_empty() || !files.insert(f.name.as_str()) {
                return Err(at("the name is empty or declared twice".into()));
            }
            if f.size == 0 {
                return Err(at("the size is zero".into()));
            }
        }
        let cpus = self.platform.as_ref().map(|p| p.cpu_count());
        let mut names = HashSet::new();
        for (i, task) in self.tasks.iter().enumerate() {
            let at = |message: String| Invalid {
                subject: Subject::Task(i),
                message: format!("task `{}`: {message}", task.name),
            };
            if !names.insert(task.name.as_str()) {
                return Err(at("another task has the same name".into()));
            }
            check_task(task, &paths, &files, cpus).map_err(at)?;
        }
        Ok(())
    }
}

fn check_group(group: &GroupSpec, earlier: &HashSet<&str>) -> Result<(), String> {
    let path = &group.path;
    let at = |m: String| format!("group `{path}`: {m}");
    if path.is_empty() || path.split('/').any(str::is_empty) {
        return Err(at(
            "path must be non-empty names separated by `/`, without a leading `/`".into(),
        ));
    }
    if earlier.contains(path.as_str()) {
        return Err(at("declared twice".into()));
    }
    if let Some((parent, _)) = path.rsplit_once('/') {
        if !earlier.contains(parent) {
            return Err(at(format!(
                "parent group `{parent}` must be declared before it"
            )));
        }
    }
    if !(SHARES_MIN..=SHARES_MAX).contains(&group.shares) {
        return Err(at(format!(
            "shares {} is outside {SHARES_MIN}..={SHARES_MAX}",
            group.shares
        )));
    }
    if let Some(bw) = group.bandwidth {
        // The kernel's limits: period 1 ms..1 s, quota at least 1 ms.
        if !(MS..=1000 * MS).contains(&bw.period) {
            return Err(at("bandwidth period must be within 1ms..=1s".into()));
        }
        if bw.quota < MS {
            return Err(at("bandwidth quota must be at least 1ms".into()));
        }
    }
    Ok(())
}

fn check_task(
    task: &TaskSpec,
    groups: &HashSet<&str>,
    files: &HashSet<&str>,
    cpus: Option<usize>,
) -> Result<(), String> {
    if task.name.is_empty() {
        return Err("the name is empty".into());
    }
    match task.policy {
        SchedPolicy::Normal { nice } | SchedPolicy::Batch { nice }
            if !(-20..=19).contains(&nice) =>
        {
            return Err(format!("nice {nice} is outside -20..=19"))
        }
        SchedPolicy::Fifo { prio } | SchedPolicy::Rr { prio } if !(1..=99).contains(&prio) => {
            return Err(format!("RT priority {prio} is outside 1..=99"))
        }
        _ => {}
    }
    if let Some(slice) = task.slice {
        if !(SLICE_MIN..=SLICE_MAX).contains(&slice) {
            return Err(format!(
                "slice {slice}ns is outside 0.1ms..=100ms (sched_runtime bounds)"
            ));
        }
    }
    if let Some(group) = &task.group {
        if !groups.contains(group.as_str()) {
            return Err(format!("group `{group}` is not declared"));
        }
    }
    if task.loops == Some(0) {
        return Err("loops must be at least 1 (omit it to loop forever)".into());
    }
    check_affinity(task.affinity.as_deref(), cpus)?;
    if task.phases.is_empty() {
        return Err("it has no phases or events".into());
    }
    task.phases.iter().try_for_each(|p| {
        check_phase(p, files, cpus).map_err(|m| format!("phase `{}`: {m}", p.name))
    })
}

fn check_phase(phase: &Phase, files: &HashSet<&str>, cpus: Option<usize>) -> Result<(), String> {
    if phase.loops == 0 {
        return Err("loops must be at least 1".into());
    }
    if phase.events.is_empty() {
        return Err("it has no events".into());
    }
    check_affinity(phase.affinity.as_deref(), cpus)?;
    for event in &phase.events {
        let named = match event {
            Event::Timer { name, period, .. } => {
                if *period == 0 {
                    return Err(format!("timer `{name}`: period must be positive"));
                }
                Some(name)
            }
            Event::Lock(n)
            | Event::Unlock(n)
            | Event::Signal(n)
            | Event::Broadcast(n)
            | Event::Barrier(n)
            | Event::Suspend(n)
            | Event::Resume(n)
            | Event::Send(n)
            | Event::Recv(n)
            | Event::Begin(n)
            | Event::End(n) => Some(n),
            Event::Read { file, bytes } => {
                if !files.contains(file.as_str()) {
                    return Err(format!(
                        "event read: file `{file}` is not declared (add a [[file]] table)"
                    ));
                }
                if *bytes == 0 {
                    return Err(format!("event read of `{file}`: bytes must be positive"));
                }
                Some(file)
            }
            Event::Wait { cond, mutex } | Event::SignalWait { cond, mutex } => {
                if mutex.is_empty() {
                    return Err(format!("event {}: the mutex name is empty", event.kind()));
                }
                Some(cond)
            }
            Event::Run(_) | Event::Runtime(_) | Event::Sleep(_) | Event::Io(_) | Event::Yield => {
                None
            }
        };
        if named.is_some_and(|n| n.is_empty()) {
            return Err(format!("event {}: the name is empty", event.kind()));
        }
    }
    Ok(())
}

fn check_affinity(affinity: Option<&[usize]>, cpus: Option<usize>) -> Result<(), String> {
    let Some(list) = affinity else { return Ok(()) };
    if list.is_empty() {
        return Err("the CPU list is empty".into());
    }
    if let (Some(n), Some(&max)) = (cpus, list.iter().max()) {
        if max >= n {
            return Err(format!(
                "CPU {max} does not exist (the platform has CPUs 0..={})",
                n - 1
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Bandwidth;

    fn task(name: &str) -> TaskSpec {
        TaskSpec {
            name: name.into(),
            process: name.into(),
            phases: vec![Phase {
                name: "main".into(),
                loops: 1,
                events: vec![Event::Run(MS)],
                affinity: None,
            }],
            ..TaskSpec::default()
        }
    }

    fn workload(tasks: Vec<TaskSpec>) -> Workload {
        Workload {
            name: "t".into(),
            tasks,
            ..Workload::default()
        }
    }

    #[test]
    fn accepts_a_plain_workload() {
        workload(vec![task("a"), task("b")]).validate().unwrap();
    }

    #[test]
    fn rejects_duplicates_ranges_and_dangling_groups() {
        let err = workload(vec![task("a"), task("a")]).validate().unwrap_err();
        assert_eq!(err.subject, Subject::Task(1));

        let mut t = task("a");
        t.policy = SchedPolicy::Normal { nice: 20 };
        assert!(workload(vec![t])
            .validate()
            .unwrap_err()
            .message
            .contains("nice 20"));

        let mut t = task("a");
        t.slice = Some(50 * US);
        assert!(workload(vec![t]).validate().is_err());

        let mut t = task("a");
        t.group = Some("bg".into());
        assert!(workload(vec![t])
            .validate()
            .unwrap_err()
            .message
            .contains("`bg`"));
    }

    #[test]
    fn groups_need_parents_first_and_sane_bandwidth() {
        let mut w = workload(vec![task("a")]);
        w.groups = vec![GroupSpec {
            path: "apps/fg".into(),
            shares: 1024,
            bandwidth: None,
        }];
        assert_eq!(w.validate().unwrap_err().subject, Subject::Group(0));
        w.groups = vec![GroupSpec {
            path: "bg".into(),
            shares: 52,
            bandwidth: Some(Bandwidth {
                quota: 0,
                period: 100 * MS,
            }),
        }];
        assert!(w.validate().unwrap_err().message.contains("quota"));
    }

    #[test]
    fn affinity_must_name_existing_cpus() {
        let mut w = workload(vec![task("a")]);
        w.platform = Some(crate::platform::PlatformSpec::uniform(2));
        w.tasks[0].phases[0].affinity = Some(vec![2]);
        assert!(w.validate().unwrap_err().message.contains("CPU 2"));
    }
}
