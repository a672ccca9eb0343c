//! Reaching the program as a user would: find its top-level window by the pid of the client
//! that created it (X-Resource `QueryClientIds`, which works for programs that do not set
//! `_NET_WM_PID`, such as Xaw's xedit), ask the window manager to activate it (EWMH
//! `_NET_ACTIVE_WINDOW`, so the daemon's X11 source sees the same focus change), and type
//! through XTEST: the server treats the events as coming from its keyboard.

use anyhow::{bail, Context, Result};
use std::time::{Duration, Instant};
use x11rb::connection::Connection;
use x11rb::protocol::res::{self, ConnectionExt as _};
use x11rb::protocol::xproto::{
    Atom, AtomEnum, ClientMessageEvent, ConnectionExt as _, EventMask, MapState, Window,
    KEY_PRESS_EVENT, KEY_RELEASE_EVENT,
};
use x11rb::protocol::xtest::ConnectionExt as _;
use x11rb::rust_connection::RustConnection;

/// The windows the window manager manages (`_NET_CLIENT_LIST`).
fn client_list(conn: &RustConnection, root: Window, atom: Atom) -> Result<Vec<Window>> {
    let prop = conn
        .get_property(false, root, atom, AtomEnum::WINDOW, 0, 1024)?
        .reply()?;
    Ok(prop.value32().map(|v| v.collect()).unwrap_or_default())
}

/// The pid of the client that created `window`, from the server's own records.
pub(super) fn owner_pid(conn: &RustConnection, window: Window) -> Result<Option<u32>> {
    let spec = res::ClientIdSpec {
        client: window,
        mask: res::ClientIdMask::LOCAL_CLIENT_PID,
    };
    let reply = conn.res_query_client_ids(&[spec])?.reply()?;
    Ok(reply
        .ids
        .iter()
        .find(|id| id.spec.mask.contains(res::ClientIdMask::LOCAL_CLIENT_PID))
        .and_then(|id| id.value.first().copied()))
}

fn atom(conn: &RustConnection, name: &[u8]) -> Result<Atom> {
    Ok(conn.intern_atom(false, name)?.reply()?.atom)
}

/// Wait until the window manager manages a top-level window of process `pid`.
pub fn find_window(
    conn: &RustConnection,
    root: Window,
    pid: i32,
    timeout: Duration,
) -> Result<Window> {
    conn.res_query_version(1, 2)?
        .reply()
        .context("the X server lacks the X-Resource extension")?;
    let list = atom(conn, b"_NET_CLIENT_LIST")?;
    let end = Instant::now() + timeout;
    loop {
        for w in client_list(conn, root, list)? {
            // A stale entry (a window destroyed a moment ago) is no window of the program's,
            // even if the X server gave its id range to the program since.
            let viewable = conn
                .get_window_attributes(w)?
                .reply()
                .is_ok_and(|a| a.map_state == MapState::VIEWABLE);
            if viewable && owner_pid(conn, w)? == Some(pid as u32) {
                return Ok(w);
            }
        }
        if Instant::now() > end {
            bail!(
                "no window of pid {pid} was managed within {} s (did the program start? its log is app.log in the run's directory)",
                timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Ask the window manager to activate `window` and wait until it says it did.
pub fn activate(
    conn: &RustConnection,
    root: Window,
    window: Window,
    timeout: Duration,
) -> Result<()> {
    let active = atom(conn, b"_NET_ACTIVE_WINDOW")?;
    // Source indication 2 (a pager: the user's explicit choice), time CurrentTime (0).
    let ev = ClientMessageEvent::new(32, window, active, [2, 0, 0, 0, 0]);
    conn.send_event(
        false,
        root,
        EventMask::SUBSTRUCTURE_REDIRECT | EventMask::SUBSTRUCTURE_NOTIFY,
        ev,
    )?;
    let end = Instant::now() + timeout;
    loop {
        let prop = conn
            .get_property(false, root, active, AtomEnum::WINDOW, 0, 1)?
            .reply()?;
        if prop.value32().and_then(|mut v| v.next()) == Some(window) {
            return Ok(());
        }
        if Instant::now() > end {
            bail!(
                "the window manager did not activate window {window:#x} within {} s",
                timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The server's keyboard map (XTEST checked first, since every user of it types through it):
/// each keycode's keysyms, `per` a keycode.
pub struct KeyMap {
    min: u8,
    per: usize,
    keysyms: Vec<u32>,
}

impl KeyMap {
    pub fn read(conn: &RustConnection) -> Result<KeyMap> {
        conn.xtest_get_version(2, 2)?
            .reply()
            .context("the X server lacks the XTEST extension")?;
        let setup = conn.setup();
        let (min, max) = (setup.min_keycode, setup.max_keycode);
        let map = conn.get_keyboard_mapping(min, max - min + 1)?.reply()?;
        Ok(KeyMap {
            min,
            per: map.keysyms_per_keycode.max(1) as usize,
            keysyms: map.keysyms,
        })
    }

    /// The keycode whose keysym in `column` (0 unshifted, 1 shifted: the core protocol's
    /// columns) is `sym`.
    pub fn code(&self, sym: u32, column: usize) -> Option<u8> {
        (self.keysyms.chunks(self.per))
            .position(|syms| syms.get(column) == Some(&sym))
            .map(|i| self.min + i as u8)
    }
}

/// Keycodes of the keys the probe types, from the server's keyboard mapping.
pub struct Keyboard {
    root: Window,
    codes: Vec<u8>,
}

impl Keyboard {
    /// Map each keysym (Latin-1 keysyms equal their character) to the keycode that produces it
    /// unshifted.
    pub fn new(conn: &RustConnection, root: Window, keysyms: &[u32]) -> Result<Keyboard> {
        let map = KeyMap::read(conn)?;
        let codes = keysyms
            .iter()
            .map(|&sym| {
                map.code(sym, 0)
                    .with_context(|| format!("no keycode types keysym {sym:#x} on this server"))
            })
            .collect::<Result<_>>()?;
        Ok(Keyboard { root, codes })
    }

    pub fn len(&self) -> usize {
        self.codes.len()
    }

    /// Press and release key `i` (both in one flush: one keystroke).
    pub fn type_key(&self, conn: &RustConnection, i: usize) -> Result<()> {
        let code = self.codes[i % self.codes.len()];
        for kind in [KEY_PRESS_EVENT, KEY_RELEASE_EVENT] {
            conn.xtest_fake_input(kind, code, 0, self.root, 0, 0, 0)?;
        }
        conn.flush()?;
        Ok(())
    }
}
