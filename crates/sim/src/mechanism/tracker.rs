//! `shuffledog-tracker`: ShuffleDog's Thread Tracker (seed 003 §4) feeding its CPU manager (§5.1)
//! at run time, instead of labels given by the workload ([`super::shuffledog_cpu`]).
//!
//! Rule (§4): "if we observe an interaction circle {T_ui, T1, …, Tn, T_ui}, where T_ui is the UI
//! thread, then … threads {T1, …, Tn} are all delay-critical. The aforementioned GL thread is also
//! a delay-critical thread." Here:
//! - A UI thread is a task labelled `ui`; a GL/render thread is one labelled `gl` or `render`, or
//!   whose name (after the last `.`) starts with `gl` or `render` (case-insensitive: `GLThread`,
//!   `RenderThread`, `game.gl`). GL/render threads are delay-critical from the start.
//! - An interaction episode of UI thread U starts when U is woken by a task labelled `input` (the
//!   InputDispatcher, §6) or when an interaction begins on U (`Record::InteractionBegin`, the
//!   workload's stand-in for the input event). It ends when the interaction ends on U
//!   (`InteractionEnd`) or when U's next episode starts. While it is open, every wake-up
//!   `waker → wakee` (`Record::Wakeup`, our stand-in for the binder/message/lock hand-offs the
//!   paper instruments) is an edge of the episode's interaction graph.
//! - After each new edge, every thread that is both reachable from U and reaches U in that graph
//!   lies on a cycle through U and becomes delay-critical. A thread U merely wakes (a logger) is
//!   reachable but never leads back, so it is not marked (the paper's T6).
//! - Learning (§4, ⟨context, decision⟩ pairs): the context is the UI thread, the decision the set
//!   of threads found for it; decisions are kept for the whole run and re-applied at the start of
//!   each of U's episodes, so only the first interaction pays for the discovery;
//!   [`Tracker::with_learned`] starts from a previous run's decisions (the paper's database).
//!
//! Acting (§5.1 "Our Approach"): a delay-critical thread other than a UI thread gets nice 3
//! (`shuffledog-tracker.nice`) and, if it is in Android's background cgroup, is moved to the root group,
//! both at once through [`Control`]. The I/O manager (§5.2, `shuffledog-tracker.io`, on by
//! default) puts every delay-critical thread's requests, the UI thread's included, in the
//! real-time I/O class ([`super::shuffledog_io`]).

use super::shuffledog_cpu::{BG_GROUP, DELAY_CRITICAL_NICE};
use super::shuffledog_io::DELAY_CRITICAL_IOPRIO;
use crate::engine::{Control, Mechanism};
use crate::log::{Record, TaskMeta};
use crate::policy::Params;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use uxsched_model::weights::nice_to_weight;

/// UI thread → the delay-critical threads learned for it (GL/render threads under `u32::MAX`).
pub type Findings = BTreeMap<u32, BTreeSet<u32>>;

/// Key in [`Findings`] for threads that are delay-critical by being GL/render threads.
pub const GL_CONTEXT: u32 = u32::MAX;

pub struct Tracker {
    nice: i32,
    /// Also act as the I/O manager.
    pub io: bool,
    ui: BTreeSet<u32>,
    input: BTreeSet<u32>,
    bg_group: Option<usize>,
    /// Open episodes: UI thread → its interaction graph's edges (waker, wakee).
    episodes: BTreeMap<u32, BTreeSet<(u32, u32)>>,
    /// Threads already given the delay-critical setting.
    applied: BTreeSet<u32>,
    /// The learned decisions, shared so a caller can read them after the run.
    findings: Arc<Mutex<Findings>>,
}

impl Tracker {
    pub fn new(nice: i32) -> Self {
        Tracker {
            nice,
            io: true,
            ui: BTreeSet::new(),
            input: BTreeSet::new(),
            bg_group: None,
            episodes: BTreeMap::new(),
            applied: BTreeSet::new(),
            findings: Arc::default(),
        }
    }

    /// Takes `shuffledog-tracker.nice` (default 3, §5.1).
    pub fn from_params(p: &mut Params) -> Result<Self, String> {
        let nice = p
            .take_num::<i32>("shuffledog-tracker.nice")?
            .unwrap_or(DELAY_CRITICAL_NICE);
        if !(-20..=19).contains(&nice) {
            return Err(format!(
                "--param shuffledog-tracker.nice={nice} is out of range (use -20..=19, e.g. shuffledog-tracker.nice=3)"
            ));
        }
        let mut t = Self::new(nice);
        t.io = match p.take_str("shuffledog-tracker.io").as_deref() {
            None | Some("true") => true,
            Some("false") => false,
            Some(other) => {
                return Err(format!(
                    "--param shuffledog-tracker.io={other}: use true or false"
                ))
            }
        };
        Ok(t)
    }

    /// A tracker that starts with the decisions of a previous launch of the same workload (§4:
    /// "when the same app is launched again, the Thread Tracker loads … the previously-learned
    /// delay-critical threads from the database"). Task ids are stable across runs of one
    /// workload, so they stand in for the paper's call-stack contexts.
    pub fn with_learned(nice: i32, learned: Findings) -> Self {
        let t = Self::new(nice);
        *t.findings.lock().expect("tracker findings lock") = learned;
        t
    }

    /// A handle on what the tracker learns; read it after the run.
    pub fn findings(&self) -> Arc<Mutex<Findings>> {
        Arc::clone(&self.findings)
    }

    /// Every thread found delay-critical so far (any context).
    pub fn delay_critical(&self) -> BTreeSet<u32> {
        let f = self.findings.lock().expect("tracker findings lock");
        f.values().flatten().copied().collect()
    }

    fn is_gl(t: &TaskMeta) -> bool {
        let base = t.name.rsplit('.').next().unwrap_or(&t.name).to_lowercase();
        t.labels.iter().any(|l| l == "gl" || l == "render")
            || base.starts_with("gl")
            || base.starts_with("render")
    }

    /// Threads on a cycle through `ui` in `edges`: reachable from it and reaching it.
    fn on_cycle(ui: u32, edges: &BTreeSet<(u32, u32)>) -> BTreeSet<u32> {
        let closure = |forward: bool| {
            let mut seen = BTreeSet::from([ui]);
            let mut todo = vec![ui];
            while let Some(x) = todo.pop() {
                for &(a, b) in edges {
                    let (from, to) = if forward { (a, b) } else { (b, a) };
                    if from == x && seen.insert(to) {
                        todo.push(to);
                    }
                }
            }
            seen
        };
        let (fwd, back) = (closure(true), closure(false));
        fwd.intersection(&back)
            .copied()
            .filter(|&t| t != ui)
            .collect()
    }

    /// Record the decision `tid` is delay-critical in `context`, and apply it once.
    fn mark(&mut self, context: u32, tid: u32, ctl: &mut Control) {
        self.findings
            .lock()
            .expect("tracker findings lock")
            .entry(context)
            .or_default()
            .insert(tid);
        self.apply(tid, ctl);
    }

    /// ShuffleDog's settings for a delay-critical thread: real-time I/O, and for threads other
    /// than the UI thread (which keeps its nice 0) nice 3 outside the background group.
    fn apply(&mut self, tid: u32, ctl: &mut Control) {
        if self.io {
            ctl.set_task_ioprio(tid, DELAY_CRITICAL_IOPRIO);
        }
        if self.ui.contains(&tid) || !ctl.is_fair(tid) || !self.applied.insert(tid) {
            return;
        }
        ctl.set_task_weight(tid, nice_to_weight(self.nice));
        if Some(ctl.task_group(tid)) == self.bg_group {
            ctl.set_task_group(tid, 0);
        }
    }

    fn begin_episode(&mut self, ui: u32, ctl: &mut Control) {
        self.episodes.insert(ui, BTreeSet::new());
        let learned: Vec<u32> = self
            .findings
            .lock()
            .expect("tracker findings lock")
            .get(&ui)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        for t in learned {
            self.apply(t, ctl);
        }
    }

    fn edge(&mut self, waker: u32, wakee: u32, ctl: &mut Control) {
        if waker == wakee {
            return;
        }
        let mut found = Vec::new();
        for (&ui, edges) in &mut self.episodes {
            if edges.insert((waker, wakee)) {
                found.extend(Self::on_cycle(ui, edges).into_iter().map(|t| (ui, t)));
            }
        }
        for (ui, t) in found {
            self.mark(ui, t, ctl);
        }
    }
}

impl Mechanism for Tracker {
    fn name(&self) -> &'static str {
        "shuffledog-tracker"
    }

    fn start(&mut self, ctl: &mut Control) {
        let meta = ctl.meta();
        let has = |t: &TaskMeta, l: &str| t.labels.iter().any(|x| x == l);
        let ids = |f: &dyn Fn(&TaskMeta) -> bool| -> BTreeSet<u32> {
            (0..meta.tasks.len() as u32)
                .filter(|&i| f(&meta.tasks[i as usize]))
                .collect()
        };
        self.ui = ids(&|t| has(t, "ui"));
        self.input = ids(&|t| has(t, "input"));
        let gl = ids(&|t| Self::is_gl(t));
        self.bg_group = meta.groups.iter().position(|g| g == BG_GROUP);
        if self.io {
            for &u in &self.ui {
                ctl.set_task_ioprio(u, DELAY_CRITICAL_IOPRIO);
            }
        }
        for t in gl {
            self.mark(GL_CONTEXT, t, ctl);
        }
    }

    fn observe(&mut self, rec: &Record, ctl: &mut Control) {
        match *rec {
            Record::InteractionBegin { task, .. } if self.ui.contains(&task) => {
                self.begin_episode(task, ctl)
            }
            Record::InteractionEnd { task, .. } => {
                self.episodes.remove(&task);
            }
            Record::Wakeup {
                task,
                waker: Some(w),
                ..
            } => {
                if self.ui.contains(&task) && self.input.contains(&w) {
                    self.begin_episode(task, ctl);
                }
                self.edge(w, task, ctl);
            }
            _ => {}
        }
    }
}
