//! CPUs, frequency domains and operating points.
//!
//! Work ([`crate::workload::Event::Run`]) is expressed in reference-CPU nanoseconds: the time it
//! takes on a CPU of capacity 1024 running at the platform's reference frequency (the highest
//! frequency of any domain). A CPU of capacity `c` at frequency `f` retires work at
//! `speed = c/1024 × f/f_ref`, the scaling rt-app's calibrated `run` has on real hardware.

use serde::Serialize;

/// Full capacity of the biggest CPU (`SCHED_CAPACITY_SCALE`).
pub const CAPACITY_SCALE: u32 = 1024;

/// Speeds are fixed-point with this many units per "reference speed".
pub const SPEED_ONE: u64 = 1 << 20;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PlatformSpec {
    pub domains: Vec<DomainSpec>,
}

/// A frequency domain: CPUs that share one clock (a cluster).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DomainSpec {
    pub name: String,
    pub cpus: usize,
    /// Capacity of each CPU at the domain's highest frequency, out of 1024.
    pub capacity: u32,
    /// Operating points in kHz, ascending. One entry = fixed frequency.
    pub opps_khz: Vec<u32>,
    /// Frequency the domain starts at (kHz); must be one of `opps_khz`.
    pub initial_khz: u32,
}

impl PlatformSpec {
    /// `n` identical CPUs of full capacity in one domain at a fixed 1 GHz.
    pub fn uniform(n: usize) -> Self {
        PlatformSpec {
            domains: vec![DomainSpec {
                name: "cpu".into(),
                cpus: n,
                capacity: CAPACITY_SCALE,
                opps_khz: vec![1_000_000],
                initial_khz: 1_000_000,
            }],
        }
    }

    /// A phone-like big.LITTLE platform: 4 little CPUs (capacity 446, 0.5–1.8 GHz) and 4 big
    /// CPUs (capacity 1024, 0.7–2.4 GHz), at their top frequencies.
    pub fn phone() -> Self {
        PlatformSpec {
            domains: vec![
                DomainSpec {
                    name: "little".into(),
                    cpus: 4,
                    capacity: 446,
                    opps_khz: vec![500_000, 900_000, 1_300_000, 1_800_000],
                    initial_khz: 1_800_000,
                },
                DomainSpec {
                    name: "big".into(),
                    cpus: 4,
                    capacity: 1024,
                    opps_khz: vec![700_000, 1_200_000, 1_800_000, 2_400_000],
                    initial_khz: 2_400_000,
                },
            ],
        }
    }

    pub fn cpu_count(&self) -> usize {
        self.domains.iter().map(|d| d.cpus).sum()
    }

    /// The reference frequency: the highest operating point of any domain.
    pub fn ref_khz(&self) -> u32 {
        self.domains
            .iter()
            .flat_map(|d| d.opps_khz.iter().copied())
            .max()
            .unwrap_or(1)
    }

    /// Check the spec; the message names the domain and field.
    pub fn validate(&self) -> Result<(), String> {
        if self.domains.is_empty() || self.cpu_count() == 0 {
            return Err("platform has no CPUs".into());
        }
        if self.cpu_count() > 1024 {
            return Err(format!(
                "platform has {} CPUs; at most 1024 are supported",
                self.cpu_count()
            ));
        }
        for d in &self.domains {
            if d.capacity == 0 || d.capacity > CAPACITY_SCALE {
                return Err(format!(
                    "domain `{}`: capacity {} is outside 1..=1024",
                    d.name, d.capacity
                ));
            }
            if d.opps_khz.is_empty() || d.opps_khz.windows(2).any(|w| w[0] >= w[1]) {
                return Err(format!(
                    "domain `{}`: opps_khz must be non-empty and strictly ascending",
                    d.name
                ));
            }
            if !d.opps_khz.contains(&d.initial_khz) {
                return Err(format!(
                    "domain `{}`: initial_khz {} is not an operating point",
                    d.name, d.initial_khz
                ));
            }
        }
        Ok(())
    }

    /// Fixed-point speed of a CPU with `capacity` at `khz` ([`SPEED_ONE`] = reference speed).
    pub fn speed(&self, capacity: u32, khz: u32) -> u64 {
        (SPEED_ONE as u128 * capacity as u128 * khz as u128
            / (CAPACITY_SCALE as u128 * self.ref_khz() as u128)) as u64
    }
}
