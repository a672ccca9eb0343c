//! Issue 30's question for the browser scenario: per keystroke, which of Chromium's processes
//! the tracker's critical set held (the daemon's `status`, `critical_sets`), and its false
//! positives. The daemon names each member's process generically (its executable, `--type=`,
//! `--utility-sub-type=`); the judgement of what is on Chromium's frame path lives here.
//!
//! A keystroke's frame goes X server → browser (the app: no `--type`) → the page's renderer →
//! the GPU process → X server (`browser.rs`). A member is a **false positive** when its process
//! is Chromium's and not on that path: a helper of any other `--type` (`utility`: the network,
//! storage and audio services; `zygote`, `broker`, ...), a Chromium executable without one that
//! is not the browser (the crashpad handlers, `chrome_crashpad_handler`), or a renderer other
//! than the page's. The page's renderer is not named by the daemon: it is taken to be the
//! renderer in the most episodes (every keystroke's work goes through it), and the report says
//! how many renderers the sets held. Threads of other programs (the X server) and kernel
//! workers are not Chromium's to judge: they are listed, not counted either way.

use crate::modes::ModeName;
use crate::runner::RunRecord;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;
use uxsched_client::control::{CriticalSets, KindStat};

/// Where a kind of process stands on the frame path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The browser, the page's renderer, the GPU process.
    FramePath,
    /// A Chromium process off the frame path.
    FalsePositive,
    /// Not Chromium's: the X server, kernel workers, another program.
    NotChromium,
}

impl Verdict {
    fn tag(self) -> &'static str {
        match self {
            Verdict::FramePath => "frame path",
            Verdict::FalsePositive => "FALSE POSITIVE",
            Verdict::NotChromium => "not Chromium's",
        }
    }
}

/// A Chromium executable: the browser (`chromium`, `chrome`) or one of its own programs
/// (`chrome_crashpad_handler`).
fn is_chromium(kind: &str) -> bool {
    let exe = kind.split(' ').next().unwrap_or_default();
    exe.starts_with("chrom")
}

/// The verdict on a kind of process; a renderer is on the frame path here, and only the
/// page's one per run ([`judge_run`]).
pub fn judge(k: &KindStat) -> Verdict {
    match (k.whose.as_str(), k.helper_type.as_deref()) {
        ("kernel-worker", _) => Verdict::NotChromium,
        ("app", _) => Verdict::FramePath,
        (_, Some("renderer" | "gpu-process")) => Verdict::FramePath,
        (_, Some(_)) => Verdict::FalsePositive,
        (_, None) if is_chromium(&k.kind) => Verdict::FalsePositive,
        _ => Verdict::NotChromium,
    }
}

fn is_renderer(k: &KindStat) -> bool {
    k.whose != "app" && k.helper_type.as_deref() == Some("renderer")
}

/// One run's false positives.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunVerdict {
    pub mode: String,
    pub rep: usize,
    pub episodes: u64,
    /// Members summed over the episodes.
    pub members: u64,
    pub false_positives: u64,
    /// Each false-positive kind (a renderer not the page's: `… (pid N)`) with its members.
    pub false_kinds: Vec<(String, u64)>,
    /// Renderer processes the sets held, and the one taken for the page's.
    pub renderers: usize,
    pub page_renderer: Option<i32>,
}

impl RunVerdict {
    pub fn share_pct(&self) -> f64 {
        100.0 * self.false_positives as f64 / (self.members.max(1) as f64)
    }
}

/// Judge one run's sets: the page's renderer is the renderer process in the most episodes
/// (most members on a tie).
pub fn judge_run(mode: &str, rep: usize, c: &CriticalSets) -> RunVerdict {
    let renderers: Vec<(i32, u64, u64)> = (c.kinds.iter().filter(|k| is_renderer(k)))
        .flat_map(|k| k.processes.iter().map(|p| (p.pid, p.episodes, p.members)))
        .collect();
    let page = (renderers.iter())
        .max_by_key(|&&(pid, episodes, members)| (episodes, members, -pid))
        .map(|r| r.0);
    let mut v = RunVerdict {
        mode: mode.to_owned(),
        rep,
        episodes: c.episodes,
        members: c.kinds.iter().map(|k| k.members).sum(),
        renderers: renderers.len(),
        page_renderer: page,
        ..RunVerdict::default()
    };
    for k in &c.kinds {
        if is_renderer(k) {
            for p in k.processes.iter().filter(|p| Some(p.pid) != page) {
                v.false_kinds.push((
                    format!("{} (pid {}, not the page's)", k.kind, p.pid),
                    p.members,
                ));
            }
        } else if judge(k) == Verdict::FalsePositive {
            v.false_kinds.push((k.kind.clone(), k.members));
        }
    }
    v.false_positives = v.false_kinds.iter().map(|f| f.1).sum();
    v
}

/// Every run's verdict, in the records' order.
pub fn verdicts(records: &[RunRecord]) -> Vec<RunVerdict> {
    (records.iter())
        .filter_map(|r| Some(judge_run(r.mode.name(), r.rep, r.critical_sets.as_ref()?)))
        .collect()
}

/// How many thread names a kind's line shows.
const NAMES_SHOWN: usize = 6;

/// The report's block: per mode whose runs carry critical sets, each kind's share of the
/// episodes with its verdict and thread names, then each run's counts and false positives.
pub fn block(records: &[RunRecord], modes: &[ModeName]) -> String {
    let mut s = String::new();
    for &m in modes {
        let runs: Vec<&RunRecord> = (records.iter())
            .filter(|r| r.mode == m && r.critical_sets.is_some())
            .collect();
        if runs.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "critical set per keystroke, {} (issue 30): share of episodes holding a thread of each process kind, and its threads (members over the episodes)",
            m.name()
        );
        let mut kinds: BTreeMap<(String, String), (KindStat, u64)> = BTreeMap::new();
        let mut episodes = 0;
        for c in runs.iter().filter_map(|r| r.critical_sets.as_ref()) {
            episodes += c.episodes;
            for k in &c.kinds {
                let e = (kinds.entry((k.whose.clone(), k.kind.clone()))).or_insert_with(|| {
                    let threads = Vec::new();
                    (
                        KindStat {
                            threads,
                            ..k.clone()
                        },
                        0,
                    )
                });
                e.1 += k.episodes;
                merge_names(&mut e.0, k);
            }
        }
        let mut kinds: Vec<(KindStat, u64)> = kinds.into_values().collect();
        kinds.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.kind.cmp(&b.0.kind)));
        for (k, n) in &kinds {
            let pct = 100.0 * *n as f64 / episodes.max(1) as f64;
            let names: Vec<String> = (k.threads.iter().take(NAMES_SHOWN))
                .map(|(name, c)| format!("{name}×{c}"))
                .collect();
            let more = k.threads.len().saturating_sub(NAMES_SHOWN);
            let _ = writeln!(
                s,
                "  {pct:5.1} %  {:<60} [{}]  {}{}",
                format!("{} ({})", k.kind, k.whose),
                judge(k).tag(),
                names.join(" "),
                if more > 0 {
                    format!(" …{more} more")
                } else {
                    String::new()
                }
            );
        }
        for r in &runs {
            let Some(c) = &r.critical_sets else { continue };
            let v = judge_run(m.name(), r.rep, c);
            let _ = writeln!(s, "  {}", run_line(r.rep, c, &v));
        }
    }
    s
}

/// The same kind in another run: its thread names' counts added.
fn merge_names(into: &mut KindStat, k: &KindStat) {
    for (name, c) in &k.threads {
        match into.threads.iter_mut().find(|(n, _)| n == name) {
            Some(t) => t.1 += c,
            None => into.threads.push((name.clone(), *c)),
        }
    }
    into.threads
        .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
}

fn run_line(rep: usize, c: &CriticalSets, v: &RunVerdict) -> String {
    let mut line = format!(
        "run {}: {} episodes, threads p50 {} p95 {} max {}, processes p50 {} max {}; false positives {} of {} members ({:.1} %)",
        rep + 1,
        c.episodes,
        c.threads_p50,
        c.threads_p95,
        c.threads_max,
        c.procs_p50,
        c.procs_max,
        v.false_positives,
        v.members,
        v.share_pct()
    );
    if !v.false_kinds.is_empty() {
        let kinds: Vec<String> = (v.false_kinds.iter())
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect();
        let _ = write!(line, ": {}", kinds.join(", "));
    }
    let _ = match v.page_renderer {
        Some(pid) => write!(
            line,
            "; renderers in the sets: {} (the page's taken to be pid {pid}, in the most episodes)",
            v.renderers
        ),
        None => write!(line, "; no renderer in the sets"),
    };
    line
}

#[cfg(test)]
#[path = "frame_path_tests.rs"]
mod tests;
