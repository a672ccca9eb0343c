//! Sources of "what is in front of the user". Each only sends events into the daemon's one
//! channel; the daemon loop owns the state. Several can run at once; the config's `sources`
//! list gives their precedence.

pub mod android;
pub mod cpufreq;
pub mod explicit;
pub mod mutter;
pub mod tracker;
pub mod x11;

use crate::api::{Request, Response};
use crate::config::SourceName;
use std::sync::mpsc::Sender;

/// Everything the daemon loop reacts to.
pub enum Event {
    /// A control-socket request from a client with uid `uid` (already authorised for its kind).
    Client {
        request: Request,
        uid: u32,
        reply: Sender<Response>,
    },
    /// A source says this process (or nothing) is in front of the user.
    Focus {
        source: SourceName,
        pid: Option<i32>,
    },
    /// The tracker's critical set changed.
    Critical(Vec<tracker::Critical>),
    /// SIGTERM/SIGINT: restore everything and exit.
    Shutdown,
}
