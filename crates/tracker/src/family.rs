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

pub struct Family {
    /// The processes besides the foreground one.
    others: BTreeSet<u32>,
    /// Roles read during the open episode. A zygote's child rewrites its command line after the
    /// fork, so a role is read when first needed in an episode, not once at the fork, and the
    /// cache is dropped when the next episode starts (at most one /proc read per process and
    /// episode).
    roles: BTreeMap<u32, Option<String>>,
    read_role: RoleFn,
}

impl Family {
    pub fn new(read_role: RoleFn) -> Self {
        Family {
            others: BTreeSet::new(),
            roles: BTreeMap::new(),
            read_role,
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

    /// Forget the roles read so far (a new episode, or an exec that changed one).
    pub fn forget_roles(&mut self) {
        self.roles.clear();
    }

    /// The role of family process `tgid`; `None` when it is not one or is gone.
    pub fn role(&mut self, tgid: u32) -> Option<String> {
        if !self.is_other(tgid) {
            return None;
        }
        let read = self.read_role;
        self.roles.entry(tgid).or_insert_with(|| read(tgid)).clone()
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
        assert_eq!(f.role(40), None, "not of the family");
        f.remove(20);
        assert!(!f.is_other(20) && f.role(20).is_none());
        for p in 0..(MAX_PROCESSES as u32 + 5) {
            f.add(1000 + p);
        }
        assert_eq!(f.len(), MAX_PROCESSES, "bounded like the kernel's map");
    }
}
