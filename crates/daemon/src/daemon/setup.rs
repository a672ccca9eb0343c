//! Starting the daemon's parts: its journal, focus sources, the tracker, the real-time parts
//! and the reconciler with its cgroup hierarchy — each reports what it could not do instead of
//! failing the daemon.

use crate::actuators::cgroup::{Groups, Hierarchy};
use crate::config::Config;
use crate::features::Features;
use crate::journal::Journal;
use crate::reconcile::Reconciler;
use crate::rt_guard::RtGuard;
use crate::rtapi::{canary, Grants};
use crate::sources::tracker::TrackerHandle;
use crate::types::Event;
use crate::types::SourceName;
use anyhow::Context;
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;
use tracing::{info, warn};
use uxsched_os::identity::TaskId;
use uxsched_os::own::Loan;

/// Open the journal, taking over the rows an older daemon left in the old default place.
pub(super) fn open_journal(cfg: &Config) -> anyhow::Result<Journal> {
    let session_of = |t: &TaskId| {
        uxsched_os::identity::still_same(t)
            .then(|| uxsched_os::autogroup::read(t.pid).ok())
            .flatten()
            .map(|(id, _)| id)
    };
    let journal = Journal::open(&cfg.journal, session_of)?;
    take_legacy_journal(cfg, &journal, session_of);
    Ok(journal)
}

/// The default journal takes over what a daemon from before its move to `/run` left in the old
/// place (an upgrade after a crash), so that this start restores it; only for the default path
/// — a configured journal is its owner's, and a test's must not take the machine's rows.
fn take_legacy_journal(
    cfg: &Config,
    journal: &Journal,
    session_of: impl Fn(&TaskId) -> Option<u64>,
) {
    if cfg.journal != std::path::Path::new(crate::journal::DEFAULT_PATH) {
        return;
    }
    let legacy = std::path::Path::new(crate::journal::LEGACY_PATH);
    match crate::journal::carry_over(legacy, journal, session_of) {
        Ok(0) => {}
        Ok(rows) => info!(rows, from = %legacy.display(), "took over the old journal's rows"),
        Err(e) => warn!(
            "the old journal {} stays where it is ({e}): stop the daemon that holds it, or start \
             `uxsched daemon` once with `journal = \"{}\"` (it restores the rows as it starts) \
             and stop it",
            legacy.display(),
            legacy.display()
        ),
    }
}

/// SIGTERM and SIGINT become [`Event::Shutdown`] on the loop's channel.
pub(super) fn forward_signals(tx: mpsc::Sender<Event>) -> anyhow::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])
    .context("installing signal handlers")?;
    std::thread::Builder::new()
        .name("uxsched-signals".into())
        .spawn(move || {
            if signals.forever().next().is_some() {
                let _ = tx.send(Event::Shutdown);
            }
        })?;
    Ok(())
}

/// The real-time parts of a running daemon.
pub(super) struct Realtime {
    pub canary: Option<canary::Canary>,
    pub guard: Option<RtGuard>,
    pub grants: Grants,
    pub rtkit: Option<crate::rtapi::rtkit::Service>,
}

/// Start the canary (no real time is granted without it), the rt lever's guard (trusted by
/// the reconciler for the demotions it makes), rtkit's interface and the real-time API's
/// grants.
pub(super) fn start_realtime(
    cfg: &Config,
    features: &Features,
    rec: &mut Reconciler,
    tx: &mpsc::Sender<Event>,
) -> Realtime {
    let rt_lever = cfg.rt_lever_in_force();
    let canary = (cfg.rtapi.enabled || rt_lever)
        .then(|| {
            let ms = std::time::Duration::from_millis;
            let r = &cfg.rtapi;
            canary::spawn(ms(r.canary_period_ms), ms(r.canary_timeout_ms), tx.clone())
                .map_err(|e| warn!("cannot start the canary ({e}); real-time grants are refused"))
                .ok()
        })
        .flatten();
    let mut rtapi_cfg = cfg.rtapi.clone();
    if canary.is_none() {
        rtapi_cfg.max_rt_threads = 0; // never RT without the canary in force
    }
    let guard = start_rt_guard(cfg, canary.is_some(), tx);
    if let Some(g) = &guard {
        rec.trust(g.demoted_by_guard());
    }
    let rtkit = crate::rtapi::rtkit::start(&cfg.rtkit, &rtapi_cfg, tx.clone());
    let ui = crate::rtapi::interact::UiBoost {
        nice: cfg.min_nice,
        slice_ns: cfg.uxsched.slice_us * 1000,
    };
    let grants = Grants::new(rtapi_cfg).with_boosts(ui, features.default_slice_ns);
    Realtime {
        canary,
        guard,
        grants,
        rtkit,
    }
}

/// Start the `rt` lever's guard when the config asks for that lever; without the guard (no
/// SCHED_FIFO 99) or the canary the lever cannot be bounded, and the fair lever is used.
fn start_rt_guard(
    cfg: &Config,
    canary: bool,
    tx: &mpsc::Sender<Event>,
) -> Option<crate::rt_guard::RtGuard> {
    // Whatever the mode at start: a client may switch to `uxsched` later. Without the CPU
    // levers no mode makes a thread real-time.
    if !cfg.rt_lever_in_force() {
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

/// Say at start what `cpu_levers = false` leaves (and refuse what cannot run with it: the
/// `--backend scx` override is checked here, the file's key while parsing): the groups' I/O
/// classes act only on processes the modes place into the groups, which is a CPU lever.
pub(super) fn check_cpu_levers(cfg: &Config) -> anyhow::Result<()> {
    crate::config::levers::check(cfg).map_err(anyhow::Error::msg)?;
    if cfg.cpu_levers {
        return Ok(());
    }
    info!("cpu_levers = false: no nice, slice, real-time, autogroup or cgroup change; the storage levers as configured");
    if cfg.storage.group_prio_classes() != (None, None) {
        warn!("cpu_levers = false: no process is placed into uxsched's groups, so [storage] front_group_class and background_io_class act on no process");
    }
    Ok(())
}

/// The sources started: which run, and the `auto` source's handle (what it found, for
/// `status`).
pub(super) struct Sources {
    pub alive: BTreeMap<SourceName, bool>,
    pub auto: Option<crate::sources::auto::Handle>,
}

/// Start the configured sources' threads; a source that cannot start is reported, not fatal.
pub(super) fn start_sources(cfg: &Config, tx: &mpsc::Sender<Event>) -> Sources {
    let mut alive = BTreeMap::new();
    let any = cfg.sources_any_owner;
    let mut auto = None;
    for &source in &cfg.sources {
        let started = match source {
            SourceName::Explicit => Ok(()),
            SourceName::Auto => start_auto(cfg, tx).map(|h| auto = Some(h)),
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
                cfg.idle.after(),
                tx.clone(),
            ),
            SourceName::Sway => env_path(&["SWAYSOCK", "I3SOCK"])
                .and_then(|s| crate::sources::wayland::sway::spawn(s, any, tx.clone()))
                .map(drop),
            SourceName::Hyprland => env_path(&["XDG_RUNTIME_DIR"])
                .and_then(|rt| {
                    Ok(rt
                        .join("hypr")
                        .join(env_path(&["HYPRLAND_INSTANCE_SIGNATURE"])?))
                })
                .and_then(|d| crate::sources::wayland::hyprland::spawn(d, any, tx.clone()))
                .map(drop),
            SourceName::Niri => env_path(&["NIRI_SOCKET"])
                .and_then(|s| crate::sources::wayland::niri::spawn(s, any, tx.clone()))
                .map(drop),
            SourceName::Kwin => env_path(&["XDG_RUNTIME_DIR"])
                .and_then(|rt| {
                    crate::sources::wayland::kwin::spawn(rt.join("bus"), any, tx.clone())
                })
                .map(drop),
            SourceName::Toplevel => crate::sources::wayland::toplevel::display_from_env()
                .and_then(|d| crate::sources::wayland::toplevel::spawn(d, any, tx.clone()))
                .map(drop),
            SourceName::Gamemode => crate::sources::dbus::gamemode::spawn("", tx.clone()),
            SourceName::System76 => crate::sources::dbus::system76::spawn("", tx.clone()),
        };
        if let Err(e) = &started {
            warn!(?source, "source could not start: {e}");
        }
        alive.insert(source, started.is_ok());
    }
    Sources { alive, auto }
}

/// `sources = ["auto"]`: discovery and the followers it starts (`sources/auto/`), leaving the
/// desktops of the desktop sources listed by themselves to them (`auto::Options::of`).
fn start_auto(
    cfg: &Config,
    tx: &mpsc::Sender<Event>,
) -> std::io::Result<crate::sources::auto::Handle> {
    use crate::sources::auto;
    let settings = auto::Settings {
        roots: auto::Roots::default(),
        opts: auto::Options::of(&cfg.sources, cfg.sources_any_owner),
        mutter_root: cfg.mutter.cgroup_root.clone(),
        idle_after: cfg.idle.after(),
    };
    auto::spawn(settings, tx.clone())
}

/// A compositor's socket as named in the daemon's environment (a daemon run inside the
/// session); a system service finds the sessions itself with `sources = ["auto"]`.
fn env_path(vars: &[&str]) -> std::io::Result<std::path::PathBuf> {
    vars.iter()
        .find_map(std::env::var_os)
        .map(Into::into)
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "{} is not set: run the daemon in the compositor's session, or use \
                     `sources = [\"auto\"]`",
                    vars.join(" or ")
                ),
            )
        })
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
    let unit_io = cfg.storage.unit_io_weights().is_some();
    if let Some(Hierarchy::V2 { mount, cpu: true }) = &hierarchy {
        if crate::actuators::unit::systemd_running() {
            if unit_io {
                info!(
                    "`[storage] *_unit_io_weight`: units' IOWeight set through systemd; it acts \
                     on a disk under BFQ (io.bfq.weight) or with blk-iocost enabled (io.cost.qos), \
                     between sibling units — `uxsched doctor` says per disk whether it acts"
                );
            }
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
    if unit_io {
        warn!(
            "`[storage] front_unit_io_weight`/`background_unit_io_weight` need systemd units on \
             cgroup2; this machine has none (uxsched places apps in groups of its own, or in \
             none): not set — `[storage] background_io_class` is the cgroup2 lever without systemd"
        );
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
