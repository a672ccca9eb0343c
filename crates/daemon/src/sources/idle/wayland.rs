//! The Wayland idle reader: the compositor's own `ext-idle-notify-v1` (sway ≥ 1.8, Hyprland,
//! niri, KWin offer it), else KDE's `org_kde_kwin_idle` (KWin, sway 1.7), asked for a
//! notification after `[idle] after_s` without input on the session's seat. GNOME's Mutter
//! offers neither. Event-driven: the compositor says "idle" at the limit and "resumed" at the
//! first input, so the boost comes back with that input, with no polling and no cost between.
//!
//! The daemon connects to the session's Wayland socket (`/run/user/<uid>/wayland-N`) as a
//! client with no surface. The notification honours idle inhibitors (a video player that keeps
//! the screen on keeps its boost too). A compositor without the protocol falls back to logind's
//! hint where logind knows the session (`logind.rs`).

use super::Change;
use crate::sources::auto::LogindAt;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wayland_client::protocol::{wl_callback, wl_registry, wl_seat};
use wayland_client::{Connection, Dispatch, EventQueue, Proxy, QueueHandle};
use wayland_protocols::ext::idle_notify::v1::client::{
    ext_idle_notification_v1::{self, ExtIdleNotificationV1},
    ext_idle_notifier_v1::ExtIdleNotifierV1,
};
use wayland_protocols_plasma::idle::client::{
    org_kde_kwin_idle::OrgKdeKwinIdle,
    org_kde_kwin_idle_timeout::{self, OrgKdeKwinIdleTimeout},
};

/// How long the compositor may take to answer the connection's first round trip (any user can
/// listen on a socket named like a compositor's, and never answer).
const HANDSHAKE: Duration = Duration::from_secs(3);
/// How often the reader looks at its stop flag.
const TICK_MS: i32 = 500;

/// Why the reader does not read.
enum Failed {
    /// The compositor does not offer the protocol (or a seat).
    NotOffered(String),
    Broken(String),
}

/// The changes the compositor's events make.
struct Events {
    limit: Duration,
    changes: Vec<Change>,
    /// The compositor's globals: name, interface, version.
    globals: Vec<(u32, String, u32)>,
    /// The handshake's round trip is done: every global is in.
    synced: bool,
}

impl Dispatch<ExtIdleNotificationV1, ()> for Events {
    fn event(
        state: &mut Self,
        _: &ExtIdleNotificationV1,
        event: ext_idle_notification_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let idled = matches!(event, ext_idle_notification_v1::Event::Idled);
        state.said(idled);
    }
}

impl Dispatch<OrgKdeKwinIdleTimeout, ()> for Events {
    fn event(
        state: &mut Self,
        _: &OrgKdeKwinIdleTimeout,
        event: org_kde_kwin_idle_timeout::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        state.said(matches!(event, org_kde_kwin_idle_timeout::Event::Idle));
    }
}

impl Events {
    /// The compositor said "idle" (the limit passed without input) or "resumed".
    fn said(&mut self, idled: bool) {
        let now = Instant::now();
        self.changes.push(match idled {
            true => Change::Idle {
                since: now.checked_sub(self.limit).unwrap_or(now),
            },
            false => Change::Active,
        });
    }
}

wayland_client::delegate_noop!(Events: ignore wl_seat::WlSeat);
wayland_client::delegate_noop!(Events: ExtIdleNotifierV1);
wayland_client::delegate_noop!(Events: OrgKdeKwinIdle);

impl Dispatch<wl_registry::WlRegistry, ()> for Events {
    fn event(
        state: &mut Self,
        _: &wl_registry::WlRegistry,
        event: wl_registry::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_registry::Event::Global {
            name,
            interface,
            version,
        } = event
        {
            state.globals.push((name, interface, version));
        }
    }
}

impl Dispatch<wl_callback::WlCallback, ()> for Events {
    fn event(
        state: &mut Self,
        _: &wl_callback::WlCallback,
        _: wl_callback::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        state.synced = true;
    }
}

/// Follow the idleness of the compositor at `socket` with limit `limit` on a thread until
/// `stop` is set or `send` says the daemon is gone (false). Without the protocol, logind's hint
/// of session `logind` is read instead, where logind knows the session; a reader that cannot
/// read says so once and stops, lifting a withdrawal it made.
pub fn spawn(
    socket: PathBuf,
    logind: Option<(LogindAt, String)>,
    limit: Duration,
    stop: Arc<AtomicBool>,
    mut send: impl FnMut(Change) -> bool + Send + 'static,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("uxsched-idle-wayland".into())
        .spawn(move || {
            let mut idle = false;
            let result = follow(&socket, limit, &stop, &mut |c: Change| {
                idle = c != Change::Active;
                send(c)
            });
            let why = match result {
                Ok(()) => None,
                Err(Failed::NotOffered(why)) => match logind {
                    Some((at, id)) => {
                        tracing::info!(
                            socket = %socket.display(),
                            "idle: {why}; logind's idle hint of session {id} is read instead"
                        );
                        return super::logind::run(at, id, limit, stop, send);
                    }
                    None => Some(why),
                },
                Err(Failed::Broken(why)) => Some(why),
            };
            if let Some(why) = why {
                tracing::warn!(
                    socket = %socket.display(),
                    "idle demotion is off for this session: {why}; the focused app keeps its \
                     boost while the user is away"
                );
            }
            if idle {
                send(Change::Active);
            }
        })?;
    Ok(())
}

/// Read the compositor's notifications until stopped (Ok) or the reader fails.
fn follow(
    socket: &Path,
    limit: Duration,
    stop: &AtomicBool,
    send: &mut impl FnMut(Change) -> bool,
) -> Result<(), Failed> {
    let stream = UnixStream::connect(socket).map_err(|e| broken("cannot connect", e))?;
    let conn = Connection::from_socket(stream).map_err(|e| broken("not a Wayland socket", e))?;
    let mut queue = conn.new_event_queue();
    let qh = queue.handle();
    let registry = conn.display().get_registry(&qh, ());
    let _sync = conn.display().sync(&qh, ());
    let mut events = Events {
        limit,
        changes: Vec::new(),
        globals: Vec::new(),
        synced: false,
    };
    // The handshake bounded: every read below follows a poll.
    let end = Instant::now() + HANDSHAKE;
    while !events.synced {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Failed::Broken(format!(
                "no answer to the registry within {HANDSHAKE:?}: not a compositor?"
            )));
        }
        read(&mut queue, &mut events, left.as_millis() as i32 + 1)?;
    }
    let seat: wl_seat::WlSeat = bind(&events, &registry, &qh)
        .ok_or_else(|| Failed::NotOffered("the compositor offers no seat".into()))?;
    let ms = u32::try_from(limit.as_millis()).unwrap_or(u32::MAX);
    // Held while the reader reads: the notification or timeout object of either protocol.
    let _asked: (Option<ExtIdleNotificationV1>, Option<OrgKdeKwinIdleTimeout>) =
        match bind::<ExtIdleNotifierV1>(&events, &registry, &qh) {
            Some(n) => (Some(n.get_idle_notification(ms, &seat, &qh, ())), None),
            None => match bind::<OrgKdeKwinIdle>(&events, &registry, &qh) {
                Some(kde) => (None, Some(kde.get_idle_timeout(&seat, ms, &qh, ()))),
                None => {
                    return Err(Failed::NotOffered(
                        "the compositor offers neither ext-idle-notify-v1 nor KDE's idle \
                         protocol"
                            .into(),
                    ))
                }
            },
        };
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        read(&mut queue, &mut events, TICK_MS)?;
        for c in events.changes.drain(..) {
            if !send(c) {
                return Ok(());
            }
        }
    }
}

/// Send what is queued, wait up to `timeout_ms` for the compositor, and handle what it sent.
fn read(
    queue: &mut EventQueue<Events>,
    events: &mut Events,
    timeout_ms: i32,
) -> Result<(), Failed> {
    let lost = |e: &dyn std::fmt::Display| broken("the connection failed", e);
    queue.flush().map_err(|e| lost(&e))?;
    queue.dispatch_pending(events).map_err(|e| lost(&e))?;
    if let Some(guard) = queue.prepare_read() {
        let mut pfd = libc::pollfd {
            fd: guard.connection_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, timeout_ms) } > 0 {
            guard.read().map_err(|e| lost(&e))?;
        }
    }
    queue.dispatch_pending(events).map_err(|e| lost(&e))?;
    Ok(())
}

/// Bind the compositor's global of interface `I`, version 1, if it offers one.
fn bind<I>(
    events: &Events,
    registry: &wl_registry::WlRegistry,
    qh: &QueueHandle<Events>,
) -> Option<I>
where
    I: Proxy + 'static,
    Events: Dispatch<I, ()>,
{
    let name = I::interface().name;
    let (id, _, _) = events.globals.iter().find(|(_, i, _)| i == name)?;
    Some(registry.bind::<I, _, _>(*id, 1, qh, ()))
}

fn broken(what: &str, e: impl std::fmt::Display) -> Failed {
    Failed::Broken(format!("{what}: {e}"))
}
