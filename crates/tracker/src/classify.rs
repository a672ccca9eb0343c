//! The classifier: turns the kernel's events into episodes, the delay-critical set and learned
//! decisions. Pure (no BPF, no /proc): it is unit-tested on recorded event sequences, and
//! [`crate::Tracker`] feeds it from the ring buffer.
//!
//! Decisions, in order of arrival:
//! - An episode starts at [`Event::Start`]; its UI thread (seed 000's user-interactive task)
//!   and the input thread are confirmed at once.
//! - A thread woken on the episode's path is *provisional* at once (boost now, seed 003's "too
//!   late" problem), unless a learned pair already says critical (then confirmed).
//! - After each edge, threads on a circle (episode.rs) are confirmed; they stay in the set
//!   while the app is in front. When the episode resolves (display reached, timeout, new input),
//!   provisional threads that were not confirmed are dropped, and every thread of the episode
//!   gets a ⟨context, decision⟩ pair.
//! - Render/GL threads are confirmed by name when created or renamed; threads whose context
//!   the store knows as critical are confirmed on creation (the relaunch case).
//! - Pipelines (episode.rs, docs/tracker.md): the app's process family counts as the app; a
//!   family thread that wakes a display unreached is a frame producer; a display wake-up ends
//!   the episode only when no work handed to another family process is still under way.
//! - Hand-offs: a thread that a confirmed member of its own process hands work to and that
//!   wakes a member back is confirmed, episode or not (the kernel's `handoffs` map).
//! - FUSE daemons (fuse.rs, seed 003 §5.2): a thread of a process that serves a FUSE mount is
//!   critical for the episode it served, not for as long as the app is in front.

use crate::config::TrackerConfig;
use crate::critical::{EndReason, EpisodeInfo, Kind, Member, Snapshot, Source, Status, ThreadId};
use crate::episode::Episode;
use crate::family::{Family, RoleFn};
use crate::fuse::{FuseServers, ServesFuseFn};
use crate::store::{Context, Store};
use crate::wire::{Event, Task};
use std::collections::BTreeMap;

/// The foreground app: its process and identity ([`crate::store::app_key`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct App {
    pub tgid: u32,
    pub key: String,
}

/// App threads remembered for their creator (bounded; exits remove them).
const MAX_THREADS: usize = 8192;

pub struct Classifier {
    cfg: TrackerConfig,
    pub store: Store,
    app: Option<App>,
    /// App thread → `role:name` of its creator, when its creation was seen.
    creators: BTreeMap<u32, String>,
    critical: BTreeMap<u32, Member>,
    episode: Option<Episode>,
    last: Option<EpisodeInfo>,
    episodes: u64,
    /// Store errors are logged once, not per decision.
    store_failed: bool,
    /// When the foreground was last set (CLOCK_MONOTONIC ns): the `since_ns` of the threads
    /// classified then, from their names or the store, not from an input.
    focused_ns: u64,
    /// The app's other processes and their roles.
    family: Family,
    /// Which processes on the path serve a FUSE mount.
    fuse: FuseServers,
    /// This process (the daemon, or `uxsched tracker`): it acts on the app and is woken by what
    /// it acts on (a cgroup move, a budget check), but is never on the app's path.
    own_tgid: u32,
}

impl Classifier {
    pub fn new(cfg: TrackerConfig, store: Store) -> Self {
        Classifier {
            cfg,
            store,
            app: None,
            creators: BTreeMap::new(),
            critical: BTreeMap::new(),
            episode: None,
            last: None,
            episodes: 0,
            store_failed: false,
            focused_ns: 0,
            family: Family::new(|_| None),
            fuse: FuseServers::new(|_| false),
            own_tgid: std::process::id(),
        }
    }

    /// Read family processes' roles with `read` (the tracker: [`crate::procfs::role`]); without
    /// it their threads' context is `partner`, as any other process's.
    pub fn with_roles(mut self, read: RoleFn) -> Self {
        self.family = Family::new(read);
        self
    }

    /// Tell FUSE daemons with `read` (the tracker: [`crate::procfs::serves_fuse`]); without it
    /// no process is one, and their serving threads stay while the app is in front.
    pub fn with_fuse_servers(mut self, read: ServesFuseFn) -> Self {
        self.fuse = FuseServers::new(read);
        self
    }

    /// The foreground app's other processes (`procs`), after [`Classifier::set_foreground`].
    /// Their threads are classified from the store when the path first wakes them, as other
    /// processes' are, not when created: a learned context is a thread name and a process role,
    /// and a browser has two renderers and a dozen `ThreadPoolForeg` threads per process, so
    /// classifying at creation raised 30 threads on a relaunch where episodes find 9 (the
    /// app's own threads still are, as before: seed 003 §6's relaunch case). Those present at
    /// focus whose context is their own are recognised then ([`Classifier::recognise_at_focus`]).
    pub fn set_family(&mut self, procs: &[u32]) {
        self.family.reset(procs);
    }

    /// Threads of the app or its family that exist at focus (issue 30's first keystrokes): a
    /// render thread by its name, and a thread whose learned context is critical and that no
    /// other of these threads shares — the GPU process's viz and IO threads, a lone renderer's
    /// compositor, the app's own uniquely named threads — are confirmed at once, so the first
    /// keystrokes find them raised (found on the path instead, a fresh browser's first two or
    /// three keystrokes ran before their boosts landed). A context several threads share waits
    /// for the path: a pool's `ThreadPoolForeg` (the app's were created before the focus, their
    /// creators unknown, so one learned pair matched the whole pool, which was then raised at
    /// each focus) or the main thread of two renderers. A thread created later is classified at
    /// creation, as seed 003 §6 does.
    pub fn recognise_at_focus(&mut self, threads: &[Task], now: u64) {
        let mut by_context: BTreeMap<Context, Vec<&Task>> = BTreeMap::new();
        for t in threads {
            let kind = self.kind_of(t);
            if kind == Kind::App && self.cfg.is_render(&t.comm) {
                self.mark(t, Status::Confirmed, Source::Name, now);
            } else if kind == Kind::App || (!t.kthread && self.family.is_other(t.tgid)) {
                if let Some(c) = self.context(t) {
                    by_context.entry(c).or_default().push(t);
                }
            }
        }
        for (c, shared) in by_context {
            if let [t] = shared[..] {
                if self.store.lookup(&c).is_some_and(|d| d.critical) {
                    self.mark(t, Status::Confirmed, Source::Learned, now);
                }
            }
        }
    }

    /// Whether `tgid` is a process of the foreground app's family besides the app's own.
    pub fn in_family(&self, tgid: u32) -> bool {
        self.family.is_other(tgid)
    }

    /// `tgid` is no longer of the family (renamed as an input or display, exec'd as another
    /// user).
    pub fn leave_family(&mut self, tgid: u32) {
        self.family.remove(tgid);
    }

    /// The last episode resolved here, which the kernel may stop recording.
    pub fn closed_epoch(&self) -> Option<u64> {
        self.last.as_ref().map(|e| e.epoch)
    }

    /// When the foreground was last set (see [`Member::since_ns`]).
    pub fn focused_ns(&self) -> u64 {
        self.focused_ns
    }

    pub fn app(&self) -> Option<&App> {
        self.app.as_ref()
    }

    /// A new foreground app (or none) with its current threads: forget the old app's set,
    /// load the new one's learned pairs, recognise its threads from them and their names
    /// ([`Classifier::recognise_at_focus`]).
    pub fn set_foreground(&mut self, app: Option<App>, threads: &[Task], now: u64) {
        self.resolve(now, EndReason::Unfocused);
        self.critical.clear();
        self.creators.clear();
        self.last = None;
        self.episodes = 0;
        self.focused_ns = now;
        self.family.reset(&[]);
        self.fuse.clear();
        self.app = app;
        if let Some(a) = &self.app {
            if let Err(e) = self.store.load_app(&a.key) {
                tracing::warn!("tracker: cannot load learned decisions of {}: {e}", a.key);
            }
        }
        self.recognise_at_focus(threads, now);
    }

    fn kind_of(&self, t: &Task) -> Kind {
        if t.kthread {
            Kind::KernelWorker
        } else if self.app.as_ref().is_some_and(|a| a.tgid == t.tgid) {
            Kind::App
        } else {
            Kind::Partner
        }
    }

    fn context(&mut self, t: &Task) -> Option<Context> {
        let app = self.app.as_ref()?.key.clone();
        let creator = match self.kind_of(t) {
            // A family process by its role, so the next launch's renderer is recognised.
            Kind::Partner if self.family.is_other(t.tgid) => match self.family.role(t.tgid) {
                Some(role) => format!("family:{role}"),
                None => "partner".into(),
            },
            Kind::App => self
                .creators
                .get(&t.tid)
                .cloned()
                .unwrap_or_else(|| "?".into()),
            Kind::Partner => "partner".into(),
            Kind::KernelWorker => "kernel".into(),
        };
        Some(Context {
            app,
            thread: t.comm.clone(),
            creator,
        })
    }

    fn learned_critical(&mut self, t: &Task) -> bool {
        let Some(c) = self.context(t) else {
            return false;
        };
        self.store.lookup(&c).is_some_and(|d| d.critical)
    }

    fn mark(&mut self, t: &Task, status: Status, source: Source, now: u64) {
        let kind = self.kind_of(t);
        let m = self.critical.entry(t.tid).or_insert_with(|| Member {
            id: ThreadId::from(t),
            comm: t.comm.clone(),
            kind,
            status,
            source,
            since_ns: now,
            episode_cpu_ns: None,
        });
        m.comm.clone_from(&t.comm);
        if m.status == Status::Provisional && status == Status::Confirmed {
            m.status = Status::Confirmed;
            m.source = source;
            m.since_ns = now;
        }
    }

    /// An app thread appeared or was renamed: render name or learned context → confirmed.
    fn classify_new(&mut self, t: &Task, now: u64) {
        if self.kind_of(t) != Kind::App {
            return;
        }
        if self.cfg.is_render(&t.comm) {
            self.mark(t, Status::Confirmed, Source::Name, now);
        } else if self.learned_critical(t) {
            self.mark(t, Status::Confirmed, Source::Learned, now);
        }
    }

    pub fn handle(&mut self, ev: Event) {
        match ev {
            Event::Start {
                ts,
                epoch,
                input,
                ui,
            } => self.start(ts, epoch, input, ui),
            Event::Edge {
                ts,
                epoch,
                waker,
                wakee,
            } => self.edge(ts, epoch, &waker, &wakee),
            Event::Display {
                ts,
                epoch,
                waker,
                display,
                family,
            } => self.display(ts, epoch, &waker, &display, family),
            Event::Fork { ts, parent, child } => self.fork(ts, &parent, &child),
            Event::Rename { ts, task } => {
                if task.tid == task.tgid && self.cfg.role_bits(&task.comm) != 0 {
                    self.family.remove(task.tgid); // an input or display is never the app
                }
                if let Some(e) = &mut self.episode {
                    e.rename(&task);
                }
                if let Some(m) = self.critical.get_mut(&task.tid) {
                    m.comm.clone_from(&task.comm);
                }
                self.classify_new(&task, ts)
            }
            Event::Exit { ts, task } => {
                if self.app.as_ref().is_some_and(|a| a.tgid == task.tid) {
                    // The app is gone: nothing of its path (partners, kernel workers) stays.
                    self.set_foreground(None, &[], ts);
                    return;
                }
                self.creators.remove(&task.tid);
                if task.tid == task.tgid {
                    self.family.remove(task.tgid);
                }
                if self
                    .critical
                    .get(&task.tid)
                    .is_some_and(|m| m.id == ThreadId::from(&task))
                {
                    self.critical.remove(&task.tid);
                }
            }
            Event::Exec { task, .. } => self.family.forget_role(task.tgid),
            Event::Loop {
                ts, worker, member, ..
            } => self.hand_off(ts, &worker, &member),
        }
    }

    /// The hand-off rule (docs/tracker.md, "Hand-offs"): `worker`, handed work by a member
    /// while an input's work could still run, woke `member`, a thread of its own process.
    /// Seed 003's circle holds for it — reached from the path and leading back to it — though
    /// no episode was open to see it (a compositor thread rasterising its next frame through a
    /// pool thread, or the GPU process's IO thread passing a renderer's frame to viz, after the
    /// input's episode resolved). The kernel reports only wake-ups between threads of one
    /// process: a thread that answers into another process is never a hand-off. A confirmed member's worker is confirmed; a
    /// provisional member's joins the open episode that reached the member, as the two edges
    /// the hand-off was — provisional with it, kept if the circle closes, dropped with it if not.
    fn hand_off(&mut self, ts: u64, worker: &Task, member: &Task) {
        let mate = !worker.kthread
            && worker.tgid == member.tgid
            && worker.tgid != self.own_tgid
            && self.is_family_task(worker);
        let status = (self.critical.get(&member.tid))
            .filter(|m| m.id == ThreadId::from(member))
            .map(|m| m.status);
        let open = (self.episode.as_ref())
            .filter(|e| e.nodes.contains_key(&member.tid))
            .map(|e| e.epoch);
        let (w, m) = (&worker.comm, &member.comm);
        match (mate, status, open) {
            (true, Some(Status::Confirmed), _) => {
                tracing::debug!(
                    "tracker: hand-off {w}/{} -> {m}/{}: critical",
                    worker.tid,
                    member.tid
                );
                self.mark(worker, Status::Confirmed, Source::Observed, ts);
                // Learned like an episode's find, so the next focus recognises it
                // (`recognise_at_focus`) rather than waiting for its next hand-off.
                if let Some(c) = self.context(worker) {
                    let kind = self.kind_of(worker);
                    let written = self.store.record_all([(c, true, kind)], ts);
                    self.store_written(written);
                }
            }
            (true, Some(Status::Provisional), Some(epoch)) => {
                self.edge(ts, epoch, member, worker);
                self.edge(ts, epoch, worker, member);
            }
            _ => tracing::debug!(
                "tracker: hand-off {w}/{} -> {m}/{} left out (member {status:?})",
                worker.tid,
                member.tid
            ),
        }
    }

    /// A display wake-up: by a thread the episode reached, or by a frame producer (`family`).
    /// It ends the episode once no work handed to another family process is under way.
    fn display(&mut self, ts: u64, epoch: u64, waker: &Task, display: &Task, family: bool) {
        let producer = family && !waker.kthread && self.is_family_task(waker);
        if family && !producer {
            return; // unreached and not (or no longer) of the family: not this episode's work
        }
        let Some(e) = self.episode.as_mut().filter(|e| e.epoch == epoch) else {
            return;
        };
        if producer {
            e.add_producer(waker, display);
        } else {
            e.add_display(waker, display);
        }
        self.confirm_cycles(ts);
        self.end_if_drawn(ts);
    }

    fn is_family_task(&self, t: &Task) -> bool {
        self.kind_of(t) == Kind::App || self.family.is_other(t.tgid)
    }

    /// Resolve the episode if it reached a display and nothing the input handed to another
    /// process of the family is still under way (episode.rs, [`Episode::pending`]).
    fn end_if_drawn(&mut self, ts: u64) {
        let Some(e) = &self.episode else { return };
        let ui = e.ui.tgid;
        let handed_off = |t: &Task| t.tgid != ui && self.family.is_other(t.tgid);
        if !e.displays.is_empty() && e.pending(handed_off).is_empty() {
            self.resolve(ts, EndReason::Display);
        }
    }

    fn start(&mut self, ts: u64, epoch: u64, input: Option<Task>, ui: Task) {
        if self.app.as_ref().is_none_or(|a| a.tgid != ui.tgid) {
            return;
        }
        self.resolve(ts, EndReason::Superseded);
        self.family.at(ts);
        self.mark(&ui, Status::Confirmed, Source::Observed, ts);
        if let Some(i) = &input {
            self.mark(i, Status::Confirmed, Source::Observed, ts);
        }
        self.episode = Some(Episode::new(epoch, ui, input, ts));
    }

    fn edge(&mut self, ts: u64, epoch: u64, waker: &Task, wakee: &Task) {
        let Some(e) = self.episode.as_mut().filter(|e| e.epoch == epoch) else {
            return;
        };
        self.family.at(ts);
        if wakee.tgid == self.own_tgid || !e.add_edge(waker, wakee) {
            return;
        }
        let status = if self.learned_critical(wakee) {
            (Status::Confirmed, Source::Learned)
        } else {
            (Status::Provisional, Source::Observed)
        };
        self.mark(wakee, status.0, status.1, ts);
        self.confirm_cycles(ts);
        self.end_if_drawn(ts);
    }

    fn confirm_cycles(&mut self, ts: u64) {
        let Some(e) = &self.episode else { return };
        let found: Vec<Task> = e.critical().iter().map(|t| e.nodes[t].clone()).collect();
        for t in found {
            self.mark(&t, Status::Confirmed, Source::Observed, ts);
        }
    }

    fn fork(&mut self, ts: u64, parent: &Task, child: &Task) {
        let Some(app_tgid) = self.app.as_ref().map(|a| a.tgid) else {
            return;
        };
        if child.tid == child.tgid && self.is_family_task(parent) {
            self.family.add(child.tgid); // a new process of the family (the kernel's too)
        }
        if child.tgid != app_tgid {
            return;
        }
        let role = if parent.tid == parent.tgid {
            "main"
        } else if self
            .critical
            .get(&parent.tid)
            .is_some_and(|m| m.status == Status::Confirmed)
        {
            "critical"
        } else {
            "thread"
        };
        if self.creators.len() >= MAX_THREADS {
            self.creators.pop_first();
        }
        self.creators
            .insert(child.tid, format!("{role}:{}", parent.comm));
        self.classify_new(child, ts);
    }

    /// Close the open episode: drop what stayed provisional, learn a pair for every thread seen.
    fn resolve(&mut self, ts: u64, why: EndReason) {
        let Some(e) = self.episode.take() else { return };
        self.family.at(ts);
        let critical = e.critical();
        for (tid, t) in &e.nodes {
            let provisional =
                (self.critical.get(tid)).is_some_and(|m| m.status == Status::Provisional);
            if provisional || self.fuse_server(t, ts) {
                self.critical.remove(tid);
            }
        }
        let ends: Vec<u32> = e
            .displays
            .iter()
            .copied()
            .chain(e.input.as_ref().map(|i| i.tid))
            .collect();
        let decisions: Vec<_> = (e.nodes.iter())
            .filter(|(tid, _)| !ends.contains(tid))
            .filter_map(|(tid, t)| {
                Some((self.context(t)?, critical.contains(tid), self.kind_of(t)))
            })
            .collect();
        if tracing::enabled!(tracing::Level::DEBUG) {
            let names: Vec<String> = (critical.iter())
                .map(|t| format!("{}/{}/{}", e.nodes[t].comm, e.nodes[t].tgid, t))
                .collect();
            let ms = ts.saturating_sub(e.start_ns) as f64 / 1e6;
            tracing::debug!(
                "tracker: episode {} {why:?} after {ms:.2} ms: {names:?}",
                e.epoch
            );
        }
        let written = self.store.record_all(decisions, ts);
        self.store_written(written);
        self.episodes += 1;
        self.last = Some(info(&e, Some(ts), Some(why)));
    }

    /// A thread of a FUSE daemon outside the app (fuse.rs): it served this episode's requests
    /// and leaves the set with it, confirmed or not.
    fn fuse_server(&mut self, t: &Task, now: u64) -> bool {
        self.kind_of(t) == Kind::Partner
            && self.critical.contains_key(&t.tid)
            && self.fuse.serves(t.tgid, now)
    }

    /// Resolve the open episode if it outlived the timeout (`now`: CLOCK_MONOTONIC ns).
    pub fn tick(&mut self, now: u64) {
        let limit = self.cfg.episode_timeout_ms * 1_000_000;
        if self
            .episode
            .as_ref()
            .is_some_and(|e| now.saturating_sub(e.start_ns) > limit)
        {
            self.resolve(now, EndReason::Timeout);
        }
        let written = self.store.flush_if_due(now);
        self.store_written(written);
    }

    /// Warn once when the store cannot write (the decisions stay in memory).
    fn store_written(&mut self, r: rusqlite::Result<()>) {
        if let Err(err) = r {
            if !std::mem::replace(&mut self.store_failed, true) {
                tracing::warn!("tracker: cannot persist learned decisions (kept in memory): {err}");
            }
        }
    }

    /// The delay-critical threads now (the part of [`Classifier::snapshot`] a daemon acts on).
    pub fn critical(&self) -> impl Iterator<Item = &Member> {
        self.critical.values()
    }

    /// Episodes resolved so far.
    pub fn episodes(&self) -> u64 {
        self.episodes
    }

    /// When the open episode times out (monotonic ns); `None` when no episode is open.
    pub fn episode_deadline_ns(&self) -> Option<u64> {
        let limit = self.cfg.episode_timeout_ms * 1_000_000;
        self.episode.as_ref().map(|e| e.start_ns + limit)
    }

    pub fn snapshot(&self, dropped_events: u64) -> Snapshot {
        Snapshot {
            episode: match &self.episode {
                Some(e) => Some(info(e, None, None)),
                None => self.last.clone(),
            },
            critical: self.critical.values().cloned().collect(),
            learned: self
                .app
                .as_ref()
                .map(|a| self.store.pairs(&a.key))
                .unwrap_or_default(),
            episodes: self.episodes,
            dropped_events,
        }
    }
}

fn info(e: &Episode, end_ns: Option<u64>, end: Option<EndReason>) -> EpisodeInfo {
    EpisodeInfo {
        epoch: e.epoch,
        ui: ThreadId::from(&e.ui),
        ui_comm: e.ui.comm.clone(),
        input: e.input.as_ref().map(ThreadId::from),
        start_ns: e.start_ns,
        end_ns,
        end,
        edges: e.edges.len(),
    }
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
