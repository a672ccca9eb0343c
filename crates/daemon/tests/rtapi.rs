//! The real-time API (docs/api.md) against the real daemon and kernel, as root: grants applied
//! and restored exactly, refusals with their reasons (policy, identity, caps,
//! rate, the RT bound), a runaway RT thread stopped by RLIMIT_RTTIME, the canary revoking
//! grants, a client that dies mid-grant, and malformed lines in a session.
//!
//! Clients are this test (its threads) or child processes, the fixture's `rtclient` role: ask
//! once for their thread, print the reply line, then hold, spin or exit.

mod common;

use common::*;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use uxsched_client::{Ask, Client, Error, Policy, Refusal, Reply, Request, Until};
use uxsched_os::sched::{self, SCHED_FIFO};

const ASK_ENV: &str = "UXSCHED_TEST_ASK";
const THEN_ENV: &str = "UXSCHED_TEST_THEN";
const RTTIME_ENV: &str = "UXSCHED_TEST_RTTIME";

/// A client child: asks `ask` ("nice" or an RT priority), then `then` (hold, spin, exit).
struct RtChild {
    child: Child,
    reply: Reply,
}

impl RtChild {
    fn spawn(d: &Daemon, ask: &str, then: &str, setup: impl FnOnce(&mut Command)) -> RtChild {
        let mut c = Command::new(common::any_user::exe_for_any_user());
        c.arg("rtclient")
            .env(CONFIG_ENV, &d.socket)
            .env(ASK_ENV, ask)
            .env(THEN_ENV, then)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        setup(&mut c);
        let mut child = c.spawn().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let line = (out.lines().next())
            .and_then(Result::ok)
            .expect("the client's reply line");
        let reply = serde_json::from_str(&line).unwrap();
        RtChild { child, reply }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for RtChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn me() -> i32 {
    uxsched_client::this_thread()
}

fn refused(r: Result<uxsched_client::Granted, Error>) -> (Refusal, String) {
    match r {
        Err(Error::Refused { reason, message }) => (reason, message),
        other => panic!("not refused: {other:?}"),
    }
}

fn ask(c: &mut Client, tid: i32, ask: Ask) -> Result<uxsched_client::Granted, Error> {
    c.call(&Request {
        tid,
        ask,
        until: Until::Close,
    })
}

const RT10: Ask = Ask::Realtime {
    policy: Policy::Fifo,
    priority: 10,
};

#[test]
#[ignore = "needs root: make test runs it as root"]
fn grants_change_on_the_fly_and_are_restored_exactly_on_reset_and_on_close() {
    require_root();
    let _s = serial();
    ordinary();
    uxsched_client::limit_rttime(200_000).unwrap();
    let d = Daemon::start("eimos", "");
    let before = attr(me());
    let mut c = Client::connect(&d.socket).unwrap();
    let g = c.for_this_thread(RT10).unwrap();
    assert_eq!(
        (g.policy.as_str(), g.priority, g.reset_on_fork),
        ("fifo", Some(10), true)
    );
    let now = attr(me());
    assert_eq!((now.policy, now.priority), (SCHED_FIFO, 10));
    assert_ne!(now.flags & sched::SCHED_FLAG_RESET_ON_FORK, 0);
    // On the fly: back to the fair class at nice -5, then a latency slice.
    let g = c.for_this_thread(Ask::HighPriority { nice: -5 }).unwrap();
    assert_eq!((g.policy.as_str(), g.nice), ("other", Some(-5)));
    assert_eq!(attr(me()).nice, -5);
    let g = c.for_this_thread(Ask::Latency { slice_us: 500 }).unwrap();
    assert_eq!(g.slice_us, Some(500));
    assert_eq!((attr(me()).nice, attr(me()).runtime), (0, 500_000));
    c.for_this_thread(Ask::Reset).unwrap();
    assert_eq!(attr(me()), before, "reset restores exactly");
    // A grant ends with its connection.
    c.for_this_thread(RT10).unwrap();
    assert_eq!(attr(me()).policy, SCHED_FIFO);
    drop(c);
    wait_until("restored after close", Duration::from_secs(5), || {
        attr(me()) == before
    });
    assert!(d.status().boosted.is_empty());
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn refusals_say_why_policy_and_identity() {
    require_root();
    let _s = serial();
    ordinary();
    let d = Daemon::start(
        "eimos",
        "[[rtapi.allow]]\nuids = [0]\nmax_rt_priority = 5\nmin_nice = -3\n",
    );
    let mut c = Client::connect(&d.socket).unwrap();
    let before = attr(me());
    // Policy: above the rule's maximum priority and minimum nice.
    let (why, msg) = refused(c.for_this_thread(RT10));
    assert_eq!(why, Refusal::NotAllowed, "{msg}");
    assert!(msg.contains("max_rt_priority"), "{msg}");
    let (why, msg) = refused(c.for_this_thread(Ask::HighPriority { nice: -10 }));
    assert_eq!(why, Refusal::NotAllowed, "{msg}");
    assert!(msg.contains("min_nice"), "{msg}");
    // Another uid: no rule for it.
    let nobody = RtChild::spawn(&d, "nice", "exit", |c| {
        c.uid(65534).gid(65534);
    });
    assert_eq!(nobody.reply.refused, Some(Refusal::NotAllowed));
    assert!(nobody.reply.error.as_deref().unwrap().contains("uid 65534"));
    // Identity: another process's thread, and a thread that has exited.
    let other = App::spawn("worker");
    let victim = other.tid("worker");
    let victim_before = attr(victim);
    let (why, msg) = refused(ask(&mut c, victim, Ask::HighPriority { nice: -1 }));
    assert_eq!(why, Refusal::Identity, "{msg}");
    assert!(msg.contains("not of your process"), "{msg}");
    assert_eq!(attr(victim), victim_before);
    let gone = std::thread::spawn(me).join().unwrap();
    let (why, _) = refused(ask(&mut c, gone, Ask::HighPriority { nice: -1 }));
    assert_eq!(why, Refusal::Identity);
    assert_eq!(attr(me()), before, "nothing changed by the refusals");
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn caps_rate_limit_and_the_rt_bound() {
    require_root();
    let _s = serial();
    ordinary();
    uxsched_client::limit_rttime(200_000).unwrap();
    let d = Daemon::start(
        "eimos",
        "[rtapi]\nmax_threads_per_user = 3\nmax_processes_per_user = 1\nmax_rt_threads = 1\n\
         rate_max = 5\nrate_window_ms = 60000\n",
    );
    // Three threads of this process that wait until told to exit.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let threads: Vec<i32> = (0..3)
        .map(|_| {
            let (ttx, trx) = std::sync::mpsc::channel();
            let rx = rx.clone();
            std::thread::spawn(move || {
                ttx.send(me()).unwrap();
                let _ = rx.lock().unwrap().recv();
            });
            trx.recv().unwrap()
        })
        .collect();
    let mut c = Client::connect(&d.socket).unwrap();
    let nice = Ask::HighPriority { nice: -2 };
    ask(&mut c, me(), RT10).unwrap(); // 1 granted
    let (why, msg) = refused(ask(&mut c, threads[0], RT10));
    assert_eq!(why, Refusal::RtBound, "{msg}");
    ask(&mut c, threads[0], nice).unwrap(); // 2
    ask(&mut c, threads[1], nice).unwrap(); // 3
    let (why, msg) = refused(ask(&mut c, threads[2], nice));
    assert_eq!(why, Refusal::UserCap, "{msg}");
    assert!(msg.contains("max_threads_per_user"), "{msg}");
    // A second process of the same user.
    let second = RtChild::spawn(&d, "nice", "exit", |_| {});
    assert_eq!(second.reply.refused, Some(Refusal::UserCap));
    // The rate: resets are free, grants count (5 per minute).
    ask(&mut c, threads[1], Ask::Reset).unwrap();
    ask(&mut c, threads[1], nice).unwrap(); // 4
    ask(&mut c, threads[1], Ask::Reset).unwrap();
    ask(&mut c, threads[1], nice).unwrap(); // 5
    ask(&mut c, threads[1], Ask::Reset).unwrap();
    let (why, msg) = refused(ask(&mut c, threads[1], nice));
    assert_eq!(why, Refusal::RateLimit, "{msg}");
    drop(c);
    drop(tx);
    let log = std::fs::read_to_string(d.dir.join("daemon-1.log")).unwrap();
    assert!(log.contains("real-time grants at their bound"), "{log}");
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn a_client_that_dies_mid_grant_leaves_nothing_and_frees_its_caps() {
    require_root();
    let _s = serial();
    ordinary();
    let d = Daemon::start("eimos", "[rtapi]\nmax_processes_per_user = 1\n");
    let held = RtChild::spawn(&d, "5", "hold", |c| {
        c.env(RTTIME_ENV, "100000");
    });
    assert!(held.reply.ok, "{:?}", held.reply);
    // The granted thread is the child's `rtclient` thread (the fixture runs its role off the
    // main thread).
    let boosted = d.status().boosted;
    assert_eq!(boosted.len(), 1);
    assert_eq!(boosted[0].pid, held.pid());
    assert_eq!(attr(boosted[0].tid).policy, SCHED_FIFO);
    unsafe { libc::kill(held.pid(), libc::SIGKILL) };
    drop(held);
    wait_until("its grant forgotten", Duration::from_secs(5), || {
        d.status().boosted.is_empty()
    });
    // The process cap is free again: another process of the same user gets a grant.
    let next = RtChild::spawn(&d, "nice", "exit", |_| {});
    assert!(next.reply.ok, "{:?}", next.reply);
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn a_runaway_rt_thread_is_stopped_by_rlimit_rttime_while_others_still_run() {
    require_root();
    let _s = serial();
    ordinary();
    let d = Daemon::start("eimos", "");
    pin_to_cpu0(0);
    // The runaway: FIFO 5 on CPU 0, spinning, with a hard RLIMIT_RTTIME of 100 ms.
    let start = Instant::now();
    let mut runaway = RtChild::spawn(&d, "5", "spin", |c| {
        c.env(RTTIME_ENV, "100000");
    });
    assert!(runaway.reply.ok, "{:?}", runaway.reply);
    // This ordinary thread on the same CPU keeps getting to run (its longest gap is bounded
    // by the 100 ms RLIMIT_RTTIME, not by the spinner).
    let mut longest = Duration::ZERO;
    let mut last = Instant::now();
    let status = loop {
        let now = Instant::now();
        longest = longest.max(now - last);
        last = now;
        if let Some(st) = runaway.child.try_wait().unwrap() {
            break st;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "not stopped");
        std::thread::sleep(Duration::from_millis(1));
    };
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    assert!(longest < Duration::from_millis(1000), "gap {longest:?}");
    eprintln!(
        "runaway killed after {:?}; longest gap of an ordinary thread {longest:?}",
        start.elapsed()
    );
    wait_until("its grant forgotten", Duration::from_secs(5), || {
        d.status().boosted.is_empty()
    });
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn the_canary_revokes_rt_grants_that_starve_ordinary_threads_and_refuses_more() {
    require_root();
    let _s = serial();
    ordinary();
    let d = Daemon::start(
        "eimos",
        "[rtapi]\ncanary_period_ms = 10\ncanary_timeout_ms = 60\ncanary_refuse_ms = 30000\n",
    );
    // The daemon (its canary among its threads) and the spinner share CPU 0.
    for t in tids(d.pid()) {
        pin_to_cpu0(t);
    }
    let spinner = RtChild::spawn(&d, "5", "spin", |c| {
        c.env(RTTIME_ENV, "200000");
        // SAFETY: sched_setaffinity is async-signal-safe.
        unsafe {
            c.pre_exec(|| {
                pin_to_cpu0(0);
                Ok(())
            });
        }
    });
    assert!(spinner.reply.ok, "{:?}", spinner.reply);
    let log = d.dir.join("daemon-1.log");
    wait_until("the canary trips", Duration::from_secs(5), || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("canary: ordinary threads could not run")
    });
    drop(spinner);
    let mut c = Client::connect(&d.socket).unwrap();
    uxsched_client::limit_rttime(200_000).unwrap();
    let (why, msg) = refused(c.for_this_thread(RT10));
    assert_eq!(why, Refusal::Canary, "{msg}");
    c.for_this_thread(Ask::HighPriority { nice: -1 }).unwrap();
    let log = std::fs::read_to_string(d.dir.join("daemon-1.log")).unwrap();
    assert!(
        log.contains("canary: ordinary threads could not run"),
        "{log}"
    );
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn malformed_lines_in_a_session_are_answered_and_the_session_goes_on() {
    require_root();
    let _s = serial();
    ordinary();
    let d = Daemon::start("eimos", "");
    let s = UnixStream::connect(&d.socket).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut send = |line: &str| {
        (&s).write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut reply = String::new();
        r.read_line(&mut reply).unwrap();
        serde_json::from_str::<Reply>(&reply).unwrap()
    };
    let tid = me();
    let ok = send(&format!(
        r#"{{"v":1,"cmd":"high_priority","tid":{tid},"nice":-1}}"#
    ));
    assert!(ok.ok, "{ok:?}");
    for bad in [
        r#"{"v":1,"cmd":"realtime","tid":1}"#,
        r#"{"v":9,"cmd":"reset","tid":1}"#,
        r#"{"cmd":"status"}"#,
        "not json",
        r#"{"v":1,"cmd":"latency","tid":1,"slice_us":5,"nice":3}"#,
    ] {
        let r = send(bad);
        assert_eq!(r.refused, Some(Refusal::BadRequest), "{bad}: {r:?}");
    }
    let r = send(&format!(r#"{{"v":1,"cmd":"reset","tid":{tid}}}"#));
    assert!(r.ok && r.granted.unwrap().nice == Some(0), "still served");
}

fn pin_to_cpu0(tid: i32) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}
