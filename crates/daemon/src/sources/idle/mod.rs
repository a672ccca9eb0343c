//! Idle readers (issue 32): how long the user of a followed session has given no input, read
//! from the session's own server — the X screensaver extension on each followed X display
//! (`x11.rs`), logind's `IdleHint` for the Wayland sessions it knows (`logind.rs`) — and the
//! one decision they share ([`Watch`]): idle once the time without input passes
//! `[idle] after_s`, active again at the first input seen.
//!
//! A reader runs inside the thread that follows its session's focus and reports through that
//! follower's [`Reporter`](super::Reporter) as [`Event::Idle`](crate::types::Event::Idle) under
//! the follower's source name; the loop withdraws the focus while its source is idle
//! (`daemon/idle.rs`). A reader that cannot read fails soft: said once with what to do, idle
//! demotion off for that session, and a withdrawal it made is lifted.

pub mod logind;
pub mod wayland;
pub mod x11;

use std::time::{Duration, Instant};

/// How often a session already idle is read: the bound on "first input → boost back", less
/// the pass that applies it.
pub const WAKE_POLL: Duration = Duration::from_millis(250);

/// What a reader tells the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// No input since `since`, longer than the limit.
    Idle { since: Instant },
    /// Input again (or the reader stopped reading).
    Active,
}

impl Change {
    /// As [`Event::Idle`](crate::types::Event::Idle) carries it.
    pub fn since(self) -> Option<Instant> {
        match self {
            Change::Idle { since } => Some(since),
            Change::Active => None,
        }
    }
}

/// One session's idle state, decided from the reader's readings.
#[derive(Debug)]
pub struct Watch {
    limit: Duration,
    /// The longest gap between two reads while active: readers whose "time without input" can
    /// start in the past between two reads (logind's hint) are read this often; `None`: the
    /// reading grows with time alone (X's counter), read again when it would reach the limit.
    max_gap: Option<Duration>,
    idle_since: Option<Instant>,
    next: Instant,
    /// Why the reader was turned off, once it failed.
    off: Option<String>,
}

impl Watch {
    pub fn new(limit: Duration, max_gap: Option<Duration>) -> Watch {
        Watch {
            limit,
            max_gap,
            idle_since: None,
            next: Instant::now(),
            off: None,
        }
    }

    /// Whether a read is due at `now` (never once the reader is off).
    pub fn due(&self, now: Instant) -> bool {
        self.off.is_none() && now >= self.next
    }

    /// How long until the next read (`None` once off).
    pub fn wait(&self, now: Instant) -> Option<Duration> {
        self.off
            .is_none()
            .then(|| self.next.saturating_duration_since(now))
    }

    /// Whether the session counts as idle now.
    pub fn idle(&self) -> bool {
        self.idle_since.is_some()
    }

    /// A reading at `now`: no input for `idle_for`. The change to tell the daemon, if any.
    pub fn saw(&mut self, idle_for: Duration, now: Instant) -> Option<Change> {
        let was = self.idle_since;
        if idle_for >= self.limit {
            self.next = now + WAKE_POLL;
            self.idle_since = Some(was.unwrap_or_else(|| now.checked_sub(idle_for).unwrap_or(now)));
        } else {
            // Read again when the limit would be reached without input (just past it: a reading
            // a hair short would cost one more read).
            let left = self.limit - idle_for + Duration::from_millis(1);
            self.next = now + self.max_gap.map_or(left, |g| left.min(g));
            self.idle_since = None;
        }
        match (was, self.idle_since) {
            (None, Some(since)) => Some(Change::Idle { since }),
            (Some(_), None) => Some(Change::Active),
            _ => None,
        }
    }

    /// The reader failed: off from now on (`why` is kept for the log line the caller writes
    /// once); a withdrawal it made is lifted, so that a failing reader never keeps a boost away.
    pub fn failed(&mut self, why: String) -> Option<Change> {
        self.off = Some(why);
        self.idle_since.take().map(|_| Change::Active)
    }

    /// Why the reader is off, if it is.
    pub fn off(&self) -> Option<&str> {
        self.off.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn idle_past_the_limit_and_active_at_the_first_input() {
        let mut w = Watch::new(10 * S, None);
        let t0 = Instant::now();
        assert!(w.due(t0));
        assert_eq!(w.saw(3 * S, t0), None);
        // Read again just after the limit would be reached, not before.
        assert_eq!(w.wait(t0), Some(7 * S + Duration::from_millis(1)));
        assert!(!w.due(t0 + 6 * S));
        let t1 = t0 + 7 * S + Duration::from_millis(1);
        assert_eq!(w.saw(10 * S, t1), Some(Change::Idle { since: t1 - 10 * S }));
        assert!(w.idle());
        // Still idle: said once; read every WAKE_POLL.
        assert_eq!(w.wait(t1), Some(WAKE_POLL));
        assert_eq!(w.saw(10 * S + WAKE_POLL, t1 + WAKE_POLL), None);
        // A key pressed: active at once.
        assert_eq!(
            w.saw(Duration::from_millis(40), t1 + 2 * WAKE_POLL),
            Some(Change::Active)
        );
        assert!(!w.idle());
        assert_eq!(w.saw(Duration::ZERO, t1 + 3 * WAKE_POLL), None);
    }

    #[test]
    fn just_under_the_limit_is_active() {
        let t0 = Instant::now();
        let mut w = Watch::new(10 * S, None);
        assert_eq!(w.saw(10 * S - Duration::from_millis(1), t0), None);
        assert!(!w.idle());
        assert_eq!(w.wait(t0), Some(Duration::from_millis(2)));
    }

    #[test]
    fn a_hint_that_can_start_in_the_past_is_read_at_least_every_gap() {
        let t0 = Instant::now();
        let mut w = Watch::new(300 * S, Some(S));
        assert_eq!(w.saw(Duration::ZERO, t0), None);
        assert_eq!(w.wait(t0), Some(S));
        // The desktop set its hint with a start 299.5 s ago: the limit is 0.5 s off.
        assert_eq!(w.saw(299 * S + S / 2, t0 + S), None);
        assert_eq!(w.wait(t0 + S), Some(S / 2 + Duration::from_millis(1)));
    }

    #[test]
    fn a_failed_reader_is_off_and_lifts_its_withdrawal() {
        let t0 = Instant::now();
        let mut w = Watch::new(S, None);
        assert!(matches!(w.saw(2 * S, t0), Some(Change::Idle { .. })));
        assert_eq!(w.failed("BadRequest".into()), Some(Change::Active));
        assert!(!w.idle() && !w.due(t0 + 10 * S));
        assert_eq!(w.wait(t0), None);
        assert_eq!(w.off(), Some("BadRequest"));
        // Failing while active changes nothing the daemon holds.
        let mut w = Watch::new(S, None);
        assert_eq!(w.failed("gone".into()), None);
    }
}
