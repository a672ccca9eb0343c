//! The runner: repetitions interleaved across modes (A B C A B C …) so slow drift on a shared
//! machine hits every mode alike. One run = prepare the mode → start the load (not for `idle`)
//! → 0.5 s warm-up → start the model, apply the mode to it, go → sweep the mode every 100 ms
//! until the model ends → stop the load and read its throughput → restore the mode.
//! Guards kill the model and the load and restore the mode on every exit path, Ctrl-C included.

mod model_procs;

pub(crate) use model_procs::model_command;
use model_procs::ModelProcs;

use crate::cancel;
use crate::layout::{ActiveLayout, Layout};
use crate::loads::{self, LoadSpec, RunningLoad, Throughput};
use crate::models::{self, ModelKind, ModelOutput};
use crate::modes::{self, Mode, ModeEnv, ModeName, Targets};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const WARMUP: Duration = Duration::from_millis(500);
const SWEEP: Duration = Duration::from_millis(100);
/// Slack past the planned duration before a model is declared hung.
const HANG_MARGIN: Duration = Duration::from_secs(30);

/// What to measure.
#[derive(Debug, Clone)]
pub struct Plan {
    pub scenario: ModelKind,
    pub modes: Vec<ModeName>,
    pub reps: usize,
    pub duration: Duration,
    pub load: LoadSpec,
    /// A second load run beside `load` (`--load cpu+write`: seed 003's Table 8), placed alike.
    pub second_load: Option<LoadSpec>,
    /// Where the load sits relative to the app (`crate::layout`).
    pub layout: Layout,
    pub seed: u64,
    /// Override of the model's CPU work per request/frame (ms).
    pub compute_ms: Option<f64>,
    /// `launch`: at most this many launches per run (each run still ends at `duration`).
    pub launches: Option<u32>,
}

/// How to start a model process: `program prefix… --model …` (the uxsched binary passes
/// itself and `bench-model`; tests pass the small `uxsched-bench-model` binary).
#[derive(Debug, Clone)]
pub struct Launcher {
    pub program: PathBuf,
    pub prefix: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Env {
    pub launcher: Launcher,
    pub modes: ModeEnv,
    pub progress: bool,
}

/// One mode × repetition.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    pub mode: ModeName,
    pub rep: usize,
    pub samples_ms: Vec<f64>,
    pub extras: BTreeMap<String, f64>,
    pub context_switches: u64,
    pub wall_s: f64,
    pub background: Option<Throughput>,
    /// The daemon's critical sets per keystroke (`status`), in modes that run the tracker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical_sets: Option<uxsched_client::control::CriticalSets>,
}

/// The runs in execution order, the modes dropped after a run under them failed (with the
/// reason), and what the layout set up or emulated.
pub struct Runs {
    pub records: Vec<RunRecord>,
    pub dropped: Vec<(ModeName, String)>,
    pub layout_note: String,
}

/// Where benches take their machine-wide lock.
const MACHINE_LOCK: &str = "/run/lock/uxsched-bench.lock";

/// Hold the machine for one bench at a time. Runs change machine-wide settings (the autogroup
/// sysctl, cgroups) and restore what they found: two benches at once would each restore the
/// other's value (one saw "on", the other "off") and leave the machine changed — and their
/// loads would disturb each other's figures. Waits, saying so, while another bench runs.
fn exclusive_machine() -> Result<std::fs::File> {
    std::fs::create_dir_all("/run/lock")?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(MACHINE_LOCK)
        .with_context(|| format!("cannot open the bench lock {MACHINE_LOCK}"))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        eprintln!("uxsched bench: another bench holds {MACHINE_LOCK}; waiting for it to finish");
        // SAFETY: as above, blocking.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("cannot lock {MACHINE_LOCK}"));
        }
    }
    Ok(file)
}

/// Run every mode `plan.reps` times, interleaved. A mode whose run fails (e.g. its model was
/// killed by the mode's own limits) is dropped from the remaining repetitions and reported,
/// unless it is `idle` (every ratio needs it) or the user interrupted the bench.
pub fn run(plan: &Plan, env: &Env) -> Result<Runs> {
    cancel::install();
    // Refused before waiting for the machine: a missing program is known at once.
    check_plan(plan)?;
    let env = &models::wayland::with_auto_sources(plan, env)?;
    let _machine = exclusive_machine()?;
    for line in crate::leftovers::recover()? {
        eprintln!("uxsched bench: {line}");
    }
    // Entered first so it is undone last, after every run's guards (also on errors, Ctrl-C).
    let mut layout = plan.layout.enter()?;
    std::fs::create_dir_all(&env.modes.scratch)?;
    models::prepare_files(plan.scenario, &env.modes.scratch, plan.seed)?;
    if plan.modes.iter().any(|m| *m != ModeName::Idle) {
        loads::prepare(&plan.load)?;
        if let Some(second) = &plan.second_load {
            loads::prepare(second)?;
        }
    }
    let bar = progress_bar(plan, env.progress)?;
    let mut records = Vec::new();
    let mut dropped: Vec<(ModeName, String)> = Vec::new();
    for rep in 0..plan.reps {
        for &mode in &plan.modes {
            if dropped.iter().any(|(m, _)| *m == mode) {
                bar.inc(1);
                continue;
            }
            bar.set_message(format!("{} (rep {}/{})", mode.name(), rep + 1, plan.reps));
            let record = run_one(plan, env, &layout, mode, rep).with_context(|| {
                format!(
                    "{} under mode {} (rep {})",
                    plan.scenario.name(),
                    mode.name(),
                    rep + 1
                )
            });
            match record {
                Ok(r) => records.push(r),
                Err(e) if mode != ModeName::Idle && !cancel::cancelled() => {
                    bar.println(format!("warning: dropping mode {}: {e:#}", mode.name()));
                    records.retain(|r: &RunRecord| r.mode != mode);
                    dropped.push((mode, format!("{e:#}")));
                }
                Err(e) => {
                    bar.abandon();
                    return Err(e);
                }
            }
            // The run's processes are gone: forget them.
            crate::leftovers::settle()?;
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    layout.restore()?;
    Ok(Runs {
        records,
        dropped,
        layout_note: layout.note.clone(),
    })
}

/// What the plan asks that cannot be done: a real program that is not installed, or `rtapi`
/// with a model that does not ask for real time.
fn check_plan(plan: &Plan) -> Result<()> {
    if plan.scenario.is_xapp() {
        models::xapp::require_programs(
            plan.scenario,
            &std::env::var_os("PATH").unwrap_or_default(),
        )?;
    }
    if plan.scenario.is_wayland() {
        models::wayland::require_programs(&std::env::var_os("PATH").unwrap_or_default())?;
    }
    if let (Some(second), Some(&m)) = (
        &plan.second_load,
        plan.modes.iter().find(|m| acts_on_one_load(**m)),
    ) {
        bail!(
            "mode {} is told which processes are the load and acts on one load only: with two loads ({}+{}) it would leave the second alone; drop it from --modes",
            m.name(),
            plan.load.kind.name(),
            second.kind.name()
        );
    }
    if plan.modes.contains(&ModeName::Rtapi) && !plan.scenario.asks_realtime() {
        bail!(
            "mode rtapi needs a model whose thread asks for real time itself (alarm, player), not {}; drop rtapi from --modes",
            plan.scenario.name()
        );
    }
    Ok(())
}

/// The modes told the load's leader (`Targets::background`), which holds one load's: they
/// cannot treat a second load as they treat the first.
pub fn acts_on_one_load(m: ModeName) -> bool {
    matches!(m, ModeName::Android | ModeName::S76 | ModeName::Schedqos) || m.needs_sched_ext()
}

/// A bar over all the plan's runs (hidden unless `shown`).
fn progress_bar(plan: &Plan, shown: bool) -> Result<indicatif::ProgressBar> {
    let total = (plan.reps * plan.modes.len()) as u64;
    let bar = if shown {
        indicatif::ProgressBar::new(total)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} [{bar:30}] {pos}/{len} runs, {elapsed} elapsed, ETA {eta}  {msg}",
        )?
        .progress_chars("=> "),
    );
    bar.set_prefix(plan.scenario.name());
    Ok(bar)
}

/// Restores the mode when dropped, if the normal path did not.
struct ModeGuard {
    mode: Box<dyn Mode>,
    done: bool,
}

impl ModeGuard {
    fn restore(&mut self) -> Result<()> {
        self.done = true;
        self.mode.restore()
    }
}

impl Drop for ModeGuard {
    fn drop(&mut self) {
        if !self.done {
            if let Err(e) = self.mode.restore() {
                eprintln!("uxsched bench: while cleaning up: {e:#}");
            }
        }
    }
}

fn run_one(
    plan: &Plan,
    env: &Env,
    layout: &ActiveLayout,
    name: ModeName,
    rep: usize,
) -> Result<RunRecord> {
    let dir = env
        .modes
        .scratch
        .join(format!("runs/{}-{}", name.name(), rep + 1));
    std::fs::create_dir_all(&dir)?;
    // Declaration order matters: drops run in reverse, so the model dies first, then the
    // load, then the mode is restored.
    let mut guard = ModeGuard {
        mode: modes::build(name, &env.modes)?,
        done: false,
    };
    guard.mode.prepare()?;
    let mut targets = Targets::default();
    let load: Option<RunningLoad> = if name == ModeName::Idle {
        None
    } else {
        let l = loads::start(&plan.load, &dir.join("load"), &layout.load_placement()?)?;
        targets.background = Some(l.leader());
        Some(l)
    };
    // Dropped before `load` on an error: both are killed on every exit path.
    let second = start_second(plan, layout, &dir, name)?;
    if load.is_some() {
        warm_up(guard.mode.as_mut(), &targets)?;
    }
    let started = Instant::now();
    let seed = plan.seed + rep as u64;
    let mut model = spawn_foreground(plan, env, layout, &dir, seed, guard.mode.as_ref())?;
    model.targets(&mut targets);
    guard.mode.apply(&targets)?;
    let foreground =
        |t: &Targets| -> Vec<i32> { t.app_family().into_iter().chain(t.x_server).collect() };
    let (fg_cpu_start, fg_start) = (
        crate::sys::tree_cpu_ns(&foreground(&targets)),
        Instant::now(),
    );
    model.go()?;
    sweep_until_finished(model.as_mut(), guard.mode.as_mut(), &targets, plan.duration)?;
    // A real program's CPU (its process tree and the X server it draws through), measured
    // here since it reports nothing itself; a model reports its own (`models/mod.rs`).
    let fg_cpu_pct = 100.0
        * crate::sys::tree_cpu_ns(&foreground(&targets)).saturating_sub(fg_cpu_start) as f64
        / 1e9
        / fg_start.elapsed().as_secs_f64().max(1e-9);
    let wall_s = started.elapsed().as_secs_f64();
    cancel::check()?;
    let output = model.collect()?;
    let mut extras = output.extras;
    if plan.scenario.is_xapp() || plan.scenario.is_wayland() {
        extras.entry("app_cpu_pct".into()).or_insert(fg_cpu_pct);
    }
    extras.extend(guard.mode.extras());
    let critical_sets = guard.mode.critical_sets();
    // The first input after the mode came into force (a daemon's focus): a mode that is slow
    // to act shows here long before it moves p99.
    if let Some(&first) = output.samples_ms.first() {
        extras.insert("first_ms".into(), first);
    }
    stop_second(second, &mut extras)?;
    let background = load.map(RunningLoad::stop).transpose()?;
    if let Some(cpu) = background.as_ref().and_then(|b| b.cpu_pct) {
        extras.insert("load_cpu_pct".into(), cpu);
    }
    guard.restore()?;
    Ok(RunRecord {
        mode: name,
        rep,
        samples_ms: output.samples_ms,
        extras,
        context_switches: output.context_switches,
        wall_s,
        background,
        critical_sets,
    })
}

/// The plan's second load (`--load cpu+write`), placed as the first, in `dir/load-<kind>`;
/// none under `idle`.
fn start_second(
    plan: &Plan,
    layout: &ActiveLayout,
    dir: &Path,
    mode: ModeName,
) -> Result<Option<RunningLoad>> {
    match &plan.second_load {
        Some(spec) if mode != ModeName::Idle => {
            let out = dir.join(format!("load-{}", spec.kind.name()));
            Ok(Some(loads::start(spec, &out, &layout.load_placement()?)?))
        }
        _ => Ok(None),
    }
}

/// Stop the second load and put its figures into the run's extras (`<kind>_load` in its
/// tool's unit, `<kind>_load_cpu_pct`): the record's `background` stays the first load's.
fn stop_second(second: Option<RunningLoad>, extras: &mut BTreeMap<String, f64>) -> Result<()> {
    let Some(load) = second else {
        return Ok(());
    };
    let kind = load.kind().name();
    let t = load.stop()?;
    extras.insert(format!("{kind}_load"), t.value);
    if let Some(cpu) = t.cpu_pct {
        extras.insert(format!("{kind}_load_cpu_pct"), cpu);
    }
    Ok(())
}

/// The load's warm-up: the mode swept over `targets` every [`SWEEP`] for [`WARMUP`].
fn warm_up(mode: &mut dyn Mode, targets: &Targets) -> Result<()> {
    let until = Instant::now() + WARMUP;
    while Instant::now() < until {
        cancel::check()?;
        mode.apply(targets)?;
        std::thread::sleep(SWEEP);
    }
    Ok(())
}

/// The run's foreground in `dir`: the real program under X, or the model's processes (given
/// the mode's real-time socket, if it has one).
fn spawn_foreground(
    plan: &Plan,
    env: &Env,
    layout: &ActiveLayout,
    dir: &Path,
    seed: u64,
    mode: &dyn Mode,
) -> Result<Box<dyn Foreground>> {
    Ok(if plan.scenario.is_xapp() {
        Box::new(models::xapp::XappProcs::spawn(
            plan, env, layout, dir, seed,
        )?)
    } else if plan.scenario.is_wayland() {
        Box::new(models::wayland::WaylandProcs::spawn(
            plan, env, layout, dir, seed,
        )?)
    } else {
        let rt_socket = mode.app_rt_socket();
        Box::new(ModelProcs::spawn(
            plan,
            env,
            layout,
            dir,
            seed,
            rt_socket.as_deref(),
        )?)
    })
}

/// Sweep the mode every [`SWEEP`] until the model finishes; an error if it runs
/// [`HANG_MARGIN`] past its planned `duration`.
fn sweep_until_finished(
    model: &mut dyn Foreground,
    mode: &mut dyn Mode,
    targets: &Targets,
    duration: Duration,
) -> Result<()> {
    let deadline = Instant::now() + duration + HANG_MARGIN;
    while !model.finished()? {
        cancel::check()?;
        if Instant::now() > deadline {
            bail!(
                "the model did not finish within {} s of its planned duration",
                HANG_MARGIN.as_secs()
            );
        }
        mode.apply(targets)?;
        std::thread::sleep(SWEEP);
    }
    Ok(())
}

/// The foreground of one run: a model's own processes, or a real program under X
/// (`models/xapp`). Dropping it kills what it started.
pub(crate) trait Foreground {
    /// Fill in what modes act on: the app, and what else the foreground names.
    fn targets(&self, t: &mut Targets);
    /// Tell it to start measuring (after the mode was applied).
    fn go(&mut self) -> Result<()>;
    /// Whether it finished measuring; an error if a process failed.
    fn finished(&mut self) -> Result<bool>;
    /// Its samples, extras and the app's context switches.
    fn collect(&self) -> Result<ModelOutput>;
}
