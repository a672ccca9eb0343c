//! `uxsched` commands of the daemon face (filled in by its issue).

use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Commands {}

pub fn run(c: Commands) -> anyhow::Result<ExitCode> {
    match c {}
}
