//! The crash-safety journal: every setting uxsched changes is written here — the thread's
//! identity, its original value and the value uxsched is about to apply — *before* the change
//! is made, in SQLite with WAL and `synchronous=FULL` so a committed row survives SIGKILL and
//! power loss. A row is deleted only after its setting has been restored (or found to belong to
//! someone else), so a restarted daemon restores what a killed one left behind, and restoring
//! twice is harmless: the second pass finds the kernel no longer holds the applied value.

use crate::actuators::sched::SchedAttr;
use crate::identity::TaskId;
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One kind of setting and its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Value {
    Sched(SchedAttr),
    /// A cgroup path relative to the hierarchy's mount.
    Cgroup(String),
    /// An encoded I/O priority.
    Ioprio(u16),
    /// The nice value of the task's session autogroup.
    Autogroup(i32),
}

/// The kinds of setting, the journal's second key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Sched,
    Cgroup,
    Ioprio,
    Autogroup,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Sched => "sched",
            Kind::Cgroup => "cgroup",
            Kind::Ioprio => "ioprio",
            Kind::Autogroup => "autogroup",
        }
    }
}

impl Value {
    pub fn kind(&self) -> Kind {
        match self {
            Value::Sched(_) => Kind::Sched,
            Value::Cgroup(_) => Kind::Cgroup,
            Value::Ioprio(_) => Kind::Ioprio,
            Value::Autogroup(_) => Kind::Autogroup,
        }
    }
}

/// One journalled change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub task: TaskId,
    pub original: Value,
    pub applied: Value,
}

impl Entry {
    pub fn kind(&self) -> Kind {
        self.original.kind()
    }
}

pub struct Journal {
    conn: Connection,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {source}")]
    Open {
        path: String,
        source: rusqlite::Error,
    },
    #[error("journal: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("journal: corrupt value: {0}")]
    Value(#[from] serde_json::Error),
}

/// An exclusive claim on a journal, held by the daemon for its lifetime: two daemons acting on
/// one journal would restore each other's changes. Released when dropped (or the process dies).
pub struct JournalLock {
    _file: std::fs::File,
}

impl JournalLock {
    /// Take `<journal>.lock` with `flock(LOCK_EX | LOCK_NB)`.
    pub fn acquire(journal: &Path) -> std::io::Result<JournalLock> {
        use std::os::fd::AsRawFd;
        let mut name = journal.as_os_str().to_owned();
        name.push(".lock");
        if let Some(dir) = journal.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&name)?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(std::io::Error::other(format!(
                "another uxsched daemon is using the journal {} (lock {})",
                journal.display(),
                std::path::Path::new(&name).display()
            )));
        }
        Ok(JournalLock { _file: file })
    }
}

impl Journal {
    /// Open (creating the file and its directory if needed).
    pub fn open(path: &Path) -> Result<Journal, JournalError> {
        let open_err = |source| JournalError::Open {
            path: path.display().to_string(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| open_err(rusqlite::Error::ToSqlConversionFailure(Box::new(e))))?;
        }
        let conn = Connection::open(path).map_err(open_err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(open_err)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS changes (
                 tid INTEGER NOT NULL, pid INTEGER NOT NULL, start INTEGER NOT NULL,
                 kind TEXT NOT NULL, original TEXT NOT NULL, applied TEXT NOT NULL,
                 PRIMARY KEY (tid, start, kind))",
        )
        .map_err(open_err)?;
        Ok(Journal { conn })
    }

    /// Record (or update the applied value of) a change. Committed when this returns.
    pub fn record(&self, e: &Entry) -> Result<(), JournalError> {
        self.conn.execute(
            "INSERT OR REPLACE INTO changes (tid, pid, start, kind, original, applied)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                e.task.tid,
                e.task.pid,
                e.task.start as i64,
                e.kind().name(),
                serde_json::to_string(&e.original)?,
                serde_json::to_string(&e.applied)?,
            ],
        )?;
        Ok(())
    }

    /// Drop a change once it has been restored or given up.
    pub fn forget(&self, task: &TaskId, kind: Kind) -> Result<(), JournalError> {
        self.conn.execute(
            "DELETE FROM changes WHERE tid = ?1 AND start = ?2 AND kind = ?3",
            params![task.tid, task.start as i64, kind.name()],
        )?;
        Ok(())
    }

    pub fn get(&self, task: &TaskId, kind: Kind) -> Result<Option<Entry>, JournalError> {
        let row = self
            .conn
            .query_row(
                "SELECT tid, pid, start, original, applied FROM changes
                 WHERE tid = ?1 AND start = ?2 AND kind = ?3",
                params![task.tid, task.start as i64, kind.name()],
                row_to_raw,
            )
            .optional()?;
        row.map(raw_to_entry).transpose()
    }

    /// Every recorded change, in (tid, kind) order.
    pub fn entries(&self) -> Result<Vec<Entry>, JournalError> {
        let mut stmt = self
            .conn
            .prepare("SELECT tid, pid, start, original, applied FROM changes ORDER BY tid, kind")?;
        let raws = stmt
            .query_map([], row_to_raw)?
            .collect::<Result<Vec<_>, _>>()?;
        raws.into_iter().map(raw_to_entry).collect()
    }
}

type Raw = (i32, i32, i64, String, String);

fn row_to_raw(r: &rusqlite::Row<'_>) -> rusqlite::Result<Raw> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

fn raw_to_entry((tid, pid, start, original, applied): Raw) -> Result<Entry, JournalError> {
    Ok(Entry {
        task: TaskId {
            tid,
            pid,
            start: start as u64,
        },
        original: serde_json::from_str(&original)?,
        applied: serde_json::from_str(&applied)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_has_one_owner_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.sqlite");
        let lock = JournalLock::acquire(&path).unwrap();
        let e = JournalLock::acquire(&path).err().unwrap();
        assert!(e.to_string().contains("another uxsched daemon"), "{e}");
        drop(lock);
        assert!(JournalLock::acquire(&path).is_ok());
    }

    #[test]
    fn entries_survive_reopening_and_are_forgotten_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/j.sqlite");
        let task = TaskId {
            tid: 10,
            pid: 9,
            start: 1234,
        };
        let e = Entry {
            task,
            original: Value::Cgroup("/".into()),
            applied: Value::Cgroup("/uxsched/fg".into()),
        };
        Journal::open(&path).unwrap().record(&e).unwrap();
        let j = Journal::open(&path).unwrap();
        assert_eq!(j.entries().unwrap(), vec![e.clone()]);
        assert_eq!(j.get(&task, Kind::Cgroup).unwrap(), Some(e));
        assert_eq!(j.get(&task, Kind::Sched).unwrap(), None);
        j.forget(&task, Kind::Cgroup).unwrap();
        assert!(j.entries().unwrap().is_empty());
    }
}
