//! `uxsched sim …`: run workloads in the simulator.

use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum SimCommand {
    /// Check that a workload file parses (temporary until `run` lands).
    Check { workload: std::path::PathBuf },
}

pub fn run(c: SimCommand) -> anyhow::Result<ExitCode> {
    match c {
        SimCommand::Check { workload } => Err(crate::exit::bad_input(format!(
            "{}: the simulator engine is not built yet",
            workload.display()
        ))),
    }
}
