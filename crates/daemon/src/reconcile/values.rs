//! What the reconciler writes: the value of a setting that a target asks for, given the
//! object's original (only ever raising, only fair threads), and the value that restores it.

use super::Reconciler;
use crate::actuators::unit;
use crate::types::Group;
use crate::types::Target;
use crate::types::{Kind, Value};
use uxsched_os::{ioprio, sched};

impl Reconciler {
    /// A fair thread's attributes with a nice (only ever raised) and a custom slice; `None` when
    /// that changes nothing.
    pub fn fair(
        &self,
        orig: &sched::SchedAttr,
        nice: Option<i32>,
        slice_ns: Option<u64>,
    ) -> Option<sched::SchedAttr> {
        self.fair_clamped(orig, nice, slice_ns, None)
    }

    /// [`Reconciler::fair`] with a `uclamp.min` too (only ever raised; where the kernel has
    /// uclamp every write carries the thread's clamp, so a lowered wish puts the original back).
    pub fn fair_clamped(
        &self,
        orig: &sched::SchedAttr,
        nice: Option<i32>,
        slice_ns: Option<u64>,
        uclamp_min: Option<u32>,
    ) -> Option<sched::SchedAttr> {
        if nice.is_none() && slice_ns.is_none() && uclamp_min.is_none() {
            return None;
        }
        let base = sched::restorable(orig, self.default_slice);
        let nice = nice.map_or(orig.nice, |n| n.min(orig.nice));
        // A default slice of 0: a kernel before 6.12, where a fair thread has no custom slice
        // (`sched_setattr` ignores the runtime, `sched_getattr` reports none). Asking for one
        // there would never read back, and the coexistence check would take uxsched's own boost
        // for someone else's and leave it in place (found on Debian 12's 6.1 kernel).
        let runtime = match self.default_slice {
            0 => base.runtime,
            _ => slice_ns.unwrap_or(base.runtime),
        };
        let uclamp = sched::raised_uclamp(orig, uclamp_min);
        if nice == orig.nice && runtime == base.runtime && uclamp == orig.uclamp {
            return None;
        }
        Some(sched::SchedAttr {
            flags: base.flags | sched::SCHED_FLAG_RESET_ON_FORK,
            nice,
            runtime,
            uclamp,
            ..base
        })
    }

    /// The value of `kind` that `target` asks for, given the object's original value; `None`
    /// when the target leaves that setting alone (or it would not be an improvement).
    pub(super) fn wanted(&self, kind: Kind, original: &Value, target: &Target) -> Option<Value> {
        match (kind, original) {
            (Kind::Sched, Value::Sched(orig)) => {
                if !orig.is_fair() {
                    return None;
                }
                if let Some(rt) = target.rt {
                    // The nice the thread holds in the fair class while it is real-time (the
                    // kernel ignores it for the RT class): the one it is demoted to, so that
                    // `set_keeping_lag` sets it first and the demotion changes no weight.
                    return Some(Value::Sched(sched::SchedAttr {
                        policy: rt.policy.number(),
                        flags: orig.flags | sched::SCHED_FLAG_RESET_ON_FORK,
                        nice: target.nice.map_or(orig.nice, |n| n.min(orig.nice)),
                        priority: rt.priority,
                        runtime: 0,
                        deadline: 0,
                        period: 0,
                        ..*orig
                    }));
                }
                let fair = self.fair_clamped(orig, target.nice, target.slice_ns, target.uclamp_min);
                if target.ext {
                    let base = fair.unwrap_or_else(|| sched::restorable(orig, self.default_slice));
                    return Some(Value::Sched(base.in_ext()));
                }
                fair.map(Value::Sched)
            }
            (Kind::Cgroup, Value::Cgroup(orig)) => {
                let rel = self.groups.as_ref()?.rel(target.group?);
                (rel != *orig).then_some(Value::Cgroup(rel))
            }
            (Kind::Ioprio, Value::Ioprio(orig)) => {
                let v = target.ioprio.or_else(|| {
                    // Only a thread whose level the kernel derives from its nice (class none):
                    // one with a priority of its own keeps it.
                    (self.pin_io_weight && *orig == 0 && super::lowers_nice(target))
                        .then(|| ioprio::encode(ioprio::CLASS_BE, super::PINNED_IO_LEVEL))
                })?;
                (v != *orig).then_some(Value::Ioprio(v))
            }
            (Kind::Unit, Value::Unit(orig)) => {
                toward(*orig, target.group?, self.unit_weights).map(Value::Unit)
            }
            (Kind::UnitIo, Value::UnitIo(orig)) => {
                toward(*orig, target.unit_io?, self.unit_io_weights).map(Value::UnitIo)
            }
            (Kind::Autogroup, Value::Autogroup(orig)) => {
                let n = target.autogroup_nice?.min(*orig); // only ever raise the session
                (n != *orig).then_some(Value::Autogroup(n))
            }
            _ => None,
        }
    }

    /// The value to write back for `original` (a default slice is written as "no custom
    /// slice", so restoring does not pin the kernel's default as a custom one).
    pub(super) fn restorable(&self, original: &Value) -> Value {
        match original {
            Value::Sched(a) => Value::Sched(sched::restorable(a, self.default_slice)),
            other => other.clone(),
        }
    }
}

/// A unit's weight moved toward `(fg, bg)` for `group` — the front's only ever raised, a
/// background unit's only ever lowered, a weight of 0 leaving it — or `None` when that changes
/// nothing. An unset weight counts as systemd's default, 100.
fn toward(orig: u64, group: Group, (fg, bg): (u64, u64)) -> Option<u64> {
    let now = if orig == unit::UNSET { 100 } else { orig };
    let w = match group {
        Group::Fg if fg > 0 => fg.max(now),
        Group::Bg if bg > 0 => bg.min(now),
        _ => return None,
    };
    (w != now).then_some(w)
}
