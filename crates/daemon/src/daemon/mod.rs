//! The daemon's one loop: it owns the state, receives every event from one channel (sources,
//! socket, signals), and after each change — at most once per `min_focus_interval_ms` since the
//! last change applied (a rescan does not count), and every `rescan_ms` to catch new threads —
//! asks the mode for the desired settings and reconciles.
//! Start and stop are reconciliations with "desired = nothing": the first restores what a
//! killed predecessor left in the journal, the last undoes everything this one did.

mod audible;
mod control;
mod critical_sets;
mod events;
mod family;
mod fast;
mod idle;
mod launch;
mod placement;
mod rt;
mod setup;
mod status;

use crate::actuators::prefetch::Prefetcher;
use crate::config::{Config, Mode};
use crate::features::Features;
use crate::journal::{Journal, JournalLock};
use crate::policy;
use crate::reconcile::Reconciler;
use crate::rt_guard::RtGuard;
use crate::rtapi::{canary, Grants};
use crate::server::Server;
use crate::sources::cpufreq;
use crate::sources::tracker::TrackerHandle;
use crate::state;
use crate::state::{History, State};
use crate::types::AppId;
use crate::types::Critical;
use crate::types::Desired;
use crate::types::Event;
use crate::types::SourceName;
use anyhow::Context;
use events::{Flow, Turn};
use setup::{reconciler, start_sources, start_tracker};
use std::collections::BTreeMap;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};
use tracing::{error, info, warn};

struct Daemon {
    cfg: Config,
    mode: Mode,
    features: Features,
    rec: Reconciler,
    /// What each source says is in front (precedence = `cfg.precedence()`: the `sources`
    /// order, `"auto"` standing for what it covers).
    focus_by_source: BTreeMap<SourceName, AppId>,
    focus: Option<AppId>,
    focus_since: Instant,
    history: History,
    /// Focus or mode changed and not yet applied.
    dirty: bool,
    /// When a pass last applied a change (or the fast path stood for one): the rate limit's
    /// clock. A periodic rescan with nothing pending does not set it, so a focus change just
    /// after one is not held back by `min_focus_interval_ms`.
    last_apply: Instant,
    prefetcher: Prefetcher,
    sources_alive: BTreeMap<SourceName, bool>,
    /// The `auto` source, when it runs: the sessions it found and follows (`status`).
    auto: Option<crate::sources::auto::Handle>,
    /// The BPF tracker, when it runs; why not otherwise (shown by `status`).
    tracker: Option<TrackerHandle>,
    tracker_state: String,
    /// The tracker's thread's loan of real time to this loop (repaid after each event).
    loan: uxsched_os::own::Loan,
    /// The tracker's latest critical set for the app in front.
    critical: Vec<Critical>,
    /// What the set held per keystroke: the latest episodes' sets (`critical_sets.rs`).
    critical_sets: critical_sets::CriticalSets,
    /// How apps are placed on this machine (see [`reconciler`]).
    placement: String,
    /// What is wrong with each source that runs degraded.
    source_errors: BTreeMap<SourceName, String>,
    /// Grants of the real-time API (`rtapi/`), merged into every pass's desired settings.
    grants: Grants,
    /// The canary's watchdog, told after each pass which RT threads uxsched holds.
    canary: Option<canary::Canary>,
    /// The `rt` lever's guard, which bounds the run time of every thread the lever makes
    /// real-time; `None` when the lever is not `rt` or cannot be bounded (then it is fair).
    rt: Option<RtGuard>,
    /// rtkit's D-Bus interface (`[rtkit] enable`), answered through the same grants; served
    /// while the daemon lives.
    _rtkit: Option<crate::rtapi::rtkit::Service>,
    /// The rt lever is off until then (the canary tripped).
    rt_suspended_until: Option<Instant>,
    /// When the tracker decided each new critical thread (monotonic ns), until its boost is
    /// written; then the latency goes to `boost_latency` (the latest [`LATENCIES`]).
    boost_pending: Vec<(uxsched_os::identity::TaskId, u64)>,
    boost_latency: std::collections::VecDeque<u64>,
    /// The last answer of [`Daemon::placement_now`]: app, when, what.
    placement_seen: Option<(crate::types::AppId, Instant, placement::Placement)>,
    /// The focused app's user as the last pass read it (`state::owner`): the fast path asks it
    /// for every partner batch, and a pass reads it afresh.
    owner_seen: std::cell::Cell<Option<(crate::types::AppId, Option<u32>)>>,
    /// The journal's write count and the lever's threads at the last `publish_rt`.
    published: Option<(
        u64,
        std::collections::BTreeSet<uxsched_os::identity::TaskId>,
    )>,
    /// Stock levers or the sched_ext scheduler (`backend/`).
    backend: Box<dyn crate::backend::Backend>,
    /// When the last pass asked for by the cgroup mover was due.
    moved_pass: Instant,
    /// The focused app's process family, placed as the app.
    family: std::cell::RefCell<family::FamilyCache>,
    /// The sessions' idleness: the focus withheld while its session is idle (`idle.rs`).
    idle: idle::Idleness,
    /// Programs started from the app in front, in front until their window maps.
    launches: launch::Launches,
    /// The app in front as the launch watcher sees it (`sources/launch/`).
    launch_front: crate::sources::launch::Front,
    /// The processes playing sound (`audible.rs`).
    audible: Vec<AppId>,
}

/// The daemon's own `RLIMIT_RTTIME`, µs (see `run`).
const OWN_RTTIME_US: u64 = 200_000;

/// How long stopping waits for the queued cgroup moves of each restoring pass (each takes an
/// RCU grace period: tens of ms under load).
const MOVES_AT_STOP: Duration = Duration::from_secs(5);

/// How long a change request's answer waits for the cgroup moves its pass queued.
const ANSWER_WAIT: Duration = Duration::from_secs(1);

/// How many "critical → boosted" latencies `status` summarises.
const LATENCIES: usize = 4096;

/// Run the daemon in the foreground until SIGTERM/SIGINT.
pub fn run(cfg: Config) -> anyhow::Result<()> {
    let features = Features::detect(&cfg.facfs.sysfs_root);
    features.log();
    // The daemon's own real-time threads (its event path, the guard, the watchdog) block
    // within milliseconds: one that ran this long without blocking is a bug, and the kernel
    // then ends the daemon (the journal lets the next start restore everything) rather than
    // let it hold a CPU — the bound rtkit asks of its clients.
    if let Err(e) = uxsched_client::limit_rttime(OWN_RTTIME_US) {
        warn!("cannot bound the daemon's own real-time threads (RLIMIT_RTTIME): {e}");
    }
    let _lock = JournalLock::acquire(&cfg.journal)?;
    let journal = setup::open_journal(&cfg)?;
    // The socket first: it refuses to start next to a live daemon before anything is touched.
    let (tx, rx) = mpsc::channel();
    let server = Server::start(&cfg.socket, cfg.control_uids.clone(), tx.clone())?;
    let mut d = Daemon::start(cfg, features, journal, &tx)?;
    setup::forward_signals(tx)?;
    info!(mode = %d.cfg.mode, socket = %d.cfg.socket.display(), "uxsched daemon ready");
    let result = d.serve(&rx);
    if let Err(e) = &result {
        error!("stopping after an error: {e:#}");
    }
    d.loan.repay();
    info!("restoring everything");
    d.focus_by_source.clear();
    d.focus = None;
    d.history.clear();
    d.launches.clear();
    let stopped = d.stop();
    drop(server);
    result.and(stopped)
}

impl Daemon {
    /// The active mode's policy.
    fn policy(&self) -> &'static dyn policy::Policy {
        policy::for_mode(self.mode)
    }

    /// Restore what a killed predecessor left in the journal, then start every part: the
    /// backend, the sources, the tracker and the real-time parts.
    fn start(
        cfg: Config,
        mut features: Features,
        journal: Journal,
        tx: &mpsc::Sender<Event>,
    ) -> anyhow::Result<Daemon> {
        setup::check_cpu_levers(&cfg)?;
        let leftovers = journal.entries()?.len();
        // Elevators and iocost a killed predecessor switched go back first; then this one's.
        let devices = crate::devices::Devices::default();
        devices.restore(&journal)?;
        let iocost = crate::devices::iocost::Iocost::here();
        if let Some(io) = &iocost {
            io.restore(&journal)?;
        }
        crate::actuators::io_class::restore(journal.connection())?;
        if cfg.storage.switch_to_bfq {
            let names = crate::devices::chosen(&cfg.storage.bfq_devices, &devices.sys);
            devices.switch_to_bfq(&journal, &names)?;
        }
        if cfg.storage.switch_to_iocost {
            match &iocost {
                Some(io) => {
                    let names = crate::devices::chosen(&cfg.storage.iocost_devices, &io.sys);
                    io.enable(&journal, &names)?;
                }
                None => warn!("`[storage] switch_to_iocost`: no cgroup2 with io.cost.qos here (cgroup v1, or a kernel without CONFIG_BLK_CGROUP_IOCOST): blk-iocost not enabled"),
            }
        }
        features.refresh_io();
        let (mut rec, placement) = reconciler(&cfg, journal, features.default_slice_ns, tx);
        let bfq = devices.on_bfq();
        if !bfq.is_empty() {
            info!(disks = ?bfq, "BFQ runs here: a thread uxsched renices keeps I/O priority best-effort 4, the level BFQ weight-raises");
            rec.pin_io_weight = true;
        }
        if leftovers > 0 {
            info!(
                leftovers,
                "restoring settings a previous daemon left behind"
            );
        }
        rec.reconcile(&Desired::nothing(&cfg))?;
        let (fg_io, bg_io) = cfg.storage.group_prio_classes();
        let groups = rec.groups.as_deref();
        let db = rec.journal.connection();
        crate::actuators::io_class::apply_to_groups(db, groups, fg_io, bg_io)?;
        let backend = crate::backend::start(&cfg.backend).context("starting the backend")?;
        let sources = start_sources(&cfg, tx);
        audible::start(&cfg, tx);
        // `run` is the loop's thread: the tracker's thread lends it real time for new members.
        let loan = uxsched_os::own::Loan::to_this_thread();
        let (tracker, tracker_state) = start_tracker(&cfg, tx, loan.clone());
        let realtime = setup::start_realtime(&cfg, &features, &mut rec, tx);
        let launch_front = crate::sources::launch::Front::default();
        if cfg.storage.launch_budget_ms > 0 {
            if let Err(e) = crate::sources::launch::start(launch_front.clone(), tx.clone()) {
                warn!("{e:#}");
            }
        }
        Ok(Daemon {
            mode: cfg.mode,
            features,
            rec,
            focus_by_source: BTreeMap::new(),
            focus: None,
            focus_since: Instant::now(),
            history: History::default(),
            dirty: false,
            // The first focus is applied at once (the rate limit is about changes in a row).
            last_apply: Instant::now()
                .checked_sub(Duration::from_millis(cfg.min_focus_interval_ms))
                .unwrap_or_else(Instant::now),
            prefetcher: Prefetcher::default(),
            sources_alive: sources.alive,
            auto: sources.auto,
            tracker,
            tracker_state,
            loan,
            critical: Vec::new(),
            critical_sets: Default::default(),
            placement,
            source_errors: BTreeMap::new(),
            grants: realtime.grants,
            canary: realtime.canary,
            rt: realtime.guard,
            _rtkit: realtime.rtkit,
            rt_suspended_until: None,
            boost_pending: Vec::new(),
            boost_latency: Default::default(),
            published: None,
            placement_seen: None,
            owner_seen: Default::default(),
            backend,
            moved_pass: Instant::now(),
            family: Default::default(),
            idle: Default::default(),
            launches: Default::default(),
            launch_front,
            audible: Vec::new(),
            cfg,
        })
    }

    fn serve(&mut self, rx: &mpsc::Receiver<Event>) -> anyhow::Result<()> {
        // The loop writes the boosts the tracker decides: it must not queue behind the load it
        // protects (at nice 0 beside 12 hogs in one group it waited for several ms). Nice −20,
        // the fair class's top, where it still waited 3–5 ms under load; so the tracker's
        // thread lends it real time for each hand-over of new members (`sched::Loan`), and it
        // is not real-time otherwise (`actuators::sched::raise_own` says what that cost).
        let fair = uxsched_os::own::own_fair();
        if let Err(e) = uxsched_os::sched::set(0, &fair) {
            warn!("the daemon's loop cannot raise itself to nice -20 ({e}): boosts may wait behind the load");
        }
        let rescan = Duration::from_millis(self.cfg.rescan_ms);
        let min_interval = Duration::from_millis(self.cfg.min_focus_interval_ms);
        let mut turn = Turn {
            next_scan: Instant::now() + rescan,
            answer: None,
            rescan,
            min_interval,
        };
        // An event read while coalescing the tracker's sets, handled next.
        let mut stash: Option<Event> = None;
        // Answers to change requests waiting for their cgroup moves.
        let mut answers = Vec::new();
        loop {
            let now = Instant::now();
            let mut apply_at = if self.dirty {
                (self.last_apply + min_interval).min(turn.next_scan)
            } else {
                turn.next_scan
            };
            // A hint session going stale or an interaction lapsing is undone on time.
            let grants_due = self
                .grants
                .next_wake()
                .into_iter()
                .chain(self.launches.next_end(self.launch_budget()))
                .min();
            if let Some(t) = grants_due {
                apply_at = apply_at.min(t);
            }
            let event = match stash.take() {
                Some(e) => Ok(e),
                None => rx.recv_timeout(apply_at.saturating_duration_since(now)),
            };
            let flow = match event {
                Ok(e) => self.on_event(e, &mut turn, rx, &mut stash)?,
                Err(RecvTimeoutError::Timeout) => Flow::Go,
                Err(RecvTimeoutError::Disconnected) => Flow::Stop,
            };
            if flow == Flow::Stop {
                return Ok(());
            }
            // The fast path (if any) is done: the tracker's loan ends here, unless another
            // hand-over is already on its way.
            self.loan.repay_when_idle();
            let now = Instant::now();
            let due = (self.dirty && now >= self.last_apply + min_interval)
                || now >= turn.next_scan
                || grants_due.is_some_and(|t| now >= t);
            if due {
                self.apply()?;
                self.boosts_written(None);
                turn.next_scan = Instant::now() + rescan;
            }
            // A change request is answered after it has been applied (unless rate-limited), so
            // a client that focuses and then looks at the kernel sees the result — and after
            // the cgroup moves it queued are made (the loop does not wait for them: the
            // answers do, `actuators/mover.rs`).
            // At most `ANSWER_WAIT` though: a group sweep that keeps queueing moves (a fork
            // storm in the fg group) must not keep the answers back.
            answers.extend(turn.answer.take().map(|a| (a, Instant::now())));
            let moved = self.rec.groups.as_ref().is_none_or(|g| !g.busy());
            let waited = |since: &Instant| since.elapsed() >= ANSWER_WAIT;
            if moved || answers.iter().any(|(_, since)| waited(since)) {
                for ((reply, resp), _) in answers.drain(..) {
                    let _ = reply.send(resp);
                }
            }
        }
    }

    /// The focused app now, with its process family.
    fn scan_focus(&self) -> Option<state::App> {
        let id = self.focus?;
        let family = self.family.borrow_mut().of(id);
        state::scan_app(id, &family, true, &self.cfg)
    }

    fn scan(&mut self) -> State {
        let mut focus = self.scan_focus();
        if self.focus.is_some() && focus.is_none() {
            info!(pid = self.focus.map(|a| a.pid), "focused process exited");
            self.focus_by_source.retain(|_, a| a.alive());
            self.update_focus();
            focus = self.scan_focus();
        }
        self.history.refresh(self.focus);
        let background = self
            .history
            .iter()
            .filter_map(|id| state::scan_app(*id, &[], false, &self.cfg))
            .collect();
        let chain = match focus.as_mut() {
            Some(app) => {
                // Read afresh each pass, and before the first keystroke's partners ask (the
                // fast path then finds it: one /proc read less between an input and its boost).
                self.owner_seen.set(None);
                let id = app.id;
                if self.cfg.tracker.partners && self.policy().follows_chain() {
                    self.owner_of(id);
                }
                state::apply_tracker(app, || self.owner_of(id), &self.critical, &self.cfg)
            }
            None => Vec::new(),
        };
        let cpus_used = focus.iter().flat_map(|a| a.threads.iter().map(|t| t.cpu));
        // Only a mode that follows the chain places the app by these (its policy reads them); the autogroup
        // check scans every process, so it is not paid on every rescan of the other modes.
        // Without the CPU levers nothing is placed: the walk is not paid either.
        let placement = match &focus {
            Some(a) if self.policy().follows_chain() && self.cfg.cpu_levers => {
                self.placement_now(a.id)
            }
            _ => placement::Placement::default(),
        };
        let budget = self.launch_budget();
        self.launches.prune(self.focus, Instant::now(), budget);
        let launching = self
            .launches
            .apps()
            .filter_map(|id| state::scan_app(id, &[], false, &self.cfg))
            .collect();
        let rt_refused = self.rt_refused(focus.as_ref(), &chain, placement);
        let rt_in_fg = self.rt_in_fg(focus.as_ref());
        State {
            freq_ratio: cpufreq::freq_ratio(&self.cfg.facfs.sysfs_root, cpus_used),
            focus,
            background,
            since_focus_ms: self.focus_since.elapsed().as_millis() as u64,
            runnable: state::runnable_now().unwrap_or_else(|e| {
                tracing::warn!("cannot read /proc/stat ({e}); vtcfs assumes 1 runnable task: is /proc mounted?");
                1
            }),
            cpus: state::cpus_now(),
            autogroup: placement.autogroup,
            chain,
            rt_demoted: Default::default(),
            rt_suspended: false,
            rt_needs_fg: placement.rt_needs_fg,
            rt_keeps_home: placement.rt_keeps_home,
            rt_refused,
            rt_in_fg,
            launching,
            audible: self.audible_threads(),
        }
    }

    /// A real-time API request: checked and recorded, applied at once (a grant is not rate
    /// limited like focus changes: `[rtapi] rate_max` bounds it per user), then answered with
    /// what the kernel holds.
    fn thread_request(
        &mut self,
        req: &uxsched_client::Request,
        peer: &uxsched_os::peer::Peer,
        conn: u64,
    ) -> anyhow::Result<uxsched_client::Reply> {
        use uxsched_client::Reply;
        let task = match self.grants.request(peer, conn, req) {
            Ok(task) => task,
            Err((why, msg)) => return Ok(Reply::refused(why, msg)),
        };
        if !self.grants.take_quiet() {
            self.apply()?;
        }
        Ok(match self.grants.answer(peer, req, task) {
            Ok(granted) => {
                let mut r = Reply::granted(granted);
                self.grants.annotate(req, &task, &mut r);
                r
            }
            Err((why, msg)) => {
                self.apply()?; // the grant was dropped: undo what it did, if anything
                Reply::refused(why, msg)
            }
        })
    }

    fn apply(&mut self) -> anyhow::Result<()> {
        self.loan.repay();
        let start = Instant::now();
        let applies_change = self.dirty;
        let mut state = self.scan();
        let now = Instant::now();
        let scan_us = (now - start).as_micros() as u64;
        self.rt_suspended_until = self.rt_suspended_until.filter(|until| *until > now);
        state.rt_suspended = self.rt.is_none() || self.rt_suspended_until.is_some();
        // Demotions the guard made before this pass: rewritten by it, then the journal's again.
        let settled = self.rt.as_ref().map(|g| g.demotions());
        if let Some(g) = &self.rt {
            state.rt_demoted = g.cooling(now);
        }
        let mut desired = self.wanted(&state);
        self.rec.ext_inherited = self.backend.ext_inherited();
        // The rt lever's bound is in force before a thread is made real-time: each is sampled
        // now and watched from then on; one whose run time cannot be read is not made RT.
        let before = self.rt.as_ref().map(|g| g.followed()).unwrap_or_default();
        let lever = self.rt_lever_threads(&desired);
        let unreadable = self.rt.as_ref().map(|g| g.follow(lever));
        if let Some(unreadable) = unreadable.filter(|u| !u.is_empty()) {
            state.rt_demoted.extend(unreadable);
            desired = self.wanted(&state);
            if let Some(g) = &self.rt {
                g.follow(self.rt_lever_threads(&desired));
            }
        }
        // Real-time API grants (`rtapi/`) on top: not the lever's, so not its budget.
        self.grants.prune();
        self.grants.merge_into(&mut desired);
        let desired = desired.bounded(&self.cfg);
        // Threads made real-time in this pass go last, after their originals are published to
        // the guard: a FIFO thread can starve a per-CPU kernel thread that another write of the
        // pass waits for (measured: a session's autogroup write blocked 0.95 s).
        let after = self.rt.as_ref().map(|g| g.followed()).unwrap_or_default();
        let fresh: Vec<_> = after.difference(&before).copied().collect();
        if !fresh.is_empty() {
            let mut first = desired.clone();
            for (_, t) in first.threads.iter_mut().filter(|(k, _)| fresh.contains(*k)) {
                t.rt = None;
            }
            self.rec.reconcile(&first)?;
            self.publish_rt();
        }
        self.rec.reconcile(&desired)?;
        self.publish_rt();
        if let (Some(g), Some(upto)) = (&self.rt, settled) {
            g.settled(upto);
        }
        if self.policy().prefetches(&self.cfg) {
            if let Some(app) = &state.focus {
                if let Err(e) = self
                    .prefetcher
                    .scan(app.id, self.cfg.eimos.readahead_factor)
                {
                    tracing::debug!(pid = app.id.pid, "prefetch: {e}");
                }
            }
        }
        self.dirty = false;
        let end = Instant::now();
        if applies_change {
            self.last_apply = end;
        }
        let pass_us = (end - start).as_micros() as u64;
        tracing::debug!(scan_us, pass_us, "pass");
        Ok(())
    }

    /// What the mode wants for `state`: bounded by the config, shaped by the backend, and cut
    /// to the storage levers where `cpu_levers = false` (`Desired::cpu_switch`).
    fn wanted(&mut self, state: &State) -> Desired {
        let mut desired = self.policy().desired(state, &self.cfg).bounded(&self.cfg);
        self.backend.shape(state, &mut desired);
        desired.cpu_switch(&self.cfg)
    }

    /// Undo everything and remove the groups (retrying while inherited tasks move out): each
    /// attempt waits for the moves it queued (`actuators/mover.rs`) before removing them.
    fn stop(&mut self) -> anyhow::Result<()> {
        if let Err(e) = crate::devices::Devices::default().restore(&self.rec.journal) {
            error!("cannot restore the devices' elevators from the journal: {e}");
        }
        if let Some(io) = crate::devices::iocost::Iocost::here() {
            if let Err(e) = io.restore(&self.rec.journal) {
                error!("cannot disable the blk-iocost the daemon enabled (journal): {e}");
            }
        }
        if let Err(e) = crate::actuators::io_class::restore(self.rec.journal.connection()) {
            error!("cannot restore the groups' I/O classes from the journal: {e}");
        }
        let nothing = Desired::nothing(&self.cfg);
        for attempt in 0..5 {
            self.rec.reconcile(&nothing)?;
            let settled = self
                .rec
                .groups
                .as_ref()
                .is_none_or(|g| g.settle(MOVES_AT_STOP));
            if !settled {
                warn!("cgroup moves still queued after {MOVES_AT_STOP:?}; the next start's group sweep puts those tasks back");
            }
            match self.rec.groups.as_ref().map(|g| g.remove()) {
                None | Some(Ok(())) => return Ok(()),
                Some(Err(e)) if attempt == 4 => {
                    warn!("cannot remove uxsched's cgroups: {e}");
                }
                Some(Err(_)) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        Ok(())
    }
}
