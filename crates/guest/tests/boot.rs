//! The rig itself, on the real test kernel under QEMU/TCG: the guest boots, is a pure cgroup2
//! machine with the cpu controller enabled for the root's children, runs a host binary with its
//! shared libraries, reports the script's exact status, and turns a panic or a hang into an
//! error with the console tail. These fail (not skip) when QEMU, busybox or the kernel is
//! missing: `bash scripts/setup.sh` installs the tools, CI has `../shared/kernels/`.

use std::time::Duration;
use uxsched_guest::{Error, Guest, Initramfs};

fn guest() -> Guest {
    Guest::locate().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_guest_is_pure_cgroup2_with_cpu_and_reports_the_exact_status() {
    let mut fs = Initramfs::new();
    // coreutils' env is dynamically linked: it runs only if its libraries came along.
    fs.binary("/usr/bin/env".as_ref(), "/opt/host/env").unwrap();
    let script = r#"
        echo "fact mounts=$(awk '$3 ~ /^cgroup/ {print $2":"$3}' /proc/mounts | tr '\n' ' ')"
        echo "fact controllers=$(cat /sys/fs/cgroup/cgroup.controllers)"
        echo "fact subtree=$(cat /sys/fs/cgroup/cgroup.subtree_control)"
        mkdir /sys/fs/cgroup/child && echo "fact child_weight=$(cat /sys/fs/cgroup/child/cpu.weight)"
        echo "fact self=$(cat /proc/self/cgroup)"
        /opt/host/env FACT=host-binary-ran /opt/host/env | grep '^FACT=' | sed 's/^FACT=/fact host=/'
        exit 7
    "#;
    let out = guest().run(&fs, script).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("one boot: {:.2?}", out.wall);
    let fact = |k: &str| {
        let prefix = format!("fact {k}=");
        out.console
            .lines()
            .find_map(|l| l.strip_prefix(&prefix).map(|v| v.trim().to_owned()))
            .unwrap_or_else(|| panic!("no `{k}` in the console:\n{}", out.console))
    };
    assert_eq!(out.status, 7, "the script's own status:\n{}", out.console);
    assert_eq!(
        fact("mounts"),
        "/sys/fs/cgroup:cgroup2",
        "only cgroup2 is mounted"
    );
    assert!(fact("controllers").split(' ').any(|c| c == "cpu"));
    assert_eq!(fact("subtree"), "cpu");
    assert_eq!(fact("child_weight"), "100", "children get cpu.weight");
    assert_eq!(fact("self"), "0::/");
    assert_eq!(fact("host"), "host-binary-ran");
}

#[test]
fn a_kernel_panic_is_an_error_with_the_console_tail() {
    let out = guest().run(&Initramfs::new(), "echo c > /proc/sysrq-trigger; sleep 30");
    match out {
        Err(Error::Panic { tail }) => assert!(tail.contains("sysrq"), "{tail}"),
        other => panic!("expected a panic error, got {other:?}"),
    }
}

#[test]
fn a_guest_that_never_powers_off_times_out() {
    let mut g = guest();
    g.timeout = Duration::from_secs(10);
    let out = g.run(&Initramfs::new(), "sleep 1000");
    // (How far the guest got in 10 s depends on the host's load: the tail is not checked.)
    assert!(
        matches!(out, Err(Error::Timeout { after, .. }) if after == g.timeout),
        "expected a timeout, got {out:?}"
    );
}
