//! The system76 source: the daemon owns `com.system76.Scheduler` on the system bus, so
//! system76-scheduler's helpers (its GNOME Shell extension and KWin script, which call
//! `SetForegroundProcess(u pid)` with the focused window's pid) drive uxsched unchanged.
//!
//! The interface is system76-scheduler's (`com.system76.Scheduler` at `/com/system76/Scheduler`:
//! `SetForegroundProcess(u)`, `SetCpuMode(y)`, `SetCpuProfile(s)`, `ReloadConfiguration()`,
//! properties `CpuMode` (y) and `CpuProfile` (s)). Unlike system76-scheduler, which takes any
//! pid from anyone, the pid must belong to the caller (root: to any user but root,
//! [`super::admit_for`]); a refusal is an `AccessDenied` error and a log line, and counts as
//! nothing in front (the window focused is not one uxsched may act on). The CPU-mode methods
//! belong to system76-scheduler's own policy, which uxsched does not have: they answer
//! `NotSupported` with what to use instead.
//!
//! Off unless `system76` is in `sources`. system76-scheduler owns the same name: with it
//! running the source does not start and says so (stop it first).

use super::{admit_for, bus_name, caller_uid, hold, serve};
use crate::sources::DaemonGone;
use crate::types::{AppId, Event, SourceName};
use std::sync::mpsc::Sender;
use std::sync::Mutex;
use tracing::{info, warn};
use zbus::fdo;
use zbus::message::Header;

pub const BUS_NAME: &str = "com.system76.Scheduler";
pub const OBJECT_PATH: &str = "/com/system76/Scheduler";

/// Own `com.system76.Scheduler` on the system bus (`address` empty, `DBUS_SYSTEM_BUS_ADDRESS`
/// where set) or on `address`, and send each foreground process named as this source's focus.
pub fn spawn(address: &str, events: Sender<Event>) -> std::io::Result<()> {
    let iface = Scheduler {
        events: Mutex::new(Sent { events }),
    };
    let bus = bus_name(address);
    let conn = serve(address, BUS_NAME, OBJECT_PATH, iface).map_err(|e| {
        std::io::Error::other(format!(
            "cannot own {BUS_NAME} on {bus} ({e}); if system76-scheduler owns it, stop it \
             (`systemctl disable --now com.system76.Scheduler`), and install uxsched's D-Bus \
             policy (packaging/dbus/uxsched-foreground.conf) so root may own the name"
        ))
    })?;
    info!("system76 source: serving {BUS_NAME} on {bus}");
    hold("uxsched-system76", conn)
}

/// The daemon's channel. Every call is sent, the same process again too: the user focused it
/// again, a new interaction (`Daemon::set_focus`).
struct Sent {
    events: Sender<Event>,
}

impl Sent {
    fn send(&mut self, app: Option<AppId>) -> Result<(), DaemonGone> {
        let ev = Event::Focus {
            source: SourceName::System76,
            app,
        };
        self.events.send(ev).map_err(|_| DaemonGone)
    }
}

struct Scheduler {
    events: Mutex<Sent>,
}

#[zbus::interface(name = "com.system76.Scheduler")]
impl Scheduler {
    /// The caller's process `pid` is in front (until the next call).
    async fn set_foreground_process(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        pid: u32,
    ) -> fdo::Result<()> {
        let uid = caller_uid(&hdr, conn).await?;
        let admitted = i32::try_from(pid)
            .map_err(|_| format!("{pid} is not a process id"))
            .and_then(|p| admit_for(uid, p));
        let app = admitted.as_ref().ok().copied();
        let sent = self
            .events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(app);
        if sent.is_err() {
            return Err(fdo::Error::Failed("the uxsched daemon is stopping".into()));
        }
        admitted.map(drop).map_err(|e| {
            warn!(
                uid,
                pid, "system76 SetForegroundProcess refused, nothing in front from it: {e}"
            );
            fdo::Error::AccessDenied(format!("uxsched refused: {e}"))
        })
    }

    async fn set_cpu_mode(&self, _cpu_mode: u8) -> fdo::Result<()> {
        Err(not_supported("SetCpuMode"))
    }

    async fn set_cpu_profile(&self, _profile: String) -> fdo::Result<()> {
        Err(not_supported("SetCpuProfile"))
    }

    async fn reload_configuration(&self) -> fdo::Result<()> {
        Err(fdo::Error::NotSupported(
            "this com.system76.Scheduler is served by the uxsched daemon, which reads its \
             config when it starts: `systemctl restart uxsched`"
                .into(),
        ))
    }

    /// system76-scheduler's `auto` (0): uxsched has no CPU modes of its own.
    #[zbus(property(emits_changed_signal = "const"))]
    fn cpu_mode(&self) -> u8 {
        0
    }

    #[zbus(property(emits_changed_signal = "const"))]
    fn cpu_profile(&self) -> String {
        "uxsched".into()
    }
}

fn not_supported(method: &str) -> fdo::Error {
    fdo::Error::NotSupported(format!(
        "{method}: uxsched has no system76 CPU modes; choose uxsched's mode with `uxsched mode`"
    ))
}
