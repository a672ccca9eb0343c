//! Starting the daemon's parts: its focus sources, the tracker and the reconciler with its
//! cgroup hierarchy — each reports what it could not do instead of failing the daemon.

use crate::actuators::cgroup::{Groups, Hierarchy};
use crate::config::Config;
use crate::journal::Journal;
use crate::reconcile::Reconciler;
use crate::sources::tracker::TrackerHandle;
use crate::types::Event;
use crate::types::SourceName;
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;
use tracing::warn;
use uxsched_os::own::Loan;

/// Start the `rt` lever's guard when the config asks for that lever; without the guard (no
/// SCHED_FIFO 99) or the canary the lever cannot be bounded, and the fair lever is used.
pub(super) fn start_rt_guard(
    cfg: &Config,
    canary: bool,
    tx: &mpsc::Sender<Event>,
) -> Option<crate::rt_guard::RtGuard> {
    // Whatever the mode at start: a client may switch to `uxsched` later.
    if cfg.tracker.lever != crate::config::Lever::Rt {
        return None;
    }
    if !canary {
        warn!("the rt lever needs the canary, which did not start: using the fair lever");
        return None;
    }
    let limits = crate::rt_budget::Limits::of(&cfg.tracker);
    crate::rt_guard::RtGuard::spawn(limits, tx.clone())
        .map_err(|e| {
            warn!(
                "the rt lever's guard cannot run at SCHED_FIFO {} ({e}): its budget could not be \
                 enforced, so the fair lever is used — run the daemon as root, without \
                 RestrictRealtime= and, where RT group scheduling is on, in the root cgroup",
                crate::rt_guard::PRIORITY
            )
        })
        .ok()
}

/// Start the configured sources' threads; a source that cannot start is reported, not fatal.
pub(super) fn start_sources(cfg: &Config, tx: &mpsc::Sender<Event>) -> BTreeMap<SourceName, bool> {
    let mut alive = BTreeMap::new();
    for &source in &cfg.sources {
        let started = match source {
            SourceName::Explicit => Ok(()),
            SourceName::Android => crate::sources::android::spawn(
                cfg.android.proc_root.clone(),
                cfg.android.cpuset_root.clone(),
                Duration::from_millis(cfg.android.poll_ms),
                tx.clone(),
            ),
            SourceName::Mutter => crate::sources::mutter::spawn(
                cfg.mutter.cgroup_root.clone(),
                cfg.sources_any_owner,
                tx.clone(),
            ),
            SourceName::X11 => crate::sources::x11::spawn(
                cfg.x11.display.clone(),
                cfg.sources_any_owner,
                tx.clone(),
            ),
        };
        if let Err(e) = &started {
            warn!(?source, "source could not start: {e}");
        }
        alive.insert(source, started.is_ok());
    }
    alive
}

/// Start the delay-critical thread tracker if the config asks for it; say once why not.
pub(super) fn start_tracker(
    cfg: &Config,
    tx: &mpsc::Sender<Event>,
    loan: Loan,
) -> (Option<TrackerHandle>, String) {
    if !cfg.tracker.enabled {
        return (None, "off (`[tracker] enabled = false`)".into());
    }
    let mut tcfg = uxsched_tracker::TrackerConfig {
        store: Some(cfg.tracker.store.clone()),
        ..Default::default()
    };
    tcfg.input_names
        .extend(cfg.tracker.input_threads.iter().cloned());
    tcfg.display_names
        .extend(cfg.tracker.display_threads.iter().cloned());
    match crate::sources::tracker::spawn(tcfg, tx.clone(), loan) {
        Ok(h) => (Some(h), "running".into()),
        Err(why) => {
            warn!("the delay-critical thread tracker is unavailable: {why}; roles fall back to thread names");
            (None, format!("unavailable: {why}"))
        }
    }
}

/// The reconciler for this machine, and how it places apps (shown by `status`): on a systemd
/// machine with cgroup2 it raises the app's own unit's weight and moves nothing (systemd owns
/// the tree); elsewhere it creates its fg/bg groups (v1: threads, v2: whole processes).
pub(super) fn reconciler(
    cfg: &Config,
    journal: Journal,
    default_slice: u64,
    events: &std::sync::mpsc::Sender<crate::types::Event>,
) -> (Reconciler, String) {
    let hierarchy = Hierarchy::detect();
    if let Some(Hierarchy::V2 { mount, cpu: true }) = &hierarchy {
        if crate::actuators::unit::systemd_running() {
            let how = format!(
                "systemd units: the app's unit CPUWeight (cgroup2 at {})",
                mount.display()
            );
            return (
                Reconciler::with_units(journal, mount.clone(), default_slice),
                how,
            );
        }
    }
    let groups = hierarchy.and_then(|h| {
        let where_ = h.describe();
        Groups::create(h, &cfg.cgroup_name, cfg.fg_shares, cfg.bg_shares)
            .map_err(|e| {
                warn!("cannot create uxsched's cgroups in {where_}: {e}; group placement disabled")
            })
            .ok()
    });
    // Moves off the loop's thread (`actuators/mover.rs`); without the thread, on it.
    let groups = groups.map(|mut g| {
        let events = events.clone();
        let wake = move || {
            let _ = events.send(crate::types::Event::Moved);
        };
        if let Err(e) = g.move_off_thread(Box::new(wake)) {
            warn!("cannot start the cgroup mover's thread ({e}): the daemon's loop makes the moves itself");
        }
        g
    });
    let how = match groups.as_ref().map(|g| &g.hierarchy) {
        Some(h @ Hierarchy::V1 { .. }) => {
            format!("threads into uxsched's groups ({})", h.describe())
        }
        Some(h) => format!("whole processes into uxsched's groups ({})", h.describe()),
        None => "none (no usable cpu cgroup hierarchy): nice, slices and autogroup only".into(),
    };
    (Reconciler::new(journal, groups, default_slice), how)
}
