//! `actuators::unit` against a fake `org.freedesktop.systemd1` on a private `dbus-daemon`
//! (this machine has no systemd; Debian package `dbus-daemon`). The fake answers the calls
//! uxsched makes the way systemd does — `GetUnit`, the unit type's `CPUWeight` property,
//! `SetUnitProperties` applying at runtime, `NoSuchUnit` — and records every call with its wire
//! signature, so the test checks exactly what goes on the bus: the method, `runtime` = true,
//! `CPUWeight` as a `t`, and that the restore puts the original (here: unset) back.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use uxsched_daemon::actuators::unit::{self, Owner, Property, Systemd, Unit, UNSET};
use zbus::zvariant::{OwnedObjectPath, OwnedValue};

const SCOPE: &str = "app-test-42.scope";
const SCOPE_PATH: &str = "/org/freedesktop/systemd1/unit/app_2dtest_2d42_2escope";

/// One `SetUnitProperties` call as the fake received it.
#[derive(Debug, Clone, PartialEq)]
struct Call {
    signature: String,
    name: String,
    runtime: bool,
    properties: Vec<(String, String, u64)>, // (name, value signature, value)
}

#[derive(Default)]
struct Units {
    weights: HashMap<String, u64>,
    io_weights: HashMap<String, u64>,
    calls: Vec<Call>,
}

type Shared = Arc<Mutex<Units>>;

#[derive(Debug, zbus::DBusError)]
#[zbus(prefix = "org.freedesktop.systemd1")]
enum SystemdError {
    #[zbus(error)]
    ZBus(zbus::Error),
    NoSuchUnit(String),
}

struct Manager(Shared);

#[zbus::interface(name = "org.freedesktop.systemd1.Manager")]
impl Manager {
    fn get_unit(&self, name: String) -> Result<OwnedObjectPath, SystemdError> {
        if !self.0.lock().unwrap().weights.contains_key(&name) {
            return Err(SystemdError::NoSuchUnit(format!("Unit {name} not loaded.")));
        }
        Ok(OwnedObjectPath::try_from(SCOPE_PATH).unwrap())
    }

    fn set_unit_properties(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        name: String,
        runtime: bool,
        properties: Vec<(String, OwnedValue)>,
    ) -> Result<(), SystemdError> {
        let mut units = self.0.lock().unwrap();
        let mut seen = Vec::new();
        for (key, value) in &properties {
            let sig = value.value_signature().to_string();
            let v = u64::try_from(value).unwrap_or(0);
            if key == "CPUWeight" && sig == "t" {
                units.weights.insert(name.clone(), v);
            }
            if key == "IOWeight" && sig == "t" {
                units.io_weights.insert(name.clone(), v);
            }
            seen.push((key.clone(), sig, v));
        }
        // zvariant prints a body's signature as one structure, "(sba(sv))"; the wire's is the
        // inside.
        let body = header.signature().to_string();
        let signature = body
            .strip_prefix('(')
            .and_then(|b| b.strip_suffix(')'))
            .unwrap_or(&body)
            .to_owned();
        units.calls.push(Call {
            signature,
            name,
            runtime,
            properties: seen,
        });
        Ok(())
    }
}

struct Scope(Shared);

#[zbus::interface(name = "org.freedesktop.systemd1.Scope")]
impl Scope {
    #[zbus(property, name = "CPUWeight")]
    fn cpu_weight(&self) -> u64 {
        self.0.lock().unwrap().weights[SCOPE]
    }

    #[zbus(property, name = "IOWeight")]
    fn io_weight(&self) -> u64 {
        let units = self.0.lock().unwrap();
        units.io_weights.get(SCOPE).copied().unwrap_or(UNSET)
    }
}

/// A private bus: `dbus-daemon` with a config that lets this test own systemd's name.
struct Bus {
    child: Child,
    address: String,
    _dir: tempfile::TempDir,
}

impl Bus {
    fn start() -> Bus {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("bus.conf");
        std::fs::write(
            &config,
            format!(
                "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n \
                 \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n\
                 <busconfig><type>custom</type><listen>unix:path={}</listen><auth>EXTERNAL</auth>\n\
                 <policy context=\"default\"><allow user=\"*\"/><allow own=\"*\"/>\
                 <allow send_destination=\"*\"/><allow receive_sender=\"*\"/></policy></busconfig>\n",
                dir.path().join("bus").display()
            ),
        )
        .unwrap();
        let mut child = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--print-address=1"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start dbus-daemon ({e}): install the Debian package dbus-daemon")
            });
        let mut address = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut address)
            .unwrap();
        assert!(!address.trim().is_empty(), "dbus-daemon printed no address");
        Bus {
            child,
            address: address.trim().to_owned(),
            _dir: dir,
        }
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fake systemd on `bus`, with one scope whose CPUWeight is unset.
fn fake_systemd(bus: &Bus) -> (zbus::blocking::Connection, Shared) {
    let units: Shared = Arc::default();
    units.lock().unwrap().weights.insert(SCOPE.into(), UNSET);
    let conn = zbus::blocking::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .name("org.freedesktop.systemd1")
        .unwrap()
        .serve_at("/org/freedesktop/systemd1", Manager(units.clone()))
        .unwrap()
        .serve_at(SCOPE_PATH, Scope(units.clone()))
        .unwrap()
        .build()
        .unwrap();
    (conn, units)
}

fn scope() -> Unit {
    Unit {
        name: SCOPE.into(),
        dir: "/sys/fs/cgroup/user.slice/user-1000.slice/app-test-42.scope".into(),
        owner: Owner::System,
    }
}

#[test]
fn a_units_weight_is_raised_at_runtime_over_dbus_and_restored() {
    let bus = Bus::start();
    let (_server, units) = fake_systemd(&bus);
    let sd = Systemd::at(&bus.address).unwrap();
    let unit = scope();
    raise_and_restore(&sd, &units, Property::Cpu, 7007);

    let gone = Unit {
        name: "app-exited-1.scope".into(),
        ..scope()
    };
    let e = sd.weight(&gone, Property::Cpu).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
    assert!(e.to_string().contains("app-exited-1.scope"), "{e}");

    // The free functions take the system bus from $DBUS_SYSTEM_BUS_ADDRESS like any D-Bus
    // client (this test binary has no other test that reads it).
    std::env::set_var("DBUS_SYSTEM_BUS_ADDRESS", &bus.address);
    unit::set_weight(&unit, Property::Cpu, 500).unwrap();
    assert_eq!(unit::weight(&unit, Property::Cpu).unwrap(), 500);
    unit::set_weight(&unit, Property::Cpu, UNSET).unwrap();
    assert_eq!(units.lock().unwrap().calls.len(), 4);
    assert_eq!(units.lock().unwrap().weights[SCOPE], UNSET);
}

/// The storage lever's `IOWeight` goes the same way: read from the unit type's interface, set
/// at runtime as a `t` (systemd writes `io.weight` and `io.bfq.weight` from it), and the unset
/// original put back as unset — the CPU weight untouched meanwhile.
#[test]
fn a_units_io_weight_is_raised_at_runtime_over_dbus_and_restored() {
    let bus = Bus::start();
    let (_server, units) = fake_systemd(&bus);
    let sd = Systemd::at(&bus.address).unwrap();
    raise_and_restore(&sd, &units, Property::Io, 1000);
    let cpu = sd.weight(&scope(), Property::Cpu).unwrap();
    assert_eq!(cpu, UNSET, "CPUWeight untouched");
}

/// Raise the scope's `prop` to `w` and put its unset original back, checking what went on the
/// bus: exactly two runtime `SetUnitProperties` calls, each carrying `prop` alone, as a `t`.
fn raise_and_restore(sd: &Systemd, units: &Shared, prop: Property, w: u64) {
    let unit = scope();
    let original = sd.weight(&unit, prop).unwrap();
    assert_eq!(original, UNSET, "an unconfigured unit reads as unset");
    sd.set_weight(&unit, prop, w).unwrap();
    assert_eq!(sd.weight(&unit, prop).unwrap(), w);
    sd.set_weight(&unit, prop, original).unwrap();
    assert_eq!(sd.weight(&unit, prop).unwrap(), UNSET, "restored to unset");
    let expect = |w: u64| Call {
        signature: "sba(sv)".into(),
        name: SCOPE.into(),
        runtime: true,
        properties: vec![(prop.name().into(), "t".into(), w)],
    };
    assert_eq!(units.lock().unwrap().calls, [expect(w), expect(UNSET)]);
}
