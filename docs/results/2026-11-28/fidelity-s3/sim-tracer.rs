//! Scratch tracer used for docs/fidelity.md ("The two rows left open, traced"): runs one rt-app
//! workload in the simulator (eevdf, 2 CPUs, HZ 250, base slice 1.4 ms, no timer slack and no
//! wake-up cost unless SLACK / COST are set) and prints per task the timer wake-up latencies
//! (p50/p90/p99, share above 300 us). ALL=1 prints every Wakeup ("W cpuN task"), Switch
//! ("S cpuN prev -> next") and Migrate ("M task a->b") record, which wakeups_by_neighbours.py
//! reads on stdin; OCC=1 prints each task's running time per CPU; CG=1 gives cgroups.json's
//! groups their validate weights (heavy 2048, light 512).
//! Build: a crate with sim-tracer.Cargo.toml as Cargo.toml and this file as src/main.rs.
//! usage: sim-tracer <workload.json> <seed> [<from ns> <to ns>]
use uxsched_sim::engine::{Sim, SimConfig};
use uxsched_sim::log::{Record, RunMeta, Sink};
use uxsched_sim::platform::PlatformSpec;

#[derive(Default)]
struct S { occ: std::collections::HashMap<(String,u16),u64>, cur: std::collections::HashMap<u16,(u64,Option<u32>)>, names: Vec<String>, pending: Vec<Option<u64>>, lat: Vec<Vec<i64>>, trace: bool, from: u64, to: u64 }
impl Sink for S {
    fn begin(&mut self, m: &RunMeta) {
        self.names = m.tasks.iter().map(|t| t.name.clone()).collect();
        self.pending = vec![None; self.names.len()];
        self.lat = vec![vec![]; self.names.len()];
    }
    fn record(&mut self, r: &Record) {
        let tr = |t: u64| (self.trace && t >= self.from && t <= self.to) || std::env::var("ALL").is_ok();
        match *r {
            Record::Wakeup { t, task, cpu, waker } => {
                if waker.is_none() { self.pending[task as usize] = Some(t); }
                if tr(t) { println!("{:>12} W cpu{} {}", t, cpu, self.names[task as usize]); }
            }
            Record::Switch { t, cpu, prev, reason, next } => {
                if let Some((t0, Some(p))) = self.cur.get(&cpu).copied() { *self.occ.entry((self.names[p as usize].clone(), cpu)).or_default() += t - t0; }
                self.cur.insert(cpu, (t, next));
                if let Some(n) = next { if let Some(e) = self.pending[n as usize].take() { self.lat[n as usize].push((t - e) as i64); } }
                if tr(t) { println!("{:>12} S cpu{} {:?} -> {:?} ({:?})", t, cpu, prev.map(|p| &self.names[p as usize]), next.map(|p| &self.names[p as usize]), reason); }
            }
            Record::Migrate { t, task, from, to } => if tr(t) { println!("{:>12} M {} {}->{}", t, self.names[task as usize], from, to); },
            _ => {}
        }
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let mut w = uxsched_sim::workload::load(std::path::Path::new(&a[1])).unwrap();
    if std::env::var("CG").is_ok() { for g in w.groups.iter_mut() { if g.path == "heavy" { g.shares = 2048; } if g.path == "light" { g.shares = 512; } } }
    let seed: u64 = a[2].parse().unwrap();
    let mut cfg = SimConfig::new("eevdf", PlatformSpec::uniform(2));
    cfg.hz = 250; cfg.seed = seed; cfg.duration = w.duration.unwrap();
    cfg.timer_slack = std::env::var("SLACK").ok().map(|v| v.parse().unwrap()).unwrap_or(0);
    if let Ok(c) = std::env::var("COST") { cfg.fair_wakeup_costs = c.split(',').map(|x| x.parse().unwrap()).collect(); cfg.wakeup_cost = cfg.fair_wakeup_costs[0]; }
    cfg.params = uxsched_sim::policy::Params::parse(["eevdf.base_slice=1400000ns"]).unwrap();
    let mut s = S::default();
    if a.len() > 4 { s.trace = true; s.from = a[3].parse().unwrap(); s.to = a[4].parse().unwrap(); }
    let mut sim = Sim::new(&w, cfg).unwrap();
    sim.run(&mut s, &mut |_| {}).unwrap();
    if std::env::var("OCC").is_ok() { let mut v: Vec<_> = s.occ.iter().collect(); v.sort(); for ((n,c),t) in v { println!("occ {n} cpu{c} {:.0}ms", *t as f64/1e6); } }
    for (i, n) in s.names.iter().enumerate() {
        let mut l = s.lat[i].clone(); if l.is_empty() { continue; }
        l.sort();
        let p = |q: f64| l[((l.len() as f64 - 1.0) * q) as usize];
        let slow = l.iter().filter(|&&x| x > 300_000).count();
        println!("{n:8} n={:4} p50={:>8} p90={:>8} p99={:>8} max={:>8} slow>300us={:.3}", l.len(), p(0.5), p(0.9), p(0.99), l[l.len()-1], slow as f64 / l.len() as f64);
    }
}
