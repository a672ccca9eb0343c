//! Seed 003's CPU manager: MuPDF's zoom against CPUGenerator (Table 7a), with static labels
//! and with the Thread Tracker, and a game's GL thread under CPU load.

use super::{fmt_latency, latency, task, ANDROID, CPU_ONLY, VSYNC};
use crate::engine::{Sim, SimConfig};
use crate::mechanism::shuffledog_cpu;
use crate::mechanism::tracker::Tracker;
use crate::platform::PlatformSpec;
use crate::reproduce::frames::{over, percentile_ms, FrameClock};
use crate::reproduce::{Claim, Ctx, Outcome, Verdict};
use crate::workload::{Event, TaskSpec, Workload};
use uxsched_model::{Nanos, MS, SEC};

/// MuPDF zoom (§3, Fig. 3): the UI thread takes the gesture, hands the resize to an AsyncTask
/// (background priority, nice 10), which posts the page back for the UI thread to draw. Work
/// sizes give the paper's 696 ms baseline on an idle core. `generator` adds CPUGenerator:
/// "float computations in 5 threads" (Table 2), a started service at nice 0.
pub fn mupdf(generator: bool) -> Workload {
    let ui = task(
        "mupdf.ui",
        0,
        &["ui", "delay-critical"],
        vec![
            Event::Sleep(100 * MS),
            Event::Begin("zoom".into()),
            Event::Run(16 * MS),
            Event::Send("resize".into()),
            Event::Recv("page".into()),
            Event::Run(30 * MS),
            Event::End("zoom".into()),
        ],
    );
    let worker = task(
        "mupdf.asynctask",
        10,
        &["delay-critical"],
        vec![
            Event::Recv("resize".into()),
            Event::Run(650 * MS),
            Event::Send("page".into()),
        ],
    );
    app_with_load("seed003-mupdf", vec![ui, worker], generator)
}

/// A 4-CPU phone running `tasks`, plus the paper's CPUGenerator (five float threads in the
/// background) when `generator` is set.
pub(super) fn app_with_load(name: &str, mut tasks: Vec<TaskSpec>, generator: bool) -> Workload {
    if generator {
        for i in 0..5 {
            let mut t = task(
                &format!("cpugen.{i}"),
                0,
                &["background"],
                vec![Event::Run(100 * SEC)],
            );
            t.process = "cpugenerator".into();
            tasks.push(t);
        }
    }
    Workload {
        name: name.into(),
        duration: None,
        platform: Some(PlatformSpec::uniform(4)),
        groups: vec![],
        tasks,
        files: vec![],
    }
}

/// A game on the CPU: the GL thread draws a frame every vsync (6 ms of work at full speed) and
/// is delay-critical; the UI thread only takes a touch every 0.5 s. With CPUGenerator as above.
pub fn game_cpu(generator: bool) -> Workload {
    let gl = task(
        "game.gl",
        0,
        &["delay-critical", "render", "vsync"],
        vec![
            Event::Timer {
                name: "vsync".into(),
                period: VSYNC,
                absolute: true,
            },
            Event::Begin("frame".into()),
            Event::Run(6 * MS),
            Event::End("frame".into()),
        ],
    );
    let ui = task(
        "game.ui",
        0,
        &["ui", "delay-critical"],
        vec![Event::Run(2 * MS), Event::Sleep(500 * MS)],
    );
    let mut tasks = vec![gl, ui];
    for t in &mut tasks {
        t.loops = None;
    }
    app_with_load("seed003-game", tasks, generator)
}

/// Frame times of the CPU game.
fn game_frames(
    mut w: Workload,
    shuffledog: bool,
    seed: u64,
    dur: Nanos,
) -> Result<Vec<Nanos>, String> {
    if shuffledog {
        shuffledog_cpu::shuffledog(&mut w);
    } else {
        shuffledog_cpu::android_default(&mut w);
    }
    let mut cfg = SimConfig::new("cfs", PlatformSpec::uniform(4));
    cfg.duration = dur;
    cfg.seed = seed;
    let mut sim = Sim::new(&w, cfg).map_err(|e| e.to_string())?;
    let mut clock = FrameClock::new("frame", "vsync");
    sim.run(&mut clock, &mut |_| {})
        .map_err(|e| e.to_string())?;
    if clock.frames.is_empty() {
        return Err("seed 003: the game drew no frame".into());
    }
    Ok(clock.frames)
}

/// Table 7a: the MuPDF-like app's zoom under CPUGenerator, and a game's frames under the same
/// load.
pub(super) fn table7a(ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    mupdf_zoom(ctx, out)?;
    game_under_cpu_load(ctx, out)
}

/// The MuPDF zoom latency alone, with CPUGenerator by default and under ShuffleDog (static
/// labels, then the Thread Tracker's first launch and relaunch).
fn mupdf_zoom(ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let limit = if ctx.quick { 20 * SEC } else { 60 * SEC };
    let base = latency(mupdf(false), ANDROID, None, ctx.seed, limit)?;
    let default = latency(mupdf(true), ANDROID, None, ctx.seed, limit)?;
    let sd = latency(mupdf(true), CPU_ONLY, None, ctx.seed, limit)?;
    // The Thread Tracker instead of static labels: the first launch learns the AsyncTask only
    // when it posts the page back; a relaunch starts from what the first one learned.
    let first = Tracker::new(shuffledog_cpu::DELAY_CRITICAL_NICE);
    let learned = first.findings();
    let tracked_first = latency(mupdf(true), ANDROID, Some(first), ctx.seed, limit)?;
    let learned = learned.lock().map_err(|e| e.to_string())?.clone();
    let relaunch = Tracker::with_learned(shuffledog_cpu::DELAY_CRITICAL_NICE, learned);
    let tracked = latency(mupdf(true), ANDROID, Some(relaunch), ctx.seed, limit)?;
    let b = base.ok_or("seed 003: the MuPDF zoom did not finish on an idle system")? as f64;
    let ratio = |l: Option<Nanos>| l.map_or(limit as f64 / b, |l| l as f64 / b);
    let (rd, rs) = (ratio(default), ratio(sd));
    let (verdict, reason) = if rd >= 3.0 && rs <= 1.5 {
        (
            Verdict::Reproduced,
            "the background group starves the AsyncTask; nice 3 outside it restores the latency"
                .to_string(),
        )
    } else if rd > rs * 1.5 {
        (
            Verdict::Partly,
            format!("ShuffleDog helps ({rd:.1}× → {rs:.1}×) but not to the paper's ~1×"),
        )
    } else {
        (Verdict::Not, "no clear difference".to_string())
    };
    out.claims.push(Claim {
        seed: "003",
        source: "Table 7a".into(),
        claim: "MuPDF zoom latency with CPUGenerator, default vs ShuffleDog".into(),
        paper: "696 ms alone; 7,325 ms (10.5×) default; 714 ms (1.03×) ShuffleDog".into(),
        ours: format!(
            "{} alone; {} ({rd:.1}×) default; {} ({rs:.2}×) ShuffleDog; with the Thread \
             Tracker instead of labels: {} ({:.1}×) first launch, {} ({:.2}×) relaunch",
            fmt_latency(base, limit),
            fmt_latency(default, limit),
            fmt_latency(sd, limit),
            fmt_latency(tracked_first, limit),
            ratio(tracked_first),
            fmt_latency(tracked, limit),
            ratio(tracked),
        ),
        verdict,
        reason,
    });
    Ok(())
}

/// A 60 fps game's frame times alone, with CPUGenerator by default and under ShuffleDog (the
/// paper measures games under GPU load only).
fn game_under_cpu_load(ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let dur = if ctx.quick { 3 * SEC } else { 20 * SEC };
    let base = game_frames(game_cpu(false), false, ctx.seed, dur)?;
    let default = game_frames(game_cpu(true), false, ctx.seed, dur)?;
    let sd = game_frames(game_cpu(true), true, ctx.seed, dur)?;
    let p95 = |f: &[Nanos]| percentile_ms(f, 95.0);
    let (b, d, s) = (p95(&base), p95(&default), p95(&sd));
    let (verdict, reason) = if s <= b * 1.2 {
        (
            Verdict::Reproduced,
            "the delay-critical GL thread keeps its unloaded frame time".to_string(),
        )
    } else if s < d {
        (
            Verdict::Partly,
            "better than default, not back to the unloaded frame time".to_string(),
        )
    } else {
        (
            Verdict::Not,
            "ShuffleDog's nice 3 is below the nice 0 a foreground GL thread already has, so \
             against nice-0 CPU hogs it can only lose; the paper evaluates games under GPU load \
             only"
                .to_string(),
        )
    };
    out.claims.push(Claim {
        seed: "003",
        source: "§7.1 (game, CPU load)".into(),
        claim: "a 60 fps game's GL thread under CPUGenerator, default vs ShuffleDog".into(),
        paper: "not measured for CPU load; §7.1: ShuffleDog makes apps \"as smooth as if no \
                workloads run in background\""
            .into(),
        ours: format!(
            "frame time p95 {b:.1} ms alone, {d:.1} ms default, {s:.1} ms ShuffleDog; frames over \
             16.7 ms: {} / {} / {}",
            over(&base, VSYNC),
            over(&default, VSYNC),
            over(&sd, VSYNC)
        ),
        verdict,
        reason,
    });
    Ok(())
}
