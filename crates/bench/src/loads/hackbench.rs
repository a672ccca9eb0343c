//! hackbench (rt-tests) groups at nice 10, rerun back to back for the whole measurement.
//! Throughput = messages delivered per second of completed runs: each run sends
//! groups × 20 senders × 20 receivers × loops messages and prints `Time: S`.

use super::{LoadSpec, Tool};
use anyhow::{bail, Result};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const LOOPS: u64 = 200;
const FDS: u64 = 20;

pub struct Hackbench;

impl Tool for Hackbench {
    fn command(&self, spec: &LoadSpec, _: &Path) -> Command {
        let mut c = Command::new("nice");
        let run = format!(
            "while :; do hackbench -g {} -f {FDS} -l {LOOPS} -s 100; done",
            spec.workers
        );
        c.args(["-n", "10", "sh", "-c", &run]);
        c
    }

    /// The loop never ends on its own; its session is killed and completed runs counted.
    fn stop_signal(&self) -> i32 {
        libc::SIGKILL
    }

    fn throughput(&self, spec: &LoadSpec, out: &Path, _: Duration) -> Result<f64> {
        let text = std::fs::read_to_string(out.join("stdout"))?;
        let times: Vec<f64> = text
            .lines()
            .filter_map(|l| l.strip_prefix("Time:")?.trim().parse().ok())
            .collect();
        let total: f64 = times.iter().sum();
        if times.is_empty() || total <= 0.0 {
            bail!("hackbench completed no run (no `Time:` line in its output)");
        }
        let per_run = (spec.workers as u64 * FDS * FDS * LOOPS) as f64;
        Ok(per_run * times.len() as f64 / total)
    }

    fn unit(&self) -> &'static str {
        "msgs/s"
    }
}
