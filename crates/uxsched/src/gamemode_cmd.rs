//! `uxsched gamemode-bridge`: the per-user relay that lets Feral GameMode's clients (Steam,
//! Lutris, `gamemoderun`) drive uxsched unchanged. D-Bus starts it as the session's user on a
//! client's first call (packaging/dbus/com.feralinteractive.GameMode.service); it owns
//! `com.feralinteractive.GameMode` on the session bus and relays every call to the daemon on the
//! system bus (`uxsched_daemon::sources::dbus::bridge`, docs/api.md "GameMode and
//! system76-scheduler clients"). Not meant to be run by hand but for a check: it says why it
//! cannot serve (gamemoded owns the name; the daemon does not serve GameMode) and exits 1.

use std::process::ExitCode;

/// Relay GameMode's session-bus interface to the uxsched daemon until the session bus ends.
pub fn run() -> anyhow::Result<ExitCode> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    uxsched_daemon::sources::dbus::bridge::run().map_err(|e| anyhow::anyhow!(e))?;
    Ok(ExitCode::SUCCESS)
}
