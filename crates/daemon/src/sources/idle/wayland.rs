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
use wayland_client::globals::{registry_queue_init, GlobalListContents};
use wayland_client::protocol::{wl_registry, wl_seat};
use wayland_client::{Connection, Dispatch, QueueHandle};
use wayland_protocols::ext::idle_notify::v1::client::{
    ext_idle_notification_v1::{self, ExtIdleNotificationV1},
    ext_idle_notifier_v1::ExtIdleNotifierV1,
};
use wayland_protocols_plasma::idle::client::{
    org_kde_kwin_idle::OrgKdeKwinIdle,
    org_kde_kwin_idle_timeout::{self, OrgKdeKwinIdleTimeout},
};

/// How long the compositor may take to answer the connection's first round trip (any user can
/// listen on a socket named like a compositor's).
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

impl Dispatch<wl_registry::WlRegistry, GlobalListContents> for Events {
    fn event(
        _: &mut Self,
        _: &wl_registry::WlRegistry,
        _: wl_registry::Event,
        _: &GlobalListContents,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
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
    // The first round trip bounded; later reads follow a poll, so they do not block.
    stream
        .set_read_timeout(Some(HANDSHAKE))
        .map_err(|e| broken("cannot set a timeout", e))?;
    let conn = Connection::from_socket(stream).map_err(|e| broken("not a Wayland socket", e))?;
    let (globals, mut queue) =
        registry_queue_init::<Events>(&conn).map_err(|e| broken("no answer to the registry", e))?;
    let qh = queue.handle();
    let seat: wl_seat::WlSeat = globals
        .bind(&qh, 1..=1, ())
        .map_err(|e| Failed::NotOffered(format!("the compositor offers no seat ({e})")))?;
    let ms = u32::try_from(limit.as_millis()).unwrap_or(u32::MAX);
    // Held while the reader reads: the notification or timeout object of either protocol.
    let _asked: (Option<ExtIdleNotificationV1>, Option<OrgKdeKwinIdleTimeout>) =
        match globals.bind::<ExtIdleNotifierV1, _, _>(&qh, 1..=1, ()) {
            Ok(n) => (Some(n.get_idle_notification(ms, &seat, &qh, ())), None),
            Err(_) => match globals.bind::<OrgKdeKwinIdle, _, _>(&qh, 1..=1, ()) {
                Ok(kde) => (None, Some(kde.get_idle_timeout(&seat, ms, &qh, ()))),
                Err(_) => {
                    return Err(Failed::NotOffered(
                        "the compositor offers neither ext-idle-notify-v1 nor KDE's idle \
                         protocol"
                            .into(),
                    ))
                }
            },
        };
    let mut events = Events {
        limit,
        changes: Vec::new(),
    };
    let lost = |e: &dyn std::fmt::Display| broken("the connection failed", e);
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        queue.flush().map_err(|e| lost(&e))?;
        queue.dispatch_pending(&mut events).map_err(|e| lost(&e))?;
        if let Some(guard) = queue.prepare_read() {
            let mut pfd = libc::pollfd {
                fd: guard.connection_fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut pfd, 1, TICK_MS) } > 0 {
                guard.read().map_err(|e| lost(&e))?;
            }
        }
        queue.dispatch_pending(&mut events).map_err(|e| lost(&e))?;
        for c in events.changes.drain(..) {
            if !send(c) {
                return Ok(());
            }
        }
    }
}

fn broken(what: &str, e: impl std::fmt::Display) -> Failed {
    Failed::Broken(format!("{what}: {e}"))
}
