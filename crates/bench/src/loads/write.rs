//! `write`: sequential buffered writers, like a copy or a system update — each fio job writes a
//! large file 1 MiB at a time through the page cache, fsyncs every 256 MiB and at the end,
//! deletes it and starts again (`unlink_each_loop`). The dirty pages go to the disk by the
//! kernel's writeback, which is what stalls the desktop's reads and fsyncs (issue 33). Files
//! live in the scratch directory, on the same filesystem as the app's files. Each file's size
//! is scaled to the free space and the load refuses to start rather than fill the disk.

use super::{LoadSpec, Tool};
use crate::models::xapp::AppUser;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A file never larger than this (the writers copied 3 GB files; 2 GiB keeps a run's
/// footprint modest while far larger than the dirty-page limits).
const MAX_FILE: u64 = 2 << 30;
/// Below this a file is written back within one dirty-expire interval and stops being a copy.
const MIN_FILE: u64 = 256 << 20;
/// Never use more than this share of the free space.
const FREE_SHARE: u64 = 4;
/// fsync after this many 1 MiB blocks (fio's `--fsync`).
const FSYNC_EVERY_MIB: u64 = 256;

pub struct SequentialWriters;

/// Where the writers' files live (removed whole at stop).
pub fn data_dir(spec: &LoadSpec) -> PathBuf {
    spec.scratch.join("write-load")
}

/// Each writer's file size: a quarter of the free space shared among the writers, at most
/// [`MAX_FILE`], rounded down to whole MiB; an error if that is under [`MIN_FILE`].
pub fn file_size(free: u64, workers: usize) -> Result<u64> {
    let workers = workers.max(1) as u64;
    let size = (free / FREE_SHARE / workers).min(MAX_FILE) >> 20 << 20;
    if size < MIN_FILE {
        bail!(
            "background load 'write' needs {} MiB free per writer ×4 (it uses at most a quarter of the free space) but the scratch filesystem has {} MiB free: free some space or pass fewer --load-workers",
            MIN_FILE >> 20,
            free >> 20
        );
    }
    Ok(size)
}

fn sized(spec: &LoadSpec) -> Result<u64> {
    std::fs::create_dir_all(&spec.scratch)?;
    let free = uxsched_os::block::available_bytes(&spec.scratch)
        .with_context(|| format!("statvfs of {}", spec.scratch.display()))?;
    file_size(free, spec.workers)
}

/// Checked once before any mode runs, so a full disk is refused at once.
pub fn prepare(spec: &LoadSpec) -> Result<()> {
    sized(spec).map(|_| ())
}

/// Remove the writers' files (fio unlinks them when it stops cleanly; this covers a kill).
pub fn clean(spec: &LoadSpec) -> Result<()> {
    let dir = data_dir(spec);
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing the write load's files in {}", dir.display()))
        }
        _ => Ok(()),
    }
}

impl Tool for SequentialWriters {
    fn before_start(&self, spec: &LoadSpec, out: &Path, user: &AppUser) -> Result<()> {
        // Sized again per run: the free space may have shrunk since prepare.
        let size = sized(spec)?;
        user.own_dir(&data_dir(spec))?;
        std::fs::write(out.join("file-size"), size.to_string())?;
        Ok(())
    }

    fn command(&self, spec: &LoadSpec, out: &Path) -> Command {
        let size = std::fs::read_to_string(out.join("file-size"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(MIN_FILE);
        let mut c = Command::new("fio");
        c.args(["--name=uxsched-write", "--rw=write", "--bs=1M"])
            .args(["--ioengine=psync", "--direct=0", "--end_fsync=1"])
            .arg(format!("--fsync={FSYNC_EVERY_MIB}"))
            .arg(format!("--size={}M", size >> 20))
            // A new file per loop, as a copy makes; bounded by the run, not the loop count.
            .args(["--loops=1000000", "--unlink_each_loop=1", "--unlink=1"])
            .arg("--runtime=3600")
            .arg(format!("--numjobs={}", spec.workers))
            .arg(format!("--directory={}", data_dir(spec).display()))
            .arg("--group_reporting")
            .arg("--output-format=json")
            .arg(format!("--output={}", out.join("report.json").display()));
        c
    }

    /// Bytes written per second over fio's run (into the page cache and, by fsync and
    /// writeback, the disk: over seconds of a run the two meet).
    fn throughput(&self, _: &LoadSpec, out: &Path, _: Duration) -> Result<f64> {
        let text = std::fs::read_to_string(out.join("report.json"))?;
        let json = &text[text.find('{').context("no JSON object in fio's report")?..];
        let v: serde_json::Value = serde_json::from_str(json)?;
        let jobs = v["jobs"].as_array().context("fio report has no jobs")?;
        let bps: f64 = jobs
            .iter()
            .filter_map(|j| j["write"]["bw_bytes"].as_f64())
            .sum();
        if bps <= 0.0 {
            bail!("fio's report shows no bytes written");
        }
        Ok(bps)
    }

    fn after_stop(&self, spec: &LoadSpec) -> Result<()> {
        clean(spec)
    }

    fn unit(&self) -> &'static str {
        "written bytes/s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_size_is_a_quarter_of_free_space_capped_and_refused_when_small() {
        assert_eq!(file_size(100 << 30, 2).unwrap(), MAX_FILE);
        assert_eq!(file_size(4 << 30, 2).unwrap(), 512 << 20);
        let err = file_size(1 << 30, 2).unwrap_err().to_string();
        assert!(err.contains("1024 MiB free"), "{err}");
    }
}
