//! The classifier on recorded event sequences, encoded as the BPF program writes them.

use super::*;
use crate::wire::{decode, tests::encode};

const APP: u32 = 100;

fn app_task(tid: u32, comm: &str) -> Task {
    Task {
        tid,
        tgid: APP,
        start_ns: u64::from(tid) * 10_000_000,
        comm: comm.into(),
        kthread: false,
    }
}

fn other(tid: u32, tgid: u32, comm: &str, kthread: bool) -> Task {
    Task {
        tid,
        tgid,
        start_ns: 5,
        comm: comm.into(),
        kthread,
    }
}

struct Rec {
    c: Classifier,
    ts: u64,
}

impl Rec {
    fn new(store: Store) -> Self {
        let mut c = Classifier::new(TrackerConfig::default(), store);
        let app = App {
            tgid: APP,
            key: "/usr/bin/app 0000".into(),
        };
        c.set_foreground(Some(app), &[app_task(APP, "app")], 0);
        Rec { c, ts: 0 }
    }

    /// Feed one event through the wire encoding.
    fn ev(&mut self, kind: u32, flags: u32, epoch: u64, a: &Task, b: &Task) {
        self.ts += 1_000;
        let e = decode(&encode(kind, flags, self.ts, epoch, a, b)).expect("decodes");
        self.c.handle(e);
    }

    fn status(&self, tid: u32) -> Option<Status> {
        self.c
            .snapshot(0)
            .critical
            .iter()
            .find(|m| m.id.tid == tid as i32)
            .map(|m| m.status)
    }
}

fn xorg() -> Task {
    other(7, 7, "Xorg", false)
}

#[test]
fn worker_that_posts_back_is_kept_logger_is_dropped() {
    let mut r = Rec::new(Store::open(None, 1 << 20).unwrap());
    let (ui, worker, logger) = (
        app_task(APP, "app"),
        app_task(101, "worker"),
        app_task(102, "logger"),
    );
    r.ev(1, 0, 1, &xorg(), &ui);
    assert_eq!(r.status(APP), Some(Status::Confirmed));
    assert_eq!(
        r.status(7),
        Some(Status::Confirmed),
        "the input thread is on the path"
    );
    r.ev(2, 0, 1, &ui, &worker);
    r.ev(2, 0, 1, &ui, &logger);
    assert_eq!(r.status(101), Some(Status::Provisional), "boosted at once");
    assert_eq!(r.status(102), Some(Status::Provisional));
    r.ev(2, 0, 1, &worker, &ui);
    assert_eq!(r.status(101), Some(Status::Confirmed), "the circle closed");
    r.ev(3, 0, 1, &ui, &xorg());
    assert_eq!(r.status(102), None, "never led back: dropped at the end");
    let s = r.c.snapshot(0);
    let ep = s.episode.unwrap();
    assert_eq!(
        (ep.end, ep.ui.tid, s.episodes),
        (Some(EndReason::Display), APP as i32, 1)
    );
    let learned: Vec<(String, bool)> = s
        .learned
        .iter()
        .map(|p| (p.context.thread.clone(), p.decision.critical))
        .collect();
    assert!(learned.contains(&("worker".into(), true)));
    assert!(learned.contains(&("logger".into(), false)));
    assert!(
        !learned.iter().any(|(t, _)| t == "Xorg"),
        "input/display are not learned"
    );
}

/// The daemon's own threads (its cgroup mover, its rt guard) are woken by what they act on; an
/// episode reaching them does not make them critical (seen once in a Chromium run's sets).
#[test]
fn the_trackers_own_process_is_never_on_the_path() {
    let mut r = Rec::new(Store::open(None, 1 << 20).unwrap());
    let ui = app_task(APP, "app");
    let me = std::process::id();
    let mover = other(me + 1, me, "uxsched-mover", false);
    r.ev(1, 0, 1, &xorg(), &ui);
    r.ev(2, 0, 1, &ui, &mover);
    r.ev(2, 0, 1, &mover, &ui);
    assert_eq!(r.status(me + 1), None, "not even provisional");
    assert_eq!(r.status(APP), Some(Status::Confirmed));
}

#[test]
fn chain_through_kernel_workers_and_a_shell_is_critical() {
    let mut r = Rec::new(Store::open(None, 1 << 20).unwrap());
    let ui = app_task(APP, "term");
    let (kw1, sh, kw2) = (
        other(30, 30, "kworker/u8:1", true),
        other(40, 40, "sh", false),
        other(31, 31, "kworker/u8:2", true),
    );
    r.ev(1, 0, 1, &xorg(), &ui);
    for (a, b) in [(&ui, &kw1), (&kw1, &sh), (&sh, &kw2), (&kw2, &ui)] {
        r.ev(2, 0, 1, a, b);
    }
    r.ev(3, 0, 1, &ui, &xorg());
    let s = r.c.snapshot(0);
    let kinds: BTreeMap<i32, Kind> = s.critical.iter().map(|m| (m.id.tid, m.kind)).collect();
    assert_eq!(kinds[&30], Kind::KernelWorker);
    assert_eq!(kinds[&31], Kind::KernelWorker);
    assert_eq!(kinds[&40], Kind::Partner);
    assert_eq!(kinds[&(APP as i32)], Kind::App);
}

#[test]
fn timeout_drops_provisional_and_stale_epochs_are_ignored() {
    let mut r = Rec::new(Store::open(None, 1 << 20).unwrap());
    let (ui, db) = (app_task(APP, "app"), app_task(103, "db-writer"));
    r.ev(1, 0, 4, &xorg(), &ui);
    r.ev(2, 0, 3, &ui, &app_task(104, "stale")); // an older episode's edge
    assert_eq!(r.status(104), None);
    r.ev(2, 0, 4, &ui, &db);
    assert_eq!(r.status(103), Some(Status::Provisional));
    r.c.tick(r.ts + 50_000_000);
    assert_eq!(
        r.status(103),
        Some(Status::Provisional),
        "not yet timed out"
    );
    r.c.tick(r.ts + 200_000_000);
    assert_eq!(r.status(103), None);
    assert_eq!(
        r.c.snapshot(0).episode.unwrap().end,
        Some(EndReason::Timeout)
    );
}

#[test]
fn irq_started_episode_and_render_threads_by_name() {
    let mut r = Rec::new(Store::open(None, 1 << 20).unwrap());
    let ui = app_task(APP, "app");
    r.ev(
        1,
        1,
        1,
        &Task {
            tid: 0,
            tgid: 0,
            start_ns: 0,
            comm: String::new(),
            kthread: false,
        },
        &ui,
    );
    let ep = r.c.snapshot(0).episode.unwrap();
    assert_eq!(ep.input, None);
    assert!(ep.end.is_none(), "open");
    r.ev(4, 0, 0, &ui, &app_task(105, "app"));
    assert_eq!(r.status(105), None);
    r.ev(7, 0, 0, &app_task(105, "RenderThread"), &ui);
    assert_eq!(r.status(105), Some(Status::Confirmed));
    r.ev(6, 0, 0, &app_task(105, "RenderThread"), &ui);
    assert_eq!(r.status(105), None, "exited");
}

#[test]
fn relaunch_classifies_from_the_store_at_creation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sqlite");
    let (ui, worker) = (app_task(APP, "app"), app_task(101, "app"));
    {
        let mut r = Rec::new(Store::open(Some(&path), 1 << 20).unwrap());
        r.ev(4, 0, 0, &ui, &worker); // created by the main thread…
        r.ev(7, 0, 0, &app_task(101, "req-worker"), &ui); // …then named
        r.ev(1, 0, 1, &xorg(), &ui);
        r.ev(2, 0, 1, &ui, &app_task(101, "req-worker"));
        r.ev(2, 0, 1, &app_task(101, "req-worker"), &ui);
        r.ev(3, 0, 1, &ui, &xorg());
    }
    let mut r = Rec::new(Store::open(Some(&path), 1 << 20).unwrap());
    let worker2 = app_task(201, "app");
    r.ev(4, 0, 0, &ui, &worker2);
    assert_eq!(r.status(201), None, "its name is not known yet");
    r.ev(7, 0, 0, &app_task(201, "req-worker"), &ui);
    let s = r.c.snapshot(0);
    let m = s
        .critical
        .iter()
        .find(|m| m.id.tid == 201)
        .expect("classified at creation");
    assert_eq!((m.status, m.source), (Status::Confirmed, Source::Learned));
    assert!(s.episode.is_none(), "before any episode");
}

/// At focus the app's threads exist already, their creators unknown: a learned name that one
/// thread has is confirmed; a name a pool shares confirms none of the pool until the path
/// reaches one.
#[test]
fn a_pool_sharing_a_learned_name_waits_for_the_path_at_focus() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sqlite");
    let ui = app_task(APP, "app");
    {
        let mut r = Rec::new(Store::open(Some(&path), 1 << 20).unwrap());
        r.ev(1, 0, 1, &xorg(), &ui);
        for w in [app_task(101, "ThreadPoolForeg"), app_task(102, "IOThread")] {
            r.ev(2, 0, 1, &ui, &w);
            r.ev(2, 0, 1, &w, &ui);
        }
        r.ev(3, 0, 1, &ui, &xorg());
    }
    let mut c = Classifier::new(
        TrackerConfig::default(),
        Store::open(Some(&path), 1 << 20).unwrap(),
    );
    let app = App {
        tgid: APP,
        key: "/usr/bin/app 0000".into(),
    };
    let pool: Vec<Task> = (211..215).map(|t| app_task(t, "ThreadPoolForeg")).collect();
    let threads: Vec<Task> = [ui.clone(), app_task(202, "IOThread")]
        .into_iter()
        .chain(pool)
        .collect();
    let threads = &threads[..];
    c.set_foreground(Some(app), threads, 0);
    let mut r = Rec { c, ts: 0 };
    assert_eq!(
        r.status(202),
        Some(Status::Confirmed),
        "one thread: its own"
    );
    assert!(
        (211..215).all(|t| r.status(t).is_none()),
        "a shared name confirms none at focus"
    );
    r.ev(1, 0, 1, &xorg(), &ui);
    r.ev(2, 0, 1, &ui, &app_task(213, "ThreadPoolForeg"));
    assert_eq!(
        r.status(213),
        Some(Status::Confirmed),
        "learned, on the path"
    );
}

#[test]
fn the_apps_exit_empties_the_set() {
    let mut r = Rec::new(Store::open(None, 1 << 20).unwrap());
    let ui = app_task(APP, "term");
    let kw = other(30, 30, "kworker/u8:1", true);
    r.ev(1, 0, 1, &xorg(), &ui);
    r.ev(2, 0, 1, &ui, &kw);
    r.ev(2, 0, 1, &kw, &ui);
    assert_eq!(r.status(30), Some(Status::Confirmed));
    r.ev(6, 0, 0, &ui, &ui);
    let s = r.c.snapshot(0);
    assert!(s.critical.is_empty(), "{:?}", s.critical);
    assert!(r.c.app().is_none());
}

/// Roles of the family processes in the tests below (a browser's renderer and GPU process).
fn chromium_roles(tgid: u32) -> Option<String> {
    match tgid {
        200 | 201 => Some("chromium --type=renderer".into()),
        300 => Some("chromium --type=gpu-process".into()),
        _ => None,
    }
}

fn family_rec(store: Store) -> Rec {
    let mut c = Classifier::new(TrackerConfig::default(), store).with_roles(chromium_roles);
    let app = App {
        tgid: APP,
        key: "/usr/lib/chromium/chromium 0000".into(),
    };
    c.set_foreground(Some(app), &[app_task(APP, "chromium")], 0);
    c.set_family(&[200, 300]);
    Rec { c, ts: 0 }
}

/// Issue 30's keystroke: the browser's UI thread asks the X server something before its
/// renderer has drawn; the frame reaches X from the GPU process. The first display wake-up does
/// not end the episode while the renderer has the input's work; viz's does.
#[test]
fn a_pipeline_through_the_family_ends_at_its_frame_not_the_first_display_wake() {
    let mut r = family_rec(Store::open(None, 1 << 20).unwrap());
    let ui = app_task(APP, "chromium");
    let comp = other(210, 200, "Compositor", false);
    let (gpu_io, viz) = (
        other(310, 300, "Chrome_ChildIOT", false),
        other(311, 300, "VizCompositorTh", false),
    );
    r.ev(1, 0, 1, &xorg(), &ui);
    r.ev(2, 0, 1, &ui, &comp);
    r.ev(3, 0, 1, &ui, &xorg());
    assert!(r.c.snapshot(0).episode.unwrap().end.is_none(), "still open");
    assert_eq!(r.status(210), Some(Status::Provisional));
    r.ev(2, 0, 1, &comp, &gpu_io);
    r.ev(2, 0, 1, &gpu_io, &viz);
    r.ev(3, 0, 1, &viz, &xorg());
    let s = r.c.snapshot(0);
    assert_eq!(s.episode.unwrap().end, Some(EndReason::Display));
    for tid in [210, 310, 311] {
        assert_eq!(r.status(tid), Some(Status::Confirmed), "{tid}");
    }
    let ctx = |t: &str| {
        s.learned
            .iter()
            .find(|p| p.context.thread == t)
            .map(|p| p.context.creator.clone())
    };
    assert_eq!(
        ctx("Compositor").as_deref(),
        Some("family:chromium --type=renderer"),
        "keyed by the process's role, not its pid"
    );
}

/// A family thread that wakes the display while the episode is open, woken by its own timer
/// (EVF_FAMILY), is a frame producer; one that never wakes the display is not, nor is a
/// process outside the family doing the same.
#[test]
fn frame_producers_are_family_threads_that_wake_the_display() {
    let mut r = family_rec(Store::open(None, 1 << 20).unwrap());
    let ui = app_task(APP, "chromium");
    let gpu_main = other(300, 300, "chromium", false);
    let stranger = other(400, 400, "clock", false);
    r.ev(1, 0, 1, &xorg(), &ui);
    r.ev(3, 2, 1, &stranger, &xorg()); // the kernel flags family only; a forged flag is ignored
    r.ev(3, 2, 1, &gpu_main, &xorg());
    assert_eq!(r.status(300), Some(Status::Confirmed));
    assert_eq!(r.status(400), None, "not of the family");
    r.c.tick(r.ts + 200_000_000);
    assert_eq!(
        r.status(300),
        Some(Status::Confirmed),
        "kept after the episode"
    );
}

/// The hand-off rule: after the keystroke's episode resolved, the renderer's compositor thread
/// (a confirmed member) hands its next frame's tiles to a pool thread of its own process, which
/// wakes it back (EV_LOOP): confirmed. A provisional member's worker, a worker of another
/// process and a kernel thread are not.
#[test]
fn a_members_worker_that_wakes_it_back_is_critical_after_the_episode() {
    let mut r = family_rec(Store::open(None, 1 << 20).unwrap());
    let ui = app_task(APP, "chromium");
    let comp = other(210, 200, "Compositor", false);
    let (raster, gpu_io) = (
        other(211, 200, "ThreadPoolForeg", false),
        other(310, 300, "Chrome_ChildIOT", false),
    );
    r.ev(1, 0, 1, &xorg(), &ui);
    r.ev(2, 0, 1, &ui, &comp);
    r.ev(3, 0, 1, &comp, &xorg());
    assert_eq!(
        r.c.snapshot(0).episode.unwrap().end,
        Some(EndReason::Display)
    );
    assert_eq!(r.status(210), Some(Status::Confirmed));
    r.ev(8, 0, 1, &gpu_io, &comp); // another process: the kernel never says so; ignored
    assert_eq!(r.status(310), None);
    r.ev(8, 0, 1, &other(212, 212, "kworker/0:1", true), &comp);
    assert_eq!(r.status(212), None, "a kernel thread is nobody's worker");
    r.ev(8, 0, 1, &raster, &comp);
    assert_eq!(r.status(211), Some(Status::Confirmed));
    let learned = r.c.store.pairs("/usr/lib/chromium/chromium 0000");
    assert!(
        learned
            .iter()
            .any(|p| p.context.thread == "ThreadPoolForeg" && p.decision.critical),
        "a hand-off's find is learned: {learned:?}"
    );
    // A provisional member (the next episode reached it; it may yet be dropped): its worker
    // joins that episode, provisional with it, and leaves with it when the circle never closes.
    r.ev(1, 0, 2, &xorg(), &ui);
    let cache = app_task(120, "CacheThread");
    r.ev(2, 0, 2, &ui, &cache);
    assert_eq!(r.status(120), Some(Status::Provisional));
    r.ev(8, 0, 2, &app_task(121, "ThreadPoolBackg"), &cache);
    assert_eq!(
        r.status(121),
        Some(Status::Provisional),
        "boosted with its member"
    );
    r.c.tick(r.ts + 200_000_000); // the episode times out: neither led back
    assert_eq!((r.status(120), r.status(121)), (None, None));
    assert_eq!(
        r.status(211),
        Some(Status::Confirmed),
        "the raster worker stays"
    );
    // The same while the member's circle closes: both confirmed.
    r.ev(1, 0, 3, &xorg(), &ui);
    r.ev(2, 0, 3, &ui, &cache);
    r.ev(8, 0, 3, &app_task(121, "ThreadPoolBackg"), &cache);
    r.ev(2, 0, 3, &cache, &ui);
    assert_eq!(r.status(120), Some(Status::Confirmed));
    assert_eq!(
        r.status(121),
        Some(Status::Confirmed),
        "its circle closed through the member"
    );
}

/// A relaunched browser's new renderer (another pid, same role) is recognised from the store:
/// confirmed, not provisional, when the path first wakes it (not at creation: a learned context
/// is a name and a role, which the other renderer and every pool thread share).
#[test]
fn a_new_renderer_is_recognised_by_role_on_relaunch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sqlite");
    let ui = app_task(APP, "chromium");
    {
        let mut r = family_rec(Store::open(Some(&path), 1 << 20).unwrap());
        let comp = other(210, 200, "Compositor", false);
        r.ev(1, 0, 1, &xorg(), &ui);
        r.ev(2, 0, 1, &ui, &comp);
        r.ev(2, 0, 1, &comp, &ui);
        r.ev(3, 0, 1, &ui, &xorg());
    }
    let mut r = family_rec(Store::open(Some(&path), 1 << 20).unwrap());
    let zygote = other(250, 250, "chromium", false);
    let renderer = other(201, 201, "chromium", false);
    r.c.set_family(&[250]);
    r.ev(4, 0, 0, &zygote, &renderer); // the zygote forks it
    assert!(r.c.in_family(201), "a zygote's child joins the family");
    let comp = other(211, 201, "Compositor", false);
    r.ev(4, 0, 0, &renderer, &other(211, 201, "x", false));
    r.ev(7, 0, 0, &comp, &zygote);
    assert_eq!(r.status(211), None, "not at creation");
    r.ev(1, 0, 2, &xorg(), &ui);
    r.ev(2, 0, 2, &ui, &comp);
    let s = r.c.snapshot(0);
    let m = s
        .critical
        .iter()
        .find(|m| m.id.tid == 211)
        .expect("on the path");
    assert_eq!((m.status, m.source), (Status::Confirmed, Source::Learned));
    let stranger = other(411, 400, "Compositor", false);
    r.ev(2, 0, 2, &ui, &stranger);
    assert_eq!(
        r.status(411),
        Some(Status::Provisional),
        "the same name outside the family has another context"
    );
}

/// At focus, a family thread whose learned context no other family thread shares is confirmed
/// at once (the GPU process's viz; a lone renderer's compositor); a context two renderers share
/// waits for the path, and so does a pool thread's name.
#[test]
fn unique_learned_family_threads_are_raised_at_focus() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sqlite");
    let ui = app_task(APP, "chromium");
    let (comp, viz) = (
        other(210, 200, "Compositor", false),
        other(310, 300, "VizCompositorTh", false),
    );
    {
        let mut r = family_rec(Store::open(Some(&path), 1 << 20).unwrap());
        r.ev(1, 0, 1, &xorg(), &ui);
        r.ev(2, 0, 1, &ui, &comp);
        r.ev(2, 0, 1, &comp, &viz);
        r.ev(3, 0, 1, &viz, &xorg());
        assert_eq!(r.status(310), Some(Status::Confirmed));
    }
    let threads = [
        other(211, 200, "Compositor", false),
        other(212, 201, "Compositor", false),
        other(311, 300, "VizCompositorTh", false),
        other(312, 300, "ThreadPoolForeg", false),
        other(313, 300, "ThreadPoolForeg", false),
    ];
    let mut r = family_rec(Store::open(Some(&path), 1 << 20).unwrap());
    r.c.set_family(&[200, 201, 300]);
    r.c.recognise_at_focus(&threads, 5);
    let s = r.c.snapshot(0);
    let viz = s.critical.iter().find(|m| m.id.tid == 311).expect("viz");
    assert_eq!(
        (viz.status, viz.source),
        (Status::Confirmed, Source::Learned)
    );
    assert_eq!(
        (r.status(211), r.status(212), r.status(312)),
        (None, None, None),
        "two renderers' compositors and a pool wait for the path"
    );
    // With one renderer, its compositor is the one the store knows.
    let mut r = family_rec(Store::open(Some(&path), 1 << 20).unwrap());
    r.c.recognise_at_focus(&threads[..1], 5);
    assert_eq!(r.status(211), Some(Status::Confirmed));
    // A process that is not of the family is not recognised, whatever its threads' names.
    let mut r = family_rec(Store::open(Some(&path), 1 << 20).unwrap());
    r.c.recognise_at_focus(&[other(411, 400, "VizCompositorTh", false)], 5);
    assert_eq!(r.status(411), None);
}

fn serves_fuse(tgid: u32) -> bool {
    tgid == 50
}

/// Seed 003 §5.2: the UI thread reads through a FUSE daemon (tgid 50), whose pool threads take
/// requests in turn, and asks a service (60). The daemon's serving thread is critical for the
/// episode it served; the service stays while the app is in front.
#[test]
fn fuse_daemon_thread_is_critical_for_the_episode_it_served() {
    let mut r = Rec::new(Store::open(None, 1 << 20).unwrap());
    r.c = std::mem::replace(
        &mut r.c,
        Classifier::new(
            TrackerConfig::default(),
            Store::open(None, 1 << 20).unwrap(),
        ),
    )
    .with_fuse_servers(serves_fuse);
    let ui = app_task(APP, "app");
    let (pool_a, pool_b, svc) = (
        other(51, 50, "bindfs", false),
        other(52, 50, "bindfs", false),
        other(60, 60, "svc", false),
    );
    r.ev(1, 0, 1, &xorg(), &ui);
    for (a, b) in [(&ui, &pool_a), (&pool_a, &ui), (&ui, &svc), (&svc, &ui)] {
        r.ev(2, 0, 1, a, b);
    }
    assert_eq!(r.status(51), Some(Status::Confirmed), "serving: raised");
    r.ev(3, 0, 1, &ui, &xorg());
    assert_eq!(r.status(51), None, "the episode it served is over");
    assert_eq!(r.status(60), Some(Status::Confirmed), "a service stays");
    // The next request goes to another pool thread, which the pair learned from the first
    // confirms at its edge; it leaves with its episode all the same.
    r.ev(1, 0, 2, &xorg(), &ui);
    r.ev(2, 0, 2, &ui, &pool_b);
    assert_eq!(r.status(52), Some(Status::Confirmed), "learned critical");
    assert_eq!(r.status(51), None, "the thread that served before");
    r.ev(2, 0, 2, &pool_b, &ui);
    r.ev(3, 0, 2, &ui, &xorg());
    assert_eq!((r.status(51), r.status(52)), (None, None));
    assert_eq!(r.status(60), Some(Status::Confirmed));
}
