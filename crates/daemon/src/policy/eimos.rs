//! `eimos` (seed 001, EIMOS): the topmost process gets the priority bonus — every thread of it
//! at the nice −19 equivalent (bounded by `min_nice`), in uxsched's foreground group so the
//! bonus also holds against other sessions' autogroups. Restored when the topmost process
//! changes. (The ×8 read-ahead half of EIMOS is the prefetch actuator.)

use crate::types::{Desired, Target};

use super::Policy;
use crate::config::Config;
use crate::state::State;
use crate::types::Group;

pub struct Eimos;

impl Policy for Eimos {
    fn prefetches(&self, cfg: &Config) -> bool {
        cfg.eimos.prefetch
    }

    fn desired(&self, state: &State, cfg: &Config) -> Desired {
        let mut d = Desired::nothing(cfg);
        if let Some(app) = &state.focus {
            d.each(app, |_| {
                Some(Target {
                    nice: Some(cfg.eimos.nice),
                    group: Some(Group::Fg),
                    ..Target::default()
                })
            });
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_state::{fg_state, tid};
    use super::*;

    #[test]
    fn every_thread_of_the_topmost_process_gets_the_bonus() {
        let d = Eimos.desired(&fg_state(), &Config::default());
        assert_eq!(d.threads.len(), 3);
        for t in [100, 101, 102] {
            let t = tid(&d, t).unwrap();
            assert_eq!(t.nice, Some(-19));
            assert_eq!(t.group, Some(Group::Fg));
            assert_eq!(t.slice_ns, None);
        }
    }
}
