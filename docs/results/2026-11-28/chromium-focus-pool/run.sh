#!/usr/bin/env bash
# Issue 30's three Chromium cells after the focus stops raising a learned name a pool shares (binary from
# 5fbe436: the app's ThreadPoolForeg join when the path reaches them),
# one bench run each, modes interleaved; run from the repository root as root on a quiet machine.
# BIN: the binary (default target/release/uxsched).
exec scripts/chromium-cells.sh docs/results/2026-11-28/chromium-focus-pool 8
