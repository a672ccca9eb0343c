//! `uxsched sim reproduce <id>|all`: run the seed papers' experiments, write their figures and
//! (for `all`) `docs/reproduction.md`.

use super::ReproduceArgs;
use crate::exit::bad_input;
use anyhow::Context;
use std::process::ExitCode;
use std::time::Instant;
use uxsched_sim::reproduce::report::{markdown, SeedResult};
use uxsched_sim::reproduce::{self, Ctx, Outcome};

pub fn reproduce(a: ReproduceArgs) -> anyhow::Result<ExitCode> {
    let seeds: Vec<_> = if a.id == "all" {
        reproduce::SEEDS.to_vec()
    } else {
        vec![reproduce::find(&a.id).map_err(bad_input)?]
    };
    let fig_dir = a.out.join("reproduction");
    let ctx = Ctx {
        quick: a.quick,
        seed: 1,
        out_dir: fig_dir.clone(),
    };
    let mut done: Vec<(&str, &str, Outcome, f64)> = Vec::new();
    let total = Instant::now();
    for (i, (id, title, exp)) in seeds.iter().enumerate() {
        eprintln!("[{}/{}] seed {id}: {title} …", i + 1, seeds.len());
        let start = Instant::now();
        let outcome = exp(&ctx).map_err(|e| anyhow::anyhow!("seed {id}: {e}"))?;
        let wall = start.elapsed().as_secs_f64();
        reproduce::write_figures(&outcome, &fig_dir)
            .with_context(|| format!("writing seed {id}'s figures"))?;
        eprintln!(
            "[{}/{}] seed {id}: {} claims, {} figures in {wall:.1} s",
            i + 1,
            seeds.len(),
            outcome.claims.len(),
            outcome.figures.len()
        );
        done.push((id, title, outcome, wall));
    }
    let results: Vec<SeedResult> = done
        .iter()
        .map(|(id, title, o, wall)| SeedResult {
            id,
            title,
            outcome: o,
            wall_s: *wall,
        })
        .collect();
    let md = markdown(&results, "reproduction", a.quick);
    if a.json {
        let all: Vec<_> = done
            .iter()
            .map(|(id, title, o, _)| serde_json::json!({"seed": id, "title": title, "outcome": o}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
    } else {
        print!("{md}");
    }
    if a.id == "all" {
        let path = a.out.join("reproduction.md");
        uxsched_sim::export::write_atomically(&path, |w| w.write_all(md.as_bytes()))
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!(
            "wrote {} and {}/ in {:.1} s",
            path.display(),
            fig_dir.display(),
            total.elapsed().as_secs_f64()
        );
    } else {
        eprintln!("figures in {}/", fig_dir.display());
    }
    Ok(ExitCode::SUCCESS)
}
