//! The Wayland keystroke scenario (`foot`) against real sway 1.7 headless and foot (Debian
//! packages sway, foot; scripts/setup.sh installs them), run as the bench's unprivileged user:
//! a short bench run loses no keystroke and measures positive, bounded latencies; a frame is
//! counted only once `cat` echoed the key (a terminal that does not echo shows nothing); and the
//! focus measurement times a boost applied on sway's focus events. Every test fails, naming
//! the packages, where sway or foot is missing — never a pass without them.

mod common;

use common::{plan, require_root, row, run_checked, serial, Scratch};
use std::process::Child;
use std::time::{Duration, Instant};
use uxsched_bench::loads::LoadKind;
use uxsched_bench::models::wayland::{self, ipc, Compositor, Ipc, Screen};
use uxsched_bench::models::xapp::AppUser;
use uxsched_bench::models::ModelKind;
use uxsched_bench::modes::ModeName;
use uxsched_bench::sys;

/// sway and foot are installed, or the test fails saying which package to install.
fn require_programs() {
    wayland::require_programs(&std::env::var_os("PATH").unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e:#}"));
}

/// Kills and reaps a terminal started by a test.
struct Terminal(Child);

impl Drop for Terminal {
    fn drop(&mut self) {
        sys::kill_tree(self.0.id() as i32);
        let _ = self.0.wait();
    }
}

impl Terminal {
    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

/// sway for a test, in `scratch` (reachable by the bench user, as a run directory is).
fn compositor(scratch: &Scratch) -> Compositor {
    std::fs::create_dir_all(&scratch.0).unwrap();
    std::fs::set_permissions(
        &scratch.0,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let user = AppUser::ensure().unwrap();
    Compositor::start(&scratch.0.join("desktop"), &scratch.0.join("home"), &user)
        .expect("starting sway headless")
}

#[test]
fn a_missing_compositor_or_terminal_is_refused_by_package_name() {
    let empty = std::ffi::OsString::new();
    let e = wayland::require_programs(&empty).unwrap_err().to_string();
    assert!(e.contains("apt-get install sway foot"), "{e}");
}

#[test]
#[ignore = "needs sway, foot and root: make test runs it as root"]
fn the_bench_measures_foot_under_idle_and_fifo_in_the_same_session() {
    let _serial = serial();
    require_root();
    require_programs();
    let scratch = Scratch::new("wayland-foot-bench");
    let mut plan = plan(
        ModelKind::Foot,
        &[ModeName::Idle, ModeName::Fifo],
        2000,
        LoadKind::Cpu,
        &scratch,
    );
    plan.layout = uxsched_bench::layout::Layout::SameSession;
    let report = run_checked(&plan, &scratch).unwrap();
    for mode in [ModeName::Idle, ModeName::Fifo] {
        let r = row(&report, mode);
        let x = |k: &str| {
            *r.extras
                .get(k)
                .unwrap_or_else(|| panic!("{}: no {k} in {:?}", mode.name(), r.extras))
        };
        // Paced 50–100 ms apart over 2 s: at least 10 keystrokes, each shown.
        assert!(
            r.summary.n >= 10,
            "{}: only {} samples",
            mode.name(),
            r.summary.n
        );
        assert_eq!(x("lost"), 0.0, "{}: keystrokes lost", mode.name());
        assert_eq!(x("keystrokes"), r.summary.n as f64, "{}", mode.name());
        let samples: Vec<f64> = report
            .records
            .iter()
            .filter(|rec| rec.mode == mode)
            .flat_map(|rec| rec.samples_ms.iter().copied())
            .collect();
        assert!(
            samples.iter().all(|&s| s > 0.0 && s < 2000.0),
            "{}: {samples:?}",
            mode.name()
        );
        assert!(
            r.summary.p99 < 500.0,
            "{}: p99 {} ms",
            mode.name(),
            r.summary.p99
        );
        // Nothing follows sway's focus in these modes: the focus phase ends after its misses.
        assert_eq!(x("focus_boosted"), 0.0, "{}", mode.name());
    }
    // fifo raised the app's threads (a real-time policy is a boost); idle did nothing.
    assert_eq!(row(&report, ModeName::Fifo).extras["app_boosted"], 1.0);
    assert_eq!(row(&report, ModeName::Idle).extras["app_boosted"], 0.0);
    assert_eq!(row(&report, ModeName::Idle).extras["focus_switches"], 0.0);
}

#[test]
#[ignore = "needs sway, foot and root: make test runs it as root"]
fn a_keystroke_shows_a_frame_only_once_cat_echoed_it() {
    let _serial = serial();
    require_root();
    require_programs();
    let scratch = Scratch::new("wayland-echo");
    let sway = compositor(&scratch);
    let silent_cmd = ["sh", "-c", "stty raw -echo && exec sleep 600"];
    let silent = Terminal(
        sway.start_terminal_running("silent", &scratch.0.join("silent.log"), None, &silent_cmd)
            .unwrap(),
    );
    let echo = Terminal(
        sway.start_terminal("echo", &scratch.0.join("echo.log"), None)
            .unwrap(),
    );
    let mut ipc = Ipc::connect(sway.ipc_socket()).unwrap();
    let mut screen = Screen::connect(sway.wayland_socket()).unwrap();
    let mut unprompted = 0;
    let settle = |screen: &mut Screen, unprompted: &mut u32| {
        let give_up = Instant::now() + Duration::from_secs(30);
        assert!(screen
            .quiet(Duration::from_millis(500), give_up, unprompted)
            .unwrap());
    };
    // The silent terminal focused: its keystrokes reach a program that draws nothing.
    wayland::focus_app(&mut ipc, silent.pid(), echo.pid()).unwrap();
    settle(&mut screen, &mut unprompted);
    for i in 0..3 {
        let shown = screen.keystroke(i, Duration::from_millis(500)).unwrap();
        assert!(shown.is_none(), "a frame without an echo: {shown:?}");
    }
    // The echoing one focused: each keystroke is one frame, within a sane time.
    wayland::focus_app(&mut ipc, echo.pid(), silent.pid()).unwrap();
    settle(&mut screen, &mut unprompted);
    for i in 0..5 {
        let shown = screen
            .keystroke(i, Duration::from_secs(5))
            .unwrap()
            .unwrap_or_else(|| panic!("keystroke {i} showed no frame"));
        assert!(
            shown > Duration::ZERO && shown < Duration::from_secs(1),
            "{shown:?}"
        );
        settle(&mut screen, &mut unprompted);
    }
}

#[test]
#[ignore = "needs sway, foot and root: make test runs it as root"]
fn the_focus_measurement_times_a_boost_applied_on_sways_focus_events() {
    let _serial = serial();
    require_root();
    require_programs();
    let scratch = Scratch::new("wayland-focus");
    let sway = compositor(&scratch);
    let a = Terminal(
        sway.start_terminal("a", &scratch.0.join("a.log"), None)
            .unwrap(),
    );
    let b = Terminal(
        sway.start_terminal("b", &scratch.0.join("b.log"), None)
            .unwrap(),
    );
    let nice = |pid: i32| sys::thread_sched(pid, pid).unwrap().nice;
    let terminals = [(a.pid(), nice(a.pid())), (b.pid(), nice(b.pid()))];
    // A stand-in for a daemon's compositor source: on each focus event, the focused
    // terminal's main thread one nice step below where it started, the other back.
    let mut events = Ipc::connect(sway.ipc_socket()).unwrap();
    let reply = events.request(ipc::SUBSCRIBE, "[\"window\"]").unwrap();
    assert_eq!(reply["success"], serde_json::Value::Bool(true));
    let follower = std::thread::spawn(move || {
        while let Ok((kind, event)) = events.message() {
            if kind != 0x8000_0003 || event["change"] != "focus" {
                continue;
            }
            let focused = event["container"]["pid"].as_i64().unwrap_or(0) as i32;
            for (pid, base) in terminals {
                let want = if pid == focused { base - 1 } else { base };
                let _ = sys::set_nice(pid, want);
            }
        }
    });
    let (latencies, switches) = wayland::measure_focus(sway.ipc_socket(), terminals, 1).unwrap();
    eprintln!("stand-in follower, focus command → boost seen (ms): {latencies:?}");
    assert!(switches >= 10, "only {switches} switches");
    assert_eq!(latencies.len(), switches, "{latencies:?}");
    assert!(
        latencies.iter().all(|&ms| ms > 0.0 && ms < 1000.0),
        "{latencies:?}"
    );
    drop(sway);
    follower.join().unwrap();
}
