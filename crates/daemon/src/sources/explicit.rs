//! The explicit source: `uxsched focus` and the socket API (what a compositor plugin or a
//! launcher calls). The server delivers the request; this decides whether the caller may
//! focus that process — root may focus anything, a `control_uids` user only its own processes
//! (else any allowed user could boost someone else's hog).

use super::{admit, Owner};
use crate::types::AppId;

/// Check a focus request from `uid` for `pid`; `Ok(None)` clears the focus. Identity and owner
/// come from one consistent look at the process ([`admit`]).
pub fn authorize(uid: u32, pid: Option<i32>) -> Result<Option<AppId>, String> {
    let Some(pid) = pid else {
        return Ok(None);
    };
    let owner = Owner { uid, any: uid == 0 };
    admit(pid, owner).map(Some).map_err(|e| match uid {
        0 => e,
        _ => format!("{e}; uid {uid} may only focus its own processes"),
    })
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
