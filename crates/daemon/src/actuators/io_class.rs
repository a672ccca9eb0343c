//! The cgroup v2 I/O class lever, `[storage] background_io_class` and `front_group_class`: the
//! `io.prio.class` of uxsched's own groups (`uxsched-fg`, `uxsched-bg`; `cgroup.rs`) where
//! uxsched places processes itself (cgroup v2, no systemd owning the tree). blk-ioprio
//! (Documentation/admin-guide/cgroup-v2.rst, "IO Priority") sets the class of every request a
//! group issues as it is submitted — the page-cache writeback charged to the group included
//! (cgroup writeback, where the memory and io controllers are both enabled for it), which
//! `ioprio_set(2)` on a thread never reaches: the flusher issues it.
//!
//! The groups' parent (the root) must pass the io controller on: it is enabled in the root's
//! `cgroup.subtree_control` if it is not, and disabled again at stop only when uxsched enabled
//! it and no other group uses it ([`io_in_use`]) — otherwise left on, and said.
//!
//! Safety is the journal's, as for the elevators (`devices.rs`): each write is a row of table
//! `cgroup_files` (the file, its directory's inode — the cgroup's id —, the original and the
//! applied text) in the journal's database (`Journal::connection`, passed in as `db`: an
//! actuator does not import the journal's layer), committed before the write and removed once
//! the original is back; the next start restores a killed daemon's rows first. A file someone changed since, or a group that is
//! gone or is another group now, is left as it is and forgotten.

use super::cgroup::{Groups, Hierarchy};
use crate::types::Group;
use rusqlite::{params, Connection};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use tracing::{info, warn};
use uxsched_os::block::Device;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS cgroup_files (
     path TEXT PRIMARY KEY, id INTEGER NOT NULL, original TEXT NOT NULL, applied TEXT NOT NULL)";

const SUBTREE: &str = "cgroup.subtree_control";
const PRIO: &str = "io.prio.class";

/// One journalled write to a cgroup file. For the root's `cgroup.subtree_control` the texts are
/// the controller switch: original `-io`, applied `+io`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: PathBuf,
    /// The inode of the file's directory when written (a cgroup's id on cgroup2).
    pub id: u64,
    pub original: String,
    pub applied: String,
}

/// Give uxsched's groups the classes asked for (`fg`, `bg`: the kernel's words, e.g. `idle`),
/// where it places processes in cgroup v2 groups of its own; elsewhere say why nothing is set.
pub fn apply_to_groups(
    db: &Connection,
    groups: Option<&Groups>,
    fg: Option<&str>,
    bg: Option<&str>,
) -> Result<Vec<Change>, rusqlite::Error> {
    if fg.is_none() && bg.is_none() {
        return Ok(Vec::new());
    }
    let Some(groups) = groups else {
        warn!(
            "`[storage] background_io_class`/`front_group_class` need uxsched's own cgroup v2 \
             groups; this machine has none (systemd owns the tree — it offers no io.prio.class \
             property —, or no cgroup hierarchy): not set"
        );
        return Ok(Vec::new());
    };
    let Hierarchy::V2 { mount, .. } = &groups.hierarchy else {
        warn!("io.prio.class is a cgroup v2 file and uxsched's groups are v1 here: `[storage] background_io_class`/`front_group_class` not set");
        return Ok(Vec::new());
    };
    let dir = |g: Group| mount.join(groups.rel(g).trim_start_matches('/'));
    let wanted: Vec<(PathBuf, &str)> = [(Group::Fg, fg), (Group::Bg, bg)]
        .into_iter()
        .filter_map(|(g, c)| Some((dir(g), c?)))
        .collect();
    apply(db, mount, &wanted)
}

/// Write `class` into `io.prio.class` of each directory in `wanted` (children of `mount`),
/// enabling the io controller in `mount`'s `cgroup.subtree_control` first if needed; every write
/// journalled before it is made. Returns the writes made; one that fails is logged and skipped.
pub fn apply(
    db: &Connection,
    mount: &Path,
    wanted: &[(PathBuf, &str)],
) -> Result<Vec<Change>, rusqlite::Error> {
    let mut made = Vec::new();
    if wanted.is_empty() {
        return Ok(made);
    }
    if !has_io(&mount.join("cgroup.controllers")) {
        warn!(
            "no io controller in {} (cgroup v1's blkio holds it, or the kernel has no \
             CONFIG_BLK_CGROUP): the groups' io.prio.class not set",
            mount.join("cgroup.controllers").display()
        );
        return Ok(made);
    }
    let enabled = if has_io(&mount.join(SUBTREE)) {
        None
    } else {
        let Some(c) = change(mount.join(SUBTREE), "-io".into(), "+io") else {
            return Ok(made);
        };
        if !write_journalled(db, &c)? {
            return Ok(made);
        }
        info!(file = %c.path.display(), "io controller enabled for the root's children while the daemon runs");
        Some(c)
    };
    let mut absent = false;
    for (dir, class) in wanted {
        let file = dir.join(PRIO);
        let now = match read_trim(&file) {
            Ok(now) => now,
            Err(e) => {
                absent |= e.kind() == io::ErrorKind::NotFound;
                warn!(file = %file.display(), "cannot read it ({e}; CONFIG_BLK_CGROUP_IOPRIO?): the group's I/O class not set");
                continue;
            }
        };
        if now == *class {
            continue;
        }
        let Some(c) = change(file, now, class) else {
            continue;
        };
        if write_journalled(db, &c)? {
            info!(file = %c.path.display(), class, was = %c.original, "group I/O class set while the daemon runs");
            made.push(c);
        }
    }
    match enabled {
        // A kernel without blk-ioprio (CONFIG_BLK_CGROUP_IOPRIO; the lent 16-CPU machine's 6.18
        // has io.weight, io.bfq.weight, io.cost and io.max but not it): the controller switched
        // on for nothing is switched off again at once, not held until stop.
        Some(c) if made.is_empty() && absent => {
            warn!("this kernel's groups have no io.prio.class: the io controller is switched off again (the groups' I/O class cannot act here)");
            restore_one(&c);
            forget(db, &c.path)?;
        }
        Some(c) => made.insert(0, c),
        None => {}
    }
    Ok(made)
}

/// A change to make on `path`, with its directory's id; `None` (logged) when that is unreadable.
fn change(path: PathBuf, original: String, applied: &str) -> Option<Change> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    match id_of(dir) {
        Ok(id) => Some(Change {
            path,
            id,
            original,
            applied: applied.to_owned(),
        }),
        Err(e) => {
            warn!(dir = %dir.display(), "cannot read the cgroup's id ({e}): not changed");
            None
        }
    }
}

/// Journal `c`, then write it; a failed write is forgotten again. `Ok(false)` when it failed.
fn write_journalled(db: &Connection, c: &Change) -> Result<bool, rusqlite::Error> {
    record(db, c)?;
    match std::fs::write(&c.path, &c.applied) {
        Ok(()) => Ok(true),
        Err(e) => {
            warn!(file = %c.path.display(), "cannot write {:?} ({e}): left as it is", c.applied);
            forget(db, &c.path)?;
            Ok(false)
        }
    }
}

/// Put every journalled file back (stop, and a start after a killed daemon), the groups' files
/// before the root's controller switch, then forget the rows.
pub fn restore(db: &Connection) -> Result<(), rusqlite::Error> {
    let mut rows = changes(db)?;
    rows.sort_by_key(|c| c.path.ends_with(SUBTREE));
    for c in rows {
        restore_one(&c);
        forget(db, &c.path)?;
    }
    Ok(())
}

fn restore_one(c: &Change) {
    let dir = c.path.parent().unwrap_or(Path::new("/"));
    if id_of(dir).ok() != Some(c.id) {
        info!(file = %c.path.display(), "its cgroup is gone (or is another one now): nothing to restore");
        return;
    }
    if c.path.ends_with(SUBTREE) {
        disable_io(dir);
        return;
    }
    match read_trim(&c.path) {
        Ok(now) if now == c.applied => match std::fs::write(&c.path, &c.original) {
            Ok(()) => info!(file = %c.path.display(), to = %c.original, "group I/O class restored"),
            Err(e) => warn!(
                "cannot restore {} to {:?} ({e}); do it by hand: echo {} > {}",
                c.path.display(),
                c.original,
                c.original,
                c.path.display()
            ),
        },
        Ok(now) => {
            info!(file = %c.path.display(), now = %now, "changed by someone else since: left as it is")
        }
        // The controller was disabled since: the file and its setting are gone.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            info!(file = %c.path.display(), "gone (the io controller is off there now): nothing to restore")
        }
        Err(e) => warn!(
            "cannot read {} ({e}); restore {:?} by hand",
            c.path.display(),
            c.original
        ),
    }
}

/// Take the io controller away from `mount`'s children again, unless a group uses it.
fn disable_io(mount: &Path) {
    let file = mount.join(SUBTREE);
    if !has_io(&file) {
        return;
    }
    if let Some(why) = io_in_use(mount) {
        info!(file = %file.display(), "io controller left enabled for the root's children: {why}");
        return;
    }
    match std::fs::write(&file, "-io") {
        Ok(()) => {
            info!(file = %file.display(), "io controller disabled again, as before the daemon")
        }
        Err(e) => warn!(
            "cannot disable the io controller again ({e}); if nothing uses it: echo -io > {}",
            file.display()
        ),
    }
}

/// Why the io controller of `mount`'s children is in use, if it is: a child passes it on (its
/// own `cgroup.subtree_control`) or holds an io.* setting away from the kernel's default. Only
/// children can have one: the controller reaches deeper groups only through a child.
pub fn io_in_use(mount: &Path) -> Option<String> {
    const DEFAULTS: [(&str, &str); 5] = [
        (PRIO, "no-change"),
        ("io.weight", "default 100"),
        ("io.bfq.weight", "default 100"),
        ("io.max", ""),
        ("io.latency", ""),
    ];
    let children = std::fs::read_dir(mount).ok()?.flatten();
    for child in children.filter(|e| e.file_type().is_ok_and(|t| t.is_dir())) {
        let dir = child.path();
        if has_io(&dir.join(SUBTREE)) {
            return Some(format!("{} passes it on to its children", dir.display()));
        }
        for (file, default) in DEFAULTS {
            match read_trim(&dir.join(file)) {
                Ok(now) if now != default => {
                    return Some(format!("{}/{file} is {now:?}", dir.display()))
                }
                _ => {}
            }
        }
    }
    None
}

/// `status`/`doctor`: what the lever holds now, and per disk whether its elevator honours a
/// group's class (mq-deadline and BFQ do; none and kyber do not: `uxsched_os::block`).
/// `asked`: the configuration asks for a class (then "none set" says that it did not take).
pub fn status_lines(db: &Connection, devices: &[Device], asked: bool) -> Vec<String> {
    let rows = match changes(db) {
        Ok(r) => r,
        Err(e) => {
            return vec![format!(
                "cannot read the group I/O classes from the journal: {e}"
            )]
        }
    };
    let mut lines: Vec<String> = rows
        .iter()
        .map(|c| {
            if c.path.ends_with(SUBTREE) {
                format!(
                    "io controller enabled in {} while the daemon runs (it was not)",
                    c.path.display()
                )
            } else {
                format!(
                    "{}: {} while the daemon runs (was {})",
                    c.path.display(),
                    c.applied,
                    c.original
                )
            }
        })
        .collect();
    if rows.iter().any(|c| c.path.ends_with(PRIO)) {
        lines.extend(device_lines(devices));
    } else if asked {
        lines.push(
            "group I/O classes: asked for in `[storage]` but none set — the daemon's start-up \
             warning says why (no groups of uxsched's own on cgroup v2, or a kernel whose groups \
             have no io.prio.class: CONFIG_BLK_CGROUP_IOPRIO)"
                .into(),
        );
    } else {
        lines.push(
            "group I/O classes: none set (`[storage] background_io_class`, `front_group_class`)"
                .into(),
        );
    }
    lines
}

/// One line per disk with an elevator: whether the groups' `io.prio.class` changes anything.
pub fn device_lines(devices: &[Device]) -> Vec<String> {
    devices
        .iter()
        .filter_map(|d| {
            let s = d.scheduler.as_deref()?;
            Some(if d.honours_classes() {
                format!("{}: the groups' io.prio.class is honoured ({s})", d.name)
            } else {
                format!(
                    "{}: the groups' io.prio.class does nothing under {s} (mq-deadline or bfq \
                     honour it)",
                    d.name
                )
            })
        })
        .collect()
}

/// The writes the journal holds.
pub fn changes(db: &Connection) -> Result<Vec<Change>, rusqlite::Error> {
    db.execute_batch(SCHEMA)?;
    let mut stmt =
        db.prepare("SELECT path, id, original, applied FROM cgroup_files ORDER BY path")?;
    let rows = stmt.query_map([], |r| {
        Ok(Change {
            path: PathBuf::from(r.get::<_, String>(0)?),
            id: r.get::<_, i64>(1)? as u64,
            original: r.get(2)?,
            applied: r.get(3)?,
        })
    })?;
    rows.collect()
}

fn record(db: &Connection, c: &Change) -> Result<(), rusqlite::Error> {
    db.execute_batch(SCHEMA)?;
    db.execute(
        "INSERT OR REPLACE INTO cgroup_files VALUES (?1, ?2, ?3, ?4)",
        params![
            c.path.to_string_lossy().to_string(),
            c.id as i64,
            c.original,
            c.applied
        ],
    )?;
    Ok(())
}

fn forget(db: &Connection, path: &Path) -> Result<(), rusqlite::Error> {
    db.execute(
        "DELETE FROM cgroup_files WHERE path = ?1",
        params![path.to_string_lossy().to_string()],
    )?;
    Ok(())
}

fn id_of(dir: &Path) -> io::Result<u64> {
    Ok(std::fs::metadata(dir)?.ino())
}

fn read_trim(path: &Path) -> io::Result<String> {
    uxsched_os::procfs::read_to_string(path).map(|s| s.trim().to_owned())
}

/// Whether a controller list (`cgroup.controllers`, `cgroup.subtree_control`) names `io`.
fn has_io(file: &Path) -> bool {
    read_trim(file).is_ok_and(|t| t.split_whitespace().any(|w| w == "io"))
}

#[cfg(test)]
mod tests;
