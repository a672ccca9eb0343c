//! A performance-hint session converging under CPU load (docs/api.md; run by
//! `scripts/hint-convergence.sh`, which starts a private daemon): a frame loop does a fixed
//! amount of CPU work per frame on one CPU shared with `--hogs` spinning threads of the same
//! process (one task group: the `no-autogroup` layout, where a thread's nice decides its share),
//! first without a session, then reporting each frame to one. Prints frames over budget (as a
//! fraction with its 95 % Wilson interval) and the frame-time percentiles before, during the
//! first frames of the session, and after.
//!
//! `hint_convergence SOCKET [--work-ms 4] [--target-ms 8] [--frames 120] [--hogs 2] [--cpu N]`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uxsched_client::{Ask, Client};
use uxsched_model::stats::{nearest_rank, wilson, Z95};

struct Opts {
    socket: String,
    work: Duration,
    target: Duration,
    frames: usize,
    hogs: usize,
    cpu: usize,
}

fn opts() -> Opts {
    let mut a = std::env::args().skip(1);
    let mut o = Opts {
        socket: a
            .next()
            .expect("usage: hint_convergence SOCKET [--work-ms N] …"),
        work: Duration::from_millis(4),
        target: Duration::from_millis(8),
        frames: 120,
        hogs: 2,
        cpu: std::thread::available_parallelism().map_or(0, |n| n.get() - 1),
    };
    while let Some(k) = a.next() {
        let v: u64 = a
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{k} needs a number"));
        match k.as_str() {
            "--work-ms" => o.work = Duration::from_millis(v),
            "--target-ms" => o.target = Duration::from_millis(v),
            "--frames" => o.frames = v as usize,
            "--hogs" => o.hogs = v as usize,
            "--cpu" => o.cpu = v as usize,
            _ => panic!("unknown option {k}"),
        }
    }
    o
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it; 0 = this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0,
            "cannot pin to CPU {cpu}"
        );
    }
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// One frame: `work` of this thread's CPU time; its wall-clock duration.
fn frame(work: Duration) -> Duration {
    let (start, cpu0) = (Instant::now(), thread_cpu());
    while thread_cpu() - cpu0 < work {
        std::hint::black_box(0u64);
    }
    start.elapsed()
}

/// Frames over budget (count, fraction, 95 % interval) and p50/p95 (ms) of `times`.
fn summary(times: &[Duration], target: Duration) -> String {
    let over = times.iter().filter(|t| **t > target).count();
    let share = match wilson(over as u64, times.len() as u64, Z95) {
        Some((lo, hi)) => format!(
            "{:.2} [95 % CI {lo:.2}–{hi:.2}]",
            over as f64 / times.len() as f64
        ),
        None => "no frames".into(),
    };
    let mut ms: Vec<f64> = times.iter().map(|t| t.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    // A frame over 10 targets makes the session stale before its report (the boost drops).
    let stale = times.iter().filter(|t| **t > target * 10).count();
    format!(
        "{over}/{} over budget = {share}, p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms, \
         {stale} over 10x target",
        times.len(),
        nearest_rank(&ms, 500),
        nearest_rank(&ms, 950),
        ms[ms.len() - 1]
    )
}

fn main() -> Result<(), uxsched_client::Error> {
    let o = opts();
    become_ordinary();
    let hogs = Hogs::spawn(o.hogs, o.cpu);
    pin(o.cpu);
    let (before, _) = run_frames(&o, |_| 0);
    let mut with = SessionPhase::run(&o)?;
    hogs.stop();
    if let Some(e) = with.failed.take() {
        return Err(e);
    }
    print_results(&o, &before, with);
    Ok(())
}

/// The frame loop and the hogs (which inherit it) as ordinary SCHED_OTHER nice-0 threads,
/// whatever this was started under (`nice`, `chrt -i`): uxsched boosts fair-class threads,
/// and a session's nice levels are absolute.
fn become_ordinary() {
    let ordinary = libc::sched_param { sched_priority: 0 };
    // SAFETY: plain calls on this thread (0) with a valid sched_param.
    unsafe {
        assert_eq!(libc::sched_setscheduler(0, libc::SCHED_OTHER, &ordinary), 0);
        assert_eq!(
            libc::setpriority(libc::PRIO_PROCESS, 0, 0),
            0,
            "needs root to lower nice"
        );
    }
}

/// Threads spinning on the frame loop's CPU until stopped.
struct Hogs {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Hogs {
    fn spawn(n: usize, cpu: usize) -> Hogs {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    pin(cpu);
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::black_box(0u64);
                    }
                })
            })
            .collect();
        Hogs { stop, threads }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.threads {
            let _ = h.join();
        }
    }
}

/// `o.frames` frames, each in a period of twice the target: the loop sleeps between frames,
/// as an app waiting for its next vsync. `report` gets each frame's time and returns the
/// thread's nice level; the frame times and those levels.
fn run_frames(o: &Opts, mut report: impl FnMut(Duration) -> i32) -> (Vec<Duration>, Vec<i32>) {
    let period = o.target * 2;
    let mut times = Vec::with_capacity(o.frames);
    let mut nices = Vec::with_capacity(o.frames);
    let mut next = Instant::now();
    for _ in 0..o.frames {
        let t = frame(o.work);
        times.push(t);
        nices.push(report(t));
        next += period;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    (times, nices)
}

/// The frames run with a hint session, each reported to it.
struct SessionPhase {
    times: Vec<Duration>,
    /// The session's nice level after each report.
    nices: Vec<i32>,
    /// Its uclamp.min after each report, where the kernel has it …
    uclamps: Vec<u32>,
    /// … else why not.
    uclamp: Option<String>,
    /// The first report that failed.
    failed: Option<uxsched_client::Error>,
}

impl SessionPhase {
    fn run(o: &Opts) -> Result<SessionPhase, uxsched_client::Error> {
        let mut c = Client::connect(&o.socket)?;
        let s =
            c.create_hint_session(&[uxsched_client::this_thread()], o.target.as_nanos() as u64)?;
        let mut failed = None;
        let mut uclamps = Vec::with_capacity(o.frames);
        let (times, nices) = run_frames(o, |t| {
            let r = c.hint(Ask::HintReport {
                session: s.id,
                actual_ns: t.as_nanos() as u64,
            });
            match r {
                Ok(now) => {
                    uclamps.extend(now.uclamp_min);
                    now.nice
                }
                Err(e) => {
                    failed.get_or_insert(e);
                    0
                }
            }
        });
        Ok(SessionPhase {
            times,
            nices,
            uclamps,
            uclamp: s.uclamp,
            failed,
        })
    }
}

fn print_results(o: &Opts, before: &[Duration], with: SessionPhase) {
    let first = o.frames / 4;
    println!(
        "work {:?} per frame, target {:?}, {} hog threads on CPU {}, {} frames per phase",
        o.work, o.target, o.hogs, o.cpu, o.frames
    );
    println!("without a session:           {}", summary(before, o.target));
    println!(
        "session, first {first:3} frames: {}",
        summary(&with.times[..first], o.target)
    );
    println!(
        "session, last {:3} frames:   {}",
        o.frames - first,
        summary(&with.times[first..], o.target)
    );
    let shown: Vec<i32> = with
        .nices
        .iter()
        .step_by((o.frames / 20).max(1))
        .copied()
        .collect();
    println!(
        "session nice over time (every {} frames): {shown:?}",
        (o.frames / 20).max(1)
    );
    if !with.uclamps.is_empty() {
        let every = (with.uclamps.len() / 20).max(1);
        let shown: Vec<u32> = with.uclamps.iter().step_by(every).copied().collect();
        println!("session uclamp.min over time (every {every} frames): {shown:?}");
    } else if let Some(why) = with.uclamp {
        println!("uclamp: {why}");
    }
}
