#!/usr/bin/env python3
"""Wake-ups of one task split by how many tasks of another name sat on its CPU when it woke, and
by whether one of them ran on that CPU in the 16 ms before.

Kernel side: a `perf record -e sched:sched_switch -e sched:sched_wakeup -e sched:sched_waking
-e sched:sched_migrate_task -a` of one rt-app run (a directory holding perf.data).
Simulator side: the text trace of sim-tracer.rs (`ALL=1 sim-tracer <workload> <seed>`), on stdin.
A task's CPU is where it last ran, was woken or was migrated to. A wake-up is slow when the
task ran more than 300 us after its sched_waking (kernel) / Wakeup record (simulator).

usage: wakeups_by_neighbours.py (DIR | -) WHO OTHER
"""
import collections, re, subprocess, sys

src, who, other = sys.argv[1], sys.argv[2], sys.argv[3]
loc, pend, res, res16 = {}, None, collections.Counter(), collections.Counter()
last_ran = {}  # cpu -> last time an `other` task ran there (switched in or out)


def woke(t, cpu):
    return (t, cpu, sum(1 for c in loc.values() if c == cpu), t - last_ran.get(cpu, -1e18) <= 16000)


def ran(t, cpu, name):
    global pend
    if pend and name == who and cpu == pend[1]:
        res[(pend[2], t - pend[0] > 300)] += 1
        res16[(pend[3], t - pend[0] > 300)] += 1
        pend = None


if src != '-':
    out = subprocess.run(['perf', 'script', '-i', src + '/perf.data', '-F',
                          'comm,tid,cpu,time,event,trace'], capture_output=True, text=True).stdout
    rx = re.compile(r'^\s*(\S.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)$')
    for line in out.splitlines():
        m = rx.match(line)
        if not m:
            continue
        t, cpu, ev, tr = float(m.group(4)) * 1e6, int(m.group(3)), m.group(5), m.group(6)
        if ev == 'sched_switch':
            s = re.search(r'prev_comm=(.+?) prev_pid=(\d+) .*==> next_comm=(.+?) next_pid=(\d+)', tr)
            for n, pid in ((s.group(1), s.group(2)), (s.group(3), s.group(4))):
                if n.startswith(other):
                    loc[pid] = cpu
                    last_ran[cpu] = t
            ran(t, cpu, s.group(3))
        elif ev == 'sched_migrate_task':
            s = re.search(r'comm=(.+?) pid=(\d+) .*dest_cpu=(\d+)', tr)
            if s.group(1).startswith(other):
                loc[s.group(2)] = int(s.group(3))
        elif ev == 'sched_waking':
            s = re.search(r'comm=(.+?) pid=(\d+) .*target_cpu=(\d+)', tr)
            if s.group(1).startswith(other):
                loc[s.group(2)] = int(s.group(3))
            if s.group(1) == who:
                pend = woke(t, int(s.group(3)))
else:
    for line in sys.stdin:
        f = line.split()
        if len(f) < 3 or not f[0].isdigit():
            continue
        t = int(f[0]) / 1000.0
        if f[1] == 'W':
            cpu = int(f[2][3:])
            if f[3].startswith(other):
                loc[f[3]] = cpu
            if f[3] == who:
                pend = woke(t, cpu)
        elif f[1] == 'M' and f[2].startswith(other):
            loc[f[2]] = int(f[3].split('->')[1])
        elif f[1] == 'S':
            cpu = int(f[2][3:])
            s = re.search(r'(Some\("([^"]+)"\)|None) -> (Some\("([^"]+)"\)|None)', line)
            for n in (s.group(2), s.group(4)):
                if n and n.startswith(other):
                    loc[n] = cpu
                    last_ran[cpu] = t
            ran(t, cpu, s.group(4))
for k in sorted({x[0] for x in res}):
    slow, fast = res[(k, True)], res[(k, False)]
    print('%s: %d %s on its CPU: %d wake-ups, %d slow (%.0f%%)'
          % (who, k, other, slow + fast, slow, 100 * slow / max(1, slow + fast)))
for k in (True, False):
    slow, fast = res16[(k, True)], res16[(k, False)]
    print('%s: %s ran on its CPU in the 16 ms before: %d wake-ups, %d slow (%.0f%%)'
          % (who, other if k else 'no ' + other, slow + fast, slow, 100 * slow / max(1, slow + fast)))
