//! A mobile GPU behind a KGSL-like driver (seed 003 §5.3), self-contained: its own event list.
//!
//! Each GPU context (one per thread using the GPU) has a queue of command batches. A dispatcher
//! moves batches from the context queues into the hardware ring, which holds at most
//! `ring_capacity` batches; the GPU runs the ring's batches one after another, each to
//! completion (no preemption). The dispatcher runs `dispatch_delay` after a submission or a
//! completion interrupt (the driver's kernel thread), so with one batch in flight the GPU idles
//! for that delay between batches — the "pipeline" cost that makes a larger *inflight* raise
//! background throughput (§5.3, Fig. 6). Which batches enter the ring is the [`Dispatcher`]'s
//! choice: [`dispatch::Fifo`] (stock KGSL, inflight 15) or [`dispatch::ShuffleDog`].
//!
//! Workloads are [`Context`]s: a vsync-paced game (one batch per frame, the next frame submitted
//! at the first vsync after the previous completed) or a generator that keeps `depth` batches
//! queued (GPUGenerator / GPUFilter threads).

pub mod dispatch;

pub use dispatch::{Dispatcher, Fifo, ShuffleDog};

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use uxsched_model::Nanos;

/// Scheduling class of a context (ShuffleDog's two GPU priorities).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuClass {
    /// A delay-critical thread's context.
    RealTime,
    BestEffort,
}

/// What submits a context's batches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Source {
    /// One batch of `exec` per frame; frame k+1 is submitted at the first vsync after frame k
    /// completed (a game's GL thread blocked in eglSwapBuffers).
    Frames { exec: Nanos, vsync: Nanos },
    /// Keeps `depth` batches of `exec` waiting in its queue (a GPU-bound background thread).
    Generator { exec: Nanos, depth: usize },
}

#[derive(Debug, Clone, Copy)]
pub struct Context {
    pub class: GpuClass,
    pub source: Source,
}

/// A batch as the dispatcher sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Batch {
    pub ctx: usize,
    pub class: GpuClass,
    pub exec: Nanos,
    pub submitted: Nanos,
}

/// A completed batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Done {
    pub batch: Batch,
    pub started: Nanos,
    pub finished: Nanos,
}

#[derive(Debug, Clone)]
pub struct GpuConfig {
    /// Hardware ring length (Adreno: 15).
    pub ring_capacity: usize,
    /// Driver reaction time to a submission or completion interrupt.
    pub dispatch_delay: Nanos,
    pub duration: Nanos,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// The GPU finishes the batch at the ring's head.
    Complete,
    /// The dispatcher runs.
    Dispatch,
    /// Context `usize` submits its next frame.
    Frame(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchRecord {
    pub be_before: usize,
    pub be_after: usize,
    pub limit: usize,
}

/// What one run produced.
#[derive(Debug, Clone, Default)]
pub struct GpuRun {
    /// Every completed batch, in completion order.
    pub done: Vec<Done>,
    /// Every dispatch: best-effort batches in the ring before and after it, and the limit the
    /// dispatcher declared.
    pub dispatches: Vec<DispatchRecord>,
}

impl GpuRun {
    /// Completion times of context `ctx`'s batches.
    pub fn completions(&self, ctx: usize) -> Vec<Nanos> {
        self.done
            .iter()
            .filter(|d| d.batch.ctx == ctx)
            .map(|d| d.finished)
            .collect()
    }

    /// Frame times of a vsync-paced context: intervals between consecutive completions.
    pub fn frame_times(&self, ctx: usize) -> Vec<Nanos> {
        self.completions(ctx)
            .windows(2)
            .map(|w| w[1] - w[0])
            .collect()
    }
}

/// Run contexts on the device under a dispatcher.
pub fn run(cfg: &GpuConfig, contexts: &[Context], dispatcher: &mut dyn Dispatcher) -> GpuRun {
    let mut queues: Vec<VecDeque<Batch>> = vec![VecDeque::new(); contexts.len()];
    let mut ring: VecDeque<Batch> = VecDeque::new();
    let mut head_started: Nanos = 0;
    let mut events = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |events: &mut BinaryHeap<_>, t: Nanos, ev: Ev| {
        seq += 1;
        events.push(Reverse((t, ev, seq)));
    };
    let mut out = GpuRun::default();
    let submit = |queues: &mut Vec<VecDeque<Batch>>, ctx: usize, exec, now| {
        queues[ctx].push_back(Batch {
            ctx,
            class: contexts[ctx].class,
            exec,
            submitted: now,
        })
    };
    // Generators fill their queues; games submit their first frame at the first vsync.
    for (i, c) in contexts.iter().enumerate() {
        match c.source {
            Source::Generator { exec, depth } => {
                for _ in 0..depth {
                    submit(&mut queues, i, exec, 0);
                }
            }
            Source::Frames { vsync, .. } => push(&mut events, vsync, Ev::Frame(i)),
        }
    }
    push(&mut events, cfg.dispatch_delay, Ev::Dispatch);
    let mut dispatch_pending = true;
    while let Some(Reverse((now, ev, _))) = events.pop() {
        if now > cfg.duration {
            break;
        }
        match ev {
            Ev::Frame(i) => {
                if let Source::Frames { exec, .. } = contexts[i].source {
                    submit(&mut queues, i, exec, now);
                }
                if !dispatch_pending {
                    dispatch_pending = true;
                    push(&mut events, now + cfg.dispatch_delay, Ev::Dispatch);
                }
            }
            Ev::Complete => {
                let b = ring.pop_front().expect("a batch was running");
                out.done.push(Done {
                    batch: b,
                    started: head_started,
                    finished: now,
                });
                dispatcher.completed(&b, now - head_started);
                match contexts[b.ctx].source {
                    // The generator's thread refills its queue at once.
                    Source::Generator { exec, .. } => submit(&mut queues, b.ctx, exec, now),
                    Source::Frames { vsync, .. } => {
                        push(&mut events, (now / vsync + 1) * vsync, Ev::Frame(b.ctx))
                    }
                }
                if let Some(next) = ring.front() {
                    head_started = now;
                    push(&mut events, now + next.exec, Ev::Complete);
                }
                if !dispatch_pending {
                    dispatch_pending = true;
                    push(&mut events, now + cfg.dispatch_delay, Ev::Dispatch);
                }
            }
            Ev::Dispatch => {
                dispatch_pending = false;
                let was_idle = ring.is_empty();
                let be = |ring: &VecDeque<Batch>| {
                    ring.iter()
                        .filter(|b| b.class == GpuClass::BestEffort)
                        .count()
                };
                let be_before = be(&ring);
                let limit = dispatcher.fill(&mut queues, &mut ring, cfg.ring_capacity);
                out.dispatches.push(DispatchRecord {
                    be_before,
                    be_after: be(&ring),
                    limit,
                });
                if was_idle {
                    if let Some(b) = ring.front() {
                        head_started = now;
                        push(&mut events, now + b.exec, Ev::Complete);
                    }
                }
            }
        }
    }
    out
}
