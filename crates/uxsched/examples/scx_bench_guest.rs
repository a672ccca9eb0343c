//! The README's sched_ext measurements, in the 6.12 test guest (QEMU/TCG with `-icount`, so the
//! host's load does not decide the figures): boots the guest once with the given uxsched binary,
//! `scx_simple` and stress-ng, runs `uxsched bench` for each scenario under
//! idle, stock (EEVDF), scx-simple and scx-{vtcfs,mcfs,facfs} in each layout, and writes each
//! report (the table, and the JSON with every sample) to OUT. `scripts/scx-bench.sh` is the
//! one command that builds everything and runs this.
//!
//! Usage: scx_bench_guest UXSCHED SCX_SIMPLE OUT (settings from the environment:
//! `SCX_BENCH_SCENARIOS`, `SCX_BENCH_LAYOUTS`, `SCX_BENCH_REPS`, `SCX_BENCH_DURATION`,
//! `SCX_BENCH_EXTRA`: more `uxsched bench` arguments, e.g. `--load-workers 2`;
//! `SCX_BENCH_SCX_ARGS`: more `uxsched scx run` arguments for the scx-* modes, e.g. `--full`).
//! `xterm` among the scenarios adds the host's Xvfb, openbox and xterm to the guest
//! (`uxsched_guest::add_x_desktop`).

use std::path::{Path, PathBuf};
use std::time::Duration;
use uxsched_guest::{Guest, Initramfs};

const MODES: &str = "idle,stock,scx-simple,scx-vtcfs,scx-mcfs,scx-facfs";

fn setting(key: &str, default: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| default.to_owned())
}

/// The guest script: one `uxsched bench` per scenario × layout; each report is printed between
/// `=== BEGIN name` / `=== END name` lines, with the command's exit status.
fn script(
    scenarios: &[String],
    layouts: &[String],
    reps: &str,
    duration: &str,
    extra: &str,
    scx_args: &str,
) -> String {
    let mut s = String::from(
        "mount -t bpf bpf /sys/fs/bpf || echo 'mounting bpffs failed'\n\
         mkdir -p /dev/pts && mount -t devpts devpts /dev/pts || echo 'mounting devpts failed'\n\
         mkdir -p /var/tmp /run/lock\n\
         echo \"guest: $(nproc) CPUs, kernel $(uname -r), sched_ext $(cat /sys/kernel/sched_ext/state)\"\n\
         emit() { echo \"=== BEGIN $1\"; cat \"/tmp/$1\"; echo; echo \"=== END $1\"; }\n",
    );
    if !scx_args.is_empty() {
        s.push_str(&format!("export UXSCHED_SCX_ARGS='{scx_args}'\n"));
    }
    for layout in layouts {
        for sc in scenarios {
            let name = format!("{sc}-{layout}");
            s.push_str(&format!(
                "uxsched bench {sc} --modes {MODES} --layout {layout} --reps {reps} \
                 --duration {duration} {extra} --save /tmp/{name}.json >/tmp/{name}.txt 2>/tmp/{name}.err\n\
                 st=$?; echo \"=== STATUS {name} $st\"\n\
                 [ $st -eq 0 ] || for f in /var/tmp/uxsched-bench-*/runs/*/desktop/*.log; do \
                 [ -f \"$f\" ] && echo \"--- $f\" && tail -n 30 \"$f\"; done\n\
                 emit {name}.txt; emit {name}.err; [ -f /tmp/{name}.json ] && emit {name}.json\n"
            ));
        }
    }
    // Each run's status is in its STATUS line; a refused layout is not the script's failure.
    s.push_str("echo '=== DONE'\n");
    s
}

/// Split the console into the files between `=== BEGIN`/`=== END` and write them to `out`.
fn save(console: &str, out: &Path) -> std::io::Result<Vec<String>> {
    let mut saved = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in console.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(name) = line.strip_prefix("=== BEGIN ") {
            current = Some((name.to_owned(), String::new()));
        } else if line.starts_with("=== END ") {
            if let Some((name, text)) = current.take() {
                std::fs::write(out.join(&name), text)?;
                saved.push(name);
            }
        } else if let Some((_, text)) = current.as_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    Ok(saved)
}

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [uxsched, simple, out] = &args[..] else {
        eprintln!("usage: scx_bench_guest UXSCHED SCX_SIMPLE OUT (scripts/scx-bench.sh runs it)");
        std::process::exit(2);
    };
    let list = |k, d| -> Vec<String> { setting(k, d).split(',').map(str::to_owned).collect() };
    let scenarios = list("SCX_BENCH_SCENARIOS", "painting,alarm,worker");
    let layouts = list("SCX_BENCH_LAYOUTS", "no-autogroup,same-session");
    let (reps, duration) = (
        setting("SCX_BENCH_REPS", "2"),
        setting("SCX_BENCH_DURATION", "5s"),
    );
    std::fs::create_dir_all(out).expect("creating OUT");
    let mut guest = Guest::locate().unwrap_or_else(|e| panic!("{e}"));
    guest.memory_mib = 1024;
    guest.timeout = Duration::from_secs(
        setting("SCX_BENCH_TIMEOUT_S", "2400")
            .parse()
            .expect("SCX_BENCH_TIMEOUT_S"),
    );
    // The guest's clock counts its own instructions (8 ns each), idle time skipped: the host's
    // load (QEMU runs niced next to other work) is not measured as scheduling latency.
    guest.qemu_args = ["-icount", "shift=3,sleep=on"].map(String::from).to_vec();
    let mut fs = Initramfs::new();
    fs.binary(uxsched, "/bin/uxsched").expect("uxsched");
    fs.binary(simple, "/bin/scx_simple").expect("scx_simple");
    let stress =
        uxsched_guest::which("stress-ng").expect("stress-ng is not in PATH: bash scripts/setup.sh");
    fs.binary(&stress, "/bin/stress-ng").expect("stress-ng");
    // The real-application scenario that runs headless: its X desktop from the host's packages.
    if scenarios.iter().any(|s| s == "xterm") {
        uxsched_guest::add_x_desktop(&mut fs).unwrap_or_else(|e| panic!("{e}"));
    }
    let extra = setting("SCX_BENCH_EXTRA", "");
    let scx_args = setting("SCX_BENCH_SCX_ARGS", "");
    let text = script(&scenarios, &layouts, &reps, &duration, &extra, &scx_args);
    let outcome = guest.run(&fs, &text).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(out.join("console.log"), &outcome.console).expect("writing console.log");
    let saved = save(&outcome.console, out).expect("writing the reports");
    eprintln!(
        "scx_bench_guest: guest ran {:.0?} (status {}); wrote {} files to {}",
        outcome.wall,
        outcome.status,
        saved.len(),
        out.display()
    );
    for l in outcome
        .console
        .lines()
        .filter(|l| l.starts_with("=== STATUS"))
    {
        eprintln!("{l}");
    }
    if outcome.status != 0 {
        std::process::exit(1);
    }
}
