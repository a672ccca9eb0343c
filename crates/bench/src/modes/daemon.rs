//! The uxsched modes: the harness starts `uxsched daemon --config FILE --mode MODE` as a child
//! with a private socket and journal, waits until `uxsched status --json` answers, tells it the
//! foreground with `uxsched focus <pid>`, and on restore stops it with SIGTERM (the daemon
//! restores what it changed from its journal) and waits for it. Variants of a daemon mode
//! (`uxsched-roles`, `uxsched-fair`, `uxsched-cpu` …) run the same daemon mode with a few configuration keys of their own
//! ([`daemon_config`]), so one lever can be compared against the same daemon.

use super::{Mode, ModeEnv, ModeName, Targets};
use crate::sys;
use anyhow::{bail, Context, Result};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const READY_TIMEOUT: Duration = Duration::from_secs(10);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether this uxsched binary has the daemon (`uxsched daemon --help` succeeds).
pub fn daemon_available(exe: Option<&Path>) -> bool {
    exe.is_some_and(|exe| {
        Command::new(exe)
            .args(["daemon", "--help"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// The daemon's `--mode` for a bench mode, and the configuration the bench mode sets itself
/// (TOML, merged into the user's `--daemon-config`).
fn variant(mode: ModeName) -> (&'static str, &'static str) {
    match mode {
        ModeName::UxschedRoles => ("uxsched", "[tracker]\nenabled = false\n"),
        ModeName::UxschedFair => ("uxsched", "[tracker]\nlever = \"fair\"\n"),
        ModeName::UxschedCpu => (
            "uxsched",
            "[storage]\nfront_class = \"off\"\nlaunch_budget_ms = 0\n",
        ),
        ModeName::UxschedNoIoprio => ("uxsched", "[storage]\nfront_class = \"off\"\n"),
        ModeName::UxschedIo => ("uxsched", "cpu_levers = false\n"),
        ModeName::UxschedBfq => ("uxsched", "[storage]\nswitch_to_bfq = true\n"),
        ModeName::EimosNoPrefetch => ("eimos", "[eimos]\nprefetch = false\n"),
        // Never told the foreground (`rtapi.rs`), so the mode's policy changes nothing.
        ModeName::Rtapi => ("mcfs", "[rtapi]\nenabled = true\n"),
        other => (other.name(), ""),
    }
}

/// The daemon configuration a bench mode runs with: the user's extra configuration (`extra`,
/// TOML) with the mode's own keys merged in. A key the user set to another value than the
/// mode's is an error that names it: the mode would not be what it says.
pub fn daemon_config(mode: ModeName, extra: &str) -> Result<toml::Table> {
    let mut table: toml::Table = extra
        .parse()
        .context("the extra daemon configuration is not TOML")?;
    let own: toml::Table = variant(mode).1.parse().expect("built-in TOML");
    merge(&mut table, own, "", mode)?;
    Ok(table)
}

fn merge(into: &mut toml::Table, from: toml::Table, path: &str, mode: ModeName) -> Result<()> {
    for (key, value) in from {
        let name = format!("{path}{key}");
        match (into.get_mut(&key), value) {
            (Some(toml::Value::Table(sub)), toml::Value::Table(v)) => {
                merge(sub, v, &format!("{name}."), mode)?
            }
            (Some(theirs), v) if *theirs != v => bail!(
                "mode {} sets `{name} = {v}` itself; the extra daemon configuration says `{theirs}`: remove it or choose another mode",
                mode.name()
            ),
            (_, v) => {
                into.insert(key, v);
            }
        }
    }
    Ok(())
}

/// The configuration a run's daemon reads: the mode's (`daemon_config`), with its socket and
/// the tracker's learning store in the mode's scratch directory `dir` — the store unless the
/// user's extra configuration names one — and its journal in the mode's directory on tmpfs
/// `runtime`, as installed. A bench run then neither learns from nor writes into the machine's
/// store; the store is kept across the mode's repetitions, as for an app run again.
fn run_config(mut table: toml::Table, dir: &Path, runtime: &Path, socket: &Path) -> toml::Table {
    let path = |p: &Path| toml::Value::String(p.display().to_string());
    table.insert("socket".into(), path(socket));
    table.insert("journal".into(), path(&runtime.join("journal.sqlite")));
    let tracker = table
        .entry("tracker")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(tracker) = tracker {
        let store = path(&dir.join("tracker.sqlite"));
        tracker.entry("store").or_insert(store);
    }
    table
}

pub struct Daemon {
    mode: ModeName,
    /// The daemon's `--mode`.
    daemon_mode: &'static str,
    exe: PathBuf,
    dir: PathBuf,
    /// Its directory on tmpfs (the journal), `crate::runtime_dir`.
    runtime: PathBuf,
    child: Option<Child>,
    focused: bool,
    /// The configuration to run with, less `socket` and `journal` ([`daemon_config`]).
    config: toml::Table,
    /// When the daemon answered, and its CPU time then (for its share of a CPU in the run).
    started: Option<(Instant, u64)>,
    /// The tracker's thread (`uxsched-tracker`) and its CPU time when the daemon answered.
    tracker: Option<(i32, u64)>,
    /// The critical sets per keystroke as the run's last `status` gave them.
    critical_sets: Option<uxsched_client::control::CriticalSets>,
}

impl Daemon {
    pub fn new(mode: ModeName, env: &ModeEnv) -> Result<Daemon> {
        let exe = env
            .uxsched_exe
            .clone()
            .filter(|e| daemon_available(Some(e)));
        let Some(exe) = exe else {
            bail!(
                "mode '{}' needs the uxsched daemon, which this build does not have (`uxsched daemon --help` fails); choose among idle, stock, android, s76, schedqos, fifo",
                mode.name()
            );
        };
        let dir = env.scratch.join(format!("daemon-{}", mode.name()));
        let runtime = crate::runtime_dir(&env.scratch).join(format!("daemon-{}", mode.name()));
        Ok(Daemon {
            mode,
            daemon_mode: variant(mode).0,
            exe,
            dir,
            runtime,
            child: None,
            focused: false,
            config: daemon_config(mode, &env.daemon_config)?,
            started: None,
            tracker: None,
            critical_sets: None,
        })
    }

    pub(super) fn socket(&self) -> PathBuf {
        self.dir.join("uxsched.sock")
    }

    fn client(&self, args: &[&str]) -> Result<std::process::Output> {
        let socket = self.socket();
        Command::new(&self.exe)
            .args(args)
            .arg("--socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running `uxsched {}`", args.join(" ")))
    }

    fn wait_ready(&mut self) -> Result<()> {
        let start = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    bail!(
                        "uxsched daemon --mode {} (bench mode {}) exited before answering ({status}); its log is {}",
                        self.daemon_mode,
                        self.mode.name(),
                        self.dir.join("daemon.log").display()
                    );
                }
            }
            if self.client(&["status", "--json"])?.status.success() {
                return Ok(());
            }
            if start.elapsed() > READY_TIMEOUT {
                bail!(
                    "uxsched daemon --mode {} (bench mode {}) did not answer `status` on {} within {} s; its log is {}",
                    self.daemon_mode,
                    self.mode.name(),
                    self.socket().display(),
                    READY_TIMEOUT.as_secs(),
                    self.dir.join("daemon.log").display()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Mode for Daemon {
    fn prepare(&mut self) -> Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let config = self.dir.join("config.toml");
        let _ = std::fs::remove_file(self.socket());
        let table = run_config(
            self.config.clone(),
            &self.dir,
            &self.runtime,
            &self.socket(),
        );
        std::fs::write(&config, toml::to_string(&table)?)?;
        // One log per run: the previous run's is kept as `daemon.N.log` (N = its run's number
        // for this mode), so `--keep-logs` shows every repetition's daemon, not only the last.
        let log_path = self.dir.join("daemon.log");
        if log_path.exists() {
            let n = (1..)
                .find(|n| !self.dir.join(format!("daemon.{n}.log")).exists())
                .unwrap_or(0);
            std::fs::rename(&log_path, self.dir.join(format!("daemon.{n}.log")))?;
        }
        let log = std::fs::File::create(log_path)?;
        let mut cmd = Command::new(&self.exe);
        cmd.arg("daemon")
            .arg("--config")
            .arg(&config)
            .args(["--mode", self.daemon_mode])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        // A system service: a session (autogroup) of its own, not the harness's — which in
        // `same-session` is also the app's, where the daemon's own threads would share the
        // app's group and its boost.
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = crate::leftovers::spawn(&mut cmd).context("starting uxsched daemon")?;
        self.child = Some(child);
        self.wait_ready()?;
        let pid = self.child.as_ref().map_or(0, |c| c.id() as i32);
        self.started = sys::process_cpu_ns(pid).map(|cpu| (Instant::now(), cpu));
        self.tracker = uxsched_os::identity::threads(pid)
            .into_iter()
            .find(|&t| uxsched_os::identity::stat(t).is_ok_and(|s| s.comm == "uxsched-tracker"))
            .and_then(|t| Some((t, sys::task_cpu_ns(pid, t)?)));
        Ok(())
    }

    fn apply(&mut self, t: &Targets) -> Result<()> {
        let Some(app) = t.app else { return Ok(()) };
        if self.focused || t.compositor_focus {
            return Ok(());
        }
        let out = self.client(&["focus", &app.to_string()])?;
        if !out.status.success() {
            bail!(
                "`uxsched focus {app}` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        self.focused = true;
        Ok(())
    }

    /// The daemon's own cost over the run (its share of one CPU, user + system, the BPF
    /// programs' in-kernel time not included, and its tracker thread's alone; its peak RSS),
    /// its "critical → boosted" latency (the tracker's new members), µs, the rt lever's set
    /// at the run's end, and how many threads of how many processes the critical set held per
    /// keystroke ([`set_extras`]).
    fn extras(&mut self) -> std::collections::BTreeMap<String, f64> {
        let mut x = std::collections::BTreeMap::new();
        let pid = self.child.as_ref().map_or(0, |c| c.id() as i32);
        if let (Some((t0, cpu0)), Some(cpu)) = (self.started, sys::process_cpu_ns(pid)) {
            let wall = t0.elapsed().as_nanos().max(1) as f64;
            x.insert(
                "daemon_cpu_pct".into(),
                100.0 * cpu.saturating_sub(cpu0) as f64 / wall,
            );
        }
        // The tracker's userspace thread alone (issue 30 asks ≤ 1 % of a CPU while typing).
        if let (Some((t0, _)), Some((tid, cpu0))) = (self.started, self.tracker) {
            if let Some(cpu) = sys::task_cpu_ns(pid, tid) {
                let wall = t0.elapsed().as_nanos().max(1) as f64;
                let pct = 100.0 * cpu.saturating_sub(cpu0) as f64 / wall;
                x.insert("tracker_cpu_pct".into(), pct);
            }
        }
        if let Some(kib) = sys::status_kib(pid, "VmHWM") {
            x.insert("daemon_rss_mib".into(), kib as f64 / 1024.0);
        }
        let Ok(out) = self.client(&["status", "--json"]) else {
            return x;
        };
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        // The rt lever's set when the run ends: threads at SCHED_FIFO, and their processes.
        let rt: Vec<&serde_json::Value> = (status["boosted"].as_array().into_iter().flatten())
            .filter(|b| b["current"]["policy"].as_u64() == Some(libc::SCHED_FIFO as u64))
            .collect();
        if !rt.is_empty() {
            let procs: std::collections::BTreeSet<i64> =
                rt.iter().filter_map(|b| b["pid"].as_i64()).collect();
            x.insert("rt_threads_end".into(), rt.len() as f64);
            x.insert("rt_procs_end".into(), procs.len() as f64);
        }
        let l = &status["boost_latency"];
        for (key, field) in [
            ("boosted_new", "samples"),
            ("boost_p50_us", "p50_us"),
            ("boost_p99_us", "p99_us"),
        ] {
            if let Some(v) = l[field].as_f64() {
                x.insert(key.to_owned(), v);
            }
        }
        self.critical_sets = serde_json::from_value(status["critical_sets"].clone()).ok();
        if let Some(c) = &self.critical_sets {
            x.extend(set_extras(c));
        }
        x
    }

    fn critical_sets(&mut self) -> Option<uxsched_client::control::CriticalSets> {
        self.critical_sets.take()
    }

    fn restore(&mut self) -> Result<()> {
        self.focused = false;
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        sys::signal(child.id() as i32, libc::SIGTERM);
        let start = Instant::now();
        while child.try_wait()?.is_none() {
            if start.elapsed() > STOP_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "uxsched daemon --mode {} (bench mode {}) did not exit within {} s of SIGTERM; killed (its journal {} lets a restart restore)",
                    self.daemon_mode,
                    self.mode.name(),
                    STOP_TIMEOUT.as_secs(),
                    self.runtime.join("journal.sqlite").display()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        crate::leftovers::settle()
    }
}

/// The critical set per keystroke in the run's extras (issue 30): threads and processes per
/// episode, and the episodes counted.
fn set_extras(c: &uxsched_client::control::CriticalSets) -> Vec<(String, f64)> {
    [
        ("episodes", c.episodes),
        ("set_threads_p50", c.threads_p50),
        ("set_threads_p95", c.threads_p95),
        ("set_threads_max", c.threads_max),
        ("set_procs_p50", c.procs_p50),
        ("set_procs_max", c.procs_max),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v as f64))
    .collect()
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_daemon_keeps_its_learning_store_in_its_scratch_directory_and_journal_on_tmpfs() {
        let dir = Path::new("/var/tmp/uxsched-bench-1/daemon-uxsched");
        let runtime = Path::new("/run/uxsched-bench-1/daemon-uxsched");
        let t = run_config(
            daemon_config(ModeName::UxschedFair, "").unwrap(),
            dir,
            runtime,
            &dir.join("s"),
        );
        let at = |f: &str| toml::Value::String(dir.join(f).display().to_string());
        assert_eq!(t["tracker"]["store"], at("tracker.sqlite"));
        assert_eq!(t["tracker"]["lever"], toml::Value::String("fair".into()));
        let journal = toml::Value::String(runtime.join("journal.sqlite").display().to_string());
        assert_eq!((&t["journal"], &t["socket"]), (&journal, &at("s")));
        let runtime_dir = crate::runtime_dir(Path::new("/var/tmp/uxsched-bench-1"));
        crate::assert_runtime_dir(&runtime_dir, "uxsched-bench-1");
        let text = toml::to_string(&t).unwrap();
        uxsched_daemon::config::Config::parse(&text, Path::new("run")).unwrap();
        // A store the user named is theirs to choose.
        let mine = daemon_config(ModeName::Uxsched, "[tracker]\nstore = \"/tmp/t.sqlite\"\n");
        let t = run_config(mine.unwrap(), dir, runtime, &dir.join("s"));
        assert_eq!(
            t["tracker"]["store"],
            toml::Value::String("/tmp/t.sqlite".into())
        );
    }

    #[test]
    fn a_variant_merges_its_keys_into_the_users_and_refuses_a_contradiction() {
        let t = daemon_config(
            ModeName::UxschedRoles,
            "[tracker]\nkernel_workers = false\n[uxsched]\nslice_us = 1500\n",
        )
        .unwrap();
        assert_eq!(t["tracker"]["enabled"], toml::Value::Boolean(false));
        assert_eq!(t["tracker"]["kernel_workers"], toml::Value::Boolean(false));
        assert_eq!(t["uxsched"]["slice_us"], toml::Value::Integer(1500));
        let text = toml::to_string(&t).unwrap();
        uxsched_daemon::config::Config::parse(&text, Path::new("merged")).unwrap();
        let e = daemon_config(ModeName::UxschedRoles, "[tracker]\nenabled = true\n").unwrap_err();
        assert!(format!("{e:#}").contains("tracker.enabled"), "{e:#}");
        // The same value is no contradiction, and plain modes set nothing of their own.
        daemon_config(ModeName::UxschedRoles, "[tracker]\nenabled = false\n").unwrap();
        assert!(daemon_config(ModeName::Uxsched, "").unwrap().is_empty());
        assert_eq!(variant(ModeName::UxschedRoles).0, "uxsched");
        let fair =
            daemon_config(ModeName::UxschedFair, "[tracker]\nrt_cooldown_ms = 500\n").unwrap();
        assert_eq!(fair["tracker"]["lever"], toml::Value::String("fair".into()));
        assert_eq!(fair["tracker"]["rt_cooldown_ms"], toml::Value::Integer(500));
        // rtapi: the API on (whatever the user's file says), the mcfs daemon never focused.
        let api = daemon_config(ModeName::Rtapi, "").unwrap();
        assert_eq!(api["rtapi"]["enabled"], toml::Value::Boolean(true));
        assert_eq!(variant(ModeName::Rtapi).0, "mcfs");
        assert!(daemon_config(ModeName::Rtapi, "[rtapi]\nenabled = false\n").is_err());
    }

    /// `uxsched-io` (seed 003 Table 8's I/O manager alone): the uxsched daemon with its CPU
    /// levers off and every storage key as the user's file (or the default) says.
    #[test]
    fn uxsched_io_turns_the_cpu_levers_off_and_keeps_the_storage_levers() {
        use uxsched_daemon::config::Config;
        let m = ModeName::UxschedIo;
        assert_eq!(m.name(), "uxsched-io");
        assert_eq!(serde_json::to_string(&m).unwrap(), "\"uxsched-io\"");
        let back: ModeName = serde_json::from_str("\"uxsched-io\"").unwrap();
        assert_eq!(back, m);
        let parsed = <ModeName as clap::ValueEnum>::from_str("uxsched-io", false).unwrap();
        assert_eq!(parsed, m);
        assert!(ModeName::ALL.contains(&m) && m.needs_daemon() && !m.in_default_set());
        assert_eq!(variant(m).0, "uxsched");
        let t = daemon_config(m, "[storage]\nswitch_to_bfq = true\n").unwrap();
        let cfg = Config::parse(&toml::to_string(&t).unwrap(), Path::new("io")).unwrap();
        assert!(!cfg.cpu_levers);
        assert!(cfg.storage.switch_to_bfq);
        let storage = Config::parse("", Path::new("d")).unwrap().storage;
        let plain = daemon_config(m, "").unwrap();
        let cfg = Config::parse(&toml::to_string(&plain).unwrap(), Path::new("io")).unwrap();
        assert_eq!(cfg.storage, storage);
        assert!(daemon_config(m, "cpu_levers = true\n").is_err());
    }

    /// Every mode's name is the one serde and the command line use, and names no other mode.
    #[test]
    fn mode_names_round_trip() {
        for m in ModeName::ALL {
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.name()));
            assert_eq!(serde_json::from_str::<ModeName>(&json).unwrap(), m);
            let cli = <ModeName as clap::ValueEnum>::from_str(m.name(), false);
            assert_eq!(cli, Ok(m), "{}", m.name());
        }
        let names: std::collections::BTreeSet<_> = ModeName::ALL.map(|m| m.name()).into();
        assert_eq!(names.len(), ModeName::ALL.len());
    }
}
