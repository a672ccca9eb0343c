//! The block device as tasks see it: an `io` event submits one synchronous request, tagged with
//! the task's I/O priority, and blocks the task until the device has served it — so CPU and I/O
//! contention compound (seed 003 Table 8). The device serves one request at a time, picked by an
//! I/O scheduler of [`crate::io`] (`cfq` by default, `noop`); its decisions, including CFQ's
//! idle window, become engine events (`IoDone`, `IoIdle`) in the same total order as the rest.

use super::queue::Ev;
use super::{Sim, State};
use crate::io::{Decision, IoScheduler, Request};
use crate::log::Record;
use std::collections::BTreeMap;
use uxsched_model::Nanos;

/// What a completed request means.
enum Done {
    /// An `io` event: wake its task.
    Task(u32),
    /// A page-cache read of pages [first, first + count) of a file.
    Pages { file: usize, first: u64, count: u64 },
}

pub(super) struct BlockDev {
    sched: Box<dyn IoScheduler>,
    next_id: u64,
    /// What each request in the scheduler or on the device is for, by id.
    pending: BTreeMap<u64, Done>,
    /// The request being served (its `stream` is the task id).
    busy: Option<Request>,
    /// When the pending idle-window event fires, if one is pending.
    idle_until: Option<Nanos>,
}

impl BlockDev {
    pub(super) fn new(sched: Box<dyn IoScheduler>) -> Self {
        BlockDev {
            sched,
            next_id: 0,
            pending: BTreeMap::new(),
            busy: None,
            idle_until: None,
        }
    }
}

impl Sim {
    /// Task `tid` reads `service` of device time and blocks until it is done.
    pub(super) fn io_submit(&mut self, tid: u32, service: Nanos) {
        let t = &mut self.tasks[tid as usize];
        t.state = State::Blocked;
        t.work_end = self.now;
        self.submit(tid, service, Done::Task(tid));
    }

    /// Task `tid` asks for pages of a file (read-ahead); nobody blocks here — readers wait on
    /// the pages ([`super::pagecache`]).
    pub(super) fn io_submit_pages(
        &mut self,
        tid: u32,
        service: Nanos,
        file: usize,
        first: u64,
        count: u64,
    ) {
        self.submit(tid, service, Done::Pages { file, first, count });
    }

    fn submit(&mut self, tid: u32, service: Nanos, done: Done) {
        let id = self.blockdev.next_id;
        self.blockdev.next_id += 1;
        self.blockdev.pending.insert(id, done);
        let r = Request {
            id,
            stream: tid as usize,
            prio: self.tasks[tid as usize].ioprio,
            service,
            submitted: self.now,
        };
        self.blockdev.sched.add(r, self.now);
        self.io_dispatch();
    }

    /// The request in service completed: wake its task (or the page's readers) and serve the
    /// next.
    pub(super) fn io_done(&mut self) {
        let r = self
            .blockdev
            .busy
            .take()
            .expect("IoDone only fires while a request is in service");
        self.blockdev.sched.completed(&r, self.now);
        let now = self.now;
        self.emit(Record::Io {
            t: now,
            task: r.stream as u32,
            wait: now - r.submitted - r.service,
            service: r.service,
        });
        match self.blockdev.pending.remove(&r.id) {
            Some(Done::Task(tid)) => self.wake(tid, None),
            Some(Done::Pages { file, first, count }) => self.pages_read(file, first, count),
            None => unreachable!("every request is registered when submitted"),
        }
        self.io_dispatch();
    }

    /// The I/O scheduler's idle window ended: ask it again.
    pub(super) fn io_idle_over(&mut self) {
        if self.blockdev.idle_until == Some(self.now) {
            self.blockdev.idle_until = None;
        }
        self.io_dispatch();
    }

    /// If the device is free, let the scheduler serve a request or hold the device idle.
    fn io_dispatch(&mut self) {
        if self.blockdev.busy.is_some() {
            return;
        }
        let now = self.now;
        match self.blockdev.sched.next(now) {
            Decision::Serve(r) => {
                self.blockdev.busy = Some(r);
                self.queue.push(now + r.service, Ev::IoDone);
            }
            Decision::IdleUntil(t) => {
                // One pending idle event is enough unless the scheduler wants an earlier one.
                if self.blockdev.idle_until.is_none_or(|w| t < w || w <= now) {
                    self.blockdev.idle_until = Some(t);
                    self.queue.push(t, Ev::IoIdle);
                }
            }
            Decision::Nothing => {}
        }
    }
}
