//! Foreground models: small real programs that behave like the interactive work of the seed
//! papers and time themselves. Each runs as its own process (the "app", the process modes act
//! on), re-executed from the harness binary with hidden arguments ([`ModelArgs`]). Models whose
//! stimulus comes from outside the app (`painting`, `worker`) also start a "system" process
//! (input dispatcher + compositor) in its own session, joined to the app by a socket on fd 3.
//!
//! Protocol with the runner: the process prints `ready` once its threads exist, waits for one
//! byte on stdin ("go"), runs for `--duration-ms`, and writes a [`ModelOutput`] JSON to `--out`.

mod alarm;
mod frames;
pub mod fsync;
mod gallery;
mod painting;
mod player;
mod reader;
pub mod wayland;
mod worker;
pub mod xapp;

use crate::sys;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// The foreground models (one file each in `models/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    Painting,
    Worker,
    Frames,
    Alarm,
    Player,
    Reader,
    Gallery,
    /// An editor's save: write 320 KiB, fsync, rename (`fsync.rs`).
    Fsync,
    /// Real programs under Xvfb (`xapp/`).
    Xterm,
    Xedit,
    /// Debian's Chromium showing a local page with a focused `<textarea>` (`xapp/browser.rs`).
    Chromium,
    /// A GTK program started cold from a terminal, timed until its window maps (`xapp/launch.rs`).
    Launch,
    /// foot in sway headless, typed into through the virtual keyboard (`wayland/`).
    Foot,
}

impl ModelKind {
    /// Whether this model has a separate system process (dispatcher + compositor).
    pub fn has_system_side(self) -> bool {
        matches!(self, ModelKind::Painting | ModelKind::Worker)
    }

    /// Whether the model has a time-critical thread that asks for real time in the `rtapi` mode.
    pub fn asks_realtime(self) -> bool {
        matches!(self, ModelKind::Alarm | ModelKind::Player)
    }

    /// Whether this scenario drives a real program under X (`xapp/`) instead of a model.
    pub fn is_xapp(self) -> bool {
        matches!(
            self,
            ModelKind::Xterm | ModelKind::Xedit | ModelKind::Chromium | ModelKind::Launch
        )
    }

    /// Whether the scenario waits on storage (its report measures the device's idle
    /// throughput at the start).
    pub fn is_storage(self) -> bool {
        matches!(
            self,
            ModelKind::Reader | ModelKind::Gallery | ModelKind::Fsync | ModelKind::Launch
        )
    }

    /// Whether this scenario drives a real program on a Wayland compositor (`wayland/`).
    pub fn is_wayland(self) -> bool {
        self == ModelKind::Foot
    }

    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Painting => "painting",
            ModelKind::Worker => "worker",
            ModelKind::Frames => "frames",
            ModelKind::Alarm => "alarm",
            ModelKind::Player => "player",
            ModelKind::Reader => "reader",
            ModelKind::Gallery => "gallery",
            ModelKind::Fsync => "fsync",
            ModelKind::Xterm => "xterm",
            ModelKind::Xedit => "xedit",
            ModelKind::Chromium => "chromium",
            ModelKind::Launch => "launch",
            ModelKind::Foot => "foot",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// The foreground application (the process modes act on).
    App,
    /// Input dispatcher and compositor (a system service in its own session).
    System,
}

/// Hidden command-line of a model process (`uxsched bench-model …`).
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    #[arg(long, value_enum)]
    pub model: ModelKind,
    #[arg(long, value_enum)]
    pub role: Role,
    #[arg(long)]
    pub duration_ms: u64,
    /// Where the model writes its [`ModelOutput`] JSON.
    #[arg(long)]
    pub out: PathBuf,
    /// Scratch directory holding the files `reader` and `gallery` read.
    #[arg(long)]
    pub scratch: PathBuf,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// CPU work per request/frame in ms (each model has its own default).
    #[arg(long)]
    pub compute_ms: Option<f64>,
    /// The real program a measuring client types into (`xterm`, `xedit`, `chromium`).
    #[arg(long)]
    pub app_pid: Option<i32>,
    /// The `rtapi` mode: the daemon socket on which the model's time-critical thread asks for
    /// real time itself ([`ask_realtime`]; `alarm`, `player`).
    #[arg(long)]
    pub rt_socket: Option<PathBuf>,
    /// `launch`: stop after this many launches, even before `--duration-ms` has passed.
    #[arg(long)]
    pub launches: Option<u32>,
}

/// What a model process reports.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct ModelOutput {
    /// The scenario's metric, one value per request/frame/wake-up, in milliseconds.
    pub samples_ms: Vec<f64>,
    /// Model-specific figures (jank %, underruns …).
    pub extras: BTreeMap<String, f64>,
    /// Voluntary + involuntary context switches of all the process's threads.
    pub context_switches: u64,
}

/// Entry point of a model process.
pub fn run_model(args: &ModelArgs) -> Result<()> {
    let started = std::time::Instant::now();
    let output = match (args.model, args.role) {
        (ModelKind::Painting, Role::App) => painting::app(args)?,
        (ModelKind::Painting | ModelKind::Worker, Role::System) => painting::system(args)?,
        (ModelKind::Worker, Role::App) => worker::app(args)?,
        (ModelKind::Frames, Role::App) => frames::app(args)?,
        (ModelKind::Alarm, Role::App) => alarm::app(args)?,
        (ModelKind::Player, Role::App) => player::app(args)?,
        (ModelKind::Reader, Role::App) => reader::app(args)?,
        (ModelKind::Gallery, Role::App) => gallery::app(args)?,
        (ModelKind::Fsync, Role::App) => fsync::app(args)?,
        // The measuring client counts the real program's context switches, not its own.
        (ModelKind::Xterm | ModelKind::Xedit | ModelKind::Chromium, Role::System) => {
            xapp::client_main(args)?
        }
        (ModelKind::Launch, Role::System) => xapp::launch_main(args)?,
        (ModelKind::Foot, Role::System) => wayland::client_main(args)?,
        (
            m @ (ModelKind::Xterm
            | ModelKind::Xedit
            | ModelKind::Chromium
            | ModelKind::Launch
            | ModelKind::Foot),
            Role::App,
        ) => {
            bail!(
                "the app of {} is the real program, started by the runner",
                m.name()
            )
        }
        (m, Role::System) => bail!("model {} has no system process", m.name()),
    };
    let output = if args.model.is_xapp() || args.model.is_wayland() {
        output
    } else {
        let (switches, cpu) = own_usage();
        let mut extras = output.extras;
        // What serving the app costs the load: the app's CPU time over its life, as a share of
        // one CPU (README, "the background half": the load can keep at most what is left).
        let wall = started.elapsed().as_secs_f64().max(1e-9);
        if args.role == Role::App {
            extras.insert("app_cpu_pct".into(), 100.0 * cpu.as_secs_f64() / wall);
        }
        ModelOutput {
            context_switches: switches,
            extras,
            ..output
        }
    };
    let json = serde_json::to_vec(&output)?;
    std::fs::write(&args.out, json).with_context(|| format!("writing {}", args.out.display()))
}

/// Tell the runner our threads exist, then block until it says go (after applying the mode).
pub(crate) fn ready_then_wait_for_go() -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(b"ready\n")?;
    out.flush()?;
    let mut byte = [0u8; 1];
    std::io::stdin()
        .read_exact(&mut byte)
        .context("the runner closed stdin before go")
}

/// The socket the runner passed as fd 3 (painting/worker).
pub(crate) fn inherited_socket() -> UnixStream {
    // SAFETY: the runner dup2()s one end of a socketpair to fd 3 before exec; we own it.
    unsafe { UnixStream::from_raw_fd(3) }
}

/// Start a named thread and wait until it has named itself (and taken its nice value, best
/// effort like Android's AsyncTask), so the runner, which applies a mode right after `ready`,
/// sees every thread as it will stay.
pub(crate) fn spawn_named<T: Send + 'static>(
    name: &'static str,
    nice: Option<i32>,
    body: impl FnOnce() -> T + Send + 'static,
) -> Result<std::thread::JoinHandle<T>> {
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let handle = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            sys::name_this_thread(name);
            if let Some(n) = nice {
                let _ = sys::set_nice(sys::gettid(), n);
            }
            let _ = started_tx.send(());
            body()
        })?;
    started_rx
        .recv()
        .with_context(|| format!("thread {name} died while starting"))?;
    Ok(handle)
}

/// The RT priority a model's thread asks for in the `rtapi` mode: within the daemon's default
/// `max_rt_priority` (20), above the `fifo` mode's 1.
pub const RTAPI_PRIORITY: u32 = 10;

/// The `rtapi` mode (seed 002 §III.B): the calling thread asks the daemon at `socket` for
/// SCHED_FIFO [`RTAPI_PRIORITY`] through `uxsched-client`, after bounding the process's
/// RLIMIT_RTTIME to 200 ms as the daemon requires. The client returned holds the grant (it
/// ends when the connection closes, at the latest when the model exits). `None` without a
/// socket (every other mode).
pub(crate) fn ask_realtime(socket: Option<&Path>) -> Result<Option<uxsched_client::Client>> {
    let Some(socket) = socket else {
        return Ok(None);
    };
    uxsched_client::limit_rttime(200_000).context("setting RLIMIT_RTTIME to 200 ms")?;
    let mut client = uxsched_client::Client::connect(socket)?;
    let got = client
        .for_this_thread(uxsched_client::Ask::Realtime {
            policy: uxsched_client::Policy::Fifo,
            priority: RTAPI_PRIORITY,
        })
        .with_context(|| {
            format!(
                "asking {} for SCHED_FIFO {RTAPI_PRIORITY}",
                socket.display()
            )
        })?;
    if got.policy != "fifo" || got.priority != Some(RTAPI_PRIORITY) {
        bail!("the daemon answered with {got:?}, not SCHED_FIFO {RTAPI_PRIORITY}");
    }
    Ok(Some(client))
}

/// Start a named thread that asks for real time first ([`ask_realtime`], `rtapi` mode) and
/// then runs `body`; returns once the thread has its grant, or the reason it was refused.
pub(crate) fn spawn_asking<T: Send + Default + 'static>(
    name: &'static str,
    rt_socket: Option<PathBuf>,
    body: impl FnOnce() -> T + Send + 'static,
) -> Result<std::thread::JoinHandle<T>> {
    let (asked_tx, asked_rx) = std::sync::mpsc::channel();
    let handle = spawn_named(name, None, move || {
        let grant = match ask_realtime(rt_socket.as_deref()) {
            Ok(g) => g,
            Err(e) => {
                let _ = asked_tx.send(Err(e));
                return T::default();
            }
        };
        let _ = asked_tx.send(Ok(()));
        let out = body();
        drop(grant);
        out
    })?;
    asked_rx
        .recv()
        .with_context(|| format!("thread {name} died while asking for real time"))?
        .with_context(|| format!("thread {name} (rtapi mode)"))?;
    Ok(handle)
}

/// Burn `ms` of this thread's CPU time: "computes C ms" regardless of preemption.
pub(crate) fn spin_cpu(ms: f64) {
    let until = sys::thread_cpu_ns() + (ms * 1e6) as u64;
    while sys::thread_cpu_ns() < until {
        std::hint::spin_loop();
    }
}

pub(crate) fn ns_to_ms(ns: i128) -> f64 {
    ns as f64 / 1e6
}

/// The process's context switches (voluntary + involuntary) and CPU time (user + system), all
/// its threads.
fn own_usage() -> (u64, std::time::Duration) {
    // SAFETY: `usage` is a valid out-pointer; RUSAGE_SELF sums all threads of the process.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    (
        (usage.ru_nvcsw + usage.ru_nivcsw) as u64,
        sys::cpu_time(&usage),
    )
}

/// Read the `ready` line a model prints on stdout.
pub fn expect_ready(stdout: &mut impl BufRead) -> Result<()> {
    let mut line = String::new();
    stdout.read_line(&mut line)?;
    if line.trim() != "ready" {
        bail!("model process did not report ready (got {line:?}); see its stderr above");
    }
    Ok(())
}

/// Files the I/O models read, created once per bench run in the scratch directory.
pub fn reader_file(scratch: &Path) -> PathBuf {
    scratch.join("reader-30MiB.dat")
}

pub fn gallery_file(scratch: &Path, i: usize) -> PathBuf {
    scratch.join(format!("gallery-{i:02}.jpg"))
}

pub const GALLERY_IMAGES: usize = 15;
const READER_BYTES: usize = 30 << 20;
const GALLERY_IMAGE_BYTES: usize = 1536 << 10;

/// Create (once) the files `reader` and `gallery` read; fsync them so POSIX_FADV_DONTNEED can
/// drop their pages before each pass (dirty pages cannot be dropped).
pub fn prepare_files(kind: ModelKind, scratch: &Path, seed: u64) -> Result<()> {
    use rand::{RngCore, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut make = |path: PathBuf, len: usize| -> Result<()> {
        if path.metadata().map(|m| m.len() as usize).ok() == Some(len) {
            return Ok(());
        }
        let mut data = vec![0u8; len];
        rng.fill_bytes(&mut data);
        let mut f =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        f.write_all(&data)?;
        f.sync_all()?;
        Ok(())
    };
    // Inside the machine lock, before any load: the device's idle throughput for the report.
    crate::report::measure_device(kind, scratch);
    match kind {
        ModelKind::Reader => make(reader_file(scratch), READER_BYTES),
        ModelKind::Gallery => (0..GALLERY_IMAGES)
            .try_for_each(|i| make(gallery_file(scratch, i), GALLERY_IMAGE_BYTES)),
        _ => Ok(()),
    }
}

/// Drop a file's pages from the page cache so the next read is cold (seed 001's setting).
pub(crate) fn drop_from_cache(file: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open fd; advice on the whole file.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}
