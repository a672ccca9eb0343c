#!/usr/bin/env bash
# Issue 30's three Chromium cells once the learning store reaches the next start (616c530: the bench starts
# Chromium with one command line per run; e08652b/fccd853: what the store knows is raised at focus),
# one bench run each, modes interleaved; run from the repository root as root on a quiet machine.
# BIN: the binary (default target/release/uxsched).
exec scripts/chromium-cells.sh docs/results/2026-11-28/chromium-warm-store 8
