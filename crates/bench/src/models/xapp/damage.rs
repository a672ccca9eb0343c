//! Seeing the program's pixels change: a DAMAGE object (X DAMAGE extension 1.1) on the
//! program's top-level window. The server reports damage drawn into the window and its
//! inferiors (xterm draws in a VT100 child window, xedit in Xaw text widgets), clipped to the
//! window. With report level `NonEmpty` the server sends one `DamageNotify` when the damage
//! region goes from empty to non-empty; [`DamageWatch::reset`] empties it before each keystroke,
//! so the first notification after the keystroke is the moment its pixels reached the screen.

use anyhow::{Context, Result};
use std::os::fd::AsRawFd;
use std::time::Instant;
use x11rb::connection::Connection;
use x11rb::protocol::damage::{self, ConnectionExt as _, ReportLevel};
use x11rb::protocol::xfixes::ConnectionExt as _;
use x11rb::protocol::xproto::{ConnectionExt as _, Window};
use x11rb::protocol::Event;
use x11rb::rust_connection::RustConnection;

pub struct DamageWatch {
    damage: damage::Damage,
}

impl DamageWatch {
    /// Negotiate DAMAGE (and XFIXES, whose regions it uses) and watch `window`.
    pub fn new(conn: &RustConnection, window: Window) -> Result<DamageWatch> {
        conn.xfixes_query_version(5, 0)?
            .reply()
            .context("the X server lacks the XFIXES extension")?;
        conn.damage_query_version(1, 1)?
            .reply()
            .context("the X server lacks the DAMAGE extension")?;
        let damage = conn.generate_id()?;
        conn.damage_create(damage, window, ReportLevel::NON_EMPTY)?
            .check()
            .with_context(|| format!("DamageCreate on window {window:#x}"))?;
        Ok(DamageWatch { damage })
    }

    /// Empty the damage region and drop every notification already sent. The round trip
    /// guarantees that a notification generated before the subtract has arrived (X replies and
    /// events are ordered), so none can be mistaken for the next keystroke's.
    pub fn reset(&self, conn: &RustConnection) -> Result<()> {
        conn.damage_subtract(self.damage, x11rb::NONE, x11rb::NONE)?;
        conn.get_input_focus()?.reply()?;
        while conn.poll_for_event()?.is_some() {}
        Ok(())
    }

    /// Wait until our damage is reported or `deadline` passes; the instant it was read.
    pub fn wait(&self, conn: &RustConnection, deadline: Instant) -> Result<Option<Instant>> {
        loop {
            while let Some(event) = conn.poll_for_event()? {
                if let Event::DamageNotify(ev) = event {
                    if ev.damage == self.damage {
                        return Ok(Some(Instant::now()));
                    }
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let mut pfd = libc::pollfd {
                fd: conn.stream().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; a timeout or EINTR just loops.
            unsafe { libc::poll(&mut pfd, 1, left.as_millis().max(1) as i32) };
        }
    }
}
