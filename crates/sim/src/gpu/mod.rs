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
    let mut dev = Device {
        cfg,
        contexts,
        dispatcher,
        queues: vec![VecDeque::new(); contexts.len()],
        ring: VecDeque::new(),
        head_started: 0,
        events: BinaryHeap::new(),
        seq: 0,
        dispatch_pending: false,
        out: GpuRun::default(),
    };
    // Generators fill their queues; games submit their first frame at the first vsync.
    for (i, c) in contexts.iter().enumerate() {
        match c.source {
            Source::Generator { exec, depth } => {
                for _ in 0..depth {
                    dev.submit(i, exec, 0);
                }
            }
            Source::Frames { vsync, .. } => dev.push(vsync, Ev::Frame(i)),
        }
    }
    dev.request_dispatch(0);
    while let Some(Reverse((now, ev, _))) = dev.events.pop() {
        if now > cfg.duration {
            break;
        }
        match ev {
            Ev::Frame(i) => {
                if let Source::Frames { exec, .. } = contexts[i].source {
                    dev.submit(i, exec, now);
                }
                dev.request_dispatch(now);
            }
            Ev::Complete => dev.complete(now),
            Ev::Dispatch => dev.dispatch(now),
        }
    }
    dev.out
}

/// The device during a run: the context queues, the ring, and its own event list.
struct Device<'a> {
    cfg: &'a GpuConfig,
    contexts: &'a [Context],
    dispatcher: &'a mut dyn Dispatcher,
    queues: Vec<VecDeque<Batch>>,
    ring: VecDeque<Batch>,
    /// When the batch at the ring's head started.
    head_started: Nanos,
    /// (time, event, sequence number): equal times pop in the order they were pushed.
    events: BinaryHeap<Reverse<(Nanos, Ev, u64)>>,
    seq: u64,
    dispatch_pending: bool,
    out: GpuRun,
}

impl Device<'_> {
    fn push(&mut self, t: Nanos, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((t, ev, self.seq)));
    }

    fn submit(&mut self, ctx: usize, exec: Nanos, now: Nanos) {
        self.queues[ctx].push_back(Batch {
            ctx,
            class: self.contexts[ctx].class,
            exec,
            submitted: now,
        })
    }

    /// The driver reacts to a submission or a completion: the dispatcher runs `dispatch_delay`
    /// after `now`, unless it is already due.
    fn request_dispatch(&mut self, now: Nanos) {
        if !self.dispatch_pending {
            self.dispatch_pending = true;
            self.push(now + self.cfg.dispatch_delay, Ev::Dispatch);
        }
    }

    /// The batch at the ring's head completes: its context submits again (a generator at once,
    /// a game at the next vsync) and the next batch in the ring starts.
    fn complete(&mut self, now: Nanos) {
        let b = self.ring.pop_front().expect("a batch was running");
        self.out.done.push(Done {
            batch: b,
            started: self.head_started,
            finished: now,
        });
        self.dispatcher.completed(&b, now - self.head_started);
        match self.contexts[b.ctx].source {
            // The generator's thread refills its queue at once.
            Source::Generator { exec, .. } => self.submit(b.ctx, exec, now),
            Source::Frames { vsync, .. } => self.push((now / vsync + 1) * vsync, Ev::Frame(b.ctx)),
        }
        if let Some(next) = self.ring.front() {
            let exec = next.exec;
            self.head_started = now;
            self.push(now + exec, Ev::Complete);
        }
        self.request_dispatch(now);
    }

    /// The dispatcher fills the ring; an idle GPU starts on its head.
    fn dispatch(&mut self, now: Nanos) {
        self.dispatch_pending = false;
        let was_idle = self.ring.is_empty();
        let be = |ring: &VecDeque<Batch>| {
            ring.iter()
                .filter(|b| b.class == GpuClass::BestEffort)
                .count()
        };
        let be_before = be(&self.ring);
        let limit = self
            .dispatcher
            .fill(&mut self.queues, &mut self.ring, self.cfg.ring_capacity);
        self.out.dispatches.push(DispatchRecord {
            be_before,
            be_after: be(&self.ring),
            limit,
        });
        if was_idle {
            if let Some(b) = self.ring.front() {
                let exec = b.exec;
                self.head_started = now;
                self.push(now + exec, Ev::Complete);
            }
        }
    }
}
