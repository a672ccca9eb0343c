//! Exit codes (VISION conventions): 0 success, 2 bad input the user can fix, 1 runtime failure.

use std::process::ExitCode;

/// An error in what the user gave us (file, option, request). Exits with code 2.
#[derive(Debug)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// Shorthand for returning a [`BadInput`] error.
pub fn bad_input(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput(msg.into()))
}

/// Print an error chain to stderr and choose the exit code.
pub fn report(e: &anyhow::Error) -> ExitCode {
    eprintln!("uxsched: error: {e:#}");
    // The shared run path (crates/simrun) marks its own input errors.
    if e.chain()
        .any(|c| c.is::<BadInput>() || c.is::<uxsched_simrun::BadInput>())
    {
        ExitCode::from(2)
    } else {
        ExitCode::from(1)
    }
}
