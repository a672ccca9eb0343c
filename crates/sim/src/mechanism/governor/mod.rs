//! cpufreq governors as mechanisms (seed 004 §3.2, §5.1): each samples its frequency domains on
//! its own timer — coarser than the scheduler tick, as on the paper's phones — and sets the
//! domain's operating point through [`Control::set_domain_khz`].
//!
//! One file per governor; this file is the shared driver: it keeps, per domain, the busy time
//! of every CPU at the last sample and hands the governor the domain's load — the maximum over
//! its CPUs of busy time / wall time since the last sample (cpufreq's `dbs_update` takes the
//! maximum over the policy's CPUs too).

mod conservative;
mod interactive;
mod ondemand;
mod performance;
mod powersave;
mod schedutil;

pub use conservative::Conservative;
pub use interactive::Interactive;
pub use ondemand::Ondemand;
pub use performance::Performance;
pub use powersave::Powersave;
pub use schedutil::Schedutil;

use crate::engine::{Control, Mechanism};
use crate::policy::Params;
use uxsched_model::Nanos;

/// Names of the governors, each also a mechanism name (`--mech ondemand`).
pub const GOVERNOR_NAMES: &[&str] = &[
    "performance",
    "powersave",
    "ondemand",
    "conservative",
    "interactive",
    "schedutil",
];

/// What a governor sees at one sample of one domain.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    pub domain: usize,
    pub now: Nanos,
    /// Busy fraction 0..=1 since the last sample, maximum over the domain's CPUs.
    pub load: f64,
    pub cur_khz: u32,
    /// Operating points, ascending.
    pub opps: &'a [u32],
}

/// A cpufreq governor's decision rule.
pub trait Governor {
    fn name(&self) -> &'static str;
    /// The frequency to start at, if the governor pins one (performance, powersave).
    fn initial_khz(&self, opps: &[u32]) -> Option<u32> {
        let _ = opps;
        None
    }
    /// Sampling period; `None` = never samples (a static governor).
    fn period(&self) -> Option<Nanos>;
    /// Decide the next frequency and when to sample again (`None`: after [`Governor::period`]).
    fn sample(&mut self, s: &Sample) -> (u32, Option<Nanos>);
}

/// Lowest operating point ≥ `khz` (cpufreq `CPUFREQ_RELATION_L`), else the highest.
pub fn relation_l(opps: &[u32], khz: f64) -> u32 {
    opps.iter()
        .copied()
        .find(|&f| f as f64 >= khz)
        .unwrap_or(*opps.last().expect("a domain has operating points"))
}

/// Highest operating point ≤ `khz` (cpufreq `CPUFREQ_RELATION_H`), else the lowest.
pub fn relation_h(opps: &[u32], khz: f64) -> u32 {
    opps.iter()
        .rev()
        .copied()
        .find(|&f| f as f64 <= khz)
        .unwrap_or(opps[0])
}

/// Runs a [`Governor`] on every frequency domain.
pub struct GovernorMech<G> {
    gov: G,
    /// Per domain: time of the last sample and each CPU's busy time then.
    last: Vec<(Nanos, Vec<(usize, Nanos)>)>,
}

impl<G: Governor> GovernorMech<G> {
    pub fn new(gov: G) -> Self {
        GovernorMech {
            gov,
            last: Vec::new(),
        }
    }

    fn snapshot(ctl: &Control, domain: usize) -> Vec<(usize, Nanos)> {
        (0..ctl.ncpus())
            .filter(|&c| ctl.cpu_domain(c) == domain)
            .map(|c| (c, ctl.cpu_busy(c)))
            .collect()
    }
}

impl<G: Governor> Mechanism for GovernorMech<G> {
    fn name(&self) -> &'static str {
        self.gov.name()
    }

    fn start(&mut self, ctl: &mut Control) {
        for d in 0..ctl.domains() {
            if let Some(khz) = self.gov.initial_khz(ctl.domain_opps(d)) {
                ctl.set_domain_khz(d, khz)
                    .expect("initial_khz returns an operating point");
            }
            self.last.push((ctl.now(), Self::snapshot(ctl, d)));
            if let Some(p) = self.gov.period() {
                ctl.timer_at(ctl.now() + p, d as u64);
            }
        }
    }

    fn timer(&mut self, token: u64, ctl: &mut Control) {
        let d = token as usize;
        let now = ctl.now();
        let busy_now = Self::snapshot(ctl, d);
        let (t0, busy0) = &self.last[d];
        let wall = (now - t0).max(1) as f64;
        let load = busy_now
            .iter()
            .zip(busy0)
            .map(|(&(_, b), &(_, a))| (b - a) as f64 / wall)
            .fold(0.0, f64::max)
            .min(1.0);
        let opps = ctl.domain_opps(d).to_vec();
        let (khz, next) = self.gov.sample(&Sample {
            domain: d,
            now,
            load,
            cur_khz: ctl.domain_khz(d),
            opps: &opps,
        });
        ctl.set_domain_khz(d, khz)
            .expect("governors choose operating points");
        self.last[d] = (now, busy_now);
        if let Some(p) = next.or(self.gov.period()) {
            ctl.timer_at(now + p, token);
        }
    }
}

/// Build a governor mechanism by name with its `NAME.` tunables; `None` if not a governor.
pub fn by_name(name: &str, params: &mut Params) -> Option<Result<Box<dyn Mechanism>, String>> {
    fn boxed<G: Governor + 'static>(g: Result<G, String>) -> Result<Box<dyn Mechanism>, String> {
        g.map(|g| Box::new(GovernorMech::new(g)) as Box<dyn Mechanism>)
    }
    Some(match name {
        "performance" => Ok(Box::new(GovernorMech::new(Performance)) as Box<dyn Mechanism>),
        "powersave" => Ok(Box::new(GovernorMech::new(Powersave)) as Box<dyn Mechanism>),
        "ondemand" => boxed(Ondemand::from_params(params)),
        "conservative" => boxed(Conservative::from_params(params)),
        "interactive" => boxed(Interactive::from_params(params)),
        "schedutil" => boxed(Schedutil::from_params(params)),
        _ => return None,
    })
}

/// Read an integer percentage tunable in 1..=100.
fn take_pct(params: &mut Params, key: &str, default: u32) -> Result<u32, String> {
    let v = params.take_num::<u32>(key)?.unwrap_or(default);
    if !(1..=100).contains(&v) {
        return Err(format!(
            "--param {key}={v}: must be a percentage in 1..=100"
        ));
    }
    Ok(v)
}

/// Read a positive duration tunable.
fn take_period(params: &mut Params, key: &str, default: Nanos) -> Result<Nanos, String> {
    let v = params.take_duration(key)?.unwrap_or(default);
    if v == 0 {
        return Err(format!("--param {key}: must be > 0"));
    }
    Ok(v)
}
