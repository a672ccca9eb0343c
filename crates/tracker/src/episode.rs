//! One interaction episode's graph and seed 003 §4's cycle rule, across processes.
//!
//! §4: "if we observe an interaction circle {T_ui, T1, …, Tn, T_ui}, where T_ui is the UI thread,
//! then … {T1, …, Tn} are all delay-critical." The circle closes either at the UI thread (a
//! worker posts back) or at the display (the app's work reaches the screen without returning
//! to the UI thread, like §4's GL thread): a thread is delay-critical when it is reachable from
//! the UI thread and reaches the UI thread or a display thread. A thread that is woken but
//! never leads back (a logger, §4's T6) is not. The same rule as the simulator's model
//! (crates/sim/src/mechanism/tracker.rs), with the display as a second end of the circle.
//!
//! Pipelines (docs/tracker.md, "Pipelines"; issue 30): a frame may be made in other processes
//! of the app's family, and a stage may be started by a vsync-like timer instead of by the
//! previous stage. Two additions keep §4's principle — what never leads to the screen is not
//! critical:
//! - a *frame producer*, a family thread that wakes a display thread during the episode though
//!   the episode did not wake it, is critical: it leads to the screen, its own wake-up came from
//!   a timer, which leaves no edge (§4's GL thread, found by its display wake instead of its
//!   name);
//! - the episode is not over at a display wake-up while work the input handed to another
//!   process of the family has not yet led back to the UI thread or a display
//!   ([`Episode::pending`]): a browser's UI thread asks the X server things before its renderer
//!   has drawn.

use crate::wire::Task;
use std::collections::{BTreeMap, BTreeSet};

/// Edges kept per episode; beyond it new edges are counted and ignored (bounded memory).
pub const MAX_EDGES: usize = 4096;

pub struct Episode {
    pub epoch: u64,
    pub ui: Task,
    pub input: Option<Task>,
    pub start_ns: u64,
    /// Every thread seen in the episode's edges, by tid.
    pub nodes: BTreeMap<u32, Task>,
    pub edges: BTreeSet<(u32, u32)>,
    pub displays: BTreeSet<u32>,
    /// Frame producers: family threads that woke a display without being reached.
    pub producers: BTreeSet<u32>,
    /// Edges dropped over [`MAX_EDGES`].
    pub overflow: u64,
}

impl Episode {
    pub fn new(epoch: u64, ui: Task, input: Option<Task>, start_ns: u64) -> Self {
        let nodes = BTreeMap::from([(ui.tid, ui.clone())]);
        Episode {
            epoch,
            ui,
            input,
            start_ns,
            nodes,
            edges: BTreeSet::new(),
            displays: BTreeSet::new(),
            producers: BTreeSet::new(),
            overflow: 0,
        }
    }

    /// Add `waker → wakee`; false when it was known or over the bound.
    pub fn add_edge(&mut self, waker: &Task, wakee: &Task) -> bool {
        if self.edges.len() >= MAX_EDGES {
            self.overflow += 1;
            return false;
        }
        for t in [waker, wakee] {
            self.nodes.insert(t.tid, t.clone()); // the latest name
        }
        self.edges.insert((waker.tid, wakee.tid))
    }

    /// A thread of the episode took a new name (threads are named after they are created).
    pub fn rename(&mut self, t: &Task) {
        if let Some(n) = self.nodes.get_mut(&t.tid) {
            n.comm.clone_from(&t.comm);
        }
    }

    /// The work reached the display through `waker`.
    pub fn add_display(&mut self, waker: &Task, display: &Task) {
        self.add_edge(waker, display);
        self.displays.insert(display.tid);
    }

    /// Threads the edges reach from `from` (forward) or that reach `from` (backward).
    fn closure(&self, from: &BTreeSet<u32>, forward: bool) -> BTreeSet<u32> {
        let mut seen = from.clone();
        let mut todo: Vec<u32> = from.iter().copied().collect();
        while let Some(x) = todo.pop() {
            for &(a, b) in &self.edges {
                let (src, dst) = if forward { (a, b) } else { (b, a) };
                if src == x && seen.insert(dst) {
                    todo.push(dst);
                }
            }
        }
        seen
    }

    /// A family thread the episode did not reach woke `display`: a frame producer.
    pub fn add_producer(&mut self, waker: &Task, display: &Task) {
        self.add_display(waker, display);
        self.producers.insert(waker.tid);
    }

    /// Threads that reach the UI thread or a display thread.
    fn leading_back(&self) -> BTreeSet<u32> {
        let mut ends = BTreeSet::from([self.ui.tid]);
        ends.extend(self.displays.iter().copied());
        self.closure(&ends, false)
    }

    /// The delay-critical threads so far: reachable from the UI thread and reaching it or a
    /// display thread, and the frame producers (the UI thread included; display threads
    /// themselves are not).
    pub fn critical(&self) -> BTreeSet<u32> {
        let fwd = self.closure(&BTreeSet::from([self.ui.tid]), true);
        let back = self.leading_back();
        fwd.intersection(&back)
            .chain(&self.producers)
            .copied()
            .filter(|t| !self.displays.contains(t))
            .collect()
    }

    /// Threads reached from the UI thread that `handed_off` selects (the family's other
    /// processes) and that do not lead back to the UI thread or a display yet: the input's work
    /// still under way there. The episode ends at a display wake-up only when there is none.
    pub fn pending(&self, handed_off: impl Fn(&Task) -> bool) -> Vec<u32> {
        let fwd = self.closure(&BTreeSet::from([self.ui.tid]), true);
        let back = self.leading_back();
        fwd.difference(&back)
            .filter(|t| self.nodes.get(t).is_some_and(&handed_off))
            .copied()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(tid: u32) -> Task {
        Task {
            tid,
            tgid: 1,
            start_ns: 0,
            comm: format!("t{tid}"),
            kthread: false,
        }
    }

    fn episode(edges: &[(u32, u32)], display: &[(u32, u32)]) -> BTreeSet<u32> {
        let mut e = Episode::new(1, t(1), None, 0);
        for &(a, b) in edges {
            e.add_edge(&t(a), &t(b));
        }
        for &(a, d) in display {
            e.add_display(&t(a), &t(d));
        }
        e.critical()
    }

    /// Seed 003 Fig. 3: T1 the UI thread; T2 posts back; T4 → T5 → T1; T3 and T6 never lead
    /// back; T7 → T8 (GL) reaches the screen.
    #[test]
    fn figure_3() {
        let edges = [
            (1, 2),
            (2, 1),
            (1, 4),
            (4, 5),
            (5, 1),
            (1, 3),
            (2, 6),
            (1, 7),
            (7, 8),
        ];
        let c = episode(&edges, &[(8, 100)]);
        assert_eq!(c, BTreeSet::from([1, 2, 4, 5, 7, 8]));
    }

    #[test]
    fn woken_but_not_leading_back_is_not_critical() {
        assert_eq!(episode(&[(1, 2), (2, 3)], &[]), BTreeSet::from([1]));
        // A cycle that does not pass through the UI thread does not count.
        assert_eq!(episode(&[(1, 2), (2, 3), (3, 2)], &[]), BTreeSet::from([1]));
    }

    #[test]
    fn chains_through_kernel_workers_and_other_processes() {
        // terminal → kworker → shell → kworker' → terminal → X
        let c = episode(&[(1, 10), (10, 20), (20, 11), (11, 1)], &[(1, 99)]);
        assert_eq!(c, BTreeSet::from([1, 10, 11, 20]));
    }

    /// Browser UI (1) → renderer compositor (10) → GPU IO (20) → viz (21) → X; the UI asks X
    /// (99) something first. A GPU thread woken by its timer (22) draws too.
    #[test]
    fn pipeline_through_other_processes_and_a_timer_paced_producer() {
        let mut e = Episode::new(1, t(1), None, 0);
        let other = |x: &Task| x.tid >= 10;
        e.add_edge(&t(1), &t(10));
        e.add_display(&t(1), &t(99));
        assert_eq!(
            e.pending(other),
            vec![10],
            "the renderer has the input's work"
        );
        for (a, b) in [(10, 20), (20, 21)] {
            e.add_edge(&t(a), &t(b));
        }
        assert_eq!(e.pending(other), vec![10, 20, 21]);
        e.add_display(&t(21), &t(99));
        assert!(e.pending(other).is_empty(), "the frame reached the display");
        e.add_producer(&t(22), &t(99));
        assert_eq!(e.critical(), BTreeSet::from([1, 10, 20, 21, 22]));
    }

    #[test]
    fn edges_are_bounded() {
        let mut e = Episode::new(1, t(1), None, 0);
        for i in 0..(MAX_EDGES as u32 + 10) {
            e.add_edge(&t(1), &t(i + 2));
        }
        assert_eq!(e.edges.len(), MAX_EDGES);
        assert_eq!(e.overflow, 10);
    }
}
