//! The idle tests' daemon: the built-in defaults (`sources = ["auto"]`, nothing of the test's
//! environment; `common/desktop.rs`) with `[idle] after_s` short.

use super::*;

/// The daemon with the built-in defaults and `[idle] after_s` = `limit`.
pub(super) fn idle_daemon(limit: Duration) -> Daemon {
    Daemon::start(&[(
        "UXSCHED_TEST_IDLE_AFTER_S",
        &limit.as_secs_f64().to_string(),
    )])
}

/// Whether the journal holds a change for a thread of `pid` (the daemon boosts it).
pub(super) fn boosted(s: &Status, pid: u32) -> bool {
    s.boosted.iter().any(|b| b.pid == pid as i32)
}
