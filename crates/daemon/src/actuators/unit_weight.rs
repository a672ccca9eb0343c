//! A systemd unit's CPU or I/O weight as an [`Actuator`] — the placement levers on a systemd
//! machine, where uxsched must not move processes out of their units (`unit.rs`). The object is
//! the unit (every process of an `app-*.scope` shares its weight), keyed by its cgroup's id and
//! reached through any process still in it; one actuator per weight ([`Property`]).

use super::unit::{self, Owner, Property, Systemd, Unit};
use super::Actuator;
use crate::types::Key;
use crate::types::{Kind, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use uxsched_os::identity::TaskId;

pub struct UnitWeight {
    /// The cgroup2 mount, searched for a unit's directory once the thread that named it left.
    pub mount: PathBuf,
    /// Which weight: `CPUWeight` ([`Kind::Unit`]) or `IOWeight` ([`Kind::UnitIo`]).
    pub prop: Property,
    /// One system-bus connection, opened on first use and reopened after an error.
    bus: RefCell<Option<Systemd>>,
    /// Each process's unit as read in this pass: its threads share it, and a pass asks for
    /// every thread of the apps it places (`new_pass` drops it).
    keys: RefCell<HashMap<i32, Option<Key>>>,
}

impl UnitWeight {
    pub fn new(mount: PathBuf, prop: Property) -> UnitWeight {
        UnitWeight {
            mount,
            prop,
            bus: RefCell::new(None),
            keys: RefCell::new(HashMap::new()),
        }
    }

    fn unit_at(&self, pid: i32) -> io::Result<Unit> {
        unit::unit_of_in(pid, &self.mount)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("process {pid} is in no systemd unit"),
            )
        })
    }

    /// Run `f` on the system manager's connection (a failure drops it, so the next call
    /// reconnects: systemd may have been restarted).
    fn on_bus<T>(&self, f: impl FnOnce(&Systemd) -> io::Result<T>) -> io::Result<T> {
        let mut bus = self.bus.borrow_mut();
        if bus.is_none() {
            *bus = Some(Systemd::system()?);
        }
        let r = f(bus.as_ref().expect("just connected"));
        if r.is_err() {
            *bus = None;
        }
        r
    }
}

/// The cgroup id of a directory: its inode number on cgroup2.
fn cgroup_id(dir: &Path) -> io::Result<u64> {
    Ok(std::fs::metadata(dir)?.ino())
}

/// A process in the cgroup directory with id `id` (or below it), searching `dir` depth-first.
fn member_of(dir: &Path, id: u64, inside: bool) -> Option<i32> {
    let here = inside || cgroup_id(dir).ok() == Some(id);
    if here {
        let procs =
            uxsched_os::procfs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        if let Some(pid) = procs.lines().find_map(|l| l.trim().parse().ok()) {
            return Some(pid);
        }
    }
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .find_map(|e| member_of(&e.path(), id, here))
}

impl Actuator for UnitWeight {
    fn kind(&self) -> Kind {
        self.prop.kind()
    }

    fn key(&self, task: &TaskId) -> io::Result<Option<Key>> {
        if let Some(key) = self.keys.borrow().get(&task.pid) {
            return Ok(*key);
        }
        let key = match unit::unit_of_in(task.pid, &self.mount)? {
            Some(u) => Some(Key::Unit(cgroup_id(&u.dir)?)),
            None => None,
        };
        self.keys.borrow_mut().insert(task.pid, key);
        Ok(key)
    }

    fn new_pass(&self) {
        self.keys.borrow_mut().clear();
    }

    fn reach(&self, key: &Key) -> Option<i32> {
        let Key::Unit(id) = key else {
            return None;
        };
        member_of(&self.mount, *id, false)
    }

    fn read(&self, via: i32) -> io::Result<Value> {
        let u = self.unit_at(via)?;
        let w = match u.owner {
            Owner::System => self.on_bus(|b| b.weight(&u, self.prop)),
            Owner::User { .. } => unit::weight(&u, self.prop),
        }?;
        Ok(self.prop.value(w))
    }

    fn write(&self, via: i32, value: &Value) -> io::Result<()> {
        let w = match Property::of(value) {
            Some((prop, w)) if prop == self.prop => w,
            _ => return Err(super::wrong_kind(self.kind(), value)),
        };
        let u = self.unit_at(via)?;
        match u.owner {
            Owner::System => self.on_bus(|b| b.set_weight(&u, self.prop, w)),
            Owner::User { .. } => unit::set_weight(&u, self.prop, w),
        }
    }
}
