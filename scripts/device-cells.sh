#!/usr/bin/env bash
# Issue 10's cells on a lent machine that has no package registry (the 16-CPU device machine):
#   scripts/device-cells.sh KIT OUTDIR REPS DURATION CELL…      (CELL = SCENARIO/LAYOUT)
# KIT is a folder built here and carried there: KIT/bin holds a stripped `uxsched` and
# `stress-ng`, KIT/lib their shared libraries other than glibc's (see docs/bench.md, "On another
# machine"). Writes OUTDIR/env.txt (kernel, CPUs, cgroup layout) and, per cell, the report
# (OUTDIR/SCENARIO_LAYOUT.txt, headed like bench-matrix.sh's) and every run's samples (.json).
# LOGS=1: the daemons run with debug logs (the fast path's timings, the tracker's sets), and every
# run's daemon log of a cell comes back in OUTDIR/SCENARIO_LAYOUT.logs.tar.gz (one file per cell:
# the device returns at most 8 files).
set -euo pipefail
kit=$(cd "${1:?usage: scripts/device-cells.sh KIT OUTDIR REPS DURATION CELL…}" && pwd)
out=${2:?}
reps=${3:?}
duration=${4:?}
shift 4
mkdir -p "$out"
export PATH="$kit/bin:$PATH" LD_LIBRARY_PATH="$kit/lib"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "kernel: $(uname -r)"
  echo "cpus: $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-))"
  echo "autogroup: $(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo absent)"
  echo "cgroup fs: $(stat -fc %T /sys/fs/cgroup)"
  echo "cgroup v2 controllers: $(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null || echo none)"
  echo "sched_ext: $(cat /sys/kernel/sched_ext/state 2>/dev/null || echo absent)"
  echo "systemd: $([ -d /run/systemd/system ] && echo yes || echo no)"
  echo "uxsched: $(uxsched --version)"
} >"$out/env.txt" 2>&1
for cell in "$@"; do
  scenario=${cell%%/*} layout=${cell#*/}
  args=("$scenario" --layout "$layout" --modes idle,stock,android,fifo,uxsched,uxsched-roles
    --reps "$reps" --duration "$duration")
  envs=()
  if [ "${LOGS:-0}" = 1 ]; then
    args+=(--keep-logs)
    envs=(RUST_LOG=uxsched_daemon=debug,uxsched_tracker=debug)
  fi
  report="$out/${scenario}_${layout}.txt"
  {
    echo "# $(date -u +%FT%TZ) loadavg $(cat /proc/loadavg)"
    echo "# uxsched bench ${args[*]}"
  } >"$report"
  env "${envs[@]}" uxsched bench "${args[@]}" --save "$out/${scenario}_${layout}.json" >>"$report" 2>&1 ||
    echo "# bench failed with status $?" >>"$report"
  echo "# end $(date -u +%FT%TZ) loadavg $(cat /proc/loadavg)" >>"$report"
  kept=$(sed -n 's/^uxsched bench: the runs. logs are kept in //p' "$report" | tail -1)
  if [ -n "$kept" ]; then
    (cd "$kept" && find . -name 'daemon*.log' -print0 | tar czf - --null -T -) \
      >"$out/${scenario}_${layout}.logs.tar.gz"
  fi
done
