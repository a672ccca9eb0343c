//! A model process on its own, for the harness's tests (the `uxsched` binary ships the same
//! code as its hidden `bench-model` command, so one binary is enough in production).

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: uxsched_bench::models::ModelArgs,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match uxsched_bench::models::run_model(&cli.args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uxsched-bench-model: error: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
