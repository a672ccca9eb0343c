//! The `scx` backend: the sched_ext scheduler (`uxsched-scx`) decides among the threads the
//! daemon moves to `SCHED_EXT`, by the boost class the daemon writes into its map.
//!
//! Which threads. In Linux 6.12 the ext class ranks *below* the fair class: in partial mode a
//! `SCHED_EXT` thread runs only when no fair thread on its CPU is runnable. Switching only the
//! app in front would demote it below everything else, so the backend switches the whole
//! competition the daemon knows, and the BPF policy decides within it:
//! - every thread of the app in front — its own fair workers would otherwise outrank its UI
//!   thread — with the class of its role (UI and render: interactive, seed 000 eq. 6; the
//!   critical set: critical, seed 003 §5.1; the rest: topmost, seed 001 §3.2);
//! - every thread of the background apps it demotes (class background, seed 003 §5.1), so the
//!   app's boost and their demotion are weighed by one policy.
//!
//! Partners on the interaction's path in other processes (the display server, a service) and
//! kernel workers keep the stock levers: they serve every app, and being fair they never wait
//! for the app's class. Threads outside the daemon's view stay fair and outrank the switched
//! ones; `partial = false` (full mode) schedules every fair thread by the BPF policy instead.
//!
//! A switch is a `Target { ext: true }`: the reconciler journals it like every change (the
//! original policy, nice and slice) and restores it on stop, `restore` or the next start after a
//! crash. The boost map dies with the scheduler, so it is not journalled. When the kernel stops
//! the scheduler (error, watchdog, SysRq-S) it moves every `SCHED_EXT` thread to the fair class;
//! the next pass notices, says why once, and from then on the stock levers apply.

use crate::config::backend::BackendConfig;

use super::Backend;
use crate::state::{Role, State};
use crate::types::{Desired, Target};
use std::collections::BTreeMap;
use std::io;
use std::time::Duration;
use tracing::{debug, info, warn};
use uxsched_client::control::BackendStatus;
use uxsched_os::identity::TaskId;
use uxsched_scx::{Class, Error, Options, Scheduler, STAT_NAMES};

pub struct Scx {
    sched: Option<Scheduler>,
    /// Policy and mode, for `status`.
    detail: String,
    /// Why the daemon fell back to the stock levers.
    fell_back: Option<String>,
    /// The counters' last reading (kept after a fallback).
    counters: Vec<(String, u64)>,
    /// What the boost map holds, by thread.
    written: BTreeMap<TaskId, Class>,
    warned: bool,
}

impl Scx {
    /// Load and attach the scheduler (needs root and a kernel with sched_ext).
    pub fn load(cfg: &BackendConfig) -> Result<Scx, Error> {
        let opts = Options {
            policy: cfg.policy.scx(),
            full: !cfg.partial,
            cut_rate: cfg.cut_rate,
            tick: Duration::from_millis(cfg.tick_ms),
            boost_c: Duration::from_millis(cfg.boost_c_ms),
            pin: None,
        };
        let sched = Scheduler::load(&opts)?;
        let mode = if cfg.partial { "partial" } else { "full" };
        let detail = format!("{}, {mode} mode", opts.policy);
        info!(%detail, "sched_ext scheduler loaded");
        Ok(Scx {
            sched: Some(sched),
            detail,
            fell_back: None,
            counters: Vec::new(),
            written: BTreeMap::new(),
            warned: false,
        })
    }

    /// Whether the scheduler still runs; the first time it does not, say why and let it go.
    fn alive(&mut self) -> bool {
        let Some(s) = &self.sched else {
            return false;
        };
        let why = s
            .exited()
            .map(|e| e.to_string())
            .or_else(|| match uxsched_scx::state() {
                // While the kernel disables it, the exit record (written before `disabled`)
                // may not be there yet: the next pass says why.
                Some(st) if st == "enabled" || st == "disabling" => None,
                other => Some(format!(
                    "sched_ext is {}",
                    other.as_deref().unwrap_or("gone")
                )),
            });
        let Some(why) = why else {
            return true;
        };
        self.read_counters();
        warn!("the sched_ext scheduler stopped: {why}; falling back to the stock levers");
        self.fell_back = Some(why);
        self.sched = None;
        self.written.clear();
        false
    }

    fn read_counters(&mut self) {
        if let Some(v) = self.sched.as_ref().and_then(counters_of) {
            self.counters = v;
        }
    }

    /// Bring the boost map to `classes`.
    fn write_map(&mut self, classes: &BTreeMap<TaskId, Class>) {
        let Some(s) = &self.sched else { return };
        let map = s.boosts();
        let mut errors = Vec::new();
        for task in self.written.keys().filter(|t| !classes.contains_key(t)) {
            if let Err(e) = map.clear(task.tid) {
                errors.push(e);
            }
        }
        self.written.retain(|t, _| classes.contains_key(t));
        self.write_classes(classes, errors);
    }

    /// Write `classes` into the boost map where it holds something else; entries of other
    /// threads stay. `errors` are earlier failures of the same write, reported with these.
    fn write_classes(&mut self, classes: &BTreeMap<TaskId, Class>, mut errors: Vec<io::Error>) {
        let Some(s) = &self.sched else { return };
        let map = s.boosts();
        for (task, class) in classes {
            if self.written.get(task) == Some(class) {
                continue;
            }
            // The map checks the start time; a tid recycled since the scan is not boosted.
            let same = uxsched_scx::thread::start_ticks(task.tid).is_ok_and(|s| s == task.start);
            match same.then(|| map.set(task.tid, *class)) {
                Some(Ok(())) => {
                    self.written.insert(*task, *class);
                }
                Some(Err(e)) => errors.push(e),
                None => debug!(tid = task.tid, "exited before its class was written"),
            }
        }
        for e in errors {
            if !self.warned {
                warn!("{e}; the thread is scheduled without its class (warned once)");
                self.warned = true;
            }
        }
    }
}

/// The boost class of a thread of the app in front.
fn class_of(role: Role) -> Class {
    match role {
        Role::Ui | Role::Render => Class::Interactive,
        Role::Critical => Class::Critical,
        Role::Other => Class::Topmost,
        Role::Background => Class::Background,
    }
}

/// The threads to switch and their classes (see the module's doc).
fn classes(state: &State) -> BTreeMap<TaskId, Class> {
    let mut out = BTreeMap::new();
    for app in &state.background {
        out.extend(app.threads.iter().map(|t| (t.task, Class::Background)));
    }
    if let Some(app) = &state.focus {
        out.extend(app.threads.iter().map(|t| (t.task, class_of(t.role))));
    }
    out
}

/// `desired` with every thread of `classes` switched to `SCHED_EXT` instead of the fair and
/// real-time levers (its I/O priority, not a CPU lever, stays).
fn switch(desired: &mut Desired, classes: &BTreeMap<TaskId, Class>) {
    for task in classes.keys() {
        let t = desired.threads.entry(*task).or_default();
        *t = Target {
            ext: true,
            ioprio: t.ioprio,
            ..Target::default()
        };
    }
}

impl Backend for Scx {
    fn shape(&mut self, state: &State, desired: &mut Desired) {
        if !self.alive() {
            return;
        }
        let classes = classes(state);
        switch(desired, &classes);
        self.write_map(&classes);
    }

    fn shape_critical(&mut self, app: i32, desired: &mut Desired) {
        if !self.alive() {
            return;
        }
        let classes: BTreeMap<TaskId, Class> = (desired.threads.keys())
            .filter(|t| t.pid == app && self.written.get(t) != Some(&Class::Interactive))
            .map(|t| (*t, Class::Critical))
            .collect();
        switch(desired, &classes);
        self.write_classes(&classes, Vec::new());
    }

    fn ext_inherited(&self) -> bool {
        self.sched.is_some()
    }

    fn status(&self) -> BackendStatus {
        let counters =
            (self.sched.as_ref().and_then(counters_of)).unwrap_or_else(|| self.counters.clone());
        debug_assert!(counters.is_empty() || counters.len() == STAT_NAMES.len());
        let mut classes: BTreeMap<&str, u64> = BTreeMap::new();
        for c in self.written.values() {
            *classes.entry(c.name()).or_default() += 1;
        }
        BackendStatus {
            kind: "scx".into(),
            detail: self.detail.clone(),
            state: match &self.fell_back {
                None => "running".into(),
                Some(why) => format!("fell back to the stock levers: {why}"),
            },
            classes: classes
                .into_iter()
                .map(|(k, n)| (k.to_owned(), n))
                .collect(),
            counters,
        }
    }
}

/// The scheduler's counters by name, when they can be read.
fn counters_of(s: &Scheduler) -> Option<Vec<(String, u64)>> {
    let v = s.stats().ok()?;
    Some(v.into_iter().map(|(k, n)| (k.to_owned(), n)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_state::{fg_state, tid};
    use crate::state::{App, ThreadInfo};
    use crate::types::AppId;

    #[test]
    fn the_app_and_the_background_switch_with_their_classes_and_only_ioprio_stays() {
        let mut state = fg_state();
        let bg = TaskId {
            tid: 200,
            pid: 200,
            start: 9,
        };
        state.background.push(App {
            id: AppId { pid: 200, start: 9 },
            threads: vec![ThreadInfo {
                task: bg,
                comm: "bg".into(),
                role: Role::Background,
                cpu: 0,
            }],
        });
        state.focus.as_mut().unwrap().threads[2].role = Role::Critical;
        let c = classes(&state);
        let by_tid: Vec<(i32, Class)> = c.iter().map(|(t, c)| (t.tid, *c)).collect();
        assert_eq!(
            by_tid,
            [
                (100, Class::Interactive),
                (101, Class::Interactive),
                (102, Class::Critical),
                (200, Class::Background)
            ]
        );
        let mut d = Desired::default();
        let ui = state.focus.as_ref().unwrap().threads[0].task;
        d.threads.insert(
            ui,
            Target {
                nice: Some(-10),
                slice_ns: Some(100_000),
                ioprio: Some(4),
                rt: Some(crate::types::Rt {
                    policy: crate::types::RtPolicy::Fifo,
                    priority: 1,
                }),
                ..Target::default()
            },
        );
        switch(&mut d, &c);
        assert_eq!(d.threads.len(), 4);
        let t = tid(&d, 100).unwrap();
        assert!(t.ext && t.ioprio == Some(4), "{t:?}");
        assert!(t.nice.is_none() && t.slice_ns.is_none() && t.rt.is_none());
        assert!(tid(&d, 200).unwrap().ext);
    }

    #[test]
    fn roles_map_to_the_papers_classes() {
        assert_eq!(class_of(Role::Other), Class::Topmost);
        assert_eq!(class_of(Role::Background), Class::Background);
    }
}
