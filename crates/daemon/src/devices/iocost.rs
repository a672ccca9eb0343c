//! The opt-in `[storage] switch_to_iocost`: blk-iocost enabled on each chosen disk while the
//! daemon runs, and disabled again after. iocost is the cgroup v2 controller that makes
//! `io.weight` — systemd's `IOWeight=`, so the units' weights of `[storage] *_unit_io_weight`
//! — act under any elevator, `none` included (an NVMe disk's default, where BFQ is not there
//! to honour a weight). It is enabled per device in the root's `io.cost.qos` (cgroup-v2.rst,
//! "IO Cost QoS"): `MAJ:MIN enable=1` with the kernel's own cost model and `ctrl=auto`.
//!
//! Safety is the journal's, as for the elevator switch (`devices/mod.rs`): a row (the device's
//! `major:minor` and name) is committed before the write and removed only once iocost is off
//! again. A daemon killed outright leaves the row; the next start disables it first. A device
//! where someone disabled iocost since is left as it is, and one that is gone, or whose name
//! is another device's now, is forgotten. The kernel keeps a device's iocost state once set,
//! so after the restore `io.cost.qos` lists the device with `enable=0` where it listed nothing
//! before: the same behaviour (iocost off), a different text.

use crate::journal::{Journal, JournalError};
use rusqlite::params;
use std::path::PathBuf;
use tracing::{info, warn};

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS iocost (dev TEXT PRIMARY KEY, name TEXT NOT NULL)";

/// Whether `io.cost.qos` text enables iocost for device `dev` (`MAJ:MIN`).
pub fn enabled_in(qos: &str, dev: &str) -> bool {
    qos.lines().any(|l| {
        let mut words = l.split_whitespace();
        words.next() == Some(dev) && words.any(|w| w == "enable=1")
    })
}

/// The root's `io.cost.qos` and the block devices' sysfs (tests point both elsewhere).
#[derive(Debug, Clone)]
pub struct Iocost {
    pub qos: PathBuf,
    pub sys: PathBuf,
}

impl Iocost {
    /// On this machine: `None` without cgroup2, or with a kernel without blk-iocost.
    pub fn here() -> Option<Iocost> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let qos = uxsched_os::block::cgroup2_mount(&mountinfo)?.join("io.cost.qos");
        qos.exists().then(|| Iocost {
            qos,
            sys: "/sys".into(),
        })
    }

    fn dev(&self, name: &str) -> Option<String> {
        super::block_dev(&self.sys, name)
    }

    fn enabled(&self, dev: &str) -> std::io::Result<bool> {
        Ok(enabled_in(&std::fs::read_to_string(&self.qos)?, dev))
    }

    fn write(&self, dev: &str, on: bool) -> std::io::Result<()> {
        std::fs::write(&self.qos, format!("{dev} enable={}", u8::from(on)))
    }

    /// Enable iocost on each of `names` where it is off, journalled first. Returns the disks
    /// it was enabled on; a disk where it cannot be is logged and skipped.
    pub fn enable(&self, journal: &Journal, names: &[String]) -> Result<Vec<String>, JournalError> {
        let mut made = Vec::new();
        for name in names {
            let Some(dev) = self.dev(name) else {
                warn!(device = %name, "no such block device: blk-iocost not enabled (check `[storage] iocost_devices`)");
                continue;
            };
            match self.enabled(&dev) {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => {
                    warn!(device = %name, "cannot read {} ({e}): blk-iocost not enabled", self.qos.display());
                    continue;
                }
            }
            record(journal, &dev, name)?;
            match self.write(&dev, true) {
                Ok(()) => {
                    info!(device = %name, dev = %dev, "blk-iocost enabled while the daemon runs");
                    made.push(name.clone());
                }
                Err(e) => {
                    warn!(device = %name, "cannot enable blk-iocost: {e}");
                    forget(journal, &dev)?;
                }
            }
        }
        Ok(made)
    }

    /// Disable iocost again where a journalled row says uxsched enabled it (stop, and a start
    /// after a killed daemon), then forget the rows.
    pub fn restore(&self, journal: &Journal) -> Result<(), JournalError> {
        for (dev, name) in rows(journal)? {
            self.restore_one(&dev, &name);
            forget(journal, &dev)?;
        }
        Ok(())
    }

    fn restore_one(&self, dev: &str, name: &str) {
        if self.dev(name).as_deref() != Some(dev) {
            info!(device = %name, "device gone (or another device now): no blk-iocost to disable");
            return;
        }
        match self.enabled(dev) {
            Ok(true) => match self.write(dev, false) {
                Ok(()) => info!(device = %name, "blk-iocost disabled again"),
                Err(e) => {
                    warn!(device = %name, "cannot disable blk-iocost: {e}; by hand: echo '{dev} enable=0' > {}", self.qos.display())
                }
            },
            Ok(false) => {
                info!(device = %name, "blk-iocost disabled by someone else since: left as it is")
            }
            Err(e) => {
                warn!(device = %name, "cannot read {} ({e}); disable blk-iocost by hand: echo '{dev} enable=0' > it", self.qos.display())
            }
        }
    }
}

/// The disks the journal says uxsched enabled iocost on: (`MAJ:MIN`, name).
pub fn rows(journal: &Journal) -> Result<Vec<(String, String)>, JournalError> {
    let conn = journal.connection();
    conn.execute_batch(SCHEMA)?;
    let mut stmt = conn.prepare("SELECT dev, name FROM iocost ORDER BY name")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn record(journal: &Journal, dev: &str, name: &str) -> Result<(), JournalError> {
    let conn = journal.connection();
    conn.execute_batch(SCHEMA)?;
    conn.execute(
        "INSERT OR REPLACE INTO iocost VALUES (?1, ?2)",
        params![dev, name],
    )?;
    Ok(())
}

fn forget(journal: &Journal, dev: &str) -> Result<(), JournalError> {
    journal
        .connection()
        .execute("DELETE FROM iocost WHERE dev = ?1", params![dev])?;
    Ok(())
}

/// A fake root: `io.cost.qos` as a plain file (a write replaces the device's line, as the
/// kernel's file shows it after) and a `/sys/block/<name>/dev` per disk.
#[cfg(test)]
fn fake(dir: &std::path::Path, disks: &[(&str, &str)], qos: &str) -> Iocost {
    for (name, dev) in disks {
        let d = dir.join("sys/block").join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("dev"), format!("{dev}\n")).unwrap();
    }
    std::fs::write(dir.join("io.cost.qos"), qos).unwrap();
    Iocost {
        qos: dir.join("io.cost.qos"),
        sys: dir.join("sys"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One enabled, one already on (left alone), one missing; the journal row outlives a
    /// killed daemon and the next restore disables exactly what was enabled.
    #[test]
    fn enabled_where_off_journalled_first_and_disabled_again_at_restore() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(&dir.path().join("j.sqlite"), |_| None).unwrap();
        let io = fake(
            dir.path(),
            &[("vda", "254:0"), ("vdb", "254:16")],
            "254:16 enable=1 ctrl=auto rpct=0.00\n",
        );
        let names = ["vdb", "vda", "nvme9n1"].map(String::from); // vdb read before the fake file is rewritten
        assert_eq!(io.enable(&journal, &names).unwrap(), vec!["vda"]);
        assert_eq!(std::fs::read_to_string(&io.qos).unwrap(), "254:0 enable=1");
        assert_eq!(
            rows(&journal).unwrap(),
            vec![("254:0".into(), "vda".into())]
        );
        // The daemon is killed here; its successor restores from the same journal.
        io.restore(&journal).unwrap();
        assert_eq!(std::fs::read_to_string(&io.qos).unwrap(), "254:0 enable=0");
        assert!(rows(&journal).unwrap().is_empty());
    }

    /// Someone disabled it meanwhile, or the name is another device now: left as it is.
    #[test]
    fn a_device_changed_by_someone_else_or_renumbered_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(&dir.path().join("j.sqlite"), |_| None).unwrap();
        let io = fake(dir.path(), &[("vda", "254:0"), ("vdb", "254:16")], "");
        io.enable(&journal, &["vda".into(), "vdb".into()]).unwrap();
        std::fs::write(&io.qos, "254:0 enable=0\n254:16 enable=1\n").unwrap();
        std::fs::write(io.sys.join("block/vdb/dev"), "254:32\n").unwrap();
        io.restore(&journal).unwrap();
        assert_eq!(
            std::fs::read_to_string(&io.qos).unwrap(),
            "254:0 enable=0\n254:16 enable=1\n",
            "nothing written"
        );
        assert!(rows(&journal).unwrap().is_empty());
    }

    #[test]
    fn enabled_is_read_per_device() {
        let qos = "8:0 enable=0 ctrl=auto\n8:16 enable=1 ctrl=user rpct=95.00\n";
        assert!(!enabled_in(qos, "8:0"));
        assert!(enabled_in(qos, "8:16"));
        assert!(!enabled_in(qos, "8:1"));
    }
}
