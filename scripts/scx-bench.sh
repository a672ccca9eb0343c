#!/usr/bin/env bash
# The sched_ext figures of docs/results/README.md, rerunnable: builds the release uxsched and the
# kernel's scx_simple (scripts/build-scx-simple.sh), boots the 6.12 test guest (../shared/kernels, or
# $UXSCHED_GUEST_KERNEL; QEMU/TCG with -icount, 2 vCPUs) and runs in it
#   uxsched bench SCENARIO --modes idle,stock,scx-simple,scx-vtcfs,scx-mcfs,scx-facfs --layout L
# for each scenario and layout; every report (table .txt, JSON with the samples, stderr .err)
# and the guest's console land in OUT.
#
# Usage: scripts/scx-bench.sh OUT
# Settings (environment): SCX_BENCH_SCENARIOS (default painting,alarm,worker),
# SCX_BENCH_LAYOUTS (no-autogroup,same-session), SCX_BENCH_REPS (2), SCX_BENCH_DURATION (5s),
# SCX_BENCH_EXTRA (more `uxsched bench` arguments, e.g. --load-workers 2), SCX_BENCH_SCX_ARGS (more
# `uxsched scx run` arguments for the scx-* modes, e.g. --full).
# Needs: bash scripts/setup.sh (qemu, busybox, stress-ng, ziglang, linux-source-6.12); about
# 15-25 minutes on a 2-vCPU machine. Build steps run at the lowest priority.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { echo "usage: scripts/scx-bench.sh OUT" >&2; exit 2; }
OUT=$(realpath -m "$1")
low() { nice -n 19 chrt -i 0 "$@"; }
low cargo build --release --locked -p uxsched --bin uxsched --example scx_bench_guest
SIMPLE=$(low bash scripts/build-scx-simple.sh)
mkdir -p "$OUT"
echo "scx-bench: started $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(nproc) host CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/run.txt"
low target/release/examples/scx_bench_guest target/release/uxsched "$SIMPLE" "$OUT" 2>&1 | tee -a "$OUT/run.txt"
echo "scx-bench: ended $(date -u +%Y-%m-%dT%H:%M:%SZ), load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/run.txt"
