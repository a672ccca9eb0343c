//! `uxsched tracker`: the delay-critical thread tracker's learned decisions (`show`, `forget`)
//! and the tracker itself on the live system (`watch`), over `uxsched-tracker`.

use crate::exit::bad_input;
use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use uxsched_tracker::{store, Status, Tracker, TrackerConfig};

#[derive(clap::Args)]
pub struct StoreArg {
    /// The tracker's decision store [default: /var/lib/uxsched/tracker.sqlite].
    #[arg(long, value_name = "PATH")]
    store: Option<PathBuf>,
}

impl StoreArg {
    fn path(&self) -> PathBuf {
        self.store.clone().unwrap_or_else(|| {
            TrackerConfig::default()
                .store
                .expect("the default config has a store")
        })
    }
}

#[derive(clap::Subcommand)]
pub enum TrackerCommand {
    /// Show the learned ⟨context, decision⟩ pairs, of every app or of APP (executable path,
    /// its file name, or the full app key).
    Show {
        app: Option<String>,
        /// One JSON array instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Delete the learned pairs of APP, so its next launch is learned afresh.
    Forget {
        app: String,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Run the tracker on a process (needs root and BPF): print each episode and the
    /// delay-critical set as JSON lines, then the tracker's own CPU time and peak RSS.
    Watch {
        /// The foreground process to follow.
        #[arg(long)]
        pid: u32,
        /// How long to run.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// More input-dispatcher thread names (besides the defaults: X servers, compositors…).
        #[arg(long, value_name = "NAME")]
        input: Vec<String>,
        /// More display thread names.
        #[arg(long, value_name = "NAME")]
        display: Vec<String>,
        /// Report each critical thread's on-CPU time in the open episode (`episode_cpu_ns`),
        /// at the cost of a BPF program on every context switch.
        #[arg(long)]
        episode_cpu: bool,
        #[command(flatten)]
        store: StoreArg,
    },
}

pub fn run(c: TrackerCommand) -> anyhow::Result<ExitCode> {
    match c {
        TrackerCommand::Show { app, json, store } => show(&store.path(), app.as_deref(), json),
        TrackerCommand::Forget { app, store } => {
            let path = store.path();
            let n = store::forget(&path, &app)
                .with_context(|| format!("cannot update {}", path.display()))?;
            println!("forgot {n} decisions of {app}");
            Ok(ExitCode::SUCCESS)
        }
        TrackerCommand::Watch {
            pid,
            seconds,
            input,
            display,
            episode_cpu,
            store,
        } => {
            let mut cfg = TrackerConfig {
                store: Some(store.path()),
                episode_cpu,
                ..TrackerConfig::default()
            };
            cfg.input_names.extend(input);
            cfg.display_names.extend(display);
            watch(cfg, pid, Duration::from_secs(seconds))
        }
    }
}

fn show(path: &std::path::Path, app: Option<&str>, json: bool) -> anyhow::Result<ExitCode> {
    let pairs =
        store::list(path, app).with_context(|| format!("cannot read {}", path.display()))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&pairs)?);
        return Ok(ExitCode::SUCCESS);
    }
    if pairs.is_empty() {
        println!("no learned decisions in {}", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    let mut app_seen = "";
    for p in &pairs {
        if p.context.app != app_seen {
            println!("{}", p.context.app);
            app_seen = &p.context.app;
        }
        let d = &p.decision;
        println!(
            "  {:<16} created by {:<24} {:<13} {:<12} ({} episodes)",
            p.context.thread,
            p.context.creator,
            d.kind.name(),
            if d.critical {
                "critical"
            } else {
                "not critical"
            },
            d.seen
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// CPU time (user + system) of this process, and its peak RSS in KiB.
fn own_usage() -> (Duration, u64) {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let t = |tv: libc::timeval| Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000);
    (t(ru.ru_utime) + t(ru.ru_stime), ru.ru_maxrss as u64)
}

fn watch(cfg: TrackerConfig, pid: u32, for_: Duration) -> anyhow::Result<ExitCode> {
    let mut tracker =
        Tracker::start(cfg).map_err(|e| anyhow::anyhow!("tracker unavailable: {e}"))?;
    tracker
        .set_foreground(Some(pid))
        .map_err(|e| bad_input(format!("cannot follow process {pid}: {e}")))?;
    let (cpu0, start) = (own_usage().0, Instant::now());
    let mut last_epoch = None;
    let mut last_set = Vec::new();
    // Input wake-up (the kernel's START time) → the episode known here, per episode.
    let mut known_us = Vec::new();
    while start.elapsed() < for_ {
        let s = tracker.poll(Duration::from_millis(50));
        if let Some(e) = &s.episode {
            if last_epoch.is_none_or(|(n, _)| n != e.epoch) {
                let now = uxsched_tracker::procfs::monotonic_ns();
                known_us.push(now.saturating_sub(e.start_ns) as f64 / 1000.0);
            }
        }
        let set: Vec<(i32, Status)> = s.critical.iter().map(|m| (m.id.tid, m.status)).collect();
        let epoch = s.episode.as_ref().map(|e| (e.epoch, e.end.is_some()));
        if epoch != last_epoch || set != last_set {
            println!("{}", serde_json::to_string(&s)?);
            (last_epoch, last_set) = (epoch, set);
        }
    }
    if !known_us.is_empty() {
        known_us.sort_by(f64::total_cmp);
        let q = |permille| uxsched_model::stats::nearest_rank(&known_us, permille);
        eprintln!(
            "tracker: input wake-up → episode known in userspace: p50 {:.0} µs, p99 {:.0} µs over {} episodes",
            q(500),
            q(990),
            known_us.len()
        );
    }
    let (cpu, rss) = own_usage();
    let wall = start.elapsed();
    // Most of the resident set is this binary's code (file-backed pages shared with the page
    // cache); the tracker's own memory is the anonymous part.
    let anon = uxsched_bench::sys::status_kib(std::process::id() as i32, "RssAnon")
        .map_or("?".to_owned(), |k| format!("{:.1}", k as f64 / 1024.0));
    eprintln!(
        "tracker: {:.2} % of one CPU in userspace+syscalls over {:.1} s, peak RSS {:.1} MiB, of which anonymous now {anon} MiB",
        100.0 * (cpu - cpu0).as_secs_f64() / wall.as_secs_f64(),
        wall.as_secs_f64(),
        rss as f64 / 1024.0
    );
    Ok(ExitCode::SUCCESS)
}
