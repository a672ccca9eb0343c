//! The daemon's cgroup placement on a pure cgroup2 kernel (the development machines mount v1
//! for `cpu`): a QEMU/TCG guest (`uxsched-guest`, kernel from `../shared/kernels/`) runs the real
//! `uxsched` binary in mode `eimos` — which puts the focused app in the fg group — and a
//! multi-threaded app (the test fixture, `uxsched-guest-fixture app`), with no systemd (so the
//! v2-without-systemd path: whole processes into `/uxsched-fg`). The guest script only observes
//! and prints `fact key=value` lines; the assertions are here.
//!
//! This fails (it does not skip) when QEMU, busybox or the kernel is missing: `bash
//! scripts/setup.sh` installs the tools; CI has `../shared/kernels/` (or set
//! `UXSCHED_GUEST_KERNEL`).

use uxsched_guest::{Facts, Guest, Initramfs};

/// The threads the fixture's `app` role starts besides its main thread (`scx_guest/fixture.rs`,
/// where `watch` is too: it counts writes to `$UXSCHED_GUEST_WATCH` for 2 s after printing
/// `watching`, then prints `writes=N`).
const APP_THREADS: usize = 3;

/// The guest's script: the app in a home group of its own, the daemon, focus, observe, stop,
/// observe. Every wait is bounded; a missed wait shows up as a wrong fact, not a hang.
const SCRIPT: &str = r#"
S=/tmp/u/s.sock
mkdir -p /tmp/u /sys/fs/cgroup/apps/app-1.scope
echo +cpu > /sys/fs/cgroup/apps/cgroup.subtree_control
/bin/app app >/tmp/app.log 2>&1 &
APP=$!
echo $APP > /sys/fs/cgroup/apps/app-1.scope/cgroup.procs
i=0; while [ "$(ls /proc/$APP/task | wc -l)" -lt 4 ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done
echo "fact app=$APP"
echo "fact origin=$(cat /proc/$APP/cgroup)"
uxsched daemon --config /etc/uxsched.toml --mode eimos 2>/tmp/daemon.log &
D=$!
i=0; until uxsched status --socket $S >/dev/null 2>&1 || [ $i -ge 300 ]; do sleep 0.1; i=$((i+1)); done
uxsched focus $APP --socket $S; echo "fact focus_rc=$?"
i=0; while [ "$(cat /proc/$APP/cgroup)" != "0::/uxsched-fg" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
[ -d /sys/fs/cgroup/uxsched-fg ] && echo "fact fg_dir=/sys/fs/cgroup/uxsched-fg"
echo "fact fg_weight=$(cat /sys/fs/cgroup/uxsched-fg/cpu.weight)"
echo "fact bg_weight=$(cat /sys/fs/cgroup/uxsched-bg/cpu.weight)"
echo "fact fg_procs=$(tr '\n' ' ' < /sys/fs/cgroup/uxsched-fg/cgroup.procs)"
for t in /proc/$APP/task/*; do echo "fact thread=${t##*/} $(cat $t/cgroup)"; done
W=/sys/fs/cgroup/uxsched-fg/cpu.weight
UXSCHED_GUEST_WATCH=$W /bin/app watch > /tmp/weight-writes 2>&1 & N=$!
i=0; until grep -q watching /tmp/weight-writes || [ $i -ge 100 ]; do sleep 0.1; i=$((i+1)); done
sleep 0.5; echo 7007 | dd of=$W conv=notrunc 2>/dev/null; wait $N
echo "fact weight_writes=$(sed -n 's/^writes=//p' /tmp/weight-writes)"
uxsched status --json --socket $S > /tmp/status.json; echo "fact status_rc=$?"
echo "fact status=$(tr -d '\n' < /tmp/status.json)"
kill -TERM $D; wait $D; echo "fact daemon_rc=$?"
echo "fact after=$(cat /proc/$APP/cgroup)"
for t in /proc/$APP/task/*; do echo "fact thread_after=${t##*/} $(cat $t/cgroup)"; done
echo "fact groups_left=$(ls -d /sys/fs/cgroup/uxsched-* 2>/dev/null | tr '\n' ' ')"
echo "--- daemon log (tail)"; tail -n 30 /tmp/daemon.log
kill $APP
"#;

const CONFIG: &str = "socket = \"/tmp/u/s.sock\"\njournal = \"/tmp/u/journal.sqlite\"\n\
                      rescan_ms = 50\nmin_focus_interval_ms = 0\nlog_level = \"debug\"\n";

fn boot() -> Facts {
    let guest = Guest::locate().unwrap_or_else(|e| panic!("{e}"));
    let mut fs = Initramfs::new();
    fs.binary(env!("CARGO_BIN_EXE_uxsched").as_ref(), "/bin/uxsched")
        .unwrap();
    let fixture = env!("CARGO_BIN_EXE_uxsched-guest-fixture");
    fs.binary(fixture.as_ref(), "/bin/app").unwrap();
    fs.bytes("/etc/uxsched.toml", CONFIG, 0o644);
    let out = guest.run(&fs, SCRIPT).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("guest run: {:.2?}", out.wall);
    assert_eq!(out.status, 0, "the guest script failed:\n{}", out.console);
    Facts::new(out.console)
}

#[test]
fn eimos_moves_the_whole_app_into_a_root_fg_group_of_weight_7007_and_back() {
    let f = boot();
    let app = f.one("app");
    assert_eq!(
        f.one("origin"),
        "0::/apps/app-1.scope",
        "the app's home group"
    );
    assert_eq!(f.one("focus_rc"), "0", "`uxsched focus` answered");
    assert_eq!(
        f.one("fg_dir"),
        "/sys/fs/cgroup/uxsched-fg",
        "the fg group is a child of the root"
    );
    assert_eq!(
        f.one("fg_weight"),
        "7007",
        "fg_shares 71755 ≡ cpu.weight 7007 (100 ≡ 1024 shares)"
    );
    assert_eq!(f.one("bg_weight"), "13", "bg_shares 128 ≡ cpu.weight 13");
    assert_eq!(f.one("fg_procs"), app, "the app's process, and only it");
    assert_eq!(
        f.one("weight_writes"),
        "1",
        "in 2 s of 50 ms passes the correct weight is never rewritten: the one write seen is \
         the script's own (it shows that the watch works)"
    );
    let threads = f.all("thread");
    assert!(threads.len() > APP_THREADS, "{threads:?}");
    for t in &threads {
        assert!(t.ends_with(" 0::/uxsched-fg"), "every thread moved: {t}");
    }
    assert_eq!(f.one("status_rc"), "0", "`uxsched status` answered");
    let status: serde_json::Value = serde_json::from_str(&f.one("status")).unwrap();
    assert_eq!(status["mode"], "eimos");
    assert_eq!(status["focus"].to_string(), app);
    assert_eq!(
        status["features"]["cgroup_used"], "v2 at /sys/fs/cgroup",
        "the daemon uses the v2 hierarchy with cpu"
    );
    assert_eq!(f.one("daemon_rc"), "0", "SIGTERM: a clean exit");
    assert_eq!(
        f.one("after"),
        "0::/apps/app-1.scope",
        "back home after the daemon stopped"
    );
    for t in f.all("thread_after") {
        assert!(
            t.ends_with(" 0::/apps/app-1.scope"),
            "every thread home: {t}"
        );
    }
    assert_eq!(f.one("groups_left"), "", "uxsched's groups removed");
}
