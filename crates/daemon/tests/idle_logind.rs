//! The logind idle reader (`src/sources/idle/logind.rs`) against a stand-in logind on a private
//! `dbus-daemon` (no logind runs on this machine): the session's `IdleHint` and
//! `IdleSinceHintMonotonic`, changed by the test as a desktop would, become "idle since …" at
//! the limit and "active" within the reader's bound once the hint clears; a session logind does
//! not know, or a hint that can no longer be read, turns the reader off (lifting a withdrawal).
//!
//! Needs the Debian package `dbus-daemon`; any user.

#[path = "common/bus.rs"]
mod bus;

use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uxsched_daemon::sources::auto::LogindAt;
use uxsched_daemon::sources::idle::{logind, Change};
use zbus::zvariant::OwnedObjectPath;

const LIMIT: Duration = Duration::from_secs(1);
const PATH: &str = "/org/freedesktop/login1/session/_37";

/// What the test's desktop says: the hint, its start (CLOCK_MONOTONIC µs), and whether reading
/// it fails.
#[derive(Default)]
struct Hint {
    idle: bool,
    since_us: u64,
    broken: bool,
}

type Shared = Arc<Mutex<Hint>>;

struct Manager;

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl Manager {
    fn get_session(&self, id: String) -> zbus::fdo::Result<OwnedObjectPath> {
        match id.as_str() {
            "7" => Ok(OwnedObjectPath::try_from(PATH).unwrap()),
            _ => Err(zbus::fdo::Error::Failed(format!("No session '{id}' known"))),
        }
    }
}

struct Session(Shared);

impl Session {
    fn read<T>(&self, f: impl Fn(&Hint) -> T) -> zbus::fdo::Result<T> {
        let h = self.0.lock().unwrap();
        match h.broken {
            true => Err(zbus::fdo::Error::Failed("logind went away".into())),
            false => Ok(f(&h)),
        }
    }
}

#[zbus::interface(name = "org.freedesktop.login1.Session")]
impl Session {
    #[zbus(property)]
    fn idle_hint(&self) -> zbus::fdo::Result<bool> {
        self.read(|h| h.idle)
    }
    #[zbus(property)]
    fn idle_since_hint_monotonic(&self) -> zbus::fdo::Result<u64> {
        self.read(|h| h.since_us)
    }
}

fn serve(address: &str, hint: Shared) -> zbus::blocking::Connection {
    zbus::blocking::connection::Builder::address(address)
        .unwrap()
        .name("org.freedesktop.login1")
        .unwrap()
        .serve_at("/org/freedesktop/login1", Manager)
        .unwrap()
        .serve_at(PATH, Session(hint))
        .unwrap()
        .build()
        .unwrap()
}

fn monotonic_us() -> u64 {
    uxsched_os::clock::ns(libc::CLOCK_MONOTONIC) / 1000
}

/// The reader of session `id` on `bus`, its changes on the returned channel (disconnected once
/// the reader stops).
fn reader(bus: &bus::SystemBus, id: &str) -> (mpsc::Receiver<Change>, Arc<AtomicBool>) {
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let at = LogindAt::Address(bus.address.clone());
    logind::spawn(at, id.into(), LIMIT, stop.clone(), move |c| {
        tx.send(c).is_ok()
    })
    .unwrap();
    (rx, stop)
}

#[test]
fn the_hint_withdraws_at_the_limit_and_its_clearing_gives_back_within_the_bound() {
    let bus = bus::SystemBus::start();
    let hint: Shared = Default::default();
    let _logind = serve(&bus.address, hint.clone());
    let (rx, stop) = reader(&bus, "7");
    // Active: nothing said.
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(1500)),
        Err(RecvTimeoutError::Timeout)
    );
    // The desktop sets the hint, its idleness started 0.2 s ago: idle at the limit, at most
    // one active read (1 s) late.
    let started = Instant::now() - Duration::from_millis(200);
    *hint.lock().unwrap() = Hint {
        idle: true,
        since_us: monotonic_us() - 200_000,
        broken: false,
    };
    let got = rx.recv_timeout(Duration::from_secs(3)).unwrap();
    let at = started.elapsed();
    let Change::Idle { since } = got else {
        panic!("{got:?}")
    };
    assert!(
        at >= LIMIT && at <= LIMIT + Duration::from_millis(1100),
        "{at:?}"
    );
    let off = since
        .duration_since(started)
        .max(started.duration_since(since));
    assert!(off < Duration::from_millis(50), "since off by {off:?}");
    // Input: the desktop clears the hint; active within the reader's 250 ms (+ the bus).
    hint.lock().unwrap().idle = false;
    let cleared = Instant::now();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(2)).unwrap(),
        Change::Active
    );
    let back = cleared.elapsed();
    assert!(back <= Duration::from_millis(400), "{back:?}");
    eprintln!("withdrawn {at:?} after the idle start (limit {LIMIT:?}), back {back:?} after the hint cleared");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(2)),
        Err(RecvTimeoutError::Disconnected)
    );
}

#[test]
fn an_unknown_session_or_an_unreadable_hint_turns_the_reader_off_and_lifts_its_withdrawal() {
    let bus = bus::SystemBus::start();
    let hint: Shared = Arc::new(Mutex::new(Hint {
        idle: true,
        since_us: monotonic_us().saturating_sub(5_000_000),
        broken: false,
    }));
    let _logind = serve(&bus.address, hint.clone());
    // logind does not know the session: off at once, nothing said.
    let (rx, _stop) = reader(&bus, "99");
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(3)),
        Err(RecvTimeoutError::Disconnected)
    );
    // Idle for 5 s already: withdrawn at the first read; then the hint cannot be read: the
    // withdrawal is lifted and the reader stops.
    let (rx, _stop) = reader(&bus, "7");
    assert!(matches!(
        rx.recv_timeout(Duration::from_secs(2)),
        Ok(Change::Idle { .. })
    ));
    hint.lock().unwrap().broken = true;
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(2)).unwrap(),
        Change::Active
    );
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(2)),
        Err(RecvTimeoutError::Disconnected)
    );
}
