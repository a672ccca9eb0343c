//! Each load layout gives the intended shape on the real kernel — checked on a real stress-ng
//! load started the way the runner starts it — and is undone afterwards, also when the run
//! fails; a layout the machine cannot provide is refused.

mod common;

use common::{plan, serial, Scratch};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use uxsched_bench::layout::Layout;
use uxsched_bench::loads::{self, LoadKind, LoadSpec, RunningLoad};
use uxsched_bench::models::ModelKind;
use uxsched_bench::modes::ModeName;
use uxsched_bench::runner::{self, Launcher};
use uxsched_bench::sys;

/// `/proc/<pid>/autogroup`, e.g. `/autogroup-42 nice 0`: the group's identity. A process of
/// the boot session (CI starts the tests there, without setsid) has no autogroup of its own:
/// the kernel prints nothing and schedules it in the root group, named `root` here.
fn autogroup_of(pid: i32) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/autogroup")).unwrap();
    text.split_whitespace().next().unwrap_or("root").to_owned()
}

/// Gives this test process a session, and so an autogroup, of its own when it has none (the
/// boot session's root group cannot be given a nice: the kernel answers EINVAL), as a login
/// terminal would be.
fn ensure_own_autogroup() {
    let me = std::process::id() as i32;
    if autogroup_of(me) == "root" {
        // SAFETY: setsid has no memory-safety preconditions.
        let sid = unsafe { libc::setsid() };
        assert!(
            sid == me,
            "setsid for an autogroup of our own: {}",
            std::io::Error::last_os_error()
        );
    }
    assert_ne!(autogroup_of(me), "root", "setsid gave us an autogroup");
}

fn cpu_cgroup_of(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap()
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, ctl, path) = (parts.next()?, parts.next()?, parts.next()?);
            (ctl.split(',').any(|c| c == "cpu") || ctl.is_empty()).then(|| path.to_owned())
        })
        .unwrap()
}

/// A one-worker stress-ng started where the layout puts loads.
fn start_load(active: &uxsched_bench::layout::ActiveLayout, scratch: &Scratch) -> RunningLoad {
    let spec = LoadSpec {
        kind: LoadKind::Cpu,
        workers: 1,
        scratch: scratch.0.clone(),
    };
    loads::prepare(&spec).unwrap();
    let load = loads::start(
        &spec,
        &scratch.0.join("load"),
        &active.load_placement().unwrap(),
    );
    let load = load.unwrap();
    // stress-ng forks its worker shortly after starting.
    for _ in 0..100 {
        if sys::load_members(load.leader()).len() >= 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    load
}

fn own_sid() -> i32 {
    sys::session_of(std::process::id() as i32).unwrap()
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn same_session_shares_the_app_session_and_autogroup_other_session_does_not() {
    let _s = serial();
    let scratch = Scratch::new("layout-sessions");
    let me = std::process::id() as i32;
    let mut active = Layout::SameSession.enter().unwrap();
    let load = start_load(&active, &scratch);
    let members = sys::load_members(load.leader());
    assert!(members.len() >= 2, "stress-ng and its worker: {members:?}");
    let user = uxsched_bench::models::xapp::AppUser::ensure().unwrap();
    for &pid in &members {
        assert_eq!(sys::session_of(pid), Some(own_sid()), "pid {pid}");
        assert_eq!(autogroup_of(pid), autogroup_of(me), "pid {pid}");
        let uid = std::os::unix::fs::MetadataExt::uid(
            &std::fs::metadata(format!("/proc/{pid}")).unwrap(),
        );
        assert_eq!(
            uid, user.uid,
            "pid {pid}: the load runs as the bench's user"
        );
    }
    drop(load);
    active.restore().unwrap();

    let mut active = Layout::OtherSession.enter().unwrap();
    let load = start_load(&active, &scratch);
    for pid in sys::load_members(load.leader()) {
        assert_eq!(sys::session_of(pid), Some(load.leader()), "pid {pid}");
        assert_ne!(autogroup_of(pid), autogroup_of(me), "pid {pid}");
    }
    let leader = load.leader();
    drop(load);
    active.restore().unwrap();
    assert!(sys::load_members(leader).is_empty(), "load killed");
}

/// A plan whose model cannot start: the run fails after the layout was entered.
fn failing_run(layout: Layout, scratch: &Scratch) -> anyhow::Result<runner::Runs> {
    let mut p = plan(
        ModelKind::Alarm,
        &[ModeName::Idle],
        500,
        LoadKind::Cpu,
        scratch,
    );
    p.layout = layout;
    let mut env = common::env(scratch);
    env.launcher = Launcher {
        program: "/nonexistent/uxsched-bench-model".into(),
        prefix: Vec::new(),
    };
    runner::run(&p, &env)
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn no_autogroup_is_off_during_the_run_and_restored_after_even_on_failure() {
    let _s = serial();
    let scratch = Scratch::new("layout-noag");
    let before = sys::autogroup();
    assert_eq!(before, Some(true), "this test starts from autogroup on");
    let mut active = Layout::NoAutogroup.enter().unwrap();
    assert_eq!(sys::autogroup(), Some(false), "off during the run");
    active.restore().unwrap();
    assert_eq!(sys::autogroup(), before, "restored");

    let err = failing_run(Layout::NoAutogroup, &scratch).err().unwrap();
    assert!(format!("{err:#}").contains("starting the app"), "{err:#}");
    assert_eq!(sys::autogroup(), before, "restored after a failed run");
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn units_puts_app_and_load_in_equal_weight_cgroups_and_removes_them() {
    let _s = serial();
    let scratch = Scratch::new("layout-units");
    let slice =
        Path::new("/sys/fs/cgroup/cpu").join(format!("uxsched-bench-units-{}", std::process::id()));
    let mut active = Layout::Units.enter().unwrap();
    assert!(active.note.contains("cgroup v1"), "{}", active.note);
    for unit in ["app", "load"] {
        let shares = std::fs::read_to_string(slice.join(unit).join("cpu.shares")).unwrap();
        assert_eq!(shares.trim(), "1024", "{unit}");
    }
    let load = start_load(&active, &scratch);
    let members = sys::load_members(load.leader());
    assert!(members.len() >= 2, "{members:?}");
    let unit = format!("/uxsched-bench-units-{}/load", std::process::id());
    for pid in members {
        assert_eq!(cpu_cgroup_of(pid), unit, "pid {pid} joined before exec");
    }
    let app_procs = active
        .app_cgroup()
        .unwrap()
        .expect("units has an app cgroup");
    let fd = Some(app_procs.as_raw_fd());
    let mut cmd = Command::new("sleep");
    cmd.arg("30");
    // SAFETY: the runner's own pre-exec step (a write to an open fd).
    unsafe { cmd.pre_exec(move || uxsched_bench::layout::join_cgroup_in_child(fd)) };
    let mut app = cmd.spawn().unwrap();
    let app_cgroup = cpu_cgroup_of(app.id() as i32);
    let _ = app.kill();
    let _ = app.wait();
    assert_eq!(
        app_cgroup,
        format!("/uxsched-bench-units-{}/app", std::process::id())
    );
    drop(load);
    active.restore().unwrap();
    assert!(!slice.exists(), "{} removed", slice.display());

    assert!(failing_run(Layout::Units, &scratch).is_err());
    assert!(!slice.exists(), "removed after a failed run");
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn a_layout_that_needs_autogroup_is_refused_when_it_is_off() {
    let _s = serial();
    let before = sys::autogroup();
    sys::set_autogroup(false).unwrap();
    let refused = Layout::SameSession.enter();
    let refused_other = Layout::OtherSession.enter();
    sys::set_autogroup(before.unwrap()).unwrap();
    let err = format!("{:#}", refused.expect_err("same-session refused"));
    assert!(
        err.contains("needs autogroup") && err.contains("--layout no-autogroup"),
        "{err}"
    );
    assert!(refused_other.is_err(), "other-session refused too");
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn a_raised_session_autogroup_is_refused_not_measured() {
    let _s = serial();
    ensure_own_autogroup();
    let path = format!("/proc/{}/autogroup", std::process::id());
    std::fs::write(&path, "-5").unwrap();
    let refused = Layout::SameSession.enter();
    std::fs::write(&path, "0").unwrap();
    let err = format!(
        "{:#}",
        refused.expect_err("a boosted harness session is refused")
    );
    assert!(
        err.contains("nice -5") && err.contains("/autogroup"),
        "{err}"
    );
}
