//! The focused app's process family (`uxsched_os::process_tree::family`: the same program under
//! it, as the same user), which every mode places as the app: a browser's renderers and GPU
//! process make its frames, and left in the session's task group with the load they wait behind
//! it (issue 30). Walking the tree reads every thread's `children` file, so the family is read
//! again at most every [`TTL`] (a new tab's renderer is placed within it) and at each focus
//! change; the identity of each thread is still checked at every scan.

use crate::types::AppId;
use std::time::{Duration, Instant};

/// How long a family read is reused.
pub(super) const TTL: Duration = Duration::from_secs(1);

#[derive(Default)]
pub(super) struct FamilyCache {
    read: Option<(AppId, Instant, Vec<i32>)>,
}

impl FamilyCache {
    /// The family of `app`, read afresh when it is another app's or older than [`TTL`].
    pub(super) fn of(&mut self, app: AppId) -> Vec<i32> {
        match &self.read {
            Some((a, at, pids)) if *a == app && at.elapsed() < TTL => pids.clone(),
            _ => {
                let pids = uxsched_os::process_tree::family(app.pid);
                self.read = Some((app, Instant::now(), pids.clone()));
                pids
            }
        }
    }
}
