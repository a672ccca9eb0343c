//! The canary (rtkit's idea): an ordinary SCHED_OTHER thread of the daemon stamps the time every
//! `canary_period_ms`; a watchdog thread at SCHED_FIFO 99 — above every grant, whose priorities
//! stop at 98 — checks the stamp. If ordinary threads have not run for `canary_timeout_ms`, real
//! time is starving the machine: the watchdog puts every RT thread uxsched granted back to its
//! journalled original itself (the daemon's loop is an ordinary thread too and may be starved),
//! logs one line, and tells the loop, which drops the grants and refuses RT for a while.

use crate::types::Event;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::warn;
use uxsched_os::identity::{self, TaskId};
use uxsched_os::sched::{self, SchedAttr};

/// The watchdog's priority: above every grant (`max_rt_priority` ≤ 98).
pub const WATCHDOG_PRIORITY: u32 = 99;

/// The RT threads uxsched holds now, each with the attributes to put back.
pub type Held = Arc<Mutex<Vec<(TaskId, SchedAttr)>>>;

pub struct Canary {
    /// What the watchdog demotes when the canary starves (updated after every pass).
    pub held: Held,
}

/// Start the canary and its watchdog.
pub fn spawn(
    period: Duration,
    timeout: Duration,
    events: Sender<Event>,
) -> std::io::Result<Canary> {
    let base = Instant::now();
    let stamp = Arc::new(AtomicU64::new(0));
    let held: Held = Arc::default();
    let ms = move || base.elapsed().as_millis() as u64;
    let s = stamp.clone();
    std::thread::Builder::new()
        .name("uxsched-canary".into())
        .spawn(move || {
            // Whatever the daemon was started with (even SCHED_IDLE): the canary stands for
            // ordinary threads.
            let _ = sched::set(0, &SchedAttr::ordinary());
            loop {
                s.store(ms(), Ordering::Relaxed);
                std::thread::sleep(period);
            }
        })?;
    let h = held.clone();
    std::thread::Builder::new()
        .name("uxsched-watchdog".into())
        .spawn(move || {
            let mut rt = SchedAttr::ordinary();
            rt.policy = sched::SCHED_FIFO;
            rt.priority = WATCHDOG_PRIORITY;
            rt.flags = sched::SCHED_FLAG_RESET_ON_FORK;
            if let Err(e) = sched::set(0, &rt) {
                warn!(
                    "the canary's watchdog cannot run at SCHED_FIFO {WATCHDOG_PRIORITY} ({e}); \
                     it may itself be starved by real-time grants — run the daemon as root, \
                     without RestrictRealtime= and, where RT group scheduling is on, in the \
                     root cgroup"
                );
            }
            loop {
                std::thread::sleep(period);
                let silent = ms().saturating_sub(stamp.load(Ordering::Relaxed));
                if silent <= timeout.as_millis() as u64 {
                    continue;
                }
                let revoked = demote(&h);
                warn!(
                    "canary: ordinary threads could not run for {silent} ms (limit {} ms); \
                     revoked {revoked} real-time grant(s) and refusing new ones for a while",
                    timeout.as_millis()
                );
                stamp.store(ms(), Ordering::Relaxed);
                if events.send(Event::Canary).is_err() {
                    return;
                }
            }
        })?;
    Ok(Canary { held })
}

/// Put every held RT thread that is still the same task and still RT back to its original.
fn demote(held: &Held) -> usize {
    let held = std::mem::take(&mut *held.lock().unwrap_or_else(|e| e.into_inner()));
    held.iter()
        .filter(|(task, _)| identity::still_same(task))
        .filter(|(task, _)| sched::get(task.tid).is_ok_and(|a| a.is_rt()))
        .filter(|(task, original)| sched::set(task.tid, original).is_ok())
        .count()
}
