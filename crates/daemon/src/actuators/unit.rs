//! A systemd unit's CPU and I/O weight — how uxsched raises an app on a systemd machine.
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
//! `IOWeight` ([`Property::Io`], `[storage] front_unit_io_weight`) goes the same two ways. systemd
//! writes it to the unit's `io.weight` (honoured by blk-iocost) and, converted, `io.bfq.weight`
//! (BFQ's group scheduling), enabling the io controller down the unit's path itself; in a user
//! manager's subtree the files exist only where `user@.service` delegates `io` (Debian's
//! delegates `cpu memory pids`), and uxsched writes them as systemd would.
//!
//! Both weights are in `cpu.weight`/`io.weight` units (1..=10000, 100 = default); systemd
//! reports an unset weight as [`UNSET`], and setting [`UNSET`] back resets the unit to "not set"
//! (systemd's `CGROUP_WEIGHT_INVALID`), which is how an unset original is restored.

use crate::types::{Kind, Value as Setting};
use std::io;
use std::path::{Path, PathBuf};
use zbus::blocking::Connection;
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

/// systemd's "no CPUWeight configured" (`CGROUP_WEIGHT_INVALID`, `(uint64_t) -1`).
pub const UNSET: u64 = u64::MAX;

const DEST: &str = "org.freedesktop.systemd1";
const PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";

/// Which weight of a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Property {
    /// `CPUWeight` (`cpu.weight`).
    Cpu,
    /// `IOWeight` (`io.weight`, and `io.bfq.weight` converted).
    Io,
}

impl Property {
    /// systemd's name of the property.
    pub fn name(self) -> &'static str {
        match self {
            Property::Cpu => "CPUWeight",
            Property::Io => "IOWeight",
        }
    }

    /// The journal's kind of setting for it.
    pub fn kind(self) -> Kind {
        match self {
            Property::Cpu => Kind::Unit,
            Property::Io => Kind::UnitIo,
        }
    }

    /// A weight of this property as a setting's value.
    pub fn value(self, weight: u64) -> Setting {
        match self {
            Property::Cpu => Setting::Unit(weight),
            Property::Io => Setting::UnitIo(weight),
        }
    }

    /// The property and weight a setting's value holds, if it is a unit's weight.
    pub fn of(value: &Setting) -> Option<(Property, u64)> {
        match value {
            Setting::Unit(w) => Some((Property::Cpu, *w)),
            Setting::UnitIo(w) => Some((Property::Io, *w)),
            _ => None,
        }
    }

    /// The cgroup file that holds it.
    fn file(self) -> &'static str {
        match self {
            Property::Cpu => "cpu.weight",
            Property::Io => "io.weight",
        }
    }
}

/// An `io.weight` (1..=10000, default 100) as the `io.bfq.weight` systemd writes beside it
/// (1..=1000, default 100): linear on each side of the default (`BFQ_WEIGHT`, systemd's
/// src/basic/cgroup-util.h; below the default both ranges start at 1, so it is the identity).
pub fn bfq_weight(io_weight: u64) -> u64 {
    let w = io_weight.clamp(1, 10_000);
    if w <= 100 {
        w
    } else {
        100 + (w - 100) * 900 / 9_900
    }
}

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
    /// The D-Bus interface that carries the unit type's `CPUWeight` and `IOWeight` properties.
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
    let info = uxsched_os::procfs::read_to_string("/proc/self/mountinfo")?;
    let Some(mount) = super::cgroup::find_mounts(&info).1 else {
        return Ok(None);
    };
    unit_of_in(pid, &mount)
}

/// [`unit_of`] with the cgroup2 mount already known (the actuators keep it).
pub fn unit_of_in(pid: i32, mount: &Path) -> io::Result<Option<Unit>> {
    let text = uxsched_os::procfs::read_to_string(format!("/proc/{pid}/cgroup"))?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .and_then(|path| unit_in(path, mount)))
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

/// The unit's configured weight ([`UNSET`] if none) — what [`set_weight`] restores.
pub fn weight(unit: &Unit, prop: Property) -> io::Result<u64> {
    match unit.owner {
        Owner::System => Systemd::system()?.weight(unit, prop),
        Owner::User { .. } => read_weight(&unit.dir, prop),
    }
}

/// Set the unit's weight (cgroup weight units, or [`UNSET`] to clear it), runtime only.
pub fn set_weight(unit: &Unit, prop: Property, weight: u64) -> io::Result<()> {
    match unit.owner {
        Owner::System => Systemd::system()?.set_weight(unit, prop, weight),
        Owner::User { .. } => write_weight(&unit.dir, prop, weight),
    }
}

/// A delegated unit's weight from its file: `cpu.weight` holds a number, `io.weight` a
/// `default N` line (then one line per device with a weight of its own).
fn read_weight(dir: &Path, prop: Property) -> io::Result<u64> {
    let file = dir.join(prop.file());
    let text = uxsched_os::procfs::read_to_string(&file).map_err(|e| {
        let hint = match (prop, e.kind()) {
            (Property::Io, io::ErrorKind::NotFound) => {
                " (the user manager does not delegate the io controller: Delegate= of user@.service)"
            }
            _ => "",
        };
        io::Error::new(e.kind(), format!("{}: {e}{hint}", file.display()))
    })?;
    let first = text.lines().next().unwrap_or("").trim();
    let number = first.strip_prefix("default ").unwrap_or(first);
    number.trim().parse().map_err(|e| {
        let msg = format!("{}: {first:?}: {e}", file.display());
        io::Error::new(io::ErrorKind::InvalidData, msg)
    })
}

/// Write a delegated unit's weight as systemd would: for I/O, `io.bfq.weight` converted beside
/// `io.weight` where the unit has one (a disk on BFQ).
fn write_weight(dir: &Path, prop: Property, weight: u64) -> io::Result<()> {
    // The kernel default stands for "unset" in a file that always holds a number.
    let value = if weight == UNSET { 100 } else { weight };
    let write = |name: &str, text: String| {
        let file = dir.join(name);
        std::fs::write(&file, text)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", file.display())))
    };
    match prop {
        Property::Cpu => write(prop.file(), value.to_string()),
        Property::Io => {
            write(prop.file(), format!("default {value}"))?;
            if dir.join("io.bfq.weight").exists() {
                write("io.bfq.weight", format!("default {}", bfq_weight(value)))?;
            }
            Ok(())
        }
    }
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

    /// The unit's `CPUWeight` or `IOWeight` property ([`UNSET`] when not configured).
    pub fn weight(&self, unit: &Unit, prop: Property) -> io::Result<u64> {
        let what = format!("reading {} of {}", prop.name(), unit.name);
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
                &(unit.interface()?, prop.name()),
            )
            .map_err(|e| bus_error(&what, e))?;
        let value: OwnedValue = reply
            .body()
            .deserialize()
            .map_err(|e| bus_error(&what, e))?;
        u64::try_from(value).map_err(|e| bus_error(&what, e.into()))
    }

    /// `SetUnitProperties(name, runtime = true, [(prop, <t weight>)])`.
    pub fn set_weight(&self, unit: &Unit, prop: Property, weight: u64) -> io::Result<()> {
        let props = vec![(prop.name(), Value::U64(weight))];
        self.bus
            .call_method(
                Some(DEST),
                PATH,
                Some(MANAGER),
                "SetUnitProperties",
                &(&unit.name, true, props),
            )
            .map_err(|e| {
                let what = format!("setting {}={weight} on {}", prop.name(), unit.name);
                bus_error(&what, e)
            })?;
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
        let cpu = Property::Cpu;
        assert_eq!(weight(&unit, cpu).unwrap(), 100);
        set_weight(&unit, cpu, 7007).unwrap();
        assert_eq!(weight(&unit, cpu).unwrap(), 7007);
        set_weight(&unit, cpu, UNSET).unwrap();
        assert_eq!(
            weight(&unit, cpu).unwrap(),
            100,
            "unset is the kernel default"
        );
        std::fs::remove_file(dir.path().join("cpu.weight")).unwrap();
        assert!(weight(&unit, cpu).is_err());
    }

    /// `io.weight` holds `default N` and per-device lines; where the unit has an `io.bfq.weight`
    /// (a disk on BFQ) it gets systemd's conversion beside it; a user manager that does not
    /// delegate io has neither file, and the error says so.
    #[test]
    fn a_delegated_units_io_weight_is_written_as_systemd_writes_it() {
        let dir = tempfile::tempdir().unwrap();
        let unit = Unit {
            name: "app-x-1.scope".into(),
            dir: dir.path().into(),
            owner: Owner::User { uid: 1000 },
        };
        let e = weight(&unit, Property::Io).unwrap_err();
        assert!(
            e.to_string()
                .contains("does not delegate the io controller"),
            "{e}"
        );
        std::fs::write(dir.path().join("io.weight"), "default 100\n254:0 50\n").unwrap();
        std::fs::write(dir.path().join("io.bfq.weight"), "default 100\n").unwrap();
        assert_eq!(weight(&unit, Property::Io).unwrap(), 100);
        set_weight(&unit, Property::Io, 1000).unwrap();
        assert_eq!(weight(&unit, Property::Io).unwrap(), 1000);
        let bfq = std::fs::read_to_string(dir.path().join("io.bfq.weight")).unwrap();
        assert_eq!(bfq, "default 181");
        set_weight(&unit, Property::Io, UNSET).unwrap();
        assert_eq!(weight(&unit, Property::Io).unwrap(), 100);
        let bfq = std::fs::read_to_string(dir.path().join("io.bfq.weight")).unwrap();
        assert_eq!(bfq, "default 100");
    }

    #[test]
    fn bfq_weights_follow_systemds_conversion() {
        assert_eq!(
            [1, 10, 100, 1000, 10_000].map(bfq_weight),
            [1, 10, 100, 181, 1000]
        );
    }
}
