//! A test fixture, not a program for users: the processes that this crate's guest tests
//! (`tests/cgroup2_guest.rs`, `tests/daemon_scx_guest.rs`, `tests/scx_guest.rs`) start inside
//! the QEMU guest. They put it in the guest's initramfs from
//! `env!("CARGO_BIN_EXE_uxsched-guest-fixture")`. Cargo has no test-only binaries, so it is a
//! `[[bin]]` with `test = false, doc = false` (`crates/uxsched/Cargo.toml`); nothing installs it.
//!
//! `uxsched-guest-fixture ROLE` plays one role on its main thread, settings in variables:
//!
//! | role         | test                  | what it does                                    |
//! |--------------|-----------------------|-------------------------------------------------|
//! | `app`        | `cgroup2_guest`       | [`app`]: `APP_THREADS` more threads, until killed |
//! | `watch`      | `cgroup2_guest`       | [`watch`]: counts writes to `$UXSCHED_GUEST_WATCH` |
//! | `render-app` | `daemon_scx_guest`    | [`render_app`]: a render thread and a worker     |
//! | `policies`   | `daemon_scx_guest`    | [`policies`]: `fact` of `$UXS_PID`'s threads     |
//! | `hog`, `probe`, `share` | `scx_guest` | the workloads of [`roles`] (`SCX_*` settings)  |
//!
//! Whatever a role prints on stdout is all the process prints there.

mod roles;

use std::time::Duration;

/// The `app` role's threads besides its main thread (`cgroup2_guest.rs` has the same number).
const APP_THREADS: usize = 3;

const USAGE: &str = "usage: uxsched-guest-fixture app|watch|render-app|policies|hog|probe|share \
                     (a test fixture of crates/uxsched/tests/*_guest.rs)";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [role] = &args[..] else {
        eprintln!("{USAGE}");
        std::process::exit(2);
    };
    match role.as_str() {
        "app" => app(),
        "watch" => watch(),
        "render-app" => render_app(),
        "policies" => policies(),
        "hog" | "probe" | "share" => roles::run(role),
        _ => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    }
}

/// `cgroup2_guest`'s app: a process with [`APP_THREADS`] more threads (each waking every
/// 20 ms) that runs until killed.
fn app() -> ! {
    for _ in 0..APP_THREADS {
        std::thread::spawn(|| loop {
            std::thread::sleep(Duration::from_millis(20));
        });
    }
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Counts writes (inotify `IN_MODIFY`) to the file `$UXSCHED_GUEST_WATCH` for 2 s, then prints
/// `writes=N` (busybox's inotifyd is not in Debian's busybox-static).
fn watch() {
    let path = std::env::var("UXSCHED_GUEST_WATCH").expect("UXSCHED_GUEST_WATCH");
    println!("writes={}", count_writes(&path, Duration::from_secs(2)));
}

/// How many times `path` is modified within `window`, after printing `watching` on a line of
/// its own. The control write in the script uses `dd conv=notrunc`: an `O_TRUNC` open of a
/// kernfs file is a modification of its own.
fn count_writes(path: &str, window: Duration) -> usize {
    let cpath = std::ffi::CString::new(path).unwrap();
    // SAFETY: plain syscalls on a descriptor this function owns; the buffer outlives each read.
    unsafe {
        let fd = libc::inotify_init1(libc::IN_NONBLOCK);
        assert!(
            fd >= 0,
            "inotify_init1: {}",
            std::io::Error::last_os_error()
        );
        let wd = libc::inotify_add_watch(fd, cpath.as_ptr(), libc::IN_MODIFY);
        assert!(
            wd >= 0,
            "watching {path}: {}",
            std::io::Error::last_os_error()
        );
        println!("watching");
        let (end, mut count) = (std::time::Instant::now() + window, 0);
        let mut buf = [0u8; 4096];
        while std::time::Instant::now() < end {
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            if libc::poll(&mut pfd, 1, 50) > 0 {
                let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                let event = std::mem::size_of::<libc::inotify_event>() as isize;
                count += (n.max(0) / event) as usize; // no names: a file watch's events are fixed-size
            }
        }
        libc::close(fd);
        count
    }
}

/// `daemon_scx_guest`'s focused app: a render thread waking every 2 ms for 200 µs of work
/// (class interactive), a worker alternating 3 ms of work and 3 ms of sleep (topmost), and the
/// main thread asleep. Prints `app ready`.
fn render_app() -> ! {
    let spin = |d: Duration| {
        let t = std::time::Instant::now();
        while t.elapsed() < d {
            std::hint::spin_loop();
        }
    };
    let every = |name: &str, work: Duration, sleep: Duration| {
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || loop {
                spin(work);
                std::thread::sleep(sleep);
            })
            .unwrap();
    };
    every(
        "RenderThread",
        Duration::from_micros(200),
        Duration::from_millis(2),
    );
    every("worker", Duration::from_millis(3), Duration::from_millis(3));
    println!("app ready");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Prints `fact $UXS_LABEL=policy/nice,…` for every thread of process `$UXS_PID`, by tid.
fn policies() {
    let pid = std::env::var("UXS_PID").expect("UXS_PID");
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    let v: Vec<String> = tids
        .iter()
        .map(|&t| {
            let a = uxsched_scx::thread::get(t).unwrap();
            format!("{}/{}", a.policy, a.nice)
        })
        .collect();
    println!(
        "fact {}={}",
        std::env::var("UXS_LABEL").expect("UXS_LABEL"),
        v.join(",")
    );
}
