//! `uxsched bench` rejects malformed options with exit code 2 and names the valid choices.

use std::process::Command;

fn uxsched(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_uxsched"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unknown_mode_lists_the_valid_ones() {
    let (code, err) = uxsched(&["bench", "painting", "--modes", "stock,turbo"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("turbo") && err.contains("idle, stock, android, s76, schedqos, fifo"),
        "{err}"
    );
}

#[test]
fn unknown_scenario_lists_the_valid_ones() {
    let (code, err) = uxsched(&["bench", "scrolling"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("painting, worker, frames, alarm, player, reader, gallery"),
        "{err}"
    );
}

#[test]
fn bad_duration_and_reps_are_input_errors() {
    for args in [
        &["bench", "alarm", "--duration", "5 parsecs"][..],
        &["bench", "alarm", "--duration", "0s"],
        &["bench", "alarm", "--reps", "0"],
        &["bench", "alarm", "--load", "gpu"],
        &["bench", "alarm", "--launches", "3"],
        &["bench", "launch", "--launches", "0"],
        &["demo", "--reps", "many"],
    ] {
        let (code, err) = uxsched(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("error:"), "{args:?}: {err}");
    }
}

#[test]
fn list_names_scenarios_and_modes() {
    let out = Command::new(env!("CARGO_BIN_EXE_uxsched"))
        .args(["bench", "list"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "painting",
        "gallery",
        "android",
        "s76",
        "fifo",
        "uxsched",
        "uxsched-roles",
        "uxsched-fair",
    ] {
        assert!(text.contains(word), "{word} missing from:\n{text}");
    }
}

/// Ctrl-C in the middle of an `s76` run (autogroup switched off, load running) must put
/// autogroup back, kill the load and exit with a runtime error.
#[test]
#[ignore = "needs root: make test runs it as root"]
fn interrupt_restores_and_kills_the_load() {
    require_root();
    let before = std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_uxsched"))
        .args([
            "bench",
            "alarm",
            "--modes",
            "s76",
            "--reps",
            "1",
            "--duration",
            "3s",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // idle runs first (3 s), so wait for the s76 run instead: poll for autogroup = 0.
    let start = std::time::Instant::now();
    let mut saw_s76 = false;
    while start.elapsed() < std::time::Duration::from_secs(40) {
        if std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled")
            .unwrap()
            .trim()
            == "0"
        {
            saw_s76 = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(700));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let scratch = format!("/var/tmp/uxsched-bench-{}", child.id());
    let out = child.wait_with_output().unwrap();
    let load_left = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&scratch))
        });
    assert!(!load_left, "a load process of {scratch} survived");
    assert!(
        !std::path::Path::new(&scratch).exists(),
        "{scratch} left behind"
    );
    let after = std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled").unwrap();
    assert!(
        saw_s76 || before.trim() == "0",
        "the s76 run never switched autogroup off"
    );
    assert_eq!(after, before, "autogroup not restored");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("interrupted"), "{err}");
}

/// The daemon driver end to end, every daemon mode: start `uxsched daemon --mode M`, wait for
/// `status`, focus the app, stop the daemon — and the report has samples and a background
/// throughput for each mode (no claim on who wins).
#[test]
#[ignore = "needs root: make test runs it as root"]
fn daemon_modes_run_through_the_harness() {
    let out = bench_as_root(&[
        "alarm",
        "--modes",
        "eimos,vtcfs,mcfs,facfs,shuffledog,uxsched",
        "--reps",
        "1",
        "--duration",
        "1s",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let modes = report["modes"].as_array().unwrap();
    let names: Vec<&str> = modes.iter().map(|m| m["mode"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "idle",
            "eimos",
            "vtcfs",
            "mcfs",
            "facfs",
            "shuffledog",
            "uxsched"
        ]
    );
    for m in modes {
        assert!(m["summary"]["n"].as_u64().unwrap() >= 5, "{m}");
    }
    for m in &modes[1..] {
        assert!(m["background"].as_f64().unwrap() > 0.0, "{m}");
    }
}

/// `rtapi`: the model's thread asks the daemon for real time itself (a refusal would fail the
/// run, and the model prints what the kernel holds), and a scenario without such a thread is
/// refused before anything runs.
#[test]
#[ignore = "needs root: make test runs it as root"]
fn rtapi_mode_has_the_models_thread_ask_and_refuses_other_scenarios() {
    let out = bench_as_root(&[
        "player",
        "--modes",
        "rtapi",
        "--reps",
        "1",
        "--duration",
        "1s",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let modes = report["modes"].as_array().unwrap();
    // A refused grant fails the model, and a failed run is dropped from the report.
    assert_eq!(modes[1]["mode"], "rtapi", "{report}");
    assert!(modes[1]["summary"]["n"].as_u64().unwrap() >= 5, "{report}");
    let out = bench_as_root(&["painting", "--modes", "rtapi", "--reps", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("mode rtapi needs a model"), "{err}");
}

/// `uxsched-roles` is the daemon of `uxsched` with the tracker off (name-based roles only) and
/// `uxsched` has it on: each bench mode's own daemon says so in `status --json`. Fails if the
/// mode's configuration does not reach the daemon.
#[test]
#[ignore = "needs root: make test runs it as root"]
fn uxsched_roles_runs_the_uxsched_daemon_with_the_tracker_off() {
    use uxsched_bench::modes::{self, ModeEnv, ModeName};
    require_root();
    let dir = std::env::temp_dir().join(format!("uxsched-bench-roles-{}", std::process::id()));
    for (mode, off) in [(ModeName::UxschedRoles, true), (ModeName::Uxsched, false)] {
        let env = ModeEnv {
            uxsched_exe: Some(env!("CARGO_BIN_EXE_uxsched").into()),
            scratch: dir.clone(),
            daemon_config: "[uxsched]\nslice_us = 1500\n".into(),
        };
        let mut daemon = modes::build(mode, &env).unwrap();
        daemon.prepare().unwrap();
        let socket = dir.join(format!("daemon-{}/uxsched.sock", mode.name()));
        let out = Command::new(env!("CARGO_BIN_EXE_uxsched"))
            .args(["status", "--json", "--socket"])
            .arg(&socket)
            .output()
            .unwrap();
        daemon.restore().unwrap();
        assert!(out.status.success(), "{out:?}");
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(status["mode"], "uxsched", "{status}");
        let tracker = status["tracker"].as_str().unwrap();
        assert_eq!(
            tracker.starts_with("off"),
            off,
            "{}: {tracker}",
            mode.name()
        );
    }
    // The scratch directory and the daemons' runtime directory (their journals) beside it.
    uxsched_bench::cleanup_scratch(&dir, false);
    // The mode's own key against a file that says otherwise: refused before anything runs.
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tracker-on.toml");
    std::fs::write(&file, "[tracker]\nenabled = true\n").unwrap();
    let out = bench_as_root(&[
        "alarm",
        "--modes",
        "uxsched-roles",
        "--daemon-config",
        file.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("tracker.enabled"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn a_mode_whose_run_fails_is_dropped_not_fatal() {
    // `reader` under `fifo` reads the page cache without blocking and is usually killed by the
    // mode's own RLIMIT_RTTIME (SIGXCPU). Whether or not that happens, the bench must finish and
    // report the other modes; a failed mode is named in a warning.
    let fio_before = count_processes("fio");
    let out = bench_as_root(&[
        "reader",
        "--modes",
        "idle,fifo",
        "--reps",
        "1",
        "--duration",
        "2s",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("idle "), "{stdout}");
    assert!(
        stdout.contains("fifo ") || stdout.contains("mode fifo was dropped"),
        "{stdout}"
    );
    // The failed run's background load (fio, whose job processes start sessions of their own)
    // is gone too.
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        count_processes("fio") <= fio_before,
        "the failed run left fio behind"
    );
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn daemon_config_is_checked_before_anything_runs_and_then_used() {
    let dir = std::env::temp_dir().join(format!("uxsched-bench-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let bad_value = write("bad.toml", "[uxsched]\nslice_us = 5\n");
    let owns_socket = write("socket.toml", "socket = \"/tmp/x.sock\"\n");
    let good = write("good.toml", "[uxsched]\nslice_us = 1500\n");
    let common = ["--modes", "uxsched", "--reps", "1", "--duration", "1s"];
    for (file, what) in [(&bad_value, "slice_us"), (&owns_socket, "socket")] {
        let out = bench_as_root(&[&["alarm"][..], &common, &["--daemon-config", file]].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(what), "{err}");
    }
    let out = bench_as_root(
        &[
            &["alarm"][..],
            &common,
            &["--daemon-config", &good, "--json"],
        ]
        .concat(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["modes"][1]["mode"], "uxsched");
    assert!(report["modes"][1]["summary"]["n"].as_u64().unwrap() >= 5);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `uxsched bench ARGS…` to completion (as root: the tests that use it are `#[ignore]`d and
/// `make test` runs them as root with `--include-ignored`).
fn bench_as_root(args: &[&str]) -> std::process::Output {
    require_root();
    Command::new(env!("CARGO_BIN_EXE_uxsched"))
        .arg("bench")
        .args(args)
        .output()
        .unwrap()
}

/// Without root the tests that need it fail here instead of passing untested.
fn require_root() {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "this test changes scheduling settings and needs root: run it as root (make test does)"
    );
}

/// Live (not zombie) processes whose command name is `comm`.
fn count_processes(comm: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
        .filter(|stat| {
            let (name, rest) = stat.rsplit_once(") ").unwrap_or(("", "Z"));
            name.ends_with(&format!("({comm}")) && !rest.starts_with('Z')
        })
        .count()
}
