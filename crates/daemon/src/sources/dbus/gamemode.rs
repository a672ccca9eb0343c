//! The gamemode source: Feral GameMode's interface, served by the root daemon on the system bus
//! under uxsched's name [`SYSTEM_NAME`]. GameMode's clients call their session bus, where the
//! user's [`super::bridge`] owns `com.feralinteractive.GameMode` and relays each call here, so
//! the caller the bus names is the session's user.
//!
//! The interface is gamemode 1.7's (`daemon/gamemode-dbus.c`): `RegisterGame(i)→i`,
//! `UnregisterGame(i)→i`, `QueryStatus(i)→i`, their `…ByPID(i caller, i game)` and
//! `…ByPIDFd(h game, h caller)` forms (libgamemode ≥ 1.7 tries the pidfd forms first),
//! `RefreshConfig()→i`, `ListGames()→a(io)` and the property `ClientCount` (i); the replies are
//! GameMode's: 0 done, -1 failed (already registered, not registered, no such process); status
//! 0 none of the caller's games registered, 1 some, 2 this one.
//!
//! What it means to uxsched: a registered game is in front while registered; the most recently
//! registered live game wins; `Unregister…` or the game's exit ends it (its pidfd is watched;
//! the game before it, if still registered, is in front again). A game is held by its identity
//! (pid, start time, pidfd), so a recycled pid is never acted on. A user registers only its
//! own processes, root any user's but root's ([`super::admit_for`]): a refusal is an
//! `AccessDenied` error (libgamemode prints it) and a log line. The requester of the `…ByPID`
//! forms is only checked to be a live process (GameMode's supervisor lists are not served).

use super::{admit_for, bus_name, caller_uid, pidfd_pid, serve};
use crate::types::{AppId, Event, SourceName};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::{info, warn};
use uxsched_os::identity::{self, Pidfd};
use zbus::fdo;
use zbus::message::Header;
use zbus::zvariant::{self, OwnedObjectPath};

/// uxsched's name for GameMode's interface on the system bus (the bridge's destination).
pub const SYSTEM_NAME: &str = "org.uxsched.GameMode";
/// GameMode's own name, object and interface (on the session bus: the bridge's).
pub const SESSION_NAME: &str = "com.feralinteractive.GameMode";
pub const OBJECT_PATH: &str = "/com/feralinteractive/GameMode";
pub const INTERFACE: &str = "com.feralinteractive.GameMode";
/// GameMode's object path prefix for a game (`…/Games/<pid>`), as `ListGames` returns.
const GAMES_PATH: &str = "/com/feralinteractive/GameMode/Games";
/// How long the watcher waits on the games' pidfds before it looks for new ones.
const WATCH: Duration = Duration::from_millis(250);

/// Serve GameMode's interface as [`SYSTEM_NAME`] on the system bus (`address` empty,
/// `DBUS_SYSTEM_BUS_ADDRESS` where set) or on `address`, and watch the registered games.
pub fn spawn(address: &str, events: Sender<Event>) -> std::io::Result<()> {
    let games = Arc::new(Mutex::new(Games::new(events)));
    let iface = GameMode {
        games: games.clone(),
    };
    let bus = bus_name(address);
    let conn = serve(address, SYSTEM_NAME, OBJECT_PATH, iface).map_err(|e| {
        // No bus at all (no dbus-daemon: a container, a minimal system) is not a policy problem.
        let why = if e.to_string().contains("No such file or directory") {
            "is the system bus running? GameMode's clients are not served without it"
        } else {
            "install uxsched's D-Bus policy (packaging/dbus/uxsched-foreground.conf) so root \
             may own the name"
        };
        std::io::Error::other(format!("cannot own {SYSTEM_NAME} on {bus} ({e}); {why}"))
    })?;
    info!("gamemode source: serving {INTERFACE} as {SYSTEM_NAME} on {bus}");
    std::thread::Builder::new()
        .name("uxsched-gamemode".into())
        .spawn(move || {
            let _serving = conn;
            watch(&games);
        })
        .map(drop)
}

/// Wait on the registered games' pidfds; when one exits, drop it and send the new front.
/// Ends when the daemon is gone.
fn watch(games: &Mutex<Games>) {
    loop {
        let fds: Vec<Arc<Pidfd>> = lock(games).list.iter().map(|g| g.pidfd.clone()).collect();
        let mut polled: Vec<libc::pollfd> = fds
            .iter()
            .map(|f| libc::pollfd {
                fd: f.as_fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if polled.is_empty() {
            std::thread::sleep(WATCH);
        } else {
            // SAFETY: `polled` holds `polled.len()` pollfds of pidfds kept open by `fds`.
            unsafe {
                libc::poll(
                    polled.as_mut_ptr(),
                    polled.len() as _,
                    WATCH.as_millis() as _,
                )
            };
        }
        if lock(games).reap().is_err() {
            return;
        }
    }
}

fn lock(games: &Mutex<Games>) -> std::sync::MutexGuard<'_, Games> {
    games.lock().unwrap_or_else(|e| e.into_inner())
}

/// One registered game.
struct Game {
    app: AppId,
    /// The uid whose caller registered it (who may unregister it, besides root).
    uid: u32,
    pidfd: Arc<Pidfd>,
}

/// A process a call names: by pid or by pidfd.
pub(crate) enum Named {
    Pid(i32),
    Fd(OwnedFd),
}

/// Why a call names no game it may act on.
#[derive(Debug, PartialEq)]
enum Bad {
    /// No such process (GameMode's -1).
    Gone(String),
    /// Not the caller's to name (`AccessDenied`).
    Refused(String),
}

impl Named {
    fn pid(&self) -> Result<i32, Bad> {
        match self {
            Named::Pid(p) => Ok(*p),
            Named::Fd(fd) => pidfd_pid(fd).map_err(Bad::Gone),
        }
    }

    /// The process, admitted for `caller`, and a pidfd of that very process.
    fn admit(self, caller: u32) -> Result<(AppId, Pidfd), Bad> {
        let pid = self.pid()?;
        if let Err(e) = identity::observe(pid) {
            return Err(Bad::Gone(format!("no process {pid}: {e}")));
        }
        let app = admit_for(caller, pid).map_err(Bad::Refused)?;
        let pidfd = match self {
            Named::Fd(fd) => Pidfd::from(fd),
            Named::Pid(_) => Pidfd::open(pid).map_err(|e| Bad::Gone(format!("pid {pid}: {e}")))?,
        };
        // Alive now with the identity admitted: the pidfd's process is that one.
        if pidfd.exited() || !app.alive() {
            return Err(Bad::Gone(format!("process {pid} has exited")));
        }
        Ok((app, pidfd))
    }
}

/// The registered games, oldest first (the last is in front), and what was last sent.
pub(crate) struct Games {
    list: Vec<Game>,
    sent: Option<AppId>,
    events: Sender<Event>,
}

/// The daemon's channel is closed.
struct Gone;

impl Games {
    pub(crate) fn new(events: Sender<Event>) -> Games {
        Games {
            list: Vec::new(),
            sent: None,
            events,
        }
    }

    /// Register `named` for `caller`: 0, or -1 if it is registered already (GameMode's reply).
    fn register(&mut self, caller: u32, named: Named) -> Result<i32, Bad> {
        let _ = self.reap();
        let (app, pidfd) = named.admit(caller)?;
        if self.list.iter().any(|g| g.app == app) {
            info!(
                pid = app.pid,
                "gamemode: pid {} is registered already", app.pid
            );
            return Ok(-1);
        }
        info!(
            uid = caller,
            pid = app.pid,
            "gamemode: game registered: in front"
        );
        self.list.push(Game {
            app,
            uid: caller,
            pidfd: Arc::new(pidfd),
        });
        self.report()
            .map_err(|_| Bad::Gone("the uxsched daemon is stopping".into()))?;
        Ok(0)
    }

    /// Unregister the game `pid` registered for `caller` (root: for anyone): 0, or -1.
    fn unregister(&mut self, caller: u32, pid: i32) -> i32 {
        let _ = self.reap();
        let Some(at) = self.position(caller, pid) else {
            info!(
                uid = caller,
                pid, "gamemode: unregister of a game not registered"
            );
            return -1;
        };
        self.list.remove(at);
        info!(uid = caller, pid, "gamemode: game unregistered");
        let _ = self.report();
        0
    }

    /// GameMode's status for `caller`: 0 none of its games registered, 1 some, 2 `pid` too.
    fn query(&mut self, caller: u32, pid: i32) -> i32 {
        let _ = self.reap();
        if self.position(caller, pid).is_some() {
            2
        } else {
            i32::from(self.list.iter().any(|g| caller == 0 || g.uid == caller))
        }
    }

    /// The caller's games (root: all), as `ListGames` answers.
    fn listed(&mut self, caller: u32) -> Vec<(i32, OwnedObjectPath)> {
        let _ = self.reap();
        let path = |pid: i32| OwnedObjectPath::try_from(format!("{GAMES_PATH}/{pid}")).ok();
        self.list
            .iter()
            .filter(|g| caller == 0 || g.uid == caller)
            .filter_map(|g| Some((g.app.pid, path(g.app.pid)?)))
            .collect()
    }

    fn position(&self, caller: u32, pid: i32) -> Option<usize> {
        self.list
            .iter()
            .position(|g| g.app.pid == pid && (caller == 0 || g.uid == caller))
    }

    /// Drop the games that have exited and send the front if it changed.
    fn reap(&mut self) -> Result<(), Gone> {
        self.list.retain(|g| {
            let live = !g.pidfd.exited();
            if !live {
                info!(pid = g.app.pid, "gamemode: a registered game exited");
            }
            live
        });
        self.report()
    }

    /// Send the game in front (the last registered) if it is not what was sent last.
    fn report(&mut self) -> Result<(), Gone> {
        let front = self.list.last().map(|g| g.app);
        if front == self.sent {
            return Ok(());
        }
        self.sent = front;
        let ev = Event::Focus {
            source: SourceName::Gamemode,
            app: front,
        };
        self.events.send(ev).map_err(|_| Gone)
    }
}

struct GameMode {
    games: Arc<Mutex<Games>>,
}

impl GameMode {
    async fn register(&self, hdr: &Header<'_>, conn: &zbus::Connection, n: Named) -> Reply {
        let uid = caller_uid(hdr, conn).await?;
        match lock(&self.games).register(uid, n) {
            Ok(r) => Ok(r),
            Err(Bad::Gone(e)) => {
                info!(uid, "gamemode: register failed: {e}");
                Ok(-1)
            }
            Err(Bad::Refused(e)) => {
                warn!(uid, "gamemode: register refused: {e}");
                Err(fdo::Error::AccessDenied(format!("uxsched refused: {e}")))
            }
        }
    }

    async fn unregister(&self, hdr: &Header<'_>, conn: &zbus::Connection, n: Named) -> Reply {
        let uid = caller_uid(hdr, conn).await?;
        Ok(match n.pid() {
            Ok(pid) => lock(&self.games).unregister(uid, pid),
            Err(_) => -1,
        })
    }

    async fn query(&self, hdr: &Header<'_>, conn: &zbus::Connection, n: Named) -> Reply {
        let uid = caller_uid(hdr, conn).await?;
        Ok(match n.pid() {
            Ok(pid) => lock(&self.games).query(uid, pid),
            Err(_) => -1,
        })
    }
}

type Reply = fdo::Result<i32>;

/// GameMode's -1 for a `…ByPIDFd` call whose caller fd names no live process.
fn requester_ok(fd: &zvariant::OwnedFd) -> bool {
    pidfd_pid(fd).is_ok()
}

#[zbus::interface(name = "com.feralinteractive.GameMode")]
impl GameMode {
    async fn register_game(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        pid: i32,
    ) -> fdo::Result<i32> {
        self.register(&hdr, conn, Named::Pid(pid)).await
    }

    async fn unregister_game(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        pid: i32,
    ) -> fdo::Result<i32> {
        self.unregister(&hdr, conn, Named::Pid(pid)).await
    }

    async fn query_status(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        pid: i32,
    ) -> fdo::Result<i32> {
        self.query(&hdr, conn, Named::Pid(pid)).await
    }

    #[zbus(name = "RegisterGameByPID")]
    async fn register_game_by_pid(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        _caller: i32,
        game: i32,
    ) -> fdo::Result<i32> {
        self.register(&hdr, conn, Named::Pid(game)).await
    }

    #[zbus(name = "UnregisterGameByPID")]
    async fn unregister_game_by_pid(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        _caller: i32,
        game: i32,
    ) -> fdo::Result<i32> {
        self.unregister(&hdr, conn, Named::Pid(game)).await
    }

    #[zbus(name = "QueryStatusByPID")]
    async fn query_status_by_pid(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        _caller: i32,
        game: i32,
    ) -> fdo::Result<i32> {
        self.query(&hdr, conn, Named::Pid(game)).await
    }

    #[zbus(name = "RegisterGameByPIDFd")]
    async fn register_game_by_pidfd(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        game: zvariant::OwnedFd,
        caller: zvariant::OwnedFd,
    ) -> fdo::Result<i32> {
        if !requester_ok(&caller) {
            return Ok(-1);
        }
        self.register(&hdr, conn, Named::Fd(game.into())).await
    }

    #[zbus(name = "UnregisterGameByPIDFd")]
    async fn unregister_game_by_pidfd(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        game: zvariant::OwnedFd,
        caller: zvariant::OwnedFd,
    ) -> fdo::Result<i32> {
        if !requester_ok(&caller) {
            return Ok(-1);
        }
        self.unregister(&hdr, conn, Named::Fd(game.into())).await
    }

    #[zbus(name = "QueryStatusByPIDFd")]
    async fn query_status_by_pidfd(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        game: zvariant::OwnedFd,
        caller: zvariant::OwnedFd,
    ) -> fdo::Result<i32> {
        if !requester_ok(&caller) {
            return Ok(-1);
        }
        self.query(&hdr, conn, Named::Fd(game.into())).await
    }

    /// GameMode rereads its config file; uxsched's is read when the daemon starts.
    async fn refresh_config(&self) -> i32 {
        0
    }

    /// The caller's registered games (root: all), with GameMode's object paths (the game
    /// objects themselves are not served).
    async fn list_games(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> fdo::Result<Vec<(i32, OwnedObjectPath)>> {
        let uid = caller_uid(&hdr, conn).await?;
        Ok(lock(&self.games).listed(uid))
    }

    /// The games registered, all users' (a property has no caller to filter by).
    #[zbus(property(emits_changed_signal = "false"))]
    async fn client_count(&self) -> i32 {
        let mut games = lock(&self.games);
        let _ = games.reap();
        games.list.len() as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command};

    /// The user whose games these are: this process's, or `nobody` when it runs as root
    /// (root may not register root's own processes).
    fn user() -> u32 {
        // SAFETY: getuid has no preconditions.
        match unsafe { libc::getuid() } {
            0 => 65534,
            u => u,
        }
    }

    fn sleeper() -> Child {
        let mut c = Command::new("sleep");
        c.arg("30");
        if user() == 65534 {
            c.uid(65534).gid(65534);
        }
        c.spawn().unwrap()
    }

    fn pidfd(pid: i32) -> OwnedFd {
        // SAFETY: plain integer arguments; a non-negative result is a new fd we own.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        assert!(fd >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
        // SAFETY: a fresh descriptor returned by the kernel.
        unsafe { OwnedFd::from_raw_fd(fd as i32) }
    }

    fn focus(rx: &std::sync::mpsc::Receiver<Event>) -> Vec<Option<i32>> {
        rx.try_iter()
            .map(|e| match e {
                Event::Focus { source, app } => {
                    assert_eq!(source, SourceName::Gamemode);
                    app.map(|a| a.pid)
                }
                _ => panic!("not a focus event"),
            })
            .collect()
    }

    #[test]
    fn the_latest_live_game_is_in_front_until_unregistered_or_exited() {
        let me = user();
        let (tx, rx) = std::sync::mpsc::channel();
        let mut games = Games::new(tx);
        let (mut a, mut b) = (sleeper(), sleeper());
        let (pa, pb) = (a.id() as i32, b.id() as i32);
        assert_eq!(games.register(me, Named::Pid(pa)), Ok(0));
        assert_eq!(games.register(me, Named::Pid(pa)), Ok(-1));
        assert_eq!(games.register(me, Named::Fd(pidfd(pb))), Ok(0));
        assert_eq!((games.query(me, pa), games.query(me, 1)), (2, 1));
        assert_eq!(
            games.query(me.wrapping_add(1), pa),
            0,
            "another user's games"
        );
        assert_eq!(games.unregister(me.wrapping_add(1), pb), -1);
        assert_eq!(games.unregister(me, pb), 0);
        assert_eq!(games.unregister(me, pb), -1);
        a.kill().unwrap();
        a.wait().unwrap();
        assert!(games.reap().is_ok());
        assert_eq!(games.query(me, pa), 0);
        assert_eq!(focus(&rx), [Some(pa), Some(pb), Some(pa), None]);
        let e = games.register(me, Named::Pid(1)).unwrap_err();
        assert!(
            matches!(&e, Bad::Refused(m) if m.contains("belongs to uid 0")),
            "{e:?}"
        );
        let e = games.register(0, Named::Pid(1)).unwrap_err();
        assert!(
            matches!(&e, Bad::Refused(m) if m.contains("root's")),
            "{e:?}"
        );
        assert!(matches!(
            games.register(me, Named::Pid(pa)),
            Err(Bad::Gone(_))
        ));
        // Root registers the user's game; the user may unregister it only if it registered it.
        assert_eq!(games.register(0, Named::Pid(pb)), Ok(0));
        assert_eq!(games.unregister(me, pb), -1);
        assert_eq!(games.unregister(0, pb), 0);
        let _ = b.kill();
        let _ = b.wait();
    }
}
