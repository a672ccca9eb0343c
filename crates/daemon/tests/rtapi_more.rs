//! The real-time API's requests beyond a thread's own grant (docs/api.md), against the real
//! daemon and kernel, as root: dependencies raised with the app and released (on undepend, on
//! the client's close or death, on the dependency's exit), refused by policy; a hint session
//! raising and then dropping a boost; an interaction hint; and RT refused (and revoked) when
//! the process's RLIMIT_RTTIME is unlimited — without any thread ever spinning at RT.
//!
//! Clients are this test's threads or child processes, the fixture's `moreclient` role.
//!
//! No test here lowers this test process's own RLIMIT_RTTIME (`limit_rttime`): the container
//! runs without CAP_SYS_RESOURCE, so a lowered hard limit can never be raised again — by this
//! process or by a child it spawns — and the "unlimited" test needs its children to start
//! unlimited. Real-time clients here are children that lower their own limit.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use uxsched_client::{Ask, Client, Error, Refusal, Reply, Request, Until};
use uxsched_os::sched::{self, SCHED_OTHER};

const WHAT_ENV: &str = "UXSCHED_TEST_WHAT";
const ON_ENV: &str = "UXSCHED_TEST_ON";

/// A client child, the fixture's `moreclient` role: `what` is `depend` (nice −5 for its
/// thread, then depend on `on`) or `rt-unlimited` (FIFO 5, asked only if its RLIMIT_RTTIME is
/// unlimited); `reply` is its last reply. It only sleeps from then on.
struct MoreChild {
    child: Child,
    reply: Reply,
}

impl MoreChild {
    fn spawn(d: &Daemon, what: &str, on: i32) -> MoreChild {
        let mut c = Command::new(FIXTURE);
        c.arg("moreclient")
            .env(CONFIG_ENV, &d.socket)
            .env(WHAT_ENV, what)
            .env(ON_ENV, on.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let line = out.lines().next().and_then(Result::ok);
        let Some(line) = line else {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err);
            let _ = child.kill();
            panic!("the {what} client printed no reply; its stderr:\n{err}");
        };
        drop(child.stderr.take()); // it only sleeps from now on
        MoreChild {
            child,
            reply: serde_json::from_str(&line).unwrap(),
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for MoreChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn me() -> i32 {
    uxsched_client::this_thread()
}

/// Whether the kernel has utilisation clamping, by its sysctl (present exactly with
/// CONFIG_UCLAMP_TASK): the oracle the daemon's own probe is checked against.
fn has_uclamp() -> bool {
    std::path::Path::new("/proc/sys/kernel/sched_util_clamp_min").exists()
}

/// Report 2x over `target` `n` times; the last session state.
fn overrun(c: &mut Client, id: u64, target: u64, n: usize) -> Vec<uxsched_client::Session> {
    (0..n)
        .map(|_| {
            c.hint(Ask::HintReport {
                session: id,
                actual_ns: 2 * target,
            })
            .unwrap()
        })
        .collect()
}

fn refused<T: std::fmt::Debug>(r: Result<T, Error>) -> (Refusal, String) {
    match r {
        Err(Error::Refused { reason, message }) => (reason, message),
        other => panic!("not refused: {other:?}"),
    }
}

fn boosted_pids(d: &Daemon) -> Vec<i32> {
    d.status().boosted.iter().map(|b| b.pid).collect()
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn a_dependency_is_raised_with_the_app_and_released_on_undepend_close_and_death() {
    require_root();
    let _s = serial();
    ordinary();
    let d = Daemon::start("eimos", "");
    let x = App::spawn("decoder,mixer");
    let before = snapshot(&x.tids());
    let mut c = Client::connect(&d.socket).unwrap();
    // Depending while the thread holds no grant raises nothing yet.
    let r = c.send_for_this_thread(Ask::Depend { on: x.pid() }).unwrap();
    assert_eq!(r.raised, Some(vec![]));
    assert_restored("no grant, no raise", &before);
    // The app raised: its dependency with it, every thread of it.
    c.for_this_thread(Ask::HighPriority { nice: -5 }).unwrap();
    for t in x.tids() {
        assert_eq!(nice(t), -5, "tid {t} of the dependency");
    }
    // Changed on the fly: a latency hint is passed on, the nice goes back.
    c.for_this_thread(Ask::Latency { slice_us: 500 }).unwrap();
    for t in x.tids() {
        assert_eq!((nice(t), attr(t).runtime), (0, 500_000), "tid {t}");
    }
    let r = c.send_for_this_thread(Ask::Depend { on: x.pid() }).unwrap();
    let mut raised = r.raised.unwrap();
    raised.sort_unstable();
    assert_eq!(raised, x.tids());
    // Undepend: restored exactly while the app keeps its own grant.
    c.send_for_this_thread(Ask::Undepend { on: x.pid() })
        .unwrap();
    assert_restored("after undepend", &before);
    assert_eq!(attr(me()).runtime, 500_000);
    // The connection closes: the app's grant and the dependency end.
    c.send_for_this_thread(Ask::Depend { on: x.pid() }).unwrap();
    assert_eq!(nice(x.tid("decoder")), 0);
    assert_eq!(attr(x.tid("decoder")).runtime, 500_000);
    drop(c);
    wait_until("restored after close", Duration::from_secs(5), || {
        all_restored(&before)
    });
    // One thread of X named: only it is raised. (An RT app's dependency gets its rule's
    // `min_nice`, not RT: deps.rs's unit test — RT cannot be granted where this suite may
    // run, a cpu cgroup without RT runtime.)
    let mut c = Client::connect(&d.socket).unwrap();
    let mixer = x.tid("mixer");
    c.for_this_thread(Ask::HighPriority { nice: -4 }).unwrap();
    let r = c.send_for_this_thread(Ask::Depend { on: mixer }).unwrap();
    assert_eq!(r.raised, Some(vec![mixer]));
    assert_eq!((nice(mixer), nice(x.tid("decoder"))), (-4, 0));
    drop(c);
    wait_until(
        "restored after the second close",
        Duration::from_secs(5),
        || all_restored(&before),
    );
    // A client process killed mid-grant: its dependency is released.
    let client = MoreChild::spawn(&d, "depend", x.pid());
    assert!(client.reply.ok, "{:?}", client.reply);
    assert_eq!(nice(x.tid("decoder")), -5);
    // SAFETY: killing our own child.
    unsafe { libc::kill(client.pid(), libc::SIGKILL) };
    drop(client);
    wait_until(
        "restored after the client died",
        Duration::from_secs(5),
        || all_restored(&before),
    );
    // X exits: the dependency is forgotten (nothing of X left in the journal).
    let client = MoreChild::spawn(&d, "depend", x.pid());
    assert!(client.reply.ok, "{:?}", client.reply);
    let xpid = x.pid();
    assert!(boosted_pids(&d).contains(&xpid));
    x.kill();
    wait_until("X forgotten", Duration::from_secs(5), || {
        !boosted_pids(&d).contains(&xpid)
    });
    assert!(
        boosted_pids(&d).contains(&client.pid()),
        "the app keeps its own"
    );
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn a_dependency_the_policy_does_not_allow_is_refused_with_the_reason() {
    require_root();
    let _s = serial();
    ordinary();
    let d = Daemon::start(
        "eimos",
        "[[rtapi.allow]]\nuids = [0]\ndependencies = [\"/usr/lib/nothing-here\"]\n",
    );
    let x = App::spawn("worker");
    let before = snapshot(&x.tids());
    let mut c = Client::connect(&d.socket).unwrap();
    c.for_this_thread(Ask::HighPriority { nice: -5 }).unwrap();
    let (why, msg) = refused(c.send_for_this_thread(Ask::Depend { on: x.pid() }));
    assert_eq!(why, Refusal::NotAllowed, "{msg}");
    assert!(msg.contains("`dependencies`"), "{msg}");
    assert_restored("refused: untouched", &before);
    drop(c);
    // Same uid only (the default rule): another user's process is refused; a listed
    // executable is allowed whoever runs it.
    let sleep = std::fs::canonicalize("/bin/sleep").unwrap();
    let d2 = Daemon::start(
        "eimos",
        &format!(
            "[[rtapi.allow]]\nuids = [0]\ndependencies = [\"same-uid\", \"{}\"]\n",
            sleep.display()
        ),
    );
    let mut other = Command::new(&sleep);
    other.arg("30").uid(65534).gid(65534);
    let mut other = other.spawn().unwrap();
    let other_pid = other.id() as i32;
    let mut c = Client::connect(&d2.socket).unwrap();
    c.for_this_thread(Ask::HighPriority { nice: -5 }).unwrap();
    let r = c.send_for_this_thread(Ask::Depend { on: other_pid });
    let _ = other.kill();
    let _ = other.wait();
    assert_eq!(
        r.unwrap().raised,
        Some(vec![other_pid]),
        "listed executable"
    );
    let d3 = Daemon::start("eimos", "");
    let mut other = Command::new(&sleep)
        .arg("30")
        .uid(65534)
        .gid(65534)
        .spawn()
        .unwrap();
    let mut c3 = Client::connect(&d3.socket).unwrap();
    let r = c3.send_for_this_thread(Ask::Depend {
        on: other.id() as i32,
    });
    let _ = other.kill();
    let _ = other.wait();
    let (why, msg) = refused(r);
    assert_eq!(why, Refusal::NotAllowed, "{msg}");
    assert!(msg.contains("65534") && msg.contains("same-uid"), "{msg}");
    // Nobody can depend on a process that is not there.
    let (why, _) = refused(c3.send_for_this_thread(Ask::Depend { on: i32::MAX - 1 }));
    assert_eq!(why, Refusal::Identity);
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn rt_is_refused_when_rlimit_rttime_is_unlimited() {
    require_root();
    let _s = serial();
    ordinary();
    assert_eq!(
        uxsched_os::peer::rttime_hard(0).unwrap(),
        None,
        "this test process's hard RLIMIT_RTTIME is not unlimited, and without \
         CAP_SYS_RESOURCE it cannot be raised: run it from a shell with `ulimit -H -r` unlimited"
    );
    let d = Daemon::start("eimos", "");
    // The child inherits the unlimited hard limit (and checks it before asking): refused, its
    // thread stays ordinary — and it only ever sleeps, so even a wrong grant could not run away.
    let unlimited = MoreChild::spawn(&d, "rt-unlimited", 0);
    assert_eq!(
        unlimited.reply.refused,
        Some(Refusal::Rttime),
        "{:?}",
        unlimited.reply
    );
    let msg = unlimited.reply.error.clone().unwrap();
    assert!(
        msg.contains("unlimited") && msg.contains("prlimit"),
        "{msg}"
    );
    for t in tids(unlimited.pid()) {
        assert_eq!(attr(t).policy, SCHED_OTHER, "tid {t}");
    }
    assert!(!boosted_pids(&d).contains(&unlimited.pid()));
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn a_hint_session_raises_a_boost_while_over_target_and_drops_it_when_reports_stop() {
    require_root();
    let _s = serial();
    ordinary();
    let d = Daemon::start("eimos", "");
    let before = attr(me());
    let mut c = Client::connect(&d.socket).unwrap();
    let target = 50_000_000; // 50 ms: stale after 0.5 s without a report
    let s = c.create_hint_session(&[me()], target).unwrap();
    assert_eq!((s.nice, s.tids.clone()), (0, vec![me()]));
    assert_eq!(
        s.uclamp.is_some(),
        !has_uclamp(),
        "says why there is no uclamp.min"
    );
    // Over target (2x): the boost rises report after report.
    let mut nices = Vec::new();
    for _ in 0..6 {
        let s = c
            .hint(Ask::HintReport {
                session: s.id,
                actual_ns: 2 * target,
            })
            .unwrap();
        nices.push(s.nice);
        assert_eq!(
            attr(me()).nice,
            s.nice,
            "the kernel holds what the reply says"
        );
    }
    assert!(nices.windows(2).all(|w| w[1] <= w[0]), "{nices:?}");
    assert!(nices[5] <= -5, "{nices:?}");
    // The slice: a tenth of the target, never above the kernel's default.
    let default_slice = before.runtime;
    assert_eq!(attr(me()).runtime, (target / 10).min(default_slice));
    // Under target: it comes down.
    let mut s2 = c
        .hint(Ask::HintReport {
            session: s.id,
            actual_ns: target / 2,
        })
        .unwrap();
    assert!(s2.nice > nices[5], "{s2:?}");
    // Reports stop: the boost drops after 10 targets, restored exactly.
    wait_until("stale session unboosted", Duration::from_secs(3), || {
        attr(me()) == before
    });
    // A report revives it; close ends it at once.
    for _ in 0..3 {
        s2 = c
            .hint(Ask::HintReport {
                session: s.id,
                actual_ns: 2 * target,
            })
            .unwrap();
    }
    assert!(s2.nice < 0 && attr(me()).nice == s2.nice, "{s2:?}");
    c.send_for_this_thread(Ask::HintClose { session: s.id })
        .unwrap();
    assert_eq!(attr(me()), before);
    let (why, _) = refused(c.hint(Ask::HintReport {
        session: s.id,
        actual_ns: 1,
    }));
    assert_eq!(why, Refusal::NoSession);
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn a_hint_sessions_uclamp_min_is_what_the_kernel_can_do_and_says_why_not() {
    require_root();
    let _s = serial();
    ordinary();
    let d = Daemon::start("eimos", "");
    let f = d.status().features;
    assert_eq!(f["uclamp"], serde_json::json!(has_uclamp()), "{f}");
    let before = attr(me());
    let mut c = Client::connect(&d.socket).unwrap();
    let target = 20_000_000;
    let s = c.create_hint_session(&[me()], target).unwrap();
    let last = overrun(&mut c, s.id, target, 6).pop().unwrap();
    let now = attr(me());
    // Nice and slice are given whatever the kernel's clamps.
    assert!(last.nice <= -5 && now.nice == last.nice, "{last:?} {now:?}");
    assert_eq!(now.runtime, (target / 10).min(before.runtime));
    assert_eq!(last.slice_us, Some(now.runtime / 1000));
    if has_uclamp() {
        let u = last.uclamp_min.expect("uclamp.min given");
        assert!(u > 0 && last.uclamp.is_none(), "{last:?}");
        assert_eq!(now.uclamp.map(|x| x.min), Some(u), "the kernel holds it");
    } else {
        // The honest refusal: no value, the reason (the same in `status`), no clamp written.
        let why = last.uclamp.clone().expect("a reason");
        assert!(why.contains("CONFIG_UCLAMP_TASK"), "{why}");
        assert_eq!(last.uclamp_min, None);
        let absent = f["uclamp_absent"].as_str().unwrap_or_default().to_owned();
        assert!(
            !absent.is_empty() && why.starts_with(&absent),
            "{why} / {absent}"
        );
        assert_eq!(now.uclamp, None);
    }
    c.send_for_this_thread(Ask::HintClose { session: s.id })
        .unwrap();
    assert_eq!(attr(me()), before);
}

#[test]
#[ignore = "needs a kernel with CONFIG_UCLAMP_TASK (this one has none)"]
fn a_hint_session_sets_uclamp_min_and_restores_it_exactly() {
    require_root();
    // Fails, never passes, where there is nothing to test.
    if let Err(why) = sched::uclamp_support() {
        panic!("this test needs utilisation clamping and the kernel has none: {why}");
    }
    assert!(
        has_uclamp(),
        "the probe found uclamp, the kernel has no uclamp sysctl"
    );
    let _s = serial();
    ordinary();
    let mut d = Daemon::start("eimos", "[rtapi]\nhint_uclamp_max = 512\n");
    let before = attr(me());
    let orig = before.uclamp.expect("this thread's clamps are read");
    let mut c = Client::connect(&d.socket).unwrap();
    let target = 20_000_000;
    let s = c.create_hint_session(&[me()], target).unwrap();
    assert_eq!(s.uclamp_min, Some(0));
    let limit: u32 = std::fs::read_to_string("/proc/sys/kernel/sched_util_clamp_min")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The boost rises report by report; uclamp.min with it, the kernel holding each value.
    let mut seen = Vec::new();
    for s in overrun(&mut c, s.id, target, 6) {
        let want = s.uclamp_min.unwrap();
        assert_eq!(
            attr(me()).uclamp.unwrap().min,
            want.clamp(orig.min, orig.max)
        );
        seen.push(want);
    }
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert!(seen[5] > 0 && seen[5] <= 512.min(limit), "{seen:?}");
    // Close: back exactly (clamps included).
    c.send_for_this_thread(Ask::HintClose { session: s.id })
        .unwrap();
    assert_eq!(attr(me()), before);
    // Boosted again, then the daemon stops: back exactly too.
    let s = c.create_hint_session(&[me()], target).unwrap();
    overrun(&mut c, s.id, target, 3);
    assert!(attr(me()).uclamp.unwrap().min > orig.min || limit <= orig.min);
    d.stop(libc::SIGTERM);
    assert_eq!(attr(me()), before);
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn an_interaction_boosts_its_thread_like_the_ui_thread_for_a_bounded_time() {
    require_root();
    let _s = serial();
    ordinary();
    let d = Daemon::start(
        "eimos",
        "min_nice = -12\n[uxsched]\nslice_us = 300\n[rtapi]\ninteraction_max_ms = 600\n",
    );
    let before = attr(me());
    let mut c = Client::connect(&d.socket).unwrap();
    let g = c.for_this_thread(Ask::InteractionStart).unwrap();
    assert_eq!((g.nice, g.slice_us), (Some(-12), Some(300)));
    c.for_this_thread(Ask::InteractionEnd).unwrap();
    assert_eq!(attr(me()), before, "ended: restored exactly");
    // Never ended: it lapses after interaction_max_ms.
    c.for_this_thread(Ask::InteractionStart).unwrap();
    assert_eq!(attr(me()).nice, -12);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(attr(me()).nice, -12, "still within the bound");
    wait_until("lapsed", Duration::from_secs(2), || attr(me()) == before);
    // Another process's thread cannot be named.
    let other = App::spawn("ui");
    let (why, _) = refused(c.call(&Request {
        tid: other.tid("ui"),
        ask: Ask::InteractionStart,
        until: Until::Close,
    }));
    assert_eq!(why, Refusal::Identity);
}
