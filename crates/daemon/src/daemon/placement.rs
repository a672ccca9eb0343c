//! Where the `uxsched` mode puts the app in front: whether it may raise the app through its
//! session's autogroup, and whether the rt lever's threads must join the fg group. Both are
//! decided on the app's home cgroup and checked at most once per `rescan_ms` (the autogroup
//! check walks every process).

use super::Daemon;
use crate::types::AppId;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use tracing::warn;
use uxsched_os::identity::TaskId;

/// How long a placement decision stands without news from the launch watcher.
const PLACEMENT_RECHECK: Duration = Duration::from_secs(1);

/// The placement decisions for one app (`State::autogroup`, `State::rt_needs_fg`,
/// `State::rt_keeps_home`; `rt_refused`: no cgroup open to the app takes real-time threads).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Placement {
    pub autogroup: bool,
    pub rt_needs_fg: bool,
    pub rt_keeps_home: bool,
    pub rt_refused: bool,
}

impl Placement {
    /// The app's home cgroup refuses real-time threads (whether or not the fg group takes
    /// them: `rt_needs_fg` or `rt_refused`).
    pub fn home_refuses_rt(&self) -> bool {
        self.rt_needs_fg || self.rt_refused
    }
}

impl Daemon {
    /// [`Daemon::placement`] of `app`, worked out at most once per [`PLACEMENT_RECHECK`] (or
    /// `rescan_ms`, if longer) for the same app: the autogroup walk reads every process on the
    /// machine — 64 % of a pass at every 200 ms rescan (docs/daemon.md, "What each thread
    /// costs"). A shell can start a build at any time: the launch watcher sees its exec in the
    /// app's session and drops this cache at once (`Event::SessionExec`); the recheck covers
    /// what it cannot see (a fork without exec, a watcher that could not start).
    pub(super) fn placement_now(&mut self, app: AppId) -> Placement {
        let fresh = PLACEMENT_RECHECK.max(Duration::from_millis(self.cfg.rescan_ms));
        match self.placement_seen {
            Some((a, at, p)) if a == app && at.elapsed() < fresh => p,
            _ => {
                let p = self.placement(app);
                self.placement_seen = Some((app, Instant::now(), p));
                p
            }
        }
    }

    /// The threads the rt lever must leave on the fair boost because their cgroup refuses
    /// real-time threads (`State::rt_refused`): every thread of the app when no group open to
    /// it takes them, those still at home when they must join the fg group first (their move
    /// is queued: real time once it is made, at the pass the mover asks for), and partners in
    /// such a group (kernel workers live in the root). One `/proc/TID/cgroup` read per partner
    /// (and per critical app thread where it must join the fg group: only those are raised),
    /// only where uxsched has groups.
    pub(super) fn rt_refused(
        &self,
        app: Option<&crate::state::App>,
        chain: &[crate::types::Critical],
        placement: Placement,
    ) -> BTreeSet<TaskId> {
        use crate::types::CriticalKind;
        let Some(groups) = self.rec.groups.as_ref() else {
            return BTreeSet::new();
        };
        if !self.policy().rt_lever(&self.cfg) {
            return BTreeSet::new();
        }
        let own = app
            .filter(|_| placement.home_refuses_rt())
            .into_iter()
            .flat_map(|a| a.threads.iter())
            .filter(|t| {
                placement.rt_refused || (t.role.is_critical() && groups.refuses_rt(t.task.tid))
            })
            .map(|t| t.task);
        let partners = chain
            .iter()
            .filter(|c| c.kind == CriticalKind::Partner && groups.refuses_rt(c.task.tid))
            .map(|c| c.task);
        own.chain(partners).collect()
    }

    /// The app's critical threads the journal holds in the fg group, on the rt lever where
    /// that group takes real-time threads and threads move one by one (cgroup v1):
    /// `State::rt_in_fg`. One journal read per critical thread, none otherwise.
    pub(super) fn rt_in_fg(&self, app: Option<&crate::state::App>) -> BTreeSet<TaskId> {
        use crate::actuators::cgroup::Granularity;
        use crate::types::Group;
        use crate::types::Key;
        use crate::types::{Kind, Value};
        let (Some(app), Some(groups)) = (app, self.rec.groups.as_ref()) else {
            return BTreeSet::new();
        };
        if !self.policy().rt_lever(&self.cfg)
            || !groups.takes_rt()
            || groups.hierarchy.granularity() != Granularity::Thread
        {
            return BTreeSet::new();
        }
        let in_fg = |v: &Value| matches!(v, Value::Cgroup(p) if groups.which(p) == Some(Group::Fg));
        app.threads
            .iter()
            .filter(|t| t.role.is_critical())
            .filter(|t| {
                let row = self.rec.journal.get(Kind::Cgroup, &Key::Thread(t.task));
                row.is_ok_and(|e| e.is_some_and(|e| in_fg(&e.applied)))
            })
            .map(|t| t.task)
            .collect()
    }

    fn placement(&self, app: AppId) -> Placement {
        use crate::actuators::cgroup::Granularity;
        let home = self.home_cgroup(app);
        let groups = self.rec.groups.as_ref();
        let home_refuses = groups
            .zip(home.as_deref())
            .is_some_and(|(g, home)| g.refuses_rt_at(home));
        let fg_takes = groups.is_some_and(|g| g.takes_rt());
        let moves_process =
            groups.is_some_and(|g| g.hierarchy.granularity() == Granularity::Process);
        Placement {
            autogroup: self.autogroup_applies(app.pid, home.as_deref()),
            rt_needs_fg: home_refuses && fg_takes,
            rt_keeps_home: moves_process && !fg_takes && !home_refuses,
            rt_refused: home_refuses && !fg_takes,
        }
    }

    /// Whether raising `pid`'s session autogroup raises the app and nothing else: autogroup is
    /// on, the process has an autogroup of its own (not the boot session's root group), its
    /// `home` cgroup is the root or one of ours (any other cgroup overrides the autogroup,
    /// `task_wants_autogroup`), and the session holds only the app and what it forked — a
    /// terminal's session also holds its shell and whatever that starts (a build), which must
    /// not be raised with it.
    fn autogroup_applies(&self, pid: i32, home: Option<&str>) -> bool {
        use uxsched_os::autogroup;
        if !autogroup::enabled() || autogroup::get(pid).is_err() {
            return false;
        }
        let own_cgroup = self
            .rec
            .groups
            .as_ref()
            .is_none_or(|g| home.is_some_and(|home| home == "/" || g.which(home).is_some()));
        own_cgroup
            && match autogroup::exclusive_to(pid) {
                Ok(only_the_app) => only_the_app,
                Err(e) => {
                    warn!(
                        pid,
                        "cannot list the app's session ({e}); not using its autogroup"
                    );
                    false
                }
            }
    }

    /// The app's home cgroup: where its main thread was before uxsched moved it (the
    /// journal's original), else where it is. Decisions about placement are made on it, so
    /// that they do not flip once uxsched has moved the app (a unit's app moved into the fg
    /// group would otherwise look like one in uxsched's own groups).
    fn home_cgroup(&self, app: AppId) -> Option<String> {
        use crate::actuators::cgroup::Granularity;
        use crate::types::Key;
        use crate::types::{Kind, Value};
        let g = self.rec.groups.as_ref()?;
        let main = uxsched_os::identity::TaskId {
            tid: app.pid,
            pid: app.pid,
            start: app.start,
        };
        // The key the placement actuator journals the main thread's move under.
        let key = match g.hierarchy.granularity() {
            Granularity::Thread => Key::Thread(main),
            Granularity::Process => Key::Process(main),
        };
        match self.rec.journal.get(Kind::Cgroup, &key) {
            Ok(Some(e)) => match e.original {
                Value::Cgroup(path) => Some(path),
                _ => None,
            },
            _ => g.hierarchy.current(app.pid).ok(),
        }
    }
}
