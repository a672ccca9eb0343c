//! A bench run killed outright (SIGKILL: the OOM killer, the end of a login session) cannot
//! restore anything itself; `uxsched bench restore` (and every later run) must undo what it
//! left: autogroup switched off by `s76`, its load still running in a session of its own, its
//! scratch directory. A test binary of its own: no other bench may run (and recover) meanwhile.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const AUTOGROUP: &str = "/proc/sys/kernel/sched_autogroup_enabled";

fn autogroup() -> String {
    std::fs::read_to_string(AUTOGROUP)
        .unwrap()
        .trim()
        .to_owned()
}

/// Live processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .collect()
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn restore_undoes_what_a_killed_run_left() {
    assert_eq!(unsafe { libc::geteuid() }, 0, "run as root (make test)");
    assert_eq!(autogroup(), "1", "this test starts from autogroup on");
    let mut child = Command::new(env!("CARGO_BIN_EXE_uxsched"))
        .args(["bench", "alarm", "--modes", "s76", "--reps", "1"])
        .args(["--duration", "20s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let scratch = format!("/var/tmp/uxsched-bench-{}", child.id());
    // idle runs first (20 s); the s76 run switches autogroup off, then its load is up.
    let start = Instant::now();
    while autogroup() != "0" {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the s76 run never switched autogroup off"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let load = processes_mentioning(&scratch);
    assert!(!load.is_empty(), "no load of {scratch} is running");
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(autogroup(), "0", "nothing may have restored it yet");

    let out = Command::new(env!("CARGO_BIN_EXE_uxsched"))
        .args(["bench", "restore"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert_eq!(autogroup(), "1", "autogroup not restored: {text}");
    assert!(
        text.contains("left kernel.sched_autogroup_enabled=0: set back to 1"),
        "{text}"
    );
    assert!(text.contains(") running: stopped"), "{text}");
    let start = Instant::now();
    while !processes_mentioning(&scratch).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the load of {scratch} survived restore"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!Path::new(&scratch).exists(), "{scratch} left behind");
    let again = Command::new(env!("CARGO_BIN_EXE_uxsched"))
        .args(["bench", "restore"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&again.stdout).trim(),
        "nothing left behind by earlier bench runs"
    );
}
