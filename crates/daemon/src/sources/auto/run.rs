//! The `auto` thread: discovery every [`RESCAN`](super::RESCAN), a follower started for each
//! session that has one and stopped when its session goes, and their focus relayed to the
//! daemon one session at a time.
//!
//! Each follower reports under its own source name (x11, sway, …) into a channel of its own;
//! the thread hears every follower and passes on **one** focus: that of the active sessions'
//! follower whose focus changed last (logind's `Active`; without logind every session counts
//! as active). So with two people's sessions on two seats, or a user's X display and a headless
//! one, the session the last focus change happened in is in front; a session switched to (logind
//! makes it active) counts as a change. The daemon sees at most one of the followers' source
//! names holding a focus at a time, so their order in the precedence does not matter.

use super::idle_relay::IdleFrom;
use super::report::{self, RunState};
use super::{Discovery, Follower, Found, Options, Roots};
use crate::sources::x11::SharedOwner;
use crate::sources::Owner;
use crate::types::{AppId, Event, SourceName};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uxsched_client::control::SessionStatus;

/// A follower that ended while its session still exists is started again after this long.
const RESTART_AFTER: Duration = Duration::from_secs(5);
/// The most followers running at once.
const MAX_RUNNING: usize = 64;
/// A follower that failed to start for a passing reason is tried again after this long.
const RETRY_AFTER: Duration = Duration::from_secs(30);

/// What `status` shows of `auto`.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// How sessions are found.
    pub how: String,
    pub sessions: Vec<SessionStatus>,
    pub notes: Vec<String>,
}

/// The running `auto` source: what it found and follows.
#[derive(Clone)]
pub struct Handle {
    shared: Arc<Mutex<Report>>,
}

impl Handle {
    pub fn report(&self) -> Report {
        self.shared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// What the `auto` thread needs of the configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    pub roots: Roots,
    pub opts: Options,
    /// `[mutter] cgroup_root`: where the GNOME follower watches.
    pub mutter_root: PathBuf,
    /// `[idle] after_s` (`None`: off): an X follower reads its display's idleness, another
    /// follower's session is read through logind (`sources/idle/`).
    pub idle_after: Option<Duration>,
}

enum Msg {
    Event(u64, Event),
    Ended(u64),
}

struct Running {
    id: u64,
    stop: Arc<AtomicBool>,
    /// The X11 follower's owner, updated each round.
    owner: Option<SharedOwner>,
    focus: Option<AppId>,
    changed: Instant,
    health: Option<String>,
    active: bool,
    ended: Option<Instant>,
    /// Idle since then, as its session's idle reader last said.
    idle: Option<Instant>,
}

struct Auto {
    settings: Settings,
    events: Sender<Event>,
    inbox: Sender<Msg>,
    next_id: u64,
    running: BTreeMap<Follower, Running>,
    /// Followers that could not start: why, and whether and when to try again.
    failed: BTreeMap<Follower, (String, Option<Instant>)>,
    /// What the daemon was last told: which source names which app.
    sent: Option<(SourceName, AppId)>,
    /// ... and which source's session is idle since when.
    sent_idle: Option<(SourceName, Instant)>,
    shared: Arc<Mutex<Report>>,
    found: Found,
}

/// Start the `auto` thread.
pub fn spawn(settings: Settings, events: Sender<Event>) -> std::io::Result<Handle> {
    let shared = Arc::new(Mutex::new(Report {
        how: "starting".into(),
        ..Default::default()
    }));
    let (inbox, rx) = mpsc::channel();
    let mut auto = Auto {
        settings,
        events,
        inbox,
        next_id: 0,
        running: BTreeMap::new(),
        failed: BTreeMap::new(),
        sent: None,
        sent_idle: None,
        shared: shared.clone(),
        found: Found::default(),
    };
    std::thread::Builder::new()
        .name("uxsched-auto".into())
        .spawn(move || {
            auto.run(&rx);
            for r in auto.running.values() {
                r.stop.store(true, Ordering::Relaxed);
            }
        })?;
    Ok(Handle { shared })
}

impl Auto {
    fn run(&mut self, rx: &Receiver<Msg>) {
        let mut discovery = Discovery::new(self.settings.roots.clone());
        loop {
            self.found = discovery.run(&self.settings.opts);
            self.reconcile();
            if self.relay().is_err() {
                return;
            }
            self.publish();
            let next = Instant::now() + super::RESCAN;
            loop {
                let left = next.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok(msg) => self.hear(msg),
                    Err(mpsc::RecvTimeoutError::Timeout) => break,
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
                if self.relay().is_err() {
                    return;
                }
                self.publish();
            }
        }
    }

    /// Start a follower for each session that has one, stop those whose session is gone.
    fn reconcile(&mut self) {
        let any = self.settings.opts.any_owner;
        let mut wanted: BTreeMap<Follower, (Result<Owner, String>, bool, IdleFrom)> =
            BTreeMap::new();
        for s in &self.found.sessions {
            let Ok(f) = &s.plan else { continue };
            let owner = match &s.user {
                Some((uid, _)) => Ok(Owner { uid: *uid, any }),
                None if any => Ok(Owner { uid: 0, any }),
                None => Err(format!("{}: no session user found", s.desktop)),
            };
            let active = s.active.unwrap_or(true);
            let idle = IdleFrom {
                logind: s.logind.clone(),
                wayland: s.wayland.clone(),
            };
            let e = wanted.entry(f.clone()).or_insert((owner, false, idle));
            e.1 |= active;
        }
        // Gone: stopped, and their focus no longer counts.
        let gone: Vec<Follower> = self
            .running
            .keys()
            .filter(|f| !wanted.contains_key(*f))
            .cloned()
            .collect();
        for f in gone {
            if let Some(r) = self.running.remove(&f) {
                r.stop.store(true, Ordering::Relaxed);
                tracing::info!(follower = ?f, "auto: the session is gone; its follower stops");
            }
        }
        self.failed.retain(|f, _| wanted.contains_key(f));
        for (f, (owner, active, idle)) in wanted {
            if let Some(r) = self.running.get_mut(&f) {
                let restart = r.ended.is_some_and(|t| t.elapsed() >= RESTART_AFTER);
                if !restart {
                    if let Some(cell) = &r.owner {
                        *cell.lock().unwrap_or_else(|e| e.into_inner()) = owner;
                    }
                    if active && !r.active {
                        // Switched to: a focus change of its own.
                        r.changed = Instant::now();
                    }
                    r.active = active;
                    continue;
                }
                self.running.remove(&f);
            }
            let due = match self.failed.get(&f) {
                Some((_, None)) => false,
                Some((_, Some(at))) => *at <= Instant::now(),
                None => true,
            };
            if due {
                self.start(f, owner, active, idle);
            }
        }
    }

    fn start(&mut self, f: Follower, owner: Result<Owner, String>, active: bool, idle: IdleFrom) {
        if self.running.len() >= MAX_RUNNING {
            let why = format!(
                "{MAX_RUNNING} sessions are followed already: this one is not (a bound on the \
                 threads sessions can make the daemon start)"
            );
            self.failed
                .insert(f, (why, Some(Instant::now() + RETRY_AFTER)));
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let any = self.settings.opts.any_owner;
        let mut cell = None;
        let started = match &f {
            Follower::X11 { display } => {
                let c: SharedOwner = Arc::new(Mutex::new(owner));
                cell = Some(c.clone());
                crate::sources::x11::follow(
                    *display,
                    self.settings.roots.x11_dir.clone(),
                    c,
                    self.settings.idle_after,
                    stop.clone(),
                    tx,
                )
                .map(|_| ())
            }
            Follower::Mutter => {
                crate::sources::mutter::spawn(self.settings.mutter_root.clone(), any, tx)
            }
            Follower::Sway(socket) => {
                crate::sources::wayland::sway::spawn(socket.clone(), any, tx).map(|_| ())
            }
            Follower::Hyprland(dir) => {
                crate::sources::wayland::hyprland::spawn(dir.clone(), any, tx).map(|_| ())
            }
            Follower::Niri(socket) => {
                crate::sources::wayland::niri::spawn(socket.clone(), any, tx).map(|_| ())
            }
            Follower::Kwin { uid } => {
                let bus = self
                    .settings
                    .roots
                    .runtime
                    .join(uid.to_string())
                    .join("bus");
                crate::sources::wayland::kwin::spawn(bus, any, tx).map(|_| ())
            }
            Follower::Toplevel(display) => {
                crate::sources::wayland::toplevel::spawn(display.clone(), any, tx).map(|_| ())
            }
        };
        match started {
            Ok(()) => {
                let inbox = self.inbox.clone();
                let forward = std::thread::Builder::new()
                    .name("uxsched-auto-relay".into())
                    .spawn(move || {
                        for ev in rx {
                            if inbox.send(Msg::Event(id, ev)).is_err() {
                                return;
                            }
                        }
                        let _ = inbox.send(Msg::Ended(id));
                    });
                if let Err(e) = forward {
                    stop.store(true, Ordering::Relaxed);
                    self.failed
                        .insert(f, (e.to_string(), Some(Instant::now() + RETRY_AFTER)));
                    return;
                }
                self.failed.remove(&f);
                self.read_idle(&f, id, idle, &stop);
                self.running.insert(
                    f,
                    Running {
                        id,
                        stop,
                        owner: cell,
                        focus: None,
                        changed: Instant::now(),
                        health: None,
                        active,
                        ended: None,
                        idle: None,
                    },
                );
            }
            Err(e) => {
                let again = (e.kind() != std::io::ErrorKind::Unsupported)
                    .then(|| Instant::now() + RETRY_AFTER);
                if e.kind() != std::io::ErrorKind::Unsupported {
                    tracing::warn!(follower = ?f, "auto: the follower could not start: {e}");
                }
                self.failed.insert(f, (e.to_string(), again));
            }
        }
    }

    /// A follower other than X11's (which reads its display itself): its session's idleness
    /// from its compositor or logind (`idle_relay.rs`); the reader stops with the follower.
    fn read_idle(&self, f: &Follower, id: u64, from: IdleFrom, stop: &Arc<AtomicBool>) {
        let inbox = self.inbox.clone();
        let send = move |ev| inbox.send(Msg::Event(id, ev)).is_ok();
        super::idle_relay::read(&self.settings, f, from, stop.clone(), send);
    }

    fn hear(&mut self, msg: Msg) {
        let (id, what) = match msg {
            Msg::Event(id, ev) => (id, Some(ev)),
            Msg::Ended(id) => (id, None),
        };
        // A follower stopped already (its session gone) is not heard.
        let Some(r) = self.running.values_mut().find(|r| r.id == id) else {
            return;
        };
        match what {
            Some(Event::Focus { app, .. }) => {
                r.focus = app;
                r.changed = Instant::now();
            }
            Some(Event::Health { error, .. }) => r.health = error,
            Some(Event::Idle { since, .. }) => r.idle = since,
            Some(_) => {}
            None => {
                r.focus = None;
                r.idle = None;
                r.ended = Some(Instant::now());
                // Its session's logind idle reader, if any, stops with it.
                r.stop.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Pass on the focus of the active follower whose focus changed last, and its session's
    /// idleness.
    fn relay(&mut self) -> Result<(), mpsc::SendError<Event>> {
        let picked = pick(self.running.iter().map(|(f, r)| (f.source(), r)));
        let now = picked.map(|(source, app, _)| (source, app));
        let idle = picked.and_then(|(source, _, idle)| Some((source, idle?)));
        for ev in tell(self.sent, now) {
            self.events.send(ev)?;
        }
        self.sent = now;
        for ev in super::idle_relay::tell(self.sent_idle, idle) {
            self.events.send(ev)?;
        }
        self.sent_idle = idle;
        Ok(())
    }

    fn publish(&self) {
        let sessions = self
            .found
            .sessions
            .iter()
            .map(|s| {
                let run = s.plan.as_ref().ok().map(|f| self.run_state(f));
                report::status(s, run.as_ref())
            })
            .collect();
        let r = Report {
            how: self.found.how.clone(),
            sessions,
            notes: self.found.notes.clone(),
        };
        *self.shared.lock().unwrap_or_else(|e| e.into_inner()) = r;
    }

    fn run_state(&self, f: &Follower) -> RunState {
        if let Some(r) = self.running.get(f) {
            let problem = match (&r.ended, &r.health) {
                (Some(_), _) => Some("its source ended; it is started again shortly".into()),
                (None, h) => h.clone(),
            };
            return RunState {
                running: r.ended.is_none(),
                focus: r.focus.map(|a| a.pid),
                problem,
            };
        }
        RunState {
            running: false,
            focus: None,
            problem: Some(
                self.failed
                    .get(f)
                    .map(|(why, _)| why.clone())
                    .unwrap_or_else(|| "starting".into()),
            ),
        }
    }
}

/// The focus to pass on: of the running, active followers with something in front, the one
/// whose focus changed last.
/// With the idleness of its session.
fn pick<'a>(
    running: impl Iterator<Item = (SourceName, &'a Running)>,
) -> Option<(SourceName, AppId, Option<Instant>)> {
    running
        .filter(|(_, r)| r.active && r.ended.is_none())
        .filter_map(|(source, r)| Some((r.changed, source, r.focus?, r.idle)))
        .max_by_key(|(changed, ..)| *changed)
        .map(|(_, source, app, idle)| (source, app, idle))
}

/// What the daemon is told when the focus passed on goes from `sent` to `now`: the source that
/// held it lets go first when another takes it, so that at most one of them holds a focus.
fn tell(sent: Option<(SourceName, AppId)>, now: Option<(SourceName, AppId)>) -> Vec<Event> {
    let mut out = Vec::new();
    if sent == now {
        return out;
    }
    if let Some((old, _)) = sent {
        if now.is_none_or(|(new, _)| new != old) {
            out.push(Event::Focus {
                source: old,
                app: None,
            });
        }
    }
    if let Some((source, app)) = now {
        out.push(Event::Focus {
            source,
            app: Some(app),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(pid: Option<i32>, ago_ms: u64, active: bool) -> Running {
        Running {
            id: 0,
            stop: Arc::new(AtomicBool::new(false)),
            owner: None,
            focus: pid.map(|pid| AppId { pid, start: 1 }),
            changed: Instant::now() - Duration::from_millis(ago_ms),
            health: None,
            active,
            ended: None,
            idle: None,
        }
    }

    fn shown(events: &[Event]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Event::Focus { source, app } => format!("{source:?} {:?}", app.map(|a| a.pid)),
                _ => "other".into(),
            })
            .collect()
    }

    #[test]
    fn the_latest_focus_change_of_an_active_session_wins() {
        use SourceName::*;
        let x = running(Some(10), 500, true);
        let sway = running(Some(20), 100, true);
        let idle = running(None, 0, true);
        let inactive = running(Some(30), 0, false);
        let mut ended = running(Some(40), 0, true);
        ended.ended = Some(Instant::now());
        let all = [
            (X11, &x),
            (Sway, &sway),
            (Niri, &idle),
            (X11, &inactive),
            (Niri, &ended),
        ];
        let got = pick(all.into_iter()).unwrap();
        assert_eq!((got.0, got.1.pid), (Sway, 20));
        // Sway's user clicks the desktop: X11's older focus is in front again.
        let sway = running(None, 0, true);
        let got = pick([(X11, &x), (Sway, &sway)].into_iter()).unwrap();
        assert_eq!((got.0, got.1.pid), (X11, 10));
        assert_eq!(pick([(Sway, &sway)].into_iter()), None);
    }

    #[test]
    fn one_source_holds_the_focus_at_a_time() {
        use SourceName::*;
        let a = |pid| AppId { pid, start: 1 };
        assert!(tell(Some((X11, a(1))), Some((X11, a(1)))).is_empty());
        assert_eq!(shown(&tell(None, Some((X11, a(1))))), ["X11 Some(1)"]);
        assert_eq!(
            shown(&tell(Some((X11, a(1))), Some((X11, a(2))))),
            ["X11 Some(2)"]
        );
        assert_eq!(
            shown(&tell(Some((X11, a(1))), Some((Sway, a(2))))),
            ["X11 None", "Sway Some(2)"]
        );
        assert_eq!(shown(&tell(Some((Sway, a(2))), None)), ["Sway None"]);
    }
}
