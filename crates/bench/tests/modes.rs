//! The baseline modes on real processes: a model app (threads `ui` and `render`) and a
//! background process in its own session. Each mode must set exactly what it documents and
//! put everything back on restore.

mod common;

use common::{require_root, serial, Scratch};
use std::io::BufReader;
use std::process::{Child, Command, Stdio};
use uxsched_bench::modes::{self, ModeEnv, ModeName, Targets};
use uxsched_bench::sys;

/// A frames model app waiting for "go" (so its threads exist and idle) and a sleeping
/// background session; both killed on drop.
struct Subjects {
    app: Child,
    bg: Child,
}

impl Subjects {
    fn start(scratch: &Scratch) -> Subjects {
        std::fs::create_dir_all(&scratch.0).unwrap();
        let mut app = Command::new(env!("CARGO_BIN_EXE_uxsched-bench-model"))
            .args(["--model", "frames", "--role", "app", "--duration-ms", "100"])
            .arg("--out")
            .arg(scratch.0.join("out.json"))
            .arg("--scratch")
            .arg(&scratch.0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(app.stdout.take().unwrap());
        uxsched_bench::models::expect_ready(&mut out).unwrap();
        let bg = Command::new("setsid")
            .args(["sleep", "60"])
            .spawn()
            .unwrap();
        // setsid(1) execs in place when it is not a group leader, so pid = session id.
        for _ in 0..100 {
            if sys::session_of(bg.id() as i32) == Some(bg.id() as i32) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Subjects { app, bg }
    }

    fn targets(&self) -> Targets {
        Targets {
            app: Some(self.app.id() as i32),
            background: Some(self.bg.id() as i32),
            ..Targets::default()
        }
    }

    fn thread(&self, name: &str) -> i32 {
        let pid = self.app.id() as i32;
        sys::threads(pid)
            .into_iter()
            .find(|&t| sys::thread_name(pid, t).as_deref() == Some(name))
            .unwrap()
    }

    fn sched(&self, tid: i32) -> sys::ThreadSched {
        sys::thread_sched(self.app.id() as i32, tid).unwrap()
    }

    fn bg_sched(&self) -> sys::ThreadSched {
        let pid = self.bg.id() as i32;
        sys::thread_sched(pid, pid).unwrap()
    }
}

impl Drop for Subjects {
    fn drop(&mut self) {
        for c in [&mut self.app, &mut self.bg] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn mode(name: ModeName, scratch: &Scratch) -> Box<dyn modes::Mode> {
    modes::build(
        name,
        &ModeEnv {
            uxsched_exe: None,
            scratch: scratch.0.clone(),
            daemon_config: String::new(),
        },
    )
    .unwrap()
}

fn cgroup_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap()
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn android_boosts_ui_and_render_and_groups_the_background() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("mode-android");
    let s = Subjects::start(&scratch);
    let (ui, render) = (s.thread("ui"), s.thread("render"));
    let main = s.app.id() as i32;
    let bg_group_before = cgroup_of(s.bg.id());
    let mut m = mode(ModeName::Android, &scratch);
    m.prepare().unwrap();
    m.apply(&s.targets()).unwrap();
    assert_eq!(s.sched(ui).nice, -10);
    assert_eq!(s.sched(render).nice, -10);
    assert_eq!(
        s.sched(main).nice,
        0,
        "only UI and render threads are boosted"
    );
    assert_eq!(s.bg_sched().nice, 10);
    assert!(
        cgroup_of(s.bg.id()).contains("uxsched-bench-bg-"),
        "{}",
        cgroup_of(s.bg.id())
    );
    m.restore().unwrap();
    assert_eq!(s.sched(ui).nice, 0);
    assert_eq!(s.sched(render).nice, 0);
    assert_eq!(s.bg_sched().nice, 0);
    assert_eq!(cgroup_of(s.bg.id()), bg_group_before);
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn s76_turns_autogroup_off_and_renices_both_sides_then_restores() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("mode-s76");
    let s = Subjects::start(&scratch);
    let autogroup = sys::autogroup();
    let bg = s.bg.id() as i32;
    let ioprio_before = sys::ioprio_get(bg).unwrap();
    let mut m = mode(ModeName::S76, &scratch);
    m.prepare().unwrap();
    if autogroup.is_some() {
        assert_eq!(sys::autogroup(), Some(false));
    }
    m.apply(&s.targets()).unwrap();
    assert_eq!(s.bg_sched().nice, 6);
    assert_eq!(
        sys::ioprio_get(bg).unwrap(),
        uxsched_os::ioprio::encode(uxsched_os::ioprio::CLASS_IDLE, 0)
    );
    assert_eq!(
        sys::ioprio_get(s.thread("ui")).unwrap(),
        uxsched_os::ioprio::encode(uxsched_os::ioprio::CLASS_BE, 0)
    );
    m.restore().unwrap();
    assert_eq!(sys::autogroup(), autogroup);
    assert_eq!(s.bg_sched().nice, 0);
    assert_eq!(sys::ioprio_get(bg).unwrap(), ioprio_before);
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn fifo_is_bounded_by_rttime_and_restored() {
    let _serial = serial();
    require_root();
    let scratch = Scratch::new("mode-fifo");
    let s = Subjects::start(&scratch);
    let pid = s.app.id();
    let limits = || std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let rt_line = |l: String| {
        l.lines()
            .find(|x| x.starts_with("Max realtime timeout"))
            .unwrap()
            .to_owned()
    };
    let before = rt_line(limits());
    let mut m = mode(ModeName::Fifo, &scratch);
    m.prepare().unwrap();
    m.apply(&s.targets()).unwrap();
    for tid in sys::threads(pid as i32) {
        let t = s.sched(tid);
        assert_eq!(
            (t.policy, t.rt_priority),
            (sys::SCHED_FIFO, 1),
            "thread {tid}"
        );
    }
    assert!(
        rt_line(limits()).contains("200000"),
        "{}",
        rt_line(limits())
    );
    assert_eq!(
        s.bg_sched().policy,
        sys::SCHED_OTHER,
        "the background is left alone"
    );
    m.restore().unwrap();
    for tid in sys::threads(pid as i32) {
        assert_eq!(s.sched(tid).policy, sys::SCHED_OTHER, "thread {tid}");
    }
    assert_eq!(rt_line(limits()), before);
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn schedqos_sets_policy_nice_and_slice_on_both_sides_and_restores_exactly() {
    use uxsched_os::sched;
    let _serial = serial();
    let scratch = Scratch::new("mode-schedqos");
    let s = Subjects::start(&scratch);
    let app = s.app.id() as i32;
    let bg = s.bg.id() as i32;
    let tids: Vec<i32> = sys::threads(app).into_iter().chain([bg]).collect();
    let before: Vec<sched::SchedAttr> = tids.iter().map(|&t| sched::get(t).unwrap()).collect();
    let mut m = mode(ModeName::Schedqos, &scratch);
    m.prepare().unwrap();
    m.apply(&s.targets()).unwrap();
    for tid in sys::threads(app) {
        let a = sched::get(tid).unwrap();
        assert_eq!(
            (a.policy, a.nice, a.runtime),
            (sched::SCHED_OTHER, -4, 8_000_000),
            "app thread {tid}: USER_INTERACTIVE"
        );
    }
    let b = sched::get(bg).unwrap();
    assert_eq!(
        (b.policy, b.nice, b.runtime),
        (sched::SCHED_BATCH, 4, 20_000_000),
        "background: BACKGROUND"
    );
    m.restore().unwrap();
    let after: Vec<sched::SchedAttr> = tids.iter().map(|&t| sched::get(t).unwrap()).collect();
    assert_eq!(after, before, "policy, nice and slice back exactly");
}
