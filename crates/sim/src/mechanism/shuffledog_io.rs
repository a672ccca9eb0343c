//! ShuffleDog's I/O manager (seed 003 §5.2) and the Android default it replaces, as workload
//! transforms over the block device of [`crate::engine`] (the `io` event).
//!
//! Android (§5.2 "Inadequacies"): apps reach the SD card through the FUSE daemon that emulates
//! file permissions, so "the kernel-side I/O scheduler knows only the priorities of the daemon
//! rather than those of apps where these I/O requests originate": every app request arrives at
//! CFQ with the daemon's priority — best-effort level 4, the level of a nice-0 thread.
//! ShuffleDog (§5.2 "Our Approach", §6): the requests of delay-critical threads (the UI thread
//! included) are served before those of normal threads — `ioprio_set` to the real-time class,
//! served by CFQ before any best-effort request. The paper gives no level within the class; we
//! use 4, the default level (`IOPRIO_NORM`).

use crate::io::IoPrio;
use crate::workload::Workload;

/// The FUSE daemon's priority, which every app request carries on stock Android.
pub const FUSE_DAEMON_IOPRIO: IoPrio = IoPrio::BestEffort(4);
/// ShuffleDog's I/O priority for delay-critical threads.
pub const DELAY_CRITICAL_IOPRIO: IoPrio = IoPrio::RealTime(4);

/// Stock Android: every request is tagged with the FUSE daemon's priority.
pub fn android_default(w: &mut Workload) {
    for t in &mut w.tasks {
        t.ioprio = Some(FUSE_DAEMON_IOPRIO);
    }
}

/// ShuffleDog: Android's default, then delay-critical threads' requests in the real-time class.
pub fn shuffledog(w: &mut Workload) {
    android_default(w);
    for t in &mut w.tasks {
        if t.labels.iter().any(|l| l == "delay-critical") {
            t.ioprio = Some(DELAY_CRITICAL_IOPRIO);
        }
    }
}
