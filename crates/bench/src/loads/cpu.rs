//! stress-ng CPU hogs: `--cpu N`, throughput in bogo-ops/s (real time).

use super::{stress_ng_rate, LoadSpec, Tool};
use anyhow::Result;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

pub struct StressCpu;

impl Tool for StressCpu {
    fn command(&self, spec: &LoadSpec, out: &Path) -> Command {
        let mut c = Command::new("stress-ng");
        c.args([
            "--cpu",
            &spec.workers.to_string(),
            "--timeout",
            "1h",
            "--metrics-brief",
        ])
        .arg("--yaml")
        .arg(out.join("report.yaml"));
        c
    }

    fn throughput(&self, _: &LoadSpec, out: &Path, _: Duration) -> Result<f64> {
        stress_ng_rate(&out.join("report.yaml"))
    }

    fn unit(&self) -> &'static str {
        "bogo-ops/s"
    }
}
