//! The X11 source: the focused app is the `_NET_WM_PID` of the window named by the root
//! window's `_NET_ACTIVE_WINDOW` (EWMH, kept by every modern window manager). Event-driven:
//! PropertyNotify on the root window. When the display goes away the focus is cleared and the
//! source reconnects with a bounded back-off.
//!
//! `_NET_WM_PID` is a client's claim about itself (any client may write any pid there), so the
//! pid is acted on only if its process belongs to the user who runs the X server (the uid at the
//! other end of the connection, SO_PEERCRED): see [`super::admit`]. A rootful X server, or one
//! reached over TCP, has no such user; then only `sources_any_owner = true` makes the source act.

use crate::types::Event;

use super::{DaemonGone, Owner, Reporter};
use crate::types::SourceName;
use std::sync::mpsc::Sender;
use std::time::Duration;
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{
    Atom, AtomEnum, ChangeWindowAttributesAux, ConnectionExt, EventMask, Window,
};
use x11rb::protocol::Event as XEvent;

const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Why a connection ended.
type XResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

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

/// Whose processes this display's windows may name: the X server's uid.
fn display_owner(conn: &x11rb::rust_connection::RustConnection, any: bool) -> Owner {
    match uxsched_os::peer::peer_uid(conn.stream()) {
        Ok(uid) => {
            if uid == 0 && !any {
                tracing::warn!(
                    "x11 source: the X server runs as root, so it names no user whose windows \
                     may be boosted; run a rootless X server or set `sources_any_owner = true`"
                );
            }
            Owner { uid, any }
        }
        Err(e) => {
            if !any {
                tracing::warn!(
                    "x11 source: cannot tell who runs the X server ({e}: not a local socket?); \
                     its windows are not acted on unless `sources_any_owner = true`"
                );
            }
            Owner { uid: 0, any }
        }
    }
}

/// Serve one connection until it fails; sends every change of the active pid. `connected` is
/// set once the display answered (so the caller resets its back-off).
fn serve(
    display: Option<&str>,
    any_owner: bool,
    reporter: &mut Reporter,
    connected: &mut bool,
) -> XResult<()> {
    let (conn, screen) = x11rb::connect(display)?;
    let owner = display_owner(&conn, any_owner);
    let root = conn.setup().roots[screen].root;
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
    let shown = display.unwrap_or("$DISPLAY");
    tracing::info!(display = shown, owner = owner.uid, "x11 source connected");
    loop {
        let now = active_pid(&conn, root, &atoms)?;
        reporter.seen(now, Ok(owner))?;
        // Block until the active window changes.
        loop {
            if let XEvent::PropertyNotify(e) = conn.wait_for_event()? {
                if e.window == root && e.atom == atoms.active {
                    break;
                }
            }
        }
    }
}

/// Run the source on a thread: connect, follow the active window, reconnect on loss.
/// `any_owner`: act on any process a window names (`sources_any_owner`).
pub fn spawn(
    display: Option<String>,
    any_owner: bool,
    events: Sender<Event>,
) -> std::io::Result<()> {
    let mut reporter = Reporter::new(SourceName::X11, events);
    std::thread::Builder::new()
        .name("uxsched-x11".into())
        .spawn(move || {
            let mut backoff = Duration::from_millis(100);
            let mut warned = false;
            loop {
                let mut connected = false;
                let err = serve(display.as_deref(), any_owner, &mut reporter, &mut connected);
                if connected {
                    backoff = Duration::from_millis(100);
                    warned = false;
                }
                if reporter.seen(None, Err(String::new())).is_err() {
                    return;
                }
                match err {
                    Err(e) if e.is::<DaemonGone>() => return,
                    // Said once at info level, then quietly retried.
                    Err(e) if !warned => {
                        warned = true;
                        tracing::info!("x11 source: {e}; retrying (up to every {MAX_BACKOFF:?})");
                    }
                    Err(e) => tracing::debug!("x11 source: {e}; reconnecting in {backoff:?}"),
                    Ok(()) => {}
                }
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        })?;
    Ok(())
}
