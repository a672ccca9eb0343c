//! `uxsched`: one binary, three faces — the simulator (`sim`), the on-device manager
//! (`daemon` and its clients) and the real-kernel harness (`bench`, `demo`). This file is only
//! glue: each face's commands live in their own module over their own library crate.

mod bench_cmd;
mod daemon_cmd;
mod exit;
mod gamemode_cmd;
mod rt_cmd;
mod scx_cmd;
mod sim_cmd;
mod tracker_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Keep a Linux device responsive to its user under heavy background load.
///
/// See README.md for the set-up commands, docs/architecture.md for the map.
#[derive(Parser)]
#[command(name = "uxsched", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Deterministic simulator of Linux scheduling and the seed papers' mechanisms.
    #[command(subcommand)]
    Sim(sim_cmd::SimCommand),
    #[command(flatten)]
    Daemon(daemon_cmd::Commands),
    #[command(flatten)]
    Bench(bench_cmd::Commands),
    /// The delay-critical thread tracker: learned decisions, and the tracker on a live process.
    #[command(subcommand)]
    Tracker(tracker_cmd::TrackerCommand),
    /// Ask the daemon for real time, a nice level or a latency slice (docs/api.md), e.g.
    /// `uxsched rt realtime --priority 10 -- CMD…`.
    #[command(subcommand)]
    Rt(rt_cmd::RtCommand),
    /// The sched_ext scheduler (Linux >= 6.12): VT-CFS, MCFS or FA-CFS with the boost classes,
    /// e.g. `uxsched scx run --policy mcfs` (docs/scx.md).
    #[command(subcommand)]
    Scx(scx_cmd::ScxCommand),
    /// Relay Feral GameMode's session-bus interface to the daemon (started by D-Bus activation
    /// as the session's user; packaging/dbus/com.feralinteractive.GameMode.service).
    GamemodeBridge,
    /// Write the man pages (uxsched.1 and one per subcommand, roff) into DIR: scripts/deb.sh.
    #[command(hide = true)]
    Manpages { dir: std::path::PathBuf },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let result = match cli.command {
        Command::Sim(c) => sim_cmd::run(c),
        Command::Daemon(c) => daemon_cmd::run(c),
        Command::Bench(c) => bench_cmd::run(c),
        Command::Tracker(c) => tracker_cmd::run(c),
        Command::Rt(c) => rt_cmd::run(c),
        Command::Scx(c) => scx_cmd::run(c),
        Command::GamemodeBridge => gamemode_cmd::run(),
        Command::Manpages { dir } => write_manpages(&dir),
    };
    match result {
        Ok(code) => code,
        Err(e) => exit::report(&e),
    }
}

/// `uxsched manpages DIR`: the pages of every visible command, from the clap definitions above.
fn write_manpages(dir: &std::path::Path) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(dir)?;
    clap_mangen::generate_to(<Cli as clap::CommandFactory>::command(), dir)?;
    Ok(ExitCode::SUCCESS)
}
