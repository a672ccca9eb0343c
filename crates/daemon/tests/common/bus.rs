//! A private system-type `dbus-daemon` for the D-Bus tests (rtkit's interface, the auto source's
//! stand-in logind), with an open policy: the tests check the daemon's own rules, not the bus's.
//! Its directory is 0755 so that processes of other users (`nobody`) can reach the socket.
//! Killed on drop.

use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct SystemBus {
    child: Child,
    _dir: tempfile::TempDir,
    /// The bus's D-Bus address (`unix:path=…`).
    pub address: String,
}

impl SystemBus {
    pub fn start() -> SystemBus {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let socket = dir.path().join("bus");
        let config = dir.path().join("bus.conf");
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
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
        let mut child = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--nopidfile", "--nosyslog"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("dbus-daemon (Debian package dbus-daemon; scripts/setup.sh installs it)");
        let end = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            if Instant::now() > end || child.try_wait().ok().flatten().is_some() {
                let _ = child.kill();
                panic!("the private bus did not create {}", socket.display());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        SystemBus {
            child,
            address: format!("unix:path={}", socket.display()),
            _dir: dir,
        }
    }
}

impl Drop for SystemBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
