//! The report: per mode, the metric's percentiles over all repetitions, ratios to `idle` with
//! bootstrap intervals, background throughput relative to `stock`, context switches, and the
//! warnings a careful reader needs. Rendered as a table or serialized with `--json`.

use crate::layout::Layout;
use crate::modes::ModeName;
use crate::runner::{Plan, RunRecord};
use crate::scenario::scenario;
use crate::stats::{self, Ratio, Summary};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: String,
    pub metric: String,
    pub load: String,
    pub load_workers: usize,
    /// The second load's workers, with two loads (`load` is then `cpu+write`); its throughput
    /// is each row's `<kind>_load` extra, relative to stock's as `<kind>_load/stock`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub second_load_workers: Option<usize>,
    /// Where the load sat relative to the app (`crate::layout`), and what was set up or
    /// emulated for it.
    pub layout: Layout,
    pub layout_note: String,
    pub reps: usize,
    pub duration_s: f64,
    pub date_utc: String,
    pub kernel: String,
    pub cpus: usize,
    /// The disk the scenario's files live on, its elevator and its idle throughput.
    pub device: DeviceLine,
    pub modes: Vec<ModeRow>,
    pub warnings: Vec<String>,
    /// The browser scenario: each daemon run's critical-set false positives (issue 30,
    /// `models/xapp/frame_path.rs`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub frame_path: Vec<FramePathVerdict>,
    pub records: Vec<RunRecord>,
}

pub use crate::models::xapp::frame_path::RunVerdict as FramePathVerdict;

#[derive(Debug, Clone, Serialize)]
pub struct ModeRow {
    pub mode: ModeName,
    /// Metric percentiles (ms) over all samples of all repetitions.
    pub summary: Summary,
    pub p95_ratio: Option<Ratio>,
    pub p99_ratio: Option<Ratio>,
    /// p95 of each repetition, to see drift and noise.
    pub p95_per_rep: Vec<f64>,
    /// Mean background throughput over repetitions (absent for `idle`).
    pub background: Option<f64>,
    pub background_unit: Option<String>,
    /// Background throughput divided by `stock`'s (the background cost; 1.0 = no cost).
    pub background_vs_stock: Option<f64>,
    /// The same with its 95 % bootstrap interval over the repetitions of both modes.
    pub background_ci: Option<Ratio>,
    pub context_switches_per_s: f64,
    /// Model extras (jank %, underruns …), averaged over repetitions.
    pub extras: BTreeMap<String, f64>,
}

impl Report {
    pub fn build(plan: &Plan, records: Vec<RunRecord>) -> Report {
        let idle = pooled(&records, ModeName::Idle);
        let stock_runs = background_runs(&records, ModeName::Stock);
        let mut modes: Vec<ModeRow> = plan
            .modes
            .iter()
            .enumerate()
            .map(|(i, &m)| {
                let seed = plan.seed.wrapping_mul(31).wrapping_add(i as u64);
                ModeRow::build(m, &records, &idle, &stock_runs, seed)
            })
            .collect();
        if let Some(second) = &plan.second_load {
            second_load_vs_stock(&mut modes, second.kind.name());
        }
        let sc = scenario(plan.scenario);
        let mut report = Report {
            scenario: plan.scenario.name().into(),
            metric: match plan.compute_ms {
                Some(ms) => format!("{} [CPU work overridden: {ms} ms]", sc.metric),
                None => sc.metric.into(),
            },
            load: match &plan.second_load {
                Some(second) => format!("{}+{}", plan.load.kind.name(), second.kind.name()),
                None => plan.load.kind.name().into(),
            },
            load_workers: plan.load.workers,
            second_load_workers: plan.second_load.as_ref().map(|l| l.workers),
            layout: plan.layout,
            layout_note: String::new(),
            reps: plan.reps,
            duration_s: plan.duration.as_secs_f64(),
            date_utc: utc_now(),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .into(),
            cpus: crate::sys::cpu_count(),
            device: DeviceLine::for_plan(plan),
            modes,
            warnings: Vec::new(),
            frame_path: if plan.scenario == crate::models::ModelKind::Chromium {
                crate::models::xapp::frame_path::verdicts(&records)
            } else {
                Vec::new()
            },
            records,
        };
        report.warnings = warnings(&report);
        report
    }

    /// The human table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}: {} — load {} ×{}{}, layout {}{}, {} reps × {:.0} s, kernel {}, {} CPUs, {}",
            self.scenario,
            self.metric,
            self.load,
            self.load_workers,
            self.second_load_workers
                .map_or(String::new(), |w| format!("+{w}")),
            self.layout.name(),
            if self.layout_note.is_empty() {
                String::new()
            } else {
                format!(" ({})", self.layout_note)
            },
            self.reps,
            self.duration_s,
            self.kernel,
            self.cpus,
            self.date_utc
        );
        let _ = writeln!(s, "device: {}", self.device.text());
        let _ = writeln!(
            s,
            "{:<13} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8}  {:<20} {:<20} {:<20} {:>8}  extras",
            "mode",
            "n",
            "p50 ms",
            "p90 ms",
            "p95 ms",
            "p99 ms",
            "max ms",
            "p95/idle [95% CI]",
            "p99/idle [95% CI]",
            "bg/stock [95% CI]",
            "csw/s"
        );
        for r in &self.modes {
            let m = &r.summary;
            let extras: Vec<String> = r
                .extras
                .iter()
                .map(|(k, v)| format!("{k}={v:.1}"))
                .collect();
            let _ = writeln!(
                s,
                "{:<13} {:>6} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2}  {:<20} {:<20} {:<20} {:>8.0}  {}",
                r.mode.name(), m.n, m.p50, m.p90, m.p95, m.p99, m.max,
                fmt_ratio(r.p95_ratio), fmt_ratio(r.p99_ratio), fmt_background(r),
                r.context_switches_per_s, extras.join(" ")
            );
        }
        if self.scenario == crate::models::ModelKind::Chromium.name() {
            let modes: Vec<ModeName> = self.modes.iter().map(|r| r.mode).collect();
            s.push_str(&crate::models::xapp::frame_path::block(
                &self.records,
                &modes,
            ));
        }
        if let Some(h) = self.headline() {
            let _ = writeln!(s, "{h}");
        }
        if let Some(c) = self.background_ceiling() {
            let _ = writeln!(s, "{c}");
        }
        for w in &self.warnings {
            let _ = writeln!(s, "warning: {w}");
        }
        s
    }
}

/// The disk under the scenario's files (the scratch directory), its elevator and what it
/// honours (`uxsched_os::block`), and its sequential direct-I/O throughput measured on the idle
/// machine at the start of the bench — so a report says which disk its storage figures are
/// about (`gallery` under stock moved from 1.33× to 3.5× idle between two disks, issue 33).
#[derive(Debug, Clone, Default, Serialize)]
pub struct DeviceLine {
    /// [`uxsched_os::block::Device::describe`] of the disk, if one was found.
    pub device: Option<String>,
    pub scheduler: Option<String>,
    pub idle_read_mib_s: Option<f64>,
    pub idle_write_mib_s: Option<f64>,
    /// Why a figure is missing.
    pub note: String,
}

/// Idle measurements taken by [`measure_device`], by scratch directory, until the report.
static MEASURED: std::sync::Mutex<
    Vec<(
        std::path::PathBuf,
        Result<uxsched_os::block::Sequential, String>,
    )>,
> = std::sync::Mutex::new(Vec::new());

/// At most this long for each direction of the idle measurement (the brief's ≤ 5 s in all).
const IDLE_BUDGET: std::time::Duration = std::time::Duration::from_secs(1);

/// Measure the scratch directory's disk at the start of a bench of a storage scenario (the
/// runner calls it through `models::prepare_files`, inside the machine lock, before any load
/// starts). Other scenarios are not measured: their reports say so.
pub fn measure_device(kind: crate::models::ModelKind, scratch: &std::path::Path) {
    if !kind.is_storage() {
        return;
    }
    let m = uxsched_os::block::measure_sequential(scratch, IDLE_BUDGET, 2 << 30)
        .map_err(|e| format!("idle throughput not measured: {e}"));
    let mut all = MEASURED.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|(p, _)| p != scratch);
    all.push((scratch.to_owned(), m));
}

impl DeviceLine {
    /// The line for `plan`: probed now, with the idle figures [`measure_device`] took.
    fn for_plan(plan: &Plan) -> DeviceLine {
        let scratch = &plan.load.scratch;
        let mut line = DeviceLine::default();
        match uxsched_os::block::Probe::read()
            .and_then(|p| uxsched_os::block::device_for(&p, scratch).cloned())
        {
            Ok(d) => {
                line.device = Some(d.describe());
                line.scheduler = d.scheduler;
            }
            Err(e) => line.note = format!("no disk found under {}: {e}", scratch.display()),
        }
        let measured = MEASURED.lock().unwrap_or_else(|e| e.into_inner());
        let found = measured.iter().find(|(p, _)| p == scratch).map(|(_, m)| m);
        let why = match found {
            Some(Ok(m)) => {
                line.idle_read_mib_s = Some(m.read_bps / MIB);
                line.idle_write_mib_s = Some(m.write_bps / MIB);
                return line;
            }
            Some(Err(e)) => e.clone(),
            None if !plan.scenario.is_storage() => {
                "idle throughput not measured: not a storage scenario".into()
            }
            None => "idle throughput not measured (the bench did not prepare its files)".into(),
        };
        if !line.note.is_empty() {
            line.note.push_str("; ");
        }
        line.note.push_str(&why);
        line
    }

    /// "vda: mq-deadline (…), rotational=1, root filesystem; idle sequential direct I/O: read
    /// 812 MiB/s, write 402 MiB/s".
    pub fn text(&self) -> String {
        let mut s = self.device.clone().unwrap_or_else(|| "unknown".into());
        if let (Some(r), Some(w)) = (self.idle_read_mib_s, self.idle_write_mib_s) {
            let _ = write!(
                s,
                "; idle sequential direct I/O: read {r:.0} MiB/s, write {w:.0} MiB/s"
            );
        }
        if !self.note.is_empty() {
            let _ = write!(s, "; {}", self.note);
        }
        s
    }
}

const MIB: f64 = (1 << 20) as f64;

/// The samples of every run under `m`, pooled.
fn pooled(records: &[RunRecord], m: ModeName) -> Vec<f64> {
    records
        .iter()
        .filter(|r| r.mode == m)
        .flat_map(|r| r.samples_ms.iter().copied())
        .collect()
}

/// With two loads: each row's second-load throughput (`<kind>_load`, the mean over its runs)
/// relative to stock's, as the extra `<kind>_load/stock` (stock's row shows 1.0).
fn second_load_vs_stock(rows: &mut [ModeRow], kind: &str) {
    let key = format!("{kind}_load");
    let stock = rows
        .iter()
        .find(|r| r.mode == ModeName::Stock)
        .and_then(|r| r.extras.get(&key).copied())
        .filter(|v| *v > 0.0);
    let Some(stock) = stock else { return };
    for row in rows {
        if let Some(v) = row.extras.get(&key).copied() {
            row.extras.insert(format!("{key}/stock"), v / stock);
        }
    }
}

/// The background throughput of each run under `m` that had a load.
fn background_runs(records: &[RunRecord], m: ModeName) -> Vec<f64> {
    records
        .iter()
        .filter(|r| r.mode == m)
        .filter_map(|r| r.background.as_ref().map(|b| b.value))
        .collect()
}

impl ModeRow {
    /// Mode `m`'s row from its runs in `records`: ratios to `idle`'s pooled samples and to
    /// `stock_runs`' throughputs, bootstrapped from `seed`.
    fn build(
        m: ModeName,
        records: &[RunRecord],
        idle: &[f64],
        stock_runs: &[f64],
        seed: u64,
    ) -> ModeRow {
        let samples = pooled(records, m);
        let runs: Vec<&RunRecord> = records.iter().filter(|r| r.mode == m).collect();
        let ratio = |p| stats::ratio_ci(&samples, idle, p, seed, stats::BOOTSTRAP_ROUNDS);
        let bg_runs = background_runs(records, m);
        let background_ci =
            stats::mean_ratio_ci(&bg_runs, stock_runs, seed ^ 0xb9, stats::BOOTSTRAP_ROUNDS);
        let wall: f64 = runs.iter().map(|r| r.wall_s).sum();
        let switches: u64 = runs.iter().map(|r| r.context_switches).sum();
        let mut extras = BTreeMap::new();
        for r in &runs {
            for (k, v) in &r.extras {
                *extras.entry(k.clone()).or_insert(0.0) += v / runs.len() as f64;
            }
        }
        ModeRow {
            mode: m,
            summary: stats::summarize(&samples),
            p95_ratio: ratio(95.0),
            p99_ratio: ratio(99.0),
            p95_per_rep: runs
                .iter()
                .map(|r| stats::percentile(&stats::sorted(&r.samples_ms), 95.0))
                .collect(),
            background: (!bg_runs.is_empty()).then(|| stats::mean(&bg_runs)),
            background_unit: runs
                .iter()
                .find_map(|r| r.background.as_ref().map(|b| b.unit.clone())),
            background_vs_stock: background_ci.map(|c| c.value),
            background_ci,
            context_switches_per_s: if wall > 0.0 {
                switches as f64 / wall
            } else {
                0.0
            },
            extras,
        }
    }
}

impl Report {
    /// The README's line: ratio to idle of `stock`, of the best baseline other than `fifo`
    /// (by p95), and of `uxsched`, against the goal p95 ≤ 1.10, p99 ≤ 1.5, cost ≤ 5 %.
    pub fn headline(&self) -> Option<String> {
        let get = |m: ModeName| self.modes.iter().find(|r| r.mode == m);
        let pair = |r: &ModeRow| {
            let (p95, p99) = (r.p95_ratio?.value, r.p99_ratio?.value);
            Some(format!("{} p95 {p95:.2} p99 {p99:.2}", r.mode.name()))
        };
        let mut parts = vec![pair(get(ModeName::Stock)?)?];
        let best = self
            .modes
            .iter()
            .filter(|r| {
                matches!(
                    r.mode,
                    ModeName::Android | ModeName::S76 | ModeName::Schedqos
                ) && r.p95_ratio.is_some()
            })
            .min_by(|a, b| {
                a.p95_ratio
                    .unwrap()
                    .value
                    .total_cmp(&b.p95_ratio.unwrap().value)
            });
        if let Some(b) = best.and_then(pair) {
            parts.push(format!("best baseline {b}"));
        }
        if let Some(u) = get(ModeName::Uxsched) {
            let cost = u.background_ci.map_or(String::new(), |c| {
                format!(
                    ", background {:.2}× stock [{:.2}–{:.2}]",
                    c.value, c.lo, c.hi
                )
            });
            parts.push(format!("{}{cost}", pair(u)?));
        }
        Some(format!(
            "ratio to idle: {} (goal: p95 ≤ 1.10, p99 ≤ 1.5, background ≥ 0.95× stock)",
            parts.join("; ")
        ))
    }
}

impl Report {
    /// What serving the app must cost the load, by conservation of CPU time: the app takes
    /// `app_cpu_pct` of a CPU on the idle machine and less under stock (where it starves), and
    /// that difference comes out of what the load kept under stock (`load_cpu_pct`). Where the
    /// ceiling is under 0.95 the goal's background half cannot be met by any mode that serves
    /// the app as the idle machine does (a real program's `app_cpu_pct` is its process tree's and
    /// its X server's, measured by the runner). `None` without the figures (old runs).
    pub fn background_ceiling(&self) -> Option<String> {
        let extra = |m: ModeName, k: &str| {
            let row = self.modes.iter().find(|r| r.mode == m)?;
            row.extras.get(k).copied()
        };
        let (app_idle, app_stock) = (
            extra(ModeName::Idle, "app_cpu_pct")?,
            extra(ModeName::Stock, "app_cpu_pct")?,
        );
        let load_stock = extra(ModeName::Stock, "load_cpu_pct")?;
        let ceiling = (load_stock - (app_idle - app_stock).max(0.0)) / load_stock;
        let kept: Vec<String> = (self.modes.iter())
            .filter(|r| !matches!(r.mode, ModeName::Idle | ModeName::Stock))
            .filter_map(|r| {
                let kept = r.extras.get("load_cpu_pct")? / load_stock;
                Some(format!("{} {kept:.3}", r.mode.name()))
            })
            .collect();
        Some(format!(
            "background ceiling: the app takes {app_idle:.1} % of a CPU served as on the idle \
             machine, {app_stock:.1} % under stock, so the load (stock: {load_stock:.1} %) can \
             keep at most {ceiling:.3}× its CPU; it kept {}",
            kept.join(", ")
        ))
    }

    /// One sentence: was `uxsched` separable (non-overlapping 95 % bootstrap intervals of the
    /// p95 ratio) from `stock` and from the best peer (`android`, `s76`, `schedqos` by p95)?
    /// Says plainly when uxsched does not win. `None` without uxsched, stock or idle.
    pub fn verdict(&self) -> Option<String> {
        let get = |m: ModeName| self.modes.iter().find(|r| r.mode == m);
        let ux = get(ModeName::Uxsched)?.p95_ratio?;
        let stock = get(ModeName::Stock)?.p95_ratio?;
        let peer = self
            .modes
            .iter()
            .filter(|r| {
                matches!(
                    r.mode,
                    ModeName::Android | ModeName::S76 | ModeName::Schedqos
                )
            })
            .filter_map(|r| Some((r.mode, r.p95_ratio?)))
            .min_by(|a, b| a.1.value.total_cmp(&b.1.value));
        let compare = |other: Ratio| {
            if ux.hi < other.lo {
                "separably better than"
            } else if ux.lo > other.hi {
                "separably WORSE than"
            } else {
                "not separable from"
            }
        };
        let mut s = format!(
            "{} ({}): uxsched p95 {} idle is {} stock ({})",
            self.scenario,
            self.layout.name(),
            fmt_ratio(Some(ux)),
            compare(stock),
            fmt_ratio(Some(stock)),
        );
        if let Some((mode, p)) = peer {
            let _ = write!(
                s,
                " and {} the best peer {} ({})",
                compare(p),
                mode.name(),
                fmt_ratio(Some(p))
            );
        }
        let wins = ux.hi < stock.lo && peer.is_none_or(|(_, p)| ux.hi < p.lo);
        if !wins {
            s.push_str(" — uxsched does not win here");
        }
        s.push('.');
        Some(s)
    }
}

/// Background × stock with its interval (`stock`'s own is 1 exactly: no interval), or —.
fn fmt_background(r: &ModeRow) -> String {
    match r.background_ci {
        None => "—".into(),
        Some(c) if r.mode == ModeName::Stock => format!("{:.3}", c.value),
        Some(c) => format!("{:.3} [{:.2}–{:.2}]", c.value, c.lo, c.hi),
    }
}

fn fmt_ratio(r: Option<Ratio>) -> String {
    r.map_or("—".into(), |r| {
        format!("{:.2} [{:.2}–{:.2}]", r.value, r.lo, r.hi)
    })
}

fn warnings(report: &Report) -> Vec<String> {
    let mut w = Vec::new();
    if !report.modes.iter().any(|r| r.mode == ModeName::Idle) {
        w.push("no `idle` mode in this run: ratios to idle are not available".into());
    }
    // p99 rests on the n/100 slowest samples: below 10 of them it is little more than the max.
    let few: Vec<String> = report
        .modes
        .iter()
        .filter(|r| r.summary.n < 1000)
        .map(|r| format!("{} ({})", r.mode.name(), r.summary.n))
        .collect();
    if !few.is_empty() {
        w.push(format!(
            "fewer than 1000 samples for {}: p99 rests on fewer than 10 samples; use a longer --duration or more --reps",
            few.join(", ")
        ));
    }
    let mut loaded: Vec<&ModeRow> = report
        .modes
        .iter()
        .filter(|r| r.mode != ModeName::Idle && r.p95_ratio.is_some())
        .collect();
    loaded.sort_by(|a, b| {
        a.p95_ratio
            .unwrap()
            .value
            .total_cmp(&b.p95_ratio.unwrap().value)
    });
    for pair in loaded.windows(2) {
        let (a, b) = (pair[0].p95_ratio.unwrap(), pair[1].p95_ratio.unwrap());
        if a.overlaps(&b) {
            w.push(format!(
                "too noisy to separate {} and {} at p95 (95% CIs {:.2}–{:.2} and {:.2}–{:.2} overlap): rerun with more --reps or a longer --duration",
                pair[0].mode.name(), pair[1].mode.name(), a.lo, a.hi, b.lo, b.hi
            ));
        }
    }
    w
}

/// Current UTC time as `YYYY-MM-DD HH:MM UTC` (civil-from-days, no time-zone database).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}
