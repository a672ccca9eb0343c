//! What the daemon knows about the device: the focused app and its threads with their roles,
//! the apps that were in front before (background), and the load figures some modes use.
//! Built by scanning /proc; the policies read it and nothing else, so they stay pure.

use crate::config::Config;
use crate::types::AppId;
use crate::types::{Critical, CriticalKind};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::io;
use uxsched_os::identity::{self, TaskId};

/// How many previously focused apps are remembered as "background apps" (bounded memory).
pub const MAX_BACKGROUND_APPS: usize = 16;

/// A thread's role in the interaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The main/UI thread (tid = pid): receives input and drives frames.
    Ui,
    /// A render thread (name in `render_threads`).
    Render,
    /// A delay-critical thread: named by the config (`shuffledog.critical_threads`) or found on
    /// the interaction's path by the tracker.
    Critical,
    /// Any other thread of the foreground app.
    Other,
    /// A thread of a background app.
    Background,
}

impl Role {
    /// On the interaction's path: what the `uxsched` mode raises as critical.
    pub fn is_critical(self) -> bool {
        matches!(self, Role::Ui | Role::Render | Role::Critical)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadInfo {
    pub task: TaskId,
    pub comm: String,
    pub role: Role,
    /// CPU the thread last ran on.
    pub cpu: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct App {
    pub id: AppId,
    pub threads: Vec<ThreadInfo>,
}

/// The daemon's picture of the device at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct State {
    pub focus: Option<App>,
    pub background: Vec<App>,
    /// Milliseconds since the focus last changed (the start of the current interaction).
    pub since_focus_ms: u64,
    /// Runnable tasks system-wide (`procs_running` of /proc/stat).
    pub runnable: u32,
    /// Online CPUs.
    pub cpus: u32,
    /// f_max / f_cur of the CPUs the focused app's threads last ran on (1.0 without cpufreq).
    pub freq_ratio: f64,
    /// The focused app is scheduled by its session autogroup (autogroup on, a session of its
    /// own, no other CPU cgroup overriding it).
    pub autogroup: bool,
    /// Threads outside the app that the tracker found on its interactions' path (partners'
    /// threads, kernel workers), already bounded by the config and ownership rules.
    pub chain: Vec<crate::types::Critical>,
    /// Threads of the `rt` lever that used up their run-time budget: on the fair lever until
    /// their cool-down ends (`rt_budget.rs`).
    pub rt_demoted: std::collections::BTreeSet<TaskId>,
    /// The `rt` lever is unavailable (no guard or no canary) or suspended (the canary
    /// tripped): the critical set gets the fair boost.
    pub rt_suspended: bool,
    /// The app's own cgroup refuses real-time threads (RT group scheduling, no runtime: a
    /// systemd-like unit on cgroup v1) and uxsched's fg group takes them (`Groups::takes_rt`):
    /// the rt lever's threads then join the fg group rather than stay where FIFO is refused.
    pub rt_needs_fg: bool,
    /// The app must stay in its own cgroup for the rt lever: uxsched's fg group refuses
    /// real-time threads and the hierarchy moves whole processes (cgroup v2), so moving any of
    /// its threads there would take the critical ones out of real time (`Groups::probe_rt`).
    pub rt_keeps_home: bool,
    /// Threads the rt lever cannot raise where they are or will be (their cgroup refuses
    /// real-time threads and no group that takes them is open to them), or not yet (their move
    /// into the fg group, which takes them, is queued): the fair boost instead.
    pub rt_refused: std::collections::BTreeSet<TaskId>,
    /// The app's critical threads that uxsched already keeps in its fg group (moved there
    /// while they were not critical), where that group takes real-time threads: on the rt
    /// lever they stay there rather than move home — a move waits for an RCU grace period
    /// (median 24 ms on the 2-vCPU VM with 6 hogs, `scripts/cgroup-move-cost.sh`), which held
    /// the daemon's loop and the next keystroke's fast path as long when the loop made the
    /// moves; the mover (`actuators/mover.rs`) waits now, and the move is still needless.
    pub rt_in_fg: std::collections::BTreeSet<TaskId>,
    /// Programs started from the app in front, in front until their window maps or their
    /// budget runs out (`daemon/launch.rs`).
    pub launching: Vec<App>,
    /// The audio threads of the processes playing sound (`sources/audio/threads.rs`), which
    /// the `uxsched` mode protects below the app in front.
    pub audible: Vec<TaskId>,
}

/// Classify a thread of an app.
pub fn role_of(task: &TaskId, comm: &str, foreground: bool, cfg: &Config) -> Role {
    if !foreground {
        Role::Background
    } else if task.tid == task.pid {
        Role::Ui
    } else if cfg.render_threads.iter().any(|n| n == comm) {
        Role::Render
    } else if cfg.shuffledog.critical_threads.iter().any(|n| n == comm) {
        Role::Critical
    } else {
        Role::Other
    }
}

/// Scan an app's threads now, with those of its process `family` (the same program under it,
/// `uxsched_os::process_tree::family`: a browser's renderers and GPU process are the app too);
/// `None` once the process is gone or its pid was recycled. Only the app's own main thread is
/// its UI thread; the family's main threads are its other threads.
pub fn scan_app(id: AppId, family: &[i32], foreground: bool, cfg: &Config) -> Option<App> {
    if !id.alive() {
        return None;
    }
    let threads = std::iter::once(id.pid)
        .chain(family.iter().copied().filter(|&p| p != id.pid))
        .flat_map(|pid| {
            identity::threads(pid).into_iter().filter_map(move |tid| {
                let st = identity::stat(tid).ok()?;
                let task = TaskId {
                    tid,
                    pid,
                    start: st.start,
                };
                let role = match role_of(&task, &st.comm, foreground, cfg) {
                    Role::Ui if pid != id.pid => Role::Other,
                    r => r,
                };
                Some(ThreadInfo {
                    role,
                    comm: st.comm,
                    cpu: st.processor,
                    task,
                })
            })
        })
        .collect();
    Some(App { id, threads })
}

/// Apply the tracker's critical set to the app in front: its own threads on the path become
/// [`Role::Critical`] (UI and render keep their roles), and the threads outside it are returned
/// as the chain — bounded by the config (`[tracker] partners`, `kernel_workers`) and by
/// ownership: a partner must belong to the app's user or be the display server (a thread of
/// another user is never raised because an app woke it).
pub fn apply_tracker(
    app: &mut App,
    owner: impl FnOnce() -> Option<u32>,
    set: &[Critical],
    cfg: &Config,
) -> Vec<Critical> {
    for t in &mut app.threads {
        if t.role == Role::Other && set.iter().any(|c| c.task == t.task) {
            t.role = Role::Critical;
        }
    }
    chain(app.id, owner, set, cfg)
}

/// The user an app runs as (its real uid), whose other processes may be raised with it; `None`
/// once it has exited.
pub fn owner(app: AppId) -> Option<u32> {
    let leader = TaskId {
        tid: app.pid,
        pid: app.pid,
        start: app.start,
    };
    identity::uids_of(&leader).ok().map(|u| u[0])
}

/// The members of the critical set outside `app` that may be raised with it (`owner`: the user
/// it runs as, asked at most once and only when a partner is in the set):
/// see [`apply_tracker`].
pub fn chain(
    app: AppId,
    owner: impl FnOnce() -> Option<u32>,
    set: &[Critical],
    cfg: &Config,
) -> Vec<Critical> {
    if set.is_empty() {
        return Vec::new(); // every rescan without a tracker: no /proc reads
    }
    // A partner must have every uid of the app's user (`owner`, asked only when a partner
    // asks; a set-uid program is not the user's). Each partner process is looked at once per
    // call, two reads (`identity::uids_of`): this runs between an input and its boost
    // (`daemon/fast.rs`), where every /proc read is latency.
    let app_uid = std::cell::OnceCell::new();
    let mut owner = Some(owner);
    let mut owned: HashMap<i32, bool> = HashMap::new();
    // The thread `uids_of` proved alive just now (its second read): not read a third time.
    let proven = std::cell::Cell::new(None);
    let mut owned_by_user = |task: &TaskId| {
        let uid = *app_uid.get_or_init(|| owner.take().and_then(|f| f()));
        *owned.entry(task.pid).or_insert_with(|| {
            uid.is_some_and(|u| {
                let uids = identity::uids_of(task);
                if uids.is_ok() {
                    proven.set(Some(*task));
                }
                uids.is_ok_and(|uids| identity::all_uids_are(&uids, u))
            })
        })
    };
    // The daemon itself answers the app (a focus request, a status read) and so shows up on the
    // path: raising it would put its own rescans ahead of the app it serves (measured: it
    // raised xterm's p50, docs/results/README.md).
    let me = std::process::id() as i32;
    let mut chain = Vec::new();
    for c in set
        .iter()
        .filter(|c| c.task.pid != app.pid && c.task.pid != me)
    {
        let allowed = match c.kind {
            CriticalKind::App => false,
            CriticalKind::KernelWorker => cfg.tracker.kernel_workers,
            CriticalKind::Partner => {
                cfg.tracker.partners && (is_display(&c.comm, cfg) || owned_by_user(&c.task))
            }
        };
        if allowed && (proven.get() == Some(c.task) || identity::still_same(&c.task)) {
            chain.push(c.clone());
        }
    }
    chain
}

/// Whether `comm` names a display server's thread: the tracker's defaults or the config's own
/// `[tracker] display_threads` (the tracker is given both; the daemon read only the defaults,
/// so a configured display server running as another user was never raised with the app).
fn is_display(comm: &str, cfg: &Config) -> bool {
    static DEFAULTS: std::sync::LazyLock<uxsched_tracker::TrackerConfig> =
        std::sync::LazyLock::new(Default::default);
    DEFAULTS.is_display(comm) || cfg.tracker.display_threads.iter().any(|d| d == comm)
}

/// Runnable tasks now, from `/proc/stat`'s `procs_running` (includes the reader itself).
pub fn runnable_now() -> io::Result<u32> {
    let text = uxsched_os::procfs::read_to_string("/proc/stat")?;
    text.lines()
        .find_map(|l| l.strip_prefix("procs_running "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no procs_running in /proc/stat"))
}

/// Online CPUs.
pub fn cpus_now() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// Apps the user had in front before, most recent first, bounded by [`MAX_BACKGROUND_APPS`].
#[derive(Debug, Default)]
pub struct History {
    apps: VecDeque<AppId>,
}

impl History {
    /// Remember `app` as having left the front.
    pub fn push(&mut self, app: AppId) {
        self.apps.retain(|a| *a != app);
        self.apps.push_front(app);
        self.apps.truncate(MAX_BACKGROUND_APPS);
    }

    /// Forget `app` (it is in front again) and every app that has exited.
    pub fn refresh(&mut self, focus: Option<AppId>) {
        self.apps.retain(|a| Some(*a) != focus && a.alive());
    }

    pub fn clear(&mut self) {
        self.apps.clear();
    }

    pub fn iter(&self) -> impl Iterator<Item = &AppId> {
        self.apps.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partner_is_raised_only_for_its_own_user_and_the_owner_is_asked_once_if_at_all() {
        let cfg = Config::default();
        let mut children: Vec<_> = (0..2)
            .map(|_| {
                std::process::Command::new("sleep")
                    .arg("30")
                    .spawn()
                    .unwrap()
            })
            .collect();
        let app = AppId::of(children[0].id() as i32).unwrap();
        let partner_pid = children[1].id() as i32;
        let critical = |pid: i32, kind| Critical {
            task: identity::task_id(pid).unwrap(),
            comm: "sleep".into(),
            kind,
            provisional: false,
            since_ns: 1,
        };
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        let set = [
            critical(app.pid, CriticalKind::App),
            critical(partner_pid, CriticalKind::Partner),
        ];
        let asked = std::cell::Cell::new(0);
        let asked = &asked;
        let ask = |uid| {
            move || {
                asked.set(asked.get() + 1);
                Some(uid)
            }
        };
        assert_eq!(
            chain(app, ask(me), &set, &cfg).len(),
            1,
            "the user's own partner"
        );
        assert_eq!(asked.get(), 1);
        assert!(
            chain(app, ask(me + 1), &set, &cfg).is_empty(),
            "another user's"
        );
        assert!(
            chain(app, || None, &set, &cfg).is_empty(),
            "no owner: no partner"
        );
        assert_eq!(chain(app, ask(me), &set[..1], &cfg).len(), 0);
        assert_eq!(asked.get(), 2, "not asked without a partner in the set");
        // A display server is raised whoever runs it: the defaults, and the config's own.
        let mut cfg = cfg;
        let mut shown = set.clone();
        shown[1].comm = "Xorg".into();
        assert_eq!(
            chain(app, ask(me + 1), &shown, &cfg).len(),
            1,
            "a default display"
        );
        shown[1].comm = "mycompositor".into();
        assert!(chain(app, ask(me + 1), &shown, &cfg).is_empty());
        cfg.tracker.display_threads = vec!["mycompositor".into()];
        assert_eq!(
            chain(app, ask(me + 1), &shown, &cfg).len(),
            1,
            "a configured display"
        );
        for c in &mut children {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    #[test]
    fn roles_follow_tid_and_names() {
        let cfg = Config::default();
        let t = |tid| TaskId {
            tid,
            pid: 10,
            start: 1,
        };
        assert_eq!(role_of(&t(10), "app", true, &cfg), Role::Ui);
        assert_eq!(role_of(&t(11), "RenderThread", true, &cfg), Role::Render);
        assert_eq!(role_of(&t(12), "worker", true, &cfg), Role::Other);
        assert_eq!(role_of(&t(10), "app", false, &cfg), Role::Background);
    }

    #[test]
    fn history_is_bounded_and_deduplicated() {
        let me = AppId::of(std::process::id() as i32).unwrap();
        let mut h = History::default();
        for _ in 0..3 {
            h.push(me);
        }
        assert_eq!(h.iter().count(), 1);
        for i in 0..40 {
            h.push(AppId {
                pid: 1_000_000 + i,
                start: 1,
            });
        }
        assert_eq!(h.iter().count(), MAX_BACKGROUND_APPS);
        h.refresh(None);
        assert_eq!(h.iter().count(), 0, "dead apps are forgotten");
    }

    #[test]
    fn scanning_this_process_finds_its_ui_thread() {
        let me = AppId::of(std::process::id() as i32).unwrap();
        let app = scan_app(me, &[], true, &Config::default()).unwrap();
        let ui = app.threads.iter().find(|t| t.task.tid == me.pid).unwrap();
        assert_eq!(ui.role, Role::Ui);
        // This thread is running while it reads: at least 1, and never more than all tasks.
        let runnable = runnable_now().unwrap();
        assert!(runnable >= 1, "{runnable}");
        let loadavg = uxsched_os::procfs::read_to_string("/proc/loadavg").unwrap();
        let total: u32 = loadavg
            .split_whitespace()
            .nth(3)
            .unwrap()
            .split('/')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        assert!(runnable <= total, "{runnable} runnable of {total} tasks");
    }
}
