//! Real processes with known delay-critical threads for the tracker's accuracy suite
//! (tests/accuracy.rs), after seed 003 Fig. 3 and Table 9. One case per subcommand:
//!
//! `uxsched-tracker-fixture CASE [EPISODES] [PERIOD_MS]` forks an input process (`uxs-input`)
//! and a display process (`uxs-display`), names its main thread `ui`, starts the case's
//! threads, prints `ready`, waits for `go` on stdin, then for each input event runs the case's
//! step on the UI thread, hands a frame to the display and acknowledges the event. Thread names are the ground truth's
//! keys (see the table in tests/accuracy.rs).

use std::io::{BufRead, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn spin(ms: f64) {
    let end = Instant::now() + Duration::from_secs_f64(ms / 1000.0);
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

fn set_name(name: &str) {
    let c = std::ffi::CString::new(name).expect("no NUL");
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr()) };
}

/// Run `body` in a child process named `name` (called while the process is single-threaded).
fn fork_child(name: &str, body: impl FnOnce()) -> libc::pid_t {
    // SAFETY: the process has one thread here, so the child may run ordinary code.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        // SAFETY: prctl with integer arguments: die with the app, whatever happens to it.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
        set_name(name);
        body();
        // SAFETY: leave without running the parent's atexit handlers twice.
        unsafe { libc::_exit(0) };
    }
    pid
}

fn pipe() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors that we then own.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0, "pipe");
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    }
}

fn thread(name: &str, body: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(body)
        .expect("spawn");
}

/// A thread that serves requests from a channel; `reply` posts back to the UI thread.
fn server(name: &str, work_ms: f64, reply: Option<Sender<()>>) -> Sender<()> {
    let (tx, rx): (Sender<()>, Receiver<()>) = channel();
    thread(name, move || {
        for () in rx {
            spin(work_ms);
            if let Some(r) = &reply {
                let _ = r.send(());
            }
        }
    });
    tx
}

/// The case's per-input work on the UI thread.
type Step = Box<dyn FnMut()>;

fn pty_cat() -> (std::fs::File, libc::pid_t) {
    use std::os::fd::FromRawFd;
    // SAFETY: plain libc pty calls on descriptors this function owns.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(master >= 0 && libc::grantpt(master) == 0 && libc::unlockpt(master) == 0);
        let mut buf = [0 as libc::c_char; 64];
        assert_eq!(libc::ptsname_r(master, buf.as_mut_ptr(), buf.len()), 0);
        let pid = fork_child("pty-child", || {
            libc::setsid();
            let slave = libc::open(buf.as_ptr(), libc::O_RDWR);
            let mut t: libc::termios = std::mem::zeroed();
            libc::tcgetattr(slave, &mut t);
            libc::cfmakeraw(&mut t);
            libc::tcsetattr(slave, libc::TCSANOW, &t);
            libc::dup2(slave, 0);
            libc::dup2(slave, 1);
            let cat = c"cat";
            let argv = [cat.as_ptr(), std::ptr::null()];
            libc::execvp(cat.as_ptr(), argv.as_ptr());
        });
        (std::fs::File::from_raw_fd(master), pid)
    }
}

/// Set up `case` (children first, while single-threaded) and return its step. `display` is the
/// display's socket, for cases whose frames are drawn by another process.
fn setup(case: &str, children: &mut Vec<libc::pid_t>, display: &UnixStream) -> Step {
    match case {
        "ui-only" => {
            let (_keep, rx) = channel::<()>();
            thread("idle-helper", move || while rx.recv().is_ok() {});
            std::mem::forget(_keep);
            Box::new(|| spin(1.0))
        }
        "worker-per-request" => worker_per_request(),
        "chain" => chain(),
        "logger" => {
            let log = server("logger", 0.3, None);
            Box::new(move || {
                log.send(()).unwrap();
                spin(1.0);
            })
        }
        "db-writer" => db_writer(),
        "render" => Box::new(|| spin(1.0)),
        "thread-pool" => thread_pool(),
        "service" => service(children),
        "pty-shell" => pty_shell(children),
        "shared-memory" => shared_memory(),
        "timer-pipeline" => timer_pipeline(children, display),
        "family-ticker" => family_ticker(children),
        "zygote-helper" => zygote_helper(children, display),
        "raster-pool" => raster_pool(display),
        "gpu-process" => gpu_process(children, display),
        "timer" => {
            thread("ticker", || loop {
                std::thread::sleep(Duration::from_millis(5));
                spin(0.3);
            });
            Box::new(|| spin(1.0))
        }
        other => {
            eprintln!("unknown case {other}");
            std::process::exit(2);
        }
    }
}

/// Each input spawns a short-lived nice-10 `req-worker` and waits for its reply.
fn worker_per_request() -> Step {
    let (tx, rx) = channel::<()>();
    Box::new(move || {
        let tx = tx.clone();
        thread("req-worker", move || {
            // SAFETY: setpriority on the calling thread (who = 0).
            unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 10) };
            spin(2.0);
            let _ = tx.send(());
            // Linger so a poll sees it before it exits.
            std::thread::sleep(Duration::from_millis(60));
        });
        rx.recv().expect("worker reply");
    })
}

/// Each input goes UI → `chain-a` → `chain-b` → back to the UI thread.
fn chain() -> Step {
    let (tx, rx) = channel();
    let b = server("chain-b", 0.5, Some(tx));
    let (btx, brx) = channel::<()>();
    thread("chain-a", move || {
        for () in brx {
            spin(0.5);
            let _ = b.send(());
        }
    });
    Box::new(move || {
        btx.send(()).unwrap();
        rx.recv().unwrap();
    })
}

/// Each input hands a row to `db-writer`, which writes and syncs it to a file, without waiting.
fn db_writer() -> Step {
    let (tx, rx) = channel::<u64>();
    let path = std::env::temp_dir().join(format!("uxs-db-{}", std::process::id()));
    thread("db-writer", move || {
        let mut f = std::fs::File::create(&path).expect("db file");
        for n in rx {
            let _ = writeln!(f, "row {n}");
            let _ = f.sync_data();
        }
        let _ = std::fs::remove_file(&path);
    });
    let mut n = 0;
    Box::new(move || {
        n += 1;
        tx.send(n).unwrap();
        spin(1.0);
    })
}

/// Four pool threads served in turn: `pool-0`/`pool-1` reply to the UI thread, `pool-2`/`pool-3`
/// do unrelated work.
fn thread_pool() -> Step {
    let (tx, rx) = channel();
    let feed = [0, 1].map(|i| server(&format!("pool-{i}"), 1.0, Some(tx.clone())));
    let other = [2, 3].map(|i| server(&format!("pool-{i}"), 1.0, None));
    let mut i = 0;
    Box::new(move || {
        other[i % 2].send(()).unwrap();
        feed[i % 2].send(()).unwrap();
        rx.recv().unwrap();
        i += 1;
    })
}

/// Each input is a round trip over a Unix socket to a `svc` child process.
fn service(children: &mut Vec<libc::pid_t>) -> Step {
    let (mut ui_end, mut svc_end) = UnixStream::pair().unwrap();
    children.push(fork_child("svc", move || {
        let mut b = [0u8; 1];
        while svc_end.read_exact(&mut b).is_ok() {
            spin(1.0);
            let _ = svc_end.write_all(&b);
        }
    }));
    Box::new(move || {
        let mut b = [7u8; 1];
        ui_end.write_all(&b).unwrap();
        ui_end.read_exact(&mut b).unwrap();
    })
}

/// Each input is a key echoed back by `cat` on a pseudo-terminal.
fn pty_shell(children: &mut Vec<libc::pid_t>) -> Step {
    let (mut master, pid) = pty_cat();
    children.push(pid);
    Box::new(move || {
        master.write_all(b"k").unwrap();
        let mut b = [0u8; 1];
        master.read_exact(&mut b).unwrap();
    })
}

/// Each input is a request to `shm-worker` through shared atomics, which it polls for.
fn shared_memory() -> Step {
    let req = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let (r, d) = (Arc::clone(&req), Arc::clone(&done));
    thread("shm-worker", move || loop {
        std::thread::sleep(Duration::from_millis(1));
        let n = r.load(Ordering::Acquire);
        if n != d.load(Ordering::Acquire) {
            spin(2.0);
            d.store(n, Ordering::Release);
        }
    });
    Box::new(move || {
        let n = req.fetch_add(1, Ordering::AcqRel) + 1;
        while done.load(Ordering::Acquire) != n {
            std::thread::sleep(Duration::from_micros(500));
        }
    })
}

/// Serve `requests` a byte at a time: `work_ms` of work each, then `mark` written to `out` (the
/// display, or the next stage's pipe); ends when either side is closed.
fn relay(requests: &mut impl Read, work_ms: f64, out: &mut impl Write, mark: u8) {
    let mut b = [0u8; 1];
    while requests.read_exact(&mut b).is_ok() {
        spin(work_ms);
        if out.write_all(&[mark]).is_err() {
            return;
        }
    }
}

/// A `compositor` thread: for each frame the UI thread hands it, 0.3 ms of work and an
/// acknowledgement to the display at once (the episode resolves there), then, on its own 4 ms
/// timer, `next_frame`, which says whether to go on.
fn compositor(
    frames: Receiver<()>,
    display: &UnixStream,
    mut next_frame: impl FnMut() -> bool + Send + 'static,
) {
    let mut ack = display.try_clone().unwrap();
    thread("compositor", move || {
        for () in frames {
            spin(0.3);
            if ack.write_all(&[5]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(4));
            if !next_frame() {
                return;
            }
        }
    });
}

/// The cases whose UI thread does not draw: their frames reach the display from another
/// process only.
const UI_DOES_NOT_DRAW: [&str; 1] = ["timer-pipeline"];

/// A non-blocking pipe's read end: read without sleeping on it, so writing wakes nobody.
fn nonblocking(f: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a descriptor we own.
    unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
}

/// Issue 30's timer-paced stage: the UI thread leaves work in a pipe for `frame-timer`, a
/// child process that wakes every 16 ms by its own timer (like a vsync-paced compositor), takes
/// what is pending without sleeping on the pipe, and draws it. Nothing the input does wakes
/// it: only its display wake-up shows it makes the frame.
fn timer_pipeline(children: &mut Vec<libc::pid_t>, display: &UnixStream) -> Step {
    let (mut work, mut work_in) = pipe();
    nonblocking(&work);
    let mut d = display.try_clone().unwrap();
    children.push(fork_child("frame-timer", move || {
        let mut b = [0u8; 64];
        loop {
            std::thread::sleep(Duration::from_micros(16_667));
            if matches!(work.read(&mut b), Ok(n) if n > 0) {
                spin(1.0);
                if d.write_all(&[3]).is_err() {
                    return;
                }
            }
        }
    }));
    Box::new(move || {
        spin(0.5);
        work_in.write_all(&[1]).unwrap();
    })
}

/// A process of the app's family that the input reaches but that never leads to the screen:
/// `bg-log` takes a line per input, `bg-ticker` (same process) does its own work every 10 ms and
/// hands it to `bg-log` too. Neither is critical.
fn family_ticker(children: &mut Vec<libc::pid_t>) -> Step {
    let (mut log, mut log_in) = pipe();
    children.push(fork_child("bg-log", move || {
        let (tx, rx) = channel::<()>();
        thread("bg-ticker", move || loop {
            std::thread::sleep(Duration::from_millis(10));
            spin(0.3);
            let _ = tx.send(());
        });
        thread("bg-merge", move || for () in rx {});
        let mut b = [0u8; 64];
        while matches!(log.read(&mut b), Ok(n) if n > 0) {
            spin(0.3);
        }
    }));
    Box::new(move || {
        log_in.write_all(&[1]).unwrap();
        spin(1.0);
    })
}

/// A helper started through an intermediate zygote-like process (fork → fork, the
/// intermediate idles), on the frame path: the UI thread hands it the input and returns, and the
/// main loop then wakes the display before the helper has drawn (a browser asking its X server
/// something); the helper's frame comes 2 ms later.
fn zygote_helper(children: &mut Vec<libc::pid_t>, display: &UnixStream) -> Step {
    let (mut req, mut req_in) = pipe();
    let mut d = display.try_clone().unwrap();
    children.push(fork_child("zygote", move || {
        fork_child("helper", move || relay(&mut req, 2.0, &mut d, 4));
        loop {
            // SAFETY: pause has no preconditions; the zygote idles until it is killed.
            unsafe { libc::pause() };
        }
    }));
    Box::new(move || req_in.write_all(&[1]).unwrap())
}

/// Issue 30's raster stage: the UI thread hands the input to `compositor` and returns; the
/// compositor acknowledges at once (a display write: the episode resolves there), then on its
/// own 4 ms timer hands the frame's tiles to `raster`, a pool thread of the same process that
/// replies, and draws. Each frame it also hands `tile-gc` its old tiles, which never reply.
/// No episode is open when `raster` runs: only the hand-off rule can find it.
fn raster_pool(display: &UnixStream) -> Step {
    let (tiles, done) = (channel::<()>(), channel::<()>());
    let reply = done.0;
    let raster_in = tiles.0;
    thread("raster", move || {
        for () in tiles.1 {
            spin(1.0);
            let _ = reply.send(());
        }
    });
    let gc = server("tile-gc", 0.3, None);
    let (frame, frames) = channel::<()>();
    let mut d = display.try_clone().unwrap();
    compositor(frames, display, move || {
        let _ = raster_in.send(());
        let _ = done.1.recv();
        let _ = gc.send(());
        d.write_all(&[6]).is_ok()
    });
    Box::new(move || {
        frame.send(()).unwrap();
        spin(0.5);
    })
}

/// Issue 30's GPU-process stage: the UI thread hands the input to `compositor`, which
/// acknowledges at once (a display write: the episode resolves there), then on its own 4 ms
/// timer sends the frame to `gpu-io`, the main thread of a child process, which passes it to
/// `gpu-viz` (same child) to draw. Every fifth input the UI thread posts to `gpu-viz` itself
/// instead (a browser talking to viz), so the episode's circle finds viz; `gpu-io` runs only
/// after an episode resolved, so only a hand-off across processes finds it. Each frame the
/// compositor also posts its stats to `metrics-io` (another child), which passes them to
/// `metrics-log`: handed work by a member, but never leading back to one. Viz draws before the
/// UI thread's own display write, so the display is asleep for each (a write to a display
/// already awake wakes nothing and would leave the episode open).
fn gpu_process(children: &mut Vec<libc::pid_t>, display: &UnixStream) -> Step {
    let (mut frames, mut frames_in) = pipe();
    let (mut viz, mut viz_in) = pipe();
    let (mut stats, mut stats_in) = pipe();
    let mut viz_from_io = viz_in.try_clone().unwrap();
    let mut d = display.try_clone().unwrap();
    children.push(fork_child("gpu-io", move || {
        thread("gpu-viz", move || relay(&mut viz, 0.1, &mut d, 7));
        relay(&mut frames, 0.2, &mut viz_from_io, 1);
    }));
    children.push(fork_child("metrics-io", move || {
        let (tx, rx) = channel::<()>();
        thread("metrics-log", move || {
            for () in rx {
                spin(0.2);
            }
        });
        let mut b = [0u8; 1];
        while stats.read_exact(&mut b).is_ok() {
            spin(0.1);
            let _ = tx.send(());
        }
    }));
    let (frame, frames_rx) = channel::<()>();
    compositor(frames_rx, display, move || {
        frames_in.write_all(&[1]).is_ok() && stats_in.write_all(&[1]).is_ok()
    });
    let mut n = 0u32;
    Box::new(move || {
        if n % 5 == 0 {
            viz_in.write_all(&[2]).unwrap();
        } else {
            frame.send(()).unwrap();
        }
        n += 1;
        spin(0.5);
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let case = args.get(1).cloned().unwrap_or_default();
    let episodes: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(20);
    let period = Duration::from_millis(args.get(3).and_then(|a| a.parse().ok()).unwrap_or(40));

    // Pipes, not one socket both ways: reading a unix socket wakes a peer blocked on it
    // (write-space wake-up), which would look like a second input.
    let (mut events, mut events_in) = pipe();
    let (mut acks, mut acks_out) = pipe();
    let (display, mut display_end) = UnixStream::pair().unwrap();
    let mut children = vec![
        fork_child("uxs-input", move || {
            let mut go = [0u8; 1];
            if acks.read_exact(&mut go).is_err() {
                return;
            }
            // Closed loop, like a user who waits for the screen: the next event comes a period
            // after the app acknowledged the last frame, so it finds the UI thread asleep (an
            // event queued while it is busy wakes nothing and starts no episode).
            for _ in 0..episodes {
                std::thread::sleep(period);
                if events_in.write_all(&[1]).is_err() || acks.read_exact(&mut go).is_err() {
                    return;
                }
            }
        }),
        fork_child("uxs-display", move || {
            let mut b = [0u8; 64];
            while matches!(display_end.read(&mut b), Ok(n) if n > 0) {}
        }),
    ];
    let mut step = setup(&case, &mut children, &display);
    set_name("ui");
    if case == "render" {
        let mut d = display.try_clone().unwrap();
        thread("RenderThread", move || loop {
            std::thread::sleep(Duration::from_micros(16_667));
            spin(1.0);
            if d.write_all(&[2]).is_err() {
                return;
            }
        });
    }
    println!("ready");
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    acks_out.write_all(&[0]).unwrap();
    let mut display = display;
    let mut ev = [0u8; 1];
    for _ in 0..episodes {
        events.read_exact(&mut ev).unwrap();
        step();
        if !UI_DOES_NOT_DRAW.contains(&case.as_str()) {
            display.write_all(&[1]).unwrap();
        }
        acks_out.write_all(&[0]).unwrap(); // frame shown: the next event may come
    }
    drop(display);
    for pid in children {
        // SAFETY: our own children.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
    std::process::exit(0);
}
