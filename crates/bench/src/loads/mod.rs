//! Background loads: the real tools (stress-ng, hackbench, fio, a kernel build), each started
//! where the layout puts it (`crate::layout`: by default its own session, like a background
//! service, so autogroup gives it its own group) and each reporting its own throughput, which
//! is the background cost. Every exit path kills the whole load ([`RunningLoad`]'s `Drop`).
//!
//! A load runs as the bench's unprivileged user ([`AppUser`]), as a user's build, copy or
//! update does: root's processes are a configuration no desktop user has, and a daemon may
//! treat them otherwise (uxsched never acts on root's processes). What the tool writes (its
//! report, the writers' files, the kernel tree) is that user's.

mod cpu;
mod hackbench;
mod io;
pub mod kbuild;
mod memory;
pub mod write;

use crate::layout::Placement;
use crate::models::xapp::AppUser;
use crate::sys;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadKind {
    /// stress-ng CPU hogs (seed 000's CPUGenerator).
    Cpu,
    /// hackbench groups at nice 10 (rt-tests): many short wake-ups.
    Hackbench,
    /// fio 4 KiB random direct reads (seed 001's IOGenerator).
    Io,
    /// stress-ng virtual-memory workers (page faults, memory bandwidth).
    Memory,
    /// A real compile: `make -j<2×CPUs>` of the Linux kernel (Debian's linux-source-6.12).
    Kbuild,
    /// fio sequential buffered writers with periodic fsync, like a copy or an update.
    Write,
}

impl LoadKind {
    pub fn name(self) -> &'static str {
        match self {
            LoadKind::Cpu => "cpu",
            LoadKind::Hackbench => "hackbench",
            LoadKind::Io => "io",
            LoadKind::Memory => "memory",
            LoadKind::Kbuild => "kbuild",
            LoadKind::Write => "write",
        }
    }

    /// The Debian package that ships the tool (named in errors).
    fn tool(self) -> (&'static str, &'static str) {
        match self {
            LoadKind::Cpu | LoadKind::Memory => ("stress-ng", "stress-ng"),
            LoadKind::Hackbench => ("hackbench", "rt-tests"),
            LoadKind::Io | LoadKind::Write => ("fio", "fio"),
            LoadKind::Kbuild => ("make", "make"),
        }
    }

    /// Default number of workers: 3× the CPU count for CPU hogs (the default).
    pub fn default_workers(self) -> usize {
        match self {
            LoadKind::Cpu => 3 * sys::cpu_count(),
            LoadKind::Hackbench => 2,
            LoadKind::Io => 4,
            LoadKind::Memory => sys::cpu_count(),
            LoadKind::Kbuild => 2 * sys::cpu_count(),
            // The measurement: two writers copying large files.
            LoadKind::Write => 2,
        }
    }
}

/// `--load`: one load, or two run at once joined by `+` (`cpu+write`: seed 003's Table 8, CPU
/// and I/O contention together).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadChoice {
    pub first: LoadKind,
    pub second: Option<LoadKind>,
}

impl LoadChoice {
    /// `cpu`, or `cpu+write`; an error naming the value for an unknown name, a load named
    /// twice or more than two.
    pub fn parse(value: &str) -> Result<LoadChoice> {
        use clap::ValueEnum;
        let names: Vec<&str> = value.split('+').map(str::trim).collect();
        let known = || {
            LoadKind::value_variants()
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut kinds = Vec::new();
        for name in &names {
            let Ok(kind) = LoadKind::from_str(name, true) else {
                bail!("--load '{value}': unknown load '{name}'; the loads are {}, or two of them joined by '+' (cpu+write)", known());
            };
            if kinds.contains(&kind) {
                bail!("--load '{value}' names load '{name}' twice: two loads at once must be two different loads (e.g. cpu+write); for more of one, raise --load-workers");
            }
            kinds.push(kind);
        }
        match kinds[..] {
            [first] => Ok(LoadChoice {
                first,
                second: None,
            }),
            [first, second] => Ok(LoadChoice {
                first,
                second: Some(second),
            }),
            _ => bail!(
                "--load '{value}' names {} loads; at most two run at once (e.g. cpu+write)",
                kinds.len()
            ),
        }
    }

    /// `cpu` or `cpu+write`, as given.
    pub fn name(self) -> String {
        match self.second {
            Some(second) => format!("{}+{}", self.first.name(), second.name()),
            None => self.first.name().to_owned(),
        }
    }
}

/// What to start: which tool, how many workers, and where it may write.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    pub kind: LoadKind,
    pub workers: usize,
    pub scratch: PathBuf,
}

/// How a tool is started, stopped and read (one implementation per file).
trait Tool {
    fn command(&self, spec: &LoadSpec, out: &Path) -> Command;
    /// Per-run setup before the tool starts (not counted in its time); what it creates for
    /// the tool to write to must be `user`'s.
    fn before_start(&self, _spec: &LoadSpec, _out: &Path, _user: &AppUser) -> Result<()> {
        Ok(())
    }
    /// Whether the stop signal goes to the load's whole process group, not only its leader.
    fn stop_whole_group(&self) -> bool {
        false
    }
    /// Ask the tool to finish and report (SIGINT makes stress-ng and fio print their metrics).
    fn stop_signal(&self) -> i32 {
        libc::SIGINT
    }
    /// Throughput over the run, from the files in `out` (the tool's stdout is `out/stdout`).
    fn throughput(&self, spec: &LoadSpec, out: &Path, elapsed: Duration) -> Result<f64>;
    /// Remove what the tool left on disk once it is stopped (or killed).
    fn after_stop(&self, _spec: &LoadSpec) -> Result<()> {
        Ok(())
    }
    fn unit(&self) -> &'static str;
}

fn tool_for(kind: LoadKind) -> Box<dyn Tool> {
    match kind {
        LoadKind::Cpu => Box::new(cpu::StressCpu),
        LoadKind::Hackbench => Box::new(hackbench::Hackbench),
        LoadKind::Io => Box::new(io::FioRandRead),
        LoadKind::Memory => Box::new(memory::StressVm),
        LoadKind::Kbuild => Box::new(kbuild::KernelBuild::from_env()),
        LoadKind::Write => Box::new(write::SequentialWriters),
    }
}

/// The background load's measured cost figure.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Throughput {
    pub value: f64,
    pub unit: String,
    /// The load's CPU time over its run, as a share of one CPU (%): what it received, where
    /// `value` also moves with how much work each CPU second did (stress-ng's `--cpu-method
    /// all` cycles through methods of unequal cost). Absent in reports from before.
    #[serde(default)]
    pub cpu_pct: Option<f64>,
}

/// A started load. Dropping it kills its whole session.
pub struct RunningLoad {
    spec: LoadSpec,
    tool: Box<dyn Tool>,
    child: Option<Child>,
    out: PathBuf,
    started: Instant,
}

/// Create per-load files before any mode runs (fio's data file takes seconds to lay out).
pub fn prepare(spec: &LoadSpec) -> Result<()> {
    let (bin, pkg) = spec.kind.tool();
    if which(bin).is_none() {
        bail!("background load '{}' needs `{bin}` (Debian package {pkg}): run `make setup` or `apt-get install {pkg}`", spec.kind.name());
    }
    match spec.kind {
        LoadKind::Io => io::prepare(spec)?,
        LoadKind::Kbuild => kbuild::KernelBuild::from_env().prepare(&AppUser::ensure()?)?,
        LoadKind::Write => write::prepare(spec)?,
        _ => {}
    }
    Ok(())
}

/// Start the load where the layout says (its own session, or only its own process group in
/// the app's session; and the layout's cgroup, joined before exec so every child is in it),
/// as the bench's unprivileged user.
pub fn start(spec: &LoadSpec, out: &Path, place: &Placement) -> Result<RunningLoad> {
    let user = AppUser::ensure()?;
    user.own_dir(out)?;
    if let Some(parent) = out.parent() {
        user.check_reachable(parent)?;
    }
    let tool = tool_for(spec.kind);
    tool.before_start(spec, out, &user)
        .with_context(|| format!("preparing a run of background load '{}'", spec.kind.name()))?;
    let mut cmd = tool.command(spec, out);
    // Its own directory: stress-ng refuses a working directory it cannot write (the harness's
    // is root's).
    cmd.current_dir(out);
    let stdout = std::fs::File::create(out.join("stdout"))?;
    let stderr = std::fs::File::create(out.join("stderr"))?;
    cmd.stdin(Stdio::null()).stdout(stdout).stderr(stderr);
    // The child leads a new session or process group, so its pid names the whole load and
    // `kill_session` reaches everything it forks.
    let (own_session, fd) = (place.own_session, place.cgroup_fd());
    // SAFETY: the closure only makes async-signal-safe syscalls (sigaction, write, setsid,
    // setpgid).
    unsafe {
        cmd.pre_exec(move || {
            // The load is stopped with SIGINT: a harness started as a background job of a
            // non-interactive shell inherits SIGINT ignored (POSIX), and so would the load.
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Placement::enter_in_child(own_session, fd)
        });
    }
    // Registered after the placement, which therefore still runs as root.
    user.run_as(&mut cmd, &out.join("home"))?;
    let child = crate::leftovers::spawn(&mut cmd)
        .with_context(|| format!("starting background load '{}'", spec.kind.name()))?;
    let load = RunningLoad {
        spec: spec.clone(),
        tool,
        child: Some(child),
        out: out.to_owned(),
        started: Instant::now(),
    };
    Ok(load)
}

impl RunningLoad {
    pub fn kind(&self) -> LoadKind {
        self.spec.kind
    }

    /// The leader's pid = its session or process group id, which modes use to find the
    /// background processes ([`sys::load_members`]).
    pub fn leader(&self) -> i32 {
        self.child.as_ref().map_or(0, |c| c.id() as i32)
    }

    /// Stop the load, wait for its report, and return its throughput.
    pub fn stop(mut self) -> Result<Throughput> {
        let mut child = self.child.take().context("load already stopped")?;
        let sid = child.id() as i32;
        let elapsed = self.started.elapsed();
        if self.tool.stop_whole_group() {
            sys::signal(-sid, self.tool.stop_signal());
        } else {
            sys::signal(sid, self.tool.stop_signal());
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let cpu = loop {
            if let Some(cpu) = sys::try_reap(sid)? {
                break cpu;
            }
            if Instant::now() > deadline {
                sys::kill_session(sid);
                let _ = child.wait();
                bail!(
                    "background load '{}' did not stop within 10 s of SIGINT; killed it (leader {sid})",
                    self.spec.kind.name()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if self.tool.stop_whole_group() {
            // The leader may exit before the rest of its group has finished stopping (make
            // deleting half-written objects): wait for them, bounded, before the SIGKILL.
            let deadline = Instant::now() + Duration::from_secs(5);
            while !sys::load_members(sid).is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        sys::kill_session(sid);
        self.tool.after_stop(&self.spec)?;
        let value = self
            .tool
            .throughput(&self.spec, &self.out, elapsed)
            .with_context(|| {
                format!(
                    "reading the throughput of background load '{}' (its output is in {})",
                    self.spec.kind.name(),
                    self.out.display()
                )
            })?;
        Ok(Throughput {
            value,
            unit: self.tool.unit().to_owned(),
            cpu_pct: Some(100.0 * cpu.as_secs_f64() / elapsed.as_secs_f64().max(1e-9)),
        })
    }
}

impl Drop for RunningLoad {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            sys::kill_session(child.id() as i32);
            let _ = child.wait();
            if let Err(e) = self.tool.after_stop(&self.spec) {
                eprintln!("uxsched bench: warning: {e:#}");
            }
            if let Err(e) = crate::leftovers::settle() {
                eprintln!("uxsched bench: warning: {e:#}");
            }
        }
    }
}

pub(crate) fn which(bin: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(bin))
        .find(|p| p.is_file())
}

/// Sum of stress-ng's per-stressor `bogo-ops-per-second-real-time` in its `--yaml` report.
pub(crate) fn stress_ng_rate(yaml: &Path) -> Result<f64> {
    let text = std::fs::read_to_string(yaml)
        .with_context(|| format!("stress-ng wrote no report at {}", yaml.display()))?;
    let rates: Vec<f64> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("bogo-ops-per-second-real-time:"))
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    if rates.is_empty() {
        bail!("no bogo-ops-per-second-real-time in {}", yaml.display());
    }
    Ok(rates.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::{LoadChoice, LoadKind};

    #[test]
    fn a_load_choice_is_one_load_or_two_different_ones() {
        let one = LoadChoice::parse("write").unwrap();
        assert_eq!((one.first, one.second), (LoadKind::Write, None));
        let two = LoadChoice::parse("cpu+write").unwrap();
        assert_eq!(
            (two.first, two.second),
            (LoadKind::Cpu, Some(LoadKind::Write))
        );
        assert_eq!(two.name(), "cpu+write");
        for (bad, says) in [
            ("cpu+cpu", "names load 'cpu' twice"),
            ("cpu+disk", "unknown load 'disk'"),
            ("cpu+", "unknown load ''"),
            ("cpu+io+write", "names 3 loads"),
        ] {
            let err = LoadChoice::parse(bad).unwrap_err().to_string();
            assert!(
                err.contains(&format!("--load '{bad}'")) && err.contains(says),
                "{err}"
            );
        }
    }

    #[test]
    fn parses_stress_ng_yaml() {
        let dir = std::env::temp_dir().join(format!("uxsched-bench-yaml-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("r.yaml");
        std::fs::write(&f, "metrics:\n    - stressor: cpu\n      bogo-ops: 10\n      bogo-ops-per-second-real-time: 3414.5\n    - stressor: vm\n      bogo-ops-per-second-real-time: 0.5\n").unwrap();
        assert_eq!(super::stress_ng_rate(&f).unwrap(), 3415.0);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
