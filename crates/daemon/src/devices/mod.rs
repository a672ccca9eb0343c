//! The opt-in device levers: `[storage] switch_to_iocost` (`iocost.rs`), and here
//! `[storage] switch_to_bfq`: each chosen disk runs BFQ while the
//! daemon runs and its own elevator again after. BFQ is the one Linux elevator that raises a
//! new, interactive queue's weight by itself and honours I/O classes and cgroup weights alike;
//! on the 2-vCPU VM a cold GTK launch under two fsync'ing writers went from a median of 3.1 s
//! (mq-deadline) to 1.1 s with it (issue 33). It is the whole machine's setting, and costs
//! throughput on fast devices, so it is off unless asked for.
//!
//! Safety is the journal's, as for every other change: a row (device, its `major:minor`, the
//! original and the applied elevator) is committed before the switch, in the daemon's journal
//! (table `devices`), and removed only once the original is back. A daemon killed outright
//! leaves the row; the next start puts the original back before anything else. A device whose
//! elevator someone changed since is left as they set it, and a device that is gone, or whose
//! name now belongs to another device (another `major:minor`), is forgotten.

pub mod iocost;

use crate::journal::{Journal, JournalError};
use rusqlite::params;
use std::path::{Path, PathBuf};
use tracing::{info, warn};
use uxsched_os::block::parse_scheduler;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS devices (
     name TEXT PRIMARY KEY, dev TEXT NOT NULL, original TEXT NOT NULL, applied TEXT NOT NULL)";

/// One journalled elevator switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    pub name: String,
    /// `major:minor` as `/sys/block/<name>/dev` gave it when switched.
    pub dev: String,
    pub original: String,
    pub applied: String,
}

/// The block devices' sysfs (`/sys`; tests may point elsewhere).
#[derive(Debug, Clone)]
pub struct Devices {
    pub sys: PathBuf,
}

impl Default for Devices {
    fn default() -> Self {
        Devices { sys: "/sys".into() }
    }
}

impl Devices {
    fn queue(&self, name: &str) -> PathBuf {
        self.sys.join("block").join(name).join("queue/scheduler")
    }

    fn dev(&self, name: &str) -> Option<String> {
        block_dev(&self.sys, name)
    }

    /// (active, offered) elevators of `name`.
    pub fn elevator(&self, name: &str) -> std::io::Result<(Option<String>, Vec<String>)> {
        Ok(parse_scheduler(&std::fs::read_to_string(self.queue(name))?))
    }

    fn set(&self, name: &str, elevator: &str) -> std::io::Result<()> {
        std::fs::write(self.queue(name), elevator)
    }

    /// The disks that run BFQ now (after the switch, if asked for): there a thread uxsched
    /// renices keeps best-effort level 4 (`reconcile::PINNED_IO_LEVEL`). Read once at start;
    /// an elevator changed while the daemon runs is not followed.
    pub fn on_bfq(&self) -> Vec<String> {
        match uxsched_os::block::Probe::read_at(&self.sys, None, None) {
            Ok(p) => p
                .devices
                .into_iter()
                .filter(|d| d.scheduler.as_deref() == Some("bfq"))
                .map(|d| d.name)
                .collect(),
            Err(e) => {
                warn!("cannot probe the block devices ({e}): no disk taken to run BFQ");
                Vec::new()
            }
        }
    }

    /// Switch each of `names` that offers BFQ and runs something else to BFQ, journalled
    /// first. Returns the switches made; a device that cannot be switched is logged and skipped.
    pub fn switch_to_bfq(
        &self,
        journal: &Journal,
        names: &[String],
    ) -> Result<Vec<Switch>, JournalError> {
        let mut made = Vec::new();
        for name in names {
            let (Some(dev), Ok((Some(active), offered))) = (self.dev(name), self.elevator(name))
            else {
                warn!(device = %name, "no such block device with an elevator: not switched to bfq (check `[storage] bfq_devices`)");
                continue;
            };
            if active == "bfq" {
                continue;
            }
            // Not offered yet: BFQ may be a module not loaded (Debian's and Ubuntu's kernels);
            // writing its name makes the kernel load it (`elevator_change` asks for
            // "bfq-iosched"), as `echo bfq > queue/scheduler` by hand does.
            let offered = offered.iter().any(|e| e == "bfq");
            let s = Switch {
                name: name.clone(),
                dev,
                original: active,
                applied: "bfq".into(),
            };
            record(journal, &s)?;
            match self.set(name, "bfq") {
                Ok(()) => {
                    info!(device = %name, from = %s.original, "switched to bfq while the daemon runs");
                    made.push(s);
                }
                Err(e) => {
                    let why = if offered {
                        ""
                    } else {
                        " (not offered, and the kernel could not load it: CONFIG_IOSCHED_BFQ)"
                    };
                    warn!(device = %name, "cannot switch to bfq: {e}{why}; left on {}", s.original);
                    forget(journal, name)?;
                }
            }
        }
        Ok(made)
    }

    /// Put every journalled device back to its original elevator (stop, and a start after a
    /// killed daemon), then forget the rows.
    pub fn restore(&self, journal: &Journal) -> Result<(), JournalError> {
        for s in switches(journal)? {
            self.restore_one(&s);
            forget(journal, &s.name)?;
        }
        Ok(())
    }

    fn restore_one(&self, s: &Switch) {
        if self.dev(&s.name).as_deref() != Some(s.dev.as_str()) {
            info!(device = %s.name, "switched device is gone (or is another device now): nothing to restore");
            return;
        }
        match self.elevator(&s.name) {
            Ok((Some(now), _)) if now == s.applied => match self.set(&s.name, &s.original) {
                Ok(()) => info!(device = %s.name, to = %s.original, "elevator restored"),
                Err(e) => {
                    warn!(device = %s.name, "cannot restore its elevator to {}: {e}; set it by hand: echo {} > {}", s.original, s.original, self.queue(&s.name).display())
                }
            },
            Ok((now, _)) => {
                info!(device = %s.name, now = ?now, "elevator changed by someone else since: left as it is")
            }
            Err(e) => {
                warn!(device = %s.name, "cannot read its elevator ({e}); restore {} by hand", s.original)
            }
        }
    }
}

/// The `major:minor` of block device `name` under sysfs `sys` (`/sys/block/<name>/dev`):
/// what identifies a switched disk when its name is reused.
fn block_dev(sys: &Path, name: &str) -> Option<String> {
    let p = sys.join("block").join(name).join("dev");
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned())
}

/// The switches the journal holds.
pub fn switches(journal: &Journal) -> Result<Vec<Switch>, JournalError> {
    let conn = journal.connection();
    conn.execute_batch(SCHEMA)?;
    let mut stmt =
        conn.prepare("SELECT name, dev, original, applied FROM devices ORDER BY name")?;
    let rows = stmt.query_map([], |r| {
        Ok(Switch {
            name: r.get(0)?,
            dev: r.get(1)?,
            original: r.get(2)?,
            applied: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn record(journal: &Journal, s: &Switch) -> Result<(), JournalError> {
    let conn = journal.connection();
    conn.execute_batch(SCHEMA)?;
    conn.execute(
        "INSERT OR REPLACE INTO devices VALUES (?1, ?2, ?3, ?4)",
        params![s.name, s.dev, s.original, s.applied],
    )?;
    Ok(())
}

fn forget(journal: &Journal, name: &str) -> Result<(), JournalError> {
    journal
        .connection()
        .execute("DELETE FROM devices WHERE name = ?1", params![name])?;
    Ok(())
}

/// The disks a device switch (`switch_to_bfq`, `switch_to_iocost`) acts on: those it names,
/// else every disk the probe lists (whole disks with an elevator; loop, ram and zram devices
/// are not disks).
pub fn chosen(named: &[String], sys: &Path) -> Vec<String> {
    if !named.is_empty() {
        return named.to_vec();
    }
    let probe = uxsched_os::block::Probe::read_at(sys, None, None);
    match probe {
        Ok(p) => p
            .devices
            .into_iter()
            .filter(|d| d.scheduler.is_some())
            .map(|d| d.name)
            .collect(),
        Err(e) => {
            warn!("cannot list the block devices ({e}): no disk switched");
            Vec::new()
        }
    }
}

/// `uxsched doctor`'s storage section: each disk as the probe reads it, and in plain words
/// what the storage levers can do there and what to change.
pub fn doctor_lines(cfg: &crate::config::storage::Storage) -> Vec<String> {
    let probe = match uxsched_os::block::Probe::read() {
        Ok(p) => p,
        Err(e) => return vec![format!("cannot probe the block devices: {e}")],
    };
    let mut lines: Vec<String> = probe.describe().lines().map(str::to_owned).collect();
    let module = uxsched_os::block::bfq_is_a_module();
    for d in probe.devices.iter().filter(|d| d.scheduler.is_some()) {
        if let Some(line) = disk_advice(d, cfg, module) {
            lines.push(line);
        }
    }
    if cfg.group_prio_classes() != (None, None) {
        lines.extend(crate::actuators::io_class::device_lines(&probe.devices));
    }
    if cfg.switch_to_iocost {
        lines.push(match iocost::Iocost::here() {
            Some(io) => format!(
                "switch_to_iocost: blk-iocost is enabled on {} while the daemon runs ({})",
                chosen(&cfg.iocost_devices, &io.sys).join(", "),
                io.qos.display()
            ),
            None => "switch_to_iocost: no cgroup2 io.cost.qos here (cgroup v1, or a kernel \
                     without CONFIG_BLK_CGROUP_IOCOST): it does nothing"
                .to_owned(),
        });
    }
    if cfg.unit_io_weights().is_some() {
        let qos = probe
            .cgroup
            .mount
            .as_ref()
            .and_then(|m| uxsched_os::procfs::read_to_string(m.join("io.cost.qos")).ok());
        let front = cfg.front_unit_io_weight;
        lines.extend(unit_io_lines(
            &probe.devices,
            qos.as_deref().unwrap_or(""),
            front,
        ));
    }
    lines.push(if cfg.launch_budget_ms == 0 {
        "launches: not followed (`[storage] launch_budget_ms = 0`)".to_owned()
    } else {
        format!(
            "launches: a program started from the app in front is in front for up to {} ms",
            cfg.launch_budget_ms
        )
    });
    lines
}

/// Per disk, whether the units' `IOWeight` (`[storage] *_unit_io_weight`) can act on it: under
/// BFQ through `io.bfq.weight`, elsewhere only where blk-iocost is enabled for it (a line
/// `MAJ:MIN enable=1 …` of the root's `io.cost.qos`, the text given here). Under BFQ it also
/// says what `front` (`front_unit_io_weight`) becomes there: systemd compresses the scale above
/// the default (500 is 136, 10000 is 1000), which a reader measured as a 7 : 6 share against a
/// default unit at 500 and 5 : 1 at 10000 (docs/storage.md).
pub(crate) fn unit_io_lines(
    devices: &[uxsched_os::block::Device],
    qos: &str,
    front: u64,
) -> Vec<String> {
    let bfq = match front {
        0 => String::new(),
        w => format!(
            ": front_unit_io_weight {w} is BFQ weight {} against the default unit's 100",
            crate::actuators::unit::bfq_weight(w)
        ),
    };
    let iocost = |(major, minor): (u32, u32)| iocost::enabled_in(qos, &format!("{major}:{minor}"));
    devices
        .iter()
        .filter_map(|d| {
            let elevator = d.scheduler.as_deref()?;
            Some(if d.honours_bfq_weight() {
                format!(
                    "{}: the units' IOWeight acts (io.bfq.weight under bfq{bfq})",
                    d.name
                )
            } else if iocost(d.dev) {
                format!(
                    "{}: the units' IOWeight acts (blk-iocost is enabled for it)",
                    d.name
                )
            } else {
                format!(
                    "{}: the units' IOWeight does nothing under {elevator} without blk-iocost \
                     (`switch_to_bfq = true` or `switch_to_iocost = true`)",
                    d.name
                )
            })
        })
        .collect()
}

/// What `doctor` says of one disk's elevator, if anything: under `none`/`kyber` the front's
/// I/O class does nothing; under mq-deadline it orders the elevator's queue but not the writes
/// already at the disk, which is what a launch waits behind (docs/storage.md, "What is already
/// at the disk").
/// `module`: BFQ is a module not loaded yet (the switch loads it).
fn disk_advice(
    d: &uxsched_os::block::Device,
    cfg: &crate::config::storage::Storage,
    module: bool,
) -> Option<String> {
    let elevator = d.scheduler.as_deref()?;
    let bfq = module || d.available.iter().any(|e| e == "bfq");
    let remedy = if cfg.switch_to_bfq && bfq {
        ": it runs BFQ while the daemon runs (`switch_to_bfq`)".to_owned()
    } else if bfq {
        "; `[storage] switch_to_bfq = true` runs it on BFQ while the daemon runs".to_owned()
    } else {
        "; this kernel offers no BFQ for it".to_owned()
    };
    if d.honours_classes() {
        if elevator != "mq-deadline" {
            return None;
        }
        let shallow = if bfq {
            String::new()
        } else {
            " (a smaller `queue/iosched/async_depth` and `queue/max_sectors_kb` trade the \
             writers' throughput for it)"
                .to_owned()
        };
        return Some(format!(
            "{}: mq-deadline serves the front's reads first among what it holds, not before the \
             writes already sent to the disk{remedy}{shallow}",
            d.name
        ));
    }
    (cfg.front_class != crate::config::storage::FrontClass::Off).then(|| {
        format!(
            "{}: the front's I/O class does nothing under {elevator}{remedy}",
            d.name
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::storage::{FrontClass, Storage};
    use uxsched_os::block::Device;

    fn disk(elevator: &str, available: &[&str]) -> Device {
        Device {
            name: "vda".into(),
            dev: (253, 0),
            scheduler: Some(elevator.into()),
            available: available.iter().map(|s| s.to_string()).collect(),
            rotational: Some(true),
            slaves: Vec::new(),
            root: true,
        }
    }

    #[test]
    fn the_units_io_weight_acts_under_bfq_or_where_iocost_is_enabled_for_the_disk() {
        let lines = |elevator: &str, qos: &str| unit_io_lines(&[disk(elevator, &[])], qos, 0);
        assert!(lines("bfq", "")[0].contains("acts (io.bfq.weight"));
        let weight = unit_io_lines(&[disk("bfq", &[])], "", 500);
        assert!(
            weight[0].ends_with(
                "front_unit_io_weight 500 is BFQ weight 136 against the default unit's 100)"
            ),
            "{weight:?}"
        );
        let off = lines("mq-deadline", "");
        assert!(off[0].contains("does nothing under mq-deadline"), "{off:?}");
        let qos = "8:0 enable=1 ctrl=auto\n253:0 enable=1 ctrl=auto rpct=95.00\n";
        assert!(lines("none", qos)[0].contains("blk-iocost is enabled"));
        // Another disk's line, or this disk's with iocost off, does not count.
        assert!(lines("none", "8:0 enable=1\n253:0 enable=0\n")[0].contains("does nothing"));
        assert!(lines("none", "253:00 enable=1\n")[0].contains("does nothing"));
    }

    #[test]
    fn doctor_names_the_writes_at_the_disk_under_mq_deadline_and_the_remedy_the_kernel_offers() {
        let cfg = Storage::default();
        let with_bfq =
            disk_advice(&disk("mq-deadline", &["mq-deadline", "bfq"]), &cfg, false).unwrap();
        assert!(with_bfq.contains("not before the writes already sent to the disk"));
        assert!(with_bfq.contains("switch_to_bfq = true"), "{with_bfq}");
        let without = disk_advice(&disk("mq-deadline", &["mq-deadline"]), &cfg, false).unwrap();
        assert!(without.contains("offers no BFQ") && without.contains("async_depth"));
        assert_eq!(disk_advice(&disk("bfq", &["bfq"]), &cfg, false), None);
        let none = disk_advice(&disk("none", &["none", "bfq"]), &cfg, false).unwrap();
        assert!(none.contains("does nothing under none"), "{none}");
        // BFQ a module not loaded yet (Debian's kernels): not offered, but the switch loads it.
        let module = disk_advice(&disk("none", &["none", "mq-deadline"]), &cfg, true).unwrap();
        assert!(module.contains("switch_to_bfq = true"), "{module}");
        let off = Storage {
            front_class: FrontClass::Off,
            ..Storage::default()
        };
        assert_eq!(disk_advice(&disk("none", &["none"]), &off, false), None);
    }

    #[test]
    fn the_disks_on_bfq_are_those_whose_active_elevator_is_bfq() {
        let tmp = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("vda", "none [mq-deadline] kyber bfq\n"),
            ("sdb", "mq-deadline [bfq] none\n"),
            ("loop0", "[none] bfq\n"),
        ] {
            let q = tmp.path().join("block").join(name).join("queue");
            std::fs::create_dir_all(&q).unwrap();
            std::fs::write(q.join("scheduler"), text).unwrap();
            std::fs::write(q.parent().unwrap().join("dev"), "253:0\n").unwrap();
        }
        std::fs::create_dir_all(tmp.path().join("block/zram0/queue")).unwrap();
        let d = Devices {
            sys: tmp.path().into(),
        };
        assert_eq!(d.on_bfq(), ["sdb"]);
    }
}
