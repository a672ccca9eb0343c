//! `--ray auto|ADDRESS`: the points run as Ray tasks (docs/sweep.md). Ray is driven by a small
//! Python program compiled into this binary (python/uxsched_sweep/driver.py): it gets the points
//! as JSON lines on its stdin and streams each finished point back on its stdout; this side checks
//! each answer against the point it asked for and hands it to the same journal as the local
//! runner, so a point retried after its worker died is written once.

use super::grid::Point;
use anyhow::{anyhow, bail, Context};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use uxsched_simrun::{Job, Outcome, ENGINE};

const DRIVER: &str = include_str!("../../../../../python/uxsched_sweep/driver.py");
/// CPUs (so worker processes) of the Ray that `--ray auto` starts.
pub const LOCAL_WORKERS: usize = 2;
/// Times Ray re-runs a point whose worker died (a point's own error is not retried).
pub const MAX_RETRIES: u32 = 3;

/// One line of the driver's stdout.
#[derive(Deserialize)]
struct Answer {
    ready: Option<Ready>,
    index: Option<usize>,
    engine: Option<String>,
    outcome: Option<Outcome>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct Ready {
    cpus: usize,
}

/// What `run_all` tells the summary.
pub struct Cluster {
    pub cpus: usize,
    /// Seconds from starting the driver to Ray being ready (a local Ray's start, or joining).
    pub startup_s: f64,
}

/// Runs `todo` on Ray at `address`, handing each result to `done` as it arrives.
pub fn run_all<'p>(
    address: &str,
    todo: &[&'p Point],
    job: impl Fn(&Point) -> Job + Sync,
    mut done: impl FnMut(&'p Point, anyhow::Result<Outcome>) -> anyhow::Result<()>,
) -> anyhow::Result<Cluster> {
    let started = std::time::Instant::now();
    if todo.is_empty() {
        // A finished sweep `--resume`d: no reason to start or join a Ray.
        return Ok(Cluster {
            cpus: 0,
            startup_s: 0.0,
        });
    }
    let python = std::env::var("UXSCHED_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut cmd = Command::new(&python);
    cmd.args(["-c", DRIVER, "--address", address])
        .args(["--workers", &LOCAL_WORKERS.to_string()])
        .args(["--max-retries", &MAX_RETRIES.to_string()])
        .args(["--engine", ENGINE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    // SAFETY: prctl is async-signal-safe; it only asks for SIGTERM when this process dies, so
    // that the driver shuts its local Ray down instead of leaving it running.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    let mut child = cmd.spawn().with_context(|| {
        format!("--ray: starting {python} (Python 3 with Ray: run scripts/setup.sh, or set UXSCHED_PYTHON)")
    })?;
    let mut stdin = child.stdin.take().expect("piped");
    let stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut pending: BTreeMap<usize, &'p Point> = todo.iter().map(|p| (p.index, *p)).collect();
    let mut cluster = Cluster {
        cpus: 0,
        startup_s: 0.0,
    };
    let pid = child.id() as libc::pid_t;
    let read = std::thread::scope(|s| {
        let job = &job;
        s.spawn(move || {
            for p in todo {
                let line = serde_json::to_string(&job(p)).expect("a job serialises");
                // The driver gone: its exit status says why; the reader reports it.
                if writeln!(stdin, "{line}").is_err() {
                    break;
                }
            }
        });
        for line in stdout.lines() {
            let line = line.context("--ray: reading the driver's answers")?;
            let a: Answer = serde_json::from_str(&line)
                .with_context(|| format!("--ray: the driver said something unexpected: {line}"))?;
            if let Some(r) = a.ready {
                cluster = Cluster {
                    cpus: r.cpus,
                    startup_s: started.elapsed().as_secs_f64(),
                };
                continue;
            }
            let Some(index) = a.index else {
                bail!("--ray: an answer without a point: {line}")
            };
            let Some(p) = pending.remove(&index) else {
                eprintln!("uxsched: --ray: a second answer for point {index} ignored");
                continue;
            };
            if let Err(e) = done(p, check(p, a)) {
                stop(pid);
                return Err(e);
            }
        }
        anyhow::Ok(())
    });
    if let Err(e) = read {
        stop(pid);
        let _ = child.wait();
        return Err(e);
    }
    let status = child.wait()?;
    if !status.success() {
        bail!(
            "--ray: the Ray driver ({python}) failed ({status}); its messages are above{}",
            if status.code() == Some(3) {
                ""
            } else {
                "; finish with --resume"
            }
        );
    }
    for p in pending.into_values() {
        done(
            p,
            Err(anyhow!(
                "point {} ({}) never came back from Ray",
                p.index,
                p.id
            )),
        )?;
    }
    Ok(cluster)
}

/// SIGTERM, not SIGKILL: the driver then shuts its local Ray down (and stops reading, which
/// frees the thread writing the points).
fn stop(pid: libc::pid_t) {
    // SAFETY: a plain kill(2) of our own child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
}

/// The point's outcome, if it is this point's, from a wheel built from this binary's engine.
fn check(p: &Point, a: Answer) -> anyhow::Result<Outcome> {
    let context = || format!("point {} ({})", p.index, p.id);
    if let Some(e) = a.error {
        return Err(anyhow!(e)).with_context(context);
    }
    let (Some(engine), Some(o)) = (a.engine, a.outcome) else {
        return Err(anyhow!("no outcome in the driver's answer")).with_context(context);
    };
    if engine != ENGINE {
        return Err(anyhow!(
            "the worker's uxsched_sweep wheel was built from other engine sources ({engine}; \
             this binary: {ENGINE}): build the wheel from this tree and install it on every worker (docs/sweep.md)"
        ))
        .with_context(context);
    }
    if o.index != p.index || o.id != p.id {
        return Err(anyhow!("the answer is point {} ({})", o.index, o.id)).with_context(context);
    }
    Ok(o)
}
