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
    let until = if run.cmd.is_empty() {
        Until::Close
    } else {
        Until::Exit
    };
    let granted = client
        .call(&Request {
            tid: uxsched_client::this_thread(),
            ask,
            until,
        })
        .map_err(|e| match e {
            uxsched_client::Error::Refused { .. } => bad_input(e.to_string()),
            other => anyhow::Error::new(other),
        })?;
    let Some((prog, args)) = run.cmd.split_first() else {
        println!("{}", serde_json::to_string(&granted)?);
        return Ok(ExitCode::SUCCESS);
    };
    drop(client); // the grant lasts until this thread exits, through the exec
    let err = std::process::Command::new(prog).args(args).exec();
    Err(bad_input(format!("cannot run {prog}: {err}")))
}
