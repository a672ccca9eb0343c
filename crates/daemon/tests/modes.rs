//! Each mode's effects on real threads, the autogroup case across sessions, cgroup v2 placement
//! and EIMOS prefetch — as root, with spawned test apps killed by Drop guards.

mod common;

use common::*;
use std::time::Duration;
use uxsched_client::control::Request;
use uxsched_os::ioprio;

const T: Duration = Duration::from_secs(5);

#[test]
#[ignore = "needs root: make test runs it as root"]
fn vtcfs_boosts_the_ui_thread_per_eq6_and_the_boost_lapses() {
    require_root();
    let _s = serial();
    let d = Daemon::start("vtcfs", "[vtcfs]\nbudget_ms = 400\nslice_us = 200");
    let app = App::spawn("worker");
    let (ui, worker) = (app.pid(), app.tid("worker"));
    d.focus(Some(ui));
    wait_until("ui boosted", T, || {
        attr(ui).runtime == 200_000 && nice(ui) < 0
    });
    assert_eq!(nice(worker), 0, "only the interactive thread");
    wait_until("budget lapsed", T, || {
        nice(ui) == 0 && attr(ui).runtime != 200_000
    });
    d.focus(Some(ui)); // a new interaction with the same app
    wait_until("boosted again", T, || {
        attr(ui).runtime == 200_000 && nice(ui) < 0
    });
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn mcfs_lifts_the_foreground_by_log_1_25_of_the_cut_rate() {
    require_root();
    let _s = serial();
    let d = Daemon::start("mcfs", "[mcfs]\ncut_rate = 16");
    let app = App::spawn("worker");
    d.focus(Some(app.pid()));
    let worker = app.tid("worker");
    wait_until("12 levels", T, || {
        nice(worker) == -12 && nice(app.pid()) == -12
    });
}

/// The app's process family (the same program under it, as the same user) is the app: a
/// browser's renderers and GPU process are placed with it; another program it started (a
/// terminal's build) is not (issue 30). Restored when the focus goes.
#[test]
#[ignore = "needs root: make test runs it as root"]
fn the_apps_process_family_is_placed_with_it_and_other_programs_are_not() {
    require_root();
    let _s = serial();
    let d = Daemon::start("mcfs", "[mcfs]\ncut_rate = 16");
    let app = App::spawn("kin,stranger");
    let pid = app.pid();
    let mut kids = Vec::new();
    wait_until("the app's two children", T, || {
        kids = uxsched_os::process_tree::with_descendants(pid)
            .into_iter()
            .filter(|&p| p != pid)
            .collect();
        kids.len() == 2 && kids.iter().all(|&k| !comm(k).is_empty())
    });
    let (strangers, kin): (Vec<i32>, Vec<i32>) = kids.iter().partition(|&&k| comm(k) == "sleep");
    let (kin, stranger) = (kin[0], strangers[0]);
    d.focus(Some(pid));
    wait_until("the app and its kin raised", T, || {
        nice(pid) == -12 && tids(kin).iter().all(|&t| nice(t) == -12)
    });
    assert_eq!(nice(stranger), 0, "another program is not the app");
    d.focus(None);
    wait_until("the kin restored", T, || {
        tids(kin).iter().all(|&t| nice(t) == 0)
    });
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn facfs_scales_the_group_weight_by_the_fixture_frequency_ratio() {
    require_root();
    let _s = serial();
    let sysfs = tempfile::tempdir().unwrap();
    for cpu in 0..64 {
        let dir = sysfs.path().join(format!("cpu{cpu}/cpufreq"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cpuinfo_max_freq"), "2000000\n").unwrap();
        std::fs::write(dir.join("scaling_cur_freq"), "500000\n").unwrap();
    }
    let d = Daemon::start(
        "facfs",
        &format!(
            "fg_shares = 1024\n[facfs]\nsysfs_root = \"{}\"",
            sysfs.path().display()
        ),
    );
    let app = App::spawn("");
    d.focus(Some(app.pid()));
    // In the hierarchy's own unit: shares on v1, their `cpu.weight` equivalent on v2.
    wait_until("fg weight × 4", T, || {
        d.weight("fg") == native_weight(4096)
    });
    d.focus(None);
    wait_until("weight back", T, || d.weight("fg") == native_weight(1024));
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn shuffledog_puts_critical_threads_first_with_rt_io_and_demotes_background_apps() {
    require_root();
    let _s = serial();
    let d = Daemon::start("shuffledog", "");
    let old = App::spawn("bgworker");
    let app = App::spawn("RenderThread,worker");
    let before = snapshot(&[old.tids(), app.tids()].concat());
    d.focus(Some(old.pid()));
    wait_until("first app boosted", T, || nice(old.pid()) == -19);
    d.focus(Some(app.pid())); // `old` becomes a background app
    let render = app.tid("RenderThread");
    let bg = d.group_rel("bg");
    wait_until("shuffledog settings", T, || {
        nice(app.pid()) == -19
            && nice(render) == -18
            && ioprio::get(render).unwrap() == ioprio::encode(ioprio::CLASS_RT, 4)
            && old.tids().iter().all(|&t| {
                cgroup(t) == bg && ioprio::get(t).unwrap() == ioprio::encode(ioprio::CLASS_BE, 7)
            })
    });
    assert_eq!(nice(old.pid()), 0, "the old app's boost was restored");
    assert_eq!(nice(app.tid("worker")), 0, "not delay-critical");
    d.send(Request::Restore).unwrap();
    assert_restored("restore", &before);
}

/// CPU time (utime + stime, clock ticks) of a process.
fn cpu_ticks(pid: i32) -> u64 {
    let f = uxsched_os::task::Fields::read(format!("/proc/{pid}/stat")).unwrap();
    f.num::<u64>(14).unwrap() + f.num::<u64>(15).unwrap()
}

/// Share of one CPU the app got over `window`.
fn cpu_share(pid: i32, window: Duration) -> f64 {
    let hz = 100.0; // USER_HZ: /proc reports clock ticks of 10 ms
    let a = cpu_ticks(pid);
    std::thread::sleep(window);
    (cpu_ticks(pid) - a) as f64 / hz / window.as_secs_f64()
}

fn pin_to_cpu0(c: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        c.pre_exec(|| {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            Ok(())
        });
    }
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn autogroup_nice_alone_fails_across_sessions_the_foreground_group_works() {
    require_root();
    let autogroup = std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled");
    assert!(
        autogroup.as_deref().is_ok_and(|s| s.trim() == "1"),
        "this test measures autogroup: it needs kernel.sched_autogroup_enabled=1 (sysctl), got {autogroup:?}"
    );
    let _s = serial();
    // Background: two busy threads on CPU 0, in their own session (setsid => own autogroup).
    let hog = App::spawn_with("spin1,spin2", |c| {
        use std::os::unix::process::CommandExt;
        pin_to_cpu0(c);
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            c.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
    });
    let fg = App::spawn_with("spin", pin_to_cpu0);
    let spin = fg.tid("spin");
    let window = Duration::from_millis(800);

    // Nice alone (what most tools do): the autogroups still split CPU 0 about half and half.
    set_nice(spin, -19);
    let nice_only = cpu_share(fg.pid(), window);
    set_nice(spin, 0);

    let d = Daemon::start("eimos", "");
    d.focus(Some(fg.pid()));
    wait_until("in the foreground group", T, || {
        cgroup(spin) == d.group_rel("fg")
    });
    let with_group = cpu_share(fg.pid(), window);
    drop(d);
    wait_until("out of the group", T, || cgroup(spin) == "/");

    // uxsched mode: the app's own autogroup raised instead.
    let d = Daemon::start("uxsched", "");
    d.focus(Some(fg.pid()));
    let ag = uxsched_os::autogroup::get;
    wait_until("autogroup raised", T, || ag(fg.pid()).unwrap() == -19);
    let with_autogroup = cpu_share(fg.pid(), window);
    eprintln!(
        "foreground CPU share: nice -19 alone {nice_only:.2}, eimos (fg cgroup) {with_group:.2}, \
         uxsched (autogroup nice) {with_autogroup:.2}"
    );
    assert!(
        nice_only < 0.7,
        "nice alone should not beat another autogroup: {nice_only}"
    );
    assert!(
        with_group > 0.8,
        "the foreground group must win: {with_group}"
    );
    assert!(
        with_autogroup > 0.8,
        "the raised autogroup must win: {with_autogroup}"
    );
    drop(d);
    assert_eq!(ag(fg.pid()).unwrap(), 0, "autogroup nice restored");
    drop(hog);
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn cgroup_v2_groups_move_whole_processes_and_back() {
    use uxsched_daemon::actuators::cgroup::{find_mounts, Groups, Hierarchy};
    use uxsched_daemon::types::Group;
    require_root();
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mount = find_mounts(&info)
        .1
        .expect("this test needs a cgroup2 mount (the unified hierarchy)");
    let _s = serial();
    let cpu = std::fs::read_to_string(mount.join("cgroup.controllers"))
        .is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu"));
    let h = Hierarchy::V2 { mount, cpu };
    let name = format!("uxsched-test-v2-{}", std::process::id());
    let groups = Groups::create(h.clone(), &name, 10240, 128).unwrap();
    let app = App::spawn("worker");
    let home = h.current(app.pid()).unwrap();
    let result = std::panic::catch_unwind(|| {
        h.move_to(app.tid("worker"), &groups.rel(Group::Fg))
            .unwrap();
        for t in app.tids() {
            assert_eq!(
                h.current(t).unwrap(),
                groups.rel(Group::Fg),
                "whole process moves"
            );
        }
        assert!(groups.members(Group::Fg).unwrap().contains(&app.pid()));
        if cpu {
            assert_eq!(groups.weight(Group::Fg), Some(1000)); // 10240 shares ≡ cpu.weight 1000
        }
    });
    for t in app.tids() {
        let _ = h.move_to(t, &home);
    }
    assert_eq!(h.current(app.pid()).unwrap(), home);
    drop(app);
    groups.remove().unwrap();
    result.unwrap();
}

/// SCHED_FIFO 1 (`fifo`) or back to SCHED_OTHER for thread `tid`; the errno on failure.
fn set_fifo(tid: i32, fifo: bool) -> Result<(), i32> {
    let (policy, prio) = if fifo {
        (libc::SCHED_FIFO, 1)
    } else {
        (libc::SCHED_OTHER, 0)
    };
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: sched_setscheduler on a thread of our own test app, with a valid param.
    match unsafe { libc::sched_setscheduler(tid, policy, &param) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0)),
    }
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn the_fg_group_takes_real_time_threads_that_a_new_cgroup_refuses() {
    use uxsched_daemon::actuators::cgroup::{Groups, Hierarchy};
    use uxsched_daemon::types::Group;
    require_root();
    let _s = serial();
    let h = Hierarchy::detect().expect("this test needs a cgroup hierarchy");
    let name = format!("uxsched-test-rt-{}", std::process::id());
    let groups = Groups::create(h.clone(), &name, 71755, 128).unwrap();
    let app = App::spawn("worker");
    let worker = app.tid("worker");
    let home = h.current(worker).unwrap();
    assert!(!groups.refuses_rt(worker), "{home} takes them");
    if !groups.takes_rt() {
        // cgroup v2 with RT group scheduling: no group but the root takes them, and none can
        // be given runtime; the fg group says so rather than failing the move or the boost.
        assert!(
            matches!(h, Hierarchy::V2 { .. }),
            "only v2 has no way to give runtime"
        );
        h.move_to(worker, &groups.rel(Group::Fg)).unwrap();
        assert!(groups.refuses_rt(worker));
        assert_eq!(
            set_fifo(worker, true),
            Err(libc::EPERM),
            "the fg group refuses"
        );
        let _ = h.move_to(worker, &home);
        drop(app);
        groups.remove().unwrap();
        return;
    }
    // A group made like a systemd unit on cgroup v1 (no RT runtime), where there is one.
    let unit = h.mount().join(format!("{name}-unit"));
    let rt_groups = h.mount().join("cpu.rt_runtime_us").exists();
    let result = std::panic::catch_unwind(|| {
        if rt_groups {
            std::fs::create_dir(&unit).unwrap();
            h.move_to(worker, &format!("/{name}-unit")).unwrap();
            assert!(groups.refuses_rt(worker));
            assert_eq!(set_fifo(worker, true), Err(libc::EPERM), "the unit refuses");
        }
        h.move_to(worker, &groups.rel(Group::Fg)).unwrap();
        assert!(!groups.refuses_rt(worker));
        assert_eq!(set_fifo(worker, true), Ok(()), "the fg group takes it");
        set_fifo(worker, false).unwrap();
    });
    let _ = set_fifo(worker, false);
    let _ = h.move_to(worker, &home);
    drop(app);
    let _ = std::fs::remove_dir(&unit);
    groups.remove().unwrap();
    result.unwrap();
}

/// The cgroup mover (`actuators/mover.rs`): a placement returns at once and reads back as made
/// while queued, is made in order on the mover's thread, which wakes its caller when the
/// queue runs empty; a move the kernel refuses is handed back, a move into a group removed
/// meanwhile lands in the root.
#[test]
#[ignore = "needs root: make test runs it as root"]
fn moves_are_made_off_the_callers_thread_in_order_and_failures_handed_back() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use uxsched_daemon::actuators::cgroup::{Groups, Hierarchy};
    use uxsched_daemon::types::Group;
    require_root();
    let _s = serial();
    let h = Hierarchy::detect().expect("this test needs a cgroup hierarchy");
    let name = format!("uxsched-test-mover-{}", std::process::id());
    let mut groups = Groups::create(h.clone(), &name, 71755, 128).unwrap();
    let wakes = Arc::new(AtomicUsize::new(0));
    let w = wakes.clone();
    let wake = move || {
        w.fetch_add(1, Ordering::SeqCst);
    };
    groups.move_off_thread(Box::new(wake)).unwrap();
    let app = App::spawn("worker");
    let worker = app.tid("worker");
    let home = h.current(worker).unwrap();
    let (fg, bg) = (groups.rel(Group::Fg), groups.rel(Group::Bg));
    let result = std::panic::catch_unwind(|| {
        // The thread names and raises itself once it runs: the mover at the loop's priority.
        wait_until("the mover's thread at nice -20", T, || {
            (tids(std::process::id() as i32).into_iter())
                .any(|t| comm(t) == "uxsched-mover" && nice(t) == -20)
        });
        // Two moves queued back to back: the newest is what reads back, and what holds.
        groups.place(worker, &bg).unwrap();
        groups.place(worker, &fg).unwrap();
        assert_eq!(
            groups.placed(worker).unwrap(),
            fg,
            "a queued move reads back as made"
        );
        assert!(groups.settle(T), "the queue drains");
        assert!(!groups.busy() && !groups.moving(worker));
        assert_eq!(h.current(worker).unwrap(), fg, "made, in order");
        assert!(wakes.load(Ordering::SeqCst) >= 1, "the caller was woken");
        assert!(groups.take_failed_moves().is_empty());
        // kthreadd: a kernel thread no cgroup write may move (EINVAL), handed back.
        groups.place(2, &fg).unwrap();
        assert!(groups.settle(T));
        let failed = groups.take_failed_moves();
        assert!(
            failed.len() == 1 && failed[0].tid == 2 && failed[0].to == fg,
            "{failed:?}"
        );
        // A task that is gone is refused at once (its identity is taken when queued).
        let e = groups.place(i32::MAX, &fg).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
        // A home group removed meanwhile: the root, not a lost task.
        let gone = format!("/{name}-gone");
        groups.place(worker, &gone).unwrap();
        assert!(groups.settle(T));
        assert_eq!(h.current(worker).unwrap(), "/");
        assert!(groups.take_failed_moves().is_empty());
    });
    let _ = h.move_to(worker, &home);
    drop(app);
    groups.remove().unwrap();
    result.unwrap();
}

/// A queued move that fails reaches the reconciler at its next pass as a synchronous one did:
/// its journal row is forgotten (the task never left its group: nothing to restore) and the
/// failure is listed for `status`. kthreadd stands for the failing task: no cgroup write may
/// move a kernel thread (EINVAL).
#[test]
#[ignore = "needs root: make test runs it as root"]
fn a_failed_queued_move_forgets_its_row_and_is_listed() {
    use std::rc::Rc;
    use uxsched_daemon::actuators::cgroup::{Groups, Hierarchy};
    use uxsched_daemon::journal::Journal;
    use uxsched_daemon::reconcile::Reconciler;
    use uxsched_daemon::types::Group;
    use uxsched_daemon::types::Key;
    use uxsched_daemon::types::Kind;
    use uxsched_daemon::types::{Desired, Target};
    require_root();
    let _s = serial();
    let h = Hierarchy::detect().expect("this test needs a cgroup hierarchy");
    let name = format!("uxsched-test-failed-move-{}", std::process::id());
    let mut groups = Groups::create(h.clone(), &name, 71755, 128).unwrap();
    groups.move_off_thread(Box::new(|| {})).unwrap();
    let dir = std::env::temp_dir().join(&name);
    std::fs::create_dir_all(&dir).unwrap();
    let journal = Journal::open(&dir.join("journal.sqlite"), |_| None).unwrap();
    let mut rec = Reconciler::new(journal, Some(groups), 0);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let cfg = uxsched_daemon::Config::default();
        let kthreadd = uxsched_os::identity::task_id(2).unwrap();
        let home = h.current(2).unwrap();
        let mut desired = Desired::nothing(&cfg);
        let target = Target {
            group: Some(Group::Fg),
            ..Target::default()
        };
        desired.threads.insert(kthreadd, target);
        rec.reconcile(&desired).unwrap();
        let row = rec
            .journal
            .get(Kind::Cgroup, &Key::Thread(kthreadd))
            .unwrap();
        assert!(row.is_some(), "journalled before the move was queued");
        let groups: &Rc<Groups> = rec.groups.as_ref().unwrap();
        assert!(groups.settle(T), "the move was made (and failed)");
        rec.reconcile(&Desired::nothing(&cfg)).unwrap();
        let row = rec
            .journal
            .get(Kind::Cgroup, &Key::Thread(kthreadd))
            .unwrap();
        assert!(row.is_none(), "the failed move's row is forgotten: {row:?}");
        let failure = rec.failures.get(&(Kind::Cgroup, Key::Thread(kthreadd)));
        assert!(
            failure.is_some_and(|f| f.starts_with("cannot move")),
            "{:?}",
            rec.failures
        );
        assert_eq!(h.current(2).unwrap(), home, "never moved");
    }));
    let groups = rec.groups.take().unwrap();
    assert!(groups.settle(T));
    drop(rec);
    let _ = std::fs::remove_dir_all(&dir);
    groups.remove().unwrap();
    result.unwrap();
}

/// Whether the page at `offset` of `file` is in the page cache (mincore).
fn cached(file: &std::fs::File, offset: u64) -> bool {
    use std::os::fd::AsRawFd;
    let page = 4096usize;
    // SAFETY: a read-only shared mapping of one page of a file we hold open; unmapped below.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            page,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            offset as libc::off_t,
        );
        assert_ne!(p, libc::MAP_FAILED);
        let mut v = 0u8;
        assert_eq!(libc::mincore(p, page, &mut v), 0);
        libc::munmap(p, page);
        v & 1 == 1
    }
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn eimos_prefetches_ahead_of_the_topmost_process_sequential_reads() {
    require_root();
    let _s = serial();
    // A real block-device file (not tmpfs), its pages evicted (this file only).
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("prefetch.dat");
    let len: u64 = 24 << 20;
    std::fs::write(&path, vec![7u8; len as usize]).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    file.sync_all().unwrap();
    let evict = || {
        use std::os::fd::AsRawFd;
        // SAFETY: advisory call on a descriptor we own.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    };
    evict();
    let last = len - 4096;
    let reader = App::spawn(&format!("reader={}", path.display()));
    std::thread::sleep(Duration::from_millis(300));
    let without = cached(&file, last);
    drop(reader);
    evict();
    assert!(!cached(&file, last));

    let d = Daemon::start("eimos", "[eimos]\nreadahead_factor = 8");
    let reader = App::spawn(&format!("reader={}", path.display()));
    d.focus(Some(reader.pid()));
    wait_until("the file's tail prefetched", T, || cached(&file, last));
    assert!(
        !without,
        "the kernel's own read-ahead already reached the tail: test proves nothing"
    );
    drop(reader);
    let _ = std::fs::remove_file(&path);
}
