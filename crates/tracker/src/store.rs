//! The learning store (seed 003 §4, §6): ⟨context, decision⟩ pairs, in memory with LRU
//! replacement bounded by bytes (default 2 MB, §6's default) and persisted in SQLite, so a
//! relaunched app's threads are classified as they are created instead of after an episode.
//!
//! Seed 003's context is the Java call stack at the decision; here it is what a native thread
//! shows at creation: the app's identity (executable + digest of its arguments), the thread's
//! name and its creator's role and name. A `true` decision is sticky: one episode where a pool
//! thread fed the UI outweighs later ones where it did not.
//!
//! Writes are behind memory by design: a decision that is news (a new pair, or one whose
//! `critical` or kind changed) is written at once, in the episode's transaction; a repeat that
//! only counts one more episode (`seen`) waits up to [`FLUSH_AFTER_NS`] and is written with the
//! others in one transaction. Once an app's paths are learned nearly every episode is a repeat,
//! and a transaction per keystroke was a third of the tracker thread's CPU (a perf profile).
//! A killed daemon loses at most those counts; a stopped one writes them on the way out.

use crate::critical::Kind;
use rusqlite::{params, Connection};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// How long an episode count may stay only in memory (see the module's doc).
pub const FLUSH_AFTER_NS: u64 = 10_000_000_000;

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
    /// Pairs whose row is behind memory, with the episodes not yet counted on disk.
    unwritten: HashMap<Context, u64>,
    /// When the oldest unwritten count was made (CLOCK_MONOTONIC ns).
    unwritten_since_ns: Option<u64>,
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
            unwritten: HashMap::new(),
            unwritten_since_ns: None,
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

    /// Record one episode's decisions (true is sticky) at `now_ns` (CLOCK_MONOTONIC). When
    /// any is news, or the oldest unwritten count is [`FLUSH_AFTER_NS`] old, everything
    /// unwritten goes to disk in one transaction (a refused row: see `Store::flush`).
    pub fn record_all(
        &mut self,
        decisions: impl IntoIterator<Item = (Context, bool, Kind)>,
        now_ns: u64,
    ) -> rusqlite::Result<()> {
        let mut news = false;
        for (c, critical, kind) in decisions {
            news |= self.remember(c, critical, kind, now_ns);
        }
        if news {
            self.flush()
        } else {
            self.flush_if_due(now_ns)
        }
    }

    /// Record one episode's decision for `c` (true is sticky); written as [`Store::record_all`].
    #[cfg(test)]
    fn record(
        &mut self,
        c: Context,
        critical: bool,
        kind: Kind,
        now_ns: u64,
    ) -> rusqlite::Result<()> {
        self.record_all([(c, critical, kind)], now_ns)
    }

    /// Count one episode's decision in memory; whether it is news to the disk.
    fn remember(&mut self, c: Context, critical: bool, kind: Kind, now_ns: u64) -> bool {
        let prev = self.pairs.get(&c).map(|(d, _)| *d);
        let d = Decision {
            critical: critical || prev.is_some_and(|p| p.critical),
            kind,
            seen: prev.map_or(1, |p| p.seen + 1),
        };
        let news = prev.is_none_or(|p| p.critical != d.critical || p.kind != d.kind);
        if self.db.is_some() {
            *self.unwritten.entry(c.clone()).or_default() += 1;
            self.unwritten_since_ns.get_or_insert(now_ns);
        }
        self.put(c, d);
        news
    }

    /// Write the unwritten counts if the oldest is [`FLUSH_AFTER_NS`] old at `now_ns`.
    pub fn flush_if_due(&mut self, now_ns: u64) -> rusqlite::Result<()> {
        let due = (self.unwritten_since_ns)
            .is_some_and(|since| now_ns.saturating_sub(since) >= FLUSH_AFTER_NS);
        if due {
            self.flush()
        } else {
            Ok(())
        }
    }

    /// Write every unwritten pair in one transaction. A row the disk refuses does not undo the
    /// others and is not retried: every decision stays in memory, the rows that were written
    /// are committed, so memory and disk differ by the refused rows only. The first error.
    fn flush(&mut self) -> rusqlite::Result<()> {
        let rows = std::mem::take(&mut self.unwritten);
        self.unwritten_since_ns = None;
        let Some(db) = &self.db else { return Ok(()) };
        if rows.is_empty() {
            return Ok(());
        }
        db.execute_batch("BEGIN")?;
        let mut first_error = None;
        for (c, episodes) in rows {
            let Some((d, _)) = self.pairs.get(&c) else {
                continue; // evicted: the row on disk stays as it was
            };
            if let Err(e) = write_row(db, &c, d, episodes) {
                first_error.get_or_insert(e);
            }
        }
        if let Err(e) = db.execute_batch("COMMIT") {
            let _ = db.execute_batch("ROLLBACK");
            first_error.get_or_insert(e);
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Whether counts are waiting for [`Store::flush`].
    #[cfg(test)]
    fn has_unwritten(&self) -> bool {
        !self.unwritten.is_empty()
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

impl Drop for Store {
    /// A daemon that stops writes the counts it held back.
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            tracing::warn!("tracker: cannot persist the last learned decisions: {e}");
        }
    }
}

/// Upsert one pair: `episodes` more sightings, the decision as memory has it (true sticky).
fn write_row(db: &Connection, c: &Context, d: &Decision, episodes: u64) -> rusqlite::Result<()> {
    // Prepared once per connection (parsing it was most of a row's cost).
    let mut st = db.prepare_cached(
        "INSERT INTO decisions (app, thread, creator, kind, critical, seen)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (app, thread, creator) DO UPDATE SET
           kind = ?4, critical = MAX(critical, ?5), seen = seen + ?6",
    )?;
    st.execute(params![
        c.app,
        c.thread,
        c.creator,
        d.kind.name(),
        d.critical,
        episodes as i64
    ])?;
    Ok(())
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
        s.record(ctx("worker", "main:term"), true, Kind::App, 1)
            .unwrap();
        s.record(ctx("worker", "main:term"), false, Kind::App, 2)
            .unwrap();
        s.record(ctx("logger", "main:term"), false, Kind::App, 3)
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

    /// The `seen` of `thread`'s row on disk (0: no row).
    fn seen_on_disk(path: &Path, thread: &str) -> u64 {
        list(path, None)
            .unwrap()
            .into_iter()
            .find(|p| p.context.thread == thread)
            .map_or(0, |p| p.decision.seen)
    }

    #[test]
    fn news_is_written_at_once_and_repeats_within_the_flush_interval() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sqlite");
        let mut s = Store::open(Some(&path), 1 << 20).unwrap();
        let t0 = 5_000_000_000;
        s.record(ctx("worker", "main:term"), false, Kind::App, t0)
            .unwrap();
        assert_eq!(seen_on_disk(&path, "worker"), 1, "a new pair is news");
        for i in 1..=3 {
            s.record(ctx("worker", "main:term"), false, Kind::App, t0 + i)
                .unwrap();
        }
        assert_eq!(seen_on_disk(&path, "worker"), 1, "repeats wait");
        assert!(s.has_unwritten());
        s.flush_if_due(t0 + FLUSH_AFTER_NS).unwrap();
        assert_eq!(seen_on_disk(&path, "worker"), 1, "not yet due");
        s.flush_if_due(t0 + 1 + FLUSH_AFTER_NS).unwrap();
        assert_eq!(seen_on_disk(&path, "worker"), 4, "due: all counted");
        assert!(!s.has_unwritten());
        s.record(ctx("worker", "main:term"), false, Kind::App, t0 + 10)
            .unwrap();
        s.record(ctx("worker", "main:term"), true, Kind::App, t0 + 11)
            .unwrap();
        let on_disk = list(&path, None).unwrap();
        assert!(on_disk[0].decision.critical, "a flip to critical is news");
        assert_eq!(on_disk[0].decision.seen, 6, "with the repeat before it");
        s.record(ctx("worker", "main:term"), false, Kind::App, t0 + 12)
            .unwrap();
        drop(s);
        assert_eq!(seen_on_disk(&path, "worker"), 7, "a stopping store writes");
        assert!(list(&path, None).unwrap()[0].decision.critical, "sticky");
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
        let e = s.record_all(episode, 1).unwrap_err();
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
            s.record(ctx(&format!("t{i:03}"), "main:x"), true, Kind::App, 1)
                .unwrap();
        }
        // Touch t000 so t001 is the least recently used.
        assert!(s.lookup(&ctx("t000", "main:x")).is_some());
        s.record(ctx("t010", "main:x"), true, Kind::App, 1).unwrap();
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
