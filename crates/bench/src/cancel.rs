//! Ctrl-C / SIGTERM during a bench: the handler only raises a flag; the runner polls it, stops,
//! and its guards restore every setting and kill the loads on the way out.

use std::sync::atomic::{AtomicBool, Ordering};

static CANCELLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    CANCELLED.store(true, Ordering::SeqCst);
}

/// Route SIGINT and SIGTERM to the flag (idempotent).
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

pub fn cancelled() -> bool {
    CANCELLED.load(Ordering::SeqCst)
}

pub fn check() -> anyhow::Result<()> {
    if cancelled() {
        anyhow::bail!("interrupted; settings restored and background loads killed");
    }
    Ok(())
}
