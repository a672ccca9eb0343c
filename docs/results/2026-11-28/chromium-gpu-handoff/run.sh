#!/usr/bin/env bash
# Issue 30's three Chromium cells after the hand-off rule across processes (9213fb9: the GPU
# process's IO thread, handed the frame by the renderer's compositor, found when it passes it to viz),
# one bench run each, modes interleaved; run from the repository root as root on a quiet machine.
# BIN: the binary (default target/release/uxsched).
exec scripts/chromium-cells.sh docs/results/2026-11-28/chromium-gpu-handoff 8
