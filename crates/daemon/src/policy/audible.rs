//! The `uxsched` mode's second, lower class of foreground: the audio threads of the processes
//! playing sound (`State::audible`, `sources/audio/`). Each gets the short custom slice — EEVDF
//! then runs it first when it wakes, so the quantum's deadline is met under load — and the
//! mild `others_nice`; nothing else of its process is raised, and a thread the app in front
//! already has a setting for keeps that one (the front wins). A thread that is real-time
//! already (rtkit gave it FIFO) is left as it is by the reconciler, as every non-fair thread.

use crate::config::Config;
use crate::state::State;
use crate::types::{Desired, Target};

/// Add the audible threads' protection to `d`, below whatever `d` already holds.
pub fn protect(d: &mut Desired, state: &State, cfg: &Config) {
    for t in &state.audible {
        d.threads.entry(*t).or_insert_with(|| Target {
            nice: Some(cfg.uxsched.others_nice),
            slice_ns: Some(cfg.uxsched.slice_us * 1000),
            ..Target::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_state::{fg_state, tid};
    use super::super::{for_mode, Policy};
    use crate::config::Mode;
    use crate::state::State;
    use uxsched_os::identity::TaskId;

    fn audio(tid: i32, pid: i32) -> TaskId {
        TaskId { tid, pid, start: 9 }
    }

    #[test]
    fn audio_threads_get_the_slice_and_mild_nice_below_the_front_and_only_in_uxsched() {
        let cfg = crate::config::Config::default();
        // Without anything in front.
        let s = State {
            audible: vec![audio(201, 200)],
            ..State::default()
        };
        let d = for_mode(Mode::Uxsched).desired(&s, &cfg).bounded(&cfg);
        let a = tid(&d, 201).unwrap();
        assert_eq!((a.nice, a.slice_ns), (Some(-5), Some(100_000)));
        assert_eq!(
            (a.rt, a.group, a.autogroup_nice, a.ioprio),
            (None, None, None, None)
        );
        assert_eq!(d.threads.len(), 1, "nothing else");
        // With an app in front: its threads keep theirs, even one also listed as audible.
        let mut s = fg_state();
        s.audible = vec![audio(201, 200), s.focus.as_ref().unwrap().threads[0].task];
        let front = Policy::desired(&super::super::uxsched::Uxsched, &fg_state(), &cfg);
        let d = for_mode(Mode::Uxsched).desired(&s, &cfg);
        assert_eq!(
            tid(&d, 100),
            tid(&front, 100),
            "the UI thread keeps the front's boost"
        );
        assert_eq!(tid(&d, 201).unwrap().nice, Some(-5));
        // Other modes: unchanged.
        for m in Mode::ALL.into_iter().filter(|m| *m != Mode::Uxsched) {
            let d = for_mode(m).desired(&s, &cfg);
            assert!(tid(&d, 201).is_none(), "{m}");
        }
    }
}
