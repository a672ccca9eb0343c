//! The block-device probe's tests (`block.rs`): a fixture `/sys` tree and this machine's own.

use super::*;
use std::os::unix::fs::symlink;

/// A private directory removed when the test ends.
struct Tmp(PathBuf);

impl Tmp {
    fn new(name: &str) -> Tmp {
        let p = std::env::temp_dir().join(format!("uxsched-block-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Tmp(p)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A disk as sysfs lays it out: its directory under devices/, /sys/block/NAME and
/// /sys/dev/block/M:m linking there, and optionally partitions inside it.
fn disk(sys: &Path, name: &str, dev: &str, sched: Option<&str>, rot: &str, parts: &[(&str, &str)]) {
    let real = sys.join("devices/pci0000:00").join(name);
    write(&real.join("dev"), &format!("{dev}\n"));
    if let Some(s) = sched {
        write(&real.join("queue/scheduler"), &format!("{s}\n"));
    }
    write(&real.join("queue/rotational"), &format!("{rot}\n"));
    std::fs::create_dir_all(sys.join("block")).unwrap();
    std::fs::create_dir_all(sys.join("dev/block")).unwrap();
    symlink(&real, sys.join("block").join(name)).unwrap();
    symlink(&real, sys.join("dev/block").join(dev)).unwrap();
    for (part, pdev) in parts {
        write(&real.join(part).join("partition"), "1\n");
        write(&real.join(part).join("dev"), &format!("{pdev}\n"));
        symlink(real.join(part), sys.join("dev/block").join(pdev)).unwrap();
    }
}

fn fixture(t: &Tmp) -> PathBuf {
    let sys = t.0.join("sys");
    disk(
        &sys,
        "sda",
        "8:0",
        Some("mq-deadline kyber [bfq] none"),
        "1",
        &[("sda1", "8:1"), ("sda2", "8:2")],
    );
    disk(
        &sys,
        "nvme0n1",
        "259:0",
        Some("[none] mq-deadline kyber bfq"),
        "0",
        &[("nvme0n1p1", "259:1")],
    );
    disk(
        &sys,
        "vdb",
        "254:16",
        Some("none [mq-deadline] kyber bfq"),
        "0",
        &[],
    );
    disk(&sys, "loop0", "7:0", Some("[none] mq-deadline"), "0", &[]);
    disk(&sys, "zram0", "253:0", None, "0", &[]);
    disk(&sys, "dm-0", "252:0", None, "0", &[]);
    std::fs::create_dir_all(sys.join("devices/pci0000:00/dm-0/slaves/nvme0n1p1")).unwrap();
    sys
}

#[test]
fn parses_the_bracketed_scheduler() {
    assert_eq!(
        parse_scheduler("none [mq-deadline] kyber bfq"),
        (
            Some("mq-deadline".into()),
            vec![
                "none".into(),
                "mq-deadline".into(),
                "kyber".into(),
                "bfq".into()
            ]
        )
    );
    assert_eq!(
        parse_scheduler("none"),
        (Some("none".into()), vec!["none".into()])
    );
    assert_eq!(parse_scheduler("").0, None);
}

#[test]
fn fixture_tree_resolves_partitions_and_reads_elevators() {
    let t = Tmp::new("fixture");
    let sys = fixture(&t);
    assert_eq!(disk_of(&sys, 8, 2).unwrap(), "sda");
    assert_eq!(disk_of(&sys, 254, 16).unwrap(), "vdb");
    assert!(disk_of(&sys, 9, 9).is_err());
    let probe = Probe::read_at(&sys, None, Some((8, 2))).unwrap();
    let names: Vec<&str> = probe.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        ["dm-0", "nvme0n1", "sda", "vdb"],
        "loop and zram are skipped"
    );
    let sda = probe.root().unwrap();
    assert_eq!(sda.name, "sda");
    assert!(sda.honours_classes() && sda.honours_bfq_weight());
    assert_eq!(
        sda.describe(),
        "sda: bfq (honours I/O classes and io.bfq.weight), rotational=1, root filesystem"
    );
    let nvme = probe.device("nvme0n1").unwrap();
    assert!(!nvme.honours_classes());
    assert_eq!(
        nvme.describe(),
        "nvme0n1: none (ignores I/O classes and io.bfq.weight), rotational=0"
    );
    let vdb = probe.device("vdb").unwrap();
    assert!(vdb.honours_classes() && !vdb.honours_bfq_weight());
    assert!(vdb
        .describe()
        .contains("mq-deadline (honours I/O classes; no io.bfq.weight)"));
    let dm = probe.device("dm-0").unwrap();
    assert_eq!(dm.scheduler, None);
    assert!(
        dm.describe().contains("requests go to nvme0n1p1"),
        "{}",
        dm.describe()
    );
    assert!(probe.describe().contains("cgroup v2: not mounted"));
}

#[test]
fn zram_is_kept_when_it_holds_the_root() {
    let t = Tmp::new("zramroot");
    let sys = fixture(&t);
    let probe = Probe::read_at(&sys, None, Some((253, 0))).unwrap();
    let z = probe.root().expect("zram0 holds the root");
    assert_eq!(z.name, "zram0");
    assert!(!z.honours_classes());
    assert!(z
        .describe()
        .starts_with("zram0: no elevator (bio-based device)"));
}

#[test]
fn an_attached_writable_loop_device_is_listed_a_read_only_one_is_not() {
    let t = Tmp::new("loops");
    let sys = fixture(&t);
    disk(&sys, "loop1", "7:1", Some("[none] mq-deadline"), "0", &[]);
    disk(&sys, "loop2", "7:2", Some("[none] mq-deadline"), "0", &[]);
    let real = sys.join("devices/pci0000:00");
    write(&real.join("loop1/loop/backing_file"), "/tmp/disk.img\n");
    write(&real.join("loop1/ro"), "0\n");
    write(&real.join("loop2/loop/backing_file"), "/snap/x.snap\n");
    write(&real.join("loop2/ro"), "1\n");
    let probe = Probe::read_at(&sys, None, None).unwrap();
    let names: Vec<&str> = probe.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        ["dm-0", "loop1", "nvme0n1", "sda", "vdb"],
        "loop0 is not attached"
    );
    let l = probe.device("loop1").unwrap();
    assert!(!l.honours_classes());
    assert_eq!(
        l.describe(),
        "loop1: none (ignores I/O classes and io.bfq.weight), rotational=0"
    );
}

#[test]
fn cgroup_v2_io_files_are_listed() {
    let t = Tmp::new("cgroup");
    let sys = fixture(&t);
    let cg = t.0.join("cgroup");
    write(
        &cg.join("cgroup.controllers"),
        "cpuset cpu io memory pids\n",
    );
    write(&cg.join("cgroup.subtree_control"), "cpu io memory\n");
    for f in ["io.cost.qos", "io.cost.model", "io.stat", "io.pressure"] {
        write(&cg.join(f), "");
    }
    for f in [
        "io.weight",
        "io.bfq.weight",
        "io.latency",
        "io.max",
        "io.prio.class",
    ] {
        write(&cg.join("system.slice").join(f), "");
    }
    let probe = Probe::read_at(&sys, Some(&cg), None).unwrap();
    assert!(probe.cgroup.available && probe.cgroup.delegated);
    assert_eq!(
        probe.cgroup.root_files,
        ["io.cost.model", "io.cost.qos", "io.stat"]
    );
    assert!(probe
        .cgroup
        .child_files
        .contains(&"io.prio.class".to_string()));
    let text = probe.describe();
    assert!(
        text.contains("io controller enabled for children"),
        "{text}"
    );
    assert!(
        text.contains("io.bfq.weight") && text.contains("io.latency"),
        "{text}"
    );
    assert!(!text.contains("cannot act"), "{text}");
    assert!(probe.root().is_none());
    // The lent 16-CPU machine's kernel: iocost and io.weight, no blk-ioprio.
    std::fs::remove_file(cg.join("system.slice").join("io.prio.class")).unwrap();
    let text = Probe::read_at(&sys, Some(&cg), None).unwrap().describe();
    assert!(
        text.ends_with("no io.prio.class (a kernel without CONFIG_BLK_CGROUP_IOPRIO): the groups' I/O class cannot act"),
        "{text}"
    );
    // A hybrid system: cgroup2 mounted, io held by v1's blkio.
    write(&cg.join("cgroup.controllers"), "\n");
    let probe = Probe::read_at(&sys, Some(&cg), None).unwrap();
    assert!(
        probe.describe().contains("no io controller"),
        "{}",
        probe.describe()
    );
}

#[test]
fn finds_cgroup2_and_mount_sources_in_mountinfo() {
    let mi = "22 27 0:21 / /proc rw - proc proc rw\n\
              41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n\
              27 1 0:31 / / rw,relatime shared:1 - btrfs /dev/nvme0n1p2 rw\n";
    assert_eq!(
        cgroup2_mount(mi),
        Some(PathBuf::from("/sys/fs/cgroup/unified"))
    );
    assert_eq!(mount_source(mi, 0, 31).as_deref(), Some("/dev/nvme0n1p2"));
    assert_eq!(mount_source(mi, 0, 21), None, "proc has no /dev source");
}

/// The real machine: the root filesystem's disk must be found, with an elevator line.
#[test]
fn this_machine_has_a_root_disk() {
    let probe = Probe::read().expect("probing /sys");
    let root = probe.root().unwrap_or_else(|| {
        panic!(
            "no disk found behind the root filesystem; probe:\n{}",
            probe.describe()
        )
    });
    eprintln!("{}", probe.describe());
    let found = device_for(&probe, Path::new("/")).unwrap();
    assert_eq!(found.name, root.name);
    assert!(!root.describe().is_empty());
    let (ma, mi) = device_number(Path::new("/")).unwrap();
    assert!(
        ma != 0,
        "the root's device {ma}:{mi} was not resolved to a block device"
    );
}

#[test]
fn measures_sequential_throughput_on_disk() {
    // /var/tmp is on disk by the FHS (tmpfs cannot do O_DIRECT).
    let t = Tmp::new("seq");
    let dir = Path::new("/var/tmp").join(t.0.file_name().unwrap());
    std::fs::create_dir_all(&dir).unwrap();
    let r = measure_sequential(&dir, Duration::from_millis(300), 64 << 20);
    let _ = std::fs::remove_dir_all(&dir);
    let r = r.unwrap();
    assert!(r.write_bps > 0.0 && r.read_bps > 0.0, "{r:?}");
    assert!(!dir.join(".uxsched-seq.tmp").exists());
    assert!(available_bytes(Path::new("/var/tmp")).unwrap() > 0);
}

#[test]
fn a_module_is_found_in_modules_dep_compressed_or_not() {
    let dep = "kernel/block/bfq.ko.xz:\nkernel/drivers/nvme/host/nvme.ko: kernel/drivers/nvme/host/nvme-core.ko\n";
    assert!(lists_module(dep, "bfq"));
    assert!(lists_module(dep, "nvme"));
    assert!(lists_module("bfq.ko:\n", "bfq"));
    assert!(!lists_module(dep, "kyber"));
    assert!(!lists_module("kernel/block/bfq-extra.ko:\n", "bfq"));
    assert!(!lists_module("kernel/block/bfqx.ko:\n", "bfq"));
}
