//! The X11 source: the focused app is the `_NET_WM_PID` of the window named by the root
//! window's `_NET_ACTIVE_WINDOW` (EWMH, kept by every modern window manager). Event-driven:
//! PropertyNotify on the root window. When the display goes away the focus is cleared and the
//! source reconnects with a bounded back-off.
//!
//! A local display is reached the way a root service can, with no `DISPLAY` or `XAUTHORITY` in
//! its environment: the server listening on `/tmp/.X11-unix/X<n>`, the cookie of its own
//! `-auth` file or of its session's user (`auto::xdisplay`), then whatever the daemon's
//! environment gives (`XAUTHORITY`, `~/.Xauthority`, no cookie).
//!
//! `_NET_WM_PID` is a client's claim about itself (any client may write any pid there), so the
//! pid is acted on only if its process belongs to the display's **session user** (see
//! [`super::admit`]): logind's user of the session on it (`sources = ["auto"]`), else the X
//! server's uid when that is not root, else the owner of its cookie file or the one user whose
//! processes run on it and hold its cookie (`auto::xdisplay::session_user`). A root server with
//! none of these, or one reached over TCP, names nobody: only `sources_any_owner = true` makes
//! the source act then.
//!
//! With `[idle] after_s`, the same connection reads the display's time without input
//! (`sources/idle/x11.rs`), reported as the session's idleness.

use crate::types::Event;

use super::auto::xdisplay::{self, XServer};
use super::idle::x11::XIdle;
use super::{DaemonGone, Owner, Reporter};
use crate::types::SourceName;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{
    Atom, AtomEnum, ChangeWindowAttributesAux, ConnectionExt, EventMask, Window,
};
use x11rb::protocol::Event as XEvent;
use x11rb::rust_connection::{DefaultStream, RustConnection};

const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How long the follower blocks before it looks at its stop flag and its owner again.
const TICK_MS: i32 = 500;
/// How often a source that finds its owner itself looks again (a user logs in on a display
/// manager's server, which keeps running).
const OWNER_RECHECK: Duration = Duration::from_secs(10);
/// The longest a connection's setup may take.
const HANDSHAKE: Duration = Duration::from_secs(3);
/// The most followers of local displays alive at once: one stuck on a server that stopped
/// answering (a blocked reply is not interrupted) still counts, so a user who makes display after
/// display cannot make the daemon pile up threads.
const MAX_FOLLOWERS: usize = 32;

/// The followers of local displays alive now (see [`MAX_FOLLOWERS`]).
static ALIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Why a connection ended.
type XResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Whose processes a display's windows may name, as discovery last found it (shared with the
/// `auto` source, which updates it each round); `Err`: nobody, and why.
pub type SharedOwner = Arc<Mutex<Result<Owner, String>>>;

struct Atoms {
    active: Atom,
    wm_pid: Atom,
}

/// The pid of the active window's client, if any.
fn active_pid(conn: &impl Connection, root: Window, atoms: &Atoms) -> XResult<Option<i32>> {
    let r = conn
        .get_property(false, root, atoms.active, AtomEnum::WINDOW, 0, 1)?
        .reply()?;
    let Some(win) = r.value32().and_then(|mut v| v.next()).filter(|&w| w != 0) else {
        return Ok(None);
    };
    // The window may be gone already (BadWindow): no focus rather than an error.
    let Ok(cookie) = conn.get_property(false, win, atoms.wm_pid, AtomEnum::CARDINAL, 0, 1) else {
        return Ok(None);
    };
    Ok(cookie
        .reply()
        .ok()
        .and_then(|p| p.value32().and_then(|mut v| v.next()))
        .map(|p| p as i32)
        .filter(|&p| p > 0))
}

/// What the follower connects to.
#[derive(Debug, Clone)]
enum Target {
    /// Local display `n`, its socket in `dir`.
    Local { display: u32, dir: PathBuf },
    /// A name x11rb resolves (`$DISPLAY` when `None`): a remote display, a socket path.
    Named(Option<String>),
}

impl Target {
    fn of(display: Option<&str>) -> Target {
        let name = display
            .map(str::to_owned)
            .or_else(|| std::env::var("DISPLAY").ok());
        match name.as_deref().and_then(xdisplay::parse_display) {
            Some(n) => Target::Local {
                display: n,
                dir: xdisplay::X11_DIR.into(),
            },
            None => Target::Named(name),
        }
    }

    fn describe(&self) -> String {
        match self {
            Target::Local { display, .. } => format!(":{display}"),
            Target::Named(Some(n)) => n.clone(),
            Target::Named(None) => "$DISPLAY (unset)".into(),
        }
    }
}

/// Where the owner comes from.
enum Owners {
    /// Found by the source itself at each connection and every [`OWNER_RECHECK`].
    Resolve { any: bool },
    /// Given by discovery (the `auto` source).
    Shared(SharedOwner),
}

/// One connection: the server (for a local display) and how it was authorised.
struct Connected {
    conn: RustConnection,
    screen: usize,
    server: Option<XServer>,
    how: String,
}

/// Connect to a local display: each cookie found for it, then the daemon's own (its
/// `XAUTHORITY`, else `~/.Xauthority`), then none — every attempt's setup bounded.
fn connect_local(n: u32, dir: &std::path::Path, user: Option<u32>) -> XResult<Connected> {
    let socket = xdisplay::socket_of(dir, n);
    let server = XServer::at(&socket, n)?;
    let (mut cookies, notes) = xdisplay::cookies_for(&server, user);
    let mut refused = notes;
    cookies.extend(own_cookies(n));
    cookies.push(xdisplay::Cookie {
        name: Vec::new(),
        data: Vec::new(),
        from: "no cookie".into(),
    });
    for c in cookies {
        match handshake(&socket, c.name.clone(), c.data.clone()) {
            Ok(conn) => {
                return Ok(Connected {
                    conn,
                    screen: 0,
                    how: if c.data.is_empty() {
                        "no cookie".into()
                    } else {
                        format!("the cookie of {}", c.from)
                    },
                    server: Some(server),
                })
            }
            Err(e) if c.data.is_empty() => refused.push(format!("with no cookie: {e}")),
            Err(e) => refused.push(format!("the cookie of {}: {e}", c.from)),
        }
    }
    Err(format!(
        "cannot connect to {}: {}",
        server.describe(),
        refused.join("; ")
    )
    .into())
}

/// The cookies of the daemon's own environment for display `n` (an administrator's
/// `XAUTHORITY`, or the daemon user's `~/.Xauthority`).
fn own_cookies(n: u32) -> Vec<xdisplay::Cookie> {
    let file = std::env::var_os("XAUTHORITY")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".Xauthority")));
    let Some(file) = file else {
        return Vec::new();
    };
    match std::fs::read(&file) {
        Ok(bytes) => xdisplay::cookies_in(&bytes, n, &file.display().to_string()),
        Err(_) => Vec::new(),
    }
}

/// Connect to the X server on `socket` presenting the cookie `name`/`data`, the setup
/// handshake bounded by [`HANDSHAKE`] (a server that never answers must not hold the follower:
/// any user can listen on a socket in /tmp/.X11-unix).
fn handshake(socket: &std::path::Path, name: Vec<u8>, data: Vec<u8>) -> XResult<RustConnection> {
    use std::io::{Read, Write};
    use x11rb::reexports::x11rb_protocol::connect::Connect;
    let mut stream = super::auto::procs::connect(socket)?;
    let end = Instant::now() + HANDSHAKE;
    let left = || {
        end.checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::TimedOut, "no setup reply"))
    };
    stream.set_write_timeout(Some(left()?))?;
    let (mut connect, request) = Connect::with_authorization(name, data);
    stream.write_all(&request)?;
    loop {
        stream.set_read_timeout(Some(left()?))?;
        let n = stream.read(connect.buffer())?;
        if n == 0 {
            return Err("the server closed the connection during the setup".into());
        }
        if connect.advance(n) {
            break;
        }
    }
    let setup = connect.into_setup()?;
    if setup.roots.is_empty() {
        return Err("the server has no screen".into());
    }
    stream.set_read_timeout(None)?;
    stream.set_write_timeout(None)?;
    let (stream, _) = DefaultStream::from_unix_stream(stream)?;
    Ok(RustConnection::for_connected_stream(stream, setup)?)
}

/// The owner a source that resolves it itself finds now.
fn resolve(conn: &Connected, any: bool) -> Result<Owner, String> {
    let found = match &conn.server {
        Some(server) => xdisplay::session_user(server, None)
            .map(|(uid, _)| uid)
            .map_err(|w| format!("{}; {}", w.why, w.todo)),
        None => uxsched_os::peer::peer_uid(conn.conn.stream())
            .map_err(|e| format!("cannot tell who runs the X server ({e}: not a local socket?)")),
    };
    match found {
        Ok(uid) => Ok(Owner { uid, any }),
        Err(_) if any => Ok(Owner { uid: 0, any }),
        Err(e) => Err(e),
    }
}

struct Follow {
    target: Target,
    owners: Owners,
    stop: Arc<AtomicBool>,
    complaints: Mutex<Complaints>,
    /// `[idle] after_s`: the display's idleness is read on the same connection
    /// (`sources/idle/x11.rs`); `None`: off.
    idle_after: Option<Duration>,
}

/// Refusals said at most once per [`COMPLAIN_EVERY`], the rest at debug level and counted: the
/// display's clients choose what its windows name, as often as they like.
#[derive(Default)]
struct Complaints {
    last: Option<Instant>,
    quiet: u32,
}

/// See [`Complaints`].
const COMPLAIN_EVERY: Duration = Duration::from_secs(10);

impl Complaints {
    /// Whether `msg` is said at warning level now.
    fn say(&mut self, msg: &str) -> bool {
        if self.last.is_some_and(|t| t.elapsed() < COMPLAIN_EVERY) {
            self.quiet += 1;
            tracing::debug!("{msg}");
            return false;
        }
        match std::mem::take(&mut self.quiet) {
            0 => tracing::warn!("{msg}"),
            n => tracing::warn!("{msg} ({n} more refusals since the last one said)"),
        }
        self.last = Some(Instant::now());
        true
    }
}

impl Follow {
    fn owner_now(&self, conn: &Connected) -> Result<Owner, String> {
        match &self.owners {
            Owners::Resolve { any } => resolve(conn, *any),
            Owners::Shared(cell) => cell.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }

    fn connect(&self) -> XResult<Connected> {
        match &self.target {
            Target::Local { display, dir } => {
                let user = match &self.owners {
                    Owners::Shared(cell) => cell
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .as_ref()
                        .ok()
                        .filter(|o| !o.any)
                        .map(|o| o.uid),
                    Owners::Resolve { .. } => None,
                };
                connect_local(*display, dir, user)
            }
            Target::Named(name) => {
                let (conn, screen) = x11rb::connect(name.as_deref())?;
                Ok(Connected {
                    conn,
                    screen,
                    server: None,
                    how: "x11rb's own lookup".into(),
                })
            }
        }
    }

    /// Send the pid the display names in front: one that may not be acted on (another user's,
    /// root's, or any while the display names nobody) is said at a bounded rate and sent as
    /// nothing in front.
    fn report(
        &self,
        reporter: &mut Reporter,
        pid: Option<i32>,
        owner: &Result<Owner, String>,
    ) -> Result<(), DaemonGone> {
        let Some(p) = pid else {
            return reporter.seen(None, owner.clone());
        };
        let refused = match owner {
            Ok(o) => super::admit(p, *o).err(),
            Err(e) => Some(format!("pid {p}: {e}")),
        };
        match refused {
            Some(e) => {
                self.complaints
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .say(&format!(
                        "x11 source ({}): not acted on: {e}; a window may name only the \
                         processes of the display's session user",
                        self.target.describe()
                    ));
                reporter.seen(None, Err(e))
            }
            None => reporter.seen(pid, owner.clone()),
        }
    }

    /// Serve one connection until it fails or the source is stopped; sends every change of the
    /// active pid. `connected` is set once the display answered (so the caller resets its
    /// back-off).
    fn serve(&self, reporter: &mut Reporter, connected: &mut bool) -> XResult<()> {
        let c = self.connect()?;
        let conn = &c.conn;
        let root = conn.setup().roots[c.screen].root;
        let atoms = Atoms {
            active: conn
                .intern_atom(false, b"_NET_ACTIVE_WINDOW")?
                .reply()?
                .atom,
            wm_pid: conn.intern_atom(false, b"_NET_WM_PID")?.reply()?.atom,
        };
        let mask = ChangeWindowAttributesAux::new().event_mask(EventMask::PROPERTY_CHANGE);
        conn.change_window_attributes(root, &mask)?.check()?;
        *connected = true;
        let mut owner = self.owner_now(&c);
        reporter.health(owner.as_ref().err().cloned())?;
        let mut owner_at = Instant::now();
        match &owner {
            Ok(o) => tracing::info!(
                display = self.target.describe(),
                owner = o.uid,
                any_owner = o.any,
                via = c.how,
                "x11 source connected"
            ),
            Err(e) => tracing::warn!(
                display = self.target.describe(),
                via = c.how,
                "x11 source connected, but its windows are not acted on: {e}"
            ),
        }
        let mut idle = XIdle::start(conn, root, self.idle_after, &self.target.describe())?;
        let fd = conn.stream().as_raw_fd();
        loop {
            let now = active_pid(conn, root, &atoms)?;
            self.report(reporter, now, &owner)?;
            // Block until the active window changes, the owner changes or the source stops.
            loop {
                if self.stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                if let Some(change) = idle.as_mut().map(|x| x.poll(conn)).transpose()?.flatten() {
                    reporter.idle(change)?;
                }
                let mut changed = false;
                while let Some(ev) = conn.poll_for_event()? {
                    if let XEvent::PropertyNotify(e) = ev {
                        changed |= e.window == root && e.atom == atoms.active;
                    }
                }
                if changed {
                    break;
                }
                let recheck = match self.owners {
                    Owners::Shared(_) => true,
                    Owners::Resolve { .. } => owner_at.elapsed() >= OWNER_RECHECK,
                };
                if recheck {
                    owner_at = Instant::now();
                    let fresh = self.owner_now(&c);
                    if fresh != owner {
                        tracing::info!(
                            display = self.target.describe(),
                            "x11 source: the display's user is now {fresh:?}"
                        );
                        owner = fresh;
                        reporter.health(owner.as_ref().err().cloned())?;
                        // Named again, the pid in front is judged for the new owner.
                        reporter.seen(None, Err(String::new()))?;
                        break;
                    }
                }
                conn.flush()?;
                let mut pfd = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // Until the idle reader's next read, if sooner (rounded up: not a busy loop).
                let tick = idle.as_ref().and_then(XIdle::wait).map_or(TICK_MS, |w| {
                    (w.as_micros().div_ceil(1000) as i32).min(TICK_MS)
                });
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut pfd, 1, tick) };
            }
        }
    }

    /// Connect, follow the active window, reconnect on loss, until stopped or the daemon is
    /// gone.
    fn run(self, mut reporter: Reporter) {
        let mut backoff = Duration::from_millis(100);
        let mut warned = false;
        loop {
            let mut connected = false;
            let err = self.serve(&mut reporter, &mut connected);
            if connected {
                backoff = Duration::from_millis(100);
                warned = false;
            }
            // The display gone, its idleness no longer withdraws anything.
            let lifted = reporter.idle(crate::sources::idle::Change::Active);
            if lifted.is_err() || reporter.seen(None, Err(String::new())).is_err() {
                return;
            }
            let health = err.as_ref().err().map(|e| format!("{e}"));
            match err {
                Err(e) if e.is::<DaemonGone>() => return,
                // Said once at info level, then quietly retried.
                Err(e) if !warned => {
                    warned = true;
                    tracing::info!(
                        display = self.target.describe(),
                        "x11 source: {e}; retrying (up to every {MAX_BACKOFF:?})"
                    );
                }
                Err(e) => tracing::debug!("x11 source: {e}; reconnecting in {backoff:?}"),
                Ok(()) => {}
            }
            if self.stop.load(Ordering::Relaxed) || reporter.health(health).is_err() {
                return;
            }
            // Sleep the back-off in ticks, so that a stop is seen.
            let until = Instant::now() + backoff;
            while Instant::now() < until {
                if self.stop.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(TICK_MS as u64).min(backoff));
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

/// Run the source on a thread: connect, follow the active window, reconnect on loss.
/// `display`: the configured `[x11] display`, else `$DISPLAY`. `any_owner`: act on any
/// process a window names (`sources_any_owner`). `idle_after`: `[idle] after_s`.
pub fn spawn(
    display: Option<String>,
    any_owner: bool,
    idle_after: Option<Duration>,
    events: Sender<Event>,
) -> std::io::Result<()> {
    let follow = Follow {
        target: Target::of(display.as_deref()),
        owners: Owners::Resolve { any: any_owner },
        stop: Arc::new(AtomicBool::new(false)),
        complaints: Mutex::default(),
        idle_after,
    };
    let reporter = Reporter::new(SourceName::X11, events);
    super::spawn_raised("uxsched-x11".into(), move || follow.run(reporter))?;
    Ok(())
}

/// Follow local display `n` (socket in `dir`) for the `auto` source: `owner` is the session's
/// user as discovery finds it, updated by it; the thread ends once `stop` is set (the session
/// is gone) or the daemon is. `idle_after`: `[idle] after_s`.
pub fn follow(
    display: u32,
    dir: PathBuf,
    owner: SharedOwner,
    idle_after: Option<Duration>,
    stop: Arc<AtomicBool>,
    events: Sender<Event>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let follow = Follow {
        target: Target::Local { display, dir },
        owners: Owners::Shared(owner),
        stop,
        complaints: Mutex::default(),
        idle_after,
    };
    if ALIVE.fetch_add(1, Ordering::SeqCst) >= MAX_FOLLOWERS {
        ALIVE.fetch_sub(1, Ordering::SeqCst);
        return Err(std::io::Error::other(format!(
            "{MAX_FOLLOWERS} displays are followed already (or their followers wait on servers \
             that stopped answering)"
        )));
    }
    struct Alive;
    impl Drop for Alive {
        fn drop(&mut self) {
            ALIVE.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let alive = Alive;
    let reporter = Reporter::new(SourceName::X11, events);
    super::spawn_raised(format!("uxsched-x11-{display}"), move || {
        let _alive = alive;
        follow.run(reporter)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_said_at_a_bounded_rate() {
        let mut c = Complaints::default();
        assert!(c.say("first"));
        for _ in 0..1000 {
            assert!(!c.say("again"));
        }
        assert_eq!(c.quiet, 1000);
        c.last = Some(Instant::now() - COMPLAIN_EVERY);
        assert!(c.say("later"));
        assert_eq!(c.quiet, 0);
    }
}
