//! What the tracker's critical set holds per keystroke (issue 30): for each episode the tracker
//! resolves for the app in front, the threads the set held while it ran, their processes, and
//! what kind of process each is — kept for the latest [`EPISODES`] and summarised by `status`
//! (docs/tracker.md, "What the set holds per keystroke"). Generic: a process's kind is its
//! executable's name and the helper type it was started with (`uxsched_tracker::procfs::role`),
//! read once per member thread; judging which kinds belong on an app's frame path is the
//! reader's business (the bench's Chromium judgement, `models/xapp/frame_path.rs`).

use super::Daemon;
use crate::types::{Critical, CriticalKind};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use uxsched_client::control::{CriticalSets as Summary, KindStat, ProcessStat};
use uxsched_os::identity::TaskId;

/// How many episodes the summary covers (the latest), like `boost_latency`'s samples.
pub(super) const EPISODES: usize = 4096;

/// Member threads whose process kind is remembered; beyond, the memory starts afresh.
const KNOWN_THREADS: usize = 4096;

/// Distinct kinds or thread names held; beyond, names the history no longer uses are dropped.
const NAMES: usize = 4096;

/// One episode resolved this many at once counts this many times at most (the set is the same).
const SAME_SET_MAX: u64 = 8;

/// What a process is, for the summary: `label` is `uxsched_tracker::procfs::role`'s answer
/// (`chromium --type=utility --utility-sub-type=network.mojom.NetworkService`), with the helper
/// type and sub-type taken out of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct ProcessKind {
    pub label: String,
    pub helper_type: Option<String>,
    pub sub_type: Option<String>,
}

impl ProcessKind {
    pub fn of_role(role: &str) -> ProcessKind {
        let arg = |key: &str| {
            role.split(' ')
                .find_map(|a| a.strip_prefix(key))
                .map(str::to_owned)
        };
        ProcessKind {
            label: role.to_owned(),
            helper_type: arg("--type="),
            sub_type: arg("--utility-sub-type="),
        }
    }

    fn named(label: &str) -> ProcessKind {
        ProcessKind {
            label: label.to_owned(),
            helper_type: None,
            sub_type: None,
        }
    }
}

/// Reads the kind of `task`'s process (`None`: gone or unreadable).
pub(super) type KindReader = fn(&TaskId) -> Option<ProcessKind>;

/// The role of `task`'s process, read while the thread still is `task` (a recycled pid is
/// another process).
fn read_kind(task: &TaskId) -> Option<ProcessKind> {
    let role = uxsched_tracker::procfs::role(u32::try_from(task.pid).ok()?)?;
    uxsched_os::identity::still_same(task).then(|| ProcessKind::of_role(&role))
}

/// Strings (or kinds) by a small number, so that an episode's record is a few bytes a member.
struct Names<T> {
    list: Vec<T>,
    index: HashMap<T, u16>,
}

impl<T: Clone + Eq + std::hash::Hash> Names<T> {
    fn new() -> Self {
        Names {
            list: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// `None` when full.
    fn id(&mut self, v: &T) -> Option<u16> {
        if let Some(&i) = self.index.get(v) {
            return Some(i);
        }
        if self.list.len() >= NAMES {
            return None;
        }
        let i = self.list.len() as u16;
        self.list.push(v.clone());
        self.index.insert(v.clone(), i);
        Some(i)
    }
}

#[derive(Clone, Copy)]
struct Member {
    kind: u16,
    name: u16,
    whose: CriticalKind,
    pid: i32,
}

/// The critical sets of the latest episodes.
pub(super) struct CriticalSets {
    history: VecDeque<Box<[Member]>>,
    total: u64,
    kinds: Names<ProcessKind>,
    names: Names<String>,
    /// Each member thread's process kind, read when the thread first was a member.
    known: HashMap<TaskId, ProcessKind>,
    read: KindReader,
}

impl Default for CriticalSets {
    fn default() -> Self {
        Self::with_reader(read_kind)
    }
}

impl CriticalSets {
    pub fn with_reader(read: KindReader) -> Self {
        CriticalSets {
            history: VecDeque::new(),
            total: 0,
            kinds: Names::new(),
            names: Names::new(),
            known: HashMap::new(),
            read,
        }
    }

    /// `resolved` episodes ended; `held`: the threads the set held while they ran.
    pub fn record(&mut self, held: &[Critical], resolved: u64) {
        let n = resolved.min(SAME_SET_MAX) as usize;
        if n == 0 {
            return;
        }
        if self.known.len() > KNOWN_THREADS {
            self.known.clear();
        }
        while self.history.len() + n > EPISODES {
            self.history.pop_front();
        }
        let record = match self.members(held) {
            Some(r) => r,
            None => {
                self.compact();
                let Some(r) = self.members(held) else {
                    tracing::debug!("critical sets: over {NAMES} names in use; episode left out");
                    return;
                };
                r
            }
        };
        for _ in 1..n {
            self.history.push_back(record.clone());
        }
        self.history.push_back(record);
        self.total += resolved;
    }

    fn members(&mut self, held: &[Critical]) -> Option<Box<[Member]>> {
        held.iter().map(|c| self.member(c)).collect()
    }

    /// One member: its kind read once per thread; `None` when the names are full.
    fn member(&mut self, c: &Critical) -> Option<Member> {
        let kind = match c.kind {
            CriticalKind::KernelWorker => ProcessKind::named("kernel"),
            _ => {
                let read = self.read;
                (self.known.entry(c.task))
                    .or_insert_with(|| {
                        read(&c.task).unwrap_or_else(|| ProcessKind::named("(exited)"))
                    })
                    .clone()
            }
        };
        Some(Member {
            kind: self.kinds.id(&kind)?,
            name: self.names.id(&c.comm)?,
            whose: c.kind,
            pid: c.task.pid,
        })
    }

    /// Keep only the kinds and names the history still uses, renumbered.
    fn compact(&mut self) {
        let (mut kinds, mut names) = (Names::new(), Names::new());
        for r in &mut self.history {
            for m in r.iter_mut() {
                m.kind = kinds.id(&self.kinds.list[m.kind as usize]).unwrap_or(0);
                m.name = names.id(&self.names.list[m.name as usize]).unwrap_or(0);
            }
        }
        (self.kinds, self.names) = (kinds, names);
    }

    /// The summary `status` shows; `None` before the first episode.
    pub fn summary(&self) -> Option<Summary> {
        if self.history.is_empty() {
            return None;
        }
        let mut threads: Vec<u64> = self.history.iter().map(|r| r.len() as u64).collect();
        let mut procs: Vec<u64> = (self.history.iter())
            .map(|r| {
                let user = r.iter().filter(|m| m.whose != CriticalKind::KernelWorker);
                user.map(|m| m.pid).collect::<BTreeSet<_>>().len() as u64
            })
            .collect();
        threads.sort_unstable();
        procs.sort_unstable();
        let at = |v: &[u64], permille| uxsched_model::stats::nearest_rank(v, permille);
        Some(Summary {
            episodes: self.history.len() as u64,
            episodes_total: self.total,
            threads_p50: at(&threads, 500),
            threads_p95: at(&threads, 950),
            threads_max: at(&threads, 1000),
            procs_p50: at(&procs, 500),
            procs_max: at(&procs, 1000),
            kinds: self.kind_stats(),
        })
    }

    /// Per (whose, kind): episodes, members, thread names and processes.
    fn kind_stats(&self) -> Vec<KindStat> {
        #[derive(Default)]
        struct Acc {
            episodes: u64,
            members: u64,
            names: BTreeMap<u16, u64>,
            procs: BTreeMap<i32, (u64, u64)>,
        }
        let mut acc: BTreeMap<(&'static str, u16), Acc> = BTreeMap::new();
        for r in &self.history {
            // A kind, and a process, count once per episode however many threads it had.
            let (mut kinds, mut procs) = (BTreeSet::new(), BTreeSet::new());
            for m in r.iter() {
                let key = (whose(m.whose), m.kind);
                let a = acc.entry(key).or_default();
                a.members += 1;
                *a.names.entry(m.name).or_default() += 1;
                let p = a.procs.entry(m.pid).or_default();
                p.1 += 1;
                if procs.insert((key, m.pid)) {
                    p.0 += 1;
                }
                if kinds.insert(key) {
                    a.episodes += 1;
                }
            }
        }
        let mut out: Vec<KindStat> = acc
            .into_iter()
            .map(|((w, k), a)| {
                let kind = &self.kinds.list[k as usize];
                let mut threads: Vec<(String, u64)> = (a.names.into_iter())
                    .map(|(n, count)| (self.names.list[n as usize].clone(), count))
                    .collect();
                threads.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
                KindStat {
                    kind: kind.label.clone(),
                    whose: w.to_owned(),
                    helper_type: kind.helper_type.clone(),
                    sub_type: kind.sub_type.clone(),
                    episodes: a.episodes,
                    members: a.members,
                    threads,
                    processes: (a.procs.into_iter())
                        .map(|(pid, (episodes, members))| ProcessStat {
                            pid,
                            episodes,
                            members,
                        })
                        .collect(),
                }
            })
            .collect();
        out.sort_by(|x, y| {
            y.episodes
                .cmp(&x.episodes)
                .then_with(|| x.kind.cmp(&y.kind))
        });
        out
    }
}

fn whose(k: CriticalKind) -> &'static str {
    match k {
        CriticalKind::App => "app",
        CriticalKind::Partner => "partner",
        CriticalKind::KernelWorker => "kernel-worker",
    }
}

impl Daemon {
    /// The tracker resolved episodes: record what the set held, for the app in front only (a
    /// former foreground's episode is no keystroke on the app shown).
    pub(super) fn episode_seen(&mut self, app: Option<i32>, held: &[Critical], resolved: u64) {
        if app.is_some() && app == self.focus.map(|a| a.pid) {
            self.critical_sets.record(held, resolved);
        }
    }
}

#[cfg(test)]
#[path = "critical_sets_tests.rs"]
mod tests;
