//! The `kbuild` load on a tiny real C project (not the kernel: seconds, not minutes): its
//! throughput counts the real `.o` files make produced — across restarts, outside the
//! host-tool directories, nothing else — and a failing build is an error, not a number.

mod common;

use common::{serial, Scratch};
use std::path::Path;
use std::time::Duration;
use uxsched_bench::layout::Placement;
use uxsched_bench::loads::{self, kbuild, LoadKind, LoadSpec};
use uxsched_bench::models::xapp::AppUser;

const UNITS: usize = 12;

/// `UNITS` C files and a Makefile that links them; plus files that must not be counted.
fn tiny_project(dir: &Path, broken: bool) {
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    let mut objs = Vec::new();
    for i in 0..UNITS {
        let body = if broken && i == 3 {
            "int f3(void) { return undeclared; }\n".to_owned()
        } else {
            format!("int f{i}(int x) {{ int s = 0; for (int k = 0; k < x; k++) s += k * {i}; return s; }}\n")
        };
        std::fs::write(dir.join(format!("u{i}.c")), body).unwrap();
        objs.push(format!("u{i}.o"));
    }
    std::fs::write(dir.join("main.c"), "int main(void) { return 0; }\n").unwrap();
    let makefile = format!(
        "OBJS = {}\nall: prog\nprog: main.c $(OBJS)\n\t$(CC) -o $@ main.c $(OBJS)\n%.o: %.c\n\t$(CC) -O1 -c -o $@ $<\n",
        objs.join(" ")
    );
    std::fs::write(dir.join("Makefile"), makefile).unwrap();
    // Host tools and non-objects: present, never counted.
    std::fs::write(dir.join("scripts/host.o"), "").unwrap();
    std::fs::write(dir.join("notes.txt"), "").unwrap();
    // The build runs as the bench's unprivileged user: the tree is that user's.
    let user = AppUser::ensure().unwrap();
    let status = std::process::Command::new("chown")
        .arg("-R")
        .arg(format!("{}:{}", user.uid, user.gid))
        .arg(dir)
        .status()
        .unwrap();
    assert!(status.success());
}

fn spec(scratch: &Scratch) -> LoadSpec {
    LoadSpec {
        kind: LoadKind::Kbuild,
        workers: 2,
        scratch: scratch.0.clone(),
    }
}

#[test]
fn kbuild_counts_real_object_files_across_restarts() {
    let _s = serial();
    let scratch = Scratch::new("kbuild-count");
    let tree = scratch.0.join("tree");
    tiny_project(&tree, false);
    std::env::set_var("UXSCHED_KBUILD_TREE", &tree);
    let spec = spec(&scratch);
    loads::prepare(&spec).unwrap();
    let out = scratch.0.join("run");
    let load = loads::start(&spec, &out, &Placement::own_session()).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let rate = load.stop().unwrap();
    let units = kbuild::completed_units(&tree, &out).unwrap();
    let builds: Vec<usize> = std::fs::read_to_string(out.join("completed-builds"))
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert!(!builds.is_empty(), "the tiny build completes and restarts");
    assert!(
        builds.iter().all(|&n| n == UNITS),
        "every completed build made exactly the {UNITS} objects: {builds:?}"
    );
    assert!(units >= UNITS, "{units}");
    assert_eq!(rate.unit, ".o/s");
    // Elapsed is the run's wall time, a little over the 2.5 s slept.
    let implied = units as f64 / rate.value;
    assert!(
        (2.4..4.0).contains(&implied),
        "units {units} / rate {} = {implied} s",
        rate.value
    );
    assert!(tree.join("scripts/host.o").exists(), "host tools kept");
    let user = AppUser::ensure().unwrap();
    // The build's log is created by the load's own shell (an object may be gone: each restart
    // deletes them, and a SIGINTed make removes half-written ones).
    let owner =
        std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(out.join("make.log")).unwrap());
    assert_eq!(
        owner, user.uid,
        "the build ran as the bench's unprivileged user"
    );
    std::env::remove_var("UXSCHED_KBUILD_TREE");
}

#[test]
fn kbuild_refuses_a_tree_its_user_cannot_write() {
    let _s = serial();
    let scratch = Scratch::new("kbuild-owner");
    let tree = scratch.0.join("tree");
    tiny_project(&tree, false);
    std::os::unix::fs::chown(&tree, Some(0), Some(0)).unwrap();
    std::env::set_var("UXSCHED_KBUILD_TREE", &tree);
    let err = loads::prepare(&spec(&scratch)).expect_err("root's tree is refused");
    std::env::remove_var("UXSCHED_KBUILD_TREE");
    assert!(
        format!("{err:#}").contains("chown -R uxsched-bench:"),
        "{err:#}"
    );
}

#[test]
fn kbuild_reports_a_failing_build_as_an_error() {
    let _s = serial();
    let scratch = Scratch::new("kbuild-fail");
    let tree = scratch.0.join("tree");
    tiny_project(&tree, true);
    std::env::set_var("UXSCHED_KBUILD_TREE", &tree);
    let spec = spec(&scratch);
    let out = scratch.0.join("run");
    let load = loads::start(&spec, &out, &Placement::own_session()).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let err = load.stop().expect_err("a broken build has no throughput");
    assert!(format!("{err:#}").contains("build failed"), "{err:#}");
    std::env::remove_var("UXSCHED_KBUILD_TREE");
}
