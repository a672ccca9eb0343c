//! The real-time side of a pass: the rt lever's threads and their originals published to the
//! guard and the canary, and the "critical → boosted" latency of the tracker's new members.

use super::{Daemon, LATENCIES};
use crate::types::Desired;
use crate::types::{Kind, Value};
use uxsched_os::sched;

impl Daemon {
    /// New critical threads' boosts are written — `only` these, each at its time (the fast
    /// path), or, after a full pass, those the journal now holds a scheduling row for (the rest
    /// were not boosted: filtered out, gone): record how long after the tracker's decision (in
    /// the `uxsched` mode, the one that boosts them).
    pub(super) fn boosts_written(&mut self, only: Option<&[(uxsched_os::identity::TaskId, u64)]>) {
        let now = uxsched_tracker::procfs::monotonic_ns();
        let mut done = Vec::new();
        let journal = &self.rec.journal;
        let held = |task: &uxsched_os::identity::TaskId| {
            let key = crate::types::Key::Thread(*task);
            journal.get(Kind::Sched, &key).is_ok_and(|e| e.is_some())
        };
        self.boost_pending.retain(|(task, since)| {
            let at = match only {
                Some(o) => o.iter().find(|(t, _)| t == task).map(|&(_, at)| at),
                None => held(task).then_some(now),
            };
            if let Some(at) = at.filter(|_| *since > 0) {
                done.push(at.saturating_sub(*since));
            }
            only.is_some() && at.is_none()
        });
        if !self.policy().follows_chain() {
            return;
        }
        for latency in done {
            if self.boost_latency.len() == LATENCIES {
                self.boost_latency.pop_front();
            }
            self.boost_latency.push_back(latency);
        }
    }

    /// Tell the canary's watchdog which RT threads uxsched holds, with the originals to put
    /// back, and the rt lever's guard what each of its threads goes to when over budget: the
    /// fair lever's boost (nice `min_nice`, the short slice) — what the next pass would write
    /// anyway, so a demoted thread is never left at its plain original in between.
    pub(super) fn publish_rt(&mut self) {
        let lever = self.rt.as_ref().map(|g| g.followed()).unwrap_or_default();
        // Only after the journal or the lever's set changed: a pass reads every row otherwise.
        let now = (self.rec.journal.writes(), lever.clone());
        if self.published.as_ref() == Some(&now) {
            return;
        }
        self.published = Some(now);
        let (nice, slice) = (self.cfg.min_nice, self.cfg.uxsched.slice_us * 1000);
        let mut originals = Vec::new();
        let mut fallbacks = Vec::new();
        for e in self.rec.journal.entries().unwrap_or_default() {
            if let (Value::Sched(orig), Value::Sched(applied)) = (&e.original, &e.applied) {
                let back = sched::restorable(orig, self.features.default_slice_ns);
                if applied.is_rt() {
                    originals.push((e.via, back));
                }
                if lever.contains(&e.via) {
                    let fair = self.rec.fair(orig, Some(nice), Some(slice));
                    fallbacks.push((e.via, fair.unwrap_or(back)));
                }
            }
        }
        if let Some(g) = &self.rt {
            g.publish(fallbacks);
        }
        if let Some(c) = &self.canary {
            let mut held = c.held.lock().unwrap_or_else(|e| e.into_inner());
            held.clear();
            held.extend(originals);
        }
    }

    /// The threads the `uxsched` mode's `rt` lever asks to run real-time (none otherwise).
    pub(super) fn rt_lever_threads(&self, desired: &Desired) -> Vec<uxsched_os::identity::TaskId> {
        if !self.policy().rt_lever(&self.cfg) {
            return Vec::new();
        }
        desired
            .threads
            .iter()
            .filter(|(_, t)| t.rt.is_some())
            .map(|(task, _)| *task)
            .collect()
    }
}
