//! The seed papers' experiments, run as simulated scenarios (`uxsched sim reproduce`).
//!
//! Each seed has one file (`seed000.rs` …) exposing an [`Experiment`]: it runs its scenarios and
//! returns [`Claim`]s — the paper's figure next to ours, with a verdict and the reason — and the
//! data of its [`Figure`]s. Rendering (SVG) and `docs/reproduction.md` are generated here from
//! that data, so every paper's report looks the same.

pub mod frames;
pub mod kit;
pub mod render;
pub mod report;
pub mod seed000;
pub mod seed001;
pub mod seed002;
pub mod seed003;
pub mod seed004;

use serde::Serialize;
use std::path::{Path, PathBuf};

/// How close the simulator came to a paper's claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Direction and rough size of the effect match.
    Reproduced,
    /// Direction matches, size does not (or only some of the points match).
    Partly,
    /// Not reproduced; the reason says why.
    Not,
}

/// One row of `docs/reproduction.md`.
#[derive(Debug, Clone, Serialize)]
pub struct Claim {
    /// `000`, `001`, …
    pub seed: &'static str,
    /// Where in the paper: `Example 1`, `Fig. 6`, `Table IV`.
    pub source: String,
    /// What is claimed, in a few words.
    pub claim: String,
    /// The paper's number(s), as the paper states them.
    pub paper: String,
    /// Ours, measured by this run.
    pub ours: String,
    pub verdict: Verdict,
    /// Why the verdict (always given; required for `Partly` and `Not`).
    pub reason: String,
}

/// A named data series: (x, y) points.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series with no points yet.
    pub fn named(name: impl Into<String>) -> Series {
        Series {
            name: name.into(),
            points: vec![],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum FigureKind {
    /// Lines with markers over a numeric x axis.
    Lines,
    /// Grouped bars: x values are indices into `categories`.
    Bars,
}

/// The data of one plot; rendered to `<out>/<file>.svg`.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// File stem, e.g. `seed000-fig6`.
    pub file: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub kind: FigureKind,
    /// Bar-chart category names (empty for line charts).
    pub categories: Vec<String>,
    pub series: Vec<Series>,
}

/// What one seed's experiments produced.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcome {
    pub claims: Vec<Claim>,
    pub figures: Vec<Figure>,
    /// Scenario assumptions and measurement definitions (numbers the paper does not give).
    pub notes: Vec<String>,
}

/// How to run the experiments.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Shorter runs with fewer points, for tests (the verdicts may then differ).
    pub quick: bool,
    pub seed: u64,
    /// Where figures go.
    pub out_dir: PathBuf,
}

/// One seed's experiments.
pub type Experiment = fn(&Ctx) -> Result<Outcome, String>;

/// Every seed with experiments, in order: (id, title, experiment).
pub const SEEDS: &[(&str, &str, Experiment)] = &[
    (
        "000",
        "VT-CFS and framework-assisted task characterization (Huh et al.)",
        seed000::run,
    ),
    (
        "001",
        "EIMOS: topmost-process priority bonus (Bae et al.)",
        seed001::run,
    ),
    (
        "002",
        "MCFS and real-time support for JVM phones",
        seed002::run,
    ),
    (
        "003",
        "ShuffleDog: CPU and GPU scheduling for delay-critical threads",
        seed003::run,
    ),
    (
        "004",
        "FA-CFS: frequency-aware CFS under cpufreq governors",
        seed004::run,
    ),
];

/// The experiment registered under `id`.
pub fn find(id: &str) -> Result<(&'static str, &'static str, Experiment), String> {
    SEEDS
        .iter()
        .find(|(i, _, _)| *i == id)
        .copied()
        .ok_or_else(|| {
            let ids: Vec<&str> = SEEDS.iter().map(|s| s.0).collect();
            format!(
                "no experiments for seed `{id}` (known: {}, or `all`)",
                ids.join(", ")
            )
        })
}

/// Write every figure of `o` as `<dir>/<file>.svg`.
pub fn write_figures(o: &Outcome, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| {
        std::io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display()))
    })?;
    for f in &o.figures {
        let path = dir.join(format!("{}.svg", f.file));
        crate::export::write_atomically(&path, |w| w.write_all(render::to_svg(f).as_bytes()))?;
    }
    Ok(())
}
