//! `uxsched sim …`: run workloads in the simulator, check determinism, measure its speed.

mod bench;
mod reproduce;
mod sweep;
mod validate;

use crate::exit::bad_input;
use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use uxsched_model::time::{fmt_ns, parse_duration};
use uxsched_model::Nanos;
use uxsched_sim::digest::Digest;
use uxsched_sim::engine::SimConfig;
use uxsched_sim::export::gantt::{parse_window, GanttChart};
use uxsched_sim::export::perfetto::PerfettoTrace;
use uxsched_sim::export::AtomicFile;
use uxsched_sim::log::Sink;
use uxsched_sim::metrics::TableOptions;
use uxsched_sim::workload::{self, Workload};
use uxsched_simrun::{config_for, measure, simulate, RunSettings};

#[derive(clap::Subcommand)]
pub enum SimCommand {
    /// Run a workload and print its metrics.
    Run(Box<RunArgs>),
    /// Measure the simulator's speed on the standard phone-like workload.
    Bench(BenchArgs),
    /// List the built-in workloads and fair policies.
    List,
    /// Run a seed paper's experiments (or `all`) and report the paper's numbers next to ours.
    Reproduce(ReproduceArgs),
    /// Run rt-app workloads on this kernel and in the simulator, and compare per task.
    Validate(validate::ValidateArgs),
    /// Run a parameter sweep (SPEC.toml) on every core: one tidy table (CSV, Parquet) and plots.
    Sweep(sweep::SweepArgs),
}

#[derive(clap::Args)]
pub struct ReproduceArgs {
    /// Seed id (`000`, `001`, …) or `all`.
    pub id: String,
    /// Documentation directory: figures go to `<out>/reproduction/`, and `all` writes
    /// `<out>/reproduction.md`.
    #[arg(long, default_value = "docs")]
    pub out: PathBuf,
    /// Shorter runs and fewer points (for tests; the verdicts may differ).
    #[arg(long)]
    pub quick: bool,
    /// Print the claims and figure data as JSON instead of markdown.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Workload file (`.toml` native, `.json` rt-app) or the name of a built-in (`uxsched sim list`).
    pub workload: String,
    /// Fair-class policy.
    #[arg(long, default_value = "eevdf", value_parser = clap::builder::PossibleValuesParser::new(uxsched_sim::policy::POLICY_NAMES))]
    pub sched: String,
    /// `cfs` only: `kernel` = 2.6.32 defaults (sleeper credit, wake-up preemption); `paper` = the
    /// model seed 000 reasons with (neither).
    #[arg(long, default_value = "kernel", value_parser = ["kernel", "paper"])]
    pub cfs_model: String,
    /// I/O scheduler of the block device that `io` events read from (tunables: `cfq.slice_sync`,
    /// `cfq.slice_idle`).
    #[arg(long, default_value = "cfq", value_parser = clap::builder::PossibleValuesParser::new(uxsched_sim::io::IO_SCHEDULER_NAMES))]
    pub io_sched: String,
    /// Tunable of the policy, a mechanism or the I/O scheduler, `key=value` (e.g. `eevdf.base_slice=1ms`); repeatable.
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Attach a seed mechanism (`uxsched sim list`); repeatable.
    #[arg(long = "mech", value_name = "NAME")]
    pub mechs: Vec<String>,
    /// Number of identical CPUs (overrides the workload's platform). Default: the workload's, else 8.
    #[arg(long)]
    pub cpus: Option<usize>,
    /// Scheduler tick frequency.
    #[arg(long, default_value_t = 250)]
    pub hz: u32,
    /// Seed of the one random generator (tick phases).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Simulated duration, e.g. `10s`, `500ms`. Default: the workload's, else 10s.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Nanos>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write a Perfetto-loadable Chrome trace JSON.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Write a Gantt chart SVG of `--window`.
    #[arg(long, requires = "window")]
    pub gantt: Option<PathBuf>,
    /// Time window of the Gantt chart, e.g. `100ms..150ms`.
    #[arg(long, value_parser = parse_window)]
    pub window: Option<(Nanos, Nanos)>,
    /// Only tasks whose name or a label starts with this in the table.
    #[arg(long)]
    pub filter: Option<String>,
    /// Tasks shown in the table, worst p99 wake-up latency first (the rest are summarised by label and family).
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Run twice and check the two event logs are identical (digest compared).
    #[arg(long)]
    pub determinism_check: bool,
}

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Simulated time per run.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub duration: Nanos,
    /// Runs per policy, interleaved (cfs eevdf vtcfs mcfs, cfs eevdf …); the median and the best
    /// are reported, since a shared machine's speed drifts between runs.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub reps: u32,
    /// Standard workload(s) to measure: `phone` (8 CPUs, 200 threads) and `server64` (64 CPUs,
    /// 2,000 threads); repeatable. Default: both.
    #[arg(long = "workload", value_parser = ["phone", "server64"])]
    pub workloads: Vec<String>,
    /// Only these fair policies (repeatable). Default: all.
    #[arg(long = "sched", value_parser = clap::builder::PossibleValuesParser::new(uxsched_sim::policy::POLICY_NAMES))]
    pub scheds: Vec<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(c: SimCommand) -> anyhow::Result<ExitCode> {
    match c {
        SimCommand::Run(a) => run_workload(*a),
        SimCommand::Bench(a) => bench::bench(a),
        SimCommand::Reproduce(a) => reproduce::reproduce(a),
        SimCommand::Validate(a) => validate::validate(a),
        SimCommand::Sweep(a) => sweep::sweep(a),
        SimCommand::List => {
            println!("built-in workloads (scenarios/):");
            for (name, _) in workload::BUILTINS {
                println!("  {name}");
            }
            println!(
                "fair policies: {}",
                uxsched_sim::policy::POLICY_NAMES.join(", ")
            );
            println!(
                "mechanisms (--mech): {}",
                uxsched_sim::mechanism::MECHANISM_NAMES.join(", ")
            );
            println!(
                "I/O schedulers (--io-sched): {}",
                uxsched_sim::io::IO_SCHEDULER_NAMES.join(", ")
            );
            let seeds: Vec<&str> = uxsched_sim::reproduce::SEEDS.iter().map(|s| s.0).collect();
            println!("reproducible seeds: {}", seeds.join(", "));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A workload from a file path, or a built-in by name.
pub fn load_workload(spec: &str) -> anyhow::Result<Workload> {
    let path = Path::new(spec);
    let w = if path.exists() {
        workload::load(path)
    } else {
        workload::builtin(spec)
    };
    w.map_err(|e| bad_input(e.to_string()))
}

impl RunArgs {
    /// The settings that decide the run (the rest of the options name its output files).
    pub fn settings(&self) -> RunSettings {
        RunSettings {
            sched: self.sched.clone(),
            cfs_model: self.cfs_model.clone(),
            io_sched: self.io_sched.clone(),
            params: self.params.clone(),
            mechs: self.mechs.clone(),
            cpus: self.cpus,
            hz: self.hz,
            seed: self.seed,
            duration: self.duration,
        }
    }
}

fn progress_bar(total: Nanos, enabled: bool) -> ProgressBar {
    if !enabled || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(total / 1_000_000);
    pb.set_style(
        ProgressStyle::with_template("{spinner} simulating [{bar:30}] {pos}/{len} ms  eta {eta}")
            .expect("valid template"),
    );
    pb
}

fn run_workload(a: RunArgs) -> anyhow::Result<ExitCode> {
    let w = load_workload(&a.workload)?;
    let cfg = config_for(&w, &a.settings())?;
    if let Some((from, _)) = a.window.filter(|&(from, _)| from >= cfg.duration) {
        return Err(bad_input(format!(
            "--window starts at {} but the run lasts {}",
            fmt_ns(from as f64),
            fmt_ns(cfg.duration as f64)
        )));
    }
    let mut exports = Exports::open(&a)?;
    let pb = progress_bar(cfg.duration, !a.json);
    let (metrics, digest) = measure(&w, cfg.clone(), &a.mechs, exports.sinks(), &mut |t| {
        pb.set_position(t / 1_000_000)
    })?;
    pb.finish_and_clear();
    if a.determinism_check {
        check_determinism(&w, cfg, &a.mechs, &digest)?;
    }
    // Files appear only after the whole run succeeded.
    exports.commit(&a)?;
    let report = metrics.report(false);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!(
            "{}",
            report.to_table(&TableOptions {
                top: a.top,
                filter: a.filter.clone()
            })
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs the workload a second time and fails unless its event log's digest equals `first`'s.
fn check_determinism(
    w: &Workload,
    cfg: SimConfig,
    mechs: &[String],
    first: &Digest,
) -> anyhow::Result<()> {
    let mut second = Digest::new();
    simulate(w, cfg, mechs, &mut second, &mut |_| {})?;
    if second.value() != first.value() {
        anyhow::bail!(
            "determinism check failed: the two runs differ (digests {} and {})",
            first.hex(),
            second.hex()
        );
    }
    eprintln!(
        "determinism check: two runs identical, {} records, digest {}",
        first.records(),
        first.hex()
    );
    Ok(())
}

/// The files `--gantt` and `--trace` ask for, built while the run goes.
struct Exports {
    gantt: Option<GanttChart>,
    trace: Option<PerfettoTrace<AtomicFile>>,
}

impl Exports {
    fn open(a: &RunArgs) -> anyhow::Result<Exports> {
        let gantt = match a.window {
            Some((from, to)) if a.gantt.is_some() => {
                Some(GanttChart::new(from, to).map_err(bad_input)?)
            }
            _ => None,
        };
        let trace = match &a.trace {
            Some(p) => Some(PerfettoTrace::new(
                AtomicFile::create(p).with_context(|| format!("--trace {}", p.display()))?,
            )),
            None => None,
        };
        Ok(Exports { gantt, trace })
    }

    fn sinks(&mut self) -> Vec<&mut dyn Sink> {
        let mut sinks: Vec<&mut dyn Sink> = Vec::new();
        if let Some(g) = self.gantt.as_mut() {
            sinks.push(g);
        }
        if let Some(t) = self.trace.as_mut() {
            sinks.push(t);
        }
        sinks
    }

    /// Writes the files out, the trace first.
    fn commit(self, a: &RunArgs) -> anyhow::Result<()> {
        if let (Some(t), Some(p)) = (self.trace, &a.trace) {
            t.finish()
                .and_then(|f| f.commit())
                .with_context(|| format!("writing trace {}", p.display()))?;
            eprintln!(
                "trace written to {} (open in https://ui.perfetto.dev)",
                p.display()
            );
        }
        if let (Some(g), Some(p)) = (self.gantt, &a.gantt) {
            uxsched_sim::export::write_atomically(p, |out| g.write_svg(out))
                .with_context(|| format!("writing Gantt chart {}", p.display()))?;
            eprintln!("Gantt chart written to {}", p.display());
        }
        Ok(())
    }
}
