//! The measuring client: types into the real program and times each keystroke until the
//! program's window shows it. It is not the bottleneck it measures: it runs at SCHED_FIFO
//! priority [`CLIENT_RT_PRIORITY`] (above the `fifo` mode's 1), bounded like rtkit by a 200 ms
//! RLIMIT_RTTIME and SCHED_RESET_ON_FORK, in a session of its own; it sleeps between keystrokes
//! and blocks in poll(2) while it waits.
//!
//! One sample = XTEST key press + release sent → the `DamageNotify` of the program's window
//! read (ms). Keystrokes are paced 50–100 ms apart (seeded) after the previous one was drawn,
//! so they never queue: about 13 samples per second.

use super::damage::DamageWatch;
use super::input::{self, Keyboard};
use crate::models::{ready_then_wait_for_go, ModelArgs, ModelKind, ModelOutput};
use crate::sys;
use anyhow::{bail, Context, Result};
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};
use x11rb::connection::Connection;
use x11rb::protocol::xproto::Window;
use x11rb::rust_connection::RustConnection;

pub const CLIENT_RT_PRIORITY: i32 = 10;
const RTTIME_LIMIT_US: u64 = 200_000;
/// The desktop and program start after the load (a run's order), so under `no-autogroup` with
/// 12 hogs they get ~1/13 of the CPUs: 15 s proved too short for xterm's window to be managed.
/// Measurement starts only once it is, so a long wait costs nothing but time.
const WINDOW_TIMEOUT: Duration = Duration::from_secs(60);
/// The browser's warm-up (`warm_up`): bounded like the window's wait, for the same reason.
const WARM_UP_TIMEOUT: Duration = Duration::from_secs(30);
/// A keystroke whose pixels did not change within this is counted as lost.
const DRAW_TIMEOUT: Duration = Duration::from_secs(2);
const PACE_MS: std::ops::Range<u64> = 50..100;
/// Letters, and every 41st key a Return (xterm's raw `cat` echoes it as a carriage return, so
/// the line never scrolls; xedit starts a new line).
const LETTERS: usize = 26;
const LINE: usize = 41;
const RETURN: u32 = 0xff0d;

/// A connection to the program's window: focus, input and damage.
pub struct Probe {
    conn: RustConnection,
    window: Window,
    damage: DamageWatch,
    keys: Keyboard,
}

impl Probe {
    /// Find the window of `app_pid` on `display`, have the window manager activate it, and
    /// watch its damage.
    pub fn attach(display: &str, app_pid: i32) -> Result<Probe> {
        let (conn, screen) = x11rb::connect(Some(display))
            .with_context(|| format!("connecting to the X server on {display}"))?;
        let root = conn.setup().roots[screen].root;
        let window = input::find_window(&conn, root, app_pid, WINDOW_TIMEOUT)?;
        input::activate(&conn, root, window, WINDOW_TIMEOUT)?;
        let keysyms: Vec<u32> = (b'a'..=b'z').map(u32::from).chain([RETURN]).collect();
        let keys = Keyboard::new(&conn, root, &keysyms)?;
        let damage = DamageWatch::new(&conn, window)?;
        Ok(Probe {
            conn,
            window,
            damage,
            keys,
        })
    }

    pub fn window(&self) -> Window {
        self.window
    }

    /// The window's `_NET_WM_PID`, if the program set one (Chromium and xterm do, xedit not).
    pub fn wm_pid(&self) -> Result<Option<u32>> {
        use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _};
        let atom = self.conn.intern_atom(false, b"_NET_WM_PID")?.reply()?.atom;
        let prop = self
            .conn
            .get_property(false, self.window, atom, AtomEnum::CARDINAL, 0, 1)?
            .reply()?;
        Ok(prop.value32().and_then(|mut v| v.next()))
    }

    /// Type keystroke number `i`; its latency until the window's pixels changed, or `None` if
    /// they did not within `timeout`.
    pub fn keystroke(&self, i: usize, timeout: Duration) -> Result<Option<Duration>> {
        self.damage.reset(&self.conn)?;
        let key = if i % LINE == LINE - 1 {
            self.keys.len() - 1
        } else {
            i % LETTERS
        };
        let sent = Instant::now();
        self.keys.type_key(&self.conn, key)?;
        let drawn = self.damage.wait(&self.conn, sent + timeout)?;
        Ok(drawn.map(|t| t - sent))
    }

    /// Wait until the window has stayed unchanged for `span`, at most `timeout`: whatever
    /// starting and taking the focus drew is over.
    pub fn settle(&self, span: Duration, timeout: Duration) -> Result<()> {
        let end = Instant::now() + timeout;
        while !self.quiet(span)? {
            if Instant::now() > end {
                bail!(
                    "window {:#x} kept changing without input for {} s (a blinking caret, an animation?): its pixels would not be the keystrokes'",
                    self.window,
                    timeout.as_secs()
                );
            }
        }
        Ok(())
    }

    /// Whether the window stays unchanged for `span` without input (nothing but our
    /// keystrokes draws, so every sample is the keystroke's).
    pub fn quiet(&self, span: Duration) -> Result<bool> {
        self.damage.reset(&self.conn)?;
        Ok(self
            .damage
            .wait(&self.conn, Instant::now() + span)?
            .is_none())
    }
}

/// The browser's window is managed before its page is laid out and its first keystroke
/// waits for the text path's first use (font, glyph cache): one keystroke, not a sample,
/// typed once the window stopped changing, proves the `<textarea>` has the focus and takes
/// that first-use cost out of the samples; the run starts once its drawing has settled.
fn warm_up(probe: &Probe) -> Result<()> {
    // Longer than half of GTK's default caret blink cycle (1.2 s): a caret that blinks (the
    // page's settings not taken) never settles, and the run fails instead of timing blinks.
    let span = Duration::from_millis(1000);
    probe.settle(span, WARM_UP_TIMEOUT)?;
    if probe.keystroke(0, WARM_UP_TIMEOUT)?.is_none() {
        bail!(
            "the warm-up keystroke changed no pixel of the browser's window {:#x} within {} s: the page's <textarea> does not have the focus (the browser's log is app.log in the run's directory)",
            probe.window(),
            WARM_UP_TIMEOUT.as_secs()
        );
    }
    probe.settle(span, WARM_UP_TIMEOUT)
}

/// SCHED_FIFO for this process, its runaway bound set first.
pub(super) fn enter_realtime() -> Result<()> {
    let (_, hard) = sys::rttime_limit(0)?;
    let limit = RTTIME_LIMIT_US.min(hard);
    sys::set_rttime_limit(0, limit, hard)?;
    sys::set_policy(
        0,
        sys::SCHED_FIFO | sys::SCHED_RESET_ON_FORK,
        CLIENT_RT_PRIORITY,
    )
    .context("the measuring client needs SCHED_FIFO (run the bench as root)")
}

/// Entry point of the client process (`bench-model --model xterm --role system --app-pid P`,
/// `DISPLAY` set by the runner).
pub fn run(args: &ModelArgs) -> Result<ModelOutput> {
    let app = args
        .app_pid
        .context("the measuring client needs --app-pid")?;
    let display = std::env::var("DISPLAY").context("the measuring client needs DISPLAY")?;
    enter_realtime()?;
    let probe = Probe::attach(&display, app)?;
    if args.model == ModelKind::Chromium {
        warm_up(&probe)?;
    } else {
        // Let the program finish drawing its focus change before the first keystroke.
        std::thread::sleep(Duration::from_millis(200));
    }
    ready_then_wait_for_go()?;
    let switches_before = sys::context_switches(app);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);
    let end = Instant::now() + Duration::from_millis(args.duration_ms);
    let (mut samples, mut lost, mut typed) = (Vec::new(), 0u32, 0usize);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(rng.gen_range(PACE_MS)));
        match probe.keystroke(typed, DRAW_TIMEOUT)? {
            Some(latency) => samples.push(latency.as_secs_f64() * 1e3),
            None => lost += 1,
        }
        typed += 1;
    }
    if lost as usize * 10 > typed {
        bail!(
            "{lost} of {typed} keystrokes changed no pixel of window {:#x} within {} s: the program does not get or draw the input",
            probe.window(),
            DRAW_TIMEOUT.as_secs()
        );
    }
    let extras = [
        ("keystrokes".to_owned(), typed as f64),
        ("lost".to_owned(), f64::from(lost)),
    ];
    Ok(ModelOutput {
        samples_ms: samples,
        extras: extras.into_iter().collect(),
        context_switches: sys::context_switches(app).saturating_sub(switches_before),
    })
}
