//! From per-task raw tallies to the [`Report`]: naming, and pooling tasks into processes,
//! cgroups (with their descendants), task families and labels.

use uxsched_model::Nanos;

use super::dist::Summary;
use super::report::{Anomalies, GroupReport, InteractionReport, Report, Tally, TaskReport};
use crate::log::RunMeta;

/// What one interaction kind saw.
#[derive(Debug, Clone, Default)]
pub(crate) struct KindOutcome {
    pub begun: u64,
    pub unfinished: u64,
    pub response: Vec<i64>,
}

/// Everything the collector measured, before summarising.
pub(crate) struct RunOutcome<'a> {
    pub meta: &'a RunMeta,
    pub end: Nanos,
    /// By task id (may be shorter or longer than `meta.tasks`).
    pub tallies: &'a [Tally],
    pub kinds: &'a [KindOutcome],
    pub anomalies: &'a Anomalies,
}

impl RunOutcome<'_> {
    fn task_count(&self) -> usize {
        self.tallies.len().max(self.meta.tasks.len())
    }

    fn tally(&self, i: usize) -> Tally {
        self.tallies.get(i).cloned().unwrap_or_default()
    }

    fn name(&self, i: usize) -> String {
        self.meta
            .tasks
            .get(i)
            .map_or_else(|| format!("task{i}"), |m| m.name.clone())
    }

    fn process(&self, i: usize) -> String {
        self.meta
            .tasks
            .get(i)
            .map(|m| m.process.clone())
            .unwrap_or_default()
    }

    fn group_index(&self, i: usize) -> usize {
        self.meta.tasks.get(i).map_or(0, |m| m.group as usize)
    }

    fn group_name(&self, g: usize) -> String {
        self.meta
            .groups
            .get(g)
            .cloned()
            .unwrap_or_else(|| format!("group{g}"))
    }

    fn aggregate(&self, name: String, members: &[usize], keep_samples: bool) -> GroupReport {
        let mut sum = Tally::default();
        for &i in members {
            sum.merge(&self.tally(i));
        }
        GroupReport {
            name,
            tasks: members.len(),
            metrics: sum.summarise(self.end, keep_samples),
        }
    }

    pub fn report(&self, keep_samples: bool) -> Report {
        let meta = self.meta;
        Report {
            workload: meta.workload.clone(),
            sched: meta.sched.clone(),
            seed: meta.seed,
            cpus: meta.cpus,
            duration_ns: self.end,
            tasks: self.task_reports(keep_samples),
            processes: self.process_reports(keep_samples),
            families: self.family_reports(keep_samples),
            labels: self.label_reports(keep_samples),
            groups: self.group_reports(keep_samples),
            interactions: self.interaction_reports(keep_samples),
            anomalies: self.anomalies.clone(),
        }
    }

    fn task_reports(&self, keep_samples: bool) -> Vec<TaskReport> {
        (0..self.task_count())
            .map(|i| {
                let m = self.meta.tasks.get(i);
                TaskReport {
                    id: i as u32,
                    name: self.name(i),
                    process: self.process(i),
                    group: self.group_name(self.group_index(i)),
                    policy: m.map(|m| m.policy.clone()).unwrap_or_default(),
                    labels: m.map(|m| m.labels.clone()).unwrap_or_default(),
                    metrics: self.tally(i).summarise(self.end, keep_samples),
                }
            })
            .collect()
    }

    fn process_reports(&self, keep_samples: bool) -> Vec<GroupReport> {
        partition(self.task_count(), |i| self.process(i))
            .into_iter()
            .map(|(p, members)| self.aggregate(p, &members, keep_samples))
            .collect()
    }

    /// Families of two tasks or more (a family of one is just the task).
    fn family_reports(&self, keep_samples: bool) -> Vec<GroupReport> {
        partition(self.task_count(), |i| family(&self.name(i)))
            .into_iter()
            .filter(|(_, members)| members.len() > 1)
            .map(|(f, members)| self.aggregate(f, &members, keep_samples))
            .collect()
    }

    /// One per label, in order of first appearance in the task list.
    fn label_reports(&self, keep_samples: bool) -> Vec<GroupReport> {
        let (n, meta) = (self.task_count(), self.meta);
        let mut label_order: Vec<&str> = Vec::new();
        for t in &meta.tasks {
            for l in &t.labels {
                if !label_order.contains(&l.as_str()) {
                    label_order.push(l);
                }
            }
        }
        label_order
            .into_iter()
            .map(|label| {
                let members: Vec<usize> = (0..n)
                    .filter(|&i| {
                        meta.tasks
                            .get(i)
                            .is_some_and(|t| t.labels.iter().any(|l| l == label))
                    })
                    .collect();
                self.aggregate(label.to_string(), &members, keep_samples)
            })
            .collect()
    }

    /// One per cgroup, each pooling its descendants' tasks too.
    fn group_reports(&self, keep_samples: bool) -> Vec<GroupReport> {
        let n = self.task_count();
        let group_count = self
            .meta
            .groups
            .len()
            .max((0..n).map(|i| self.group_index(i) + 1).max().unwrap_or(0));
        (0..group_count)
            .map(|g| {
                let path = self.group_name(g);
                let members: Vec<usize> = (0..n)
                    .filter(|&i| is_within(&self.group_name(self.group_index(i)), &path))
                    .collect();
                self.aggregate(path, &members, keep_samples)
            })
            .collect()
    }

    fn interaction_reports(&self, keep_samples: bool) -> Vec<InteractionReport> {
        self.kinds
            .iter()
            .enumerate()
            .map(|(k, kind)| InteractionReport {
                name: self
                    .meta
                    .interactions
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| format!("interaction{k}")),
                begun: kind.begun,
                unfinished: kind.unfinished,
                response_time: Summary::of(&kind.response, keep_samples),
            })
            .collect()
    }
}

/// Task ids `0..n` grouped by `key`, groups in order of first appearance, members in id order.
fn partition(n: usize, key: impl Fn(usize) -> String) -> Vec<(String, Vec<usize>)> {
    let mut out: Vec<(String, Vec<usize>)> = Vec::new();
    for i in 0..n {
        let k = key(i);
        match out.iter_mut().find(|(name, _)| *name == k) {
            Some((_, members)) => members.push(i),
            None => out.push((k, vec![i])),
        }
    }
    out
}

/// The family of a task name: the name with its trailing number replaced by `#`
/// (`hog-12` → `hog-#`), or the name itself when it has none (identical names pool too).
fn family(name: &str) -> String {
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
    if stem.len() < name.len() {
        format!("{stem}#")
    } else {
        name.to_string()
    }
}

/// Whether cgroup `path` is `ancestor` or below it (`""` and `"/"` are the root).
fn is_within(path: &str, ancestor: &str) -> bool {
    let a = ancestor.trim_end_matches('/');
    a.is_empty()
        || path == a
        || path
            .strip_prefix(a)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_ancestry_is_by_path_component() {
        assert!(is_within("/bg/low", "/bg"));
        assert!(is_within("/bg", "/bg/"));
        assert!(is_within("/bg", ""));
        assert!(!is_within("/bgx", "/bg"));
        assert!(!is_within("/bg", "/bg/low"));
    }

    #[test]
    fn families_replace_trailing_numbers() {
        assert_eq!(family("hog-12"), "hog-#");
        assert_eq!(family("RenderThread"), "RenderThread");
        assert_eq!(family("7"), "#");
    }
}
