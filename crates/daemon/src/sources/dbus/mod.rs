//! The D-Bus interfaces of other foreground managers that uxsched serves, so their clients work
//! unchanged: Feral GameMode's and system76-scheduler's (issue 32).
//!
//! - [`system76`]: `com.system76.Scheduler` on the system bus, served by the root daemon
//!   (`SetForegroundProcess(u pid)`, called by system76-scheduler's GNOME and KWin helpers).
//! - [`gamemode`]: GameMode's interface (`com.feralinteractive.GameMode`), served by the root
//!   daemon on the system bus under uxsched's own name [`gamemode::SYSTEM_NAME`]; GameMode's
//!   clients (libgamemode: Steam, Lutris, `gamemoderun`) call the user's *session* bus, where
//!   [`bridge`] — `uxsched gamemode-bridge`, run as that user by D-Bus activation — owns
//!   `com.feralinteractive.GameMode` and relays each call to the daemon.
//!
//! Who asks is the bus's word, never the message's (`GetConnectionUnixUser`, which the bus
//! takes from the kernel, as rtkit's interface does in `rtapi/rtkit.rs`): a user names only
//! its own processes; root may name any user's, never root's own or a system service's
//! ([`admit_for`]). The bridge runs as the session's user, so the daemon sees that user.
//! The bus is the system bus (`DBUS_SYSTEM_BUS_ADDRESS` where set) or a given address.

pub mod bridge;
pub mod gamemode;
pub mod system76;

use super::{admit, Owner};
use crate::types::AppId;
use std::os::fd::{AsFd, AsRawFd};
use uxsched_os::identity;
use zbus::fdo;
use zbus::message::Header;
use zbus::names::BusName;

/// The uid of the connection that sent `hdr`, from the bus.
pub(crate) async fn caller_uid(hdr: &Header<'_>, conn: &zbus::Connection) -> fdo::Result<u32> {
    let sender = hdr
        .sender()
        .ok_or_else(|| fdo::Error::Failed("the message has no sender".into()))?;
    let bus = fdo::DBusProxy::new(conn).await?;
    bus.get_connection_unix_user(BusName::from(sender.to_owned()))
        .await
        .map_err(|e| {
            fdo::Error::AccessDenied(format!("the bus does not say who {sender} is ({e})"))
        })
}

/// Check that `caller` may name process `pid` and capture its identity: a user its own
/// processes; root any user's but never root's own nor a system service's (the rule [`admit`]
/// applies for the process's own user).
pub(crate) fn admit_for(caller: u32, pid: i32) -> Result<AppId, String> {
    let uid = match caller {
        0 => {
            let (p, _) = identity::observe(pid)
                .map_err(|e| format!("cannot name pid {pid}: {e} (is it running?)"))?;
            p.uids[0]
        }
        u => u,
    };
    admit(pid, Owner { uid, any: false }).map_err(|e| match caller {
        0 => e,
        u => format!("{e}; uid {u} may only name its own processes"),
    })
}

/// The pid of the process a pidfd names (`Pid:` of its fdinfo; the kernel says -1 once the
/// process has been reaped, 0 where it is in another pid namespace).
pub(crate) fn pidfd_pid(fd: impl AsFd) -> Result<i32, String> {
    let raw = fd.as_fd().as_raw_fd();
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{raw}"))
        .map_err(|e| format!("cannot read the fd's fdinfo: {e}"))?;
    let pid = info
        .lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|v| v.trim().parse::<i32>().ok())
        .ok_or("the fd is not a pidfd")?;
    match pid {
        p if p > 0 => Ok(p),
        0 => Err("the pidfd's process is in another pid namespace".into()),
        _ => Err("the pidfd's process has exited".into()),
    }
}

/// A connection to the system bus (`address` empty) or to `address`, owning `name` (without
/// queueing: an owner already there is an error) and serving `iface` at `path`.
pub(crate) fn serve<I: zbus::object_server::Interface>(
    address: &str,
    name: &'static str,
    path: &'static str,
    iface: I,
) -> zbus::Result<zbus::blocking::Connection> {
    let builder = if address.is_empty() {
        zbus::blocking::connection::Builder::system()?
    } else {
        zbus::blocking::connection::Builder::address(address)?
    };
    let conn = builder.serve_at(path, iface)?.build()?;
    let flags = zbus::fdo::RequestNameFlags::DoNotQueue.into();
    match conn.request_name_with_flags(name, flags)? {
        fdo::RequestNameReply::PrimaryOwner | fdo::RequestNameReply::AlreadyOwner => Ok(conn),
        other => Err(zbus::Error::Failure(format!(
            "{name} is owned by another connection ({other:?})"
        ))),
    }
}

/// The bus an `address` names, for log lines.
pub(crate) fn bus_name(address: &str) -> String {
    match address {
        "" => "the system bus".into(),
        a => a.into(),
    }
}

/// Keep a served connection for the daemon's life on a thread of its own, named `name`.
pub(crate) fn hold(name: &str, conn: zbus::blocking::Connection) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || loop {
            let _keep = &conn;
            std::thread::park();
        })
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_names_any_users_process_but_never_roots_and_users_only_their_own() {
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        let e = admit_for(0, 1).unwrap_err();
        assert!(e.contains("root's") || e.contains("system service"), "{e}");
        let e = admit_for(65534, 1).unwrap_err();
        assert!(e.contains("uid 65534 may only name its own"), "{e}");
        assert!(admit_for(0, 1 << 30).unwrap_err().contains("cannot name"));
        if me != 0 {
            let pid = std::process::id() as i32;
            assert_eq!(admit_for(me, pid).unwrap().pid, pid);
            assert_eq!(admit_for(0, pid).unwrap().pid, pid);
        }
    }

    #[test]
    fn a_pidfd_names_its_process_until_it_is_reaped() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let fd = identity::Pidfd::open(pid).unwrap();
        assert_eq!(pidfd_pid(&fd), Ok(pid));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(pidfd_pid(&fd).unwrap_err().contains("exited"));
        let file = std::fs::File::open("/proc/self/stat").unwrap();
        assert!(pidfd_pid(&file).unwrap_err().contains("not a pidfd"));
    }
}
