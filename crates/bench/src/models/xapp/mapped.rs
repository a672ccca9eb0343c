//! Seeing a new program's window appear, through the X server: `SubstructureNotify` on the
//! root window reports every `MapNotify` of a top-level window. Under a reparenting window
//! manager (openbox) the window mapped on the root is the manager's frame, mapped once the
//! program's window is inside it and about to be shown; an override-redirect window is mapped
//! on the root itself. Either way the mapped window or one of its children was created by the
//! program, whose pid the X-Resource extension gives from the server's own records (no need
//! for `_NET_WM_PID`, which a program may set late or never).

use super::input::owner_pid;
use anyhow::{Context, Result};
use std::os::fd::AsRawFd;
use std::time::Instant;
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{ChangeWindowAttributesAux, ConnectionExt as _, EventMask, Window};
use x11rb::protocol::Event;
use x11rb::rust_connection::RustConnection;

/// A top-level window that appeared, the instant its `MapNotify` was read, and the pid of the
/// client that created it.
#[derive(Debug, Clone, Copy)]
pub struct Mapped {
    pub at: Instant,
    /// The window mapped on the root (openbox's frame, or the program's own window).
    pub window: Window,
    pub pid: u32,
}

/// Watches the root's children being mapped and destroyed.
pub struct RootWatch {
    root: Window,
}

impl RootWatch {
    pub fn new(conn: &RustConnection, root: Window) -> Result<RootWatch> {
        let aux = ChangeWindowAttributesAux::new().event_mask(EventMask::SUBSTRUCTURE_NOTIFY);
        conn.change_window_attributes(root, &aux)?
            .check()
            .context("selecting SubstructureNotify on the root window")?;
        Ok(RootWatch { root })
    }

    /// Wait until a top-level window of a process that `wanted` accepts is mapped, or
    /// `deadline` passes. Events before the call are the caller's to have drained.
    pub fn wait_mapped(
        &self,
        conn: &RustConnection,
        wanted: impl Fn(u32) -> bool,
        deadline: Instant,
    ) -> Result<Option<Mapped>> {
        loop {
            while let Some(event) = conn.poll_for_event()? {
                let Event::MapNotify(ev) = event else {
                    continue;
                };
                // The instant it was read, before the round trips that identify it.
                let at = Instant::now();
                if ev.event != self.root {
                    continue;
                }
                if let Some(pid) = self.creator(conn, ev.window, &wanted)? {
                    return Ok(Some(Mapped {
                        at,
                        window: ev.window,
                        pid,
                    }));
                }
            }
            if !wait_readable(conn, deadline) {
                return Ok(None);
            }
        }
    }

    /// Wait until `window` (a root child) is destroyed, or `deadline` passes.
    pub fn wait_destroyed(
        &self,
        conn: &RustConnection,
        window: Window,
        deadline: Instant,
    ) -> Result<bool> {
        // A window destroyed before we looked is gone from the tree already.
        let children = conn.query_tree(self.root)?.reply()?.children;
        if !children.contains(&window) {
            return Ok(true);
        }
        loop {
            while let Some(event) = conn.poll_for_event()? {
                if let Event::DestroyNotify(ev) = event {
                    if ev.window == window {
                        return Ok(true);
                    }
                }
            }
            if !wait_readable(conn, deadline) {
                return Ok(false);
            }
        }
    }

    /// The pid `wanted` accepts among the creators of `window` and of its children.
    fn creator(
        &self,
        conn: &RustConnection,
        window: Window,
        wanted: &impl Fn(u32) -> bool,
    ) -> Result<Option<u32>> {
        // Gone again already (a short-lived window): not the program's lasting window.
        let Ok(tree) = conn.query_tree(window)?.reply() else {
            return Ok(None);
        };
        for w in std::iter::once(window).chain(tree.children) {
            // An error is a window destroyed meanwhile: not the one we wait for.
            if let Ok(Some(pid)) = owner_pid(conn, w) {
                if wanted(pid) {
                    return Ok(Some(pid));
                }
            }
        }
        Ok(None)
    }
}

/// Block until the connection has data or `deadline` passes; false once it has passed.
fn wait_readable(conn: &RustConnection, deadline: Instant) -> bool {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return false;
    }
    let mut pfd = libc::pollfd {
        fd: conn.stream().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; a timeout or EINTR just loops in the caller.
    unsafe { libc::poll(&mut pfd, 1, left.as_millis().max(1) as i32) };
    true
}
