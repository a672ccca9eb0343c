//! Who forked whom, as the kernel's fork events said, for the last few seconds: a compositor
//! starts a program with a double fork (sway's and Hyprland's `exec`: fork, `setsid`, fork
//! again, the middle process exits at once), so by the time the launch watcher reads
//! `/proc/<pid>/stat` the program's parent is init or the user's service manager (a
//! subreaper), and the compositor is no longer above it. The fork event names the parent at the
//! fork; a process that forked and never exec'd (that middle one) runs its parent's program,
//! so it is not counted as a generation.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};
use uxsched_os::process_tree;

/// How long a fork is remembered: a launch execs within milliseconds of its fork; a pid
/// recycled within this window after a lost fork event could be given a stale parent.
const WINDOW: Duration = Duration::from_secs(5);
/// The most forks remembered (a fork storm does not grow this without bound).
const MAX: usize = 1 << 16;

#[derive(Debug, Clone, Copy)]
struct Fork {
    parent: i32,
    at: Instant,
    execed: bool,
}

#[derive(Debug, Default)]
pub struct Lineage {
    forks: HashMap<i32, Fork>,
    order: VecDeque<(Instant, i32)>,
}

impl Lineage {
    /// Process `child` was forked by process `parent` at `now`.
    pub fn forked(&mut self, child: i32, parent: i32, now: Instant) {
        while let Some(&(at, pid)) = self.order.front() {
            if now.duration_since(at) < WINDOW && self.order.len() < MAX {
                break;
            }
            self.order.pop_front();
            if self.forks.get(&pid).is_some_and(|f| f.at == at) {
                self.forks.remove(&pid);
            }
        }
        let fork = Fork {
            parent,
            at: now,
            execed: false,
        };
        self.forks.insert(child, fork);
        self.order.push_back((now, child));
    }

    /// Process `pid` exec'd a program.
    pub fn execed(&mut self, pid: i32) {
        if let Some(f) = self.forks.get_mut(&pid) {
            f.execed = true;
        }
    }

    /// The programs above `pid`, nearest first, up to `depth` generations: the parent at the
    /// fork where one was seen, else the parent `/proc` names now; a process that forked and
    /// never exec'd is listed but not counted. Stops below init.
    pub fn ancestors(&self, pid: i32, depth: usize) -> Vec<i32> {
        self.ancestors_with(pid, depth, |p| process_tree::parent(p).ok())
    }

    fn ancestors_with(
        &self,
        pid: i32,
        depth: usize,
        now_parent: impl Fn(i32) -> Option<i32>,
    ) -> Vec<i32> {
        let mut line = Vec::new();
        let (mut p, mut generations) = (pid, 0);
        // Bounded: each fork-only step is one more, and there are at most a few in a row.
        while generations < depth && line.len() < depth + 4 {
            let seen = self.forks.get(&p).map(|f| f.parent);
            let Some(up) = seen.or_else(|| now_parent(p)).filter(|&u| u > 1) else {
                break;
            };
            line.push(up);
            if self.forks.get(&up).is_none_or(|f| f.execed) {
                generations += 1;
            }
            p = up;
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sway (100) → a fork that only forks again (101) → `sh -c` (102) → the program (103),
    /// with 102 re-parented to init (what `/proc` says now): the program is two generations
    /// below sway, `sh` one; without the fork events only `/proc`'s parents are known.
    #[test]
    fn a_double_forks_middle_is_not_a_generation_and_the_fork_parent_outlives_the_reparenting() {
        let now_parent = |p: i32| match p {
            103 => Some(102),
            102 | 100 => Some(1),
            _ => None,
        };
        let t = Instant::now();
        let mut l = Lineage::default();
        l.forked(101, 100, t);
        l.forked(102, 101, t);
        l.execed(102);
        l.forked(103, 102, t);
        l.execed(103);
        assert_eq!(l.ancestors_with(103, 2, now_parent), vec![102, 101, 100]);
        assert_eq!(l.ancestors_with(102, 2, now_parent), vec![101, 100]);
        assert_eq!(l.ancestors_with(103, 1, now_parent), vec![102]);
        let unseen = Lineage::default();
        assert_eq!(unseen.ancestors_with(103, 2, now_parent), vec![102]);
    }

    /// Forks older than the window are forgotten (a recycled pid is not given an old parent).
    #[test]
    fn forks_are_forgotten_after_the_window() {
        let t = Instant::now();
        let mut l = Lineage::default();
        l.forked(200, 100, t);
        l.forked(300, 100, t + WINDOW + Duration::from_millis(1));
        assert!(!l.forks.contains_key(&200));
        assert_eq!(l.ancestors_with(200, 2, |_| None), Vec::<i32>::new());
        assert_eq!(l.ancestors_with(300, 1, |_| None), vec![100]);
    }
}
