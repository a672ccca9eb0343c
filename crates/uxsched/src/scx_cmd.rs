//! `uxsched scx`: the sched_ext backend standalone (`run`), and the two levers a user or script
//! needs around it (`switch` threads to SCHED_EXT, `boost` them), over `uxsched-scx`.

use crate::exit::bad_input;
use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uxsched_scx::{thread, Boosts, Class, Options, Policy, Scheduler};

#[derive(clap::Subcommand)]
pub enum ScxCommand {
    /// Load the sched_ext scheduler and run until SIGINT/SIGTERM (or --seconds); then unload,
    /// print its counters and the kernel's exit record. Exit status 1 if the kernel stopped it
    /// (error, watchdog, SysRq-S). Needs root and a kernel with sched_ext (Linux >= 6.12).
    Run {
        /// vtcfs (seed 000), mcfs (seed 002) or facfs (seed 004).
        #[arg(long, default_value = "vtcfs")]
        policy: String,
        /// Schedule every fair thread, not only SCHED_EXT ones (partial mode is the default).
        #[arg(long)]
        full: bool,
        /// MCFS's cut-rate c.
        #[arg(long, default_value_t = 16)]
        cut_rate: u32,
        /// VT-CFS's preemption tick T, in ms.
        #[arg(long, default_value_t = 3)]
        tick_ms: u64,
        /// Eq. 6's C (seed 000: the CPU time an interactive thread needs per request), in ms.
        #[arg(long, default_value_t = 4)]
        boost_c_ms: u64,
        /// Pin the boost map at DIR/boosts (a bpffs directory) for `uxsched scx boost`.
        #[arg(long, value_name = "DIR")]
        pin: Option<PathBuf>,
        /// Stop after this many seconds.
        #[arg(long)]
        seconds: Option<f64>,
    },
    /// Give threads a boost class through the map a running `scx run --pin DIR` pinned.
    Boost {
        #[arg(long, value_name = "DIR")]
        pin: PathBuf,
        /// none, interactive, critical, topmost or background.
        class: String,
        tids: Vec<i32>,
    },
    /// Move threads to SCHED_EXT (keeping nice and custom slice), or back with --normal.
    Switch {
        #[arg(long)]
        normal: bool,
        /// Also set the custom slice (sched_attr.sched_runtime), in µs.
        #[arg(long, value_name = "US")]
        slice_us: Option<u64>,
        tids: Vec<i32>,
    },
}

pub fn run(c: ScxCommand) -> anyhow::Result<ExitCode> {
    match c {
        ScxCommand::Run {
            policy,
            full,
            cut_rate,
            tick_ms,
            boost_c_ms,
            pin,
            seconds,
        } => {
            let opts = Options {
                policy: policy.parse::<Policy>().map_err(bad_input)?,
                full,
                cut_rate,
                tick: Duration::from_millis(tick_ms),
                boost_c: Duration::from_millis(boost_c_ms),
                pin,
            };
            run_scheduler(&opts, seconds.map(Duration::from_secs_f64))
        }
        ScxCommand::Boost { pin, class, tids } => {
            let class = class.parse::<Class>().map_err(bad_input)?;
            let map = Boosts::open_pinned(&pin.join("boosts"))?;
            for tid in tids {
                map.set(tid, class)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        ScxCommand::Switch {
            normal,
            slice_us,
            tids,
        } => {
            let policy = if normal {
                thread::SCHED_NORMAL
            } else {
                thread::SCHED_EXT
            };
            for tid in tids {
                let a = thread::get(tid)?;
                let runtime = slice_us.map_or(a.runtime, |us| us * 1000);
                thread::set(tid, policy, a.nice, runtime)?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn run_scheduler(opts: &Options, limit: Option<Duration>) -> anyhow::Result<ExitCode> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .with_context(|| format!("installing the handler of signal {sig}"))?;
    }
    let sched = Scheduler::load(opts)?;
    let mode = if opts.full { "full" } else { "partial" };
    eprintln!(
        "uxsched scx: {} loaded ({mode} mode); sched_ext state: {}",
        opts.policy,
        uxsched_scx::state().unwrap_or_default()
    );
    let start = Instant::now();
    let ejected = loop {
        if let Some(e) = sched.exited() {
            break Some(e);
        }
        if stop.load(Ordering::Relaxed) || limit.is_some_and(|l| start.elapsed() >= l) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stats = sched.stats().unwrap_or_default();
    let exit = sched.stop();
    let counters: Vec<String> = stats.iter().map(|(k, v)| format!("{k}={v}")).collect();
    eprintln!(
        "uxsched scx: ran {:.1} s; {}",
        start.elapsed().as_secs_f64(),
        counters.join(" ")
    );
    eprintln!("uxsched scx: exit: {exit}");
    match ejected {
        Some(e) => {
            eprintln!("uxsched scx: the kernel stopped the scheduler: {e}");
            Ok(ExitCode::from(1))
        }
        None if exit.is_clean() => Ok(ExitCode::SUCCESS),
        None => Ok(ExitCode::from(1)),
    }
}
