//! `uxsched sim sweep SPEC.toml`: every point of a parameter grid run exactly as `sim run` runs
//! it, on every core, into one tidy table (docs/sweep.md). The spec is checked whole — every
//! point built, none run — before the first point starts.

mod grid;
mod journal;
mod plot;
mod ray;
mod runner;
mod spec;
mod table;

use crate::exit::bad_input;
use anyhow::Context;
use grid::{Grid, Loc};
use indicatif::{ProgressBar, ProgressStyle};
use journal::{Header, Journal};
use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;
use uxsched_sim::workload::Workload;
use uxsched_simrun::rows::{self, Select};
use uxsched_simrun::{build_sim, config_for, Outcome, WorkloadSource};

#[derive(clap::Args)]
pub struct SweepArgs {
    /// The sweep spec: workloads, policies, mechanisms, a grid of params, seeds (docs/sweep.md).
    pub spec: PathBuf,
    /// Points run at once, one thread each. Default: every core. The results do not depend on it.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub jobs: Option<u64>,
    /// Run the points as Ray tasks instead: `auto` starts a local Ray with 2 workers, an
    /// ADDRESS (`head:6379`) joins a cluster whose every node has the uxsched_sweep wheel.
    #[arg(long, value_name = "auto|ADDRESS", conflicts_with = "jobs")]
    pub ray: Option<String>,
    /// Output folder (journal.jsonl, results.csv, results.parquet, plot-*.svg). Default:
    /// `sweep-<spec name>` in the current folder.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Finish a sweep whose driver was stopped: run only the points missing from OUT's journal.
    #[arg(long)]
    pub resume: bool,
    /// Print a JSON summary (with every point's digest) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The spec read, expanded and checked: everything a run needs.
struct Plan {
    title: String,
    grid: Grid,
    /// Each workload's text, which a Ray worker parses, and the same parsed once here.
    sources: Vec<WorkloadSource>,
    workloads: Vec<Workload>,
    select: Select,
    plots: Vec<spec::PlotSpec>,
    header: Header,
}

pub fn sweep(a: SweepArgs) -> anyhow::Result<ExitCode> {
    let plan = plan(&a.spec)?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("sweep-{}", plan.title)));
    std::fs::create_dir_all(&out).with_context(|| format!("creating --out {}", out.display()))?;
    let (journal, done) = if a.resume {
        Journal::resume(&out, &plan.header)?
    } else {
        (Journal::create(&out, &plan.header)?, Default::default())
    };
    let todo: Vec<&grid::Point> = plan
        .grid
        .points
        .iter()
        .filter(|p| !done.contains_key(&p.index))
        .collect();
    let jobs = a.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |j| j as usize,
    );
    let started = Instant::now();
    let (failed, jobs, startup_s) = run_points(&plan, &todo, jobs, a.ray.as_deref(), journal)?;
    let run_s = started.elapsed().as_secs_f64();
    if !failed.is_empty() {
        anyhow::bail!(
            "{} of {} points failed (first: {}); the others are in {}; fix the cause and run again with --resume",
            failed.len(),
            todo.len(),
            failed[0],
            out.join(journal::FILE).display()
        );
    }
    let rows = table::write(&out, &plan.grid, journal::read_points(&out, &plan.header)?)?;
    let plots = write_plots(&out, &plan)?;
    let summary = Summary {
        name: plan.title.clone(),
        points: plan.grid.points.len(),
        ran: todo.len(),
        resumed: done.len(),
        runner: a
            .ray
            .as_ref()
            .map_or("local".into(), |r| format!("ray {r}")),
        jobs,
        startup_s,
        run_s,
        points_per_s: if run_s > 0.0 {
            todo.len() as f64 / run_s
        } else {
            0.0
        },
        rows,
        csv: out.join(table::CSV),
        parquet: out.join(table::PARQUET),
        plots,
        digests: digests(&out, &plan)?,
    };
    summary.print(a.json)?;
    Ok(ExitCode::SUCCESS)
}

/// Reads, expands and checks the spec; every error names the file, line and key.
fn plan(path: &Path) -> anyhow::Result<Plan> {
    let file = path.display().to_string();
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading the sweep spec {file}"))?;
    let spec = spec::parse(&text, &file).map_err(bad_input)?;
    let loc = Loc {
        file: &file,
        text: &text,
    };
    let grid = grid::expand(&spec, &loc).map_err(bad_input)?;
    let select = select(&spec, &loc).map_err(bad_input)?;
    check_plots(&spec, &grid, &select, &loc).map_err(bad_input)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let (mut sources, mut workloads) = (Vec::new(), Vec::new());
    for w in &grid.workloads {
        let near = dir.join(w);
        let name = if near.exists() {
            near.display().to_string()
        } else {
            w.clone()
        };
        let source = WorkloadSource::resolve(&name)
            .and_then(|s| s.parse().map(|w| (s, w)))
            .with_context(|| loc.at(spec.workloads.span(), format!("workload `{w}`")))?;
        sources.push(source.0);
        workloads.push(source.1);
    }
    check_points(&grid, &workloads, &loc, &spec)?;
    let title = spec.name.clone().unwrap_or_else(|| {
        path.file_stem()
            .map_or("sweep".into(), |s| s.to_string_lossy().into_owned())
    });
    let keys: Vec<String> = grid.points.iter().map(|p| grid.key(p)).collect();
    let id_input = format!("{}\n{:?}", keys.join("\n"), select);
    let header = Header {
        sweep: format!(
            "{:016x}",
            twox_hash::XxHash64::oneshot(0, id_input.as_bytes())
        ),
        points: grid.points.len(),
    };
    let plots = spec.plot.iter().map(|p| p.get_ref().clone()).collect();
    Ok(Plan {
        title,
        grid,
        sources,
        workloads,
        select,
        plots,
        header,
    })
}

/// Builds (without running) every distinct point but its seed, the way the run will, so that a
/// tunable a policy lacks or a bad value is refused now, at its line.
fn check_points(
    grid: &Grid,
    workloads: &[Workload],
    loc: &Loc,
    spec: &spec::Spec,
) -> anyhow::Result<()> {
    let mut seen = BTreeSet::new();
    for p in &grid.points {
        let unseeded = grid.key(&grid::Point {
            seed: 0,
            ..p.clone()
        });
        if !seen.insert(unseeded) {
            continue;
        }
        let w = &workloads[p.workload];
        let s = grid.settings(p);
        let built = config_for(w, &s).and_then(|cfg| build_sim(w, cfg, &s.mechs));
        if let Err(e) = built {
            let msg = format!("{e:#}");
            let line = p
                .params
                .iter()
                .find(|(k, _)| msg.contains(k.as_str()))
                .and_then(|(k, _)| grid.param_lines.get(k).copied())
                .unwrap_or_else(|| {
                    let span = spec
                        .scheds
                        .as_ref()
                        .map_or(spec.workloads.span(), |s| s.span());
                    spec::line_of(loc.text, span.start)
                });
            return Err(bad_input(format!(
                "{}:{line}: point {} ({}): {msg}",
                loc.file,
                p.index,
                grid.key(p)
            )));
        }
    }
    Ok(())
}

fn select(spec: &spec::Spec, loc: &Loc) -> Result<Select, String> {
    let known = rows::metric_names();
    let mut s = Select::default();
    if let Some(t) = &spec.output.tasks {
        if t.get_ref().is_empty() {
            return Err(loc.at(
                t.span(),
                "`output.tasks` is empty: leave it out to keep every task",
            ));
        }
        s.tasks = t.get_ref().clone();
    }
    if let Some(m) = &spec.output.metrics {
        if m.get_ref().is_empty() {
            return Err(loc.at(
                m.span(),
                "`output.metrics` is empty: leave it out to keep every metric",
            ));
        }
        if let Some(bad) = m.get_ref().iter().find(|m| !known.contains(m)) {
            return Err(loc.at(
                m.span(),
                format!(
                    "`output.metrics`: unknown metric `{bad}` (known: {})",
                    known.join(", ")
                ),
            ));
        }
        s.metrics = m.get_ref().clone();
    }
    Ok(s)
}

fn check_plots(spec: &spec::Spec, grid: &Grid, select: &Select, loc: &Loc) -> Result<(), String> {
    for p in &spec.plot {
        let (span, p) = (p.span(), p.get_ref());
        let params = grid.param_keys.iter().map(String::as_str);
        let xs: Vec<&str> = plot::X_COLUMNS
            .iter()
            .copied()
            .chain(params.clone())
            .collect();
        let series: Vec<&str> = plot::SERIES_COLUMNS.iter().copied().chain(params).collect();
        if !xs.contains(&p.x.as_str()) {
            return Err(loc.at(
                span,
                format!(
                    "plot: `x = \"{}\"` is not a numeric column (valid: {})",
                    p.x,
                    xs.join(", ")
                ),
            ));
        }
        if let Some(s) = p.series.as_ref().filter(|s| !series.contains(&s.as_str())) {
            return Err(loc.at(
                span,
                format!(
                    "plot: `series = \"{s}\"` is not a column (valid: {})",
                    series.join(", ")
                ),
            ));
        }
        let kept = select.metrics.is_empty() || select.metrics.contains(&p.metric);
        if !rows::metric_names().contains(&p.metric) || !kept {
            return Err(loc.at(
                span,
                format!(
                    "plot: metric `{}` is unknown or not in `output.metrics`",
                    p.metric
                ),
            ));
        }
    }
    Ok(())
}

/// Runs `todo` on local threads or on Ray, appending each finished point to the journal; the
/// failures, the jobs (threads, or the Ray cluster's CPUs) and Ray's start-up time.
fn run_points(
    plan: &Plan,
    todo: &[&grid::Point],
    jobs: usize,
    ray: Option<&str>,
    mut journal: Journal,
) -> anyhow::Result<(Vec<String>, usize, Option<f64>)> {
    let pb = if std::io::stderr().is_terminal() {
        ProgressBar::new(todo.len() as u64)
    } else {
        ProgressBar::hidden()
    };
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} sweep [{bar:30}] {pos}/{len} points  {per_sec}  eta {eta}",
        )
        .expect("valid template"),
    );
    let mut failed = Vec::new();
    let done = |_: &grid::Point, r: anyhow::Result<Outcome>| {
        pb.inc(1);
        match r {
            Ok(o) => journal.append(&o),
            Err(e) => {
                pb.suspend(|| eprintln!("uxsched: point failed: {e:#}"));
                failed.push(format!("{e:#}"));
                Ok(())
            }
        }
    };
    let (jobs, startup_s) = match ray {
        Some(address) => {
            let job = |p: &grid::Point| runner::job(&plan.grid, &plan.sources, p, &plan.select);
            let c = ray::run_all(address, todo, job, done)?;
            (c.cpus, Some(c.startup_s))
        }
        None => {
            let run =
                |p: &grid::Point| runner::run_point(&plan.grid, &plan.workloads, p, &plan.select);
            runner::run_all(todo, jobs, run, done)?;
            (jobs, None)
        }
    };
    pb.finish_and_clear();
    Ok((failed, jobs, startup_s))
}

/// Draws the spec's plots from the journal (only the rows they need are kept in memory).
fn write_plots(out: &Path, plan: &Plan) -> anyhow::Result<Vec<PathBuf>> {
    if plan.plots.is_empty() {
        return Ok(vec![]);
    }
    let wanted = |r: &rows::Row| {
        plan.plots
            .iter()
            .any(|p| p.task == r.name && p.metric == r.metric)
    };
    let outcomes: Vec<Outcome> = journal::read_points(out, &plan.header)?
        .map(|o| {
            o.map(|mut o| {
                o.rows.retain(wanted);
                o
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let mut files = Vec::new();
    for (n, p) in plan.plots.iter().enumerate() {
        let data = plot::collect(&plan.grid, p, &outcomes);
        files.push(plot::write(out, n + 1, &plan.title, p, &data)?);
    }
    Ok(files)
}

fn digests(out: &Path, plan: &Plan) -> anyhow::Result<Vec<PointDigest>> {
    journal::read_points(out, &plan.header)?
        .map(|o| {
            o.map(|o| PointDigest {
                index: o.index,
                id: o.id,
                digest: o.digest,
            })
        })
        .collect()
}

#[derive(serde::Serialize)]
struct PointDigest {
    index: usize,
    id: String,
    digest: String,
}

#[derive(serde::Serialize)]
struct Summary {
    name: String,
    points: usize,
    /// Points run by this invocation (the rest were in the journal already).
    ran: usize,
    resumed: usize,
    /// `local`, or `ray ADDRESS`.
    runner: String,
    /// Threads, or the Ray cluster's CPUs.
    jobs: usize,
    /// `--ray`: seconds until Ray was ready, part of `run_s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    startup_s: Option<f64>,
    /// Wall time of running the points (not of checking the spec or writing the table).
    run_s: f64,
    points_per_s: f64,
    rows: u64,
    csv: PathBuf,
    parquet: PathBuf,
    plots: Vec<PathBuf>,
    digests: Vec<PointDigest>,
}

impl Summary {
    fn print(&self, json: bool) -> anyhow::Result<()> {
        if json {
            println!("{}", serde_json::to_string_pretty(self)?);
            return Ok(());
        }
        println!(
            "sweep {}: {} points ({} run now on {} jobs ({}) in {:.1} s, {:.2} points/s; {} from the journal)",
            self.name, self.points, self.ran, self.jobs, self.runner, self.run_s, self.points_per_s, self.resumed
        );
        println!(
            "{} rows: {} and {}",
            self.rows,
            self.csv.display(),
            self.parquet.display()
        );
        for p in &self.plots {
            println!("plot: {}", p.display());
        }
        Ok(())
    }
}
