#!/usr/bin/env python3
"""Where a keystroke's chain waits: wake-up placement and CPU time per thread, from a perf trace.

    perf record -e sched:sched_waking -e sched:sched_wakeup -e sched:sched_switch -a -o T.data -- \\
        uxsched bench xterm --layout same-session --load cpu --load-workers 12 \\
        --modes idle,MODE --reps 1 --duration 10s
    scripts/chain-trace.py T.data

Counts only the loaded part (from the first stress-ng switch on). For each chain thread (X
server, terminal, shell side, kernel workers, window manager) and scheduling class: how many
wake-ups, how many landed on another CPU than the waker's (`sched_waking` is traced on the
waker's CPU, `sched_wakeup` names the target), waking → running p50/p90; then the CPU time of
the busiest threads. Reads `perf script` output; computes nothing but counts and percentiles.
"""
import collections
import re
import subprocess
import sys

CHAIN = re.compile(r"^(xterm|xedit|Xvfb|cat|kworker|openbox)")
EVENT = re.compile(r"^\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+): sched:(\w+): (.*)$")
WAKE = re.compile(r"comm=(.+?) pid=(\d+) prio=(\d+) target_cpu=(\d+)")
SWITCH = re.compile(r"prev_comm=(.+?) prev_pid=(\d+) .* ==> next_comm=(.+?) next_pid=(\d+) next_prio=(\d+)")


def pct(xs, q):
    return xs[min(len(xs) - 1, int(len(xs) * q))] if xs else 0.0


def main(path):
    text = subprocess.run(
        ["perf", "script", "-i", path, "-F", "comm,tid,cpu,time,event,trace"],
        capture_output=True, text=True, check=True,
    ).stdout
    loaded_from = None
    waking, pending = {}, {}
    wakes = collections.defaultdict(lambda: [0, 0, []])
    on_cpu, since, t_end = collections.Counter(), {}, 0.0
    for line in text.splitlines():
        m = EVENT.match(line)
        if not m:
            continue
        _, _, cpu, t, name, rest = m.groups()
        cpu, t = int(cpu), float(t)
        if name == "sched_switch":
            s = SWITCH.search(rest)
            if not s:
                continue
            if loaded_from is None and "stress-ng" in rest:
                loaded_from = t
            if loaded_from is None:
                continue
            t_end = t
            prev, nxt = s.group(2), s.group(4)
            if prev in since:
                comm, t0 = since.pop(prev)
                on_cpu[comm] += t - t0
            since[nxt] = (re.sub(r"/.*", "", s.group(3)), t)
            if int(nxt) in pending:
                t0, waker_cpu, target, comm, prio = pending.pop(int(nxt))
                w = wakes[(comm, "rt" if prio < 100 else "fair")]
                w[0] += 1
                w[1] += waker_cpu != target
                w[2].append((t - t0) * 1e6)
            continue
        if loaded_from is None:
            continue
        w = WAKE.search(rest)
        if not w or not CHAIN.match(w.group(1)):
            continue
        pid = int(w.group(2))
        if name == "sched_waking":
            waking[pid] = (t, cpu)
        elif name == "sched_wakeup" and pid in waking:
            t0, waker_cpu = waking.pop(pid)
            comm = re.sub(r"/.*", "", w.group(1))
            pending[pid] = (t0, waker_cpu, int(w.group(4)), comm, int(w.group(3)))
    if loaded_from is None:
        sys.exit(f"{path}: no stress-ng switch: not a loaded run")
    print(f"loaded part: {t_end - loaded_from:.1f} s")
    for (comm, cls), (n, cross, lat) in sorted(wakes.items(), key=lambda kv: -kv[1][0]):
        lat.sort()
        print(f"  {comm:10s} {cls:4s} wake-ups {n:5d}  on another CPU {cross / n:6.1%}  "
              f"waking→running p50 {pct(lat, 0.5):5.0f} µs  p90 {pct(lat, 0.9):5.0f} µs")
    print("CPU time (ms), chain threads:")
    for comm, s in on_cpu.most_common():
        if CHAIN.match(comm):
            print(f"  {comm:10s} {s * 1e3:8.1f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else sys.exit(__doc__))
