//! The fallback for a Wayland compositor without an IPC of its own (labwc, wayfire, river,
//! cosmic-comp, …): a client of the session's display socket that binds
//! `zwlr_foreign_toplevel_manager_v1` (wlr-foreign-toplevel-management, the taskbars'
//! protocol) and follows the window whose state says `activated` (issue 32).
//!
//! The protocol names a window's `app_id` and `title`, never its process: the process is
//! found by name among the session user's (`app_id.rs`, preferring the compositor's Wayland
//! clients, `unix_diag.rs`). Exactly one candidate is named; none, or two instances of one app,
//! are nothing in front, said in the source's health (`uxsched status`) and in the log at most
//! once a minute per app id. A compositor that does not offer the protocol (weston; one that
//! offers only `ext-foreign-toplevel-list-v1`, which has no activated state) makes the source
//! fail to start with that reason. docs/compositors.md says what it can and cannot tell.

use super::{owner_of, Complaints, Follower, Lost};
use crate::sources::{Owner, Reporter};
use crate::types::{Event, SourceName};
use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};
use wayland_client::protocol::{wl_callback, wl_registry};
use wayland_client::{Connection, Dispatch, EventQueue, Proxy, QueueHandle};
use wayland_protocols_wlr::foreign_toplevel::v1::client::{
    zwlr_foreign_toplevel_handle_v1::{self as handle, ZwlrForeignToplevelHandleV1},
    zwlr_foreign_toplevel_manager_v1::{self as manager, ZwlrForeignToplevelManagerV1},
};

/// How long the compositor may take to answer the first round trip (any user can listen on a
/// socket named like a compositor's, and never answer).
const HANDSHAKE: Duration = Duration::from_secs(3);
const MANAGER: &str = "zwlr_foreign_toplevel_manager_v1";
/// The protocol's `activated` state.
const ACTIVATED: u32 = 2;
/// The protocol version this source speaks (v3 adds `parent`, which it ignores).
const VERSION: u32 = 3;
/// The most windows followed: a compositor (the user's program) cannot make the daemon keep
/// unbounded state; windows beyond it are let go and counted as not there.
const MAX_WINDOWS: usize = 4096;
/// At most one log line per app id per this period about why it names nothing.
const SAY_EVERY: Duration = Duration::from_secs(60);

/// One window as the compositor last described it (`done` applies what came before it).
#[derive(Debug, Default)]
struct Window {
    app_id: String,
    active: bool,
    /// When it was last activated (a counter): of several activated windows (several seats)
    /// the latest is in front.
    activated_at: u64,
    described: bool,
    next_app_id: Option<String>,
    next_active: Option<bool>,
}

/// What the compositor's events have said.
#[derive(Debug, Default)]
struct State {
    globals: Vec<(u32, String, u32)>,
    synced: bool,
    /// By the handle's protocol id (unique among the connection's live objects).
    windows: HashMap<u32, Window>,
    tick: u64,
    /// A window came, went, or changed its app id or activation since last looked at.
    changed: bool,
    /// The compositor stopped the list (`finished`).
    finished: bool,
}

impl State {
    /// The app id of the window in front, if any.
    fn focused(&self) -> Option<&str> {
        self.windows
            .values()
            .filter(|w| w.active && w.described)
            .max_by_key(|w| w.activated_at)
            .map(|w| w.app_id.as_str())
    }

    /// `done`: apply what the window's events since the last `done` said.
    fn done(&mut self, id: u32) {
        let Some(w) = self.windows.get_mut(&id) else {
            return;
        };
        if let Some(a) = w.next_app_id.take().filter(|a| *a != w.app_id) {
            w.app_id = a;
            self.changed = true;
        }
        if let Some(active) = w.next_active.take().filter(|a| *a != w.active) {
            w.active = active;
            if active {
                self.tick += 1;
                w.activated_at = self.tick;
            }
            self.changed = true;
        }
        if !w.described {
            w.described = true;
            self.changed = true;
        }
    }
}

impl Dispatch<ZwlrForeignToplevelManagerV1, ()> for State {
    fn event(
        state: &mut Self,
        _: &ZwlrForeignToplevelManagerV1,
        event: manager::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        match event {
            manager::Event::Toplevel { toplevel } if state.windows.len() >= MAX_WINDOWS => {
                tracing::debug!("toplevel: more than {MAX_WINDOWS} windows; one is not followed");
                toplevel.destroy();
            }
            manager::Event::Toplevel { toplevel } => {
                state
                    .windows
                    .insert(toplevel.id().protocol_id(), Window::default());
            }
            manager::Event::Finished => state.finished = true,
            _ => {}
        }
    }

    wayland_client::event_created_child!(State, ZwlrForeignToplevelManagerV1, [
        manager::EVT_TOPLEVEL_OPCODE => (ZwlrForeignToplevelHandleV1, ()),
    ]);
}

impl Dispatch<ZwlrForeignToplevelHandleV1, ()> for State {
    fn event(
        state: &mut Self,
        proxy: &ZwlrForeignToplevelHandleV1,
        event: handle::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let id = proxy.id().protocol_id();
        match event {
            handle::Event::AppId { app_id } => {
                if let Some(w) = state.windows.get_mut(&id) {
                    w.next_app_id = Some(app_id);
                }
            }
            handle::Event::State { state: s } => {
                let active = s
                    .chunks_exact(4)
                    .any(|c| c.try_into().map(u32::from_ne_bytes).ok() == Some(ACTIVATED));
                if let Some(w) = state.windows.get_mut(&id) {
                    w.next_active = Some(active);
                }
            }
            handle::Event::Done => state.done(id),
            handle::Event::Closed => {
                state.windows.remove(&id);
                proxy.destroy();
                state.changed = true;
            }
            _ => {}
        }
    }
}

impl Dispatch<wl_registry::WlRegistry, ()> for State {
    fn event(
        state: &mut Self,
        _: &wl_registry::WlRegistry,
        event: wl_registry::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_registry::Event::Global {
            name,
            interface,
            version,
        } = event
        {
            state.globals.push((name, interface, version));
        }
    }
}

impl Dispatch<wl_callback::WlCallback, ()> for State {
    fn event(
        state: &mut Self,
        _: &wl_callback::WlCallback,
        _: wl_callback::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        state.synced = true;
    }
}

/// One connection to the compositor, the toplevel manager bound.
pub(crate) struct Conn {
    _conn: Connection,
    queue: EventQueue<State>,
    state: State,
    _manager: ZwlrForeignToplevelManagerV1,
    owner: Result<Owner, String>,
    /// The compositor's process name, for what is said.
    compositor: String,
}

/// Connect to the display socket `display` and bind the toplevel manager. `Unsupported`: the
/// compositor does not offer it (the error says so, with what to do instead).
fn open(display: &Path, any: bool) -> io::Result<Conn> {
    let at = display.display();
    let stream = crate::sources::auto::procs::connect(display)
        .map_err(|e| io::Error::new(e.kind(), format!("{at}: {e}")))?;
    let cred = uxsched_os::peer::peer_cred(&stream)?;
    let compositor = crate::sources::auto::procs::comm(cred.pid);
    let owner = owner_of(&stream, any);
    let conn = Connection::from_socket(stream)
        .map_err(|e| io::Error::other(format!("{at}: not a Wayland socket: {e}")))?;
    let mut queue = conn.new_event_queue();
    let qh = queue.handle();
    let registry = conn.display().get_registry(&qh, ());
    let _sync = conn.display().sync(&qh, ());
    let mut state = State::default();
    let end = Instant::now() + HANDSHAKE;
    while !state.synced {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{compositor} at {at}: no answer to the registry within {HANDSHAKE:?}: not a \
                     compositor?"
                ),
            ));
        }
        read(&mut queue, &mut state, left)?;
    }
    let Some(&(name, _, version)) = state.globals.iter().find(|g| g.1 == MANAGER) else {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "no focus source: {compositor} offers no wlr-foreign-toplevel-management; use \
                 `uxsched focus PID` or the app API (docs/api.md)"
            ),
        ));
    };
    let manager =
        registry.bind::<ZwlrForeignToplevelManagerV1, _, _>(name, version.min(VERSION), &qh, ());
    Ok(Conn {
        _conn: conn,
        queue,
        state,
        _manager: manager,
        owner,
        compositor,
    })
}

/// Send what is queued, wait up to `timeout` for the compositor, handle what it sent.
fn read(queue: &mut EventQueue<State>, state: &mut State, timeout: Duration) -> io::Result<()> {
    let lost = |e: &dyn std::fmt::Display| io::Error::other(format!("the connection failed: {e}"));
    queue.flush().map_err(|e| lost(&e))?;
    queue.dispatch_pending(state).map_err(|e| lost(&e))?;
    if let Some(guard) = queue.prepare_read() {
        let mut pfd = libc::pollfd {
            fd: guard.connection_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(timeout.as_millis() + 1).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, ms) } > 0 {
            guard.read().map_err(|e| lost(&e))?;
        }
    }
    queue.dispatch_pending(state).map_err(|e| lost(&e))?;
    Ok(())
}

/// Why an app id names nothing, logged at most once per [`SAY_EVERY`] per app id.
#[derive(Default)]
struct Said(HashMap<String, Instant>);

impl Said {
    fn say(&mut self, app_id: &str, why: &str) {
        if self.0.get(app_id).is_some_and(|t| t.elapsed() < SAY_EVERY) {
            tracing::debug!(source = ?SourceName::Toplevel, "{why}");
            return;
        }
        if self.0.len() >= 256 {
            self.0.clear();
        }
        self.0.insert(app_id.to_owned(), Instant::now());
        tracing::info!(
            source = ?SourceName::Toplevel,
            "nothing in front: {why}; `uxsched focus PID` names the app by hand, and an app \
             can ask for itself (docs/api.md)"
        );
    }
}

/// Name the process of the window in front (`app_id`; `None`: no window is), or nothing and
/// why. Ok(false): it named nothing for a window in front.
fn report(
    app_id: Option<&str>,
    c: &Conn,
    display: &Path,
    reporter: &mut Reporter,
    said: &mut Said,
    names: &mut super::app_id::Names,
) -> Result<bool, Lost> {
    let found = match (app_id, &c.owner) {
        (None, _) => Ok(None),
        (Some(_), Err(e)) => Err(e.clone()),
        (Some(a), Ok(o)) => super::app_id::resolve(a, o.uid, display, names)
            .map(Some)
            .inspect_err(|why| said.say(a, why)),
    };
    match found {
        Ok(pid) => {
            reporter.seen(pid, c.owner.clone())?;
            reporter.health(None)?;
            Ok(true)
        }
        Err(why) => {
            reporter.seen(None, Err(String::new()))?;
            let on = &c.compositor;
            reporter.health(Some(format!(
                "the window in front on {on} names no process: {why}"
            )))?;
            Ok(false)
        }
    }
}

/// After a change whose window named no process, it is looked at again this long after the
/// change, then not until the next change: a client that just exited (its window closed) or
/// just connected can still be, or not yet be, among the compositor's clients at the change.
const AGAIN: [Duration; 3] = [
    Duration::from_millis(200),
    Duration::from_secs(1),
    Duration::from_secs(3),
];

/// Serve one connection until it ends: at each change of the windows, name the process of the
/// one in front.
fn serve(
    mut c: Conn,
    display: &Path,
    reporter: &mut Reporter,
    _complaints: &mut Complaints,
) -> Result<(), Lost> {
    let uid = c.owner.as_ref().map(|o| o.uid).ok();
    let at = display.display().to_string();
    tracing::info!(
        socket = %at,
        compositor = %c.compositor,
        owner = ?uid,
        "toplevel source connected"
    );
    let mut said = Said::default();
    let mut names = super::app_id::Names::default();
    // The last change that named nothing, and how many times it was looked at again.
    let mut retry: Option<(Instant, usize)> = None;
    loop {
        let wait = match retry {
            Some((at, n)) => (at + AGAIN[n]).saturating_duration_since(Instant::now()),
            None => Duration::from_secs(3600),
        };
        read(&mut c.queue, &mut c.state, wait).map_err(|e| Lost::Conn(e.to_string()))?;
        if c.state.finished {
            return Err(Lost::Conn(
                "the compositor stopped listing its windows".into(),
            ));
        }
        let changed = std::mem::take(&mut c.state.changed);
        let due = retry.filter(|(at, n)| at.elapsed() >= AGAIN[*n]);
        if !changed && due.is_none() {
            continue;
        }
        let now = c.state.focused().map(str::to_owned);
        let named = report(now.as_deref(), &c, display, reporter, &mut said, &mut names)?;
        retry = match (named, changed, due) {
            (true, ..) => None,
            (false, true, _) => Some((Instant::now(), 0)),
            (false, false, Some((at, n))) => (n + 1 < AGAIN.len()).then_some((at, n + 1)),
            (false, false, None) => None,
        };
    }
}

/// Follow the window in front on the compositor whose display socket is `display`
/// (`/run/user/<uid>/wayland-N`), on a thread that ends when the socket is gone for good.
/// `any_owner`: act on any process it names (`sources_any_owner`). Fails at once if the socket
/// cannot be reached or the compositor does not offer the protocol (`Unsupported`).
pub fn spawn(
    display: PathBuf,
    any_owner: bool,
    events: Sender<Event>,
) -> io::Result<std::thread::JoinHandle<()>> {
    let first = open(&display, any_owner)?;
    let again = display.clone();
    let follower = Follower {
        thread: "uxsched-toplevel",
        source: SourceName::Toplevel,
        connect: move || open(&again, any_owner),
        serve: move |c, r: &mut Reporter, k: &mut Complaints| serve(c, &display, r, k),
    };
    super::run(follower, first, events)
}

/// The display socket the daemon's own environment names (`WAYLAND_DISPLAY`, relative to
/// `XDG_RUNTIME_DIR` unless absolute): `sources = ["toplevel"]` in a daemon run inside the
/// session.
pub fn display_from_env() -> io::Result<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "{k} is not set: run the daemon in the compositor's session, or use \
                     `sources = [\"auto\"]`"
                    ),
                )
            })
    };
    let display = PathBuf::from(var("WAYLAND_DISPLAY")?);
    if display.is_absolute() {
        return Ok(display);
    }
    Ok(PathBuf::from(var("XDG_RUNTIME_DIR")?).join(display))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a window's events say, then its `done`.
    fn say(s: &mut State, id: u32, app_id: Option<&str>, active: Option<bool>) {
        let w = s.windows.entry(id).or_default();
        w.next_app_id = app_id.map(str::to_owned);
        w.next_active = active;
        s.done(id);
    }

    #[test]
    fn the_activated_window_is_in_front_and_the_latest_of_several() {
        let mut s = State::default();
        say(&mut s, 10, Some("foot"), Some(false));
        assert!(std::mem::take(&mut s.changed), "a new window is a change");
        assert_eq!(s.focused(), None);
        say(&mut s, 10, None, Some(true));
        assert_eq!(s.focused(), Some("foot"));
        // A title or output change (nothing this source reads) is no change.
        s.changed = false;
        say(&mut s, 10, Some("foot"), Some(true));
        assert!(!s.changed);
        // Another seat activates another window: the latest is in front.
        say(&mut s, 11, Some("org.xfce.mousepad"), Some(true));
        assert_eq!(s.focused(), Some("org.xfce.mousepad"));
        say(&mut s, 11, None, Some(false));
        assert_eq!(s.focused(), Some("foot"));
        // A window that changes its app id while in front.
        say(&mut s, 10, Some("footclient"), None);
        assert!(s.changed);
        assert_eq!(s.focused(), Some("footclient"));
        // `done` for a window never announced changes nothing.
        s.changed = false;
        s.done(99);
        assert!(!s.changed);
    }

    #[test]
    fn a_window_not_yet_described_is_not_in_front() {
        let mut s = State::default();
        let w = s.windows.entry(5).or_default();
        w.active = true;
        assert_eq!(s.focused(), None);
    }
}
