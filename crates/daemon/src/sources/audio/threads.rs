//! Which threads of a process playing sound carry its audio: those the `uxsched` mode protects.
//!
//! A libpipewire client runs its stream in a data-loop thread woken once per quantum (21 ms at
//! 1024 frames and 48 kHz, less at lower latency); a late wake-up is an audible gap. PipeWire
//! 1.2 and later name those threads `data-loop.<n>`. Older libpipewire (Debian 12's 0.3.65)
//! names none: the data loop keeps the name of the thread that started it, the process's own
//! name for `pw-play` (`ps -L` shows `pw-play` twice). For those, the one thread besides the
//! main one that still carries the process's name is taken, and only where it is the only such
//! thread: in a process with several unnamed threads, which one plays cannot be told from
//! `/proc`, and none is raised rather than all of them.

use uxsched_os::identity::{self, TaskId};

/// The audio threads of process `pid` (started at `start`) now: see the module's comment.
/// Empty once the process is gone or its pid is another's.
pub fn of(pid: i32, start: u64) -> Vec<TaskId> {
    let mut named = Vec::new();
    let mut unnamed = Vec::new();
    let mut main = None;
    for tid in identity::threads(pid) {
        let Ok(st) = identity::stat(tid) else {
            continue;
        };
        let task = TaskId {
            tid,
            pid,
            start: st.start,
        };
        if tid == pid {
            if st.start != start {
                return Vec::new(); // a recycled pid
            }
            main = Some(st.comm);
        } else if is_data_loop(&st.comm) {
            named.push(task);
        } else {
            unnamed.push((task, st.comm));
        }
    }
    let Some(main) = main else {
        return Vec::new();
    };
    if !named.is_empty() {
        return named;
    }
    let mut same: Vec<TaskId> = unnamed
        .into_iter()
        .filter(|(_, comm)| *comm == main)
        .map(|(t, _)| t)
        .collect();
    if same.len() == 1 {
        same.pop().into_iter().collect()
    } else {
        Vec::new()
    }
}

/// `data-loop.0`, `data-loop.1`, …: libpipewire's data threads (1.2 and later).
pub fn is_data_loop(comm: &str) -> bool {
    comm.strip_prefix("data-loop.")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_loop_names() {
        assert!(is_data_loop("data-loop.0"));
        assert!(is_data_loop("data-loop.12"));
        assert!(!is_data_loop("data-loop."));
        assert!(!is_data_loop("data-loop.x"));
        assert!(!is_data_loop("pw-play"));
    }

    #[test]
    fn a_process_with_one_unnamed_thread_gives_it_and_a_gone_or_recycled_one_nothing() {
        // A `sleep` has one thread: no audio thread.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let start = identity::stat(pid).unwrap().start;
        assert!(of(pid, start).is_empty());
        assert!(of(pid, start + 1).is_empty(), "another start time");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(of(pid, start).is_empty(), "gone");
        // This test binary: its main thread is named after it, and the test harness's threads
        // are named after their tests, so none is taken unless exactly one carries its name.
        let me = std::process::id() as i32;
        let main = identity::stat(me).unwrap();
        let found = of(me, main.start);
        assert!(found.len() <= 1, "{found:?}");
        for t in found {
            assert_eq!(identity::stat(t.tid).unwrap().comm, main.comm);
            assert_ne!(t.tid, me);
        }
    }
}
