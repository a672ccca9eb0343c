//! The seed papers' mechanisms that are not fair-class policies, one file each, attached to a run
//! with `--mech NAME` (see [`crate::engine::hooks`] for what a mechanism can see and do).

use crate::engine::Mechanism;
use crate::policy::Params;

/// Names accepted by [`by_name`].
pub const MECHANISM_NAMES: &[&str] = &[];

/// Build a mechanism by name; it takes its own `NAME.` tunables from `params`.
pub fn by_name(name: &str, params: &mut Params) -> Result<Box<dyn Mechanism>, String> {
    let _ = params;
    Err(format!(
        "unknown mechanism `{name}` (valid: {})",
        if MECHANISM_NAMES.is_empty() {
            "none yet".to_string()
        } else {
            MECHANISM_NAMES.join(", ")
        }
    ))
}
