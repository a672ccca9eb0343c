#!/usr/bin/env bash
# Which threads wait for a CPU while a command runs: `perf sched record` around it, then per
# thread the time it spent runnable but not running (perf's "sch delay"), summed, its largest
# wait, how many waits were over 2 ms, and the share of its runs at a real-time priority. Used to find the threads of an app's frame path that
# the daemon left unboosted (docs/tracker.md, "Hand-offs"). Run as root.
#   sudo scripts/sched-delay.sh OUT_DIR [--from S --to S] -- COMMAND...
# (--from/--to: perf's clock, seconds, to keep one mode's window; KEEP_PERF=1 keeps perf.data).
# A bench run starts a fresh app per mode, so each mode's threads have their own pids.
set -euo pipefail
out=${1:?usage: sched-delay.sh OUT_DIR [--from S --to S] -- COMMAND...}
shift
from=0 to=1e12
while [[ $# -gt 0 && $1 != -- ]]; do
	case $1 in
	--from) from=$2; shift 2 ;;
	--to) to=$2; shift 2 ;;
	*) echo "sched-delay.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
[[ ${1:-} == -- ]] || { echo "sched-delay.sh: give the command after --" >&2; exit 2; }
shift
command -v perf >/dev/null || { echo "sched-delay.sh: needs perf (apt-get install linux-perf)" >&2; exit 1; }
mkdir -p "$out"
perf sched record -a -o "$out/perf.data" -- "$@" >"$out/command.out" 2>"$out/command.err"
perf sched timehist -i "$out/perf.data" >"$out/timehist.txt" 2>/dev/null
# The priority each thread ran at: the share of its switch-ins as real-time (prio < 100), i.e.
# whether the daemon had raised it.
perf script -i "$out/perf.data" -F time,trace 2>/dev/null | awk -v a="$from" -v b="$to" '
	$1 + 0 >= a && $1 + 0 <= b && /next_pid=/ {
		for (i = 1; i <= NF; i++) {
			if ($i ~ /^next_pid=/) { split($i, x, "="); pid = x[2] }
			if ($i ~ /^next_prio=/) { split($i, y, "="); prio = y[2] }
		}
		n[pid]++; if (prio < 100) rt[pid]++
	} END { for (p in n) printf "%s %d\n", p, 100 * rt[p] / n[p] }' >"$out/rt-share.txt"
# timehist columns: time, cpu, task[tid/pid], wait time, sch delay, run time (ms).
awk -v a="$from" -v b="$to" 'NR == FNR { rt[$1] = $2; next }
	FNR > 3 && NF >= 6 && $1 >= a && $1 <= b {
	k = $3; d = $5; s[k] += d; n[k]++; if (d > m[k]) m[k] = d; if (d > 2) big[k]++
	t = k; sub(/^.*\[/, "", t); sub(/[\/\]].*$/, "", t); tid[k] = t
} END {
	for (k in s) printf "%-40s switches %6d  delay %9.1f ms  max %7.2f ms  waits>2ms %4d  rt %3d %%\n", k, n[k], s[k], m[k], big[k], rt[tid[k]]
}' "$out/rt-share.txt" "$out/timehist.txt" | sort -k5 -rn >"$out/delays.txt"
[[ -n ${KEEP_PERF:-} ]] || rm -f "$out/perf.data"
head -40 "$out/delays.txt"
echo "sched-delay.sh: every thread in $out/delays.txt; the command's output in $out/command.out" >&2
