//! Memory pressure: stress-ng `--vm` workers that repeatedly fault in, write and check 256 MiB
//! each (page-fault and memory-bandwidth pressure, not an OOM test on a shared machine).

use super::{stress_ng_rate, LoadSpec, Tool};
use anyhow::Result;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

pub struct StressVm;

impl Tool for StressVm {
    fn command(&self, spec: &LoadSpec, out: &Path) -> Command {
        let mut c = Command::new("stress-ng");
        c.args(["--vm", &spec.workers.to_string(), "--vm-bytes", "256M"])
            .args(["--timeout", "1h", "--metrics-brief", "--yaml"])
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
