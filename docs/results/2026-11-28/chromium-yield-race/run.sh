#!/usr/bin/env bash
# Issue 30's three Chromium cells after the yield-race fix (d2e616e: a yield records the boost
# it overrode, not the pass's new wish), one bench run each, modes interleaved; run from the
# repository root as root on a quiet machine.
# BIN: the binary (default target/release/uxsched).
exec scripts/chromium-cells.sh docs/results/2026-11-28/chromium-yield-race 4
