//! The crash-safety journal: every setting uxsched changes is written here — the thread's
//! identity, its original value and the value uxsched is about to apply — *before* the change
//! is made, in SQLite with WAL and `synchronous=NORMAL`: a committed row is in the kernel's page
//! cache before the change is made, so it survives SIGKILL, a panic and an OOM kill. Only a
//! power loss or a kernel crash can lose the newest rows — and those take every setting uxsched
//! makes with them (nice, class, cgroup membership, autogroup nice, runtime-only unit weights are
//! all volatile kernel state), so there is nothing left to restore. `FULL` would add an fsync per
//! row, milliseconds on a disk against microseconds without, and was most of the tracker's
//! "critical → boosted" latency (docs/results/README.md). Its default
//! place is tmpfs (`/run/uxsched`, [`LEGACY_PATH`] before): what it records dies with a reboot,
//! which now clears the file too, so no row of a past boot is read against this boot's pids,
//! and a commit is a memory copy, not a write through the disk's filesystem. A row is deleted
//! only after its setting has been restored (or found to belong to someone else), so a restarted daemon restores what a killed one left behind, and restoring
//! twice is harmless: the second pass finds the kernel no longer holds the applied value.

use crate::types::Key;
use crate::types::{Kind, Value};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;
use uxsched_os::identity::TaskId;

/// One journalled change: the object it was made on, the thread it was made for (whose exit
/// ends it), the object's original value and the value uxsched applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: Key,
    pub via: TaskId,
    pub original: Value,
    pub applied: Value,
    /// What uxsched had applied before its latest update of `applied`: the update is journalled
    /// before it is written, so after a crash between the two the kernel still holds this one —
    /// still uxsched's, not someone else's.
    pub previous: Option<Value>,
}

impl Entry {
    /// Whether the kernel's value `now` is one uxsched applied (its latest, or the one before
    /// an update that may not have reached the kernel), by the actuator's `holds`.
    pub fn is_ours(&self, now: &Value, holds: impl Fn(&Value, &Value) -> bool) -> bool {
        holds(now, &self.applied) || self.previous.as_ref().is_some_and(|p| holds(now, p))
    }
    pub fn kind(&self) -> Kind {
        self.original.kind()
    }
}

pub struct Journal {
    conn: Connection,
    /// Writes so far (records and forgets), for readers that only need to look again after one.
    writes: std::cell::Cell<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {source}")]
    Open {
        path: String,
        source: rusqlite::Error,
    },
    #[error("journal {path}: {source}")]
    Held {
        path: String,
        source: std::io::Error,
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

/// The schema: one row per (kind, object). `key` is the object as JSON ([`Key`]); `via_*` the
/// thread the change was made for.
const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS settings (
     kind TEXT NOT NULL, key TEXT NOT NULL,
     via_tid INTEGER NOT NULL, via_pid INTEGER NOT NULL, via_start INTEGER NOT NULL,
     original TEXT NOT NULL, applied TEXT NOT NULL, previous TEXT,
     PRIMARY KEY (kind, key))";

impl Journal {
    /// Open (creating the file and its directory if needed). Rows of the first schema (one
    /// table `changes` keyed by thread) are carried over: every kind but the autogroup was a
    /// thread's; an autogroup row is re-keyed by `session_of` (its thread's session now), and
    /// dropped with a warning when that thread is gone (the session cannot be found any more).
    pub fn open(
        path: &Path,
        session_of: impl Fn(&TaskId) -> Option<u64>,
    ) -> Result<Journal, JournalError> {
        let open_err = |source| JournalError::Open {
            path: path.display().to_string(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| open_err(rusqlite::Error::ToSqlConversionFailure(Box::new(e))))?;
        }
        let conn = Connection::open(path).map_err(open_err)?;
        // The daemon holds the journal alone for its lifetime (`JournalLock`): SQLite's own
        // locks, taken and dropped per statement, were two `fcntl`s per read and four per
        // commit on the fast path. Exclusive before WAL keeps the WAL index in the heap (no
        // `-shm` file); a reader of the file (`sqlite3`, a test) waits until the daemon exits.
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")
            .map_err(open_err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.execute_batch(SCHEMA).map_err(open_err)?;
        // A `settings` table from before the `previous` column: add it (empty).
        let has_previous: bool = conn
            .query_row(
                "SELECT count(*) > 0 FROM pragma_table_info('settings') WHERE name = 'previous'",
                [],
                |r| r.get(0),
            )
            .map_err(open_err)?;
        if !has_previous {
            conn.execute_batch("ALTER TABLE settings ADD COLUMN previous TEXT")
                .map_err(open_err)?;
        }
        // One write transaction now (the schema version rewritten as it is), so that the first
        // row — a keystroke's boost on the fast path — does not pay for starting the WAL file.
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(open_err)?;
        conn.pragma_update(None, "user_version", version)
            .map_err(open_err)?;
        let j = Journal {
            conn,
            writes: Default::default(),
        };
        j.migrate(&session_of)?;
        // Compiled now, not at the first keystroke: preparing them was ~60 µs of the first
        // "critical → boosted" after a start (the statement cache keeps them).
        for sql in [INSERT, DELETE, &select_one()] {
            j.conn.prepare_cached(sql)?;
        }
        Ok(j)
    }

    /// Carry rows of the first schema over (see [`Journal::open`]), in one transaction.
    fn migrate(&self, session_of: &dyn Fn(&TaskId) -> Option<u64>) -> Result<(), JournalError> {
        let legacy: bool = self.conn.query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'changes'",
            [],
            |r| r.get(0),
        )?;
        if !legacy {
            return Ok(());
        }
        let rows = {
            let mut stmt = self
                .conn
                .prepare("SELECT tid, pid, start, original, applied FROM changes")?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })?
                .collect::<Result<Vec<Raw>, _>>()?;
            rows
        };
        let tx = self.conn.unchecked_transaction()?;
        for (tid, pid, start, original, applied) in rows {
            let via = TaskId {
                tid,
                pid,
                start: start as u64,
            };
            let original: Value = serde_json::from_str(&original)?;
            let key = match original.kind() {
                Kind::Autogroup => match session_of(&via) {
                    Some(id) => Key::Session(id),
                    None => {
                        tracing::warn!(
                            tid,
                            "an old journal row for an autogroup nice names a thread that is \
                             gone; its session cannot be found — check `cat /proc/*/autogroup` \
                             for a nice uxsched left"
                        );
                        continue;
                    }
                },
                _ => Key::Thread(via),
            };
            let entry = Entry {
                key,
                via,
                original,
                applied: serde_json::from_str(&applied)?,
                previous: None,
            };
            insert(&tx, &entry)?;
        }
        tx.execute_batch("DROP TABLE changes")?;
        tx.commit()?;
        Ok(())
    }

    /// Record (or update the applied value of) a change. Committed when this returns.
    pub fn record(&self, e: &Entry) -> Result<(), JournalError> {
        self.record_all([e])
    }

    /// Record several changes in one transaction: every row is committed when this returns,
    /// or none (one commit where [`Journal::record`] takes one per row).
    pub fn record_all<'a>(
        &self,
        entries: impl IntoIterator<Item = &'a Entry>,
    ) -> Result<(), JournalError> {
        let tx = self.conn.unchecked_transaction()?;
        let mut n = 0;
        for e in entries {
            insert(&tx, e)?;
            n += 1;
        }
        if n > 0 {
            tx.commit()?;
            self.writes.set(self.writes.get() + n);
        }
        Ok(())
    }

    /// The database itself, for the journal's other tables (`devices.rs`): the same
    /// commit-before-change rule, one lock.
    pub(crate) fn connection(&self) -> &Connection {
        &self.conn
    }

    /// How many records and forgets this journal has taken so far (not persisted).
    pub fn writes(&self) -> u64 {
        self.writes.get()
    }

    /// Drop a change once it has been restored or given up.
    pub fn forget(&self, kind: Kind, key: &Key) -> Result<(), JournalError> {
        self.writes.set(self.writes.get() + 1);
        self.conn
            .prepare_cached(DELETE)?
            .execute(params![kind.name(), serde_json::to_string(key)?])?;
        Ok(())
    }

    pub fn get(&self, kind: Kind, key: &Key) -> Result<Option<Entry>, JournalError> {
        let row = self
            .conn
            .prepare_cached(&select_one())?
            .query_row(
                params![kind.name(), serde_json::to_string(key)?],
                row_to_raw,
            )
            .optional()?;
        row.map(raw_to_entry).transpose()
    }

    /// Every recorded change, in (kind, object) order.
    pub fn entries(&self) -> Result<Vec<Entry>, JournalError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM settings ORDER BY kind, key"
        ))?;
        let raws = stmt
            .query_map([], row_to_raw)?
            .collect::<Result<Vec<_>, _>>()?;
        raws.into_iter().map(raw_to_entry).collect()
    }
}

/// The default journal, on tmpfs (see the module's doc).
pub const DEFAULT_PATH: &str = "/run/uxsched/journal.sqlite";

/// Where the journal lived before it moved to `/run`: the default journal takes over the rows
/// a daemon of that version left there ([`carry_over`]).
pub const LEGACY_PATH: &str = "/var/lib/uxsched/journal.sqlite";

/// Move the rows of the journal at `from` into `into` (a row `into` already has for the same
/// object is newer and stays), then remove `from`'s files; returns how many rows moved. Nothing
/// when `from` does not exist; an error, and `from` left whole, when a daemon still holds it
/// or it cannot be read — its rows are then restored by starting a daemon on it.
pub fn carry_over(
    from: &Path,
    into: &Journal,
    session_of: impl Fn(&TaskId) -> Option<u64>,
) -> Result<usize, JournalError> {
    if !from.exists() {
        return Ok(0);
    }
    let lock = JournalLock::acquire(from).map_err(|source| JournalError::Held {
        path: from.display().to_string(),
        source,
    })?;
    let rows = Journal::open(from, session_of)?.entries()?;
    let mut fresh = Vec::new();
    for row in rows {
        if into.get(row.kind(), &row.key)?.is_none() {
            fresh.push(row);
        }
    }
    into.record_all(&fresh)?;
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let mut name = from.as_os_str().to_owned();
        name.push(suffix);
        match std::fs::remove_file(&name) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(
                "cannot remove {} ({e}): its rows are in the journal now; remove it by hand",
                Path::new(&name).display()
            ),
        }
    }
    drop(lock);
    Ok(fresh.len())
}

const COLUMNS: &str = "key, via_tid, via_pid, via_start, original, applied, previous";

const INSERT: &str = "INSERT OR REPLACE INTO settings
     (kind, key, via_tid, via_pid, via_start, original, applied, previous)
 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
const DELETE: &str = "DELETE FROM settings WHERE kind = ?1 AND key = ?2";

fn select_one() -> String {
    format!("SELECT {COLUMNS} FROM settings WHERE kind = ?1 AND key = ?2")
}

fn insert(conn: &Connection, e: &Entry) -> Result<(), JournalError> {
    // Statements are prepared once per connection: parsing them was a good part of a row's
    // cost, and the fast path writes rows while the user waits.
    conn.prepare_cached(INSERT)?.execute(params![
        e.kind().name(),
        serde_json::to_string(&e.key)?,
        e.via.tid,
        e.via.pid,
        e.via.start as i64,
        serde_json::to_string(&e.original)?,
        serde_json::to_string(&e.applied)?,
        e.previous.as_ref().map(serde_json::to_string).transpose()?,
    ])?;
    Ok(())
}

type Raw = (i32, i32, i64, String, String);
type Row = (String, i32, i32, i64, String, String, Option<String>);

fn row_to_raw(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
    ))
}

fn raw_to_entry(
    (key, tid, pid, start, original, applied, previous): Row,
) -> Result<Entry, JournalError> {
    Ok(Entry {
        key: serde_json::from_str(&key)?,
        via: TaskId {
            tid,
            pid,
            start: start as u64,
        },
        original: serde_json::from_str(&original)?,
        applied: serde_json::from_str(&applied)?,
        previous: previous.as_deref().map(serde_json::from_str).transpose()?,
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

    fn no_sessions(_: &TaskId) -> Option<u64> {
        None
    }

    #[test]
    fn entries_survive_reopening_and_are_forgotten_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/j.sqlite");
        let via = TaskId {
            tid: 10,
            pid: 9,
            start: 1234,
        };
        let e = Entry {
            key: Key::Process(via),
            via,
            original: Value::Cgroup("/".into()),
            applied: Value::Cgroup("/uxsched/fg".into()),
            previous: Some(Value::Cgroup("/uxsched/bg".into())),
        };
        Journal::open(&path, no_sessions)
            .unwrap()
            .record(&e)
            .unwrap();
        let j = Journal::open(&path, no_sessions).unwrap();
        assert_eq!(j.entries().unwrap(), vec![e.clone()]);
        assert_eq!(j.get(Kind::Cgroup, &e.key).unwrap(), Some(e.clone()));
        assert_eq!(j.get(Kind::Sched, &e.key).unwrap(), None);
        j.forget(Kind::Cgroup, &e.key).unwrap();
        assert!(j.entries().unwrap().is_empty());
    }

    #[test]
    fn several_rows_are_recorded_in_one_commit_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.sqlite");
        let row = |tid| {
            let via = TaskId {
                tid,
                pid: 9,
                start: 1234,
            };
            Entry {
                key: Key::Thread(via),
                via,
                original: Value::Ioprio(16384),
                applied: Value::Ioprio(8196),
                previous: None,
            }
        };
        let rows = [row(10), row(11), row(12)];
        let j = Journal::open(&path, no_sessions).unwrap();
        j.record_all(&rows).unwrap();
        j.record_all([]).unwrap();
        assert_eq!(j.writes(), 3);
        drop(j);
        let j = Journal::open(&path, no_sessions).unwrap();
        assert_eq!(j.entries().unwrap(), rows.to_vec());
    }

    #[test]
    fn first_schema_rows_are_carried_over_keyed_by_their_object() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.sqlite");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE changes (tid INTEGER NOT NULL, pid INTEGER NOT NULL,
                 start INTEGER NOT NULL, kind TEXT NOT NULL, original TEXT NOT NULL,
                 applied TEXT NOT NULL, PRIMARY KEY (tid, start, kind));
             INSERT INTO changes VALUES (7, 7, 50, 'ioprio', '{\"ioprio\":16384}', '{\"ioprio\":8196}');
             INSERT INTO changes VALUES (7, 7, 50, 'autogroup', '{\"autogroup\":0}', '{\"autogroup\":-19}');
             INSERT INTO changes VALUES (8, 8, 60, 'autogroup', '{\"autogroup\":0}', '{\"autogroup\":-19}');",
        )
        .unwrap();
        drop(conn);
        // Thread 7's session is autogroup-3; thread 8 is gone.
        let j = Journal::open(&path, |t| (t.tid == 7).then_some(3)).unwrap();
        let keys: Vec<(Kind, Key)> = j
            .entries()
            .unwrap()
            .iter()
            .map(|e| (e.kind(), e.key))
            .collect();
        let t7 = TaskId {
            tid: 7,
            pid: 7,
            start: 50,
        };
        assert_eq!(
            keys,
            vec![
                (Kind::Autogroup, Key::Session(3)),
                (Kind::Ioprio, Key::Thread(t7))
            ]
        );
        // Migrated once: reopening changes nothing.
        drop(j);
        let again = Journal::open(&path, no_sessions).unwrap();
        assert_eq!(again.entries().unwrap().len(), 2);
    }

    #[test]
    fn an_old_journals_rows_move_into_the_new_one_and_its_files_go() {
        let dir = tempfile::tempdir().unwrap();
        let (old, new) = (
            dir.path().join("old/j.sqlite"),
            dir.path().join("new.sqlite"),
        );
        let via = |tid| TaskId {
            tid,
            pid: 9,
            start: 1234,
        };
        let row = |tid, applied| Entry {
            key: Key::Thread(via(tid)),
            via: via(tid),
            original: Value::Ioprio(16384),
            applied: Value::Ioprio(applied),
            previous: None,
        };
        let into = Journal::open(&new, no_sessions).unwrap();
        assert_eq!(
            carry_over(&old, &into, no_sessions).unwrap(),
            0,
            "none there"
        );
        let j = Journal::open(&old, no_sessions).unwrap();
        j.record_all(&[row(10, 8196), row(11, 8196)]).unwrap();
        drop(j);
        into.record(&row(11, 8197)).unwrap(); // newer than the old file's
        let held = JournalLock::acquire(&old).unwrap();
        let e = carry_over(&old, &into, no_sessions).unwrap_err();
        assert!(e.to_string().contains("another uxsched daemon"), "{e}");
        assert!(old.exists(), "left whole while held");
        drop(held);
        assert_eq!(carry_over(&old, &into, no_sessions).unwrap(), 1);
        assert_eq!(into.entries().unwrap(), vec![row(10, 8196), row(11, 8197)]);
        let left: Vec<_> = std::fs::read_dir(dir.path().join("old")).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
