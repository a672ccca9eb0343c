//! `uxsched gamemode-bridge`: the user's half of the gamemode source. GameMode's clients
//! (libgamemode in Steam, Lutris, `gamemoderun`; the desktop portal for Flatpak apps) call
//! `com.feralinteractive.GameMode` on their *session* bus; the uxsched daemon runs as root on
//! the system. The bridge runs as the session's user — started by D-Bus activation on the
//! first call (packaging/dbus/com.feralinteractive.GameMode.service) — owns that name on the
//! session bus and relays every call, its arguments (pids or pidfds) unchanged, to the daemon's
//! [`super::gamemode::SYSTEM_NAME`] on the system bus, and the daemon's reply or error back.
//! The daemon sees the bridge's uid from the bus and applies its ownership rules; the bridge
//! itself decides nothing.
//!
//! It refuses to start, and says why, when the name is owned already (Feral's gamemoded runs:
//! two game modes would fight) or when the daemon does not serve GameMode (no `gamemode` in
//! its `sources`): a client then gets an activation error and runs without game mode, as it
//! would without gamemoded. It ends with the session bus.

use super::gamemode::{INTERFACE, OBJECT_PATH, SESSION_NAME, SYSTEM_NAME};
use zbus::fdo;
use zbus::zvariant::{DynamicType, Fd, OwnedFd, OwnedObjectPath};

/// Serve the relay on the session bus until it goes away; Err: why it cannot (what to do).
pub fn run() -> Result<(), String> {
    let system = zbus::blocking::Connection::system()
        .map_err(|e| format!("cannot reach the system bus ({e}), where uxsched's daemon is"))?;
    let serving = zbus::blocking::fdo::DBusProxy::new(&system)
        .map_err(fdo::Error::from)
        .and_then(|bus| {
            bus.name_has_owner(
                zbus::names::WellKnownName::from_static_str_unchecked(SYSTEM_NAME).into(),
            )
        })
        .map_err(|e| format!("cannot ask the system bus about {SYSTEM_NAME}: {e}"))?;
    if !serving {
        return Err(format!(
            "the uxsched daemon does not serve GameMode ({SYSTEM_NAME} has no owner on the \
             system bus): add \"gamemode\" to `sources` in its config and restart it \
             (`systemctl restart uxsched`)"
        ));
    }
    let daemon = zbus::blocking::Proxy::new(&system, SYSTEM_NAME, OBJECT_PATH, INTERFACE)
        .map_err(|e| format!("cannot address {SYSTEM_NAME}: {e}"))?
        .into_inner();
    let session = zbus::blocking::Connection::session()
        .map_err(|e| format!("cannot reach the session bus ({e}): run it in a user session"))?;
    if let Some(owner) = owner(&session, SESSION_NAME) {
        return Err(taken(&owner));
    }
    session
        .object_server()
        .at(OBJECT_PATH, Relay { daemon })
        .map_err(|e| format!("cannot serve {OBJECT_PATH}: {e}"))?;
    let flags = fdo::RequestNameFlags::DoNotQueue.into();
    match session.request_name_with_flags(SESSION_NAME, flags) {
        Ok(fdo::RequestNameReply::PrimaryOwner) => {}
        Ok(_) => {
            let who = owner(&session, SESSION_NAME).unwrap_or_else(|| "another client".into());
            return Err(taken(&who));
        }
        Err(e) => return Err(format!("cannot own {SESSION_NAME} on the session bus: {e}")),
    }
    tracing::info!("gamemode bridge: {SESSION_NAME} on the session bus → {SYSTEM_NAME}");
    // The object server answers on zbus's own thread; this one only waits for the bus to go.
    for message in zbus::blocking::MessageIterator::from(&session) {
        if message.is_err() {
            break;
        }
    }
    Ok(())
}

/// Who owns `name` on `bus` (its pid and program), if anyone.
fn owner(bus: &zbus::blocking::Connection, name: &'static str) -> Option<String> {
    let dbus = zbus::blocking::fdo::DBusProxy::new(bus).ok()?;
    let name = zbus::names::BusName::try_from(name).ok()?;
    if !dbus.name_has_owner(name.clone()).ok()? {
        return None;
    }
    let pid = dbus.get_connection_unix_process_id(name).ok();
    let comm = pid
        .and_then(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).ok())
        .map(|c| c.trim().to_owned());
    Some(match (pid, comm) {
        (Some(p), Some(c)) => format!("pid {p} ({c})"),
        (Some(p), None) => format!("pid {p}"),
        _ => "a client the bus cannot name".into(),
    })
}

fn taken(owner: &str) -> String {
    format!(
        "{SESSION_NAME} is owned on this session bus by {owner}, Feral's gamemoded most likely: \
         uxsched's GameMode bridge does not start beside it. To use uxsched's, stop and mask \
         gamemoded (`systemctl --user mask --now gamemoded`)"
    )
}

/// GameMode's interface on the session bus, each call relayed to the daemon.
struct Relay {
    daemon: zbus::Proxy<'static>,
}

impl Relay {
    async fn call<B>(&self, method: &str, body: &B) -> fdo::Result<i32>
    where
        B: serde::Serialize + DynamicType,
    {
        self.daemon.call(method, body).await.map_err(relayed)
    }
}

/// The daemon's error, under its own name where it is a standard one.
fn relayed(e: zbus::Error) -> fdo::Error {
    match e {
        zbus::Error::MethodError(name, msg, _)
            if name.as_str() == "org.freedesktop.DBus.Error.ServiceUnknown" =>
        {
            fdo::Error::ServiceUnknown(format!(
                "the uxsched daemon stopped serving GameMode ({}); is it running?",
                msg.unwrap_or_default()
            ))
        }
        e => fdo::Error::from(e),
    }
}

#[zbus::interface(name = "com.feralinteractive.GameMode")]
impl Relay {
    async fn register_game(&self, pid: i32) -> fdo::Result<i32> {
        self.call("RegisterGame", &(pid,)).await
    }

    async fn unregister_game(&self, pid: i32) -> fdo::Result<i32> {
        self.call("UnregisterGame", &(pid,)).await
    }

    async fn query_status(&self, pid: i32) -> fdo::Result<i32> {
        self.call("QueryStatus", &(pid,)).await
    }

    #[zbus(name = "RegisterGameByPID")]
    async fn register_game_by_pid(&self, caller: i32, game: i32) -> fdo::Result<i32> {
        self.call("RegisterGameByPID", &(caller, game)).await
    }

    #[zbus(name = "UnregisterGameByPID")]
    async fn unregister_game_by_pid(&self, caller: i32, game: i32) -> fdo::Result<i32> {
        self.call("UnregisterGameByPID", &(caller, game)).await
    }

    #[zbus(name = "QueryStatusByPID")]
    async fn query_status_by_pid(&self, caller: i32, game: i32) -> fdo::Result<i32> {
        self.call("QueryStatusByPID", &(caller, game)).await
    }

    #[zbus(name = "RegisterGameByPIDFd")]
    async fn register_game_by_pidfd(&self, game: OwnedFd, caller: OwnedFd) -> fdo::Result<i32> {
        let fds = (Fd::from(&game), Fd::from(&caller));
        self.call("RegisterGameByPIDFd", &fds).await
    }

    #[zbus(name = "UnregisterGameByPIDFd")]
    async fn unregister_game_by_pidfd(&self, game: OwnedFd, caller: OwnedFd) -> fdo::Result<i32> {
        let fds = (Fd::from(&game), Fd::from(&caller));
        self.call("UnregisterGameByPIDFd", &fds).await
    }

    #[zbus(name = "QueryStatusByPIDFd")]
    async fn query_status_by_pidfd(&self, game: OwnedFd, caller: OwnedFd) -> fdo::Result<i32> {
        let fds = (Fd::from(&game), Fd::from(&caller));
        self.call("QueryStatusByPIDFd", &fds).await
    }

    async fn refresh_config(&self) -> fdo::Result<i32> {
        self.call("RefreshConfig", &()).await
    }

    async fn list_games(&self) -> fdo::Result<Vec<(i32, OwnedObjectPath)>> {
        self.daemon.call("ListGames", &()).await.map_err(relayed)
    }

    #[zbus(property(emits_changed_signal = "false"))]
    async fn client_count(&self) -> fdo::Result<i32> {
        self.daemon
            .get_property("ClientCount")
            .await
            .map_err(relayed)
    }
}
