//! A test fixture, not a program for users: the child processes of the daemon's integration
//! tests (`crates/daemon/tests`), which run it as `env!("CARGO_BIN_EXE_uxsched-daemon-fixture")`.
//! Cargo has no test-only binaries, so it is a `[[bin]]` with `test = false, doc = false`
//! (`crates/daemon/Cargo.toml`); nothing installs it.
//!
//! `uxsched-daemon-fixture ROLE [ARG]` plays one role, with its settings in `UXSCHED_TEST_*`
//! variables:
//!
//! | role         | what it does                                                              |
//! |--------------|---------------------------------------------------------------------------|
//! | `daemon`     | the daemon, with the config file `UXSCHED_TEST_CONFIG`, its log on stderr |
//! | `app SPEC`   | a test app whose threads `SPEC` names (see [`app`])                       |
//! | `rtclient`   | asks the real-time API once for its thread, prints the reply ([`rt_client`]) |
//! | `moreclient` | a dependency or an RT ask, prints the reply, then sleeps ([`more_client`]) |
//! | `rtdie`      | sends one request and exits mid-grant ([`die_mid_grant`])                 |
//! | `rtexit`     | holds an `until: exit` grant, prints `tid N` ([`hold_until_exit`])        |
//! | `hog`        | floods the control socket as another user ([`hog`])                       |
//! | `stage NAME` | one process of the tracker's relay chain ([`stage`])                      |
//! | `window`     | an X client with one window, prints its id ([`window`])                   |
//! | `gamemode-bridge` | `uxsched gamemode-bridge` (its errors on stderr, exit 1)             |
//! | `daemon-defaults` | the daemon with the built-in defaults (`[idle] after_s` from `UXSCHED_TEST_IDLE_AFTER_S` if set), its files in `UXSCHED_TEST_DIR` ([`daemon_defaults`]) |
//! | `listen KIND` | a compositor's or X server's sockets in `UXSCHED_TEST_DIR` ([`listen`])  |
//!
//! Whatever a role prints on stdout is all the process prints there. The role runs on a thread
//! of its own, named as the role, while the main thread only waits for it: a test app's main
//! thread (its UI thread to the daemon) is idle, and the thread that asks, relays or runs the
//! daemon's loop is not the process's first one.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};
use uxsched_client::control;
use uxsched_client::{Ask, Client, Error, Policy, Refusal, Reply, Request, Until};

/// The daemon's config file (`daemon`), or the control socket (the client roles, `hog`).
const CONFIG_ENV: &str = "UXSCHED_TEST_CONFIG";
/// `rtclient`: "nice" or an RT priority; `rtdie`: "rt" or "nice".
const ASK_ENV: &str = "UXSCHED_TEST_ASK";
/// `rtclient`: hold, spin or exit after the reply.
const THEN_ENV: &str = "UXSCHED_TEST_THEN";
/// `rtclient`: the RLIMIT_RTTIME (µs) to set before asking.
const RTTIME_ENV: &str = "UXSCHED_TEST_RTTIME";
/// `moreclient`: `depend` or `rt-unlimited`.
const WHAT_ENV: &str = "UXSCHED_TEST_WHAT";
/// `moreclient depend`: the pid depended on.
const ON_ENV: &str = "UXSCHED_TEST_ON";
/// `rtdie`: how long after sending the request it exits (µs).
const DELAY_ENV: &str = "UXSCHED_TEST_DELAY_US";
/// `stage`: the directory of the chain's FIFOs.
const DIR_ENV: &str = "UXSCHED_TEST_FIFOS";
/// `stage fuseapp`: the file it reads at each input (through a FUSE mount).
const FUSE_FILE_ENV: &str = "UXSCHED_TEST_FUSE_FILE";
/// `daemon-defaults`: `[idle] after_s`, when set.
const IDLE_ENV: &str = "UXSCHED_TEST_IDLE_AFTER_S";
/// `window`: the pid its `_NET_WM_PID` claims (a hostile client), else its own.
const WM_PID_ENV: &str = "UXSCHED_TEST_WM_PID";
/// `daemon-defaults`: the directory of its socket, journal and store; `listen`: where the
/// sockets go.
const DIR_ENV_TEST: &str = "UXSCHED_TEST_DIR";

const USAGE: &str = "usage: uxsched-daemon-fixture daemon|app SPEC|rtclient|moreclient|rtdie|\
                     rtexit|hog|stage NAME|window|gamemode-bridge|daemon-defaults|listen KIND \
                     (a test fixture of crates/daemon/tests)";

fn var(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| panic!("{key} is not set"))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let role = args.next().unwrap_or_else(|| {
        eprintln!("{USAGE}");
        std::process::exit(2)
    });
    let arg = args.next();
    let body: Box<dyn FnOnce() + Send> = match (role.as_str(), arg) {
        ("daemon", None) => Box::new(daemon),
        ("app", Some(spec)) => Box::new(move || app(&spec)),
        ("rtclient", None) => Box::new(rt_client),
        ("moreclient", None) => Box::new(more_client),
        ("rtdie", None) => Box::new(die_mid_grant),
        ("rtexit", None) => Box::new(hold_until_exit),
        ("hog", None) => Box::new(|| hog(Path::new(&var(CONFIG_ENV)))),
        ("stage", Some(name)) => Box::new(move || stage(&name, Path::new(&var(DIR_ENV)))),
        ("window", None) => Box::new(window),
        ("gamemode-bridge", None) => Box::new(|| {
            if let Err(e) = uxsched_daemon::sources::dbus::bridge::run() {
                eprintln!("uxsched gamemode-bridge: {e}");
                std::process::exit(1);
            }
        }),
        ("daemon-defaults", None) => Box::new(daemon_defaults),
        ("listen", Some(kind)) => Box::new(move || listen(&kind, Path::new(&var(DIR_ENV_TEST)))),
        _ => {
            eprintln!("{USAGE}");
            std::process::exit(2)
        }
    };
    let thread = std::thread::Builder::new()
        .name(role)
        .spawn(body)
        .expect("the role's thread");
    // A role that panicked fails the process, as a failed test did.
    std::process::exit(if thread.join().is_ok() { 0 } else { 101 });
}

/// The daemon with the config `UXSCHED_TEST_CONFIG`, logging at its `log_level` to stderr.
fn daemon() {
    let config = var(CONFIG_ENV);
    let cfg = uxsched_daemon::Config::load(Some(Path::new(&config))).unwrap();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&cfg.log_level))
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    if let Err(e) = uxsched_daemon::daemon::run(cfg) {
        eprintln!("daemon failed: {e:#}");
        std::process::exit(1);
    }
}

/// The daemon as started with no configuration file: the built-in defaults, except that its
/// socket, journal, cgroups and tracker store are the test's (`UXSCHED_TEST_DIR`), so that it
/// stands beside any other daemon. Logs at debug level to stderr.
fn daemon_defaults() {
    let dir = std::path::PathBuf::from(var(DIR_ENV_TEST));
    let defaults = uxsched_daemon::Config::default();
    let cfg = uxsched_daemon::Config {
        socket: dir.join("uxsched.sock"),
        journal: dir.join("journal.sqlite"),
        cgroup_name: format!("uxsched-test-{}", std::process::id()),
        tracker: uxsched_daemon::config::Tracker {
            store: dir.join("tracker.sqlite"),
            ..defaults.tracker.clone()
        },
        // The idle test's short limit (`[idle] after_s`).
        idle: uxsched_daemon::config::idle::Idle {
            after_s: std::env::var(IDLE_ENV)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(defaults.idle.after_s),
        },
        ..defaults
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "info,uxsched_daemon::sources=debug",
        ))
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    if let Err(e) = uxsched_daemon::daemon::run(cfg) {
        eprintln!("daemon failed: {e:#}");
        std::process::exit(1);
    }
}

/// Listen on the sockets a compositor or X server of `kind` makes, in `dir`, named with this
/// process's pid where the real one's are: `sway` (`sway-ipc.<uid>.<pid>.sock` and
/// `wayland-1`), `hyprland` (`hypr/<instance>/.socket2.sock`, `wayland-2`), `niri`
/// (`niri.wayland-3.<pid>.sock`, `wayland-3`), `wayland-N` (that socket only), or `xgarbage`
/// (`dir` is an X socket's path: every connection gets garbage and is closed). Prints
/// `ready`, then serves until killed. The process's name is its executable's (tests run a copy
/// named as the compositor).
fn listen(kind: &str, dir: &Path) {
    use std::os::unix::net::UnixListener;
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let pid = std::process::id();
    let names: Vec<std::path::PathBuf> = match kind {
        "sway" => vec![
            dir.join(format!("sway-ipc.{uid}.{pid}.sock")),
            dir.join("wayland-1"),
        ],
        "hyprland" => {
            let instance = dir.join("hypr").join(format!("fixture_{pid}"));
            std::fs::create_dir_all(&instance).unwrap();
            vec![
                instance.join(".socket.sock"),
                instance.join(".socket2.sock"),
                dir.join("wayland-2"),
            ]
        }
        "niri" => vec![
            dir.join(format!("niri.wayland-3.{pid}.sock")),
            dir.join("wayland-3"),
        ],
        "xgarbage" => vec![dir.to_owned()],
        w if w.starts_with("wayland-") => vec![dir.join(w)],
        other => panic!("unknown kind {other}"),
    };
    let listeners: Vec<UnixListener> = names
        .iter()
        .map(|n| UnixListener::bind(n).unwrap_or_else(|e| panic!("{}: {e}", n.display())))
        .collect();
    println!("ready");
    if kind == "xgarbage" {
        for c in listeners[0].incoming().map_while(Result::ok) {
            let mut c = c;
            let _ = c.write_all(b"\x07garbage, not an X server's setup reply\xff\xff");
        }
    }
    let _keep = listeners;
    sleep_forever()
}

/// A test app: one thread per comma-separated name in `spec` (`spin…` threads busy-loop,
/// `churn` starts threads that live ~1 ms, `kin` starts a child process of this same program
/// (the app's process family) and `stranger` a child `sleep` (another program), both killed
/// with the app; others sleep; `late:NAME` starts 300 ms later); `reader=PATH` reads `PATH`
/// slowly instead.
fn app(spec: &str) {
    if let Some(path) = spec.strip_prefix("reader=") {
        read_slowly(Path::new(path));
    }
    for entry in spec.split(',').filter(|s| !s.is_empty()) {
        let (late, name) = match entry.strip_prefix("late:") {
            Some(n) => (true, n.to_owned()),
            None => (false, entry.to_owned()),
        };
        let start = move || {
            let body: fn() -> ! = match name.as_str() {
                n if n.starts_with("spin") => spin_forever,
                "churn" => churn_forever,
                "kin" => || child_forever(std::env::current_exe().unwrap(), &["app", "kinthread"]),
                "stranger" => || child_forever("sleep".into(), &["3600"]),
                _ => sleep_forever,
            };
            std::thread::Builder::new()
                .name(name)
                .spawn(move || body())
                .unwrap();
        };
        if late {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                start();
                sleep_forever()
            });
        } else {
            start();
        }
    }
    sleep_forever()
}

/// Start `program` as a child that dies with this process, then sleep.
fn child_forever(program: std::path::PathBuf, args: &[&str]) -> ! {
    let mut c = std::process::Command::new(program);
    c.args(args);
    // SAFETY: prctl is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut c, || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = c.spawn().expect("the app's child process");
    let _ = child.wait(); // it lives as long as the app, unless killed
    sleep_forever()
}

/// A sequential reader: 64 KiB every 20 ms from the start of `path`.
fn read_slowly(path: &Path) -> ! {
    let mut f = std::fs::File::open(path).unwrap();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let _ = f.read(&mut buf).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Threads that live ~1 ms each: they exit while the daemon is changing them.
fn churn_forever() -> ! {
    loop {
        let _ = std::thread::spawn(|| std::thread::sleep(Duration::from_millis(1))).join();
    }
}

fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn spin_forever() -> ! {
    let mut x = 0u64;
    loop {
        x = std::hint::black_box(x.wrapping_add(1));
    }
}

/// A real-time API client on the socket `UXSCHED_TEST_CONFIG`: with RLIMIT_RTTIME
/// `UXSCHED_TEST_RTTIME` µs if set, asks `UXSCHED_TEST_ASK` ("nice": nice −5, else FIFO at that
/// priority) for this thread, prints the reply as one JSON line, then `UXSCHED_TEST_THEN`:
/// `hold` (sleeps), `spin` (busy-loops) or exits.
fn rt_client() {
    let socket = var(CONFIG_ENV);
    if let Ok(us) = std::env::var(RTTIME_ENV) {
        uxsched_client::limit_rttime(us.parse().unwrap()).unwrap();
    }
    let ask: Ask = match var(ASK_ENV).as_str() {
        "nice" => Ask::HighPriority { nice: -5 },
        p => Ask::Realtime {
            policy: Policy::Fifo,
            priority: p.parse().unwrap(),
        },
    };
    let mut c = Client::connect(&socket).unwrap();
    let reply = match c.for_this_thread(ask) {
        Ok(g) => Reply::granted(g),
        Err(Error::Refused { reason, message }) => Reply::refused(reason, message),
        Err(e) => Reply::refused(Refusal::BadRequest, format!("client: {e}")),
    };
    println!("{}", serde_json::to_string(&reply).unwrap());
    match std::env::var(THEN_ENV).as_deref() {
        Ok("spin") => loop {
            std::hint::black_box(0u64);
        },
        Ok("hold") => sleep_forever(),
        _ => std::process::exit(0),
    }
}

/// A client on the socket `UXSCHED_TEST_CONFIG`. `UXSCHED_TEST_WHAT`: `depend` (nice −5 for its
/// thread, then depend on the pid `UXSCHED_TEST_ON`, hold), `rt-unlimited` (check that
/// RLIMIT_RTTIME is unlimited, ask FIFO 5, hold). It prints its last reply as one JSON line and
/// then only sleeps: no thread of it ever spins, RT or not.
fn more_client() {
    let socket = var(CONFIG_ENV);
    let what = var(WHAT_ENV);
    let mut c = Client::connect(&socket).unwrap();
    let fifo5 = Ask::Realtime {
        policy: Policy::Fifo,
        priority: 5,
    };
    let reply = |r: Result<Reply, Error>| match r {
        Ok(r) => r,
        Err(Error::Refused { reason, message }) => Reply::refused(reason, message),
        Err(e) => Reply::refused(Refusal::BadRequest, format!("client: {e}")),
    };
    let last = match what.as_str() {
        "depend" => {
            let on: i32 = var(ON_ENV).parse().unwrap();
            let r = reply(c.send_for_this_thread(Ask::HighPriority { nice: -5 }));
            assert!(r.ok, "{r:?}");
            reply(c.send_for_this_thread(Ask::Depend { on }))
        }
        "rt-unlimited" => match uxsched_os::peer::rttime_hard(0).unwrap() {
            // Never ask otherwise: the grant would be real.
            None => reply(c.send_for_this_thread(fifo5)),
            Some(hard) => Reply::refused(
                Refusal::BadRequest,
                format!("test setup: this child's hard RLIMIT_RTTIME is {hard}, not unlimited"),
            ),
        },
        other => panic!("unknown {WHAT_ENV} {other}"),
    };
    println!("{}", serde_json::to_string(&last).unwrap());
    sleep_forever()
}

/// Send one request for this thread (`UXSCHED_TEST_ASK`: "rt" for FIFO 5, else nice −5) to
/// the socket `UXSCHED_TEST_CONFIG` and exit `UXSCHED_TEST_DELAY_US` µs later, never reading
/// the reply.
fn die_mid_grant() {
    let socket = var(CONFIG_ENV);
    uxsched_client::limit_rttime(100_000).unwrap();
    let tid = uxsched_client::this_thread();
    let ask = match var(ASK_ENV).as_str() {
        "rt" => r#""cmd":"realtime","priority":5"#,
        _ => r#""cmd":"high_priority","nice":-5"#,
    };
    let until = if tid % 2 == 0 { "close" } else { "exit" };
    let line = format!("{{\"v\":1,{ask},\"tid\":{tid},\"until\":\"{until}\"}}\n");
    let delay: u64 = var(DELAY_ENV).parse().unwrap();
    let mut s = UnixStream::connect(&socket).unwrap();
    s.write_all(line.as_bytes()).unwrap();
    let end = Instant::now() + Duration::from_micros(delay);
    while Instant::now() < end {
        std::hint::spin_loop();
    }
    // SAFETY: _exit ends the process at once, the connection and the thread with it.
    unsafe { libc::_exit(0) }
}

/// Ask `high_priority -7 until exit` for this thread on the socket `UXSCHED_TEST_CONFIG`,
/// print `tid N`, hold until killed.
fn hold_until_exit() {
    let socket = var(CONFIG_ENV);
    let tid = uxsched_client::this_thread();
    let mut c = Client::connect(&socket).unwrap();
    c.call(&Request {
        tid,
        ask: Ask::HighPriority { nice: -7 },
        until: Until::Exit,
    })
    .unwrap();
    println!("tid {tid}");
    sleep_forever()
}

/// How many connections the flooding user holds open.
const HOG_CONNECTIONS: usize = 64;

/// The flooding user: hold [`HOG_CONNECTIONS`] connections open, re-opening every one the
/// daemon answers or closes; print "holding" once they are open, and for each "probe" line on
/// stdin send a status request on one more connection and print `probe: ` and what came back.
fn hog(socket: &Path) {
    let connect = || {
        // The daemon gone (the test ended): so is the hog.
        let s = UnixStream::connect(socket).unwrap_or_else(|_| std::process::exit(0));
        s.set_nonblocking(true).unwrap();
        s
    };
    let mut held: Vec<UnixStream> = (0..HOG_CONNECTIONS).map(|_| connect()).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines().map_while(Result::ok) {
            tx.send(line).unwrap();
        }
        std::process::exit(0);
    });
    println!("holding");
    loop {
        for s in &mut held {
            let mut buf = [0u8; 512];
            // Anything to read (a "busy" or "timed out" reply) or EOF: that one is gone.
            if !matches!(s.read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock) {
                *s = connect();
            }
        }
        if rx.recv_timeout(Duration::from_millis(50)).is_ok() {
            let reply = match control::call(socket, &control::Request::Status) {
                Ok(_) => "ok".to_owned(),
                Err(e) => e.to_string(),
            };
            println!("probe: {reply}");
        }
    }
}

/// One process of the tracker's chain: this thread renamed `name` (the tracker goes by `comm`),
/// relaying one byte at a time through the FIFOs in `dir`: input → app → partner → app →
/// display. A broken FIFO means the test tore the chain down, so the stage exits quietly.
fn stage(name: &str, dir: &Path) {
    let comm = std::ffi::CString::new(name).unwrap();
    // SAFETY: PR_SET_NAME with a NUL-terminated string (the kernel keeps 15 bytes of it).
    unsafe { libc::prctl(libc::PR_SET_NAME, comm.as_ptr()) };
    let ended = relay(name, dir);
    std::process::exit(if ended.is_err() { 0 } else { 1 });
}

/// The stage's loop; returns only when a FIFO breaks.
fn relay(stage: &str, dir: &Path) -> std::io::Result<()> {
    let open_r = |f: &str| std::fs::File::open(dir.join(f));
    let open_w = |f: &str| std::fs::OpenOptions::new().write(true).open(dir.join(f));
    let mut b = [0u8; 1];
    match stage {
        "dispatcher" => {
            let mut to_app = open_w("input")?;
            loop {
                std::thread::sleep(Duration::from_millis(30));
                to_app.write_all(b"k")?;
            }
        }
        "chainapp" => {
            let (mut input, mut to_partner) = (open_r("input")?, open_w("request")?);
            let (mut reply, mut to_display) = (open_r("reply")?, open_w("frame")?);
            loop {
                input.read_exact(&mut b)?;
                to_partner.write_all(&b)?;
                reply.read_exact(&mut b)?;
                to_display.write_all(&b)?;
            }
        }
        "fuseapp" => {
            // Seed 003 §5.2: each input reads a file through a FUSE mount, then draws 10 ms
            // later (the episode stays open that long: the serving thread's boost is seen).
            let file = std::path::PathBuf::from(var(FUSE_FILE_ENV));
            let (mut input, mut to_display) = (open_r("input")?, open_w("frame")?);
            let mut buf = vec![0u8; 1 << 20];
            loop {
                input.read_exact(&mut b)?;
                let mut f = std::fs::File::open(&file)
                    .unwrap_or_else(|e| panic!("cannot open {}: {e}", file.display()));
                while f.read(&mut buf).expect("a read through FUSE") > 0 {}
                std::thread::sleep(Duration::from_millis(10));
                to_display.write_all(&b)?;
            }
        }
        "chainpartner" => {
            let (mut request, mut reply) = (open_r("request")?, open_w("reply")?);
            loop {
                request.read_exact(&mut b)?;
                reply.write_all(&b)?;
            }
        }
        _ => {
            let mut frames = open_r("frame")?; // "compositor": the display
            loop {
                frames.read_exact(&mut b)?;
            }
        }
    }
}

/// A real X client on `$DISPLAY`: one mapped window with `_NET_WM_PID` = this process (or the
/// pid in `UXSCHED_TEST_WM_PID`: a hostile client's claim); prints the window id, then sleeps.
fn window() {
    use x11rb::connection::Connection;
    use x11rb::protocol::xproto::{
        AtomEnum, ConnectionExt, CreateWindowAux, PropMode, WindowClass,
    };
    use x11rb::wrapper::ConnectionExt as _;
    let claim: u32 = std::env::var(WM_PID_ENV).map_or(std::process::id(), |p| p.parse().unwrap());
    let (conn, screen) = x11rb::connect(None).unwrap();
    let s = &conn.setup().roots[screen];
    let win = conn.generate_id().unwrap();
    conn.create_window(
        s.root_depth,
        win,
        s.root,
        0,
        0,
        100,
        100,
        0,
        WindowClass::INPUT_OUTPUT,
        s.root_visual,
        &CreateWindowAux::new(),
    )
    .unwrap();
    let wm_pid = conn
        .intern_atom(false, b"_NET_WM_PID")
        .unwrap()
        .reply()
        .unwrap()
        .atom;
    conn.change_property32(PropMode::REPLACE, win, wm_pid, AtomEnum::CARDINAL, &[claim])
        .unwrap();
    conn.map_window(win).unwrap();
    conn.flush().unwrap();
    println!("{win}");
    sleep_forever()
}
