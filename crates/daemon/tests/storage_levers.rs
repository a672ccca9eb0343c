//! The storage levers on the real kernel (issue 33): a program launched from the app in front
//! is raised — the fair boost and the front's I/O class — from its exec until its budget runs
//! out, and restored exactly; a device switched to BFQ goes back to its elevator at stop, and
//! after a SIGKILL at the next start. The device is a loop device made here, never a disk of
//! the machine.

mod common;

use common::*;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use uxsched_os::ioprio::{self, encode, CLASS_BE, CLASS_RT};
use uxsched_os::process_tree;

const T: Duration = Duration::from_secs(10);
const NOBODY: u32 = 65534;

/// A shell as `nobody` (the app: a user's, as the ownership rule wants) in a session of its own,
/// that one second after it starts runs `sleep` (a child: a launch) and `sh -c 'sh -c sleep'`
/// (the two shells are launches, the `sleep` under them, three generations down, is not).
fn launcher() -> std::process::Child {
    user_shell("sleep 1; sleep 30 & sh -c 'sh -c \"sleep 31; :\"; :' & wait")
}

/// `sh -c SCRIPT` as `nobody`, in a session of its own.
fn user_shell(script: &str) -> std::process::Child {
    user_program(&["sh", "-c", script], &[])
}

/// The process under `root` running `sleep ARG`.
fn sleeper(root: i32, arg: &str) -> Option<i32> {
    process_tree::with_descendants(root).into_iter().find(|&p| {
        std::fs::read(format!("/proc/{p}/cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).any(|w| w == arg.as_bytes()))
            && comm(p) == "sleep"
    })
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn a_launch_from_the_app_in_front_is_raised_until_its_budget_runs_out() {
    require_root();
    let _s = serial();
    let budget = Duration::from_millis(1500);
    let d = Daemon::start(
        "uxsched",
        &format!("[storage]\nlaunch_budget_ms = {}\n", budget.as_millis()),
    );
    let mut app = launcher();
    let pid = app.id() as i32;
    d.focus(Some(pid));
    let mut launched = None;
    wait_until("the launched sleep", T, || {
        launched = sleeper(pid, "30");
        launched.is_some()
    });
    let (launch, seen) = (launched.unwrap(), Instant::now());
    let rt4 = encode(CLASS_RT, 4);
    wait_until("the launch raised", T, || {
        nice(launch) == -19 && ioprio::get(launch).unwrap() == rt4
    });
    let raised_after = seen.elapsed();
    let deep = sleeper(pid, "31").expect("the sleep three generations down");

    wait_until("the launch restored at its budget", budget + T, || {
        nice(launch) == 0 && ioprio::get(launch).unwrap() == 0
    });
    let lasted = seen.elapsed();
    // Three generations down is not a launch of its own; forked by a raised shell it may have
    // inherited that shell's I/O class (nice is reset on fork), which is put back with the
    // shell's at the end of the budget.
    wait_until("three generations down back at its own", T, || {
        (nice(deep), ioprio::get(deep).unwrap()) == (0, 0)
    });
    let _ = app.kill();
    let _ = app.wait();
    for p in [launch, deep] {
        // SAFETY: kill has no memory preconditions; these are this test's grandchildren.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    assert!(
        raised_after < Duration::from_millis(500),
        "raised {raised_after:?} after the test saw it"
    );
    assert!(
        lasted >= budget - Duration::from_millis(300),
        "restored after {lasted:?}, before its budget of {budget:?} ran out"
    );
}

/// A program started by the launcher of the app in front (its parent: here a shell standing
/// for a compositor's `exec`, a menu or a launcher) is a launch too; the launcher's later
/// grandchildren's children are not.
#[test]
#[ignore = "needs root: make test runs it as root"]
fn a_launch_by_the_front_apps_launcher_is_raised() {
    require_root();
    let _s = serial();
    let d = Daemon::start("uxsched", "[storage]\nlaunch_budget_ms = 3000\n");
    let mut launcher =
        user_shell("sleep 60 & sleep 1; sleep 33 & sh -c 'sh -c \"sleep 34; :\"; :' & wait");
    let root = launcher.id() as i32;
    let mut front = None;
    wait_until("the app", T, || {
        front = sleeper(root, "60");
        front.is_some()
    });
    d.focus(front);
    let mut sibling = None;
    wait_until("the launcher's next program", T, || {
        sibling = sleeper(root, "33");
        sibling.is_some()
    });
    let sibling = sibling.unwrap();
    let rt4 = encode(CLASS_RT, 4);
    wait_until("the launcher's program raised", T, || {
        nice(sibling) == -19 && ioprio::get(sibling).unwrap() == rt4
    });
    let mut deep = None;
    wait_until("three generations below the launcher", T, || {
        deep = sleeper(root, "34");
        deep.is_some()
    });
    let deep = deep.unwrap();
    // Its launches end at the budget; what they forked gets its own class back with them.
    wait_until("the launcher's program restored at its budget", T, || {
        nice(sibling) == 0 && ioprio::get(sibling).unwrap() == 0
    });
    wait_until(
        "three generations below the launcher back at its own",
        T,
        || (nice(deep), ioprio::get(deep).unwrap()) == (0, 0),
    );
    let _ = launcher.kill();
    let _ = launcher.wait();
    for p in [front.unwrap(), sibling, deep] {
        // SAFETY: kill has no memory preconditions; these are this test's grandchildren.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
}

/// A program started by the compositor of the app in front is a launch, though the compositor
/// is not the app's parent (GNOME Shell's dash, sway's `exec` while a D-Bus-activated terminal
/// is in front): the compositor is the process listening on the socket the app's environment
/// names (`$XDG_RUNTIME_DIR/$WAYLAND_DISPLAY`). Here a `nobody` process listening on a Unix
/// socket stands for it, and the app is `nobody`'s `sleep` in a session of its own.
#[test]
#[ignore = "needs root: make test runs it as root"]
fn a_launch_by_the_front_apps_compositor_is_raised() {
    require_root();
    let _s = serial();
    let d = Daemon::start("uxsched", "[storage]\nlaunch_budget_ms = 3000\n");
    let run = tempfile::tempdir().unwrap();
    let dir = run.path();
    std::os::unix::fs::chown(dir, Some(NOBODY), Some(NOBODY)).unwrap();
    let serve = format!(
        "import os, socket, subprocess, time\n\
         s = socket.socket(socket.AF_UNIX)\n\
         s.bind('{0}/wayland-7')\n\
         s.listen(8)\n\
         while not os.path.exists('{0}/go'): time.sleep(0.02)\n\
         subprocess.Popen(['sleep', '36'])\n\
         time.sleep(60)\n",
        dir.display()
    );
    let mut compositor = user_program(&["/usr/bin/python3", "-c", &serve], &[]);
    let socket = dir.join("wayland-7");
    wait_until("the compositor's socket", T, || socket.exists());
    let runtime = dir.display().to_string();
    let env = [
        ("XDG_RUNTIME_DIR", runtime.as_str()),
        ("WAYLAND_DISPLAY", "wayland-7"),
    ];
    let mut app = user_program(&["sleep", "61"], &env);
    let front = app.id() as i32;
    d.focus(Some(front));
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(dir.join("go"), "").unwrap();
    let root = compositor.id() as i32;
    let mut launched = None;
    wait_until("the compositor's program", T, || {
        launched = sleeper(root, "36");
        launched.is_some()
    });
    let launched = launched.unwrap();
    let rt4 = encode(CLASS_RT, 4);
    wait_until("the compositor's program raised", T, || {
        nice(launched) == -19 && ioprio::get(launched).unwrap() == rt4
    });
    wait_until("restored at its budget", T, || {
        nice(launched) == 0 && ioprio::get(launched).unwrap() == 0
    });
    for c in [&mut compositor, &mut app] {
        let _ = c.kill();
        let _ = c.wait();
    }
    // SAFETY: kill has no memory preconditions; this is the test's grandchild.
    unsafe { libc::kill(launched, libc::SIGKILL) };
}

/// sway for real (headless, as `nobody`): a program its `exec` starts while an app it did not
/// start is in front is a launch — though sway double-forks (the program's parent is init by
/// the time it runs) and the app is not sway's child.
#[test]
#[ignore = "needs root: runs sway headless as uid 65534 and the daemon"]
fn a_program_sways_exec_starts_is_a_launch_of_the_app_in_front() {
    require_root();
    let _s = serial();
    let d = Daemon::start("uxsched", "[storage]\nlaunch_budget_ms = 3000\n");
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&runtime).unwrap();
    std::os::unix::fs::chown(&runtime, Some(NOBODY), Some(NOBODY)).unwrap();
    let rt = runtime.display().to_string();
    let env = [
        ("XDG_RUNTIME_DIR", rt.as_str()),
        ("HOME", "/"),
        ("WLR_BACKENDS", "headless"),
        ("WLR_LIBINPUT_NO_DEVICES", "1"),
        ("WLR_RENDERER", "pixman"),
    ];
    let mut sway = user_program(&["sway", "-c", "/dev/null"], &env);
    let named = |prefix: &str| {
        std::fs::read_dir(&runtime)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with(prefix) && !n.ends_with(".lock"))
    };
    wait_until("sway's sockets", T, || {
        named("wayland-").is_some() && named("sway-ipc.").is_some()
    });
    let display = named("wayland-").unwrap();
    let app_env = [
        ("XDG_RUNTIME_DIR", rt.as_str()),
        ("WAYLAND_DISPLAY", display.as_str()),
    ];
    let mut app = user_program(&["sleep", "62"], &app_env);
    d.focus(Some(app.id() as i32));
    std::thread::sleep(Duration::from_millis(200));
    let out = Command::new("swaymsg")
        .arg("-s")
        .arg(runtime.join(named("sway-ipc.").unwrap()))
        .arg("exec sleep 38")
        .output()
        .expect("swaymsg (Debian package sway)");
    assert!(out.status.success(), "swaymsg: {out:?}");
    let mut launched = None;
    wait_until("sway's program", T, || {
        launched = process_tree::all_processes()
            .unwrap()
            .into_iter()
            .find(|&p| comm(p) == "sleep" && cmdline_has(p, "38"));
        launched.is_some()
    });
    let launched = launched.unwrap();
    let (raised, rt4) = (Instant::now(), encode(CLASS_RT, 4));
    let parent = process_tree::parent(launched).unwrap();
    wait_until("sway's program raised", T, || {
        nice(launched) == -19 && ioprio::get(launched).unwrap() == rt4
    });
    let waited = raised.elapsed();
    wait_until("restored at its budget", T, || {
        nice(launched) == 0 && ioprio::get(launched).unwrap() == 0
    });
    for c in [&mut app, &mut sway] {
        let _ = c.kill();
        let _ = c.wait();
    }
    // SAFETY: kill has no memory preconditions; sway's `sh` and its `sleep` are this test's.
    unsafe {
        libc::kill(launched, libc::SIGKILL);
        libc::kill(parent, libc::SIGKILL);
    }
    assert!(
        waited < Duration::from_millis(500),
        "raised after {waited:?}"
    );
}

fn cmdline_has(pid: i32, arg: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|b| *b == 0).any(|w| w == arg.as_bytes()))
}

/// `argv` as `nobody` with the environment `env` added, in a session of its own.
fn user_program(argv: &[&str], env: &[(&str, &str)]) -> std::process::Child {
    let mut c = Command::new(argv[0]);
    c.args(&argv[1..])
        .envs(env.iter().copied())
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .uid(NOBODY)
        .gid(NOBODY);
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    c.spawn().unwrap()
}

/// A loop device over a small file, detached on drop.
struct Loop {
    name: String,
    _file: tempfile::NamedTempFile,
}

impl Loop {
    fn new() -> Loop {
        let file = tempfile::NamedTempFile::new().unwrap();
        file.as_file().set_len(16 << 20).unwrap();
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(file.path())
            .output()
            .expect("losetup (util-linux)");
        assert!(out.status.success(), "losetup: {out:?}");
        let dev = String::from_utf8(out.stdout).unwrap();
        let name = dev.trim().trim_start_matches("/dev/").to_owned();
        Loop { name, _file: file }
    }

    fn elevator(&self) -> String {
        let line = std::fs::read_to_string(format!("/sys/block/{}/queue/scheduler", self.name));
        uxsched_os::block::parse_scheduler(&line.unwrap())
            .0
            .unwrap()
    }

    fn set(&self, elevator: &str) {
        let path = format!("/sys/block/{}/queue/scheduler", self.name);
        std::fs::write(path, elevator).unwrap();
        assert_eq!(self.elevator(), elevator);
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup")
            .args(["-d", &format!("/dev/{}", self.name)])
            .status();
    }
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn the_bfq_switch_is_undone_at_stop_after_sigkill_and_yields_to_others() {
    require_root();
    let _s = serial();
    let dev = Loop::new();
    dev.set("mq-deadline");
    let switch = |on: bool| {
        format!(
            "[storage]\nswitch_to_bfq = {on}\nbfq_devices = [\"{}\"]\n",
            dev.name
        )
    };
    let mut d = Daemon::configure("uxsched", &switch(true));
    d.spawn();
    assert_eq!(dev.elevator(), "bfq", "switched at start");
    d.stop(libc::SIGTERM);
    assert_eq!(dev.elevator(), "mq-deadline", "restored at stop");
    // Killed outright: the switch stays until the next daemon starts and restores it.
    d.spawn();
    assert_eq!(dev.elevator(), "bfq");
    d.stop(libc::SIGKILL);
    assert_eq!(dev.elevator(), "bfq", "nothing restores it after SIGKILL…");
    let config = std::fs::read_to_string(&d.config).unwrap();
    std::fs::write(&d.config, config.replace(&switch(true), &switch(false))).unwrap();
    d.spawn();
    assert_eq!(dev.elevator(), "mq-deadline", "…but the next start does");
    d.stop(libc::SIGTERM);
    // Someone else changes the elevator while the switch holds: theirs stays.
    std::fs::write(&d.config, config).unwrap();
    d.spawn();
    assert_eq!(dev.elevator(), "bfq");
    dev.set("kyber");
    d.stop(libc::SIGTERM);
    assert_eq!(dev.elevator(), "kyber", "another's change is left as it is");
}

/// Where a disk runs BFQ (here the loop device the switch puts on it), the app uxsched renices
/// gets best-effort level 4 as its own I/O priority — the level BFQ weight-raises; a derived
/// one (3 at nice −5) would lose that — and class none again at stop.
#[test]
#[ignore = "needs root: make test runs it as root"]
fn where_a_disk_runs_bfq_a_reniced_app_keeps_best_effort_4_until_stop() {
    require_root();
    let _s = serial();
    let dev = Loop::new();
    dev.set("mq-deadline");
    let config = format!(
        "[storage]\nswitch_to_bfq = true\nbfq_devices = [\"{}\"]\nfront_class = \"off\"\n\
         [tracker]\nlever = \"fair\"\n",
        dev.name
    );
    let mut d = Daemon::configure("uxsched", &config);
    d.spawn();
    assert_eq!(dev.elevator(), "bfq");
    let mut app = user_shell("sleep 60");
    let pid = app.id() as i32;
    assert_eq!(ioprio::get(pid).unwrap(), 0, "class none before");
    d.focus(Some(pid));
    let be4 = encode(CLASS_BE, 4);
    wait_until("the app reniced, with best-effort 4", T, || {
        nice(pid) < 0 && ioprio::get(pid).unwrap() == be4
    });
    d.stop(libc::SIGTERM);
    let after = (nice(pid), ioprio::get(pid).unwrap());
    let _ = app.kill();
    let _ = app.wait();
    assert_eq!(after, (0, 0), "nice and class none back at stop");
    assert_eq!(dev.elevator(), "mq-deadline");
}
