//! `uxsched_sweep._engine`: one sweep point in, its outcome out, through crates/simrun — the same
//! code the CLI's local threads run, so a Ray worker's digest is the local one (docs/sweep.md).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Runs one point (a `Job` as JSON, as `uxsched sim sweep --ray` sends it) and returns its
/// `Outcome` as JSON: the journal's line. A bad point raises `ValueError` (Ray does not retry it).
#[pyfunction]
fn simulate(py: Python<'_>, point_json: &str) -> PyResult<String> {
    let job: uxsched_simrun::Job = serde_json::from_str(point_json)
        .map_err(|e| PyValueError::new_err(format!("not a sweep point: {e}")))?;
    // The run holds no Python object: let Ray's own threads have the interpreter meanwhile.
    let outcome = py
        .detach(|| uxsched_simrun::run_job(&job))
        .map_err(|e| PyValueError::new_err(format!("point {} ({}): {e:#}", job.index, job.id)))?;
    serde_json::to_string(&outcome).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Which engine sources the module was built from; `sim sweep --ray` refuses a worker whose
/// wheel differs from its own binary.
#[pyfunction]
fn engine() -> &'static str {
    uxsched_simrun::ENGINE
}

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(engine, m)?)?;
    Ok(())
}
