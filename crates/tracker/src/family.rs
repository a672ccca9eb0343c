//! The foreground app's process family (docs/tracker.md, "Pipelines"): its descendants that run
//! as the same user — a browser's zygotes, renderers, GPU and utility processes — which count as
//! "the app" for the pipeline rule (episode.rs) and are remembered by role, not by pid, in the
//! learning store (seed 003 §6's context: what identifies a thread across launches).
//!
//! The kernel keeps its own copy (the `family` map, inherited on fork); this one follows the
//! same events: the focus-time scan, forks, exits, and renames into an input or display name
//! (the harness's `uxs-display` is the app's child, but a display is never the app).

use std::collections::{BTreeMap, BTreeSet};

/// Reads a process's role ([`crate::procfs::role`] on the live system; a table in tests).
pub type RoleFn = fn(u32) -> Option<String>;

/// Processes of a family followed, as the kernel's map (`bpf/tracker.bpf.c`, `family`).
pub const MAX_PROCESSES: usize = 1024;

/// How long a role read from /proc is reused. A zygote's child rewrites its command line just
/// after the fork (no exec to tell us), so a role is not kept for good; re-reading it at every
/// episode was three /proc reads on the path from input to boost (the overhead run's p50
/// "input → episode known" rose from 0.27 to 0.40–0.50 ms).
pub const ROLE_TTL_NS: u64 = 1_000_000_000;

pub struct Family {
    /// The processes besides the foreground one.
    others: BTreeSet<u32>,
    /// Roles and when they were read ([`ROLE_TTL_NS`]).
    roles: BTreeMap<u32, (u64, Option<String>)>,
    read_role: RoleFn,
    /// The time of the event being classified (CLOCK_MONOTONIC ns).
    now: u64,
}

impl Family {
    pub fn new(read_role: RoleFn) -> Self {
        Family {
            others: BTreeSet::new(),
            roles: BTreeMap::new(),
            read_role,
            now: 0,
        }
    }

    /// A new foreground app: its other processes (`procs`, from the focus-time scan).
    pub fn reset(&mut self, procs: &[u32]) {
        self.others.clear();
        self.roles.clear();
        for &p in procs {
            self.add(p);
        }
    }

    /// Whether `tgid` is one of the family's processes besides the foreground one.
    pub fn is_other(&self, tgid: u32) -> bool {
        self.others.contains(&tgid)
    }

    pub fn add(&mut self, tgid: u32) {
        if self.others.len() < MAX_PROCESSES {
            self.others.insert(tgid);
        }
    }

    pub fn remove(&mut self, tgid: u32) {
        self.others.remove(&tgid);
        self.roles.remove(&tgid);
    }

    /// Forget the role of `tgid` (it exec'd).
    pub fn forget_role(&mut self, tgid: u32) {
        self.roles.remove(&tgid);
    }

    /// The time of the event being classified.
    pub fn at(&mut self, now: u64) {
        self.now = now;
    }

    /// The role of family process `tgid`; `None` when it is not one or is gone.
    pub fn role(&mut self, tgid: u32) -> Option<String> {
        if !self.is_other(tgid) {
            return None;
        }
        let now = self.now;
        let fresh = (self.roles.get(&tgid))
            .is_some_and(|(t, r)| r.is_some() && now.saturating_sub(*t) <= ROLE_TTL_NS);
        if !fresh {
            self.roles.insert(tgid, (now, (self.read_role)(tgid)));
        }
        self.roles.get(&tgid).and_then(|(_, r)| r.clone())
    }

    pub fn len(&self) -> usize {
        self.others.len()
    }

    pub fn is_empty(&self) -> bool {
        self.others.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles(tgid: u32) -> Option<String> {
        (tgid == 20).then(|| "chromium --type=renderer".to_owned())
    }

    #[test]
    fn members_and_roles() {
        let mut f = Family::new(roles);
        f.reset(&[20, 30]);
        assert!(f.is_other(20) && f.is_other(30) && !f.is_other(40));
        assert_eq!(f.role(20).as_deref(), Some("chromium --type=renderer"));
        assert_eq!(f.role(30), None, "no role read");
        f.at(5);
        assert_eq!(
            f.role(20).as_deref(),
            Some("chromium --type=renderer"),
            "kept"
        );
        assert_eq!(f.role(40), None, "not of the family");
        f.remove(20);
        assert!(!f.is_other(20) && f.role(20).is_none());
        for p in 0..(MAX_PROCESSES as u32 + 5) {
            f.add(1000 + p);
        }
        assert_eq!(f.len(), MAX_PROCESSES, "bounded like the kernel's map");
    }
}
