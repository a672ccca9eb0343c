//! FUSE daemons on the path (seed 003 §5.2; docs/tracker.md, "FUSE daemons").
//!
//! A critical thread's read of a FUSE file queues a request and wakes a daemon thread blocked
//! reading `/dev/fuse` (`request_wait_answer` → `fuse_dev_do_read`); the daemon's answer, a
//! write to `/dev/fuse`, wakes the requester. Both are ordinary wake-ups, so the cycle rule
//! already finds the serving thread — critical → daemon → critical. What differs is how long it
//! should stay: a FUSE daemon's threads take requests from one queue in turn (libfuse's
//! multi-threaded loop), for every process that uses the mount, so a thread that served this
//! interaction serves someone else's next. §5.2 raises the daemon's thread *while it serves*
//! the critical request; the tracker keeps it in the set for the episode it served and drops it
//! when that episode resolves, instead of for as long as the app is in front (which would, one
//! keystroke after another, raise the whole pool and all the mount's other work with it).

use std::collections::BTreeMap;

/// Whether a process serves a FUSE mount ([`crate::procfs::serves_fuse`] on the live system;
/// a table in tests).
pub type ServesFuseFn = fn(u32) -> bool;

/// How long an answer is reused: a process rarely starts or stops holding `/dev/fuse`, but a
/// pid may be reused.
pub const TTL_NS: u64 = 10_000_000_000;

/// Processes remembered (bounded; the oldest answer goes first).
pub const MAX_PROCESSES: usize = 1024;

pub struct FuseServers {
    read: ServesFuseFn,
    /// tgid → (when read, CLOCK_MONOTONIC ns; the answer).
    known: BTreeMap<u32, (u64, bool)>,
}

impl FuseServers {
    pub fn new(read: ServesFuseFn) -> Self {
        FuseServers {
            read,
            known: BTreeMap::new(),
        }
    }

    /// Whether process `tgid` serves a FUSE mount, read at most once per [`TTL_NS`].
    pub fn serves(&mut self, tgid: u32, now: u64) -> bool {
        if let Some(&(at, answer)) = self.known.get(&tgid) {
            if now.saturating_sub(at) <= TTL_NS {
                return answer;
            }
        }
        if self.known.len() >= MAX_PROCESSES {
            let oldest = self.known.iter().min_by_key(|(_, (at, _))| *at);
            if let Some(&pid) = oldest.map(|(pid, _)| pid) {
                self.known.remove(&pid);
            }
        }
        let answer = (self.read)(tgid);
        self.known.insert(tgid, (now, answer));
        answer
    }

    /// Forget every answer (a new foreground app).
    pub fn clear(&mut self) {
        self.known.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn only_50(tgid: u32) -> bool {
        tgid == 50
    }

    #[test]
    fn answers_are_read_once_per_ttl_and_bounded() {
        let mut f = FuseServers::new(only_50);
        assert!(f.serves(50, 0) && !f.serves(51, 0));
        f.known.insert(50, (0, false)); // a stale answer is reused within the TTL…
        assert!(!f.serves(50, TTL_NS));
        assert!(f.serves(50, TTL_NS + 1), "…and read again after it");
        for p in 0..(MAX_PROCESSES as u32 + 5) {
            f.serves(1000 + p, TTL_NS + 2 + u64::from(p));
        }
        assert_eq!(f.known.len(), MAX_PROCESSES);
        assert!(!f.known.contains_key(&50), "the oldest answer went first");
    }
}
