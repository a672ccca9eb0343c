//! logind's word on the machine's sessions, over D-Bus (`org.freedesktop.login1` on the system
//! bus): `ListSessions`, then each graphical session's properties. Blocking calls, re-listed on
//! every discovery round (a few seconds apart) rather than followed by signals: a session's
//! `Active` flips and its coming and going are all seen within a round, with no match rules to
//! keep. Where no system bus or no logind runs, discovery falls back to the sockets.

use std::collections::HashMap;
use zbus::zvariant::{OwnedObjectPath, OwnedValue};

const DEST: &str = "org.freedesktop.login1";
const PATH: &str = "/org/freedesktop/login1";
const MANAGER: &str = "org.freedesktop.login1.Manager";
const SESSION: &str = "org.freedesktop.login1.Session";

/// One logind session, as far as discovery needs it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogindSession {
    pub id: String,
    pub uid: u32,
    pub user: String,
    /// `x11`, `wayland`, `tty`, `mir`, `unspecified`.
    pub kind: String,
    /// `user`, `greeter`, `lock-screen`, `background`.
    pub class: String,
    /// The X display (`:0`) of an X11 session.
    pub display: String,
    pub leader: u32,
    pub active: bool,
    pub remote: bool,
    /// `online`, `active`, `closing`.
    pub state: String,
    /// `XDG_SESSION_DESKTOP` (`sway`, `GNOME`, `KDE`, `Hyprland`, `niri`).
    pub desktop: String,
}

impl LogindSession {
    pub fn graphical(&self) -> bool {
        matches!(self.kind.as_str(), "x11" | "wayland" | "mir")
    }
}

/// A connection to logind's bus.
pub struct Logind {
    bus: zbus::blocking::Connection,
}

impl Logind {
    /// The system bus (`$DBUS_SYSTEM_BUS_ADDRESS`, else `/run/dbus/system_bus_socket`).
    pub fn system() -> Result<Logind, String> {
        zbus::blocking::Connection::system()
            .map(|bus| Logind { bus })
            .map_err(|e| {
                let at = std::env::var("DBUS_SYSTEM_BUS_ADDRESS")
                    .unwrap_or_else(|_| "/run/dbus/system_bus_socket".into());
                format!("no system bus at {at} ({e})")
            })
    }

    /// A bus at `address` (tests: a private `dbus-daemon` with a stand-in logind).
    pub fn at(address: &str) -> Result<Logind, String> {
        zbus::blocking::connection::Builder::address(address)
            .and_then(|b| b.build())
            .map(|bus| Logind { bus })
            .map_err(|e| format!("cannot connect to {address} ({e})"))
    }

    /// A method of logind's manager, with its reply's body (the idle reader's `GetSession`).
    pub fn call<B, R>(&self, method: &str, body: &B) -> Result<R, zbus::Error>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
        R: for<'d> zbus::zvariant::DynamicDeserialize<'d>,
    {
        let reply = self
            .bus
            .call_method(Some(DEST), PATH, Some(MANAGER), method, body)?;
        reply.body().deserialize()
    }

    /// One property of the session at `path` (the idle reader's `IdleHint`).
    pub fn property(&self, path: &OwnedObjectPath, name: &str) -> Result<OwnedValue, zbus::Error> {
        let reply = self.bus.call_method(
            Some(DEST),
            path,
            Some("org.freedesktop.DBus.Properties"),
            "Get",
            &(SESSION, name),
        )?;
        let v: zbus::zvariant::OwnedValue = reply.body().deserialize()?;
        Ok(v)
    }

    /// Every session logind knows, with its properties; Err: logind does not answer, and why.
    pub fn sessions(&self) -> Result<Vec<LogindSession>, String> {
        let reply = self
            .bus
            .call_method(Some(DEST), PATH, Some(MANAGER), "ListSessions", &())
            .map_err(|e| format!("logind does not answer ({e})"))?;
        let list: Vec<(String, u32, String, String, OwnedObjectPath)> = reply
            .body()
            .deserialize()
            .map_err(|e| format!("logind's ListSessions reply is not a(susso): {e}"))?;
        let mut out = Vec::new();
        for (id, uid, user, _seat, path) in list.into_iter().take(1024) {
            let props = self.bus.call_method(
                Some(DEST),
                &path,
                Some("org.freedesktop.DBus.Properties"),
                "GetAll",
                &(SESSION,),
            );
            // A session that closed between the two calls.
            let Ok(props) = props else { continue };
            let Ok(props): Result<HashMap<String, OwnedValue>, _> = props.body().deserialize()
            else {
                continue;
            };
            let s = |k: &str| {
                props
                    .get(k)
                    .and_then(|v| String::try_from(v.try_clone().ok()?).ok())
                    .unwrap_or_default()
            };
            let b = |k: &str| props.get(k).and_then(|v| bool::try_from(v).ok());
            out.push(LogindSession {
                id,
                uid,
                user,
                kind: s("Type"),
                class: s("Class"),
                display: s("Display"),
                leader: props
                    .get("Leader")
                    .and_then(|v| u32::try_from(v).ok())
                    .unwrap_or(0),
                active: b("Active").unwrap_or(false),
                remote: b("Remote").unwrap_or(false),
                state: s("State"),
                desktop: s("Desktop"),
            });
        }
        Ok(out)
    }
}
