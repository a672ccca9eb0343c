//! `uxsched bench …`, `uxsched demo`, and the hidden `uxsched bench-model` that runs a
//! foreground model process (so one binary ships the harness and its models).

use crate::exit::bad_input;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use uxsched_bench::layout::Layout;
use uxsched_bench::loads::{LoadChoice, LoadKind, LoadSpec};
use uxsched_bench::models::{ModelArgs, ModelKind};
use uxsched_bench::modes::{daemon_available, ModeEnv, ModeName};
use uxsched_bench::report::Report;
use uxsched_bench::runner::{Env, Launcher, Plan};

#[derive(clap::Subcommand)]
pub enum Commands {
    /// Measure a foreground model under background load on this kernel, mode by mode.
    Bench(BenchArgs),
    /// About 18 minutes of `painting` and `xterm` (a real terminal under Xvfb) under CPU load
    /// in the `same-session` and `other-session` layouts, and `chromium` (a real browser) in
    /// `same-session` (modes idle, stock, android, s76, uxsched): prints the tables,
    /// one sentence per scenario on whether uxsched was separable from stock and the best
    /// peer, and where the plots went.
    Demo(DemoArgs),
    /// Run one foreground model process (started by `bench`; not for direct use).
    #[command(hide = true)]
    BenchModel(ModelArgs),
    /// The daemon's safety on this kernel (as root): random SIGKILLs during focus churn in
    /// every mode, a pid-recycling storm, a socket flood and sustained focus churn; prints what
    /// was left changed (docs/daemon.md, "Reliability").
    Reliability(ReliabilityArgs),
    /// Run one app of the reliability benchmark (started by it; not for direct use).
    #[command(hide = true)]
    ReliabilityApp {
        #[arg(value_enum)]
        kind: uxsched_bench::reliability::apps::AppKind,
    },
}

#[derive(clap::Args)]
pub struct ReliabilityArgs {
    /// SIGKILLs of the daemon per mode.
    #[arg(long, default_value_t = 100)]
    kills: u32,
    /// Short-lived processes in the pid-recycling storm (split across the modes).
    #[arg(long, default_value_t = 10_000)]
    storm: u32,
    /// Malformed, oversized and flooding socket messages.
    #[arg(long, default_value_t = 1_000_000)]
    messages: u64,
    /// Seconds of 100 focus changes per second.
    #[arg(long, default_value_t = 60)]
    churn_secs: u64,
    /// Comma-separated daemon modes (default: all six).
    #[arg(long, value_delimiter = ',', value_parser = ["eimos", "vtcfs", "mcfs", "facfs", "shuffledog", "uxsched"])]
    modes: Option<Vec<String>>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    list: Option<BenchList>,
    /// Which foreground model to measure (`uxsched bench list` describes them).
    #[arg(value_enum, required = true)]
    scenario: Option<ModelKind>,
    /// Comma-separated modes; `idle` is always measured (ratios need it).
    /// Default: idle, stock, android, s76, schedqos, fifo, and every daemon mode when available.
    #[arg(long, value_enum, value_delimiter = ',')]
    modes: Option<Vec<ModeName>>,
    #[command(flatten)]
    run: RunArgs,
    /// Background load (default: the scenario's own, see `bench list`): one of cpu, hackbench,
    /// io, memory, kbuild, write, or two at once joined by `+` (`cpu+write`: seed 003's
    /// Table 8), each with its own workers.
    #[arg(long, value_parser = parse_load, value_name = "LOAD[+LOAD]")]
    load: Option<LoadChoice>,
    /// Where the load sits relative to the app (`uxsched bench list` describes them).
    #[arg(long, value_enum, default_value_t = Layout::OtherSession)]
    layout: Layout,
    /// Number of load workers (default: 3× the CPU count for `cpu`); with two loads, the
    /// first's (the second keeps its default).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    load_workers: Option<u64>,
    /// CPU work per request/frame in ms, overriding the model's default.
    #[arg(long, value_parser = parse_compute_ms)]
    compute_ms: Option<f64>,
    /// `launch` only: at most N launches per run (each run still ends at --duration).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    launches: Option<u32>,
}

#[derive(clap::Subcommand)]
enum BenchList {
    /// Show the scenarios, loads and modes (and which modes this build can run).
    List,
    /// Undo what a bench run that was killed outright (SIGKILL, the end of its login
    /// session) left changed: the autogroup switch, its cgroups, its scratch directory
    /// (every run does this first; as root).
    Restore,
}

/// Options shared by `bench` and `demo`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// Repetitions per mode, interleaved across modes (A B C A B C …).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    reps: u64,
    /// Length of one run, e.g. 5s, 1500ms, 2m.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    duration: Duration,
    /// Print the report as JSON (with every run's raw samples) instead of the table.
    #[arg(long)]
    json: bool,
    /// Also save the report as JSON (with every run's raw samples) to this file, beside the
    /// table (written whole: a temporary file renamed into place).
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    /// Write plots (SVG and PNG) into this directory.
    #[arg(long)]
    plots: Option<PathBuf>,
    /// Seed of the event timings and of the bootstrap.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Extra daemon configuration for the uxsched modes (a TOML file of `uxsched config
    /// default` keys, e.g. `[uxsched]` `slice_us = 1500`), to compare configurations; checked
    /// before anything runs. `socket` and `journal` are the harness's own.
    #[arg(long, value_name = "FILE")]
    daemon_config: Option<PathBuf>,
    /// Keep the per-run logs (the daemon's, the loads') after a successful run too, and say
    /// where; run with `RUST_LOG=uxsched_daemon=debug` to see each boost's stages.
    #[arg(long)]
    keep_logs: bool,
}

/// The `--daemon-config` file's text, validated as the daemon will read it.
fn daemon_config(path: Option<&Path>) -> Result<String> {
    let Some(path) = path else {
        return Ok(String::new());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| bad_input(format!("--daemon-config {}: {e}", path.display())))?;
    uxsched_daemon::config::Config::parse(&text, path).map_err(|e| bad_input(e.to_string()))?;
    let table: toml::Table = text.parse().map_err(|e| bad_input(format!("{e}")))?;
    for key in ["socket", "journal"] {
        if table.contains_key(key) {
            return Err(bad_input(format!(
                "--daemon-config {}: `{key}` is set by the harness; remove it",
                path.display()
            )));
        }
    }
    Ok(text)
}

#[derive(clap::Args)]
pub struct DemoArgs {
    #[command(flatten)]
    run: RunArgs,
}

pub fn run(c: Commands) -> Result<ExitCode> {
    match c {
        Commands::Bench(args) => bench(args),
        Commands::Demo(args) => demo(args),
        Commands::BenchModel(args) => {
            uxsched_bench::models::run_model(&args)?;
            Ok(ExitCode::SUCCESS)
        }
        Commands::Reliability(args) => reliability(args),
        Commands::ReliabilityApp { kind } => {
            uxsched_bench::reliability::apps::app_main(kind)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Exit 0 when every target was met (nothing left changed, nothing on a recycled task, no
/// crash), 1 otherwise — the report says what.
fn reliability(args: ReliabilityArgs) -> Result<ExitCode> {
    use uxsched_bench::reliability::{self, Options, MODES};
    let o = Options {
        modes: args
            .modes
            .unwrap_or_else(|| MODES.iter().map(|m| m.to_string()).collect()),
        kills: args.kills,
        storm: args.storm,
        messages: args.messages,
        churn_secs: args.churn_secs,
        seed: args.seed,
        exe: exe()?,
        scratch: reliability::scratch_dir(),
    };
    let report = reliability::run(&o);
    let clean = report.as_ref().is_ok_and(|r| r.failures() == 0);
    if clean {
        let _ = std::fs::remove_dir_all(&o.scratch);
    } else {
        eprintln!(
            "reliability: the daemons' logs are kept in {}",
            o.scratch.display()
        );
    }
    let report = report?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    Ok(if report.failures() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.trim().split_at(
        s.trim()
            .find(|c: char| c.is_alphabetic())
            .unwrap_or(s.len()),
    );
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration: use e.g. 5s, 1500ms or 2m"))?;
    let secs = match unit {
        "ms" => value / 1000.0,
        "s" | "" => value,
        "m" | "min" => value * 60.0,
        _ => return Err(format!("unknown unit '{unit}' in '{s}': use ms, s or m")),
    };
    if !(0.5..=3600.0).contains(&secs) {
        return Err(format!(
            "'{s}' is out of range: a run lasts from 500ms to 1h"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn parse_load(s: &str) -> Result<LoadChoice, String> {
    LoadChoice::parse(s).map_err(|e| format!("{e:#}"))
}

fn parse_compute_ms(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1000.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a CPU time in ms between 0 and 1000")),
    }
}

fn exe() -> Result<PathBuf> {
    std::env::current_exe().context("finding the uxsched binary (std::env::current_exe)")
}

fn env(scratch: &Path, progress: bool, daemon_config: String) -> Result<Env> {
    Ok(Env {
        launcher: Launcher {
            program: exe()?,
            prefix: vec!["bench-model".into()],
        },
        modes: ModeEnv {
            uxsched_exe: Some(exe()?),
            scratch: scratch.to_owned(),
            daemon_config,
        },
        progress,
    })
}

fn require_root() -> Result<()> {
    if !uxsched_bench::sys::is_root() {
        anyhow::bail!("uxsched bench changes scheduling settings, cgroups and sysctls: run it as root (e.g. with sudo)");
    }
    Ok(())
}

/// The modes to run: the user's list (deduplicated, `idle` first) or the default set. With two
/// loads the modes told one load's processes (`runner::acts_on_one_load`) are refused in the
/// list and left out of the default set.
fn resolve_modes(
    requested: Option<Vec<ModeName>>,
    daemon: bool,
    two_loads: bool,
) -> Result<Vec<ModeName>> {
    let mut modes = vec![ModeName::Idle];
    let wanted = requested.unwrap_or_else(|| {
        ModeName::ALL
            .into_iter()
            .filter(|m| m.in_default_set() && (daemon || !m.needs_daemon()))
            .filter(|m| !(two_loads && uxsched_bench::runner::acts_on_one_load(*m)))
            .collect()
    });
    for m in wanted {
        if m.needs_daemon() && !daemon {
            return Err(bad_input(format!(
                "mode '{}' needs the uxsched daemon, which this build does not have; modes available here: idle, stock, android, s76, schedqos, fifo",
                m.name()
            )));
        }
        if two_loads && uxsched_bench::runner::acts_on_one_load(m) {
            return Err(bad_input(format!(
                "mode '{}' is told which processes are the load and acts on one load only: with two loads (--load A+B) it would leave the second alone; drop it from --modes",
                m.name()
            )));
        }
        if !modes.contains(&m) {
            modes.push(m);
        }
    }
    Ok(modes)
}

fn bench(args: BenchArgs) -> Result<ExitCode> {
    let exe = exe()?;
    match args.list {
        Some(BenchList::List) => {
            print!("{}", uxsched_bench::list_text(Some(&exe)));
            return Ok(ExitCode::SUCCESS);
        }
        Some(BenchList::Restore) => {
            require_root()?;
            let undone = uxsched_bench::leftovers::recover()?;
            for line in &undone {
                println!("{line}");
            }
            if undone.is_empty() {
                println!("nothing left behind by earlier bench runs");
            }
            return Ok(ExitCode::SUCCESS);
        }
        None => {}
    }
    let scenario = args.scenario.context("a scenario is required")?;
    if args.launches.is_some() && scenario != ModelKind::Launch {
        return Err(bad_input(format!(
            "--launches counts the launch scenario's launches; {} has none: drop it",
            scenario.name()
        )));
    }
    let load = args.load.unwrap_or(LoadChoice {
        first: uxsched_bench::scenario::scenario(scenario).default_load,
        second: None,
    });
    let modes = resolve_modes(
        args.modes,
        daemon_available(Some(&exe)),
        load.second.is_some(),
    )?;
    require_root()?;
    let scratch = scratch_dir()?;
    let spec = |kind: LoadKind, workers: Option<u64>| LoadSpec {
        kind,
        workers: workers.map_or(kind.default_workers(), |w| w as usize),
        scratch: scratch.clone(),
    };
    let plan = Plan {
        scenario,
        modes,
        reps: args.run.reps as usize,
        duration: args.run.duration,
        load: spec(load.first, args.load_workers),
        second_load: load.second.map(|kind| spec(kind, None)),
        layout: args.layout,
        seed: args.run.seed,
        compute_ms: args.compute_ms,
        launches: args.launches,
    };
    let result = measure_and_print(&[plan], &args.run, &scratch, false).map(|_| ExitCode::SUCCESS);
    finish(result, &scratch, args.run.keep_logs)
}

fn demo(args: DemoArgs) -> Result<ExitCode> {
    require_root()?;
    let exe = exe()?;
    let mut modes = vec![
        ModeName::Idle,
        ModeName::Stock,
        ModeName::Android,
        ModeName::S76,
    ];
    if daemon_available(Some(&exe)) {
        modes.push(ModeName::Uxsched);
    } else {
        eprintln!("uxsched demo: the uxsched mode is unavailable (this build has no daemon); running idle, stock, android, s76");
    }
    // A missing program (the browser) is refused before minutes of the other plans ran.
    let path = std::env::var_os("PATH").unwrap_or_default();
    for (_, scenario) in DEMO_PLANS.iter().filter(|(_, s)| s.is_xapp()) {
        uxsched_bench::models::xapp::require_programs(*scenario, &path)?;
    }
    let scratch = scratch_dir()?;
    let mut plans = Vec::new();
    for (layout, scenario) in DEMO_PLANS {
        let stretch = if scenario.is_xapp() {
            REAL_APP_STRETCH
        } else {
            1
        };
        plans.push(Plan {
            scenario,
            modes: modes.clone(),
            reps: args.run.reps as usize,
            duration: args.run.duration * stretch,
            load: LoadSpec {
                kind: LoadKind::Cpu,
                workers: LoadKind::Cpu.default_workers(),
                scratch: scratch.clone(),
            },
            second_load: None,
            layout,
            seed: args.run.seed,
            compute_ms: None,
            launches: None,
        });
    }
    let mut run = args.run;
    let keep_logs = run.keep_logs;
    // The demo's default plots must not cost the user the tables (e.g. no font installed);
    // plots asked for with --plots are required.
    let plots_optional = run.plots.is_none();
    if plots_optional {
        run.plots = Some(PathBuf::from("out/demo"));
    }
    let result = measure_and_print(&plans, &run, &scratch, plots_optional).map(|reports| {
        if !run.json {
            println!("In one sentence each (95 % bootstrap intervals of the p95 ratio to idle):");
            for r in &reports {
                match r.verdict() {
                    Some(v) => println!("  {v}"),
                    None => println!(
                        "  {} ({}): uxsched was not measured.",
                        r.scenario,
                        r.layout.name()
                    ),
                }
            }
        }
        ExitCode::SUCCESS
    });
    finish(result, &scratch, keep_logs)
}

/// The demo's plans, in order. The realistic layout where stock hurts most on this machine
/// (same-session: painting p95 15.8× idle under kbuild, 77× under stress-ng, vs ~1.0× in
/// other-session) has a touch-to-frame model, a real terminal and a real browser typed into
/// (the case a newcomer knows: typing in a web page while a build runs); the default layout has
/// the model and the terminal.
const DEMO_PLANS: [(Layout, ModelKind); 5] = [
    (Layout::SameSession, ModelKind::Painting),
    (Layout::SameSession, ModelKind::Xterm),
    (Layout::SameSession, ModelKind::Chromium),
    (Layout::OtherSession, ModelKind::Painting),
    (Layout::OtherSession, ModelKind::Xterm),
];
/// A real program is typed into at about 13 keys/s against painting's ~100 touches/s, so its
/// runs are this much longer: 3 × 15 s gives ~580 keystrokes per mode, enough for p95.
const REAL_APP_STRETCH: u32 = 3;

/// `text` into `path` through a temporary file beside it, so no half-written report is left.
fn save_whole(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .with_context(|| format!("--save {}: writing the report", path.display()))
}

/// This run's scratch directory, recorded first so that a run killed outright has it removed
/// by the next one (`uxsched_bench::leftovers`).
fn scratch_dir() -> Result<PathBuf> {
    let dir = uxsched_bench::scratch_dir();
    uxsched_bench::leftovers::scratch(Some(&dir))?;
    Ok(dir)
}

/// Remove the scratch directory; after a failure (not a Ctrl-C), or when asked, keep the
/// per-run logs (load and daemon output the error points to) and say where they are.
fn finish(result: Result<ExitCode>, scratch: &Path, asked: bool) -> Result<ExitCode> {
    let failed = result.is_err() && !uxsched_bench::cancel::cancelled();
    let keep_logs = (failed || asked) && scratch.join("runs").is_dir();
    uxsched_bench::cleanup_scratch(scratch, keep_logs);
    if let Err(e) = uxsched_bench::leftovers::scratch(None) {
        eprintln!("uxsched bench: warning: {e:#}");
    }
    match result {
        Ok(code) if keep_logs => {
            let kept = scratch.display();
            eprintln!("uxsched bench: the runs' logs are kept in {kept}");
            Ok(code)
        }
        Err(e) if keep_logs => {
            let kept = scratch.join("runs");
            Err(e.context(format!("the runs' logs are kept in {}", kept.display())))
        }
        other => other,
    }
}

fn measure_and_print(
    plans: &[Plan],
    run: &RunArgs,
    scratch: &Path,
    plots_optional: bool,
) -> Result<Vec<Report>> {
    if let Some(path) = &run.save {
        // Checked before the runs, not after minutes of measuring.
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if dir.is_some_and(|d| !d.is_dir()) {
            return Err(bad_input(format!(
                "--save {}: its directory does not exist",
                path.display()
            )));
        }
    }
    let extra = daemon_config(run.daemon_config.as_deref())?;
    // A mode that sets a key itself (`uxsched-roles`: the tracker) and a file that sets it
    // otherwise cannot both hold: refuse before anything runs.
    for mode in plans.iter().flat_map(|p| &p.modes) {
        if mode.needs_daemon() {
            uxsched_bench::modes::daemon_config(*mode, &extra)
                .map_err(|e| bad_input(format!("{e:#}")))?;
        }
    }
    let env = env(scratch, !run.json, extra)?;
    let mut reports: Vec<Report> = Vec::new();
    for plan in plans {
        let report = uxsched_bench::bench(plan, &env)?;
        if !run.json {
            println!("{}", report.table());
        }
        if let Some(dir) = &run.plots {
            let files = match uxsched_bench::plots::write_all(&report, dir) {
                Ok(files) => files,
                Err(e) if plots_optional => {
                    eprintln!("uxsched: warning: plots not written: {e:#}");
                    Vec::new()
                }
                Err(e) => return Err(e),
            };
            if !run.json && !files.is_empty() {
                println!(
                    "plots: {}\n",
                    files
                        .iter()
                        .map(|f| f.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        reports.push(report);
    }
    if run.json || run.save.is_some() {
        let json = if reports.len() == 1 {
            serde_json::to_string_pretty(&reports[0])?
        } else {
            serde_json::to_string_pretty(&reports)?
        };
        if let Some(path) = &run.save {
            save_whole(path, &json)?;
        }
        if run.json {
            println!("{json}");
        }
    }
    Ok(reports)
}
