//! The real-application scenarios against real Xvfb, openbox, xterm, xedit and Chromium (Debian
//! packages xvfb, openbox, xterm, x11-apps, chromium; scripts/setup.sh installs them): the
//! desktop and the programs start and stop without leftovers, one keystroke is seen as one
//! change of the program's pixels within a sane time — and for xterm only once `cat` echoed it
//! —, the browser runs as its unprivileged user inside its own sandbox, `fifo` covers every
//! thread of its process tree and of the X server and restores them, and a missing program is
//! refused by name.

mod common;

use common::{plan, require_root, row, run_checked, serial, Scratch};
use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use uxsched_bench::loads::LoadKind;
use uxsched_bench::models::xapp::{self, Desktop, Probe};
use uxsched_bench::models::ModelKind;
use uxsched_bench::modes::{self, ModeEnv, ModeName, Targets};
use uxsched_bench::sys;

/// Kills and reaps a program started by a test.
/// A program and the browser's `TMPDIR` (removed after it is killed).
struct Program(Child, Option<xapp::Scratch>);

impl Drop for Program {
    fn drop(&mut self) {
        sys::kill_tree(self.0.id() as i32);
        let _ = self.0.wait();
        drop(self.1.take());
    }
}

fn start(kind: ModelKind, desktop: &Desktop, dir: &std::path::Path) -> Program {
    let app = xapp::start_app(kind, desktop, dir, None).expect("starting the program");
    Program(app.child, app.tmp)
}

/// Every live descendant of this test process.
fn our_descendants() -> BTreeSet<i32> {
    let mut found = BTreeSet::new();
    let mut todo = vec![std::process::id() as i32];
    while let Some(p) = todo.pop() {
        for c in sys::children(p) {
            if found.insert(c) {
                todo.push(c);
            }
        }
    }
    found
}

/// Still running (a process that exited may linger a moment as a zombie until reaped).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| t.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

#[test]
#[ignore = "needs Xvfb and root: make test runs it as root"]
fn desktop_and_programs_start_and_stop_without_leftovers() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("xapps-clean");
    std::fs::create_dir_all(&scratch.0).unwrap();
    let before = our_descendants();
    let (started, socket) = {
        let desktop = Desktop::start(&scratch.0.join("desktop")).unwrap();
        let socket =
            std::path::PathBuf::from(format!("/tmp/.X11-unix/X{}", &desktop.display()[1..]));
        assert!(socket.exists(), "{} missing", socket.display());
        let xterm = start(ModelKind::Xterm, &desktop, &scratch.0);
        let xedit = start(ModelKind::Xedit, &desktop, &scratch.0);
        let user = uxsched_bench::models::xapp::AppUser::ensure().unwrap();
        for p in [&xterm, &xedit] {
            let probe = Probe::attach(desktop.display(), p.0.id() as i32).unwrap();
            assert_ne!(probe.window(), 0);
            let proc = format!("/proc/{}", p.0.id());
            let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(proc).unwrap());
            assert_eq!(
                uid, user.uid,
                "the program runs as the bench's unprivileged user"
            );
        }
        let started: BTreeSet<i32> = our_descendants().difference(&before).copied().collect();
        // Xvfb, openbox, xterm, its shell/cat, xedit.
        assert!(
            started.len() >= 5,
            "expected the desktop and both programs, got {started:?}"
        );
        assert!(started.contains(&desktop.server_pid()));
        (started, socket)
    };
    let left: Vec<i32> = started.into_iter().filter(|&p| running(p)).collect();
    assert!(left.is_empty(), "processes left running: {left:?}");
    // Xvfb was stopped, not killed: it removed its socket.
    assert!(!socket.exists(), "{} left behind", socket.display());
}

#[test]
#[ignore = "needs Xvfb and root: make test runs it as root"]
fn one_keystroke_is_one_change_of_the_programs_pixels() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("xapps-key");
    std::fs::create_dir_all(&scratch.0).unwrap();
    let desktop = Desktop::start(&scratch.0.join("desktop")).unwrap();
    for kind in [ModelKind::Xedit, ModelKind::Xterm] {
        let app = start(kind, &desktop, &scratch.0);
        let probe = Probe::attach(desktop.display(), app.0.id() as i32)
            .unwrap_or_else(|e| panic!("{}: {e:#}", kind.name()));
        // Whatever the focus change drew settles; then nothing draws without input.
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            probe.quiet(Duration::from_millis(300)).unwrap(),
            "{}: pixels changed without input",
            kind.name()
        );
        // The first change also redraws xedit's label (the file is now modified).
        assert!(probe
            .keystroke(0, Duration::from_secs(2))
            .unwrap()
            .is_some());
        std::thread::sleep(Duration::from_millis(300));
        for i in 1..6 {
            let latency = probe
                .keystroke(i, Duration::from_secs(2))
                .unwrap()
                .unwrap_or_else(|| panic!("{}: keystroke {i} changed no pixel", kind.name()));
            assert!(
                latency > Duration::from_micros(20) && latency < Duration::from_millis(500),
                "{}: keystroke {i} took {latency:?}",
                kind.name()
            );
            // One change per keystroke: nothing more is drawn afterwards.
            assert!(
                probe.quiet(Duration::from_millis(150)).unwrap(),
                "{}: more pixels changed after keystroke {i}",
                kind.name()
            );
        }
    }
}

#[test]
#[ignore = "needs Xvfb and root: make test runs it as root"]
fn xterm_shows_the_keystroke_only_once_its_child_echoed_it() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("xapps-echo");
    std::fs::create_dir_all(&scratch.0).unwrap();
    let desktop = Desktop::start(&scratch.0.join("desktop")).unwrap();
    // The scenario's xterm, but its child reads the raw tty without writing anything back.
    let silent = Command::new("xterm")
        .args(["-e", "sh", "-c", "stty raw -echo && exec sleep 600"])
        .env("DISPLAY", desktop.display())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let silent = Program(silent, None);
    let probe = Probe::attach(desktop.display(), silent.0.id() as i32).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..3 {
        assert_eq!(
            probe.keystroke(i, Duration::from_millis(500)).unwrap(),
            None,
            "xterm drew keystroke {i} without an echo"
        );
    }
}

#[test]
fn a_missing_program_is_refused_by_name() {
    let empty = std::env::temp_dir().join(format!("uxsched-xapps-nopath-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let err = xapp::require_programs(ModelKind::Xedit, empty.as_os_str())
        .unwrap_err()
        .to_string();
    std::fs::remove_dir_all(&empty).unwrap();
    for word in [
        "'xedit'",
        "Xvfb",
        "openbox",
        "apt-get install xvfb openbox x11-apps",
    ] {
        assert!(err.contains(word), "{word:?} missing from: {err}");
    }
}

#[test]
#[ignore = "needs Xvfb and root: make test runs it as root"]
fn the_bench_measures_xterm_under_idle_and_fifo() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("xapps-bench");
    let plan = plan(
        ModelKind::Xterm,
        &[ModeName::Idle, ModeName::Fifo],
        2000,
        LoadKind::Cpu,
        &scratch,
    );
    let report = run_checked(&plan, &scratch).unwrap();
    assert_measured(&report, &[("lost", 0.0)]);
}

/// The browser, started as the scenario starts it (in a run's directory under `dir`: its profile
/// goes beside that, in `dir/browser`, as in a bench run's `runs/`); its sandbox must be
/// Chromium's own.
fn start_browser(desktop: &Desktop, dir: &std::path::Path) -> Program {
    let dir = &dir.join("run");
    std::fs::create_dir_all(dir).unwrap();
    let app = xapp::start_app(ModelKind::Chromium, desktop, dir, None).expect("starting chromium");
    assert_eq!(
        app.sandbox,
        Some(true),
        "chromium runs with --no-sandbox here (its log is {})",
        dir.join("app-sandboxed.log").display()
    );
    Program(app.child, app.tmp)
}

/// Real, effective, saved and filesystem uid of a process.
fn uids(pid: i32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .unwrap()
        .split_whitespace()
        .map(|u| u.parse().unwrap())
        .collect()
}

#[test]
#[ignore = "needs Xvfb, chromium and root: make test runs it as root"]
fn chromium_and_its_desktop_run_as_its_user_in_its_sandbox_and_draw_each_keystroke() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("xapps-chromium");
    std::fs::create_dir_all(&scratch.0).unwrap();
    let user = xapp::AppUser::ensure().unwrap();
    // As the scenario runs it: the desktop as the browser's user too.
    let desktop = Desktop::start_as(&scratch.0.join("desktop"), &user).unwrap();
    assert_eq!(uids(desktop.server_pid()), vec![user.uid; 4], "Xvfb");
    let browser = start_browser(&desktop, &scratch.0);
    let pid = browser.0.id() as i32;
    // The browser, its zygotes, a renderer and the GPU process at least; all the user's.
    let family = modes::process_tree(pid);
    assert!(family.len() >= 4, "chromium's process tree: {family:?}");
    for p in &family {
        assert_eq!(uids(*p), vec![user.uid; 4], "pid {p} of chromium's tree");
    }
    let probe = Probe::attach(desktop.display(), pid).unwrap();
    assert_eq!(probe.wm_pid().unwrap(), Some(pid as u32), "_NET_WM_PID");
    // Nothing draws without input (no caret blink: GTK's cycle is 1.2 s), once settled.
    let span = Duration::from_millis(500);
    probe.settle(span, Duration::from_secs(30)).unwrap();
    assert!(
        probe.quiet(Duration::from_millis(1500)).unwrap(),
        "chromium's window changed without input (a blinking caret?)"
    );
    assert!(probe
        .keystroke(0, Duration::from_secs(30))
        .unwrap()
        .is_some());
    probe.settle(span, Duration::from_secs(30)).unwrap();
    for i in 1..6 {
        let latency = probe
            .keystroke(i, Duration::from_secs(2))
            .unwrap()
            .unwrap_or_else(|| panic!("chromium: keystroke {i} changed no pixel"));
        assert!(
            latency > Duration::from_micros(20) && latency < Duration::from_millis(500),
            "chromium: keystroke {i} took {latency:?}"
        );
        assert!(
            probe.quiet(Duration::from_millis(150)).unwrap(),
            "chromium: more pixels changed after keystroke {i}"
        );
    }
}

/// Policy (stat field 41) and soft RLIMIT_RTTIME (`/proc/<pid>/limits`, readable whoever owns
/// the process) of every thread that exists now in `procs`.
fn rt_state(procs: &[i32]) -> Vec<(i32, i32, i32, String)> {
    procs
        .iter()
        .flat_map(|&p| {
            let limit = std::fs::read_to_string(format!("/proc/{p}/limits"))
                .unwrap_or_default()
                .lines()
                .find(|l| l.starts_with("Max realtime timeout"))
                .and_then(|l| l.split_whitespace().nth(3).map(str::to_owned))
                .unwrap_or_default();
            sys::threads(p).into_iter().filter_map(move |t| {
                let policy = sys::thread_sched(p, t).ok()?.policy;
                Some((p, t, policy, limit.clone()))
            })
        })
        .collect()
}

#[test]
#[ignore = "needs Xvfb, chromium and root: make test runs it as root"]
fn fifo_covers_every_thread_of_the_browsers_tree_and_the_x_server_and_restores_them() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("xapps-chromium-fifo");
    std::fs::create_dir_all(&scratch.0).unwrap();
    let user = xapp::AppUser::ensure().unwrap();
    let desktop = Desktop::start_as(&scratch.0.join("desktop"), &user).unwrap();
    let browser = start_browser(&desktop, &scratch.0);
    let pid = browser.0.id() as i32;
    let probe = Probe::attach(desktop.display(), pid).unwrap();
    probe
        .settle(Duration::from_millis(300), Duration::from_secs(30))
        .unwrap();
    let targets = Targets {
        app: Some(pid),
        x_server: Some(desktop.server_pid()),
        ..Targets::default()
    };
    let mut procs = targets.app_family();
    procs.push(desktop.server_pid());
    let before = rt_state(&procs);
    assert!(before.iter().all(|t| t.2 == 0), "not all fair: {before:?}");
    let env = ModeEnv {
        uxsched_exe: None,
        scratch: scratch.0.clone(),
        daemon_config: String::new(),
    };
    let mut fifo = modes::build(ModeName::Fifo, &env).unwrap();
    fifo.apply(&targets).unwrap();
    // Threads that existed before the sweep (later ones are the next sweep's).
    let known: BTreeSet<i32> = before.iter().map(|t| t.1).collect();
    let during: Vec<_> = rt_state(&procs)
        .into_iter()
        .filter(|t| known.contains(&t.1))
        .collect();
    assert_eq!(during.len(), before.len(), "threads exited meanwhile");
    for t in &during {
        assert_eq!(
            (t.2, t.3.as_str()),
            (1, "200000"),
            "pid {} tid {}",
            t.0,
            t.1
        );
    }
    assert!(probe
        .keystroke(0, Duration::from_secs(5))
        .unwrap()
        .is_some());
    fifo.restore().unwrap();
    let after: Vec<_> = rt_state(&procs)
        .into_iter()
        .filter(|t| known.contains(&t.1))
        .collect();
    let changed: Vec<_> = after.iter().filter(|t| !before.contains(t)).collect();
    assert!(changed.is_empty(), "not restored: {changed:?}");
}

#[test]
#[ignore = "needs Xvfb, chromium and root: make test runs it as root"]
fn the_bench_measures_chromium_under_idle_and_fifo_in_the_same_session() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("xapps-chromium-bench");
    let mut plan = plan(
        ModelKind::Chromium,
        &[ModeName::Idle, ModeName::Fifo],
        2000,
        LoadKind::Cpu,
        &scratch,
    );
    plan.layout = uxsched_bench::layout::Layout::SameSession;
    let report = run_checked(&plan, &scratch).unwrap();
    assert_measured(&report, &[("lost", 0.0), ("sandbox", 1.0)]);
}

/// Each of idle and fifo has at least 10 samples, the `extras` asked for, and a p99 under 0.5 s.
fn assert_measured(report: &uxsched_bench::report::Report, extras: &[(&str, f64)]) {
    for mode in [ModeName::Idle, ModeName::Fifo] {
        let r = row(report, mode);
        assert!(
            r.summary.n >= 10,
            "{}: only {} samples",
            mode.name(),
            r.summary.n
        );
        for &(key, want) in extras {
            assert_eq!(
                r.extras.get(key),
                Some(&want),
                "{}: {:?}",
                mode.name(),
                r.extras
            );
        }
        assert!(
            r.summary.p99 < 500.0,
            "{}: p99 {} ms",
            mode.name(),
            r.summary.p99
        );
    }
}

/// Deny user namespaces to this process and everything it starts, as Docker's default seccomp
/// profile does: `clone`/`unshare` with CLONE_NEWUSER fail with EPERM, and `clone3` (whose
/// flags a filter cannot read) with ENOSYS, so callers fall back to `clone`.
fn deny_user_namespaces() {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JSET_K: u16 = 0x45;
    const RET_K: u16 = 0x06;
    const ALLOW: u32 = 0x7fff_0000;
    const ERRNO: u32 = 0x0005_0000;
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let nr = |n: libc::c_long| n as u32;
    let filter = [
        op(LD_W_ABS, 0, 0, 4), // arch
        op(JEQ_K, 0, 7, AUDIT_ARCH_X86_64),
        op(LD_W_ABS, 0, 0, 0), // syscall number
        op(JEQ_K, 7, 0, nr(libc::SYS_clone3)),
        op(JEQ_K, 2, 0, nr(libc::SYS_clone)),
        op(JEQ_K, 1, 0, nr(libc::SYS_unshare)),
        op(RET_K, 0, 0, ALLOW),
        op(LD_W_ABS, 0, 0, 16), // flags: the low half of args[0]
        op(JSET_K, 1, 0, libc::CLONE_NEWUSER as u32),
        op(RET_K, 0, 0, ALLOW),
        op(RET_K, 0, 0, ERRNO | libc::EPERM as u32),
        op(RET_K, 0, 0, ERRNO | libc::ENOSYS as u32),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: prctl with a valid filter program that outlives the call.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog),
            0,
            "installing the seccomp filter: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[test]
#[ignore = "needs Xvfb, chromium and root: make test runs it as root"]
fn without_user_namespaces_chromium_runs_with_no_sandbox_and_says_so() {
    const NAME: &str = "without_user_namespaces_chromium_runs_with_no_sandbox_and_says_so";
    let _serial = serial();
    require_root();
    if std::env::var_os("UXSCHED_TEST_DENY_USERNS").is_none() {
        // The filter cannot be taken off again: install it in a copy of this test only.
        let status = Command::new(std::env::current_exe().unwrap())
            .args([NAME, "--exact", "--include-ignored", "--test-threads=1"])
            .env("UXSCHED_TEST_DENY_USERNS", "1")
            .status()
            .unwrap();
        assert!(status.success(), "the copy of this test failed: {status}");
        return;
    }
    deny_user_namespaces();
    let scratch = Scratch::new("xapps-chromium-nosandbox");
    std::fs::create_dir_all(&scratch.0).unwrap();
    let user = xapp::AppUser::ensure().unwrap();
    let desktop = Desktop::start_as(&scratch.0.join("desktop"), &user).unwrap();
    // A run's directory of its own: the profile goes beside it (`install_dir`), in the scratch.
    let run = scratch.0.join("run");
    std::fs::create_dir_all(&run).unwrap();
    let app = xapp::start_app(ModelKind::Chromium, &desktop, &run, None).unwrap();
    let browser = Program(app.child, app.tmp);
    assert_eq!(app.sandbox, Some(false));
    let first = std::fs::read_to_string(run.join("app-sandboxed.log")).unwrap();
    assert!(first.to_lowercase().contains("sandbox"), "{first}");
    let pid = browser.0.id() as i32;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(String::from_utf8_lossy(&cmdline).contains("--no-sandbox"));
    // And it works: the page takes keystrokes.
    let probe = Probe::attach(desktop.display(), pid).unwrap();
    probe
        .settle(Duration::from_millis(500), Duration::from_secs(30))
        .unwrap();
    assert!(probe
        .keystroke(0, Duration::from_secs(30))
        .unwrap()
        .is_some());
}
