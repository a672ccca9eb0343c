"""uxsched's simulator for `uxsched sim sweep --ray` workers (docs/sweep.md).

simulate(point_json) -> outcome_json runs one sweep point exactly as the CLI's local runner
does (crates/simrun); engine() names the engine sources the wheel was built from.
"""

from ._engine import engine, simulate

__all__ = ["engine", "simulate"]
