//! `[rtkit]`: whether the daemon serves rtkit's D-Bus interface (`rtapi/rtkit.rs`).

use serde::{Deserialize, Serialize};

/// `[rtkit]` in the config.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Rtkit {
    /// Own `org.freedesktop.RealtimeKit1` (off by default: rtkit-daemon may be the owner; stop
    /// it first — `systemctl disable --now rtkit-daemon`).
    pub enable: bool,
    /// The bus to serve on, as a D-Bus address (`unix:path=…`); empty: the system bus.
    pub address: String,
    /// Let `…WithPID` name another process of the caller's own uid, as rtkit does; off: only
    /// the caller's own process (the socket API's rule).
    pub same_user_processes: bool,
}
