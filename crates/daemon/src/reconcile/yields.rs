//! Settings someone else changed after uxsched did (the coexistence rule): theirs stands, and
//! uxsched leaves the setting alone until the focus changes — unless it comes to want a
//! stronger boost for it than the one they overrode. Chromium resets the nice of its pool
//! threads as they start (its own thread types), over the fair boost every thread of the app in
//! front gets; when the tracker later finds one of them on the interaction's path (a renderer's
//! raster worker), that is new evidence, not the old wish again: uxsched asks once more. Each
//! step up is asked once — a second change of theirs yields it again, at the stronger level —
//! so there is no tug-of-war.

use super::{Setting, MAX_REMEMBERED};
use crate::types::{Kind, Target, Value};
use std::collections::HashMap;

/// How strong a scheduling boost is: real time over the fair class, then a lower nice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Strength {
    rt: bool,
    /// The nice, negated (a lower nice is a stronger boost).
    boost: i32,
}

impl Strength {
    fn of_target(t: &Target) -> Strength {
        Strength {
            rt: t.rt.is_some(),
            boost: -t.nice.unwrap_or(0),
        }
    }

    fn of_value(v: &Value) -> Option<Strength> {
        match v {
            Value::Sched(a) => Some(Strength {
                rt: a.is_rt(),
                boost: -a.nice,
            }),
            _ => None,
        }
    }
}

/// The settings yielded since the focus last changed, with the boost that was overridden
/// (`None`: a kind without strengths — a group, an I/O class — stays theirs).
#[derive(Default)]
pub(super) struct Yields(HashMap<Setting, Option<Strength>>);

impl Yields {
    pub(super) fn clear(&mut self) {
        self.0.clear();
    }

    /// `id` was changed by someone else over uxsched's `overridden` wish.
    pub(super) fn record(&mut self, id: Setting, overridden: &Value) {
        if self.0.len() < MAX_REMEMBERED || self.0.contains_key(&id) {
            self.0.insert(id, Strength::of_value(overridden));
        }
    }

    /// Whether `id` stays theirs for a wish of `target`: yielded, and `target` asks no more of
    /// its scheduling than what they overrode.
    pub(super) fn holds(&self, id: &Setting, target: &Target) -> bool {
        match self.0.get(id) {
            None => false,
            Some(Some(was)) if id.0 == Kind::Sched => Strength::of_target(target) <= *was,
            Some(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Key, Rt, RtPolicy};
    use uxsched_os::identity::TaskId;
    use uxsched_os::sched::SchedAttr;

    fn attr(policy: u32, nice: i32, priority: u32) -> Value {
        Value::Sched(SchedAttr {
            policy,
            flags: 0,
            nice,
            priority,
            runtime: 0,
            deadline: 0,
            period: 0,
            uclamp: None,
        })
    }

    fn thread() -> Key {
        Key::Thread(TaskId {
            tid: 42,
            pid: 42,
            start: 4242,
        })
    }

    #[test]
    fn a_stronger_wish_asks_once_more_a_weaker_or_equal_one_does_not() {
        let id = (Kind::Sched, thread());
        let others = Target {
            nice: Some(-2),
            ..Target::default()
        };
        let critical = Target {
            nice: Some(-8),
            rt: Some(Rt {
                policy: RtPolicy::Fifo,
                priority: 2,
            }),
            ..Target::default()
        };
        let mut y = Yields::default();
        assert!(!y.holds(&id, &others), "nothing yielded yet");
        y.record(id, &attr(0, -2, 0));
        assert!(y.holds(&id, &others), "the same wish again: theirs stands");
        assert!(!y.holds(&id, &critical), "on the path now: asked once more");
        y.record(id, &attr(1, -8, 2));
        assert!(
            y.holds(&id, &critical),
            "theirs again: yielded at that level"
        );
        y.clear();
        assert!(!y.holds(&id, &others));
    }

    #[test]
    fn kinds_without_a_strength_stay_theirs() {
        let id = (Kind::Ioprio, thread());
        let mut y = Yields::default();
        y.record(id, &Value::Ioprio(0));
        assert!(y.holds(&id, &Target::default()));
    }
}
