//! Sources of "what is in front of the user". Each only sends events into the daemon's one
//! channel; the daemon loop owns the state. Several can run at once; the config's `sources`
//! list gives their precedence.
//!
//! A desktop source (x11, mutter) names a pid on the word of an unprivileged program (any X
//! client can set `_NET_WM_PID`, any user can mark a cgroup it owns), so [`admit`] acts on it only
//! if the process belongs to the user who owns that display or session — never root's, another
//! user's or a system service's unless `sources_any_owner` says so — and captures its identity
//! where it is observed: the daemon drops a focus whose process is no longer that one.

pub mod android;
pub mod audio;
pub mod auto;
pub mod cpufreq;
pub mod dbus;
pub mod explicit;
pub mod idle;
pub mod launch;
pub mod mutter;
pub mod tracker;
pub mod wayland;
pub mod x11;

use crate::types::AppId;
use crate::types::Event;
use crate::types::SourceName;
use std::sync::mpsc::Sender;
use uxsched_os::identity;

/// Whose processes a source may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// The user who owns the display or session (or the socket client's uid).
    pub uid: u32,
    /// Accept any process (root's socket requests; `sources_any_owner`).
    pub any: bool,
}

/// Check that process `pid` may be acted on for `owner` and capture its identity, both from one
/// consistent look at the process (see [`identity::observe`]).
pub fn admit(pid: i32, owner: Owner) -> Result<AppId, String> {
    if pid <= 0 {
        return Err(format!("pid {pid} is not a process id"));
    }
    let (p, _pidfd) = identity::observe(pid).map_err(|e| format!("cannot focus pid {pid}: {e}"))?;
    let app = AppId {
        pid,
        start: p.start,
    };
    if owner.any {
        return Ok(app);
    }
    if !p.owned_by(owner.uid) {
        return Err(format!(
            "pid {pid} belongs to uid {} (real, effective, saved, fs: {:?}), not to uid {}",
            p.uids[0], p.uids, owner.uid
        ));
    }
    if owner.uid == 0 {
        return Err(format!("pid {pid} is root's"));
    }
    if let Some(cg) = p
        .cgroup
        .as_deref()
        .filter(|c| c.starts_with("/system.slice/"))
    {
        return Err(format!("pid {pid} is a system service's ({cg})"));
    }
    Ok(app)
}

/// Start a focus source's thread (named `name`) at the daemon's own fair priority: nice −20,
/// not inherited by what it forks ([`uxsched_os::own::own_fair`]). A focus change is read on
/// this thread; at nice 0 beside a load it waits behind the load before the loop even hears of
/// it, as the loop itself did (daemon/mod.rs, `serve`). The thread blocks on its socket and
/// does little work when it runs.
pub(crate) fn spawn_raised<T: Send + 'static>(
    name: String,
    body: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    std::thread::Builder::new().name(name).spawn(move || {
        if let Err(e) = uxsched_os::sched::set(0, &uxsched_os::own::own_fair()) {
            tracing::debug!(
                "a source's thread stays at its nice ({e}): focus changes may wait behind the load"
            );
        }
        body()
    })
}

/// The daemon's channel is closed: the source stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DaemonGone;

impl std::fmt::Display for DaemonGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the daemon stopped")
    }
}

impl std::error::Error for DaemonGone {}

/// Sends a source's focus changes: admits each pid named, and says once per pid why one is
/// not acted on (then it counts as nothing in front). Only a change of what is sent is sent:
/// a refused pid after nothing in front is not a second "nothing in front".
pub struct Reporter {
    source: SourceName,
    events: Sender<Event>,
    /// The pid the source last named (refused or not).
    last: Option<i32>,
    /// The app last sent; nothing in front before the first change.
    sent: Option<AppId>,
    error: Option<String>,
    /// Whether the session was last said to be idle.
    idle: bool,
}

impl Reporter {
    pub fn new(source: SourceName, events: Sender<Event>) -> Reporter {
        Reporter {
            source,
            events,
            last: None,
            sent: None,
            error: None,
            idle: false,
        }
    }

    /// The source sees `pid` (or nothing) in front, named for `owner` (Err: for nobody it
    /// may act for, and why). Err once the daemon is gone.
    pub fn seen(
        &mut self,
        pid: Option<i32>,
        owner: Result<Owner, String>,
    ) -> Result<(), DaemonGone> {
        if pid == self.last {
            return Ok(());
        }
        self.last = pid;
        let app = pid.and_then(|p| {
            owner
                .and_then(|o| admit(p, o))
                .map_err(|e| {
                    tracing::warn!(
                        source = ?self.source,
                        "not acted on: {e}; a desktop source may name only the processes of the \
                         user who owns the display or session (`sources_any_owner` allows any)"
                    )
                })
                .ok()
        });
        if app == self.sent {
            return Ok(());
        }
        self.sent = app;
        let ev = Event::Focus {
            source: self.source,
            app,
        };
        self.events.send(ev).map_err(|_| DaemonGone)
    }

    /// Report the session's idleness (`sources/idle/`; sent only when it changes).
    pub fn idle(&mut self, change: idle::Change) -> Result<(), DaemonGone> {
        let since = change.since();
        if since.is_some() == self.idle {
            return Ok(());
        }
        self.idle = since.is_some();
        let ev = Event::Idle {
            source: self.source,
            since,
        };
        self.events.send(ev).map_err(|_| DaemonGone)
    }

    /// Report the source's health (sent only when it changes).
    pub fn health(&mut self, error: Option<String>) -> Result<(), DaemonGone> {
        if error == self.error {
            return Ok(());
        }
        self.error.clone_from(&error);
        let ev = Event::Health {
            source: self.source,
            error,
        };
        self.events.send(ev).map_err(|_| DaemonGone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> (i32, u32) {
        // SAFETY: getuid has no preconditions.
        (std::process::id() as i32, unsafe { libc::getuid() })
    }

    #[test]
    fn only_the_owners_own_processes_are_admitted() {
        let (pid, uid) = me();
        let any = Owner { uid, any: true };
        assert_eq!(admit(pid, any).unwrap().pid, pid);
        assert!(admit(0, any).is_err());
        assert!(admit(1 << 30, any).unwrap_err().contains("cannot focus"));
        // pid 1 is root's: never for another owner, nor for an owner that is root.
        let e = admit(
            1,
            Owner {
                uid: 65534,
                any: false,
            },
        )
        .unwrap_err();
        assert!(e.contains("belongs to uid 0"), "{e}");
        let e = admit(1, Owner { uid: 0, any: false }).unwrap_err();
        assert!(e.contains("root's"), "{e}");
        if uid != 0 {
            assert_eq!(admit(pid, Owner { uid, any: false }).unwrap().pid, pid);
        }
        let other = Owner {
            uid: uid.wrapping_add(1),
            any: false,
        };
        assert!(admit(pid, other).unwrap_err().contains("belongs to uid"));
    }

    #[test]
    fn a_reporter_sends_changes_only_and_a_refused_pid_as_nothing_in_front() {
        let (pid, uid) = me();
        let (tx, rx) = std::sync::mpsc::channel();
        let mut r = Reporter::new(SourceName::X11, tx);
        let owner = Ok(Owner { uid, any: true });
        r.seen(Some(pid), owner.clone()).unwrap();
        r.seen(Some(pid), owner.clone()).unwrap(); // unchanged: not sent again
        r.seen(
            Some(1),
            Ok(Owner {
                uid: 65534,
                any: false,
            }),
        )
        .unwrap();
        // Refused, then nothing: still nothing in front, not sent again.
        r.seen(Some(pid), Err("not a session".into())).unwrap();
        r.seen(None, Err(String::new())).unwrap();
        r.seen(Some(pid), owner.clone()).unwrap();
        r.health(Some("degraded: x".into())).unwrap();
        r.health(Some("degraded: x".into())).unwrap();
        r.health(None).unwrap();
        drop(r);
        let got: Vec<String> = rx
            .iter()
            .map(|ev| match ev {
                Event::Focus { app, .. } => format!("focus {:?}", app.map(|a| a.pid)),
                Event::Health { error, .. } => format!("health {error:?}"),
                _ => "other".into(),
            })
            .collect();
        let want = [
            format!("focus Some({pid})"),
            "focus None".into(),
            format!("focus Some({pid})"),
            "health Some(\"degraded: x\")".into(),
            "health None".into(),
        ];
        assert_eq!(got, want);
    }
}
