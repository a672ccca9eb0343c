//! The logind idle reader: a session's `IdleHint` and `IdleSinceHintMonotonic`
//! (`org.freedesktop.login1.Session`), for the Wayland sessions the `auto` source follows — X
//! displays are read through their server (`x11.rs`).
//!
//! logind only relays: the hint is set by the desktop (GNOME's session manager, KDE's
//! PowerDevil, swayidle's `idlehint N`) after the desktop's own idle delay, so the boost goes
//! at `[idle] after_s` or at that delay, whichever is later, and never where nothing sets the
//! hint. Input clears it at once.
//!
//! Polled, on a bus connection of its own (a blocking call must not hold up discovery): two
//! property reads — a round trip through the bus daemon to logind, well under a millisecond of
//! CPU — every second while the session is active, every [`WAKE_POLL`](super::WAKE_POLL) once
//! it is idle.

use super::{Change, Watch, WAKE_POLL};
use crate::sources::auto::logind::Logind;
use crate::sources::auto::LogindAt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use zbus::zvariant::{OwnedObjectPath, OwnedValue};

/// The longest gap between two reads of an active session: the hint can come on with a start
/// in the past, so the withdrawal comes at most this late.
const ACTIVE_POLL: Duration = Duration::from_secs(1);

/// The hint as logind holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hint {
    pub idle: bool,
    /// `IdleSinceHintMonotonic`, CLOCK_MONOTONIC µs; 0 when logind does not know.
    pub since_us: u64,
}

impl Hint {
    /// How long the session has been without input, at `now_us` (CLOCK_MONOTONIC µs); a hint
    /// with no start counts from when it was first seen on (`seen_us`).
    pub fn idle_for(&self, now_us: u64, seen_us: u64) -> Duration {
        if !self.idle {
            return Duration::ZERO;
        }
        let since = if self.since_us == 0 {
            seen_us
        } else {
            self.since_us
        };
        Duration::from_micros(now_us.saturating_sub(since))
    }
}

/// logind session `id`'s object path.
fn session_path(logind: &Logind, id: &str) -> Result<OwnedObjectPath, String> {
    logind
        .call("GetSession", &(id,))
        .map_err(|e| format!("logind does not know session {id} ({e})"))
}

/// The session's hint now.
fn read(logind: &Logind, path: &OwnedObjectPath) -> Result<Hint, String> {
    let get = |name: &str| -> Result<OwnedValue, String> {
        logind
            .property(path, name)
            .map_err(|e| format!("cannot read {name} ({e})"))
    };
    let idle = bool::try_from(get("IdleHint")?).map_err(|e| format!("IdleHint: {e}"))?;
    let since_us =
        u64::try_from(get("IdleSinceHintMonotonic")?).map_err(|e| format!("IdleSince…: {e}"))?;
    Ok(Hint { idle, since_us })
}

fn monotonic_us() -> u64 {
    uxsched_os::clock::ns(libc::CLOCK_MONOTONIC) / 1000
}

/// Follow logind session `id`'s idleness with limit `limit` on a thread until `stop` is set or
/// `send` says the daemon is gone (false); a reader that cannot read says so once and stops,
/// lifting a withdrawal it made.
pub fn spawn(
    at: LogindAt,
    id: String,
    limit: Duration,
    stop: Arc<AtomicBool>,
    send: impl FnMut(Change) -> bool + Send + 'static,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("uxsched-idle-logind".into())
        .spawn(move || run(at, id, limit, stop, send))?;
    Ok(())
}

/// [`spawn`]'s thread (also the Wayland reader's, where the compositor has no idle protocol).
pub(super) fn run(
    at: LogindAt,
    id: String,
    limit: Duration,
    stop: Arc<AtomicBool>,
    mut send: impl FnMut(Change) -> bool,
) {
    let mut watch = Watch::new(limit, Some(ACTIVE_POLL));
    if let Err(why) = follow(&at, &id, &mut watch, &stop, &mut send) {
        tracing::warn!(
            session = id,
            "idle demotion is off for this session: {why}; the focused app keeps its boost \
             while the user is away — `loginctl show-session {id} -p IdleHint` should answer"
        );
        if watch.failed(why) == Some(Change::Active) {
            send(Change::Active);
        }
    } else if watch.idle() {
        send(Change::Active);
    }
}

/// Read until stopped (Ok) or the reader fails (Err: why).
fn follow(
    at: &LogindAt,
    id: &str,
    watch: &mut Watch,
    stop: &AtomicBool,
    send: &mut impl FnMut(Change) -> bool,
) -> Result<(), String> {
    let logind = match at {
        LogindAt::System => Logind::system()?,
        LogindAt::Address(a) => Logind::at(a)?,
        LogindAt::Off => return Ok(()),
    };
    let path = session_path(&logind, id)?;
    let mut seen_us = None;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        if watch.due(Instant::now()) {
            let hint = read(&logind, &path)?;
            let now = monotonic_us();
            let seen = *seen_us.get_or_insert(now);
            if !hint.idle {
                seen_us = None;
            }
            if let Some(change) = watch.saw(hint.idle_for(now, seen), Instant::now()) {
                if !send(change) {
                    return Ok(());
                }
            }
        }
        let wait = watch.wait(Instant::now()).unwrap_or(WAKE_POLL);
        std::thread::sleep(wait.min(WAKE_POLL));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_without_input_counts_from_logind_s_start_or_from_first_seen() {
        let off = Hint {
            idle: false,
            since_us: 5,
        };
        assert_eq!(off.idle_for(10_000_000, 0), Duration::ZERO);
        let on = Hint {
            idle: true,
            since_us: 4_000_000,
        };
        assert_eq!(on.idle_for(10_000_000, 9_000_000), Duration::from_secs(6));
        let unknown = Hint {
            idle: true,
            since_us: 0,
        };
        assert_eq!(
            unknown.idle_for(10_000_000, 9_000_000),
            Duration::from_secs(1)
        );
    }
}
