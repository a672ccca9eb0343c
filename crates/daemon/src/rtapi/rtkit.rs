//! rtkit compatibility: the daemon can own `org.freedesktop.RealtimeKit1` on the system bus
//! (`[rtkit] enable = true`), so programs that already ask rtkit for real time — PipeWire,
//! WebKit, SDL, Firefox — get uxsched's policy unchanged. The interface is rtkit's exactly
//! (methods, argument and property types as in rtkit's `org.freedesktop.RealtimeKit1.xml`);
//! every request goes down the real-time API's own path (`Event::Thread` → [`super::Grants`]):
//! the same approval rules, RLIMIT_RTTIME, caps, rate, RT bound and canary, identity checked
//! before and after acting, applied and restored by the reconciler.
//!
//! Who asks is the bus's word, never the message's: `GetConnectionCredentials` (uid, pid, and
//! the bus's pidfd `ProcessFD` where it has one — dbus-broker, dbus-daemon ≥ 1.15; otherwise a
//! pidfd opened at once, the window rtkit itself has). A thread of the caller's own process
//! only; `…WithPID` may name another process of the same uid (rtkit's rule) only with
//! `[rtkit] same_user_processes = true`. As in rtkit, thread 0 is the process's main thread
//! and a grant lasts until the thread exits (`until: exit`) or `ResetKnown`/`ResetAll`.
//! Refusals are D-Bus errors with rtkit's names: `org.freedesktop.DBus.Error.AccessDenied` for
//! what policy, limits or identity refuse (rtkit's EPERM/EBUSY), `InvalidArgs` for a malformed
//! ask, `Failed` when the kernel does not hold the change; the message gives uxsched's reason.

use crate::types::Event;

use crate::config::rtkit::Rtkit;
use std::os::fd::AsFd;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::{info, warn};
use uxsched_client::proto::{Ask, Policy, Refusal, Reply, Request, Until};
use uxsched_os::identity::{self, Pidfd, TaskId};
use uxsched_os::peer::Peer;
use zbus::fdo;
use zbus::message::Header;
use zbus::names::BusName;

/// The well-known name and object rtkit serves.
pub const BUS_NAME: &str = "org.freedesktop.RealtimeKit1";
pub const OBJECT_PATH: &str = "/org/freedesktop/RealtimeKit1";
/// The connection id D-Bus grants carry in [`super::Grants`] (never a socket's: those count
/// up from 0). Their grants last `until: exit`, so no close ever ends them.
pub const CONN: u64 = u64::MAX;
/// How long a D-Bus caller waits for the daemon loop (as the socket's clients do).
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// The served interface; dropping it leaves the bus (and releases the name).
pub struct Service {
    _conn: zbus::blocking::Connection,
}

/// Serve rtkit's interface if `[rtkit] enable`, its properties from `rtapi` as in force (no RT
/// without the canary); a bus that cannot be reached or a name already owned is logged (with
/// what to do) and the daemon goes on without it.
pub fn start(
    r: &Rtkit,
    rtapi: &crate::config::rtapi::RtApi,
    events: Sender<Event>,
) -> Option<Service> {
    if !r.enable {
        return None;
    }
    let bus = if r.address.is_empty() {
        "the system bus".to_owned()
    } else {
        r.address.clone()
    };
    let iface = RealtimeKit {
        same_user_processes: r.same_user_processes,
        limits: Limits::of(rtapi),
        events: Mutex::new(events),
        known: Mutex::default(),
    };
    let built = (|| {
        let builder = if r.address.is_empty() {
            zbus::blocking::connection::Builder::system()?
        } else {
            zbus::blocking::connection::Builder::address(r.address.as_str())?
        };
        builder
            .name(BUS_NAME)?
            .serve_at(OBJECT_PATH, iface)?
            .build()
    })();
    match built {
        Ok(conn) => {
            info!("rtkit interface: serving {BUS_NAME} on {bus}");
            Some(Service { _conn: conn })
        }
        Err(e) => {
            warn!(
                "rtkit interface: cannot own {BUS_NAME} on {bus} ({e}); if rtkit-daemon owns \
                 it, stop it (`systemctl disable --now rtkit-daemon`), and install uxsched's \
                 D-Bus policy (packaging/dbus/uxsched-rtkit.conf) so root may own the name"
            );
            None
        }
    }
}

/// The property values: what the approval rules allow at most (rtkit's values are global, and
/// clients clamp to them; a caller whose own rule allows less is refused above its rule).
#[derive(Debug, Clone, Copy)]
struct Limits {
    rttime_usec_max: i64,
    max_realtime_priority: i32,
    min_nice_level: i32,
}

impl Limits {
    fn of(r: &crate::config::rtapi::RtApi) -> Limits {
        let rt = r.allow.iter().map(|a| a.max_rt_priority).max().unwrap_or(0);
        let nice = r.allow.iter().map(|a| a.min_nice).min().unwrap_or(0);
        Limits {
            rttime_usec_max: r.rttime_max_us as i64,
            max_realtime_priority: if r.enabled && r.max_rt_threads > 0 {
                rt as i32
            } else {
                0
            },
            min_nice_level: if r.enabled { nice.min(0) } else { 0 },
        }
    }
}

struct RealtimeKit {
    same_user_processes: bool,
    limits: Limits,
    events: Mutex<Sender<Event>>,
    /// Threads granted over D-Bus and by whom (uid): what `ResetKnown` resets.
    known: Mutex<Vec<(u32, TaskId)>>,
}

/// The bus's word on a caller.
struct Caller {
    uid: u32,
    pid: i32,
    pidfd: Option<Pidfd>,
}

#[zbus::interface(name = "org.freedesktop.RealtimeKit1")]
impl RealtimeKit {
    /// SCHED_RR at `priority` (rtkit's policy) for `thread` of the caller's process.
    async fn make_thread_realtime(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        thread: u64,
        priority: u32,
    ) -> fdo::Result<()> {
        self.ask(&hdr, conn, None, thread, realtime(priority)).await
    }

    #[zbus(name = "MakeThreadRealtimeWithPID")]
    async fn make_thread_realtime_with_pid(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        process: u64,
        thread: u64,
        priority: u32,
    ) -> fdo::Result<()> {
        let ask = realtime(priority);
        self.ask(&hdr, conn, Some(process), thread, ask).await
    }

    /// The fair class at nice `priority`.
    async fn make_thread_high_priority(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        thread: u64,
        priority: i32,
    ) -> fdo::Result<()> {
        let ask = Ask::HighPriority { nice: priority };
        self.ask(&hdr, conn, None, thread, ask).await
    }

    #[zbus(name = "MakeThreadHighPriorityWithPID")]
    async fn make_thread_high_priority_with_pid(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        process: u64,
        thread: u64,
        priority: i32,
    ) -> fdo::Result<()> {
        let ask = Ask::HighPriority { nice: priority };
        self.ask(&hdr, conn, Some(process), thread, ask).await
    }

    /// Reset every thread granted over D-Bus: root's call resets all of them, anyone else's
    /// those its own uid asked for.
    async fn reset_known(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> fdo::Result<()> {
        let caller = caller(&hdr, conn).await?;
        self.reset(caller.uid).await
    }

    /// rtkit's `ResetAll` also demotes RT threads it never made; uxsched never touches a
    /// thread it did not change, so this is `ResetKnown`.
    async fn reset_all(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> fdo::Result<()> {
        let caller = caller(&hdr, conn).await?;
        self.reset(caller.uid).await
    }

    /// rtkit's `Exit` stops rtkit-daemon; the uxsched daemon is stopped by its service manager.
    async fn exit(&self) -> fdo::Result<()> {
        Err(fdo::Error::AccessDenied(
            "this RealtimeKit1 interface is served by the uxsched daemon: stop it with \
             `systemctl stop uxsched` (or set `[rtkit] enable = false`)"
                .into(),
        ))
    }

    #[zbus(property(emits_changed_signal = "const"), name = "RTTimeUSecMax")]
    fn rttime_usec_max(&self) -> i64 {
        self.limits.rttime_usec_max
    }

    #[zbus(property(emits_changed_signal = "const"), name = "MaxRealtimePriority")]
    fn max_realtime_priority(&self) -> i32 {
        self.limits.max_realtime_priority
    }

    #[zbus(property(emits_changed_signal = "const"), name = "MinNiceLevel")]
    fn min_nice_level(&self) -> i32 {
        self.limits.min_nice_level
    }
}

fn realtime(priority: u32) -> Ask {
    Ask::Realtime {
        policy: Policy::Rr,
        priority,
    }
}

/// Who sent the message, from the bus: `GetConnectionCredentials`, or on a bus without it
/// `GetConnectionUnixUser` and `GetConnectionUnixProcessID`.
async fn caller(hdr: &Header<'_>, conn: &zbus::Connection) -> fdo::Result<Caller> {
    let sender = hdr
        .sender()
        .ok_or_else(|| fdo::Error::Failed("the message has no sender".into()))?;
    let name = BusName::from(sender.to_owned());
    let bus = fdo::DBusProxy::new(conn).await?;
    let (uid, pid, pidfd) = match bus.get_connection_credentials(name.clone()).await {
        Ok(c) => (
            c.unix_user_id(),
            c.process_id(),
            c.process_fd()
                .and_then(|fd| fd.as_fd().try_clone_to_owned().ok())
                .map(Pidfd::from),
        ),
        Err(_) => (
            Some(bus.get_connection_unix_user(name.clone()).await?),
            Some(bus.get_connection_unix_process_id(name).await?),
            None,
        ),
    };
    match (uid, pid.and_then(|p| i32::try_from(p).ok())) {
        (Some(uid), Some(pid)) if pid > 0 => Ok(Caller { uid, pid, pidfd }),
        _ => Err(fdo::Error::AccessDenied(format!(
            "the bus does not say which process {sender} is (uid {uid:?}, pid {pid:?})"
        ))),
    }
}

impl RealtimeKit {
    /// One request: find the process it is for, then the real-time API's path.
    async fn ask(
        &self,
        hdr: &Header<'_>,
        conn: &zbus::Connection,
        process: Option<u64>,
        thread: u64,
        ask: Ask,
    ) -> fdo::Result<()> {
        let caller = caller(hdr, conn).await?;
        let uid = caller.uid;
        let peer = self.target(caller, process)?;
        let tid = match thread {
            0 => peer.pid,
            t => i32::try_from(t)
                .map_err(|_| fdo::Error::InvalidArgs(format!("{t} is not a thread id")))?,
        };
        let request = Request {
            tid,
            ask,
            until: Until::Exit,
        };
        let reply = self.send(request, peer).await?;
        if !reply.ok {
            return Err(refusal(&reply));
        }
        if let Ok(task) = identity::task_id(tid) {
            let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
            known.retain(|(_, t)| identity::still_same(t) && *t != task);
            known.push((uid, task));
        }
        Ok(())
    }

    /// The process a request is for: the caller's own, or with `same_user_processes` another
    /// of its uid (whose every uid [`uxsched_os::peer::thread_of`] checks is the caller's).
    fn target(&self, caller: Caller, process: Option<u64>) -> fdo::Result<Peer> {
        let own = process.is_none_or(|p| p == 0 || p == caller.pid as u64);
        if own {
            return Ok(Peer::named(caller.uid, caller.pid, caller.pidfd));
        }
        let p = process.unwrap_or_default();
        if !self.same_user_processes {
            return Err(fdo::Error::AccessDenied(format!(
                "uxsched refused (identity): process {p} is not the caller's process {}; only \
                 your own threads can be named (the administrator can allow processes of the \
                 same user with `[rtkit] same_user_processes = true`, rtkit's rule)",
                caller.pid
            )));
        }
        let pid = i32::try_from(p)
            .map_err(|_| fdo::Error::InvalidArgs(format!("{p} is not a process id")))?;
        Ok(Peer::named(caller.uid, pid, None))
    }

    /// Hand `request` to the daemon loop and wait for its reply off zbus's executor.
    async fn send(&self, request: Request, peer: Peer) -> fdo::Result<Reply> {
        let (tx, rx) = mpsc::channel();
        let event = Event::Thread {
            request,
            peer: Arc::new(peer),
            conn: CONN,
            reply: tx,
        };
        let sent = self
            .events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(event);
        if sent.is_err() {
            return Err(fdo::Error::Failed("the uxsched daemon is stopping".into()));
        }
        blocking::unblock(move || rx.recv_timeout(REPLY_TIMEOUT))
            .await
            .map_err(|_| fdo::Error::Failed("the uxsched daemon did not answer in time".into()))
    }

    /// Reset the known threads `uid` asked for (root: all of them).
    async fn reset(&self, uid: u32) -> fdo::Result<()> {
        let mine: Vec<(u32, TaskId)> = {
            let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
            let (mine, rest) = std::mem::take(&mut *known)
                .into_iter()
                .partition(|(u, _)| uid == 0 || *u == uid);
            *known = rest;
            mine
        };
        for (owner, task) in mine.into_iter().filter(|(_, t)| identity::still_same(t)) {
            let request = Request {
                tid: task.tid,
                ask: Ask::Reset,
                until: Until::Exit,
            };
            let reply = self
                .send(request, Peer::named(owner, task.pid, None))
                .await?;
            if !reply.ok && identity::still_same(&task) {
                warn!(tid = task.tid, "rtkit ResetKnown: {:?}", reply.error);
            }
        }
        Ok(())
    }
}

/// A refusal as a D-Bus error with rtkit's names (its `translate_error_forward`: EPERM,
/// EACCES and EBUSY are `AccessDenied`), uxsched's reason and advice in the message.
fn refusal(reply: &Reply) -> fdo::Error {
    let why = reply.refused.unwrap_or(Refusal::NotApplied);
    let name = serde_json::to_value(why)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let msg = format!(
        "uxsched refused ({name}): {}",
        reply.error.as_deref().unwrap_or("no reason given")
    );
    match why {
        Refusal::BadRequest => fdo::Error::InvalidArgs(msg),
        Refusal::NotApplied => fdo::Error::Failed(msg),
        // Identity too: rtkit answers EPERM for another user's process.
        _ => fdo::Error::AccessDenied(msg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::path::Path;

    #[test]
    fn config_is_off_by_default_and_checked() {
        let c = Config::parse("", Path::new("t.toml")).unwrap();
        assert!(!c.rtkit.enable);
        let c = Config::parse(
            "[rtkit]\nenable = true\naddress = \"unix:path=/run/x\"\n",
            Path::new("t.toml"),
        )
        .unwrap();
        assert!(c.rtkit.enable && !c.rtkit.same_user_processes);
        let e = Config::parse("[rtkit]\nenabled = true\n", Path::new("t.toml")).unwrap_err();
        assert!(format!("{e:#}").contains("enabled"), "{e:#}");
    }

    #[test]
    fn properties_are_what_the_rules_allow_at_most() {
        let c = Config::parse(
            "[[rtapi.allow]]\nuids = [1000]\nmax_rt_priority = 5\nmin_nice = -3\n\n\
             [[rtapi.allow]]\nmax_rt_priority = 15\nmin_nice = -10\n",
            Path::new("t.toml"),
        )
        .unwrap();
        let l = Limits::of(&c.rtapi);
        assert_eq!(
            (l.rttime_usec_max, l.max_realtime_priority, l.min_nice_level),
            (200_000, 15, -10)
        );
        let off = Config::parse("[rtapi]\nenabled = false\n", Path::new("t.toml")).unwrap();
        let l = Limits::of(&off.rtapi);
        assert_eq!((l.max_realtime_priority, l.min_nice_level), (0, 0));
    }

    #[test]
    fn refusals_carry_rtkit_error_names() {
        let r = |why| refusal(&Reply::refused(why, "x"));
        assert!(
            matches!(r(Refusal::RateLimit), fdo::Error::AccessDenied(m) if m.contains("rate_limit"))
        );
        assert!(matches!(
            r(Refusal::NotAllowed),
            fdo::Error::AccessDenied(_)
        ));
        assert!(matches!(r(Refusal::BadRequest), fdo::Error::InvalidArgs(_)));
        assert!(matches!(r(Refusal::NotApplied), fdo::Error::Failed(_)));
    }
}
