//! `uxsched` commands of the daemon face: the daemon itself, its socket clients
//! (`status`, `focus`, `mode`, `restore`) and `config check|default`.

use crate::exit::bad_input;
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use uxsched_client::control::{self, Boosted, Request, Settings, SourceStatus, Status};
use uxsched_daemon::config::backend;
use uxsched_daemon::config::{self, Config, Mode};

#[derive(clap::Args)]
pub struct SocketArg {
    /// Control socket of the daemon [default: `socket` of /etc/uxsched/uxsched.toml, else
    /// /run/uxsched/uxsched.sock].
    #[arg(long, value_name = "PATH")]
    pub(crate) socket: Option<PathBuf>,
}

#[derive(clap::Subcommand)]
pub enum Commands {
    /// Run the on-device manager in the foreground (restores everything on SIGTERM/SIGINT).
    Daemon {
        /// Configuration file [default: /etc/uxsched/uxsched.toml if present].
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Mode, overriding the config's: eimos, vtcfs, mcfs, facfs, shuffledog, uxsched.
        #[arg(long, value_name = "MODE")]
        mode: Option<String>,
        /// Backend, overriding `[backend] kind`: stock (nice, slices, RT, groups) or scx (the
        /// sched_ext scheduler; Linux >= 6.12 with sched_ext, else exit 2).
        #[arg(long, value_name = "KIND")]
        backend: Option<String>,
        /// The scx backend's policy, overriding `[backend] policy`: vtcfs, mcfs or facfs.
        #[arg(long, value_name = "POLICY")]
        scx_policy: Option<String>,
    },
    /// Show the daemon's mode, focused app, boosted threads, sources and kernel features.
    Status {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Say in plain words which desktop sessions the daemon finds and follows, and for those it
    /// does not, why and what to do (with no daemon running: what it would find).
    Doctor {
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Focus a process (all its threads, current and future), or clear the focus.
    Focus {
        /// Process id to focus.
        #[arg(required_unless_present = "clear", conflicts_with = "clear")]
        pid: Option<i32>,
        /// Clear the explicit focus.
        #[arg(long)]
        clear: bool,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Switch the daemon's mode.
    Mode {
        /// eimos, vtcfs, mcfs, facfs, shuffledog or uxsched.
        mode: String,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Undo every change now and clear the focus.
    Restore {
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Check or print the daemon's configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
}

#[derive(clap::Subcommand)]
pub enum ConfigCommand {
    /// Validate a config file (default /etc/uxsched/uxsched.toml); errors name key and line.
    Check { file: Option<PathBuf> },
    /// Print the documented default configuration.
    Default,
}

pub fn run(c: Commands) -> anyhow::Result<ExitCode> {
    match c {
        Commands::Daemon {
            config,
            mode,
            backend,
            scx_policy,
        } => {
            let mut cfg = load(config.as_deref())?;
            if let Some(m) = mode {
                cfg.mode = Mode::parse(&m).map_err(bad_input)?;
            }
            if let Some(b) = backend {
                cfg.backend.kind = backend::Kind::parse(&b).map_err(bad_input)?;
            }
            if let Some(p) = scx_policy {
                cfg.backend.policy = backend::ScxPolicy::parse(&p).map_err(bad_input)?;
            }
            // Refused before anything is touched: no silent fallback to the stock levers.
            uxsched_daemon::backend::check(&cfg.backend)
                .map_err(|e| bad_input(format!("--backend scx: {e}")))?;
            run_daemon(cfg)
        }
        Commands::Status { json, socket } => status(&socket_path(&socket)?, json),
        Commands::Doctor { socket } => doctor(socket.socket.as_deref()),
        Commands::Focus { pid, socket, .. } => {
            send(&socket_path(&socket)?, &Request::Focus { pid })?;
            Ok(ExitCode::SUCCESS)
        }
        Commands::Mode { mode, socket } => {
            Mode::parse(&mode).map_err(bad_input)?;
            send(&socket_path(&socket)?, &Request::Mode { mode })?;
            Ok(ExitCode::SUCCESS)
        }
        Commands::Restore { socket } => {
            send(&socket_path(&socket)?, &Request::Restore)?;
            Ok(ExitCode::SUCCESS)
        }
        Commands::Config(ConfigCommand::Check { file }) => {
            let path = file.unwrap_or_else(|| config::DEFAULT_PATH.into());
            load(Some(&path))?;
            println!("{}: ok", path.display());
            Ok(ExitCode::SUCCESS)
        }
        Commands::Config(ConfigCommand::Default) => {
            print!("{}", config::DEFAULT_TOML);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn load(path: Option<&Path>) -> anyhow::Result<Config> {
    Config::load(path).map_err(|e| bad_input(e.to_string()))
}

pub(crate) fn socket_path(arg: &SocketArg) -> anyhow::Result<PathBuf> {
    match &arg.socket {
        Some(p) => Ok(p.clone()),
        None => Ok(load(None)?.socket),
    }
}

fn send(socket: &Path, req: &Request) -> anyhow::Result<control::Response> {
    control::call(socket, req).map_err(|e| match e {
        control::ClientError::Refused(msg) => bad_input(msg),
        other => anyhow::Error::new(other),
    })
}

fn run_daemon(cfg: Config) -> anyhow::Result<ExitCode> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&cfg.log_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    uxsched_daemon::daemon::run(cfg).context("uxsched daemon")?;
    Ok(ExitCode::SUCCESS)
}

fn status(socket: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let resp = send(socket, &Request::Status)?;
    let s = resp
        .status
        .context("the daemon's status reply has no status")?;
    let text = if json {
        serde_json::to_string_pretty(&s)? + "\n"
    } else {
        render_status(&s)
    };
    // A closed pipe (`| head`) is the reader's choice, not an error.
    match std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// `uxsched doctor`: the daemon's word on the sessions, or — when none answers — the same
/// discovery run here.
fn doctor(socket: Option<&Path>) -> anyhow::Result<ExitCode> {
    let mut text = doctor_text(socket, Path::new(config::DEFAULT_PATH));
    let cfg = Config::load(Some(Path::new(config::DEFAULT_PATH))).unwrap_or_default();
    text.push_str("\nstorage:\n");
    for line in uxsched_daemon::devices::doctor_lines(&cfg.storage) {
        text.push_str(&format!("  {line}\n"));
    }
    match std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

fn doctor_text(socket: Option<&Path>, config_path: &Path) -> String {
    use uxsched_daemon::sources::auto;
    let (cfg, note) = match Config::load(Some(config_path)) {
        Ok(c) => (c, None),
        Err(config::ConfigError::Read { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            (
                Config::default(),
                Some(format!(
                    "no {} — the built-in defaults apply (`sources = [\"auto\"]`)",
                    config_path.display()
                )),
            )
        }
        Err(e) => (
            Config::default(),
            Some(format!("{e} (the daemon would refuse to start with it)")),
        ),
    };
    let socket = socket.map_or_else(|| cfg.socket.clone(), Path::to_owned);
    let sources: Vec<String> = cfg
        .sources
        .iter()
        .map(|s| format!("{s:?}").to_lowercase())
        .collect();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    match control::call(&socket, &Request::Status) {
        Ok(control::Response {
            status: Some(st), ..
        }) => auto::report::doctor(&socket, Ok(&st), None, &sources, note.as_deref(), root),
        answer => {
            let why = match answer {
                Err(control::ClientError::Connect { source, .. }) => source.to_string(),
                Err(e) => e.to_string(),
                Ok(_) => "its status reply has no status".into(),
            };
            let opts = auto::Options::of(&cfg.sources, cfg.sources_any_owner);
            let found = auto::Discovery::new(auto::Roots::default()).run(&opts);
            auto::report::doctor(
                &socket,
                Err(why),
                Some(&found),
                &sources,
                note.as_deref(),
                root,
            )
        }
    }
}

/// Append one formatted line to a String (writing to a String cannot fail).
macro_rules! push_line {
    ($o:expr, $($arg:tt)*) => {{
        $o.push_str(&format!($($arg)*));
        $o.push('\n');
    }};
}

fn render_status(s: &Status) -> String {
    let mut o = String::new();
    push_line!(o, "mode:    {}", s.mode);
    match (s.focus, &s.focus_comm) {
        (Some(pid), Some(comm)) => push_line!(o, "focus:   {pid} ({comm})"),
        (Some(pid), None) => push_line!(o, "focus:   {pid}"),
        _ => push_line!(o, "focus:   none"),
    }
    if let Some(idle) = &s.idle {
        push_line!(o, "idle:    {idle}");
    }
    if !s.storage.is_empty() {
        push_line!(o, "storage:");
        for line in &s.storage {
            push_line!(o, "  {line}");
        }
    }
    if !s.audible.is_empty() {
        push_line!(o, "audible:");
        for line in &s.audible {
            push_line!(o, "  {line}");
        }
    }
    render_sources(&mut o, &s.sources);
    if let Some(how) = &s.discovery {
        push_line!(o, "sessions: found through {how}");
        o.push_str(&uxsched_daemon::sources::auto::report::render(
            &s.sessions,
            true,
        ));
    }
    if let Some(l) = &s.boost_latency {
        push_line!(
            o,
            "tracker: critical → boosted p50 {} µs, p99 {} µs, max {} µs ({} threads)",
            l.p50_us,
            l.p99_us,
            l.max_us,
            l.samples
        );
    }
    if let Some(c) = &s.critical_sets {
        push_line!(o, "{}", critical_sets_line(c));
    }
    if let Some(b) = &s.backend {
        render_backend(&mut o, b);
    }
    render_boosted(&mut o, &s.boosted);
    for p in &s.problems {
        push_line!(o, "problem: {p}");
    }
    render_kernel(&mut o, &s.features);
    o
}

/// The critical set per keystroke in one line: threads and processes per episode, and the
/// process kinds in most episodes (`status --json` has the whole table).
fn critical_sets_line(c: &control::CriticalSets) -> String {
    let kinds: Vec<String> = (c.kinds.iter().take(4))
        .map(|k| format!("{} {}", k.kind, k.episodes))
        .collect();
    let more = c.kinds.len().saturating_sub(4);
    format!(
        "tracker: per keystroke {}/{}/{} threads (p50/p95/max) of {}/{} processes (p50/max), {} episodes; kinds by episodes: {}{}",
        c.threads_p50,
        c.threads_p95,
        c.threads_max,
        c.procs_p50,
        c.procs_max,
        c.episodes,
        kinds.join(", "),
        if more > 0 { format!(", {more} more") } else { String::new() }
    )
}

/// `sources: a, b (down)`, then each source's error on its own line.
fn render_sources(o: &mut String, sources: &[SourceStatus]) {
    let names: Vec<String> = sources
        .iter()
        .map(|x| format!("{}{}", x.name, if x.alive { "" } else { " (down)" }))
        .collect();
    push_line!(o, "sources: {}", names.join(", "));
    for x in sources {
        if let Some(e) = &x.error {
            push_line!(o, "  {}: {e}", x.name);
        }
    }
}

/// `boosted: N thread(s)` and, when there are any, a table of them.
fn render_boosted(o: &mut String, boosted: &[Boosted]) {
    push_line!(o, "boosted: {} thread(s)", boosted.len());
    if !boosted.is_empty() {
        push_line!(
            o,
            "  {:>8} {:>8} {:<16} {:<10} {:>11} {:>17} {:<24}",
            "TID",
            "PID",
            "COMM",
            "ROLE",
            "NICE|RT",
            "SLICE us",
            "CGROUP"
        );
    }
    for b in boosted {
        render_boosted_thread(o, b);
    }
}

/// One boosted thread's row (original→current settings) and its session, ioprio and uclamp lines.
fn render_boosted_thread(o: &mut String, b: &Boosted) {
    let pair = |o: Option<String>, c: Option<String>| match (o, c) {
        (Some(o), Some(c)) => format!("{o}→{c}"),
        _ => "-".into(),
    };
    let nice = pair(sched_label(&b.original), sched_label(&b.current));
    let slice = pair(slice_label(&b.original), slice_label(&b.current));
    let cg = pair(b.original.cgroup.clone(), b.current.cgroup.clone());
    push_line!(
        o,
        "  {:>8} {:>8} {:<16} {:<10} {:>11} {:>17} {:<24}",
        b.tid,
        b.pid,
        b.comm,
        b.role,
        nice,
        slice,
        cg
    );
    if let (Some(orig), Some(cur)) = (b.original.autogroup_nice, b.current.autogroup_nice) {
        push_line!(
            o,
            "  {:>8} session {}: nice {orig}→{cur}",
            "",
            b.objects.join(", ")
        );
    }
    if let (Some(orig), Some(cur)) = (b.original.ioprio, b.current.ioprio) {
        push_line!(o, "  {:>8} ioprio {orig:#x}→{cur:#x}", "");
    }
    if let (Some(orig), Some(cur)) = (b.original.uclamp_min, b.current.uclamp_min) {
        if orig != cur {
            push_line!(o, "  {:>8} uclamp.min {orig}→{cur}", "");
        }
    }
    // A systemd unit's weights (u64::MAX: not set, systemd's default 100 applies).
    let weight = |w: u64| match w {
        u64::MAX => "unset".to_string(),
        w => w.to_string(),
    };
    for (what, orig, cur) in [
        ("CPUWeight", b.original.unit_weight, b.current.unit_weight),
        (
            "IOWeight",
            b.original.unit_io_weight,
            b.current.unit_io_weight,
        ),
    ] {
        if let (Some(orig), Some(cur)) = (orig, cur) {
            let unit = b.objects.join(", ");
            push_line!(
                o,
                "  {:>8} {unit}: {what} {}→{}",
                "",
                weight(orig),
                weight(cur)
            );
        }
    }
}

/// The real-time policies as `Settings::policy` reports them (`sched_getattr`).
const FIFO: u32 = libc::SCHED_FIFO as u32;
const RR: u32 = libc::SCHED_RR as u32;

/// A thread's scheduling class as the table shows it: its nice in the fair class, `FIFO 2` or
/// `RR 5` in a real-time one (the kernel reports no nice for a real-time thread: a nice of 0
/// there would read as "not raised").
fn sched_label(s: &Settings) -> Option<String> {
    let prio = s.rt_priority.unwrap_or(0);
    match s.policy {
        Some(FIFO) => Some(format!("FIFO {prio}")),
        Some(RR) => Some(format!("RR {prio}")),
        _ => s.nice.map(|v| v.to_string()),
    }
}

/// The custom slice in µs; `rt` for a real-time thread, which has none.
fn slice_label(s: &Settings) -> Option<String> {
    match s.policy {
        Some(FIFO | RR) => Some("rt".into()),
        _ => s.slice_ns.map(|v| (v / 1000).to_string()),
    }
}

/// `kernel: …` from the daemon's feature probe, and why uclamp.min is absent if it is.
fn render_kernel(o: &mut String, f: &serde_json::Value) {
    let get = |k: &str| f.get(k).map(|v| v.to_string()).unwrap_or_default();
    push_line!(
        o,
        "kernel:  {} (custom slice {}, autogroup {}, cpufreq {}, cgroup {}, uclamp {})",
        get("kernel").trim_matches('"'),
        get("custom_slice"),
        get("autogroup"),
        get("cpufreq"),
        get("cgroup_used").trim_matches('"'),
        get("uclamp")
    );
    if let Some(why) = f.get("uclamp_absent").and_then(|v| v.as_str()) {
        push_line!(o, "         no uclamp.min for hint sessions: {why}");
    }
}

/// `backend: scx (vtcfs, partial mode) running`, its classes and counters.
fn render_backend(o: &mut String, b: &uxsched_client::control::BackendStatus) {
    let detail = if b.detail.is_empty() {
        String::new()
    } else {
        format!(" ({})", b.detail)
    };
    push_line!(o, "backend: {}{detail} {}", b.kind, b.state);
    let join = |v: &[(String, u64)]| {
        v.iter()
            .map(|(k, n)| format!("{k}={n}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    if !b.classes.is_empty() {
        push_line!(o, "  SCHED_EXT threads by class: {}", join(&b.classes));
    }
    if !b.counters.is_empty() {
        push_line!(o, "  counters: {}", join(&b.counters));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doctor_without_a_daemon_says_so_and_still_lists_what_it_finds() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("none.sock");
        let text = doctor_text(Some(&socket), &dir.path().join("absent.toml"));
        assert!(
            text.contains(&format!("No daemon answers on {}", socket.display())),
            "{text}"
        );
        assert!(
            text.contains("Start it: `systemctl enable --now uxsched`"),
            "{text}"
        );
        assert!(text.contains("What it would find now"), "{text}");
        assert!(text.contains("the built-in defaults apply"), "{text}");
        let cfg = dir.path().join("x.toml");
        std::fs::write(&cfg, "sources = [\"explicit\"]\n").unwrap();
        let text = doctor_text(Some(&socket), &cfg);
        assert!(text.contains("has no \"auto\""), "{text}");
    }

    #[test]
    fn the_backend_line_names_its_state_classes_and_counters() {
        let mut o = String::new();
        render_backend(
            &mut o,
            &uxsched_client::control::BackendStatus {
                kind: "scx".into(),
                detail: "mcfs, partial mode".into(),
                state: "fell back to the stock levers: SysRq-S (kind 67)".into(),
                classes: vec![("interactive".into(), 2)],
                counters: vec![("enqueued".into(), 41), ("stolen".into(), 0)],
            },
        );
        assert_eq!(
            o,
            "backend: scx (mcfs, partial mode) fell back to the stock levers: SysRq-S (kind 67)\n  \
             SCHED_EXT threads by class: interactive=2\n  counters: enqueued=41 stolen=0\n"
        );
        let mut o = String::new();
        let stock = uxsched_client::control::BackendStatus {
            kind: "stock".into(),
            state: "running".into(),
            ..Default::default()
        };
        render_backend(&mut o, &stock);
        assert_eq!(o, "backend: stock running\n");
    }

    #[test]
    fn a_real_time_thread_shows_its_class_not_the_nice_the_kernel_leaves_out() {
        let fair = Settings {
            policy: Some(0),
            nice: Some(0),
            slice_ns: Some(1_400_000),
            ..Default::default()
        };
        let fifo = Settings {
            policy: Some(1),
            nice: Some(0),
            slice_ns: Some(0),
            rt_priority: Some(2),
            ..Default::default()
        };
        let mut o = String::new();
        render_boosted_thread(
            &mut o,
            &Boosted {
                tid: 223,
                pid: 223,
                comm: "sleep".into(),
                role: "ui".into(),
                objects: vec![],
                original: fair.clone(),
                current: fifo,
            },
        );
        assert!(o.contains("0→FIFO 2"), "{o}");
        assert!(o.contains("1400→rt"), "{o}");
        let niced = Settings {
            nice: Some(-19),
            slice_ns: Some(100_000),
            ..fair.clone()
        };
        let mut o = String::new();
        render_boosted_thread(
            &mut o,
            &Boosted {
                tid: 1,
                pid: 1,
                comm: "x".into(),
                role: "ui".into(),
                objects: vec![],
                original: fair,
                current: niced,
            },
        );
        assert!(o.contains("0→-19") && o.contains("1400→100"), "{o}");
    }

    #[test]
    fn a_units_weights_show_with_the_unit_and_unset_by_name() {
        let mut o = String::new();
        render_boosted_thread(
            &mut o,
            &Boosted {
                tid: 7,
                pid: 7,
                comm: "nautilus".into(),
                role: "ui".into(),
                objects: vec!["unit cgroup 4242".into()],
                original: Settings {
                    unit_io_weight: Some(u64::MAX),
                    ..Default::default()
                },
                current: Settings {
                    unit_io_weight: Some(1000),
                    ..Default::default()
                },
            },
        );
        assert!(o.contains("unit cgroup 4242: IOWeight unset→1000"), "{o}");
        assert!(!o.contains("CPUWeight"), "{o}");
    }

    #[test]
    fn the_critical_sets_line_gives_the_counts_and_the_kinds_in_most_episodes() {
        let kind = |kind: &str, episodes| control::KindStat {
            kind: kind.into(),
            episodes,
            ..Default::default()
        };
        let c = control::CriticalSets {
            episodes: 48,
            episodes_total: 48,
            threads_p50: 9,
            threads_p95: 11,
            threads_max: 12,
            procs_p50: 3,
            procs_max: 4,
            kinds: ["chromium", "Xvfb", "a", "b", "c", "d"]
                .iter()
                .map(|k| kind(k, 48))
                .collect(),
        };
        assert_eq!(
            critical_sets_line(&c),
            "tracker: per keystroke 9/11/12 threads (p50/p95/max) of 3/4 processes (p50/max), \
             48 episodes; kinds by episodes: chromium 48, Xvfb 48, a 48, b 48, 2 more"
        );
    }
}
