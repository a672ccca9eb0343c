//! The delay-critical thread tracker (crate `uxsched-tracker`, BPF; seed 003 §4, seed 000) as a
//! source: one thread owns the tracker, follows the daemon's focus, and sends the critical set —
//! the app's threads, partner processes' threads and kernel workers on the interaction's path —
//! whenever it changes. The tracker observes the kernel's own wake-ups, so what it names is not
//! a client's claim; the daemon still bounds what partners may get (`state.rs`).

use crate::types::Event;
use crate::types::{Critical, CriticalKind};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::time::Duration;
use tracing::{debug, info, warn};
use uxsched_os::identity::TaskId;
use uxsched_os::own::Loan;
use uxsched_tracker::{Kind, Member, Status, Tracker, TrackerConfig};

/// The longest the tracker thread sleeps without events, a focus change or an episode to time
/// out (it then only checks that the daemon is still there).
const IDLE: Duration = Duration::from_secs(1);

/// The daemon's end of the tracker thread: tell it which process is in front.
pub struct TrackerHandle {
    /// `None` once dropped: the closed channel tells the thread to stop.
    focus: Option<Sender<Option<i32>>>,
    /// Wakes the tracker thread from its wait (an eventfd).
    wake: Arc<OwnedFd>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TrackerHandle {
    pub fn set_foreground(&self, pid: Option<i32>) {
        if self.focus.as_ref().is_none_or(|f| f.send(pid).is_err()) {
            warn!("the tracker thread has stopped; roles fall back to thread names");
        }
        self.poke();
    }

    fn poke(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to an eventfd we own.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }
}

impl Drop for TrackerHandle {
    /// A stopping daemon waits for the tracker thread to stop (one pass at most): its learning
    /// store then writes the episode counts it held back (`uxsched_tracker::store`).
    fn drop(&mut self) {
        drop(self.focus.take());
        self.poke();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn eventfd() -> std::io::Result<OwnedFd> {
    // SAFETY: plain flags; a non-negative result is a new descriptor we own.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sleep until the ring buffer has events, the daemon wrote `wake`, or `timeout` passed.
fn wait(ring: i32, wake: &OwnedFd, timeout: Duration) {
    let mut fds = [
        libc::pollfd {
            fd: ring,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: two valid pollfds for the call's duration.
    unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
    if fds[1].revents != 0 {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live buffer (drains the eventfd counter).
        unsafe { libc::read(wake.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    }
}

/// Start the tracker on its own thread. `Err` says why it cannot run here (not root, no BTF,
/// lockdown, the BPF object refused); the daemon then keeps name-based roles.
/// `loan`: raise the daemon's loop while it writes new members' boosts.
pub fn spawn(
    cfg: TrackerConfig,
    events: Sender<Event>,
    loan: Loan,
) -> Result<TrackerHandle, String> {
    let (focus_tx, focus_rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::sync_channel(1);
    let wake = Arc::new(eventfd().map_err(|e| format!("cannot create an eventfd: {e}"))?);
    let woken = wake.clone();
    let thread = std::thread::Builder::new()
        .name("uxsched-tracker".into())
        .spawn(move || {
            let tracker = match Tracker::start(cfg) {
                Ok(t) => t,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return;
                }
            };
            // The tracker decides what to boost while an episode is still open: it must not
            // wait behind the load it protects (measured: p99 input → episode known 253–517 ms
            // at nice 0 under load 23–31, and 2.6 ms at nice −20 — EEVDF's lag). Raised only
            // now: loading the BPF programs is the verifier's CPU time in this thread, without
            // a blocking call — seconds under emulation, where the daemon's RLIMIT_RTTIME
            // killed it when the thread was real-time already.
            // Ready only once raised: the daemon (and `status`) then never sees the tracker
            // running at the load's priority (under 6 hogs the thread waited to raise itself).
            uxsched_os::own::raise_own("tracker thread");
            let _ = ready_tx.send(Ok(()));
            run(tracker, &focus_rx, &woken, &events, &loan);
        })
        .map_err(|e| format!("cannot start the tracker thread: {e}"))?;
    ready_rx
        .recv()
        .map_err(|_| "the tracker thread died while starting".to_owned())??;
    info!("delay-critical thread tracker running (BPF)");
    Ok(TrackerHandle {
        focus: Some(focus_tx),
        wake,
        thread: Some(thread),
    })
}

/// The thread's loop: it sleeps until the kernel sends events, the focus changes or the open
/// episode times out — never on a timer while nothing happens (a 5 ms poll cost about 2 % of a
/// CPU whatever the wake-up rate, and woke at nice −20 over the app's UI thread).
fn run(
    mut tracker: Tracker,
    focus: &Receiver<Option<i32>>,
    wake: &OwnedFd,
    events: &Sender<Event>,
    loan: &Loan,
) {
    let mut last: Vec<Critical> = Vec::new();
    // The foreground the tracker follows (None as well when it could not follow the last one).
    let mut app: Option<i32> = None;
    // Every thread the set held since the last episode resolved, and the episodes resolved.
    let mut held: Vec<Critical> = Vec::new();
    let mut resolved = 0;
    loop {
        let mut refocused = false;
        loop {
            match focus.try_recv() {
                Ok(pid) => {
                    refocused = true;
                    app = pid;
                    let r = tracker.set_foreground(pid.and_then(|p| u32::try_from(p).ok()));
                    if let Err(e) = r {
                        debug!(?pid, "tracker: cannot follow the new foreground: {e}");
                        app = None;
                        let _ = tracker.set_foreground(None);
                    }
                    held.clear();
                    resolved = tracker.episodes();
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        let started = std::time::Instant::now();
        let handled = tracker.process();
        if started.elapsed() > Duration::from_millis(1) {
            // Classifying takes µs; 2–3 ms was seen now and then (suspected: the learning
            // store's write on episode resolution; not confirmed).
            debug!(
                us = started.elapsed().as_micros() as u64,
                "tracker: slow processing"
            );
        }
        if handled || refocused {
            let set = critical_set(tracker.critical(), tracker.focused_ns());
            // Only who is in the set changes a boost (`provisional` does not): an event per
            // keystroke's provisional → confirmed flip made the daemon rescan while the app ran.
            if !same_members(&set, &last) {
                let newest = set.iter().map(|c| c.since_ns).filter(|&t| t > 0).max();
                let now = uxsched_tracker::procfs::monotonic_ns();
                debug!(
                    members = set.len(),
                    newest_age_us = newest.map(|t| now.saturating_sub(t) / 1000),
                    "tracker: critical set changed"
                );
                // A member an input brought (not one classified at the focus, which the focus
                // pass boosts) must not wait for the loop to get a CPU.
                let urgent = set
                    .iter()
                    .any(|c| c.since_ns > 0 && !last.iter().any(|o| o.task == c.task));
                loan.hand_over(urgent);
                let ev = Event::Critical {
                    app,
                    set: set.clone(),
                };
                if events.send(ev).is_err() {
                    return;
                }
                last = set;
            }
            hold(&mut held, &last);
            let now_resolved = tracker.episodes();
            if now_resolved > resolved {
                let ev = Event::Episode {
                    app,
                    held: std::mem::replace(&mut held, last.clone()),
                    resolved: now_resolved - resolved,
                };
                if events.send(ev).is_err() {
                    return;
                }
            }
            resolved = now_resolved;
        }
        // Past the open episode's deadline by a little, so that `process` resolves it.
        let timeout = tracker
            .episode_deadline()
            .map_or(IDLE, |d| (d + Duration::from_millis(1)).min(IDLE));
        wait(tracker.fd(), wake, timeout);
    }
}

/// Add the members of `set` that `held` lacks (a keystroke's provisional members, dropped
/// when its episode resolves, are counted for it).
fn hold(held: &mut Vec<Critical>, set: &[Critical]) {
    for c in set {
        if !held.iter().any(|h| h.task == c.task) {
            held.push(c.clone());
        }
    }
}

fn same_members(a: &[Critical], b: &[Critical]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.task == y.task && x.kind == y.kind)
}

/// The tracker's members as the daemon names tasks, in a stable order; those classified at
/// `focused_ns` (when the app came to the front) carry no input time.
pub fn critical_set<'a>(
    members: impl IntoIterator<Item = &'a Member>,
    focused_ns: u64,
) -> Vec<Critical> {
    let mut set: Vec<Critical> = members
        .into_iter()
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
            since_ns: if m.since_ns == focused_ns {
                0
            } else {
                m.since_ns
            },
        })
        .collect();
    set.sort_by_key(|c| c.task);
    set
}
