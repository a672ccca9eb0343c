//! The seed papers' mechanisms that are not fair-class policies, one file each, attached to a run
//! with `--mech NAME` (see [`crate::engine::hooks`] for what a mechanism can see and do).

pub mod boost;
pub mod eimos;
pub mod facfs;
pub mod governor;
pub mod shuffledog_cpu;
pub mod shuffledog_io;
pub mod tracker;

use crate::engine::Mechanism;
use crate::policy::Params;

/// Names accepted by [`by_name`].
pub const MECHANISM_NAMES: &[&str] = &[
    "boost",
    "eimos",
    "facfs",
    "performance",
    "powersave",
    "ondemand",
    "conservative",
    "interactive",
    "schedutil",
    "shuffledog-tracker",
];

/// Build a mechanism by name; it takes its own `NAME.` tunables from `params`, and any other
/// `NAME.` key is an error naming it.
pub fn by_name(name: &str, params: &mut Params) -> Result<Box<dyn Mechanism>, String> {
    let mut own = params.split_prefix(&format!("{name}."));
    let m: Box<dyn Mechanism> = match name {
        "boost" => Box::new(boost::Boost::from_params(&mut own)?),
        "eimos" => Box::new(eimos::Eimos::from_params(&mut own)?),
        "facfs" => Box::new(facfs::FaCfs::from_params(&mut own)?),
        "shuffledog-tracker" => Box::new(tracker::Tracker::from_params(&mut own)?),
        _ => match governor::by_name(name, &mut own) {
            Some(g) => g?,
            None => {
                return Err(format!(
                    "unknown mechanism `{name}` (valid: {})",
                    MECHANISM_NAMES.join(", ")
                ))
            }
        },
    };
    own.finish(name)?;
    Ok(m)
}
