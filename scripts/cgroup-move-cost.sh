#!/usr/bin/env bash
# What one cgroup move costs the daemon's loop (docs/mechanisms.md, "The loop and cgroup moves"):
# a `sleep` process is moved into a scratch group of the CPU hierarchy and back, MOVES times, with
# HOGS busy loops running meanwhile; each write's wall time is printed, then min / median / max.
#   sudo scripts/cgroup-move-cost.sh [HOGS] [MOVES]      (default: 0 10)
# The write takes cgroup_threadgroup_rwsem, whose writer waits for an RCU grace period unless
# the hierarchy favours dynamic changes (`favordynmods`). Leaves nothing behind (a trap removes
# the group and stops the hogs and the sleep).
set -euo pipefail
hogs=${1:-0}
moves=${2:-10}
if [ -d /sys/fs/cgroup/cpu ] && [ -f /sys/fs/cgroup/cpu/tasks ]; then
  root=/sys/fs/cgroup/cpu # cgroup v1 `cpu`
else
  root=/sys/fs/cgroup # cgroup v2
fi
group="$root/uxsched-move-cost-$$"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rmdir "$group" 2>/dev/null || true
}
trap cleanup EXIT
mkdir "$group"
for _ in $(seq "$hogs"); do
  (while :; do :; done) &
  pids+=($!)
done
sleep 600 &
victim=$!
pids+=("$victim")
sleep 1
echo "# $(date -u +%FT%TZ) kernel $(uname -r), $(nproc) CPUs, hierarchy $root, $hogs hogs, loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# mount options: $(awk -v r="$root" '$2==r {print $4}' /proc/mounts)"
times=()
for i in $(seq "$moves"); do
  sleep 0.3
  for way in in out; do
    dest=$group
    [ "$way" = out ] && dest=$root
    t0=$(date +%s%N)
    echo "$victim" >"$dest/cgroup.procs"
    t1=$(date +%s%N)
    us=$(((t1 - t0) / 1000))
    times+=("$us")
    echo "move $i $way: $us µs"
  done
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "moves: %d, min %.1f ms, median %.1f ms, max %.1f ms\n", NR, a[1]/1000, a[int((NR+1)/2)]/1000, a[NR]/1000}'
