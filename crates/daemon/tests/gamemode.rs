//! GameMode's and system76-scheduler's clients against the daemon (`sources/dbus/`), with real
//! processes only: two dbus-daemons of the test's own — one with a system-bus policy standing
//! in for the system bus (`DBUS_SYSTEM_BUS_ADDRESS`), one a session bus run as `nobody` whose
//! service directory holds packaging/dbus/com.feralinteractive.GameMode.service (its `Exec`
//! pointed at the fixture's `gamemode-bridge` role), so the bridge is started by D-Bus
//! activation as that user — the daemon (the fixture's `daemon` role, root) serving both
//! sources, and Debian's `gamemode-simulate-game`, `gamemoderun`, `gamemoded` and `dbus-send`
//! as the clients. Root is needed (the games run as `nobody`; the daemon acts on them).

mod common;

use common::*;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const NOBODY: u32 = 65534;
const GAMEMODE: &str = "com.feralinteractive.GameMode";
const GAMEMODE_PATH: &str = "/com/feralinteractive/GameMode";
const SYSTEM76: &str = "com.system76.Scheduler";
const SYSTEM76_PATH: &str = "/com/system76/Scheduler";
/// The wiring these tests need in `daemon/setup.rs` (`start_sources`).
const WIRING: &str = "SourceName::Gamemode => crate::sources::dbus::gamemode::spawn(\"\", \
                      tx.clone()), SourceName::System76 => \
                      crate::sources::dbus::system76::spawn(\"\", tx.clone())";

/// A dbus-daemon of the test's own, killed on drop.
struct Bus {
    child: Child,
    dir: tempfile::TempDir,
    address: String,
    log: PathBuf,
    /// The session bus's service directory, kept as long as the bus.
    services: Option<tempfile::TempDir>,
}

impl Bus {
    /// A bus with a system-bus policy (EXTERNAL auth, everyone may call and own).
    fn system() -> Bus {
        Bus::start("system", None, "", &[])
    }

    /// `nobody`'s session bus, its activation directory holding the packaged GameMode
    /// service file (pointed at the fixture), its children told where the system bus is.
    fn session(system: &Bus) -> Bus {
        let services = tempfile::tempdir().unwrap();
        let packaged = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../packaging/dbus/com.feralinteractive.GameMode.service");
        let text = std::fs::read_to_string(&packaged).unwrap();
        let exec = "Exec=/usr/bin/uxsched gamemode-bridge";
        assert!(text.contains(exec), "{}: no `{exec}`", packaged.display());
        let bridge = format!(
            "Exec={} gamemode-bridge",
            any_user::exe_for_any_user().display()
        );
        let file = services.path().join(format!("{GAMEMODE}.service"));
        std::fs::write(&file, text.replace(exec, &bridge)).unwrap();
        open_to_all(services.path());
        let dir = format!("<servicedir>{}</servicedir>", services.path().display());
        let env = [("DBUS_SYSTEM_BUS_ADDRESS", system.address.as_str())];
        let mut bus = Bus::start("session", Some(NOBODY), &dir, &env);
        bus.services = Some(services);
        bus
    }

    fn start(kind: &str, user: Option<u32>, extra: &str, env: &[(&str, &str)]) -> Bus {
        let dir = tempfile::tempdir().unwrap();
        open_to_all(dir.path());
        if let Some(uid) = user {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(uid)).unwrap();
        }
        let socket = dir.path().join("bus");
        let config = dir.path().join("bus.conf");
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>{kind}</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  {extra}
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"#,
                socket.display()
            ),
        )
        .unwrap();
        let address = format!("unix:path={}", socket.display());
        let log = dir.path().join("bus.log");
        let mut c = Command::new("dbus-daemon");
        c.arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--nopidfile", "--nosyslog"])
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(uid) = user {
            c.uid(uid).gid(uid);
        }
        let child = c
            .spawn()
            .expect("dbus-daemon (Debian package dbus-daemon; scripts/setup.sh installs it)");
        wait_until("the bus socket", Duration::from_secs(10), || {
            socket.exists()
        });
        Bus {
            child,
            dir,
            address,
            log,
            services: None,
        }
    }

    /// Whether `name` has an owner, and its uid (from `busctl status`).
    fn owner_uid(&self, name: &str) -> Option<u32> {
        let out = Command::new("busctl")
            .arg(format!("--address={}", self.address))
            .args(["status", name])
            .stdin(Stdio::null())
            .output()
            .expect("busctl (Debian package systemd)");
        let text = String::from_utf8_lossy(&out.stdout);
        let uid = text.lines().find_map(|l| l.strip_prefix("UID="))?;
        out.status.success().then(|| uid.trim().parse().ok())?
    }

    /// `dbus-send --print-reply` as `uid` (None: root); (success, stdout + stderr).
    fn send(&self, uid: Option<u32>, dest: &str, path: &str, call: &str, args: &[&str]) -> Reply {
        let mut c = Command::new("dbus-send");
        c.arg(format!("--bus={}", self.address))
            .args(["--print-reply", &format!("--dest={dest}"), path, call])
            .args(args)
            .stdin(Stdio::null());
        if let Some(uid) = uid {
            c.uid(uid).gid(uid);
        }
        let out = c.output().expect("dbus-send (Debian package dbus-bin)");
        Reply {
            ok: out.status.success(),
            text: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }

    /// GameMode's `method(int32:pid)` as `nobody` on this (session) bus: its int reply.
    fn gamemode(&self, method: &str, pid: i32) -> Reply {
        let call = format!("{GAMEMODE}.{method}");
        self.send(
            Some(NOBODY),
            GAMEMODE,
            GAMEMODE_PATH,
            &call,
            &[&format!("int32:{pid}")],
        )
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
struct Reply {
    ok: bool,
    text: String,
}

impl Reply {
    /// The `int32 N` of a successful reply.
    fn int(&self) -> i32 {
        assert!(self.ok, "the call failed: {}", self.text);
        let mut n = self.text.split_whitespace().skip_while(|w| *w != "int32");
        n.nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no int32 in {}", self.text))
    }

    /// The error of a failed call: it names `error` and says `why`.
    fn refused(&self, error: &str, why: &str) {
        assert!(!self.ok, "not refused: {}", self.text);
        assert!(self.text.contains(error), "not {error}: {}", self.text);
        assert!(self.text.contains(why), "no `{why}` in: {}", self.text);
    }
}

fn open_to_all(dir: &Path) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A process killed on drop: `cmd` as `uid` (None: root).
struct Proc(Child);

impl Proc {
    fn spawn(uid: Option<u32>, cmd: &mut Command) -> Proc {
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
        if let Some(uid) = uid {
            cmd.uid(uid).gid(uid);
        }
        Proc(cmd.spawn().unwrap())
    }

    fn sleep(uid: Option<u32>) -> Proc {
        Proc::spawn(uid, Command::new("sleep").arg("60"))
    }

    fn pid(&self) -> i32 {
        self.0.id() as i32
    }

    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The daemon with `sources` served on `system` (found through `DBUS_SYSTEM_BUS_ADDRESS`),
/// once it owns `names` there.
fn daemon(system: &Bus, sources: &str, names: &[&str]) -> Daemon {
    open_to_all(system.dir.path());
    // The daemon child inherits it; the tests of this file run one at a time (`serial`).
    std::env::set_var("DBUS_SYSTEM_BUS_ADDRESS", &system.address);
    let d = Daemon::start("eimos", &format!("sources = [\"explicit\", {sources}]"));
    let status = d.status();
    for s in status.sources.iter().filter(|s| s.name != "explicit") {
        assert!(
            s.alive,
            "source {} did not start ({:?}); daemon/setup.rs needs: {WIRING}; log: {}",
            s.name,
            s.error,
            log(&d)
        );
    }
    for name in names {
        wait_until(&format!("the daemon owns {name}"), secs(10), || {
            system.owner_uid(name) == Some(0)
        });
    }
    d
}

fn log(d: &Daemon) -> String {
    std::fs::read_to_string(d.dir.join("daemon-1.log")).unwrap_or_default()
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The source's focus and the daemon's, once they are `pid`.
fn wait_focus(d: &Daemon, source: &str, pid: Option<i32>) {
    wait_until(&format!("{source} focus {pid:?}"), secs(10), || {
        let s = d.status();
        let mine = s.sources.iter().find(|x| x.name == source).unwrap().focus;
        mine == pid && s.focus == pid
    });
}

#[test]
fn gamemodes_own_client_registers_through_the_activated_bridge_and_the_game_is_in_front() {
    require_root();
    let _serial = serial();
    let system = Bus::system();
    let d = daemon(&system, "\"gamemode\"", &["org.uxsched.GameMode"]);
    let session = Bus::session(&system);
    // Feral's example client: registers itself, sleeps 10 s, unregisters; exit 0 only if
    // both replies were GameMode's 0.
    let mut game = Command::new("/usr/games/gamemode-simulate-game");
    game.env("DBUS_SESSION_BUS_ADDRESS", &session.address)
        .stderr(Stdio::piped())
        .uid(NOBODY)
        .gid(NOBODY);
    let game = game
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("gamemode-simulate-game (Debian package gamemode)");
    let pid = game.id() as i32;
    wait_focus(&d, "gamemode", Some(pid));
    // In front, acted on: eimos raises the app's threads (nice below 0).
    wait_until("the game is raised", secs(5), || nice(pid) < 0);
    // The bus started the bridge, as the session's user.
    assert_eq!(session.owner_uid(GAMEMODE), Some(NOBODY));
    assert_eq!(session.gamemode("QueryStatus", pid).int(), 2);
    let out = game.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "gamemode-simulate-game: {}; bus log: {}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(&session.log).unwrap_or_default()
    );
    wait_focus(&d, "gamemode", None);
    assert!(
        log(&d).contains("gamemode: game unregistered"),
        "{}",
        log(&d)
    );

    // `gamemoderun`: the game registers as it starts; killed, it never unregisters: its
    // exit ends the focus.
    let mut run = Command::new("/usr/games/gamemoderun");
    run.args(["sleep", "60"])
        .env("DBUS_SESSION_BUS_ADDRESS", &session.address);
    let mut run = Proc::spawn(Some(NOBODY), &mut run);
    wait_focus(&d, "gamemode", Some(run.pid()));
    run.kill();
    wait_focus(&d, "gamemode", None);
    // The daemon may see the exit first; the source's watcher drops the game too.
    wait_until("the source saw the game exit", secs(5), || {
        log(&d).contains("a registered game exited")
    });
}

#[test]
fn the_latest_registered_live_game_wins_and_others_processes_are_refused() {
    require_root();
    let _serial = serial();
    let system = Bus::system();
    let d = daemon(&system, "\"gamemode\"", &["org.uxsched.GameMode"]);
    let session = Bus::session(&system);
    let (mut a, mut b) = (Proc::sleep(Some(NOBODY)), Proc::sleep(Some(NOBODY)));
    let roots = Proc::sleep(None);
    assert_eq!(session.gamemode("RegisterGame", a.pid()).int(), 0);
    wait_focus(&d, "gamemode", Some(a.pid()));
    assert_eq!(session.gamemode("RegisterGame", a.pid()).int(), -1, "twice");
    assert_eq!(session.gamemode("RegisterGame", b.pid()).int(), 0);
    wait_focus(&d, "gamemode", Some(b.pid()));
    assert_eq!(session.gamemode("QueryStatus", a.pid()).int(), 2);
    assert_eq!(session.gamemode("UnregisterGame", b.pid()).int(), 0);
    wait_focus(&d, "gamemode", Some(a.pid()));
    wait_until("a raised, b restored", secs(5), || {
        nice(a.pid()) < 0 && nice(b.pid()) == 0
    });
    assert_eq!(session.gamemode("UnregisterGame", b.pid()).int(), -1);
    // Root's process and pid 1: refused with an error and a log line; `a` stays in front.
    let denied = "org.freedesktop.DBus.Error.AccessDenied";
    session
        .gamemode("RegisterGame", roots.pid())
        .refused(denied, "belongs to uid 0");
    session
        .gamemode("RegisterGame", 1)
        .refused(denied, "may only name its own");
    assert!(
        log(&d).contains("gamemode: register refused"),
        "{}",
        log(&d)
    );
    assert_eq!(session.gamemode("RegisterGame", 1 << 30).int(), -1);
    // `…ByPID(caller, game)` as Steam calls it; then the game's exit brings `a` back.
    let by_pid = format!("{GAMEMODE}.RegisterGameByPID");
    let (caller, game) = (format!("int32:{}", a.pid()), format!("int32:{}", b.pid()));
    let r = session.send(
        Some(NOBODY),
        GAMEMODE,
        GAMEMODE_PATH,
        &by_pid,
        &[&caller, &game],
    );
    assert_eq!(r.int(), 0);
    wait_focus(&d, "gamemode", Some(b.pid()));
    b.kill();
    wait_focus(&d, "gamemode", Some(a.pid()));
    // Wrong argument types: an error; the service goes on.
    let register = format!("{GAMEMODE}.RegisterGame");
    let r = session.send(
        Some(NOBODY),
        GAMEMODE,
        GAMEMODE_PATH,
        &register,
        &["string:x"],
    );
    r.refused("Error", "Signature mismatch");
    assert_eq!(session.gamemode("QueryStatus", a.pid()).int(), 2);
    a.kill();
    wait_focus(&d, "gamemode", None);
    assert_eq!(session.gamemode("QueryStatus", a.pid()).int(), 0);
}

#[test]
fn the_bridge_refuses_to_start_beside_gamemoded_or_without_the_daemons_gamemode() {
    require_root();
    let _serial = serial();
    let system = Bus::system();
    open_to_all(system.dir.path());
    let bridge = |session: &Bus| {
        let out = Command::new(any_user::exe_for_any_user())
            .arg("gamemode-bridge")
            .env("DBUS_SYSTEM_BUS_ADDRESS", &system.address)
            .env("DBUS_SESSION_BUS_ADDRESS", &session.address)
            .uid(NOBODY)
            .gid(NOBODY)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // No daemon serving GameMode on the system bus: the bridge says what to do.
    let session = Bus::start("session", Some(NOBODY), "", &[]);
    let (code, err) = bridge(&session);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("add \"gamemode\" to `sources`"), "{err}");
    // Feral's gamemoded owns the name: the bridge does not start beside it.
    let _d = daemon(&system, "\"gamemode\"", &["org.uxsched.GameMode"]);
    let mut gamemoded = Command::new("gamemoded");
    gamemoded
        .env("DBUS_SESSION_BUS_ADDRESS", &session.address)
        .env("HOME", session.dir.path());
    let _gamemoded = Proc::spawn(Some(NOBODY), &mut gamemoded);
    wait_until("gamemoded owns its name", secs(10), || {
        session.owner_uid(GAMEMODE) == Some(NOBODY)
    });
    let (code, err) = bridge(&session);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("(gamemoded)") && err.contains("mask"), "{err}");
}

#[test]
fn system76_set_foreground_process_focuses_the_callers_own_process_only() {
    require_root();
    let _serial = serial();
    let system = Bus::system();
    let d = daemon(&system, "\"system76\"", &[SYSTEM76]);
    let set = format!("{SYSTEM76}.SetForegroundProcess");
    let call = |uid: Option<u32>, pid: i32| {
        let arg = format!("uint32:{pid}");
        system.send(uid, SYSTEM76, SYSTEM76_PATH, &set, &[&arg])
    };
    let (mine, other) = (Proc::sleep(Some(NOBODY)), Proc::sleep(Some(NOBODY)));
    let roots = Proc::sleep(None);
    let r = call(Some(NOBODY), mine.pid());
    assert!(r.ok, "{}", r.text);
    wait_focus(&d, "system76", Some(mine.pid()));
    // Another user's process and pid 1: an error and a log line; nothing in front from it.
    let denied = "org.freedesktop.DBus.Error.AccessDenied";
    call(Some(NOBODY), roots.pid()).refused(denied, "belongs to uid 0");
    wait_focus(&d, "system76", None);
    call(Some(NOBODY), 1).refused(denied, "may only name its own");
    assert!(
        log(&d).contains("SetForegroundProcess refused"),
        "{}",
        log(&d)
    );
    // Root names any user's process, never root's own.
    assert!(call(None, other.pid()).ok);
    wait_focus(&d, "system76", Some(other.pid()));
    call(None, roots.pid()).refused(denied, "root's");
    // Garbage: wrong types, CPU modes uxsched does not have; the service goes on.
    let r = system.send(Some(NOBODY), SYSTEM76, SYSTEM76_PATH, &set, &["string:x"]);
    r.refused("Error", "Signature mismatch");
    let mode = format!("{SYSTEM76}.SetCpuMode");
    let r = system.send(Some(NOBODY), SYSTEM76, SYSTEM76_PATH, &mode, &["byte:3"]);
    r.refused("org.freedesktop.DBus.Error.NotSupported", "uxsched mode");
    let get = "org.freedesktop.DBus.Properties.Get";
    let args = [&format!("string:{SYSTEM76}")[..], "string:CpuProfile"];
    let r = system.send(Some(NOBODY), SYSTEM76, SYSTEM76_PATH, get, &args);
    assert!(r.ok && r.text.contains("uxsched"), "{}", r.text);
    assert!(call(Some(NOBODY), mine.pid()).ok);
    wait_focus(&d, "system76", Some(mine.pid()));
}
