//! The byte layouts shared with the BPF program (`bpf/tracker.h`): decoding the ring buffer's
//! events and encoding the maps userspace writes. Fields are read at fixed offsets (native
//! endianness, as the kernel wrote them), so there is no `unsafe` transmute.

use serde::Serialize;

/// A thread as the kernel described it in one event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Task {
    pub tid: u32,
    pub tgid: u32,
    /// `task->start_boottime` in ns; [`Task::start_ticks`] is `/proc/<tid>/stat` field 22.
    pub start_ns: u64,
    pub comm: String,
    pub kthread: bool,
}

impl Task {
    /// The start time as `/proc/<tid>/stat` field 22 reports it: `nsec_to_clock_t` of
    /// `start_boottime` (fs/proc/array.c), clock ticks of `USER_HZ` (100 on every Linux ABI).
    pub fn start_ticks(&self) -> u64 {
        self.start_ns / (1_000_000_000 / USER_HZ)
    }
}

/// `USER_HZ`, the unit of `/proc` times (include/asm-generic/param.h).
pub const USER_HZ: u64 = 100;

/// One event of the ring buffer (`struct event`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An input waker (`None`: a device interrupt) woke `ui`, a foreground-app thread.
    Start {
        ts: u64,
        epoch: u64,
        input: Option<Task>,
        ui: Task,
    },
    /// `waker`, reached from the UI thread in this episode, woke `wakee` (first time).
    Edge {
        ts: u64,
        epoch: u64,
        waker: Task,
        wakee: Task,
    },
    /// `waker` woke a display thread: the episode's work reached the screen, maybe (the
    /// classifier decides whether it ends the episode). `family`: the waker was not reached
    /// from the UI thread but is a thread of the app's process family (a frame producer).
    Display {
        ts: u64,
        epoch: u64,
        waker: Task,
        display: Task,
        family: bool,
    },
    Fork {
        ts: u64,
        parent: Task,
        child: Task,
    },
    Exec {
        ts: u64,
        task: Task,
    },
    Exit {
        ts: u64,
        task: Task,
    },
    /// `task.comm` is the new name.
    Rename {
        ts: u64,
        task: Task,
    },
    /// `worker`, handed work by a member of its own process within the episode timeout of an
    /// input, woke `member` back (the hand-off rule, docs/tracker.md); `epoch` is the last
    /// episode's.
    Loop {
        ts: u64,
        epoch: u64,
        worker: Task,
        member: Task,
    },
}

const TASK_LEN: usize = 40;
/// `sizeof(struct event)`.
pub const EVENT_LEN: usize = 24 + 2 * TASK_LEN;
const EVF_IRQ: u32 = 1;
const EVF_FAMILY: u32 = 2;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn task_at(b: &[u8], at: usize) -> Task {
    let comm = &b[at + 16..at + 32];
    let len = comm.iter().position(|&c| c == 0).unwrap_or(comm.len());
    Task {
        tid: u32_at(b, at),
        tgid: u32_at(b, at + 4),
        start_ns: u64_at(b, at + 8),
        comm: String::from_utf8_lossy(&comm[..len]).into_owned(),
        kthread: u32_at(b, at + 32) != 0,
    }
}

/// Decode one ring-buffer record; `None` for a short record or an unknown kind.
pub fn decode(b: &[u8]) -> Option<Event> {
    if b.len() < EVENT_LEN {
        return None;
    }
    let (kind, flags, ts, epoch) = (u32_at(b, 0), u32_at(b, 4), u64_at(b, 8), u64_at(b, 16));
    let (a, bb) = (task_at(b, 24), task_at(b, 24 + TASK_LEN));
    Some(match kind {
        1 => Event::Start {
            ts,
            epoch,
            input: (flags & EVF_IRQ == 0).then_some(a),
            ui: bb,
        },
        2 => Event::Edge {
            ts,
            epoch,
            waker: a,
            wakee: bb,
        },
        3 => Event::Display {
            ts,
            epoch,
            waker: a,
            display: bb,
            family: flags & EVF_FAMILY != 0,
        },
        4 => Event::Fork {
            ts,
            parent: a,
            child: bb,
        },
        5 => Event::Exec { ts, task: a },
        6 => Event::Exit { ts, task: a },
        7 => Event::Rename { ts, task: a },
        8 => Event::Loop {
            ts,
            epoch,
            worker: a,
            member: bb,
        },
        _ => return None,
    })
}

/// `struct config`'s fields, in its order.
pub struct Config {
    pub fg_tgid: u32,
    pub irq_starts: bool,
    pub timeout_ns: u64,
    pub max_depth: u32,
    /// The episode userspace resolved: the kernel records nothing more of it.
    pub closed_epoch: u64,
}

/// `struct config`.
pub fn encode_config(c: &Config) -> Vec<u8> {
    let mut v = Vec::with_capacity(32);
    v.extend_from_slice(&c.fg_tgid.to_ne_bytes());
    v.extend_from_slice(&u32::from(c.irq_starts).to_ne_bytes());
    v.extend_from_slice(&c.timeout_ns.to_ne_bytes());
    v.extend_from_slice(&c.max_depth.to_ne_bytes());
    v.extend_from_slice(&0u32.to_ne_bytes());
    v.extend_from_slice(&c.closed_epoch.to_ne_bytes());
    v
}

/// `struct hot`'s on-CPU time, from a value of the `hot` map.
pub fn hot_ran_ns(v: &[u8]) -> Option<(u64, u64)> {
    (v.len() >= 24).then(|| (u64_at(v, 0), u64_at(v, 16)))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Encode an event as the BPF program lays it out (test helper for recorded sequences).
    pub fn encode(kind: u32, flags: u32, ts: u64, epoch: u64, a: &Task, b: &Task) -> Vec<u8> {
        let mut v = Vec::new();
        for x in [kind, flags] {
            v.extend_from_slice(&x.to_ne_bytes());
        }
        for x in [ts, epoch] {
            v.extend_from_slice(&x.to_ne_bytes());
        }
        for t in [a, b] {
            v.extend_from_slice(&t.tid.to_ne_bytes());
            v.extend_from_slice(&t.tgid.to_ne_bytes());
            v.extend_from_slice(&t.start_ns.to_ne_bytes());
            let mut comm = [0u8; 16];
            comm[..t.comm.len()].copy_from_slice(t.comm.as_bytes());
            v.extend_from_slice(&comm);
            v.extend_from_slice(&u32::from(t.kthread).to_ne_bytes());
            v.extend_from_slice(&0u32.to_ne_bytes());
        }
        v
    }

    fn task(tid: u32, comm: &str) -> Task {
        Task {
            tid,
            tgid: 100,
            start_ns: 1_234_567_890_123,
            comm: comm.into(),
            kthread: false,
        }
    }

    #[test]
    fn decodes_what_the_kernel_lays_out() {
        let (a, b) = (task(7, "Xorg"), task(101, "term"));
        let bytes = encode(1, 0, 5, 9, &a, &b);
        assert_eq!(bytes.len(), EVENT_LEN);
        let e = decode(&bytes).unwrap();
        assert_eq!(
            e,
            Event::Start {
                ts: 5,
                epoch: 9,
                input: Some(a.clone()),
                ui: b.clone()
            }
        );
        // An IRQ start has no input thread.
        let e = decode(&encode(1, EVF_IRQ, 5, 9, &a, &b)).unwrap();
        assert!(matches!(e, Event::Start { input: None, .. }));
        let e = decode(&encode(3, EVF_FAMILY, 5, 9, &b, &a)).unwrap();
        assert!(matches!(e, Event::Display { family: true, .. }));
        let e = decode(&encode(8, 0, 5, 9, &b, &a)).unwrap();
        assert!(matches!(e, Event::Loop { ref worker, .. } if worker.tid == 101));
        assert_eq!(decode(&encode(99, 0, 0, 0, &a, &b)), None);
        assert_eq!(decode(&bytes[..50]), None);
        assert_eq!(b.start_ticks(), 123_456);
    }
}
