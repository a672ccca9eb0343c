//! rtkit's D-Bus interface (`rtapi/rtkit.rs`) against a real dbus-daemon started by the test
//! (a private bus with a system-bus-like policy: EXTERNAL auth, credentials from the kernel),
//! the real daemon serving `org.freedesktop.RealtimeKit1` on it, and Debian's `busctl` and
//! `dbus-send` — and this test itself, through zbus — as the clients: rtkit's exact
//! introspection and property types, grants applied to the kernel and restored by
//! `ResetKnown`, refusals as D-Bus errors with rtkit's names.

mod common;

use common::bus::SystemBus;
use common::*;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;
use uxsched_os::sched::{self, SCHED_OTHER, SCHED_RR};

const NAME: &str = "org.freedesktop.RealtimeKit1";
const PATH: &str = "/org/freedesktop/RealtimeKit1";

/// The private bus ([`SystemBus`]), with rtkit's clients.
struct Bus {
    _bus: SystemBus,
    address: String,
}

impl Bus {
    fn start() -> Bus {
        let bus = SystemBus::start();
        let address = bus.address.clone();
        Bus { _bus: bus, address }
    }

    fn busctl(&self, args: &[&str]) -> Output {
        Command::new("busctl")
            .arg(format!("--address={}", self.address))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("busctl (Debian package systemd)")
    }

    /// `dbus-send --print-reply` to rtkit's interface; (success, stdout + stderr).
    fn dbus_send(&self, uid: Option<u32>, method: &str, args: &[String]) -> (bool, String) {
        let mut c = Command::new("dbus-send");
        c.arg(format!("--bus={}", self.address))
            .args(["--print-reply", &format!("--dest={NAME}"), PATH])
            .arg(format!("{NAME}.{method}"))
            .args(args)
            .stdin(Stdio::null());
        if let Some(uid) = uid {
            use std::os::unix::process::CommandExt;
            c.uid(uid).gid(uid);
        }
        let out = c.output().expect("dbus-send (Debian package dbus-bin)");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    /// A uxsched daemon serving rtkit's interface on this bus, once it owns the name.
    fn daemon(&self, extra: &str) -> Daemon {
        let d = Daemon::start(
            "eimos",
            &format!(
                "[rtkit]\nenable = true\naddress = \"{}\"\n{extra}",
                self.address
            ),
        );
        wait_until("the daemon owns the name", Duration::from_secs(10), || {
            self.busctl(&["status", NAME]).status.success()
        });
        d
    }
}

/// A process to name: `sleep`, with a hard RLIMIT_RTTIME of `rttime` µs, or none (`None`).
/// The limit is set either way: another test lowers this process's own, and a child would
/// inherit it.
struct Target(Child);

impl Target {
    fn spawn(rttime: Option<u64>) -> Target {
        let limit = rttime.map_or("unlimited".to_string(), |us| us.to_string());
        let child = Command::new("prlimit")
            .arg(format!("--rttime={limit}:{limit}"))
            .args(["sleep", "60"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // prlimit execs sleep: wait until the pid runs it.
        wait_until("the target runs sleep", Duration::from_secs(5), || {
            comm(pid) == "sleep"
        });
        Target(child)
    }

    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// dbus-send's typed arguments of a `…WithPID` call (`priority` typed by the caller).
fn with_pid(pid: i32, tid: u64, priority: &str) -> Vec<String> {
    vec![
        format!("uint64:{pid}"),
        format!("uint64:{tid}"),
        priority.to_owned(),
    ]
}

/// busctl's arguments of a `…WithPID` call (the signature is given separately).
fn plain(pid: i32, tid: u64, priority: &str) -> Vec<String> {
    vec![pid.to_string(), tid.to_string(), priority.to_owned()]
}

#[test]
#[ignore = "needs root and dbus-daemon: make test runs it as root"]
fn the_interface_is_rtkits_with_its_exact_signatures_and_property_types() {
    require_root();
    let _s = serial();
    let bus = Bus::start();
    let _d = bus.daemon("[rtapi]\nrttime_max_us = 150000\n");
    let get = |p: &str| {
        let out = bus.busctl(&["get-property", NAME, PATH, NAME, p]);
        assert!(out.status.success(), "{p}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    // busctl prints the D-Bus type signature, then the value.
    assert_eq!(get("RTTimeUSecMax"), "x 150000");
    assert_eq!(get("MaxRealtimePriority"), "i 20");
    assert_eq!(get("MinNiceLevel"), "i -15");
    let out = bus.busctl(&["introspect", "--xml-interface", NAME, PATH]);
    let xml = String::from_utf8_lossy(&out.stdout).replace(char::is_whitespace, "");
    for want in [
        r#"<methodname="MakeThreadRealtime"><argname="thread"type="t"direction="in"/><argname="priority"type="u"direction="in"/></method>"#,
        r#"<methodname="MakeThreadRealtimeWithPID"><argname="process"type="t"direction="in"/><argname="thread"type="t"direction="in"/><argname="priority"type="u"direction="in"/></method>"#,
        r#"<methodname="MakeThreadHighPriority"><argname="thread"type="t"direction="in"/><argname="priority"type="i"direction="in"/></method>"#,
        r#"<methodname="MakeThreadHighPriorityWithPID"><argname="process"type="t"direction="in"/><argname="thread"type="t"direction="in"/><argname="priority"type="i"direction="in"/></method>"#,
        r#"<methodname="ResetKnown"></method>"#,
        r#"<methodname="ResetAll"></method>"#,
        r#"<methodname="Exit"></method>"#,
        r#"<propertyname="RTTimeUSecMax"type="x"access="read">"#,
        r#"<propertyname="MaxRealtimePriority"type="i"access="read">"#,
        r#"<propertyname="MinNiceLevel"type="i"access="read">"#,
    ] {
        assert!(xml.contains(want), "missing {want} in {xml}");
    }
}

#[test]
#[ignore = "needs root and dbus-daemon: make test runs it as root"]
fn grants_over_dbus_are_applied_and_reset_known_restores_them() {
    require_root();
    let _s = serial();
    ordinary();
    let bus = Bus::start();
    let d = bus.daemon("same_user_processes = true\n");
    let target = Target::spawn(Some(100_000));
    let pid = target.pid();
    let before = attr(pid);
    let call = |m: &str, sig: &str, args: &[String]| {
        let mut a = vec!["call", "--", NAME, PATH, NAME, m, sig];
        a.extend(args.iter().map(String::as_str));
        bus.busctl(&a)
    };
    // Another process of the same uid (busctl calls for `sleep`), rtkit's rule when allowed.
    let out = call("MakeThreadRealtimeWithPID", "ttu", &plain(pid, 0, "10"));
    assert!(out.status.success(), "{out:?}");
    let now = attr(pid);
    assert_eq!((now.policy, now.priority), (SCHED_RR, 10), "rtkit's policy");
    assert_ne!(now.flags & sched::SCHED_FLAG_RESET_ON_FORK, 0);
    assert_eq!(d.status().boosted.len(), 1);
    // On the fly to a nice level (thread 0 is the main thread), then ResetKnown.
    let out = call(
        "MakeThreadHighPriorityWithPID",
        "tti",
        &plain(pid, pid as u64, "-5"),
    );
    assert!(out.status.success(), "{out:?}");
    let now = attr(pid);
    assert_eq!((now.policy, now.nice), (SCHED_OTHER, -5));
    assert!(call("ResetKnown", "", &[]).status.success());
    wait_until("restored by ResetKnown", Duration::from_secs(5), || {
        attr(pid) == before
    });
    assert!(d.status().boosted.is_empty());
    // A grant ends with its thread, as rtkit's do.
    let out = call("MakeThreadRealtimeWithPID", "ttu", &plain(pid, 0, "5"));
    assert!(out.status.success(), "{out:?}");
    drop(target);
    wait_until("forgotten after exit", Duration::from_secs(5), || {
        d.status().boosted.is_empty()
    });
}

#[test]
#[ignore = "needs root and dbus-daemon: make test runs it as root"]
fn the_caller_is_named_by_the_bus_and_its_own_thread_is_granted() {
    require_root();
    let _s = serial();
    ordinary();
    uxsched_client::limit_rttime(200_000).unwrap();
    let bus = Bus::start();
    let _d = bus.daemon("");
    let conn = zbus::blocking::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .build()
        .unwrap();
    let proxy = zbus::blocking::Proxy::new(&conn, NAME, PATH, NAME).unwrap();
    let me = uxsched_client::this_thread();
    let before = attr(me);
    // MakeThreadRealtime names a thread of the caller's process: the bus says which.
    proxy
        .call_method("MakeThreadRealtime", &(me as u64, 7u32))
        .unwrap();
    let now = attr(me);
    assert_eq!((now.policy, now.priority), (SCHED_RR, 7));
    proxy.call_method("ResetAll", &()).unwrap();
    wait_until("restored by ResetAll", Duration::from_secs(5), || {
        attr(me) == before
    });
}

#[test]
#[ignore = "needs root and dbus-daemon: make test runs it as root"]
fn refusals_are_dbus_errors_with_rtkits_names_and_uxscheds_reasons() {
    require_root();
    let _s = serial();
    ordinary();
    let bus = Bus::start();
    let d = bus.daemon("");
    let limited = Target::spawn(Some(100_000));
    let unlimited = Target::spawn(None);
    let before = (attr(limited.pid()), attr(unlimited.pid()));
    // Not the caller's process (dbus-send is): refused without `same_user_processes`.
    let (ok, out) = bus.dbus_send(
        None,
        "MakeThreadRealtimeWithPID",
        &with_pid(limited.pid(), 0, "uint32:10"),
    );
    assert!(!ok, "{out}");
    assert!(
        out.contains("org.freedesktop.DBus.Error.AccessDenied")
            && out.contains("same_user_processes"),
        "{out}"
    );
    drop(d);
    let d = bus.daemon("same_user_processes = true\n");
    // Above the rule's priority; no RLIMIT_RTTIME; another user's process; a malformed call.
    let cases = [
        (None, limited.pid(), "uint32:50", "max_rt_priority"),
        (None, unlimited.pid(), "uint32:10", "RLIMIT_RTTIME"),
        (
            Some(65534),
            limited.pid(),
            "uint32:10",
            "not only as uid 65534",
        ),
    ];
    for (uid, pid, priority, why) in cases {
        let (ok, out) = bus.dbus_send(
            uid,
            "MakeThreadRealtimeWithPID",
            &with_pid(pid, 0, priority),
        );
        assert!(!ok, "{out}");
        assert!(
            out.contains("org.freedesktop.DBus.Error.AccessDenied") && out.contains(why),
            "{why}: {out}"
        );
    }
    // Not a priority: InvalidArgs. A wrong signature is refused by zbus before the method.
    let (ok, out) = bus.dbus_send(
        None,
        "MakeThreadRealtimeWithPID",
        &with_pid(limited.pid(), 0, "uint32:0"),
    );
    assert!(
        !ok && out.contains("org.freedesktop.DBus.Error.InvalidArgs"),
        "{out}"
    );
    let (ok, out) = bus.dbus_send(None, "MakeThreadRealtime", &["string:x".into()]);
    assert!(!ok && out.contains("Signature mismatch"), "{out}");
    let (ok, out) = bus.dbus_send(None, "Exit", &[]);
    assert!(!ok && out.contains("AccessDenied"), "{out}");
    assert_eq!((attr(limited.pid()), attr(unlimited.pid())), before);
    assert!(d.status().boosted.is_empty());
}

/// rtkit's own clients, unpacked from Debian's rtkit package by scripts/setup.sh.
const RTKIT_CLIENTS: &str = "/opt/uxsched/rtkit/usr";

fn rtkit_program(rel: &str) -> std::path::PathBuf {
    let p = Path::new(RTKIT_CLIENTS).join(rel);
    assert!(
        p.exists(),
        "{} is missing: scripts/setup.sh unpacks Debian's rtkit package there",
        p.display()
    );
    p
}

#[test]
#[ignore = "needs root, dbus-daemon and rtkit's clients (scripts/setup.sh): make test runs it as root"]
fn debians_rtkit_clients_work_unchanged() {
    require_root();
    let _s = serial();
    ordinary();
    let bus = Bus::start();
    let d = bus.daemon("same_user_processes = true\n");
    // rtkit-test (rtkit's installed test, its client library inside): reads the three
    // properties, sets RLIMIT_RTTIME, asks MakeThreadHighPriority(0, -10) and
    // MakeThreadRealtime(0, 10) for itself, and prints what the kernel then holds.
    // libdbus's clients find the system bus through DBUS_SYSTEM_BUS_ADDRESS.
    let out = Command::new(rtkit_program("libexec/installed-tests/rtkit/rtkit-test"))
        .env("DBUS_SYSTEM_BUS_ADDRESS", &bus.address)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "Max realtime priority is: 20",
        "Min nice level is: -15",
        "Successfully became high priority.",
        "SCHED_OTHER with nice level: -10",
        "Successfully became realtime.",
        "SCHED_RR with priority 10",
    ] {
        assert!(
            text.contains(want),
            "missing {want:?} in rtkit-test's output:\n{text}"
        );
    }
    wait_until(
        "its grant forgotten after it exited",
        Duration::from_secs(5),
        || d.status().boosted.is_empty(),
    );
    // rtkitctl --reset-known: rtkit's control program calls ResetKnown.
    let target = Target::spawn(Some(100_000));
    let pid = target.pid();
    let before = attr(pid);
    let out = bus.busctl(&[
        "call",
        NAME,
        PATH,
        NAME,
        "MakeThreadRealtimeWithPID",
        "ttu",
        &pid.to_string(),
        "0",
        "3",
    ]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(attr(pid).policy, SCHED_RR);
    let out = Command::new(rtkit_program("sbin/rtkitctl"))
        .arg("--reset-known")
        .env("DBUS_SYSTEM_BUS_ADDRESS", &bus.address)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    wait_until("restored by rtkitctl", Duration::from_secs(5), || {
        attr(pid) == before
    });
}
