//! [`Digest`]: a fingerprint of the event log, so `--determinism-check` can compare two runs
//! without keeping either log.
//!
//! 64-bit FNV-1a over the run's metadata (its JSON) and a canonical encoding of each record: a
//! one-byte tag, then each field in declaration order as fixed-width little-endian integers
//! (`Option` as a presence byte then the value, or 0 when absent), then the end time. Independent of `Debug` formatting, serde,
//! platform endianness and struct layout. Not cryptographic; it only detects divergence.

use uxsched_model::Nanos;

use crate::log::{LeaveReason, Record, RunMeta, Sink};

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

#[derive(Debug, Clone)]
pub struct Digest {
    hash: u64,
    records: u64,
}

impl Default for Digest {
    fn default() -> Self {
        Digest {
            hash: FNV_OFFSET,
            records: 0,
        }
    }
}

impl Digest {
    pub fn new() -> Self {
        Self::default()
    }

    /// The digest so far.
    pub fn value(&self) -> u64 {
        self.hash
    }

    /// The digest as 16 lowercase hex digits.
    pub fn hex(&self) -> String {
        format!("{:016x}", self.hash)
    }

    /// How many records went in (reported next to a mismatch).
    pub fn records(&self) -> u64 {
        self.records
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.hash ^= u64::from(b);
            self.hash = self.hash.wrapping_mul(FNV_PRIME);
        }
    }

    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }

    /// A record's tag byte, then its integer fields.
    fn tagged(&mut self, tag: u8, fields: &[u64]) {
        self.bytes(&[tag]);
        for &v in fields {
            self.u64(v);
        }
    }

    fn opt(&mut self, v: Option<u32>) {
        match v {
            Some(v) => {
                self.bytes(&[1]);
                self.u64(u64::from(v));
            }
            None => self.bytes(&[0]),
        }
    }
}

impl Sink for Digest {
    /// The run's metadata goes in first (as its JSON, which serde writes in field order), so two
    /// runs that name or group tasks differently never digest alike.
    fn begin(&mut self, meta: &RunMeta) {
        let json = serde_json::to_vec(meta).expect("RunMeta always serialises");
        self.u64(json.len() as u64);
        self.bytes(&json);
    }

    fn record(&mut self, rec: &Record) {
        self.records += 1;
        match *rec {
            Record::Switch {
                t,
                cpu,
                prev,
                reason,
                next,
            } => {
                self.tagged(0, &[t, u64::from(cpu)]);
                self.opt(prev);
                self.bytes(&[reason_code(reason)]);
                self.opt(next);
            }
            Record::Wakeup {
                t,
                task,
                cpu,
                waker,
            } => {
                self.tagged(1, &[t, u64::from(task), u64::from(cpu)]);
                self.opt(waker);
            }
            Record::Migrate { t, task, from, to } => {
                self.tagged(2, &[t, u64::from(task), u64::from(from), u64::from(to)])
            }
            Record::Freq { t, domain, khz } => {
                self.tagged(3, &[t, u64::from(domain), u64::from(khz)])
            }
            Record::InteractionBegin { t, id, name, task } => {
                self.tagged(4, &[t, id, u64::from(name), u64::from(task)])
            }
            Record::InteractionEnd { t, id, task } => self.tagged(5, &[t, id, u64::from(task)]),
            Record::Period { t, task, slack } => {
                self.tagged(6, &[t, u64::from(task), slack as u64])
            }
            Record::LoopDone { t, task } => self.tagged(7, &[t, u64::from(task)]),
            Record::Exit { t, task } => self.tagged(8, &[t, u64::from(task)]),
            Record::Io {
                t,
                task,
                wait,
                service,
            } => self.tagged(10, &[t, u64::from(task), wait, service]),
            Record::Throttle { t, group, cpu, on } => {
                self.tagged(9, &[t, u64::from(group), u64::from(cpu), u64::from(on)])
            }
        }
    }

    fn end(&mut self, end: Nanos) {
        self.bytes(&[0xff]);
        self.u64(end);
    }
}

/// A switch's reason as its one-byte code.
fn reason_code(reason: LeaveReason) -> u8 {
    match reason {
        LeaveReason::Preempted => 0,
        LeaveReason::Yielded => 1,
        LeaveReason::Blocked => 2,
        LeaveReason::Exited => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_reference_vector() {
        // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c (the published test vector).
        let mut d = Digest::new();
        d.bytes(b"a");
        assert_eq!(d.hex(), "af63dc4c8601ec8c");
    }

    #[test]
    fn any_field_change_changes_the_digest() {
        let rec = |waker| Record::Wakeup {
            t: 5,
            task: 1,
            cpu: 0,
            waker,
        };
        let run = |recs: &[Record]| {
            let mut d = Digest::new();
            for r in recs {
                d.record(r);
            }
            d.end(10);
            d.value()
        };
        let a = run(&[rec(None)]);
        assert_eq!(a, run(&[rec(None)]));
        assert_ne!(a, run(&[rec(Some(0))]));
        assert_ne!(
            a,
            run(&[Record::Wakeup {
                t: 6,
                task: 1,
                cpu: 0,
                waker: None
            }])
        );
        assert_ne!(a, run(&[rec(None), rec(None)]));
    }
}
