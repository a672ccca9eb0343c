//! The X11 source: the focused app is the `_NET_WM_PID` of the window named by the root
//! window's `_NET_ACTIVE_WINDOW` (EWMH, kept by every modern window manager). Event-driven:
//! PropertyNotify on the root window. When the display goes away the focus is cleared and the
//! source reconnects with a bounded back-off.
//!
//! `_NET_WM_PID` is a client's claim about itself; it only selects which process the daemon
//! treats as in front (the same process could be focused by its owner over the socket anyway).

use super::Event;
use crate::config::SourceName;
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

/// Serve one connection until it fails; sends every change of the active pid. `connected` is
/// set once the display answered (so the caller resets its back-off).
fn serve(
    display: Option<&str>,
    last: &mut Option<i32>,
    connected: &mut bool,
    events: &Sender<Event>,
) -> XResult<()> {
    let (conn, screen) = x11rb::connect(display)?;
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
    tracing::info!(display = shown, "x11 source connected");
    loop {
        let now = active_pid(&conn, root, &atoms)?;
        if now != *last {
            *last = now;
            events.send(Event::Focus {
                source: SourceName::X11,
                pid: now,
            })?;
        }
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
pub fn spawn(display: Option<String>, events: Sender<Event>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("uxsched-x11".into())
        .spawn(move || {
            let mut last = None;
            let mut backoff = Duration::from_millis(100);
            let mut warned = false;
            loop {
                let mut connected = false;
                let err = serve(display.as_deref(), &mut last, &mut connected, &events);
                if connected {
                    backoff = Duration::from_millis(100);
                    warned = false;
                }
                if last.is_some() {
                    last = None;
                    let ev = Event::Focus {
                        source: SourceName::X11,
                        pid: None,
                    };
                    if events.send(ev).is_err() {
                        return;
                    }
                }
                match err {
                    Err(e) if e.is::<std::sync::mpsc::SendError<Event>>() => return,
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
