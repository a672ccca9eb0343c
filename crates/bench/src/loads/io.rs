//! fio random 4 KiB direct reads of a 256 MiB file (seed 001's IOGenerator), JSON report.

use super::{LoadSpec, Tool};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const SIZE: &str = "256M";

pub struct FioRandRead;

fn data_file(spec: &LoadSpec) -> PathBuf {
    spec.scratch.join("fio-randread.dat")
}

/// Lay the data file out once (fio would otherwise do it inside the first measured run).
pub fn prepare(spec: &LoadSpec) -> Result<()> {
    let file = data_file(spec);
    if file.metadata().map(|m| m.len()).unwrap_or(0) >= 256 << 20 {
        return Ok(());
    }
    let status = Command::new("fio")
        .args([
            "--name=layout",
            "--rw=write",
            "--bs=1M",
            &format!("--size={SIZE}"),
        ])
        .arg(format!("--filename={}", file.display()))
        .stdout(std::process::Stdio::null())
        .status()
        .context("running fio to lay out its data file")?;
    if !status.success() {
        bail!("fio could not create {} ({status})", file.display());
    }
    Ok(())
}

impl Tool for FioRandRead {
    fn command(&self, spec: &LoadSpec, out: &Path) -> Command {
        let mut c = Command::new("fio");
        c.args([
            "--name=uxsched-bg",
            "--rw=randread",
            "--bs=4k",
            "--direct=1",
        ])
        .args(["--ioengine=psync", "--time_based", "--runtime=3600"])
        .arg(format!("--size={SIZE}"))
        .arg(format!("--numjobs={}", spec.workers))
        .arg("--group_reporting")
        .arg(format!("--filename={}", data_file(spec).display()))
        .arg("--output-format=json")
        .arg(format!("--output={}", out.join("report.json").display()));
        c
    }

    fn throughput(&self, _: &LoadSpec, out: &Path, _: Duration) -> Result<f64> {
        let path = out.join("report.json");
        let text = std::fs::read_to_string(&path)?;
        // fio may print warnings before the JSON object.
        let json = &text[text.find('{').context("no JSON object in fio's report")?..];
        let v: serde_json::Value = serde_json::from_str(json)?;
        let jobs = v["jobs"].as_array().context("fio report has no jobs")?;
        Ok(jobs.iter().filter_map(|j| j["read"]["iops"].as_f64()).sum())
    }

    fn unit(&self) -> &'static str {
        "read IOPS"
    }
}
