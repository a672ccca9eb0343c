//! Whether the `uxsched` mode may raise the app through its session's autogroup (checked at
//! most once per `rescan_ms`: the check walks every process).

use super::Daemon;
use std::time::{Duration, Instant};
use tracing::warn;

impl Daemon {
    /// Whether raising `pid`'s session autogroup raises the app and nothing else: autogroup is
    /// on, the process has an autogroup of its own (not the boot session's root group), it sits
    /// in the root CPU cgroup or one of ours (any other cgroup overrides the autogroup,
    /// `task_wants_autogroup`), and the session holds only the app and what it forked — a
    /// terminal's session also holds its shell and whatever that starts (a build), which must
    /// not be raised with it. Checked on every rescan: a shell can start a build at any time.
    /// [`Daemon::autogroup_applies`], walked at most once per `rescan_ms` for the same app:
    /// the walk reads every process, and the tracker can ask for passes far more often.
    pub(super) fn autogroup_applies_now(&mut self, pid: i32) -> bool {
        let fresh = Duration::from_millis(self.cfg.rescan_ms);
        match self.autogroup_seen {
            Some((p, at, yes)) if p == pid && at.elapsed() < fresh => yes,
            _ => {
                let yes = self.autogroup_applies(pid);
                self.autogroup_seen = Some((pid, Instant::now(), yes));
                yes
            }
        }
    }

    fn autogroup_applies(&self, pid: i32) -> bool {
        use crate::actuators::autogroup;
        if !autogroup::enabled() || autogroup::get(pid).is_err() {
            return false;
        }
        let own_cgroup = self.rec.groups.as_ref().is_none_or(|g| {
            self.home_cgroup(pid)
                .is_some_and(|home| home == "/" || g.which(&home).is_some())
        });
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

    /// App `pid`'s home cgroup: where its main thread was before uxsched moved it (the
    /// journal's original), else where it is. Decisions about placement are made on it, so
    /// that they do not flip once uxsched has moved the app (a unit's app moved into the fg
    /// group would otherwise look like one in uxsched's own groups).
    pub(super) fn home_cgroup(&self, pid: i32) -> Option<String> {
        use crate::actuators::Key;
        use crate::journal::{Kind, Value};
        let g = self.rec.groups.as_ref()?;
        let main = crate::identity::task_id(pid).ok()?;
        let moved = [Key::Thread(main), Key::Process(main)]
            .iter()
            .find_map(|k| self.rec.journal.get(Kind::Cgroup, k).ok().flatten());
        match moved.map(|e| e.original) {
            Some(Value::Cgroup(path)) => Some(path),
            _ => g.hierarchy.current(pid).ok(),
        }
    }
}
