//! `[audio]` (issue 32, "audible counts as in front"): a real PipeWire with a null sink, run as
//! an unprivileged user (uid 65534) in its runtime directory `/run/user/65534`, linked by a real
//! WirePlumber (on a private bus, which also carries a stand-in logind naming the user's session:
//! no logind runs here); `pw-play` of a generated WAV as that user; the daemon in the `uxsched`
//! mode with its default audio source.
//!
//! Shown: the playing pw-play's data thread gets the short slice and `others_nice` and nothing
//! else of it is raised; a process whose pid the stream forges in its own properties
//! (`application.process.id`, `pipewire.sec.pid`: what a client may write about itself) is left
//! alone; the stream stopping (its sink removed: the node goes idle, the process lives) restores
//! its thread exactly, and so does the process exiting; an audio thread that is real-time
//! already (as rtkit makes it) is listed and left as it is; the daemon keeps running when the
//! PipeWire server goes away.
//!
//! Needs root and the Debian packages pipewire, pipewire-bin, wireplumber and dbus-daemon.

mod common;
#[path = "auto_sessions/logind_standin.rs"]
mod logind_standin;

use common::*;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The desktop user.
const USER: u32 = 65534;
const SINK: &str = "uxsched-test-sink";
const WAIT: Duration = Duration::from_secs(30);

/// A PipeWire server with one null sink, as this config loads it (no devices, no D-Bus).
const PIPEWIRE_CONF: &str = r#"
context.properties = { core.daemon = true core.name = pipewire-0 support.dbus = false }
context.spa-libs = { audio.convert.* = audioconvert/libspa-audioconvert support.* = support/libspa-support }
context.modules = [
    { name = libpipewire-module-protocol-native }
    { name = libpipewire-module-metadata }
    { name = libpipewire-module-spa-node-factory }
    { name = libpipewire-module-client-node }
    { name = libpipewire-module-adapter }
    { name = libpipewire-module-link-factory }
    { name = libpipewire-module-access }
    { name = libpipewire-module-session-manager }
    { name = libpipewire-module-profiler }
]
context.objects = [
    { factory = adapter args = { factory.name = support.null-audio-sink node.name = uxsched-test-sink
      media.class = Audio/Sink audio.position = "FL,FR" object.linger = true } }
]
"#;

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The user's audio stack: the private bus, the stand-in logind, PipeWire and WirePlumber, and
/// the files they use; everything removed on drop (the runtime directory too if it made it).
struct Stack {
    wireplumber: Option<Kill>,
    pipewire: Option<Kill>,
    _logind: zbus::blocking::Connection,
    bus: bus::SystemBus,
    dir: tempfile::TempDir,
    runtime: PathBuf,
    made_runtime: bool,
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.wireplumber.take();
        self.pipewire.take();
        for f in ["pipewire-0", "pipewire-0.lock"] {
            let _ = std::fs::remove_file(self.runtime.join(f));
        }
        if self.made_runtime {
            let _ = std::fs::remove_dir_all(&self.runtime);
        }
    }
}

impl Stack {
    fn start() -> Stack {
        let bus = bus::SystemBus::start();
        let logind = logind_standin::serve(
            &bus.address,
            vec![logind_standin::Session {
                id: "7".into(),
                uid: USER,
                kind: "wayland",
                display: String::new(),
                active: true,
                remote: false,
            }],
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        std::os::unix::fs::chown(&home, Some(USER), Some(USER)).unwrap();
        std::fs::write(dir.path().join("pipewire.conf"), PIPEWIRE_CONF).unwrap();
        write_wav(&dir.path().join("tone.wav"), 60);
        let runtime = PathBuf::from(format!("/run/user/{USER}"));
        let made_runtime = !runtime.exists();
        if made_runtime {
            std::fs::create_dir_all(&runtime).unwrap();
            std::os::unix::fs::chown(&runtime, Some(USER), Some(USER)).unwrap();
            std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let mut s = Stack {
            wireplumber: None,
            pipewire: None,
            _logind: logind,
            bus,
            dir,
            runtime,
            made_runtime,
        };
        let conf = s.dir.path().join("pipewire.conf");
        s.pipewire = Some(Kill(
            s.as_user("pipewire")
                .arg("-c")
                .arg(&conf)
                .spawn()
                .expect("pipewire (Debian package pipewire)"),
        ));
        wait_until("PipeWire's socket", WAIT, || {
            s.runtime.join("pipewire-0").exists()
        });
        s.wireplumber = Some(Kill(
            s.as_user("wireplumber")
                .spawn()
                .expect("wireplumber (Debian package wireplumber)"),
        ));
        wait_until("the null sink", WAIT, || s.node(SINK).is_some());
        s
    }

    /// `program` as the user in its session: runtime directory, bus, home; in `/`.
    fn as_user(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", self.dir.path().join("home"))
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("DBUS_SESSION_BUS_ADDRESS", &self.bus.address)
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .uid(USER)
            .gid(USER);
        c
    }

    /// The node named `name`: its id, state and properties, as `pw-dump` shows them.
    fn node(&self, name: &str) -> Option<(u64, String, serde_json::Value)> {
        let out = self
            .as_user("pw-dump")
            .stdout(Stdio::piped())
            .output()
            .expect("pw-dump (Debian package pipewire-bin)");
        let all: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).ok()?;
        all.into_iter().find_map(|o| {
            let info = o.get("info")?;
            let props = info.get("props")?;
            (props.get("node.name")?.as_str()? == name).then(|| {
                let state = info.get("state").and_then(|s| s.as_str()).unwrap_or("");
                (o["id"].as_u64().unwrap(), state.to_owned(), props.clone())
            })
        })
    }

    /// `pw-play` of the generated WAV as the user, its stream's own properties set to `props`,
    /// once its node runs. A player whose stream WirePlumber has not linked within 10 s is
    /// started again (three tries): on a loaded machine its policy sometimes misses a stream
    /// that appears while it is still starting — PipeWire's start, not what this test checks.
    fn play(&self, props: &str) -> Kill {
        for attempt in 1..=3 {
            let c = self
                .as_user("pw-play")
                .arg("-P")
                .arg(props)
                .arg(self.dir.path().join("tone.wav"))
                .spawn()
                .expect("pw-play (Debian package pipewire-bin)");
            let k = Kill(c);
            let end = Instant::now() + WAIT / 3;
            while Instant::now() < end {
                if self.node("pw-play").is_some_and(|n| n.1 == "running") {
                    return k;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            eprintln!(
                "pw-play not running after {:?} (try {attempt} of 3)",
                WAIT / 3
            );
            drop(k);
            wait_until("the stopped player's node gone", WAIT, || {
                self.node("pw-play").is_none()
            });
        }
        panic!("pw-play never ran in three tries: is WirePlumber linking streams?");
    }
}

/// A 48 kHz stereo 16-bit WAV of `secs` seconds of a quiet tone.
fn write_wav(path: &Path, secs: u32) {
    let frames = 48_000 * secs;
    let data = frames * 4;
    let mut b = Vec::with_capacity(44 + data as usize);
    b.extend_from_slice(b"RIFF");
    b.extend_from_slice(&(36 + data).to_le_bytes());
    b.extend_from_slice(b"WAVEfmt ");
    for v in [16u32, 1 | (2 << 16), 48_000, 48_000 * 4, 4 | (16 << 16)] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(b"data");
    b.extend_from_slice(&data.to_le_bytes());
    for i in 0..frames {
        let s = ((i as f64 * 440.0 * std::f64::consts::TAU / 48_000.0).sin() * 2000.0) as i16;
        b.extend_from_slice(&s.to_le_bytes());
        b.extend_from_slice(&s.to_le_bytes());
    }
    std::fs::write(path, b).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
}

/// A sleeping process of the user: what a forged id names.
fn victim() -> Kill {
    let c = Command::new("sleep")
        .arg("600")
        .current_dir("/")
        .uid(USER)
        .gid(USER)
        .spawn()
        .unwrap();
    Kill(c)
}

/// The pids `status` lists as audible.
fn audible(d: &Daemon) -> Vec<i32> {
    d.status()
        .audible
        .iter()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

/// pw-play's threads: its main thread and the one data-loop thread (libpipewire 0.3 leaves it
/// named as the process; 1.2 and later call it `data-loop.0`).
fn data_thread(pid: i32) -> i32 {
    let others: Vec<i32> = tids(pid).into_iter().filter(|&t| t != pid).collect();
    assert_eq!(others.len(), 1, "pw-play's threads: {:?}", tids(pid));
    others[0]
}

#[test]
#[ignore = "needs root: make test runs it as root"]
fn a_playing_clients_audio_thread_is_protected_until_its_stream_stops_or_it_exits() {
    require_root();
    let _serial = serial();
    ordinary();
    let stack = Stack::start();
    // This test binary's only test; the daemon children read it (the stand-in logind's bus).
    std::env::set_var("DBUS_SYSTEM_BUS_ADDRESS", &stack.bus.address);
    let victim = victim();
    let forged = format!(
        "{{ application.process.id = {v} pipewire.sec.pid = {v} }}",
        v = victim.0.id()
    );
    // First a player that exits while playing.
    let first = stack.play(&forged);
    let first_pid = first.0.id() as i32;
    let node = stack.node("pw-play").unwrap();
    let v = victim.0.id() as u64;
    assert_eq!(node.2["application.process.id"].as_u64(), Some(v), "forged");
    assert_eq!(node.2["pipewire.sec.pid"].as_u64(), Some(v), "forged");
    let victim_before = snapshot(&tids(victim.0.id() as i32));
    let main_before = snapshot(&[first_pid]);
    let data = data_thread(first_pid);
    let data_before = snapshot(&[data]).remove(0);
    let mut d = Daemon::start("uxsched", "");
    wait_until("pw-play audible", WAIT, || audible(&d) == [first_pid]);
    wait_until("its data thread protected", WAIT, || {
        let a = attr(data);
        (a.nice, a.runtime) == (-5, 100_000)
    });
    assert!(
        all_restored(&main_before),
        "pw-play's main thread untouched"
    );
    assert!(
        all_restored(&victim_before),
        "the forged pid's process untouched"
    );
    let shown = d.status().audible.join("\n");
    assert!(shown.contains(&format!("audio thread {data}")), "{shown}");
    drop(first);
    wait_until("the exited player unlisted", WAIT, || {
        audible(&d).is_empty()
    });
    wait_until("its journal rows gone", WAIT, || {
        d.status().boosted.is_empty()
    });

    // A player whose audio thread is real-time already (as rtkit makes it): listed, left as it
    // is. Made FIFO while no daemon runs, so the daemon never saw it fair.
    d.stop(libc::SIGTERM);
    let rt_player = stack.play(&forged);
    let rt_pid = rt_player.0.id() as i32;
    let rt_data = data_thread(rt_pid);
    let chrt = Command::new("chrt")
        .args(["-f", "-p", "1", &rt_data.to_string()])
        .status()
        .expect("chrt (util-linux)");
    assert!(chrt.success());
    let rt_before = snapshot(&tids(rt_pid));
    d.spawn();
    wait_until("the real-time player audible", WAIT, || {
        audible(&d) == [rt_pid]
    });
    std::thread::sleep(Duration::from_millis(500)); // passes every 50 ms
    assert!(
        all_restored(&rt_before),
        "a real-time audio thread is left as it is"
    );
    assert!(d.status().boosted.is_empty());
    drop(rt_player);
    wait_until("the real-time player unlisted", WAIT, || {
        audible(&d).is_empty()
    });

    // Then a player whose stream stops while it lives: its sink is removed, the node idles.
    let second = stack.play(&forged);
    let pid = second.0.id() as i32;
    // The daemon boosts it at once: its data thread's original is what the first player's
    // was before the daemon ran (the same program of the same user).
    let data = data_thread(pid);
    let main_before = snapshot(&[pid]);
    let mut before = main_before.clone();
    before.push((data, data_before.1, data_before.2.clone(), data_before.3));
    wait_until("the second player audible", WAIT, || audible(&d) == [pid]);
    wait_until("its data thread protected", WAIT, || {
        attr(data).runtime == 100_000
    });
    assert_eq!(attr(data).nice, -5);
    assert!(all_restored(&main_before), "the main thread untouched");
    let sink = stack.node(SINK).unwrap().0;
    let status = stack
        .as_user("pw-cli")
        .args(["destroy", &sink.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "pw-cli destroy {sink}");
    wait_until("the stream idle", WAIT, || {
        stack.node("pw-play").is_some_and(|n| n.1 != "running")
    });
    wait_until("the idle player unlisted", WAIT, || audible(&d).is_empty());
    assert_restored("the paused player's threads", &before);
    assert!(
        all_restored(&victim_before),
        "the forged pid's process untouched"
    );

    // The server goes away: the daemon keeps running and lists nothing.
    let mut stack = stack;
    stack.wireplumber.take();
    stack.pipewire.take();
    let end = Instant::now() + Duration::from_secs(2);
    while Instant::now() < end {
        assert!(audible(&d).is_empty());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(d.status().mode, "uxsched");
}
