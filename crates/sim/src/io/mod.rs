//! A block device with an I/O scheduler (seed 003 §5.2), self-contained: its own event list.
//!
//! The device serves one request at a time (an SD card / eMMC without command queueing), each
//! for its service time. Requests are tagged with the issuing stream's ioprio (class RT / BE
//! 0–7 / idle). The scheduler picks the next request when the device is free: [`Noop`] (one
//! FIFO queue) or [`Cfq`] (classes, per-stream queues, time slices, idling). Streams are a
//! foreground app reading serially with CPU "think" time between reads, or a background job
//! keeping `depth` requests outstanding (fio).

mod cfq;

pub use cfq::Cfq;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use uxsched_model::Nanos;

/// `ioprio` class and level (`ioprio_set`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum IoPrio {
    RealTime(u8),
    BestEffort(u8),
    Idle,
}

impl IoPrio {
    /// 0 = real-time, 1 = best-effort, 2 = idle (CFQ serves lower first).
    pub fn class_rank(self) -> u8 {
        match self {
            IoPrio::RealTime(_) => 0,
            IoPrio::BestEffort(_) => 1,
            IoPrio::Idle => 2,
        }
    }

    /// Level 0–7 (idle: 7).
    pub fn level(self) -> u8 {
        match self {
            IoPrio::RealTime(l) | IoPrio::BestEffort(l) => l.min(7),
            IoPrio::Idle => 7,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IoSource {
    /// `n` reads of `service` each, one at a time, with `think` of CPU time after each.
    Serial {
        n: u64,
        service: Nanos,
        think: Nanos,
    },
    /// Keeps `depth` reads of `service` outstanding, forever.
    Stream { service: Nanos, depth: usize },
}

#[derive(Debug, Clone, Copy)]
pub struct IoStream {
    pub prio: IoPrio,
    pub source: IoSource,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub stream: usize,
    pub prio: IoPrio,
    pub service: Nanos,
    pub submitted: Nanos,
}

/// What the scheduler wants the device to do next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    Serve(Request),
    /// Keep the device idle until this time (CFQ's idle window), then ask again.
    IdleUntil(Nanos),
    Nothing,
}

pub trait IoScheduler {
    fn add(&mut self, r: Request, now: Nanos);
    /// The device is free: what next?
    fn next(&mut self, now: Nanos) -> Decision;
    /// A request of `stream` completed.
    fn completed(&mut self, _r: &Request, _now: Nanos) {}
}

/// One FIFO queue for everyone (`noop`).
#[derive(Default)]
pub struct Noop(VecDeque<Request>);

impl IoScheduler for Noop {
    fn add(&mut self, r: Request, _now: Nanos) {
        self.0.push_back(r);
    }
    fn next(&mut self, _now: Nanos) -> Decision {
        self.0
            .pop_front()
            .map_or(Decision::Nothing, Decision::Serve)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Complete,
    Submit(usize),
    Wake,
}

/// When each stream's requests completed.
#[derive(Debug, Clone, Default)]
pub struct IoRun {
    pub completions: Vec<Vec<Nanos>>,
}

impl IoRun {
    /// When a `Serial` stream finished its last read, if it did.
    pub fn finished(&self, stream: usize, n: u64) -> Option<Nanos> {
        let c = &self.completions[stream];
        (c.len() as u64 >= n).then(|| c[n as usize - 1])
    }
}

/// Run streams on the device until `duration` or until every serial stream is done.
pub fn run(streams: &[IoStream], sched: &mut dyn IoScheduler, duration: Nanos) -> IoRun {
    let mut out = IoRun {
        completions: vec![Vec::new(); streams.len()],
    };
    let mut events = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |events: &mut BinaryHeap<_>, t: Nanos, ev: Ev| {
        seq += 1;
        events.push(Reverse((t, ev, seq)));
    };
    let request = |i: usize, now| {
        let service = match streams[i].source {
            IoSource::Serial { service, .. } | IoSource::Stream { service, .. } => service,
        };
        Request {
            stream: i,
            prio: streams[i].prio,
            service,
            submitted: now,
        }
    };
    for (i, s) in streams.iter().enumerate() {
        let k = match s.source {
            IoSource::Serial { .. } => 1,
            IoSource::Stream { depth, .. } => depth,
        };
        for _ in 0..k {
            sched.add(request(i, 0), 0);
        }
    }
    let mut busy: Option<Request> = None;
    let mut wake_at: Option<Nanos> = None;
    let mut now = 0;
    loop {
        if busy.is_none() {
            match sched.next(now) {
                Decision::Serve(r) => {
                    busy = Some(r);
                    push(&mut events, now + r.service, Ev::Complete);
                }
                Decision::IdleUntil(t) if wake_at.is_none_or(|w| w > t || w <= now) => {
                    wake_at = Some(t);
                    push(&mut events, t, Ev::Wake);
                }
                _ => {}
            }
        }
        let Some(Reverse((t, ev, _))) = events.pop() else {
            break;
        };
        if t > duration {
            break;
        }
        now = t;
        match ev {
            Ev::Complete => {
                let r = busy.take().expect("a request was in service");
                out.completions[r.stream].push(now);
                sched.completed(&r, now);
                match streams[r.stream].source {
                    IoSource::Stream { .. } => sched.add(request(r.stream, now), now),
                    IoSource::Serial { n, think, .. } => {
                        if (out.completions[r.stream].len() as u64) < n {
                            push(&mut events, now + think, Ev::Submit(r.stream));
                        } else if streams.iter().enumerate().all(|(i, s)| match s.source {
                            IoSource::Serial { n, .. } => out.completions[i].len() as u64 >= n,
                            IoSource::Stream { .. } => true,
                        }) {
                            break;
                        }
                    }
                }
            }
            Ev::Submit(i) => sched.add(request(i, now), now),
            Ev::Wake => {
                if wake_at == Some(now) {
                    wake_at = None;
                }
            }
        }
    }
    out
}
