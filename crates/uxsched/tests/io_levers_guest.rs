//! The cgroup v2 I/O class lever (`[storage] background_io_class`, `front_group_class`;
//! `crates/daemon/src/actuators/io_class.rs`) on a pure cgroup2 kernel: a QEMU/TCG guest
//! (`uxsched-guest`, 6.12 from `../shared/kernels/`, no systemd) runs the real `uxsched` in mode
//! `shuffledog` — the one mode that fills both of uxsched's groups: the app in front in
//! `/uxsched-fg`, the app in front before it in `/uxsched-bg`. The script only observes and prints
//! `fact key=value` lines; the assertions are here.
//!
//! Four rounds in one boot. A: the io controller is not enabled for the root's children (the
//! guest's init enables `cpu` only), so the daemon enables it, and must disable it again after
//! SIGTERM, and a start after SIGKILL must. B: someone enabled it before, and left a class of
//! their own on `/uxsched-bg`: both must be as they were after the next start. C: the daemon
//! enables io, then another group sets an `io.weight`: the controller stays on at stop. D:
//! `switch_to_iocost` enables blk-iocost on the loop device and disables it after SIGTERM, and
//! after SIGKILL at the next start. In
//! round A a loop device (the `none` elevator by default; switched to `mq-deadline` in the
//! guest) shows `uxsched status --json` saying which elevator honours the groups' class.
//!
//! Not here: NVMe (the guest kernel has no NVMe driver: CONFIG_BLK_DEV_NVME is not set; a loop
//! device is the `none` path), cgroup writeback (CONFIG_MEMCG is not set in the guest kernel, so
//! no writeback is charged to a group), and any I/O measured under the classes.
//!
//! This fails (it does not skip) when QEMU, busybox or the kernel is missing, as cgroup2_guest.rs.

use uxsched_guest::{Facts, Guest, Initramfs};

/// Start a daemon with config `$1`, wait for its socket; `$D` is its pid.
const SCRIPT: &str = r#"
S=/tmp/u/s.sock
C=/sys/fs/cgroup
mkdir -p /tmp/u
start() {
  uxsched daemon --config $1 --mode shuffledog 2>>/tmp/daemon.log &
  D=$!
  i=0; until uxsched status --socket $S >/dev/null 2>&1 || [ $i -ge 300 ]; do sleep 0.1; i=$((i+1)); done
}
place() {
  uxsched focus $BG --socket $S >/dev/null; uxsched focus $APP --socket $S >/dev/null
  i=0; while { [ "$(cat /proc/$APP/cgroup)" != "0::/uxsched-fg" ] || [ "$(cat /proc/$BG/cgroup)" != "0::/uxsched-bg" ]; } && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
}
class() { cat $C/$1/io.prio.class 2>/dev/null || echo absent; }
/bin/app app >/tmp/app.log 2>&1 &
APP=$!
sleep 1000 &
BG=$!
dd if=/dev/zero of=/tmp/disk.img bs=1M count=4 2>/dev/null
losetup /dev/loop0 /tmp/disk.img; echo "fact losetup_rc=$?"
echo "fact loop_sched=$(cat /sys/block/loop0/queue/scheduler)"
echo "fact a_subtree_before=$(cat $C/cgroup.subtree_control)"
start /etc/on.toml
place
echo "fact a_app_cg=$(cat /proc/$APP/cgroup)"
echo "fact a_bg_cg=$(cat /proc/$BG/cgroup)"
echo "fact a_subtree=$(cat $C/cgroup.subtree_control)"
echo "fact a_fg_class=$(class uxsched-fg)"
echo "fact a_bg_class=$(class uxsched-bg)"
uxsched status --json --socket $S > /tmp/st-none.json
echo mq-deadline > /sys/block/loop0/queue/scheduler
uxsched status --json --socket $S > /tmp/st-mq.json
echo none > /sys/block/loop0/queue/scheduler
kill -TERM $D; wait $D; echo "fact a_term_rc=$?"
echo "fact a_term_subtree=$(cat $C/cgroup.subtree_control)"
echo "fact a_term_groups=$(ls -d $C/uxsched-* 2>/dev/null | tr '\n' ' ')"
start /etc/on.toml
place
echo "fact a_kill_placed=$(cat /proc/$BG/cgroup)"
kill -KILL $D; wait $D
echo "fact a_killed_subtree=$(cat $C/cgroup.subtree_control)"
echo "fact a_killed_bg_class=$(class uxsched-bg)"
start /etc/off.toml
i=0; while [ "$(cat /proc/$BG/cgroup)" != "0::/" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
echo "fact a_next_subtree=$(cat $C/cgroup.subtree_control)"
echo "fact a_next_bg_class=$(class uxsched-bg)"
echo "fact a_next_bg_cg=$(cat /proc/$BG/cgroup)"
kill -TERM $D; wait $D; echo "fact a_next_rc=$?"
echo +io > $C/cgroup.subtree_control
mkdir -p $C/uxsched-bg; echo restrict-to-be > $C/uxsched-bg/io.prio.class
echo "fact b_subtree_before=$(cat $C/cgroup.subtree_control)"
echo "fact b_bg_class_before=$(class uxsched-bg)"
start /etc/on.toml
place
echo "fact b_bg_class=$(class uxsched-bg)"
echo "fact b_fg_class=$(class uxsched-fg)"
kill -KILL $D; wait $D
echo "fact b_killed_bg_class=$(class uxsched-bg)"
start /etc/off.toml
echo "fact b_next_bg_class=$(class uxsched-bg)"
echo "fact b_next_fg_class=$(class uxsched-fg)"
echo "fact b_next_subtree=$(cat $C/cgroup.subtree_control)"
kill -TERM $D; wait $D; echo "fact b_next_rc=$?"
echo "fact b_term_subtree=$(cat $C/cgroup.subtree_control)"
echo -io > $C/cgroup.subtree_control
start /etc/on.toml
mkdir $C/other; echo 200 > $C/other/io.weight
echo "fact c_other_weight=$(head -n1 $C/other/io.weight)"
kill -TERM $D; wait $D; echo "fact c_term_rc=$?"
echo "fact c_term_subtree=$(cat $C/cgroup.subtree_control)"
rmdir $C/other
qos() { grep "^$(cat /sys/block/loop0/dev) " $C/io.cost.qos | cut -d' ' -f1-2; }
echo "fact d_qos_before=$(qos)"
start /etc/iocost.toml
echo "fact d_qos=$(qos)"
uxsched status --json --socket $S > /tmp/st-iocost.json
kill -TERM $D; wait $D; echo "fact d_term_rc=$?"
echo "fact d_term_qos=$(qos)"
start /etc/iocost.toml
kill -KILL $D; wait $D
echo "fact d_killed_qos=$(qos)"
start /etc/off.toml
echo "fact d_next_qos=$(qos)"
kill -TERM $D; wait $D; echo "fact d_next_rc=$?"
kill $APP $BG
losetup -d /dev/loop0
echo "--- daemon log (tail)"; grep -i "class\|io controller\|error" /tmp/daemon.log | tail -n 30
echo "fact st_none=$(tr -d '\n' < /tmp/st-none.json)"
echo "fact st_mq=$(tr -d '\n' < /tmp/st-mq.json)"
echo "fact st_iocost=$(tr -d '\n' < /tmp/st-iocost.json)"
"#;

const COMMON: &str = "socket = \"/tmp/u/s.sock\"\njournal = \"/tmp/u/journal.sqlite\"\n\
                      rescan_ms = 50\nmin_focus_interval_ms = 0\n";

/// One boot for both tests (the second waits for the first's).
fn facts() -> &'static Facts {
    static FACTS: std::sync::OnceLock<Facts> = std::sync::OnceLock::new();
    FACTS.get_or_init(boot)
}

fn boot() -> Facts {
    let guest = Guest::locate().unwrap_or_else(|e| panic!("{e}"));
    let mut fs = Initramfs::new();
    fs.binary(env!("CARGO_BIN_EXE_uxsched").as_ref(), "/bin/uxsched")
        .unwrap();
    let fixture = env!("CARGO_BIN_EXE_uxsched-guest-fixture");
    fs.binary(fixture.as_ref(), "/bin/app").unwrap();
    let on =
        format!("{COMMON}[storage]\nbackground_io_class = \"idle\"\nfront_group_class = \"rt\"\n");
    fs.bytes("/etc/on.toml", on, 0o644);
    fs.bytes("/etc/off.toml", COMMON, 0o644);
    let iocost =
        format!("{COMMON}[storage]\nswitch_to_iocost = true\niocost_devices = [\"loop0\"]\n");
    fs.bytes("/etc/iocost.toml", iocost, 0o644);
    let out = guest.run(&fs, SCRIPT).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("guest run: {:.2?}", out.wall);
    for l in out.console.lines().filter(|l| l.starts_with("fact ")) {
        eprintln!("{}", l.chars().take(200).collect::<String>());
    }
    assert_eq!(out.status, 0, "the guest script failed:\n{}", out.console);
    Facts::new(out.console)
}

#[test]
#[ignore = "needs root + qemu + ../shared/kernels (scripts/test.sh runs it as root)"]
fn group_io_classes_are_set_while_the_daemon_runs_and_restored_after_sigterm_and_sigkill() {
    let f = facts();
    // Round A: the io controller was off for the root's children.
    let before = f.one("a_subtree_before");
    assert!(!before.split(' ').any(|c| c == "io"), "{before}");
    assert_eq!(f.one("a_app_cg"), "0::/uxsched-fg", "the app in front");
    assert_eq!(
        f.one("a_bg_cg"),
        "0::/uxsched-bg",
        "the app in front before it"
    );
    assert!(
        f.one("a_subtree").split(' ').any(|c| c == "io"),
        "the daemon enabled io for the root's children"
    );
    assert_eq!(
        f.one("a_fg_class"),
        "promote-to-rt",
        "front_group_class = rt"
    );
    assert_eq!(f.one("a_bg_class"), "idle", "background_io_class = idle");
    assert_eq!(f.one("a_term_rc"), "0", "SIGTERM: a clean exit");
    assert_eq!(f.one("a_term_subtree"), before, "io disabled again at stop");
    assert_eq!(f.one("a_term_groups"), "", "the groups removed");
    assert_eq!(f.one("a_kill_placed"), "0::/uxsched-bg");
    assert_eq!(
        f.one("a_killed_bg_class"),
        "idle",
        "SIGKILL leaves the class (this is what the journal is for)"
    );
    assert!(f.one("a_killed_subtree").split(' ').any(|c| c == "io"));
    assert_eq!(
        f.one("a_next_subtree"),
        before,
        "the next start (lever off) disabled io again"
    );
    assert_eq!(
        f.one("a_next_bg_class"),
        "absent",
        "no io files without the controller"
    );
    assert_eq!(
        f.one("a_next_bg_cg"),
        "0::/",
        "the background app back home"
    );
    assert_eq!(f.one("a_next_rc"), "0");
    // Round B: io enabled and a class on /uxsched-bg by someone else before the daemon.
    let before = f.one("b_subtree_before");
    assert!(before.split(' ').any(|c| c == "io"), "{before}");
    assert_eq!(f.one("b_bg_class_before"), "restrict-to-be");
    assert_eq!(f.one("b_bg_class"), "idle");
    assert_eq!(f.one("b_fg_class"), "promote-to-rt");
    assert_eq!(f.one("b_killed_bg_class"), "idle");
    assert_eq!(
        f.one("b_next_bg_class"),
        "restrict-to-be",
        "the next start wrote the original back"
    );
    assert_eq!(
        f.one("b_next_fg_class"),
        "no-change",
        "a new group's default"
    );
    assert_eq!(
        f.one("b_next_subtree"),
        before,
        "io left on: not enabled by uxsched"
    );
    assert_eq!(f.one("b_term_subtree"), before);
    assert_eq!(f.one("b_next_rc"), "0");
    // Round C: io enabled by the daemon, then used by another group: left on at stop.
    assert_eq!(f.one("c_other_weight"), "default 200");
    assert_eq!(f.one("c_term_rc"), "0");
    assert!(
        f.one("c_term_subtree").split(' ').any(|c| c == "io"),
        "another group's io.weight keeps the controller on"
    );
}

#[test]
#[ignore = "needs root + qemu + ../shared/kernels (scripts/test.sh runs it as root)"]
fn status_says_which_elevator_honours_the_groups_class() {
    let f = facts();
    assert_eq!(f.one("losetup_rc"), "0");
    assert!(
        f.one("loop_sched").starts_with("[none]"),
        "a loop device starts at none: {}",
        f.one("loop_sched")
    );
    let none = f.strings("st_none", "storage");
    let mq = f.strings("st_mq", "storage");
    let has = |lines: &[String], want: &str| lines.iter().any(|l| l.as_str() == want);
    assert!(
        has(
            &none,
            "loop0: the groups' io.prio.class does nothing under none (mq-deadline or bfq honour it)"
        ),
        "{none:#?}"
    );
    assert!(
        has(
            &mq,
            "loop0: the groups' io.prio.class is honoured (mq-deadline)"
        ),
        "{mq:#?}"
    );
    assert!(
        none.iter().any(|l| l
            .ends_with("/uxsched-bg/io.prio.class: idle while the daemon runs (was no-change)")),
        "{none:#?}"
    );
    assert!(
        none.iter()
            .any(|l| l.starts_with("io controller enabled in")),
        "{none:#?}"
    );
}

/// Round D: `switch_to_iocost` on the loop device — blk-iocost enabled in the root's
/// `io.cost.qos` while the daemon runs, disabled at SIGTERM, and after a SIGKILL by the next
/// start (its lever off); `status` names it while it holds.
#[test]
#[ignore = "needs root + qemu + ../shared/kernels (scripts/test.sh runs it as root)"]
fn iocost_is_enabled_while_the_daemon_runs_and_disabled_after_sigterm_and_sigkill() {
    let f = facts();
    let before = f.one("d_qos_before");
    assert!(
        before.is_empty() || before.ends_with(" enable=0"),
        "iocost off before: {before:?}"
    );
    let dev = f.one("d_qos");
    assert!(dev.ends_with(" enable=1"), "enabled while running: {dev:?}");
    let dev = dev.split(' ').next().unwrap().to_owned();
    let st = f.strings("st_iocost", "storage");
    assert!(
        st.iter()
            .any(|l| l.starts_with(&format!("loop0 ({dev}): blk-iocost enabled"))),
        "{st:#?}"
    );
    assert_eq!(f.one("d_term_rc"), "0");
    assert_eq!(
        f.one("d_term_qos"),
        format!("{dev} enable=0"),
        "off at stop"
    );
    assert_eq!(
        f.one("d_killed_qos"),
        format!("{dev} enable=1"),
        "SIGKILL leaves it (the journal's row says so)"
    );
    assert_eq!(
        f.one("d_next_qos"),
        format!("{dev} enable=0"),
        "the next start disabled it"
    );
    assert_eq!(f.one("d_next_rc"), "0");
}
