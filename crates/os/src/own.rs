//! The daemon's own scheduling: its tracker thread at a low real-time priority, and the loan of
//! that priority to the daemon's loop while it hands a keystroke's new critical threads their
//! boosts. Measurements behind these choices: docs/results/ (the fast path).

use crate::sched::{set, SchedAttr, SCHED_FIFO, SCHED_FLAG_RESET_ON_FORK, SCHED_OTHER};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The daemon's tracker thread: above the load, below the chain it finds (the daemon's `rt`
/// lever uses priority 2, above this one).
pub const OWN_RT_PRIORITY: u32 = 1;

/// Put the calling thread — the tracker's — at SCHED_FIFO [`OWN_RT_PRIORITY`],
/// above the load and below the critical set it finds, never inherited by what it forks; where
/// real time is refused (no CAP_SYS_NICE, `RestrictRealtime=`, a cgroup without RT runtime),
/// the loop's own attributes ([`own_fair`]: nice −20) and a warning naming `who`.
/// In the fair class, even at nice −20, a thread that slept with negative lag wakes ineligible
/// under EEVDF, and a keystroke's new members would wait for it behind the load. Below the set,
/// a chain thread that wakes where it runs preempts it and stays on its warm CPU. The loop
/// itself stays at nice −20 except while it holds a [`Loan`]: a loop kept at SCHED_FIFO raised
/// an app's p95 (docs/results/README.md, the fast path).
pub fn raise_own(who: &str) {
    let Err(e) = set(0, &own_fifo()) else {
        return;
    };
    tracing::warn!(
        "{who}: cannot run at SCHED_FIFO {} ({e}); at nice -20 instead, where boosts may \
         wait behind the load",
        OWN_RT_PRIORITY
    );
    if let Err(e) = set(0, &own_fair()) {
        tracing::warn!("{who}: cannot raise itself to nice -20 either ({e})");
    }
}

/// The tracker's thread lends its real-time priority to the daemon's loop for its hand-overs:
/// a keystroke's new critical threads wait for the loop to write their boosts, and at nice −20
/// the loop waits behind the load (EEVDF's lag, as for the tracker's thread). Lent only for the
/// fast path: the loop pays it back once no hand-over is waiting, and always before a full pass
/// or the restore at shutdown (see [`raise_own`] for why the loop is not kept real-time).
#[derive(Debug, Clone)]
pub struct Loan {
    loop_tid: i32,
    state: std::sync::Arc<LoanState>,
}

#[derive(Debug, Default)]
struct LoanState {
    /// The loop was raised and has not paid back yet.
    raised: AtomicBool,
    /// Hand-overs sent by the tracker's thread, and handled by the loop.
    sent: AtomicU64,
    handled: AtomicU64,
}

impl Loan {
    /// A loan to the calling thread: the daemon's loop.
    pub fn to_this_thread() -> Loan {
        Loan {
            // SAFETY: gettid has no preconditions.
            loop_tid: unsafe { libc::gettid() },
            state: Default::default(),
        }
    }

    /// The lender's side, before each hand-over is sent: count it and, when it is `urgent`,
    /// raise the loop. Counted first, so a loop that looks between the two keeps the loan for
    /// this hand-over; the flag is set after the raise, so a repayment never misses it.
    pub fn hand_over(&self, urgent: bool) {
        self.state.sent.fetch_add(1, Ordering::AcqRel);
        if !urgent {
            return;
        }
        match set(self.loop_tid, &own_fifo()) {
            Ok(()) => self.state.raised.store(true, Ordering::Release),
            Err(e) => tracing::debug!("cannot lend the loop real time: {e}"),
        }
    }

    /// The loop's side: one hand-over received.
    pub fn received(&self) {
        self.state.handled.fetch_add(1, Ordering::AcqRel);
    }

    /// The loop's side, after each event: pay back unless another hand-over is on its way (a
    /// keystroke's second set often follows the first within microseconds).
    pub fn repay_when_idle(&self) {
        let s = &self.state;
        if s.sent.load(Ordering::Acquire) == s.handled.load(Ordering::Acquire) {
            self.repay();
        }
    }

    /// The loop's side, before a pass or shutdown: back to nice −20 if a loan is out.
    pub fn repay(&self) {
        if !self.state.raised.swap(false, Ordering::AcqRel) {
            return;
        }
        match set(0, &own_fair()) {
            Ok(()) => tracing::debug!("loop: the tracker's loan of real time repaid"),
            Err(e) => tracing::warn!(
                "the daemon's loop cannot return to nice -20 ({e}); it stays real-time"
            ),
        }
    }
}

/// The loop's own attributes: the fair class's top, not inherited by what it forks.
pub fn own_fair() -> SchedAttr {
    SchedAttr {
        policy: SCHED_OTHER,
        flags: SCHED_FLAG_RESET_ON_FORK,
        nice: -20,
        priority: 0,
        runtime: 0,
        deadline: 0,
        period: 0,
        uclamp: None,
    }
}

fn own_fifo() -> SchedAttr {
    SchedAttr {
        policy: SCHED_FIFO,
        flags: SCHED_FLAG_RESET_ON_FORK,
        nice: 0,
        priority: OWN_RT_PRIORITY,
        runtime: 0,
        deadline: 0,
        period: 0,
        uclamp: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::{get, SCHED_FIFO};
    use std::sync::mpsc;

    /// What the loop's thread is told to do.
    enum Step {
        Received,
        RepayWhenIdle,
        Repay,
    }

    #[test]
    #[ignore = "needs root (SCHED_FIFO): make test runs it"]
    fn a_loan_lasts_until_every_hand_over_is_handled_or_a_pass_comes() {
        let (loan_tx, loan_rx) = mpsc::channel();
        let (step_tx, step_rx) = mpsc::channel::<Step>();
        let (done_tx, done_rx) = mpsc::channel();
        let borrower = std::thread::spawn(move || {
            set(0, &own_fair()).unwrap();
            let loan = Loan::to_this_thread();
            // SAFETY: gettid has no preconditions.
            loan_tx
                .send((loan.clone(), unsafe { libc::gettid() }))
                .unwrap();
            for step in step_rx {
                match step {
                    Step::Received => loan.received(),
                    Step::RepayWhenIdle => loan.repay_when_idle(),
                    Step::Repay => loan.repay(),
                }
                done_tx.send(()).unwrap();
            }
        });
        let (loan, tid) = loan_rx.recv().unwrap();
        let run = |s: Step| {
            step_tx.send(s).unwrap();
            done_rx.recv().unwrap();
        };
        let class = || get(tid).map(|a| (a.policy, a.priority, a.nice)).unwrap();
        let fifo = (SCHED_FIFO, OWN_RT_PRIORITY, 0);
        let fair = (SCHED_OTHER, 0, -20);
        assert_eq!(class(), fair);
        // Two hand-overs, the first urgent: real time until the loop has handled both.
        loan.hand_over(true);
        loan.hand_over(false);
        assert_eq!(class(), fifo);
        run(Step::Received);
        run(Step::RepayWhenIdle);
        assert_eq!(class(), fifo, "one hand-over is still on its way");
        run(Step::Received);
        run(Step::RepayWhenIdle);
        assert_eq!(class(), fair);
        // A pass pays back at once, whatever is on its way.
        loan.hand_over(true);
        assert_eq!(class(), fifo);
        run(Step::Repay);
        assert_eq!(class(), fair);
        // A hand-over that is not urgent lends nothing.
        loan.hand_over(false);
        run(Step::Received);
        run(Step::RepayWhenIdle);
        assert_eq!(class(), fair);
        drop(step_tx);
        borrower.join().unwrap();
    }
}
