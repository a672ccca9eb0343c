//! The spec's axes expanded into points, in one fixed order, each with an id that depends only
//! on what the point runs (so a resumed sweep finds its finished points whatever `--jobs` was).

use super::spec::{line_of, param_text, Spec};
use std::collections::BTreeMap;
use toml::Spanned;
use uxsched_model::time::parse_duration;
use uxsched_model::Nanos;
use uxsched_simrun::RunSettings;

/// One run of the sweep: `uxsched sim run` with these settings.
#[derive(Debug, Clone)]
pub struct Point {
    /// Position in the expansion order (the table's order).
    pub index: usize,
    /// 16 hex digits of a hash of [`Point::key`].
    pub id: String,
    /// Index into [`Grid::workloads`].
    pub workload: usize,
    pub sched: String,
    pub mechs: Vec<String>,
    pub cpus: Option<usize>,
    pub hz: u32,
    pub seed: u64,
    /// The tunables that apply to this point, in key order.
    pub params: Vec<(String, String)>,
}

/// Settings shared by every point.
#[derive(Debug, Clone)]
pub struct Common {
    pub duration: Option<Nanos>,
    pub cfs_model: String,
    pub io_sched: String,
}

/// The expanded sweep.
#[derive(Debug)]
pub struct Grid {
    /// The workloads as written in the spec (resolved against its folder when a file).
    pub workloads: Vec<String>,
    pub common: Common,
    pub points: Vec<Point>,
    /// Every param key of the spec (the table's param columns), in key order.
    pub param_keys: Vec<String>,
    /// The line of each param key, to name it in a later error.
    pub param_lines: BTreeMap<String, usize>,
}

/// An error about the spec, located at a line (`path:LINE: message`).
pub fn at(
    file: &str,
    text: &str,
    span: std::ops::Range<usize>,
    msg: impl std::fmt::Display,
) -> String {
    format!("{file}:{}: {msg}", line_of(text, span.start))
}

/// A list axis, refused when empty; `None` (absent) gives `default`.
fn axis<T: Clone>(
    v: &Option<Spanned<Vec<T>>>,
    key: &str,
    default: Vec<T>,
    loc: &Loc,
) -> Result<Vec<T>, String> {
    match v {
        None => Ok(default),
        Some(s) if s.get_ref().is_empty() => Err(loc.at(
            s.span(),
            format!("`{key}` is empty: give at least one value"),
        )),
        Some(s) => Ok(s.get_ref().clone()),
    }
}

/// The spec's file name and text, for located messages.
pub struct Loc<'a> {
    pub file: &'a str,
    pub text: &'a str,
}

impl Loc<'_> {
    pub fn at(&self, span: std::ops::Range<usize>, msg: impl std::fmt::Display) -> String {
        at(self.file, self.text, span, msg)
    }
}

/// Expands `spec` (checked for empty axes and stray params; the runs themselves are checked by
/// [`super::check`]).
pub fn expand(spec: &Spec, loc: &Loc) -> Result<Grid, String> {
    let workloads = axis(&Some(spec.workloads.clone()), "workloads", vec![], loc)?;
    let scheds = axis(&spec.scheds, "scheds", vec!["eevdf".into()], loc)?;
    let mechs = axis(&spec.mechs, "mechs", vec![vec![]], loc)?;
    let cpus: Vec<Option<usize>> = axis(&spec.cpus, "cpus", vec![], loc)?
        .into_iter()
        .map(Some)
        .collect();
    let cpus = if cpus.is_empty() { vec![None] } else { cpus };
    let hz = axis(&spec.hz, "hz", vec![250], loc)?;
    let seeds = spec.seeds.get_ref().values();
    if seeds.is_empty() {
        return Err(loc.at(
            spec.seeds.span(),
            "`seeds` is empty: give at least one seed",
        ));
    }
    let common = common(spec, loc)?;
    let params = params(spec, loc, &scheds, &mechs, &common.io_sched)?;
    let mut points = Vec::new();
    for w in 0..workloads.len() {
        for sched in &scheds {
            for mech_set in &mechs {
                let owners = owners(sched, mech_set, &common.io_sched);
                let applicable: Vec<&(String, Vec<String>)> = params
                    .iter()
                    .filter(|(k, _)| owners.contains(&prefix(k)))
                    .collect();
                for &c in &cpus {
                    for &h in &hz {
                        for combo in product(&applicable) {
                            for &seed in &seeds {
                                points.push(Point {
                                    index: points.len(),
                                    id: String::new(),
                                    workload: w,
                                    sched: sched.clone(),
                                    mechs: mech_set.clone(),
                                    cpus: c,
                                    hz: h,
                                    seed,
                                    params: combo.clone(),
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    let mut grid = Grid {
        workloads,
        common,
        points,
        param_keys: params.iter().map(|(k, _)| k.clone()).collect(),
        param_lines: spec
            .params
            .keys()
            .map(|k| (k.get_ref().clone(), line_of(loc.text, k.span().start)))
            .collect(),
    };
    for i in 0..grid.points.len() {
        let key = grid.key(&grid.points[i]);
        grid.points[i].id = format!("{:016x}", twox_hash::XxHash64::oneshot(0, key.as_bytes()));
    }
    Ok(grid)
}

fn common(spec: &Spec, loc: &Loc) -> Result<Common, String> {
    let duration = match &spec.duration {
        Some(d) => Some(
            parse_duration(d.get_ref())
                .map_err(|e| loc.at(d.span(), format!("`duration`: {e}")))?,
        ),
        None => None,
    };
    let pick = |v: &Option<Spanned<String>>, key: &str, default: &str, valid: &[&str]| match v {
        None => Ok(default.to_string()),
        Some(s) if valid.contains(&s.get_ref().as_str()) => Ok(s.get_ref().clone()),
        Some(s) => Err(loc.at(
            s.span(),
            format!(
                "`{key}` = `{}` is unknown (valid: {})",
                s.get_ref(),
                valid.join(", ")
            ),
        )),
    };
    Ok(Common {
        duration,
        cfs_model: pick(&spec.cfs_model, "cfs_model", "kernel", &["kernel", "paper"])?,
        io_sched: pick(
            &spec.io_sched,
            "io_sched",
            "cfq",
            uxsched_sim::io::IO_SCHEDULER_NAMES,
        )?,
    })
}

/// The params as `--param` text, each refused unless some point's policy, mechanism or I/O
/// scheduler is the owner its prefix names.
fn params(
    spec: &Spec,
    loc: &Loc,
    scheds: &[String],
    mechs: &[Vec<String>],
    io_sched: &str,
) -> Result<Vec<(String, Vec<String>)>, String> {
    let mut all_owners: Vec<&str> = scheds.iter().map(String::as_str).collect();
    all_owners.extend(mechs.iter().flatten().map(String::as_str));
    all_owners.extend([io_sched, "blockdev"]);
    let mut out = Vec::new();
    for (k, vals) in &spec.params {
        let key = k.get_ref();
        if !all_owners.contains(&prefix(key)) {
            return Err(loc.at(
                k.span(),
                format!(
                    "param `{key}`: no point of this sweep runs `{}` (scheds, mechs, io_sched: {})",
                    prefix(key),
                    all_owners.join(", ")
                ),
            ));
        }
        if vals.get_ref().is_empty() {
            return Err(loc.at(
                vals.span(),
                format!("param `{key}` is empty: give at least one value"),
            ));
        }
        let texts: Result<Vec<String>, String> = vals.get_ref().iter().map(param_text).collect();
        let texts = texts.map_err(|e| loc.at(vals.span(), format!("param `{key}`: {e}")))?;
        out.push((key.clone(), texts));
    }
    Ok(out)
}

/// The owner a tunable's prefix names (`mcfs.cut_rate` → `mcfs`).
fn prefix(key: &str) -> &str {
    key.split_once('.').map_or(key, |(p, _)| p)
}

fn owners<'a>(sched: &'a str, mechs: &'a [String], io_sched: &'a str) -> Vec<&'a str> {
    let mut o = vec![sched, io_sched, "blockdev"];
    o.extend(mechs.iter().map(String::as_str));
    o
}

/// Every combination of one value per axis, the last axis fastest.
fn product(axes: &[&(String, Vec<String>)]) -> Vec<Vec<(String, String)>> {
    let mut out = vec![vec![]];
    for (key, vals) in axes {
        out = out
            .into_iter()
            .flat_map(|prefix: Vec<(String, String)>| {
                vals.iter().map(move |v| {
                    let mut p = prefix.clone();
                    p.push((key.clone(), v.clone()));
                    p
                })
            })
            .collect();
    }
    out
}

impl Grid {
    /// What a point runs, canonically: the input of its id.
    pub fn key(&self, p: &Point) -> String {
        let params: Vec<String> = p.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!(
            "workload={} sched={} mechs={} cpus={:?} hz={} seed={} duration={:?} cfs_model={} io_sched={} params={}",
            self.workloads[p.workload],
            p.sched,
            p.mechs.join("+"),
            p.cpus,
            p.hz,
            p.seed,
            self.common.duration,
            self.common.cfs_model,
            self.common.io_sched,
            params.join(",")
        )
    }

    /// The point's settings, as `sim run` would take them from its options.
    pub fn settings(&self, p: &Point) -> RunSettings {
        RunSettings {
            sched: p.sched.clone(),
            cfs_model: self.common.cfs_model.clone(),
            io_sched: self.common.io_sched.clone(),
            params: p.params.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            mechs: p.mechs.clone(),
            cpus: p.cpus,
            hz: p.hz,
            seed: p.seed,
            duration: self.common.duration,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(text: &str) -> Result<Grid, String> {
        let spec = super::super::spec::parse(text, "t.toml")?;
        expand(
            &spec,
            &Loc {
                file: "t.toml",
                text,
            },
        )
    }

    /// A param multiplies only the points of its owner; seeds vary fastest; ids are unique and
    /// depend on the point, not on its position.
    #[test]
    fn params_multiply_only_their_owners_points() {
        let g = grid(
            "workloads = [\"w\"]\nscheds = [\"cfs\", \"mcfs\"]\nseeds = [1, 2]\n\
             [params]\n\"mcfs.cut_rate\" = [1, 16]\n",
        )
        .unwrap();
        type Params = Vec<(String, String)>;
        let got: Vec<(&str, u64, Params)> = g
            .points
            .iter()
            .map(|p| (p.sched.as_str(), p.seed, p.params.clone()))
            .collect();
        let cut = |v: &str| vec![("mcfs.cut_rate".to_string(), v.to_string())];
        assert_eq!(
            got,
            vec![
                ("cfs", 1, vec![]),
                ("cfs", 2, vec![]),
                ("mcfs", 1, cut("1")),
                ("mcfs", 2, cut("1")),
                ("mcfs", 1, cut("16")),
                ("mcfs", 2, cut("16")),
            ]
        );
        let ids: std::collections::BTreeSet<&str> =
            g.points.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids.len(), 6);
        // The same point in a smaller sweep keeps its id.
        let one = grid("workloads = [\"w\"]\nscheds = [\"mcfs\"]\nseeds = [2]\n[params]\n\"mcfs.cut_rate\" = [16]\n").unwrap();
        assert_eq!(one.points[0].id, g.points[5].id);
    }
}
