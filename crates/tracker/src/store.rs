//! The learning store (seed 003 §4, §6): ⟨context, decision⟩ pairs, in memory with LRU
//! replacement bounded by bytes (default 2 MB, §6's default) and persisted in SQLite, so a
//! relaunched app's threads are classified as they are created instead of after an episode.
//!
//! Seed 003's context is the Java call stack at the decision; here it is what a native thread
//! shows at creation: the app's identity (executable + digest of its arguments), the thread's
//! name and its creator's role and name. A `true` decision is sticky: one episode where a pool
//! thread fed the UI outweighs later ones where it did not.

use crate::critical::Kind;
use rusqlite::{params, Connection};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Context {
    /// `<executable> <args digest>` (see [`app_key`]).
    pub app: String,
    pub thread: String,
    /// `<role>:<name>` of the creating thread (`main`, `critical`, `thread`), `partner` or
    /// `kernel` for threads of other processes, `?` when the creation was not seen.
    pub creator: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub critical: bool,
    pub kind: Kind,
    /// Episodes that decided it.
    pub seen: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pair {
    pub context: Context,
    pub decision: Decision,
}

/// The app identity of [`Context::app`]: the executable and a 64-bit FNV-1a digest of the
/// arguments after argv[0] (stable across runs and Rust versions, unlike `DefaultHasher`).
pub fn app_key(exe: &str, args: &[String]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for a in args {
        for b in a.bytes().chain([0]) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{exe} {h:016x}")
}

/// True when `app` (a [`Context::app`]) is what a user typed: the key, the executable's path or
/// its file name.
pub fn app_matches(app: &str, wanted: &str) -> bool {
    let exe = app.rsplit_once(' ').map_or(app, |(e, _)| e);
    app == wanted || exe == wanted || exe.rsplit('/').next() == Some(wanted)
}

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS decisions (
    app TEXT NOT NULL, thread TEXT NOT NULL, creator TEXT NOT NULL,
    kind TEXT NOT NULL, critical INTEGER NOT NULL, seen INTEGER NOT NULL,
    PRIMARY KEY (app, thread, creator))";

/// Rough bytes one pair holds in memory (strings plus map and LRU overhead).
fn cost(c: &Context) -> usize {
    c.app.len() + c.thread.len() + c.creator.len() + 160
}

pub struct Store {
    db: Option<Connection>,
    cap_bytes: usize,
    bytes: usize,
    tick: u64,
    pairs: HashMap<Context, (Decision, u64)>,
    lru: BTreeMap<u64, Context>,
}

impl Store {
    /// An in-memory store, persisted in `path` (created with its table) when given.
    pub fn open(path: Option<&Path>, cap_bytes: usize) -> rusqlite::Result<Store> {
        let db = match path {
            Some(p) => {
                if let Some(dir) = p.parent() {
                    let _ = std::fs::create_dir_all(dir);
                }
                let db = Connection::open(p)?;
                db.pragma_update(None, "journal_mode", "WAL")?;
                // No fsync per episode (4 ms on the development machine's disk, on the
                // tracker's thread): a power loss only forgets the newest decisions, which the
                // next episodes learn again; a killed daemon loses nothing.
                db.pragma_update(None, "synchronous", "NORMAL")?;
                db.execute(SCHEMA, [])?;
                Some(db)
            }
            None => None,
        };
        Ok(Store {
            db,
            cap_bytes,
            bytes: 0,
            tick: 0,
            pairs: HashMap::new(),
            lru: BTreeMap::new(),
        })
    }

    /// Bring an app's persisted pairs into memory (on its launch / focus).
    pub fn load_app(&mut self, app: &str) -> rusqlite::Result<usize> {
        let rows = match &self.db {
            Some(db) => query_db(db, Some(app), true)?,
            None => return Ok(0),
        };
        let n = rows.len();
        for p in rows {
            self.put(p.context, p.decision);
        }
        Ok(n)
    }

    fn put(&mut self, c: Context, d: Decision) {
        self.tick += 1;
        if let Some((old, t)) = self.pairs.get_mut(&c) {
            *old = d;
            self.lru.remove(t);
            *t = self.tick;
        } else {
            self.bytes += cost(&c);
            self.pairs.insert(c.clone(), (d, self.tick));
        }
        self.lru.insert(self.tick, c);
        while self.bytes > self.cap_bytes {
            let Some((_, old)) = self.lru.pop_first() else {
                break;
            };
            self.bytes -= cost(&old);
            self.pairs.remove(&old);
        }
    }

    /// The decision for `c`; when the creation was not seen (`creator == "?"`), any pair of the
    /// same app and thread name that says critical.
    pub fn lookup(&mut self, c: &Context) -> Option<Decision> {
        let key = if self.pairs.contains_key(c) {
            c.clone()
        } else if c.creator == "?" {
            self.pairs
                .iter()
                .find(|(k, (d, _))| d.critical && k.app == c.app && k.thread == c.thread)
                .map(|(k, _)| k.clone())?
        } else {
            return None;
        };
        let (d, _) = self.pairs[&key];
        self.put(key, d); // touch
        Some(d)
    }

    /// Record one episode's decisions (true is sticky), persisted in one transaction. A row the
    /// disk refuses does not undo the others: every decision is in memory either way (as with
    /// [`Store::record`]), and the rows that were written are committed, so memory and disk
    /// differ by the refused rows only. Returns the first error.
    pub fn record_all(
        &mut self,
        decisions: impl IntoIterator<Item = (Context, bool, Kind)>,
    ) -> rusqlite::Result<()> {
        let batch = |db: &Option<Connection>, sql: &str| {
            db.as_ref().map_or(Ok(()), |d| d.execute_batch(sql))
        };
        batch(&self.db, "BEGIN")?;
        let mut first_error = None;
        for (c, critical, kind) in decisions {
            if let Err(e) = self.record(c, critical, kind) {
                first_error.get_or_insert(e);
            }
        }
        if let Err(e) = batch(&self.db, "COMMIT") {
            let _ = batch(&self.db, "ROLLBACK");
            first_error.get_or_insert(e);
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Record one episode's decision for `c` (true is sticky) and persist it.
    pub fn record(&mut self, c: Context, critical: bool, kind: Kind) -> rusqlite::Result<()> {
        let prev = self.pairs.get(&c).map(|(d, _)| *d);
        let d = Decision {
            critical: critical || prev.is_some_and(|p| p.critical),
            kind,
            seen: prev.map_or(1, |p| p.seen + 1),
        };
        let persisted = match &self.db {
            // Prepared once per connection (parsing it was most of a record's cost).
            Some(db) => db
                .prepare_cached(
                    "INSERT INTO decisions (app, thread, creator, kind, critical, seen)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (app, thread, creator) DO UPDATE SET
                   kind = ?4, critical = MAX(critical, ?5), seen = seen + 1",
                )
                .and_then(|mut st| {
                    st.execute(params![
                        c.app,
                        c.thread,
                        c.creator,
                        kind.name(),
                        d.critical,
                        d.seen as i64
                    ])
                }),
            None => Ok(0),
        };
        self.put(c, d); // in memory even when the disk refuses
        persisted.map(|_| ())
    }

    /// The in-memory pairs of `app`, sorted.
    pub fn pairs(&self, app: &str) -> Vec<Pair> {
        let mut v: Vec<Pair> = self
            .pairs
            .iter()
            .filter(|(c, _)| c.app == app)
            .map(|(c, (d, _))| Pair {
                context: c.clone(),
                decision: *d,
            })
            .collect();
        v.sort_by(|a, b| a.context.cmp(&b.context));
        v
    }

    /// Bytes held in memory (the LRU's measure).
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Every persisted pair in the store at `path`, or those of apps matching `app`
/// ([`app_matches`]). A store that does not exist yet has none.
pub fn list(path: &Path, app: Option<&str>) -> rusqlite::Result<Vec<Pair>> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let db = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    query_db(&db, app, false)
}

/// Delete the persisted pairs of apps matching `app` in the store at `path`; how many.
pub fn forget(path: &Path, app: &str) -> rusqlite::Result<usize> {
    if !path.exists() {
        return Ok(0);
    }
    forget_db(&Connection::open(path)?, app)
}

/// The pairs of apps matching `app` ([`app_matches`]; the exact key when `exact`).
fn query_db(db: &Connection, app: Option<&str>, exact: bool) -> rusqlite::Result<Vec<Pair>> {
    let mut st = db.prepare(
        "SELECT app, thread, creator, kind, critical, seen FROM decisions ORDER BY app, thread, creator",
    )?;
    let rows = st.query_map([], |r| {
        let kind: String = r.get(3)?;
        Ok(Pair {
            context: Context {
                app: r.get(0)?,
                thread: r.get(1)?,
                creator: r.get(2)?,
            },
            decision: Decision {
                critical: r.get(4)?,
                kind: Kind::parse(&kind).unwrap_or(Kind::App),
                seen: r.get::<_, i64>(5)? as u64,
            },
        })
    })?;
    let keep = |p: &Pair| match app {
        None => true,
        Some(a) if exact => p.context.app == a,
        Some(a) => app_matches(&p.context.app, a),
    };
    let mut out = Vec::new();
    for p in rows {
        let p = p?;
        if keep(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

fn forget_db(db: &Connection, app: &str) -> rusqlite::Result<usize> {
    db.execute(SCHEMA, [])?;
    let apps: Vec<String> = query_db(db, Some(app), false)?
        .into_iter()
        .map(|p| p.context.app)
        .collect();
    let mut n = 0;
    for a in apps.iter().collect::<std::collections::BTreeSet<_>>() {
        n += db.execute("DELETE FROM decisions WHERE app = ?1", [a])?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(thread: &str, creator: &str) -> Context {
        Context {
            app: app_key("/usr/bin/term", &["-e".into(), "sh".into()]),
            thread: thread.into(),
            creator: creator.into(),
        }
    }

    #[test]
    fn decisions_persist_and_true_is_sticky() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sqlite");
        let mut s = Store::open(Some(&path), 1 << 20).unwrap();
        s.record(ctx("worker", "main:term"), true, Kind::App)
            .unwrap();
        s.record(ctx("worker", "main:term"), false, Kind::App)
            .unwrap();
        s.record(ctx("logger", "main:term"), false, Kind::App)
            .unwrap();
        let d = s.lookup(&ctx("worker", "main:term")).unwrap();
        assert!(d.critical);
        assert_eq!(d.seen, 2);
        drop(s);
        let mut s = Store::open(Some(&path), 1 << 20).unwrap();
        assert_eq!(
            s.lookup(&ctx("worker", "main:term")),
            None,
            "not loaded yet"
        );
        let app = ctx("x", "y").app;
        assert_eq!(s.load_app(&app).unwrap(), 2);
        assert!(s.lookup(&ctx("worker", "main:term")).unwrap().critical);
        assert!(
            s.lookup(&ctx("worker", "?")).unwrap().critical,
            "wildcard creator"
        );
        assert!(!s.lookup(&ctx("logger", "main:term")).unwrap().critical);
        drop(s);
        assert_eq!(list(&path, Some("term")).unwrap().len(), 2);
        assert_eq!(list(&path, Some("other")).unwrap().len(), 0);
        assert_eq!(forget(&path, "/usr/bin/term").unwrap(), 2);
        assert!(list(&path, None).unwrap().is_empty());
        assert!(list(&dir.path().join("absent"), None).unwrap().is_empty());
    }

    #[test]
    fn a_row_the_disk_refuses_leaves_the_episodes_other_rows_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sqlite");
        let mut s = Store::open(Some(&path), 1 << 20).unwrap();
        // A trigger stands for a full disk or a locked file on one row.
        s.db.as_ref()
            .unwrap()
            .execute_batch(
                "CREATE TRIGGER refuse BEFORE INSERT ON decisions WHEN NEW.thread = 'bad'
                 BEGIN SELECT RAISE(ABORT, 'refused'); END;",
            )
            .unwrap();
        let episode = ["ok1", "bad", "ok2"].map(|t| (ctx(t, "main:term"), true, Kind::App));
        let e = s.record_all(episode).unwrap_err();
        assert!(e.to_string().contains("refused"), "{e}");
        assert_eq!(s.pairs(&ctx("x", "y").app).len(), 3, "all three in memory");
        drop(s);
        let on_disk: Vec<String> = list(&path, None)
            .unwrap()
            .into_iter()
            .map(|p| p.context.thread)
            .collect();
        assert_eq!(on_disk, ["ok1", "ok2"]);
    }

    #[test]
    fn memory_is_bounded_by_bytes_with_lru_replacement() {
        let mut s = Store::open(None, 10 * cost(&ctx("t000", "main:x"))).unwrap();
        for i in 0..10 {
            s.record(ctx(&format!("t{i:03}"), "main:x"), true, Kind::App)
                .unwrap();
        }
        // Touch t000 so t001 is the least recently used.
        assert!(s.lookup(&ctx("t000", "main:x")).is_some());
        s.record(ctx("t010", "main:x"), true, Kind::App).unwrap();
        assert!(s.bytes() <= 10 * cost(&ctx("t000", "main:x")));
        assert!(s.lookup(&ctx("t001", "main:x")).is_none(), "LRU evicted");
        assert!(s.lookup(&ctx("t000", "main:x")).is_some());
        assert!(s.lookup(&ctx("t010", "main:x")).is_some());
    }

    #[test]
    fn app_keys_digest_arguments() {
        assert_ne!(
            app_key("/bin/a", &["x".into()]),
            app_key("/bin/a", &["y".into()])
        );
        assert_ne!(
            app_key("/bin/a", &["ab".into(), "c".into()]),
            app_key("/bin/a", &["a".into(), "bc".into()])
        );
        let k = app_key("/usr/bin/xterm", &[]);
        assert!(
            app_matches(&k, "xterm") && app_matches(&k, "/usr/bin/xterm") && app_matches(&k, &k)
        );
        assert!(!app_matches(&k, "term"));
    }
}
