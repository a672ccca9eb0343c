//! `uxsched rt …`: the real-time API from a shell, through `uxsched-client` (no second wire
//! format). `uxsched rt realtime --priority 10 -- CMD…` gets the grant for this process's main
//! thread until it exits, then runs CMD in its place (like `chrt`; `SCHED_RESET_ON_FORK` keeps
//! CMD's children ordinary). Without CMD it only shows what would be granted (the grant ends
//! when this command exits).

use crate::daemon_cmd::{socket_path, SocketArg};
use crate::exit::bad_input;
use std::os::unix::process::CommandExt;
use std::process::ExitCode;
use uxsched_client::{Ask, Client, Policy, Request, Until};

#[derive(clap::Subcommand)]
pub enum RtCommand {
    /// SCHED_FIFO or SCHED_RR (sets this process's RLIMIT_RTTIME first, as the daemon requires).
    Realtime {
        /// 1..=99, within the daemon's `max_rt_priority` for you.
        #[arg(long)]
        priority: u32,
        /// fifo or rr.
        #[arg(long, default_value = "fifo", value_parser = ["fifo", "rr"])]
        policy: String,
        /// Hard (and soft) RLIMIT_RTTIME to set first, µs: the kernel kills a thread that runs
        /// this long without blocking.
        #[arg(long, default_value_t = 200_000)]
        rttime_us: u64,
        #[command(flatten)]
        run: Run,
    },
    /// A nice level (fair class).
    Nice {
        #[arg(long, allow_hyphen_values = true)]
        nice: i32,
        #[command(flatten)]
        run: Run,
    },
    /// A custom slice (latency hint, fair class), µs.
    Latency {
        #[arg(long)]
        slice_us: u64,
        #[command(flatten)]
        run: Run,
    },
    /// Back to the thread's own settings.
    Reset {
        #[command(flatten)]
        run: Run,
    },
    /// Depend on process or thread ON: it is raised while this command's grant holds (give
    /// the grant first in the same command: `--nice`), e.g. `uxsched rt depend --on $(pidof
    /// pipewire) --nice -5 -- player`.
    Depend {
        #[arg(long)]
        on: i32,
        /// The nice asked for this process's thread (and so passed on to ON).
        #[arg(long, allow_hyphen_values = true, default_value_t = -5)]
        nice: i32,
        #[command(flatten)]
        run: Run,
    },
    /// A performance-hint session for this command's thread: reads one actual work duration
    /// (ns) per line on stdin, reports it and prints the session after each (JSON).
    Hint {
        /// The target work duration, ns.
        #[arg(long)]
        target_ns: u64,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// An interaction hint: this command's thread handles input for MS milliseconds, then
    /// ends it; prints what it had meanwhile.
    Interaction {
        #[arg(long, default_value_t = 100)]
        ms: u64,
        #[command(flatten)]
        socket: SocketArg,
    },
}

#[derive(clap::Args)]
pub struct Run {
    #[command(flatten)]
    socket: SocketArg,
    /// The command to run with the grant (until it exits). Without it: show what is granted.
    #[arg(last = true)]
    cmd: Vec<String>,
}

pub fn run(c: RtCommand) -> anyhow::Result<ExitCode> {
    let (ask, run) = match c {
        RtCommand::Hint { target_ns, socket } => return hint(target_ns, &socket),
        RtCommand::Interaction { ms, socket } => return interaction(ms, &socket),
        RtCommand::Depend { on, nice, run } => return depend(on, nice, run),
        RtCommand::Realtime {
            priority,
            policy,
            rttime_us,
            run,
        } => {
            uxsched_client::limit_rttime(rttime_us)
                .map_err(|e| anyhow::anyhow!("cannot set RLIMIT_RTTIME to {rttime_us} µs: {e}"))?;
            let policy = if policy == "rr" {
                Policy::Rr
            } else {
                Policy::Fifo
            };
            (Ask::Realtime { policy, priority }, run)
        }
        RtCommand::Nice { nice, run } => (Ask::HighPriority { nice }, run),
        RtCommand::Latency { slice_us, run } => (Ask::Latency { slice_us }, run),
        RtCommand::Reset { run } => (Ask::Reset, run),
    };
    let mut client = Client::connect(socket_path(&run.socket)?)?;
    grant_then_run(&mut client, &[ask], run)
}

/// Ask each of `asks` for this thread (until it exits when a command follows), print the last
/// reply or run the command in this process's place.
fn grant_then_run(client: &mut Client, asks: &[Ask], run: Run) -> anyhow::Result<ExitCode> {
    let until = if run.cmd.is_empty() {
        Until::Close
    } else {
        Until::Exit
    };
    let mut last = None;
    for &ask in asks {
        let reply = client
            .send(&Request {
                tid: uxsched_client::this_thread(),
                ask,
                until,
            })
            .map_err(refusal)?;
        last = Some(reply);
    }
    let Some((prog, args)) = run.cmd.split_first() else {
        let shown = match last {
            Some(r) if r.raised.is_some() || r.session.is_some() => serde_json::to_string(&r)?,
            Some(r) => serde_json::to_string(&r.granted)?,
            None => String::new(),
        };
        println!("{shown}");
        return Ok(ExitCode::SUCCESS);
    };
    // The grant lasts until this thread exits, through the exec (the connection is closed
    // on exec: every grant here was asked `until: exit`).
    let err = std::process::Command::new(prog).args(args).exec();
    Err(bad_input(format!("cannot run {prog}: {err}")))
}

fn refusal(e: uxsched_client::Error) -> anyhow::Error {
    match e {
        uxsched_client::Error::Refused { .. } => bad_input(e.to_string()),
        other => anyhow::Error::new(other),
    }
}

fn depend(on: i32, nice: i32, run: Run) -> anyhow::Result<ExitCode> {
    let mut client = Client::connect(socket_path(&run.socket)?)?;
    let asks = [Ask::HighPriority { nice }, Ask::Depend { on }];
    grant_then_run(&mut client, &asks, run)
}

fn hint(target_ns: u64, socket: &SocketArg) -> anyhow::Result<ExitCode> {
    use std::io::BufRead;
    let mut client = Client::connect(socket_path(socket)?)?;
    let me = uxsched_client::this_thread();
    let s = client
        .create_hint_session(&[me], target_ns)
        .map_err(refusal)?;
    println!("{}", serde_json::to_string(&s)?);
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let Ok(actual_ns) = line.trim().parse::<u64>() else {
            return Err(bad_input(format!(
                "stdin: {line:?} is not a work duration in ns (one number per line)"
            )));
        };
        let now = client
            .hint(Ask::HintReport {
                session: s.id,
                actual_ns,
            })
            .map_err(refusal)?;
        println!("{}", serde_json::to_string(&now)?);
    }
    Ok(ExitCode::SUCCESS)
}

fn interaction(ms: u64, socket: &SocketArg) -> anyhow::Result<ExitCode> {
    let mut client = Client::connect(socket_path(socket)?)?;
    let g = client
        .for_this_thread(Ask::InteractionStart)
        .map_err(refusal)?;
    println!("{}", serde_json::to_string(&g)?);
    std::thread::sleep(std::time::Duration::from_millis(ms));
    let g = client
        .for_this_thread(Ask::InteractionEnd)
        .map_err(refusal)?;
    println!("{}", serde_json::to_string(&g)?);
    Ok(ExitCode::SUCCESS)
}
