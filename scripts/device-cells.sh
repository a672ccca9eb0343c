#!/usr/bin/env bash
# Issue 10's and issue 33's cells on a lent machine that has no package registry (the 16-CPU
# device machine):
#   scripts/device-cells.sh KIT OUTDIR REPS DURATION CELL…   (CELL = SCENARIO/LAYOUT[/TAG])
# TAG as in bench-matrix.sh: none (issue 10's modes), `storage` (issue 33's modes under the
# scenario's own load) or `storage-write` (the same under `write`).
# KIT is a folder built here and carried there: KIT/bin holds a stripped `uxsched`, `stress-ng`
# and `fio`, KIT/lib their shared libraries other than glibc's (see docs/bench.md, "On another
# machine"). Writes OUTDIR/env.txt (kernel, CPUs, cgroup layout, block devices and what
# `uxsched doctor` finds) and, per cell, the report (OUTDIR/SCENARIO_LAYOUT[_TAG].txt, headed like
# bench-matrix.sh's) and every run's samples (.json).
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
  echo "fio: $(fio --version)"
  for q in /sys/block/*/queue; do
    d=${q%/queue}
    echo "block ${d##*/}: scheduler $(cat "$q/scheduler") rotational $(cat "$q/rotational")" \
      "nr_requests $(cat "$q/nr_requests") max_sectors_kb $(cat "$q/max_sectors_kb")"
  done
  echo "/var/tmp on: $(df --output=source,fstype,size /var/tmp | tail -1)"
  echo "--- uxsched doctor"
  uxsched doctor || echo "(doctor exited with status $?)"
} >"$out/env.txt" 2>&1
for cell in "$@"; do
  scenario=${cell%%/*} rest=${cell#*/}
  layout=${rest%%/*} tag=${rest#*/}
  [ "$tag" = "$rest" ] && tag=
  case $tag in
    "") modes=idle,stock,android,fifo,uxsched,uxsched-roles load=() ;;
    storage) modes=idle,stock,android,s76,uxsched-cpu,uxsched,uxsched-bfq load=() ;;
    storage-write) modes=idle,stock,android,s76,uxsched-cpu,uxsched,uxsched-bfq load=(--load write) ;;
    *) echo "unknown cell tag '$tag' in $cell" >&2; exit 2 ;;
  esac
  args=("$scenario" --layout "$layout" --modes "$modes" "${load[@]}" --reps "$reps"
    --duration "$duration")
  envs=()
  if [ "${LOGS:-0}" = 1 ]; then
    args+=(--keep-logs)
    envs=(RUST_LOG=uxsched_daemon=debug,uxsched_tracker=debug)
  fi
  name=${cell//\//_}
  report="$out/$name.txt"
  {
    echo "# $(date -u +%FT%TZ) loadavg $(cat /proc/loadavg)"
    echo "# uxsched bench ${args[*]}"
  } >"$report"
  env "${envs[@]}" uxsched bench "${args[@]}" --save "$out/$name.json" >>"$report" 2>&1 ||
    echo "# bench failed with status $?" >>"$report"
  echo "# end $(date -u +%FT%TZ) loadavg $(cat /proc/loadavg)" >>"$report"
  kept=$(sed -n 's/^uxsched bench: the runs. logs are kept in //p' "$report" | tail -1)
  if [ -n "$kept" ]; then
    (cd "$kept" && find . -name 'daemon*.log' -print0 | tar czf - --null -T -) \
      >"$out/$name.logs.tar.gz"
  fi
done
