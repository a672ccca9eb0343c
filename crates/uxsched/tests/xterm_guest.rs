//! The harness's real-application scenario in the sched_ext test guest (issue 13 measures it
//! there): the host's Xvfb, openbox and xterm (`uxsched_guest::add_x_desktop`) start on the 6.12
//! test kernel, and `uxsched bench xterm` types keystrokes into the real xterm and times each to
//! its echo on the screen, under the kernel's scheduler and under `uxsched scx` (mcfs) beside a
//! CPU load. Fails (not skips) without QEMU, busybox, the kernel or the X programs; CI has them.

#[path = "scx_guest/rig.rs"]
mod rig;

const SCRIPT: &str = r#"
mount -t bpf bpf /sys/fs/bpf
mkdir -p /dev/pts /var/tmp /run/lock && mount -t devpts devpts /dev/pts
mkdir -p /tmp/.X11-unix && chmod 1777 /tmp /tmp/.X11-unix /var/tmp /var/lib/xkb
uxsched bench xterm --modes idle,stock,scx-mcfs --layout no-autogroup --reps 1 --duration 2s \
    --load-workers 2 >/tmp/out.txt 2>/tmp/err.txt
echo "fact rc=$?"
cat /tmp/out.txt /tmp/err.txt
for f in /var/tmp/uxsched-bench-*/runs/*/desktop/*.log; do [ -f "$f" ] && tail -n 20 "$f"; done
exit 0
"#;

#[test]
#[ignore = "needs root + qemu + ../shared/kernels (scripts/test.sh runs it as root)"]
fn xterm_runs_in_the_guest_under_the_kernels_scheduler_and_uxsched_scx() {
    let (mut guest, mut fs) = rig::guest().unwrap_or_else(|e| panic!("{e}"));
    uxsched_guest::add_x_desktop(&mut fs).unwrap_or_else(|e| panic!("{e}"));
    let stress =
        uxsched_guest::which("stress-ng").expect("stress-ng is not on PATH: bash scripts/setup.sh");
    fs.binary(&stress, "/bin/stress-ng").unwrap();
    guest.timeout = std::time::Duration::from_secs(400);
    let out = guest.run(&fs, SCRIPT).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("guest run: {:.2?}", out.wall);
    let console = &out.console;
    assert!(
        console.contains("fact rc=0"),
        "the bench failed:\n{console}"
    );
    for mode in ["idle", "stock", "scx-mcfs"] {
        // A row: mode, n, p50 … — every mode timed keystrokes, and none was lost.
        let row = (console.lines())
            .find(|l| l.split_whitespace().next() == Some(mode))
            .unwrap_or_else(|| panic!("no {mode} row:\n{console}"));
        let n: u32 = row.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(n >= 10, "{mode}: {n} keystrokes timed:\n{console}");
        assert!(row.contains("lost=0.0"), "{mode}: keystrokes lost: {row}");
    }
}
