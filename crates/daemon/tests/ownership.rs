//! Boosts reach exactly the objects they mean and end with them (issue 8, items 1–3), on the
//! real kernel as root: a session shared with a CPU hog is not raised; a session's autogroup is
//! put back when the app that raised it exits while the session lives on; an I/O priority a
//! boosted thread's children inherited is taken back.

mod common;

use common::*;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use uxsched_os::{autogroup, ioprio};

const T: Duration = Duration::from_secs(5);

/// `sh -c script` in a session of its own; killed (with its session) on drop.
struct Session(Child);

impl Session {
    fn start(script: &str) -> Session {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null());
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        Session(cmd.spawn().unwrap())
    }

    fn leader(&self) -> i32 {
        self.0.id() as i32
    }

    /// The leader's child that runs `sleep <arg>` (after its exec: before it, a forked shell
    /// still shows the whole script).
    fn child_running(&self, arg: &str) -> i32 {
        let want = format!("sleep\0{arg}\0");
        let mut found = None;
        wait_until(&format!("a child running sleep {arg}"), T, || {
            found = children(self.leader()).into_iter().find(|&p| {
                std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c == want.as_bytes())
            });
            found.is_some()
        });
        found.unwrap()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: signalling the session's process group, which we created.
        unsafe { libc::kill(-self.leader(), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .collect()
}

fn session_nice(pid: i32) -> i32 {
    autogroup::get(pid).unwrap()
}

#[test]
#[ignore = "needs root and autogroup: make test runs it as root"]
fn a_session_shared_with_a_hog_is_not_raised_with_the_app() {
    require_root();
    assert!(
        autogroup::enabled(),
        "needs kernel.sched_autogroup_enabled=1"
    );
    let _s = serial();
    let d = Daemon::start("uxsched", "");
    // A terminal's session: the shell started the app and a build beside it.
    let term = Session::start("sleep 1000 & sleep 1001 & wait");
    let app = term.child_running("1000");
    let hog = term.child_running("1001");
    d.focus(Some(app));
    wait_until("the app's UI thread boosted", T, || nice(app) == -19);
    std::thread::sleep(Duration::from_millis(300)); // several rescans
    assert_eq!(session_nice(hog), 0, "the hog's session must not be raised");
    assert_eq!(nice(hog), 0);
    // The app is reached another way: the foreground cgroup.
    assert_eq!(cgroup(app), d.group_rel("fg"));
    d.focus(None);
    wait_until("restored", T, || nice(app) == 0 && cgroup(app) == "/");
}

#[test]
#[ignore = "needs root and autogroup: make test runs it as root"]
fn a_session_raised_for_an_app_is_restored_when_the_app_exits() {
    require_root();
    assert!(
        autogroup::enabled(),
        "needs kernel.sched_autogroup_enabled=1"
    );
    let _s = serial();
    let mut d = Daemon::start("uxsched", "");
    // The app leads its own session and forked a helper that outlives it.
    let app_session = Session::start("sleep 1001 & exec sleep 1000");
    let app = app_session.leader();
    let helper = app_session.child_running("1001");
    d.focus(Some(app));
    wait_until("the app's session raised", T, || {
        session_nice(helper) == -19
    });
    let st = d.status();
    assert!(
        st.boosted
            .iter()
            .any(|b| b.objects.iter().any(|o| o.starts_with("autogroup-"))),
        "status names the session: {st:?}"
    );
    // SAFETY: killing our own child.
    unsafe { libc::kill(app, libc::SIGKILL) };
    wait_until("the session put back through the helper", T, || {
        session_nice(helper) == 0
    });
    d.stop(libc::SIGTERM);
    assert_eq!(session_nice(helper), 0);
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn io_priority_inherited_by_a_boosted_threads_children_is_taken_back() {
    use std::io::Write;
    require_root();
    let _s = serial();
    let mut d = Daemon::start("shuffledog", "");
    // The UI thread (the shell) forks a child only after it has been boosted.
    let mut app_session = Session::start("read go; sleep 1000 & wait");
    let app = app_session.leader();
    let original = ioprio::get(app).unwrap();
    let rt4 = ioprio::encode(ioprio::CLASS_RT, 4);
    d.focus(Some(app));
    wait_until("the UI thread gets real-time I/O", T, || {
        ioprio::get(app).unwrap() == rt4
    });
    let stdin = app_session.0.stdin.as_mut().unwrap();
    stdin.write_all(b"go\n").unwrap();
    stdin.flush().unwrap();
    let child = app_session.child_running("1000");
    wait_until("the child's inherited class taken back", T, || {
        ioprio::get(child).unwrap() == original
    });
    assert_eq!(
        ioprio::get(app).unwrap(),
        rt4,
        "the UI thread keeps its boost"
    );
    // (Unfocused, shuffledog would demote it as a background app: stop instead.)
    d.stop(libc::SIGTERM);
    assert_eq!(ioprio::get(app).unwrap(), original);
    assert_eq!(ioprio::get(child).unwrap(), original);
}
