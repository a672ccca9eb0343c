//! Seed 003's I/O scheduler on the engine's block device: a reading app against IOGenerator
//! (Table 7b), and the RAR case study with IOGenerator and CPUGenerator together, each manager
//! alone and both (Table 8) — where CPU and I/O contention compound: a reader starved of CPU
//! comes back too late for CFQ's idle window, so it also loses the disk.

use super::cpu::app_with_load;
use super::{fmt_latency, latency, task, Managers, ANDROID, BOTH, CPU_ONLY, IO_ONLY};
use crate::mechanism::shuffledog_cpu::DELAY_CRITICAL_NICE;
use crate::mechanism::tracker::Tracker;
use crate::reproduce::{Claim, Ctx, Outcome, Verdict};
use crate::workload::{Event, Phase, TaskSpec, Workload};
use uxsched_model::{Nanos, MS, SEC, US};

/// Device time of one of the app's reads.
const READ: Nanos = MS;
/// CPU time the app spends on each chunk it read.
const THINK: Nanos = 2 * MS;
/// Device time of one of fio's 4 KiB random reads.
const FIO_READ: Nanos = 4 * MS;

pub(super) const NOTE: &str = "I/O (Tables 7b, 8): the engine's block device serves one request \
    at a time under CFQ (slice_sync 100 ms, slice_idle 8 ms, RT before BE before idle). The app: \
    its UI thread hands the job to an AsyncTask (nice 10, delay-critical), which reads chunks of \
    1 ms device time with 2 ms of CPU after each (ImageViewFlipper-like: 300 chunks, 900 ms \
    alone; RAR: 1,300 chunks, 3.9 s alone as the paper's baseline) and posts back. IOGenerator = \
    fio randread, 2 jobs (nice-0 threads) of synchronous 4 ms reads with 50 µs of CPU each; \
    CPUGenerator as in Table 7a. Android: every request carries the FUSE daemon's priority \
    (best-effort 4) and nice ≥ 10 threads run in the 52-share group; ShuffleDog's I/O manager \
    puts delay-critical threads' requests in the real-time class, its CPU manager as in Table 7a; \
    the Thread Tracker variant applies both to the threads it learned in a first launch.";

/// The reading app: `chunks` × (read, think) in its AsyncTask, one interaction from the tap
/// to the result.
fn reading_app(name: &str, chunks: u64) -> Vec<TaskSpec> {
    let ui = task(
        &format!("{name}.ui"),
        0,
        &["ui", "delay-critical"],
        vec![
            Event::Sleep(100 * MS),
            Event::Begin("job".into()),
            Event::Send(format!("{name}.job")),
            Event::Recv(format!("{name}.done")),
            Event::End("job".into()),
        ],
    );
    let mut worker = task(
        &format!("{name}.asynctask"),
        10,
        &["delay-critical"],
        vec![],
    );
    let phase = |n: &str, loops: u64, events: Vec<Event>| Phase {
        name: n.into(),
        loops,
        events,
        affinity: None,
    };
    worker.phases = vec![
        phase("wait", 1, vec![Event::Recv(format!("{name}.job"))]),
        phase("read", chunks, vec![Event::Io(READ), Event::Run(THINK)]),
        phase("post", 1, vec![Event::Send(format!("{name}.done"))]),
    ];
    vec![ui, worker]
}

/// The app on the 4-CPU phone with the chosen background loads.
fn with_loads(name: &str, app: Vec<TaskSpec>, iogen: bool, cpugen: bool) -> Workload {
    let mut w = app_with_load(name, app, cpugen);
    if iogen {
        for i in 0..2 {
            let mut t = task(
                &format!("iogen.{i}"),
                0,
                &["background"],
                vec![Event::Run(50 * US), Event::Io(FIO_READ)],
            );
            t.process = "iogenerator".into();
            t.loops = None;
            w.tasks.push(t);
        }
    }
    w
}

/// Latencies of one app: alone, then under the loads with each set of managers.
fn measure(
    ctx: &Ctx,
    name: &str,
    chunks: u64,
    cpugen: bool,
    managers: &[Managers],
    limit: Nanos,
) -> Result<(Nanos, Vec<Option<Nanos>>), String> {
    let app = || reading_app(name, chunks);
    let base = latency(
        with_loads(name, app(), false, false),
        ANDROID,
        None,
        ctx.seed,
        limit,
    )?
    .ok_or_else(|| format!("seed 003: {name} did not finish on an idle system"))?;
    let loaded = managers
        .iter()
        .map(|&m| {
            latency(
                with_loads(name, app(), true, cpugen),
                m,
                None,
                ctx.seed,
                limit,
            )
        })
        .collect::<Result<_, _>>()?;
    Ok((base, loaded))
}

/// Table 7b: an ImageViewFlipper-like reader against IOGenerator, default vs the I/O manager.
pub(super) fn table7b(ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let limit = 60 * SEC;
    let (base, l) = measure(ctx, "viewer", 300, false, &[ANDROID, IO_ONLY], limit)?;
    let b = base as f64;
    let ratio = |l: Option<Nanos>| l.unwrap_or(limit) as f64 / b;
    let (rd, rs) = (ratio(l[0]), ratio(l[1]));
    let (verdict, reason) = if rd >= 1.3 && rs <= 1.1 {
        (
            Verdict::Reproduced,
            "the real-time class is served first and keeps CFQ's idle window for the reader",
        )
    } else if rs < rd {
        (
            Verdict::Partly,
            "ShuffleDog helps, not back to the baseline",
        )
    } else {
        (Verdict::Not, "no improvement")
    };
    out.claims.push(Claim {
        seed: "003",
        source: "Table 7b".into(),
        claim: "foreground reads with IOGenerator, default CFQ vs ShuffleDog (RT ioprio)".into(),
        paper: "ImageViewFlipper 878 → 1,365 ms (1.55×) default, 897 ms (1.02×) ShuffleDog; \
                WeChat 2.08× → 1.05×; RAR 1.51× → 1.00×"
            .into(),
        ours: format!(
            "{} → {} ({rd:.2}×) default, {} ({rs:.2}×) ShuffleDog",
            fmt_latency(Some(base), limit),
            fmt_latency(l[0], limit),
            fmt_latency(l[1], limit),
        ),
        verdict,
        reason: reason.into(),
    });
    Ok(())
}

/// Table 8: RAR with IOGenerator and CPUGenerator, no manager / CPU / I/O / both.
pub(super) fn table8(ctx: &Ctx, out: &mut Outcome) -> Result<(), String> {
    let limit = if ctx.quick { 60 * SEC } else { 120 * SEC };
    let (base, l) = measure(
        ctx,
        "rar",
        1300,
        true,
        &[ANDROID, CPU_ONLY, IO_ONLY, BOTH],
        limit,
    )?;
    // Both managers fed by the Thread Tracker: the first launch learns the AsyncTask when it
    // posts back; a relaunch applies what it learned from the tap on.
    let rar = || with_loads("rar", reading_app("rar", 1300), true, true);
    let first = Tracker::new(DELAY_CRITICAL_NICE);
    let learned = first.findings();
    latency(rar(), ANDROID, Some(first), ctx.seed, limit)?;
    let learned = learned.lock().map_err(|e| e.to_string())?.clone();
    let relaunch = Tracker::with_learned(DELAY_CRITICAL_NICE, learned);
    let tracked = latency(rar(), ANDROID, Some(relaunch), ctx.seed, limit)?;
    let b = base as f64;
    let r: Vec<f64> = l.iter().map(|l| l.unwrap_or(limit) as f64 / b).collect();
    let (none, cpu, io, both) = (r[0], r[1], r[2], r[3]);
    let ordered = both < cpu && cpu < io && io <= none;
    let (verdict, reason) = if ordered && none >= 5.0 && both <= 1.3 {
        (
            Verdict::Reproduced,
            "contention compounds: CPU starvation stretches the reader's think time past CFQ's \
             idle window, so it also waits behind fio's slices; only both managers remove both"
                .to_string(),
        )
    } else if ordered {
        (
            Verdict::Partly,
            format!(
                "the paper's order (both < CPU < I/O < none) holds, sizes differ \
                 ({none:.1}× / {cpu:.1}× / {io:.1}× / {both:.1}×)"
            ),
        )
    } else {
        (
            Verdict::Not,
            format!(
                "the paper's order does not hold ({none:.1}× / {cpu:.1}× / {io:.1}× / {both:.1}×)"
            ),
        )
    };
    let shown: Vec<String> = l
        .iter()
        .zip(&r)
        .map(|(l, r)| format!("{} ({r:.1}×)", fmt_latency(*l, limit)))
        .collect();
    out.claims.push(Claim {
        seed: "003",
        source: "Table 8".into(),
        claim: "RAR with IOGenerator + CPUGenerator: no manager, CPU, I/O, both".into(),
        paper: "3.9 s alone; 43.0 s (11.0×) none, 7.1 s (1.8×) CPU, 37.1 s (9.5×) I/O, 4.3 s \
                (1.1×) CPU + I/O"
            .into(),
        ours: format!(
            "{} alone; {} none, {} CPU, {} I/O, {} CPU + I/O; CPU + I/O from the Thread \
             Tracker (relaunch): {} ({:.1}×)",
            fmt_latency(Some(base), limit),
            shown[0],
            shown[1],
            shown[2],
            shown[3],
            fmt_latency(tracked, limit),
            tracked.unwrap_or(limit) as f64 / b
        ),
        verdict,
        reason,
    });
    Ok(())
}
