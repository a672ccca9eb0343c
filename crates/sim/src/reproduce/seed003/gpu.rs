//! Seed 003's GPU scheduler on the self-contained device of [`crate::gpu`]: the inflight sweep
//! (Fig. 6) and OpenFlappyBird / SystemUI against GPUGenerator and GPUFilter (Table 7c).

use super::VSYNC;
use crate::gpu::{self, Context, Dispatcher, Fifo, GpuClass, GpuConfig, ShuffleDog, Source};
use crate::reproduce::{Claim, Figure, FigureKind, Outcome, Series, Verdict};
use uxsched_model::formulas::adaptive_inflight;
use uxsched_model::{Nanos, MS};

/// The GPU device of the experiments: Adreno's 15-entry ring, a 1 ms driver reaction.
fn gpu_config(duration: Nanos) -> GpuConfig {
    GpuConfig {
        ring_capacity: 15,
        dispatch_delay: MS,
        duration,
    }
}

/// OpenFlappyBird: one light batch per frame (3 ms), vsync-paced; the GL thread is
/// delay-critical (real-time class under ShuffleDog).
fn game() -> Context {
    Context {
        class: GpuClass::RealTime,
        source: Source::Frames {
            exec: 3 * MS,
            vsync: VSYNC,
        },
    }
}

/// A GPU-bound thread submits far faster than the GPU drains, so its context queue stays at
/// KGSL's per-context limit (`_context_drawqueue_size`, 50).
const CONTEXT_QUEUE: usize = 50;

/// GPUGenerator: one thread drawing triangles, batches of `exec`.
fn gpu_generator(exec: Nanos) -> Vec<Context> {
    vec![Context {
        class: GpuClass::BestEffort,
        source: Source::Generator {
            exec,
            depth: CONTEXT_QUEUE,
        },
    }]
}

/// GPUFilter: image processing in 5 threads (Table 2); short 2 ms kernels.
fn gpu_filter() -> Vec<Context> {
    (0..5)
        .map(|_| Context {
            class: GpuClass::BestEffort,
            source: Source::Generator {
                exec: 2 * MS,
                depth: CONTEXT_QUEUE,
            },
        })
        .collect()
}

/// (mean frame time of the game in ms, background ms per batch) of one GPU run.
fn gpu_point(bg: &[Context], dispatcher: &mut dyn Dispatcher, duration: Nanos) -> (f64, f64) {
    let mut ctxs = vec![game()];
    ctxs.extend_from_slice(bg);
    let run = gpu::run(&gpu_config(duration), &ctxs, dispatcher);
    let frames = run.frame_times(0);
    let fg = frames.iter().sum::<Nanos>() as f64 / frames.len().max(1) as f64 / 1e6;
    let be = run.done.iter().filter(|d| d.batch.ctx > 0).count();
    let per_batch = if be == 0 {
        f64::INFINITY
    } else {
        duration as f64 / be as f64 / 1e6
    };
    (fg, per_batch)
}

/// One Fig. 6 panel's result: (batch ms, the trade-off inflight, the game's frame time (ms) at
/// inflight 1 and at 15).
type Knee = (u64, f64, f64, f64);

/// Fig. 6: the game's frame time and the background's speed as FIFO's inflight goes 1…15.
pub(super) fn fig6(dur: Nanos, out: &mut Outcome) {
    let mut knees = Vec::new();
    let mut bg_series = Vec::new();
    for (panel, exec_ms) in [("a", 7u64), ("b", 4u64)] {
        let (knee, bg) = fig6_panel(panel, exec_ms, dur, out);
        knees.push(knee);
        bg_series.push(bg);
    }
    out.figures.push(Figure {
        file: "seed003-fig6-background".into(),
        title: "Seed 003 Fig. 6: background time per batch vs inflight (FIFO)".into(),
        x_label: "inflight".into(),
        y_label: "background ms per completed batch".into(),
        kind: FigureKind::Lines,
        categories: vec![],
        series: bg_series,
    });
    fig6_claims(&knees, out);
}

/// One panel (background batches of `exec_ms`): pushes its figure of the game's frame time and
/// returns its knee and the background's series.
fn fig6_panel(panel: &str, exec_ms: u64, dur: Nanos, out: &mut Outcome) -> (Knee, Series) {
    let points: Vec<(f64, f64, f64)> = (1..=15)
        .map(|inflight| {
            let (fg, bg) = gpu_point(&gpu_generator(exec_ms * MS), &mut Fifo::new(inflight), dur);
            (inflight as f64, fg, bg)
        })
        .collect();
    let best_bg = points.iter().map(|p| p.2).fold(f64::INFINITY, f64::min);
    // The trade-off point: the smallest inflight within 2 % of the best background speed.
    let knee = points
        .iter()
        .find(|p| p.2 <= best_bg * 1.02)
        .map_or(15.0, |p| p.0);
    out.figures.push(Figure {
        file: format!("seed003-fig6{panel}"),
        title: format!("Seed 003 Fig. 6{panel}: game frame time vs inflight, background batches of {exec_ms} ms (FIFO)"),
        x_label: "inflight".into(),
        y_label: "foreground frame time (ms)".into(),
        kind: FigureKind::Lines,
        categories: vec![],
        series: vec![Series {
            name: "OpenFlappyBird-like".into(),
            points: points.iter().map(|p| (p.0, p.1)).collect(),
        }],
    });
    let bg = Series {
        name: format!("GPUGenerator {exec_ms} ms batches"),
        points: points.iter().map(|p| (p.0, p.2)).collect(),
    };
    ((exec_ms, knee, points[0].1, points[14].1), bg)
}

/// Fig. 6's claims: the frame time grows with inflight, and the knee follows eq. 1.
fn fig6_claims(knees: &[Knee], out: &mut Outcome) {
    let grows = knees.iter().all(|k| k.3 > k.2 * 2.0);
    out.claims.push(Claim {
        seed: "003",
        source: "Fig. 6".into(),
        claim: "a larger inflight lengthens the foreground frame time".into(),
        paper: "foreground latency grows with inflight 1…15 for 7 ms and 4 ms batches".into(),
        ours: knees
            .iter()
            .map(|k| {
                format!(
                    "{} ms batches: {:.1} ms at 1 → {:.1} ms at 15",
                    k.0, k.2, k.3
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
        verdict: if grows {
            Verdict::Reproduced
        } else {
            Verdict::Not
        },
        reason: if grows {
            "a non-preemptive ring makes the game's batch wait behind every batch in it".into()
        } else {
            "frame time did not grow with inflight".into()
        },
    });
    let matches = knees
        .iter()
        .filter(|k| k.1 as u32 == adaptive_inflight(k.0 * MS))
        .count();
    out.claims.push(Claim {
        seed: "003",
        source: "Fig. 6".into(),
        claim: "the trade-off inflight depends on the batch time (eq. 1)".into(),
        paper: "optimum 2 for 7 ms batches, 4 for 4 ms (= ⌊16.7 / x⌋)".into(),
        ours: knees
            .iter()
            .map(|k| format!("{} ms: background saturates at inflight {}", k.0, k.1))
            .collect::<Vec<_>>()
            .join("; "),
        verdict: match matches {
            2 => Verdict::Reproduced,
            1 => Verdict::Partly,
            _ => Verdict::Not,
        },
        reason: format!(
            "eq. 1 gives {}; with the game sharing the ring, our background speed keeps rising \
             until the game's frames are slowed enough to leave it the GPU — the device's only \
             pipelining cost is the 1 ms driver reaction between batches; the paper's GPU \
             pipeline is not modelled",
            knees
                .iter()
                .map(|k| format!("{} for {} ms", adaptive_inflight(k.0 * MS), k.0))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    });
}

pub(super) fn table7c(dur: Nanos, out: &mut Outcome) {
    let (base, _) = gpu_point(&[], &mut Fifo::new(15), dur);
    for (name, bg, paper) in [
        (
            "GPUGenerator",
            gpu_generator(7 * MS),
            "16.7 → 74.6 ms default (4.47×), 16.7 ms ShuffleDog; back 44 → 47 ms",
        ),
        (
            "GPUFilter",
            gpu_filter(),
            "16.7 → 32.7 ms default (1.96×), 16.7 ms ShuffleDog; back 65 → 67 ms",
        ),
    ] {
        let (fd, bd) = gpu_point(&bg, &mut Fifo::new(15), dur);
        let (fs, bs) = gpu_point(&bg, &mut ShuffleDog::default(), dur);
        let reproduced = fd > base * 1.5 && fs < base * 1.2;
        out.claims.push(Claim {
            seed: "003",
            source: "Table 7c".into(),
            claim: format!("OpenFlappyBird frame time with {name}, default (FIFO, inflight 15) vs ShuffleDog"),
            paper: paper.into(),
            ours: format!(
                "{base:.1} → {fd:.1} ms default ({:.2}×), {fs:.1} ms ShuffleDog ({:.2}×); back {bd:.1} → {bs:.1} ms per batch",
                fd / base,
                fs / base
            ),
            verdict: if reproduced { Verdict::Reproduced } else if fs < fd { Verdict::Partly } else { Verdict::Not },
            reason: if reproduced {
                "RT-first dispatch with eq. 1's inflight bounds the wait behind best-effort batches".into()
            } else {
                "ShuffleDog's frame time is not back near the baseline".into()
            },
        });
    }
}
