//! The delay-critical thread tracker (crate `uxsched-tracker`, BPF; seed 003 §4, seed 000) as a
//! source: one thread owns the tracker, follows the daemon's focus, and sends the critical set —
//! the app's threads, partner processes' threads and kernel workers on the interaction's path —
//! whenever it changes. The tracker observes the kernel's own wake-ups, so what it names is not
//! a client's claim; the daemon still bounds what partners may get (`state.rs`).

use super::Event;
use crate::identity::TaskId;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::time::Duration;
use tracing::{debug, info, warn};
use uxsched_tracker::{Kind, Snapshot, Status, Tracker, TrackerConfig};

/// How long one poll of the tracker's ring buffer waits for events.
const POLL: Duration = Duration::from_millis(5);

/// Whose thread a critical thread is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CriticalKind {
    App,
    Partner,
    KernelWorker,
}

/// One thread of the critical set, as the daemon uses it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Critical {
    pub task: TaskId,
    pub comm: String,
    pub kind: CriticalKind,
    /// Woken on the current episode's path; kept or dropped when the episode resolves.
    pub provisional: bool,
}

/// The daemon's end of the tracker thread: tell it which process is in front.
pub struct TrackerHandle {
    focus: Sender<Option<i32>>,
}

impl TrackerHandle {
    pub fn set_foreground(&self, pid: Option<i32>) {
        if self.focus.send(pid).is_err() {
            warn!("the tracker thread has stopped; roles fall back to thread names");
        }
    }
}

/// Start the tracker on its own thread. `Err` says why it cannot run here (not root, no BTF,
/// lockdown, the BPF object refused); the daemon then keeps name-based roles.
pub fn spawn(cfg: TrackerConfig, events: Sender<Event>) -> Result<TrackerHandle, String> {
    let (focus_tx, focus_rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("uxsched-tracker".into())
        .spawn(move || {
            // The tracker decides what to boost while an episode is still open: it must not
            // wait behind the load it protects (measured: p99 input → episode known 253–517 ms
            // at nice 0 under load 23–31). Nice −20 is the fair class's top, never real-time.
            // SAFETY: setpriority on this thread's own tid.
            if unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -20) }
                != 0
            {
                warn!(
                    "tracker thread: cannot raise itself to nice -20: {}",
                    std::io::Error::last_os_error()
                );
            }
            let tracker = match Tracker::start(cfg) {
                Ok(t) => {
                    let _ = ready_tx.send(Ok(()));
                    t
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return;
                }
            };
            run(tracker, &focus_rx, &events);
        })
        .map_err(|e| format!("cannot start the tracker thread: {e}"))?;
    ready_rx
        .recv()
        .map_err(|_| "the tracker thread died while starting".to_owned())??;
    info!("delay-critical thread tracker running (BPF)");
    Ok(TrackerHandle { focus: focus_tx })
}

fn run(mut tracker: Tracker, focus: &Receiver<Option<i32>>, events: &Sender<Event>) {
    let mut last: Vec<Critical> = Vec::new();
    loop {
        loop {
            match focus.try_recv() {
                Ok(pid) => {
                    let r = tracker.set_foreground(pid.and_then(|p| u32::try_from(p).ok()));
                    if let Err(e) = r {
                        debug!(?pid, "tracker: cannot follow the new foreground: {e}");
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        let set = critical_set(&tracker.poll(POLL));
        // Only who is in the set changes a boost (`provisional` does not): an event per
        // keystroke's provisional → confirmed flip made the daemon rescan while the app ran.
        if !same_members(&set, &last) {
            if events.send(Event::Critical(set.clone())).is_err() {
                return;
            }
            last = set;
        }
    }
}

fn same_members(a: &[Critical], b: &[Critical]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.task == y.task && x.kind == y.kind)
}

/// The snapshot's members as the daemon names tasks, in a stable order.
pub fn critical_set(s: &Snapshot) -> Vec<Critical> {
    let mut set: Vec<Critical> = s
        .critical
        .iter()
        .map(|m| Critical {
            task: TaskId {
                tid: m.id.tid,
                pid: m.id.tgid,
                start: m.id.start,
            },
            comm: m.comm.clone(),
            kind: match m.kind {
                Kind::App => CriticalKind::App,
                Kind::Partner => CriticalKind::Partner,
                Kind::KernelWorker => CriticalKind::KernelWorker,
            },
            provisional: m.status == Status::Provisional,
        })
        .collect();
    set.sort_by_key(|c| c.task);
    set
}
