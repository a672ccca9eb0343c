//! The X11 idle reader: the MIT-SCREEN-SAVER extension's `QueryInfo`, whose
//! `ms_since_user_input` is the server's own count since the last key, button or motion (XTEST's
//! included), on the connection the X11 source already holds for the display — the same
//! cookie, no second connection.
//!
//! Cost: one request and its reply on a local socket (tens of µs on both ends) when the limit
//! would be reached — once per `after_s` while the user types — and every
//! [`WAKE_POLL`](super::WAKE_POLL) while the display is idle (4 a second), which bounds how long
//! the first input after a withdrawal waits for its boost. The extension's own notify events
//! would come only at the server's screensaver timeout, which is the user's setting, not ours.

use super::{Change, Watch};
use std::time::{Duration, Instant};
use x11rb::connection::Connection;
use x11rb::errors::{ConnectionError, ReplyError};
use x11rb::protocol::screensaver::{self, ConnectionExt as _};
use x11rb::protocol::xproto::Window;

/// The idle reader of one X connection.
pub struct XIdle {
    watch: Watch,
    root: Window,
    display: String,
}

impl XIdle {
    /// Read idleness on `conn` (display `display`, root window `root`) with limit `limit`;
    /// `None` when idle demotion is off or the server cannot tell (said once, with what to do).
    /// Err: the connection itself failed.
    pub fn start(
        conn: &impl Connection,
        root: Window,
        limit: Option<Duration>,
        display: &str,
    ) -> Result<Option<XIdle>, ConnectionError> {
        let Some(limit) = limit else {
            return Ok(None);
        };
        let mut x = XIdle {
            watch: Watch::new(limit, None),
            root,
            display: display.to_owned(),
        };
        if conn
            .extension_information(screensaver::X11_EXTENSION_NAME)?
            .is_none()
        {
            x.off(
                "the server has no MIT-SCREEN-SAVER extension (Xorg and Xvfb have it unless \
                 started with `-extension MIT-SCREEN-SAVER`)"
                    .into(),
            );
            return Ok(None);
        }
        match conn.screensaver_query_version(1, 1)?.reply() {
            Ok(_) => Ok(Some(x)),
            Err(ReplyError::ConnectionError(e)) => Err(e),
            Err(e) => {
                x.off(format!(
                    "the MIT-SCREEN-SAVER extension refused QueryVersion ({e:?})"
                ));
                Ok(None)
            }
        }
    }

    /// Read the time without input if a read is due: the change to report, if any. A server
    /// that refuses the read turns the reader off (and lifts its withdrawal).
    pub fn poll(&mut self, conn: &impl Connection) -> Result<Option<Change>, ConnectionError> {
        let now = Instant::now();
        if !self.watch.due(now) {
            return Ok(None);
        }
        match conn.screensaver_query_info(self.root)?.reply() {
            Ok(r) => {
                let idle_for = Duration::from_millis(r.ms_since_user_input.into());
                Ok(self.watch.saw(idle_for, Instant::now()))
            }
            Err(ReplyError::ConnectionError(e)) => Err(e),
            Err(e) => Ok(self.off(format!("the server refused QueryInfo ({e:?})"))),
        }
    }

    /// How long the follower may block before the next read (`None`: no read to make).
    pub fn wait(&self) -> Option<Duration> {
        self.watch.wait(Instant::now())
    }

    fn off(&mut self, why: String) -> Option<Change> {
        tracing::warn!(
            display = self.display,
            "idle demotion is off for this display: {why}; the focused app keeps its boost \
             while the user is away — enable the extension, or set `[idle] after_s = 0` to \
             silence this"
        );
        self.watch.failed(why)
    }

    /// Whether the display counts as idle now.
    pub fn idle(&self) -> bool {
        self.watch.idle()
    }
}
