//! A systemd unit's CPU weight — how uxsched raises an app on a systemd machine.
//!
//! Where systemd runs, it owns the cgroup tree: every process belongs to a unit (`*.service`,
//! `app-*.scope`), and moving a process out of its unit breaks the unit's accounting, its limits
//! and systemd-oomd's view of it. So uxsched never moves processes there; it raises the weight of
//! the app's own unit in place and restores it the same way:
//! - a unit of the system manager (PID 1) through D-Bus, `org.freedesktop.systemd1.Manager.
//!   SetUnitProperties(name, runtime = true, [("CPUWeight", <t>)])` — runtime only, so nothing
//!   survives a reboot, and systemd re-applies it when it re-realizes the cgroup;
//! - a unit inside a user's manager (below `user@UID.service`, whose subtree systemd delegates to
//!   that manager) by writing the unit's own `cpu.weight`: root cannot reach the user manager's
//!   private bus, and the delegated subtree is the place where a writer other than PID 1 is
//!   expected.
//!
//! `CPUWeight` is in `cpu.weight` units (1..=10000, 100 = default); systemd reports an unset
//! weight as [`UNSET`], and setting [`UNSET`] back resets the unit to "not set" (systemd's
//! `CGROUP_WEIGHT_INVALID`), which is how an unset original is restored.

use std::io;
use std::path::{Path, PathBuf};
use zbus::blocking::Connection;
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

/// systemd's "no CPUWeight configured" (`CGROUP_WEIGHT_INVALID`, `(uint64_t) -1`).
pub const UNSET: u64 = u64::MAX;

const DEST: &str = "org.freedesktop.systemd1";
const PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";

/// Which systemd instance manages a unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// The system manager (PID 1), reached on the system bus.
    System,
    /// A user's manager (`user@UID.service`): the unit's cgroup is in its delegated subtree.
    User { uid: u32 },
}

/// A unit a process belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// e.g. `app-gnome-firefox-4242.scope`, `nginx.service`.
    pub name: String,
    /// Its cgroup directory (under the cgroup2 mount).
    pub dir: PathBuf,
    pub owner: Owner,
}

impl Unit {
    /// The D-Bus interface that carries the unit type's `CPUWeight` property.
    fn interface(&self) -> io::Result<&'static str> {
        match self.name.rsplit_once('.').map(|(_, t)| t) {
            Some("service") => Ok("org.freedesktop.systemd1.Service"),
            Some("scope") => Ok("org.freedesktop.systemd1.Scope"),
            Some("slice") => Ok("org.freedesktop.systemd1.Slice"),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: not a service, scope or slice", self.name),
            )),
        }
    }
}

/// Whether systemd manages this machine (sd_booted(3)'s test, or PID 1 is systemd).
pub fn systemd_running() -> bool {
    Path::new("/run/systemd/system").is_dir()
        || uxsched_os::procfs::read_to_string("/proc/1/comm").is_ok_and(|c| c.trim() == "systemd")
}

/// The unit `pid` belongs to: the last `*.scope` / `*.service` of its cgroup2 path
/// (`/proc/<pid>/cgroup`); `None` when the path holds none (not under systemd) or there is no
/// cgroup2 mount.
pub fn unit_of(pid: i32) -> io::Result<Option<Unit>> {
    let text = uxsched_os::procfs::read_to_string(format!("/proc/{pid}/cgroup"))?;
    let Some(path) = text.lines().find_map(|l| l.strip_prefix("0::")) else {
        return Ok(None);
    };
    let info = uxsched_os::procfs::read_to_string("/proc/self/mountinfo")?;
    let Some(mount) = super::cgroup::find_mounts(&info).1 else {
        return Ok(None);
    };
    Ok(unit_in(path, &mount))
}

/// The unit of a cgroup2 path (relative to `mount`), and which manager owns it.
pub fn unit_in(path: &str, mount: &Path) -> Option<Unit> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let at = parts
        .iter()
        .rposition(|p| p.ends_with(".scope") || p.ends_with(".service"))?;
    let owner = parts[..at]
        .iter()
        .find_map(|p| {
            p.strip_prefix("user@")?
                .strip_suffix(".service")?
                .parse()
                .ok()
        })
        .map_or(Owner::System, |uid| Owner::User { uid });
    Some(Unit {
        name: parts[at].to_owned(),
        dir: parts[..=at].iter().fold(mount.to_owned(), |d, p| d.join(p)),
        owner,
    })
}

/// The unit's configured CPU weight ([`UNSET`] if none) — what [`set_weight`] restores.
pub fn weight(unit: &Unit) -> io::Result<u64> {
    match unit.owner {
        Owner::System => Systemd::system()?.weight(unit),
        Owner::User { .. } => read_weight(&unit.dir),
    }
}

/// Set the unit's CPU weight (cpu.weight units, or [`UNSET`] to clear it), runtime only.
pub fn set_weight(unit: &Unit, weight: u64) -> io::Result<()> {
    match unit.owner {
        Owner::System => Systemd::system()?.set_weight(unit, weight),
        Owner::User { .. } => write_weight(&unit.dir, weight),
    }
}

fn read_weight(dir: &Path) -> io::Result<u64> {
    let file = dir.join("cpu.weight");
    let text = uxsched_os::procfs::read_to_string(&file)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", file.display())))?;
    text.trim().parse().map_err(|e| {
        let msg = format!("{}: {:?}: {e}", file.display(), text.trim());
        io::Error::new(io::ErrorKind::InvalidData, msg)
    })
}

fn write_weight(dir: &Path, weight: u64) -> io::Result<()> {
    // The kernel default stands for "unset" in a file that always holds a number.
    let value = if weight == UNSET { 100 } else { weight };
    let file = dir.join("cpu.weight");
    std::fs::write(&file, value.to_string())
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", file.display())))
}

/// A connection to the system manager on a bus (one per daemon; the free functions connect per
/// call).
pub struct Systemd {
    bus: Connection,
}

impl Systemd {
    /// The system bus (`$DBUS_SYSTEM_BUS_ADDRESS`, else `/run/dbus/system_bus_socket`).
    pub fn system() -> io::Result<Systemd> {
        let bus = Connection::system().map_err(|e| bus_error("connecting to the system bus", e))?;
        Ok(Systemd { bus })
    }

    /// A bus at `address` (tests: a private `dbus-daemon`).
    pub fn at(address: &str) -> io::Result<Systemd> {
        let bus = zbus::blocking::connection::Builder::address(address)
            .and_then(|b| b.build())
            .map_err(|e| bus_error(&format!("connecting to {address}"), e))?;
        Ok(Systemd { bus })
    }

    /// The unit's `CPUWeight` property ([`UNSET`] when not configured).
    pub fn weight(&self, unit: &Unit) -> io::Result<u64> {
        let what = format!("reading CPUWeight of {}", unit.name);
        let reply = self
            .bus
            .call_method(Some(DEST), PATH, Some(MANAGER), "GetUnit", &(&unit.name,))
            .map_err(|e| bus_error(&what, e))?;
        let path: OwnedObjectPath = reply
            .body()
            .deserialize()
            .map_err(|e| bus_error(&what, e))?;
        let props = Some("org.freedesktop.DBus.Properties");
        let reply = self
            .bus
            .call_method(
                Some(DEST),
                &path,
                props,
                "Get",
                &(unit.interface()?, "CPUWeight"),
            )
            .map_err(|e| bus_error(&what, e))?;
        let value: OwnedValue = reply
            .body()
            .deserialize()
            .map_err(|e| bus_error(&what, e))?;
        u64::try_from(value).map_err(|e| bus_error(&what, e.into()))
    }

    /// `SetUnitProperties(name, runtime = true, [("CPUWeight", <t weight>)])`.
    pub fn set_weight(&self, unit: &Unit, weight: u64) -> io::Result<()> {
        let props = vec![("CPUWeight", Value::U64(weight))];
        self.bus
            .call_method(
                Some(DEST),
                PATH,
                Some(MANAGER),
                "SetUnitProperties",
                &(&unit.name, true, props),
            )
            .map_err(|e| bus_error(&format!("setting CPUWeight={weight} on {}", unit.name), e))?;
        Ok(())
    }
}

/// A D-Bus failure as an `io::Error` that names what was being done; systemd's "no such unit"
/// (the app exited) is `NotFound`.
fn bus_error(what: &str, e: zbus::Error) -> io::Error {
    let kind = match &e {
        zbus::Error::MethodError(name, _, _) if name.as_str().ends_with(".NoSuchUnit") => {
            io::ErrorKind::NotFound
        }
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_system_service_and_a_user_apps_scope() {
        let m = Path::new("/sys/fs/cgroup");
        let u = unit_in("/system.slice/nginx.service", m).unwrap();
        assert_eq!(u.name, "nginx.service");
        assert_eq!(
            u.dir,
            Path::new("/sys/fs/cgroup/system.slice/nginx.service")
        );
        assert_eq!(u.owner, Owner::System);
        let p =
            "/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-firefox-42.scope";
        let u = unit_in(p, m).unwrap();
        assert_eq!(u.name, "app-gnome-firefox-42.scope");
        assert_eq!(u.owner, Owner::User { uid: 1000 });
        assert_eq!(u.dir, m.join(p.trim_start_matches('/')));
        // A session scope is the system manager's (logind asks PID 1 for it).
        let u = unit_in("/user.slice/user-1000.slice/session-3.scope", m).unwrap();
        assert_eq!(
            (u.name.as_str(), u.owner),
            ("session-3.scope", Owner::System)
        );
        // A process in a unit's sub-cgroup belongs to that unit.
        let u = unit_in("/system.slice/docker.service/sub", m).unwrap();
        assert_eq!(u.name, "docker.service");
        assert_eq!(unit_in("/", m), None);
        assert_eq!(unit_in("/uxsched-fg", m), None);
    }

    #[test]
    fn the_property_lives_on_the_units_type_interface() {
        let unit = |name: &str| Unit {
            name: name.into(),
            dir: PathBuf::new(),
            owner: Owner::System,
        };
        assert_eq!(
            unit("a.scope").interface().unwrap(),
            "org.freedesktop.systemd1.Scope"
        );
        assert_eq!(
            unit("a.service").interface().unwrap(),
            "org.freedesktop.systemd1.Service"
        );
        assert!(unit("a.mount").interface().is_err());
    }

    #[test]
    fn a_delegated_units_weight_is_its_own_cpu_weight_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cpu.weight"), "100\n").unwrap();
        let unit = Unit {
            name: "app-x-1.scope".into(),
            dir: dir.path().into(),
            owner: Owner::User { uid: 1000 },
        };
        assert_eq!(weight(&unit).unwrap(), 100);
        set_weight(&unit, 7007).unwrap();
        assert_eq!(weight(&unit).unwrap(), 7007);
        set_weight(&unit, UNSET).unwrap();
        assert_eq!(weight(&unit).unwrap(), 100, "unset is the kernel default");
        std::fs::remove_file(dir.path().join("cpu.weight")).unwrap();
        assert!(weight(&unit).is_err());
    }
}
