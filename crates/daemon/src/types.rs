//! The daemon's shared vocabulary: the values that pass between its layers — what a source
//! says (an [`Event`]), what a mode wants ([`Desired`]), what the journal records ([`Key`],
//! [`Kind`], [`Value`]). A leaf: it imports nothing else of this crate, so every layer can
//! name these without reaching into another layer (`scripts/layers.py` checks the crate's
//! import graph has no circle).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::mpsc::Sender;
use uxsched_client::control::{Request, Response};
use uxsched_os::identity::{self, TaskId};
use uxsched_os::sched::SchedAttr;

/// Everything the daemon loop reacts to.
pub enum Event {
    /// A control-socket request from a client with uid `uid` (already authorised for its kind).
    Client {
        request: Request,
        uid: u32,
        reply: Sender<Response>,
    },
    /// A source says this process (or nothing) is in front of the user; its identity was read
    /// when the source observed it.
    Focus {
        source: SourceName,
        app: Option<AppId>,
    },
    /// A source runs degraded (`Some`: what is wrong and what to do) or is well again (`None`).
    Health {
        source: SourceName,
        error: Option<String>,
    },
    /// A real-time API request (protocol v1) on connection `conn` from `peer`.
    Thread {
        request: uxsched_client::Request,
        peer: std::sync::Arc<uxsched_os::peer::Peer>,
        conn: u64,
        reply: Sender<uxsched_client::Reply>,
    },
    /// Connection `conn` closed: the grants it holds until close end.
    Closed { conn: u64 },
    /// The canary found ordinary threads starved: RT grants were revoked.
    Canary,
    /// The rt lever's guard demoted threads over their run-time budget (`rt_guard.rs`).
    RtOver,
    /// The cgroup mover made every queued move (`actuators/mover.rs`).
    Moved,
    /// The tracker's critical set changed; `app`: the foreground it was found for (a set for
    /// an app that has since lost the front is stale).
    Critical {
        app: Option<i32>,
        set: Vec<Critical>,
    },
    /// The tracker resolved `resolved` episodes (keystrokes' interactions) of `app`; `held`:
    /// every thread its critical set held since the episode before (`daemon/critical_sets.rs`).
    Episode {
        app: Option<i32>,
        held: Vec<Critical>,
        resolved: u64,
    },
    /// A program started from the app in front (`sources/launch/`): in front itself until
    /// its window maps or `[storage] launch_budget_ms` runs out.
    Launch { app: AppId },
    /// A program started in the session of the app in front, outside the app's own process
    /// tree (a build typed into its terminal): whether raising the session's autogroup still
    /// raises the app alone is checked again at once (`daemon/placement.rs`).
    SessionExec,
    /// The session a source follows has had no input for longer than `[idle] after_s`, since
    /// `since` (`Some`), or input again (`None`) — `sources/idle/`; the loop withdraws that
    /// source's focus meanwhile (`daemon/idle.rs`).
    Idle {
        source: SourceName,
        since: Option<std::time::Instant>,
    },
    /// The processes playing sound now (`sources/audio/`: PipeWire output streams that run),
    /// each admitted for its session's user, its identity read when first seen.
    Audible { apps: Vec<AppId> },
    /// SIGTERM/SIGINT: restore everything and exit.
    Shutdown,
}

/// Focus sources that exist (see `sources/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceName {
    Explicit,
    Android,
    Mutter,
    X11,
    /// Every graphical session of the machine, each followed by the source that fits it.
    Auto,
    /// sway and other i3-IPC compositors.
    Sway,
    Hyprland,
    Niri,
    /// KDE Plasma's KWin, through a KWin script.
    Kwin,
    /// A compositor without an IPC of its own: wlr-foreign-toplevel-management's activated
    /// window, its process found by app id (`sources/wayland/toplevel.rs`).
    Toplevel,
    /// Feral GameMode's D-Bus API (`RegisterGame`).
    Gamemode,
    /// system76-scheduler's D-Bus API (`SetForegroundProcess`).
    System76,
}

/// A process as uxsched tracks it: pid plus start time (see `identity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct AppId {
    pub pid: i32,
    pub start: u64,
}

impl AppId {
    /// The identity of a live process now.
    pub fn of(pid: i32) -> std::io::Result<AppId> {
        let id = identity::task_id(pid)?;
        if id.pid != pid {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{pid} is a thread of process {}, not a process", id.pid),
            ));
        }
        Ok(AppId {
            pid,
            start: id.start,
        })
    }

    pub fn alive(&self) -> bool {
        identity::still_same(&TaskId {
            tid: self.pid,
            pid: self.pid,
            start: self.start,
        })
    }
}

/// Whose thread a critical thread is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CriticalKind {
    App,
    Partner,
    KernelWorker,
}

/// One thread of the critical set, as the daemon uses it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Critical {
    pub task: TaskId,
    pub comm: String,
    pub kind: CriticalKind,
    /// Woken on the current episode's path; kept or dropped when the episode resolves.
    pub provisional: bool,
    /// When the tracker decided it is critical (CLOCK_MONOTONIC ns, the kernel's event time):
    /// the start of its "input → boost applied" latency; 0 for a thread classified when its
    /// app came to the front (by name or from the store), which the focus pass boosts.
    pub since_ns: u64,
}

/// What one thread should have. `None` = leave that setting as it was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    pub nice: Option<i32>,
    /// Custom EEVDF slice (`sched_attr.sched_runtime`), ns.
    pub slice_ns: Option<u64>,
    /// Utilisation clamp `uclamp.min` (0..=1024; a hint session's boost, `rtapi/hint.rs`),
    /// only ever raised; ignored where the kernel has no uclamp.
    pub uclamp_min: Option<u32>,
    pub group: Option<Group>,
    /// Encoded I/O priority (see `actuators::ioprio`).
    pub ioprio: Option<u16>,
    /// The thread's systemd unit's `IOWeight`: raised for the front, lowered for a background
    /// app (`actuators/unit_weight.rs`; the weights are [`Desired::unit_io_weights`]).
    pub unit_io: Option<Group>,
    /// Nice of the thread's session autogroup (see `actuators::autogroup`).
    pub autogroup_nice: Option<i32>,
    /// A real-time class instead of the fair one (an app's grant through the real-time API,
    /// `rtapi/`, or the tracker's rt lever). When set it decides the thread's scheduling
    /// attributes: `slice_ns` (and `uclamp_min`) are ignored for it, and `nice` (only ever
    /// lower than the original) is the fair-class nice the thread holds meanwhile — set in
    /// the fair class before the switch, so a later demotion to it keeps the thread's lag
    /// (`uxsched_os::sched::set_keeping_lag`). Always applied with `SCHED_FLAG_RESET_ON_FORK`.
    pub rt: Option<Rt>,
    /// Move the thread to `SCHED_EXT` (the `scx` backend, `backend/scx.rs`), keeping its nice and
    /// custom slice unless `nice`/`slice_ns` say otherwise; `rt` still wins.
    pub ext: bool,
}

/// A real-time scheduling class and priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rt {
    pub policy: RtPolicy,
    /// 1..=99 (`sched_priority`).
    pub priority: u32,
}

/// The two POSIX real-time policies (SCHED_DEADLINE is not offered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RtPolicy {
    Fifo,
    Rr,
}

impl RtPolicy {
    /// The kernel's policy number.
    pub fn number(self) -> u32 {
        match self {
            RtPolicy::Fifo => uxsched_os::sched::SCHED_FIFO,
            RtPolicy::Rr => uxsched_os::sched::SCHED_RR,
        }
    }
}

/// The settings a mode wants for the device. Threads absent from `threads` want nothing: the
/// reconciler restores whatever uxsched changed on them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Desired {
    pub threads: BTreeMap<TaskId, Target>,
    /// Weight of uxsched's foreground / background groups in `cpu.shares` units.
    pub fg_shares: u64,
    pub bg_shares: u64,
    /// `IOWeight` of the unit in front / of a background app's unit on a systemd machine
    /// (`[storage] front_unit_io_weight`, `background_unit_io_weight`; 0 = leave it).
    pub unit_io_weights: (u64, u64),
}

/// The two groups uxsched manages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Group {
    Fg,
    Bg,
}

impl Group {
    pub fn dir(self) -> &'static str {
        match self {
            Group::Fg => "fg",
            Group::Bg => "bg",
        }
    }
}

/// The kernel object a setting lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Key {
    /// One thread (sched attributes, ioprio, cgroup v1 placement).
    Thread(TaskId),
    /// One process, by its leader's identity (cgroup v2 moves whole processes).
    Process(TaskId),
    /// One session's autogroup, by the kernel's autogroup id (a sequence number the kernel
    /// never reuses while it runs).
    Session(u64),
    /// One systemd unit, by its cgroup's id (the cgroup2 directory's inode number, which the
    /// kernel does not reuse while it runs).
    Unit(u64),
}

impl Key {
    /// How logs and `status` name the object.
    pub fn describe(&self) -> String {
        match self {
            Key::Thread(t) => format!("thread {}", t.tid),
            Key::Process(t) => format!("process {}", t.pid),
            Key::Session(id) => format!("autogroup-{id}"),
            Key::Unit(id) => format!("unit cgroup {id}"),
        }
    }
}

/// One kind of setting and its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Value {
    Sched(SchedAttr),
    /// A cgroup path relative to the hierarchy's mount.
    Cgroup(String),
    /// An encoded I/O priority.
    Ioprio(u16),
    /// The nice value of the task's session autogroup.
    Autogroup(i32),
    /// A systemd unit's `CPUWeight` (`cpu.weight` units; `actuators::unit::UNSET` = not set).
    Unit(u64),
    /// A systemd unit's `IOWeight` (`io.weight` units; `actuators::unit::UNSET` = not set).
    #[serde(rename = "unit_io")]
    UnitIo(u64),
}

/// The kinds of setting, the journal's second key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Sched,
    Cgroup,
    Ioprio,
    Autogroup,
    Unit,
    #[serde(rename = "unit_io")]
    UnitIo,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Sched => "sched",
            Kind::Cgroup => "cgroup",
            Kind::Ioprio => "ioprio",
            Kind::Autogroup => "autogroup",
            Kind::Unit => "unit",
            Kind::UnitIo => "unit_io",
        }
    }
}

impl Value {
    pub fn kind(&self) -> Kind {
        match self {
            Value::Sched(_) => Kind::Sched,
            Value::Cgroup(_) => Kind::Cgroup,
            Value::Ioprio(_) => Kind::Ioprio,
            Value::Autogroup(_) => Kind::Autogroup,
            Value::Unit(_) => Kind::Unit,
            Value::UnitIo(_) => Kind::UnitIo,
        }
    }
}
