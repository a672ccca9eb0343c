//! The explicit source: `uxsched focus` and the socket API (what a compositor plugin or a
//! launcher calls). The server delivers the request; this decides whether the caller may
//! focus that process — root may focus anything, a `control_uids` user only its own processes
//! (else any allowed user could boost someone else's hog).

use crate::identity;
use crate::state::AppId;

/// Check a focus request from `uid` for `pid`; `Ok(None)` clears the focus.
pub fn authorize(uid: u32, pid: Option<i32>) -> Result<Option<AppId>, String> {
    let Some(pid) = pid else {
        return Ok(None);
    };
    if pid <= 0 {
        return Err(format!("pid {pid} is not a process id"));
    }
    let app = AppId::of(pid).map_err(|e| format!("cannot focus pid {pid}: {e}"))?;
    if uid != 0 {
        let owner = identity::owner_uid(pid).map_err(|e| format!("pid {pid}: {e}"))?;
        if owner != uid {
            return Err(format!(
                "pid {pid} belongs to uid {owner}; uid {uid} may only focus its own processes"
            ));
        }
    }
    Ok(Some(app))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_may_focus_a_live_process_others_only_their_own() {
        let me = std::process::id() as i32;
        assert_eq!(authorize(0, Some(me)).unwrap().unwrap().pid, me);
        assert_eq!(authorize(0, None), Ok(None));
        assert!(authorize(0, Some(-1)).is_err());
        assert!(authorize(0, Some(1 << 30))
            .unwrap_err()
            .contains("cannot focus"));
        // pid 1 is root's; uid 12345 may not focus it.
        assert!(authorize(12345, Some(1))
            .unwrap_err()
            .contains("only focus its own"));
    }
}
