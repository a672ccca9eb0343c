//! ShuffleDog's CPU manager (seed 003 §5.1) and the Android default it replaces, as workload
//! transforms.
//!
//! Android (§5.1 "Current CPU Scheduling"): the UI thread of the foreground app runs at nice 0;
//! threads at a background priority (nice ≥ 10, e.g. an `AsyncTask`) are moved into the
//! background cgroup, "limited to only a small percentage of the available CPU" — Android's
//! `bg_non_interactive` group, `cpu.shares` 52 (≈ 5 % of a nice-0 task's 1024).
//! ShuffleDog (§5.1 "Our Approach", §6): every delay-critical thread gets nice 3 and so is not
//! limited by the background cgroup; the UI thread keeps nice 0.
//!
//! The labels are static here (given by the workload, `delay-critical`), so the managers act
//! once, before the run; the paper's Thread Tracker finds them at run time.

use crate::workload::{GroupSpec, SchedPolicy, Workload};

/// Android's background cgroup path and shares.
pub const BG_GROUP: &str = "bg_non_interactive";
pub const BG_SHARES: u64 = 52;
/// ShuffleDog's nice for delay-critical threads.
pub const DELAY_CRITICAL_NICE: i32 = 3;

fn has(labels: &[String], l: &str) -> bool {
    labels.iter().any(|x| x == l)
}

/// Android's default: UI threads at nice 0, background-priority threads in the 5 % group.
pub fn android_default(w: &mut Workload) {
    if !w.groups.iter().any(|g| g.path == BG_GROUP) {
        w.groups.push(GroupSpec {
            path: BG_GROUP.into(),
            shares: BG_SHARES,
            bandwidth: None,
        });
    }
    for t in &mut w.tasks {
        if has(&t.labels, "ui") {
            t.policy = SchedPolicy::Normal { nice: 0 };
        }
        if let SchedPolicy::Normal { nice } = t.policy {
            if nice >= 10 {
                t.group = Some(BG_GROUP.into());
            }
        }
    }
}

/// ShuffleDog: Android's default, then delay-critical threads (other than the UI thread) at
/// nice 3 and out of the background group.
pub fn shuffledog(w: &mut Workload) {
    android_default(w);
    for t in &mut w.tasks {
        if has(&t.labels, "delay-critical") && !has(&t.labels, "ui") {
            t.policy = SchedPolicy::Normal {
                nice: DELAY_CRITICAL_NICE,
            };
            if t.group.as_deref() == Some(BG_GROUP) {
                t.group = None;
            }
        }
    }
}
