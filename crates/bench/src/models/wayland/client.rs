//! The Wayland measuring client: types into foot through sway's virtual-keyboard protocol and
//! times each keystroke until sway has composited a frame that changed (wlr-screencopy
//! `copy_with_damage`); then switches the focus between the two terminals with sway's IPC and
//! times each switch until the daemon's boost shows on the newly focused terminal.
//!
//! Like the X11 client (`xapp/client.rs`) it runs as root at SCHED_FIFO
//! [`CLIENT_RT_PRIORITY`], bounded by a 200 ms RLIMIT_RTTIME and SCHED_RESET_ON_FORK, in a
//! session of its own; it sleeps between keystrokes and blocks in poll(2) while it waits.
//! Root connects to the user's sockets (root is not bound by their permissions; sway checks no
//! credentials on either).
//!
//! **One sample** = `zwp_virtual_keyboard_v1.key` press + release flushed to sway → the
//! `zwlr_screencopy_frame_v1.ready` event of a `copy_with_damage` request armed before the key
//! (ms). sway sends `ready` once it has committed a frame of the output with damage and copied
//! it into the client's buffer: the keystroke went sway → foot (wl_keyboard) → pty → `cat`
//! (echo) → pty → foot (render, wl_surface.commit) → sway (composite, pixman) → copy
//! (640×480). wlroots' headless output has no scan-out and no vblank: with no frame pending
//! sway composites as soon as the damage arrives (its 60 Hz frame clock only spaces frames
//! that follow each other within 16.7 ms, which paced keystrokes never do), so a sample has
//! none of the up-to-one-refresh wait a real display adds. A frame that changes without input while
//! armed (before the key) is counted in `unprompted` and the request re-armed, so a sample is
//! always the key's frame. Keystrokes are paced 50–100 ms (seeded) after the previous one was
//! shown. A key that shows nothing within 2 s counts in `lost`; more than 10 % lost fails the
//! run.
//!
//! **Focus → boost**: once the keystrokes are done, if the app (terminal A) is boosted — its
//! main thread at a real-time policy or a nice below the one it had when this client started
//! (`app_boosted`) — the client alternates `[pid=B] focus` / `[pid=A] focus` (sway IPC) and
//! times each from the command written to the newly focused terminal's main thread showing the
//! boost (`/proc/<pid>/task/<pid>/stat`, polled every 100 µs): extras `focus_switches`,
//! `focus_boosted`, `focus_p50_ms`, `focus_p99_ms`, `focus_max_ms`. A terminal that keeps a
//! boost after losing the focus is waited for (1 s) before the switch to it; a switch whose
//! boost does not show within 1 s is a miss, and two misses before any boost end the phase
//! (nothing follows the compositor's focus: `idle`, `stock`, `fifo`); the phase stops after
//! 10 s whatever it has.

use super::ipc::{self, Ipc};
use super::{ENV_IPC, ENV_OTHER_PID, ENV_WAYLAND};
use crate::models::xapp::CLIENT_RT_PRIORITY;
use crate::models::{ready_then_wait_for_go, ModelArgs, ModelOutput};
use crate::sys;
use anyhow::{bail, Context, Result};
use rand::{Rng, SeedableRng};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};
use wayland_client::globals::{registry_queue_init, GlobalListContents};
use wayland_client::protocol::{
    wl_buffer::WlBuffer,
    wl_output::WlOutput,
    wl_registry::WlRegistry,
    wl_seat::WlSeat,
    wl_shm::{self, WlShm},
    wl_shm_pool::WlShmPool,
};
use wayland_client::{delegate_noop, Connection, Dispatch, EventQueue, Proxy, QueueHandle, WEnum};
use wayland_protocols_misc::zwp_virtual_keyboard_v1::client::{
    zwp_virtual_keyboard_manager_v1::ZwpVirtualKeyboardManagerV1,
    zwp_virtual_keyboard_v1::ZwpVirtualKeyboardV1,
};
use wayland_protocols_wlr::screencopy::v1::client::{
    zwlr_screencopy_frame_v1::{self, ZwlrScreencopyFrameV1},
    zwlr_screencopy_manager_v1::ZwlrScreencopyManagerV1,
};

const RTTIME_LIMIT_US: u64 = 200_000;
/// Both terminals' windows mapped (they start after the load, like the X programs).
const WINDOW_TIMEOUT: Duration = Duration::from_secs(60);
const SETTLE_SPAN: Duration = Duration::from_millis(1000);
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
const DRAW_TIMEOUT: Duration = Duration::from_secs(2);
const PACE_MS: std::ops::Range<u64> = 50..100;
/// Letters, and every 41st key a Return (`cat`'s raw echo of it is a carriage return: the
/// line never scrolls; 40 letters fit the 45 columns of a half-output terminal).
const LETTERS: usize = 26;
const LINE: usize = 41;
/// The focus phase: switches per run, how long a boost may take to show, the poll period.
const FOCUS_SWITCHES: usize = 30;
const FOCUS_TIMEOUT: Duration = Duration::from_secs(1);
const FOCUS_POLL: Duration = Duration::from_micros(100);
const FOCUS_GIVE_UP: usize = 2;
/// The whole phase, within the runner's slack past the planned duration (30 s).
const FOCUS_PHASE_LIMIT: Duration = Duration::from_secs(10);

/// The keymap uploaded with the virtual keyboard (XKB text format v1), complete in itself (no
/// includes): 26 letters on xkb keycodes 10–35 and Return on 36 — evdev codes 2–27 and 28
/// (KEY_ENTER), the codes `key` requests carry (xkb keycode − 8).
fn keymap() -> String {
    let mut codes = String::new();
    let mut symbols = String::new();
    for (i, c) in (b'a'..=b'z').enumerate() {
        codes.push_str(&format!("        <K{i:02}> = {};\n", 10 + i));
        symbols.push_str(&format!(
            "        key <K{i:02}> {{ [ {} ] }};\n",
            char::from(c)
        ));
    }
    format!(
        "xkb_keymap {{
    xkb_keycodes \"uxsched-bench\" {{
        minimum = 8;
        maximum = 255;
{codes}        <RTRN> = 36;
    }};
    xkb_types \"uxsched-bench\" {{
        type \"ONE_LEVEL\" {{
            modifiers = none;
            level_name[Level1] = \"Any\";
        }};
    }};
    xkb_compat \"uxsched-bench\" {{
    }};
    xkb_symbols \"uxsched-bench\" {{
{symbols}        key <RTRN> {{ [ Return ] }};
    }};
}};
"
    )
}

/// The evdev code of keystroke number `i`.
fn key_code(i: usize) -> u32 {
    if i % LINE == LINE - 1 {
        28
    } else {
        2 + (i % LETTERS) as u32
    }
}

/// A wl_shm buffer's format, width, height and stride, as screencopy's `buffer` event gives them.
type ShmParams = (wl_shm::Format, u32, u32, u32);

/// What the screencopy frame in flight reported.
#[derive(Default)]
struct FrameEvents {
    /// wl_shm format, width, height, stride (`buffer`).
    shm: Option<ShmParams>,
    buffer_done: bool,
    ready: Option<Instant>,
    failed: bool,
}

#[derive(Default)]
struct State {
    frame: FrameEvents,
}

impl Dispatch<WlRegistry, GlobalListContents> for State {
    fn event(
        _: &mut Self,
        _: &WlRegistry,
        _: wayland_client::protocol::wl_registry::Event,
        _: &GlobalListContents,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<ZwlrScreencopyFrameV1, ()> for State {
    fn event(
        state: &mut Self,
        _: &ZwlrScreencopyFrameV1,
        event: zwlr_screencopy_frame_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        use zwlr_screencopy_frame_v1::Event;
        match event {
            Event::Buffer {
                format: WEnum::Value(format),
                width,
                height,
                stride,
            } => state.frame.shm = Some((format, width, height, stride)),
            Event::BufferDone => state.frame.buffer_done = true,
            Event::Ready { .. } => state.frame.ready = Some(Instant::now()),
            Event::Failed => state.frame.failed = true,
            _ => {}
        }
    }
}

delegate_noop!(State: ignore WlSeat);
delegate_noop!(State: ignore WlOutput);
delegate_noop!(State: ignore WlShm);
delegate_noop!(State: ignore WlBuffer);
delegate_noop!(State: WlShmPool);
delegate_noop!(State: ZwpVirtualKeyboardManagerV1);
delegate_noop!(State: ZwpVirtualKeyboardV1);
delegate_noop!(State: ZwlrScreencopyManagerV1);

/// A Wayland connection to sway: a virtual keyboard in, screencopy frames out.
pub struct Screen {
    conn: Connection,
    queue: EventQueue<State>,
    qh: QueueHandle<State>,
    state: State,
    output: WlOutput,
    screencopy: ZwlrScreencopyManagerV1,
    screencopy_version: u32,
    shm: WlShm,
    /// The buffer frames are copied into, its shm parameters and memory.
    buffer: Option<(WlBuffer, ShmParams, OwnedFd)>,
    keyboard: ZwpVirtualKeyboardV1,
    /// The frame armed with `copy_with_damage`, if any.
    frame: Option<ZwlrScreencopyFrameV1>,
    epoch: Instant,
}

impl Screen {
    /// Connect to the compositor's socket `path`, bind what the measurement needs and upload
    /// the keymap; an error naming a protocol the compositor lacks.
    pub fn connect(path: &Path) -> Result<Screen> {
        let stream = UnixStream::connect(path)
            .with_context(|| format!("connecting to the Wayland socket {}", path.display()))?;
        let conn = Connection::from_socket(stream)?;
        let (globals, mut queue) = registry_queue_init::<State>(&conn)
            .context("reading the compositor's Wayland globals")?;
        let qh = queue.handle();
        let need = |what: &str, e: wayland_client::globals::BindError| {
            anyhow::anyhow!("the compositor offers no usable {what}: {e}")
        };
        let seat: WlSeat = globals
            .bind(&qh, 1..=1, ())
            .map_err(|e| need("wl_seat", e))?;
        let output: WlOutput = globals
            .bind(&qh, 1..=1, ())
            .map_err(|e| need("wl_output", e))?;
        let shm: WlShm = globals
            .bind(&qh, 1..=1, ())
            .map_err(|e| need("wl_shm", e))?;
        let manager: ZwpVirtualKeyboardManagerV1 = globals
            .bind(&qh, 1..=1, ())
            .map_err(|e| need("zwp_virtual_keyboard_manager_v1", e))?;
        // copy_with_damage is version 2.
        let screencopy: ZwlrScreencopyManagerV1 = globals
            .bind(&qh, 2..=3, ())
            .map_err(|e| need("zwlr_screencopy_manager_v1 (version ≥ 2)", e))?;
        let screencopy_version = screencopy.version();
        let keyboard = manager.create_virtual_keyboard(&seat, &qh, ());
        let text = keymap();
        let mut bytes = text.into_bytes();
        bytes.push(0);
        let fd = memfd("uxsched-bench-keymap", &bytes)?;
        // WL_KEYBOARD_KEYMAP_FORMAT_XKB_V1
        keyboard.keymap(1, fd.as_fd(), bytes.len() as u32);
        let mut state = State::default();
        queue.roundtrip(&mut state)?;
        Ok(Screen {
            conn,
            queue,
            qh,
            state,
            output,
            screencopy,
            screencopy_version,
            shm,
            buffer: None,
            keyboard,
            frame: None,
            epoch: Instant::now(),
        })
    }

    /// Arm a new `copy_with_damage` of the output: its `ready` comes with the next frame sway
    /// composites with damage (any change since this client's previous copy).
    fn arm(&mut self) -> Result<()> {
        if let Some(old) = self.frame.take() {
            old.destroy();
        }
        self.state.frame = FrameEvents::default();
        let frame = self
            .screencopy
            .capture_output(0, &self.output, &self.qh, ());
        // Version 3 ends the buffer list with buffer_done; version 2 sends `buffer` at once,
        // so one round trip has it.
        self.queue.roundtrip(&mut self.state)?;
        if self.screencopy_version >= 3 && !self.state.frame.buffer_done {
            self.queue.roundtrip(&mut self.state)?;
        }
        if self.state.frame.failed {
            bail!("sway refused to capture the output (screencopy failed)");
        }
        let shm = self
            .state
            .frame
            .shm
            .context("sway offered no wl_shm buffer for screencopy")?;
        if self.buffer.as_ref().map(|b| b.1) != Some(shm) {
            self.make_buffer(shm)?;
        }
        let (buffer, _, _) = self.buffer.as_ref().expect("made above");
        frame.copy_with_damage(buffer);
        self.conn.flush()?;
        self.frame = Some(frame);
        Ok(())
    }

    fn make_buffer(&mut self, shm: ShmParams) -> Result<()> {
        if let Some((old, _, _)) = self.buffer.take() {
            old.destroy();
        }
        let (format, width, height, stride) = shm;
        let size = stride as usize * height as usize;
        let fd = memfd("uxsched-bench-frame", &vec![0u8; size])?;
        let pool = self.shm.create_pool(fd.as_fd(), size as i32, &self.qh, ());
        let buffer = pool.create_buffer(
            0,
            width as i32,
            height as i32,
            stride as i32,
            format,
            &self.qh,
            (),
        );
        pool.destroy();
        self.buffer = Some((buffer, shm, fd));
        Ok(())
    }

    /// Wait until the armed frame is ready (when) or `deadline` passes (`None`).
    fn wait_frame(&mut self, deadline: Instant) -> Result<Option<Instant>> {
        loop {
            self.queue.dispatch_pending(&mut self.state)?;
            if self.state.frame.failed {
                bail!("the screencopy frame failed (the output went away?)");
            }
            if let Some(t) = self.state.frame.ready {
                if let Some(f) = self.frame.take() {
                    f.destroy();
                }
                return Ok(Some(t));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            self.conn.flush()?;
            let Some(guard) = self.queue.prepare_read() else {
                continue;
            };
            let mut pfd = libc::pollfd {
                fd: guard.connection_fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = (deadline - now).as_micros().div_ceil(1000).min(60_000) as i32;
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, ms) };
            if n > 0 {
                match guard.read() {
                    Ok(_) => {}
                    Err(wayland_client::backend::WaylandError::Io(e))
                        if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e).context("reading from sway (it exited?)"),
                }
            }
        }
    }

    /// Press and release key `code` (evdev); when the request was flushed to sway.
    fn type_key(&mut self, code: u32) -> Result<Instant> {
        let ms = self.epoch.elapsed().as_millis() as u32;
        self.keyboard.key(ms, code, 1);
        self.keyboard.key(ms, code, 0);
        let sent = Instant::now();
        self.conn.flush()?;
        Ok(sent)
    }

    /// Wait `span` with a frame armed; re-arm and start over each time the output changes
    /// without input (counted in `unprompted`), at most until `give_up`.
    pub fn quiet(
        &mut self,
        span: Duration,
        give_up: Instant,
        unprompted: &mut u32,
    ) -> Result<bool> {
        if self.frame.is_none() {
            self.arm()?;
        }
        loop {
            let until = Instant::now() + span;
            if self.wait_frame(until)?.is_none() {
                return Ok(true);
            }
            *unprompted += 1;
            self.arm()?;
            if Instant::now() > give_up {
                return Ok(false);
            }
        }
    }

    /// Type keystroke `i` into the focused window, the output quiet and a frame armed; its
    /// latency until sway showed a changed frame, or `None` within `timeout`.
    pub fn keystroke(&mut self, i: usize, timeout: Duration) -> Result<Option<Duration>> {
        if self.frame.is_none() {
            self.arm()?;
        }
        let sent = self.type_key(key_code(i))?;
        let shown = self.wait_frame(sent + timeout)?;
        Ok(shown.map(|t| t - sent))
    }
}

/// An anonymous file holding `bytes`, for the compositor to map.
fn memfd(name: &str, bytes: &[u8]) -> Result<OwnedFd> {
    let cname = std::ffi::CString::new(name)?;
    // SAFETY: a valid NUL-terminated name.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("memfd_create");
    }
    // SAFETY: memfd_create just returned this fd; we own it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, bytes)?;
    Ok(OwnedFd::from(file))
}

/// SCHED_FIFO for this process, its runaway bound set first (as the X11 client).
fn enter_realtime() -> Result<()> {
    let (_, hard) = sys::rttime_limit(0)?;
    sys::set_rttime_limit(0, RTTIME_LIMIT_US.min(hard), hard)?;
    sys::set_policy(
        0,
        sys::SCHED_FIFO | sys::SCHED_RESET_ON_FORK,
        CLIENT_RT_PRIORITY,
    )
    .context("the measuring client needs SCHED_FIFO (run the bench as root)")
}

/// A terminal's main thread's scheduling: boosted when at a real-time policy or at a nice
/// below `base` (the one it started with).
fn boosted(pid: i32, base: i32) -> bool {
    sys::thread_sched(pid, pid)
        .is_ok_and(|s| s.policy == sys::SCHED_FIFO || s.policy == 2 || s.nice < base)
}

fn env_var(name: &str) -> Result<String> {
    std::env::var(name).with_context(|| format!("the Wayland measuring client needs {name}"))
}

/// Wait until both terminals have a window, then give the app's the focus.
pub fn focus_app(ipc: &mut Ipc, app: i32, other: i32) -> Result<()> {
    let end = Instant::now() + WINDOW_TIMEOUT;
    loop {
        let tree = ipc.tree()?;
        if ipc::view_of(&tree, app).is_some() && ipc::view_of(&tree, other).is_some() {
            break;
        }
        if Instant::now() > end {
            bail!(
                "the terminals (pids {app}, {other}) had no window in sway within {} s (their logs are foot-*.log in the run's directory)",
                WINDOW_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    ipc.command(&format!("[pid={app}] focus"))?;
    let focused = ipc::focused_pid(&ipc.tree()?);
    if focused != Some(i64::from(app)) {
        bail!("sway focused pid {focused:?} after `[pid={app}] focus`, not the app's terminal");
    }
    Ok(())
}

/// The focus phase (module docs): latencies (ms) of the switches whose boost showed, and the
/// number of switches made.
fn focus_phase(
    ipc: &mut Ipc,
    terminals: [(i32, i32); 2],
    rng: &mut impl Rng,
) -> Result<(Vec<f64>, usize)> {
    let (mut latencies, mut misses, mut switches) = (Vec::new(), 0, 0);
    let limit = Instant::now() + FOCUS_PHASE_LIMIT;
    for i in 0..FOCUS_SWITCHES {
        if Instant::now() > limit {
            break;
        }
        // B, A, B, A …: the app is focused now.
        let (pid, base) = terminals[(i + 1) % 2];
        std::thread::sleep(Duration::from_millis(rng.gen_range(PACE_MS)));
        // A terminal that lost the focus keeps its boost until the daemon takes it back.
        let end = Instant::now() + FOCUS_TIMEOUT;
        while boosted(pid, base) {
            if Instant::now() > end {
                return Ok((latencies, switches));
            }
            std::thread::sleep(FOCUS_POLL);
        }
        let cmd = format!("[pid={pid}] focus");
        let sent = Instant::now();
        ipc.send(ipc::RUN_COMMAND, &cmd)?;
        let end = sent + FOCUS_TIMEOUT;
        let shown = loop {
            if boosted(pid, base) {
                break Some(sent.elapsed());
            }
            if Instant::now() > end {
                break None;
            }
            std::thread::sleep(FOCUS_POLL);
        };
        ipc.command_reply(&cmd)?;
        switches += 1;
        match shown {
            Some(d) => latencies.push(d.as_secs_f64() * 1e3),
            None => misses += 1,
        }
        if latencies.is_empty() && misses >= FOCUS_GIVE_UP {
            break;
        }
    }
    // Leave the app focused.
    if switches % 2 == 1 {
        ipc.command(&format!("[pid={}] focus", terminals[0].0))?;
    }
    Ok((latencies, switches))
}

/// The focus phase on its own (tests): wait for both terminals' windows, focus the app
/// (`terminals[0]`), then switch as the client does after its keystrokes. `terminals`: each
/// terminal's pid and the nice it had before anything could boost it.
pub fn measure_focus(
    ipc_path: &Path,
    terminals: [(i32, i32); 2],
    seed: u64,
) -> Result<(Vec<f64>, usize)> {
    let mut ipc = Ipc::connect(ipc_path)?;
    focus_app(&mut ipc, terminals[0].0, terminals[1].0)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    focus_phase(&mut ipc, terminals, &mut rng)
}

/// Nearest-rank percentile of sorted `v`.
fn percentile(v: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// Entry point of the client process (`bench-model --model foot --role system --app-pid P`,
/// the sockets and the other terminal's pid in the environment, set by the runner).
pub fn run(args: &ModelArgs) -> Result<ModelOutput> {
    let app = args
        .app_pid
        .context("the measuring client needs --app-pid")?;
    let other: i32 = env_var(ENV_OTHER_PID)?
        .parse()
        .context("bad other terminal pid")?;
    let wayland = env_var(ENV_WAYLAND)?;
    let ipc_path = env_var(ENV_IPC)?;
    // The terminals' nice before anything could boost them.
    let base = |pid: i32| sys::thread_sched(pid, pid).map_or(0, |s| s.nice);
    let terminals = [(app, base(app)), (other, base(other))];
    enter_realtime()?;
    let mut ipc = Ipc::connect(Path::new(&ipc_path))?;
    let mut screen = Screen::connect(Path::new(&wayland))?;
    focus_app(&mut ipc, app, other)?;
    let mut unprompted = 0u32;
    let settle = |s: &mut Screen, u: &mut u32| -> Result<()> {
        if !s.quiet(SETTLE_SPAN, Instant::now() + SETTLE_TIMEOUT, u)? {
            bail!(
                "the output kept changing without input for {} s (a blinking caret?): its frames would not be the keystrokes'",
                SETTLE_TIMEOUT.as_secs()
            );
        }
        Ok(())
    };
    // One keystroke, not a sample, proves the terminal has the keyboard and pays the text
    // path's first use (glyph cache); the samples start once its drawing has settled.
    settle(&mut screen, &mut unprompted)?;
    if screen.keystroke(LINE - 1, SETTLE_TIMEOUT)?.is_none() {
        bail!(
            "the warm-up keystroke changed nothing on {} within {} s: the terminal does not get the virtual keyboard's input (its log is foot-app.log in the run's directory)",
            super::compositor::OUTPUT,
            SETTLE_TIMEOUT.as_secs()
        );
    }
    settle(&mut screen, &mut unprompted)?;
    unprompted = 0;
    ready_then_wait_for_go()?;
    let switches_before = sys::context_switches(app);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);
    let end = Instant::now() + Duration::from_millis(args.duration_ms);
    let (mut samples, mut lost, mut typed) = (Vec::new(), 0u32, 0usize);
    while Instant::now() < end {
        let pace = Duration::from_millis(rng.gen_range(PACE_MS));
        if !screen.quiet(pace, end, &mut unprompted)? {
            break;
        }
        match screen.keystroke(typed, DRAW_TIMEOUT)? {
            Some(latency) => samples.push(latency.as_secs_f64() * 1e3),
            None => lost += 1,
        }
        typed += 1;
    }
    let context_switches = sys::context_switches(app).saturating_sub(switches_before);
    if lost as usize * 10 > typed {
        bail!(
            "{lost} of {typed} keystrokes changed nothing on {} within {} s: the terminal does not get or draw the input",
            super::compositor::OUTPUT,
            DRAW_TIMEOUT.as_secs()
        );
    }
    let app_boosted = boosted(app, terminals[0].1);
    let mut extras: std::collections::BTreeMap<String, f64> = [
        ("keystrokes", typed as f64),
        ("lost", f64::from(lost)),
        ("unprompted", f64::from(unprompted)),
        ("app_boosted", f64::from(u8::from(app_boosted))),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let (mut focus, switches) = if app_boosted {
        focus_phase(&mut ipc, terminals, &mut rng)?
    } else {
        (Vec::new(), 0)
    };
    extras.insert("focus_switches".into(), switches as f64);
    extras.insert("focus_boosted".into(), focus.len() as f64);
    if !focus.is_empty() {
        focus.sort_by(f64::total_cmp);
        extras.insert("focus_p50_ms".into(), percentile(&focus, 50.0));
        extras.insert("focus_p99_ms".into(), percentile(&focus, 99.0));
        extras.insert("focus_max_ms".into(), *focus.last().expect("not empty"));
    }
    Ok(ModelOutput {
        samples_ms: samples,
        extras,
        context_switches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_cover_the_keymap_and_a_line_ends_with_return() {
        let map = keymap();
        for i in 0..LINE {
            let xkb = key_code(i) + 8;
            assert!(
                map.contains(&format!("= {xkb};")),
                "code {xkb} not in the keymap"
            );
        }
        assert_eq!(key_code(LINE - 1), 28);
        assert_eq!(key_code(0), 2);
        assert!(map.contains("key <K25> { [ z ] };"));
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 50.0), 2.0);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 99.0), 4.0);
    }
}
