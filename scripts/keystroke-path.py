#!/usr/bin/env python3
"""The critical path of each keystroke of a `uxsched bench` run recorded with `perf sched record`.

    sudo KEEP_PERF=1 scripts/sched-delay.sh OUT -- target/release/uxsched bench chromium ...
    scripts/keystroke-path.py OUT/perf.data [--slow-ms 4] [--show 10] [--display Xvfb]

The bench's typist is the one thread at SCHED_FIFO 10 (kernel prio 89); each mode and rep runs a
fresh one, so each typist's pid is one window, in the order the bench ran them. A keystroke is the
typist woken by its own timer (any waker but the display server) until the display server wakes
it the second time (the first is XTEST's reply, the second the damage). Its path is walked back
along wake-ups from that last one: each hop is a thread, how long it waited runnable after its
waker woke it, and how long it then took until it woke the next stage (running or preempted).
Per window: keystrokes slower than --slow-ms against the rest, hop by hop (thread name and the
kernel prio it ran at: < 100 real-time, 100-139 fair), and the --show slowest paths. This is how
docs/tracker.md found the GPU process's IO thread left at nice -5 while the set held viz.
"""
import argparse
import bisect
import collections
import re
import subprocess
import sys

TYPIST_PRIO = "89"  # the bench's client runs at SCHED_FIFO 10
KV = re.compile(r"(\w+)=(\S+)")


def parse(perf_data):
    """Wakings and switch-ins per thread, and each typist's (pid, first, last) run."""
    out = subprocess.run(
        ["perf", "script", "-i", perf_data, "-F", "comm,tid,cpu,time,event,trace"],
        capture_output=True, text=True, check=True,
    ).stdout
    wakings = collections.defaultdict(list)  # tid -> [(t, waker tid, waker comm)]
    switchin = collections.defaultdict(list)  # tid -> [(t, prio)]
    comm, typists = {}, {}
    for line in out.splitlines():
        p = line.split()
        if len(p) < 6:
            continue
        try:
            t = float(p[3].rstrip(":"))
        except ValueError:
            continue
        f = dict(KV.findall(line))
        if "sched_waking" in p[4] and "pid" in f:
            wakings[f["pid"]].append((t, p[1], p[0]))
            comm[f["pid"]] = f["comm"]
        elif "sched_switch" in p[4] and "next_pid" in f:
            tid = f["next_pid"]
            switchin[tid].append((t, f["next_prio"]))
            comm[tid] = f["next_comm"]
            if f["next_prio"] == TYPIST_PRIO:
                first, _ = typists.get(tid, (t, t))
                typists[tid] = (first, t)
    return wakings, switchin, comm, sorted(typists.items(), key=lambda kv: kv[1][0])


def keystrokes(wakings, typist, display):
    """(start, end, display tid) of each keystroke of one typist."""
    keys, start, seen = [], None, 0
    for t, waker, wcomm in wakings[typist]:
        if wcomm != display:
            start, seen = t, 0
        elif start is not None:
            seen += 1
            if seen == 2:
                keys.append((start, t, waker))
                start = None
    return keys


def path(wakings, switchin, comm, typist, t0, t1, last):
    """Hops (name, prio, runnable wait ms, span ms) from the typist's send to the damage."""
    hops, cur, t = [], last, t1
    for _ in range(40):
        ws = wakings[cur]
        i = bisect.bisect_left(ws, (t,)) - 1
        if i < 0:
            break
        tw, waker, _ = ws[i]
        si = switchin[cur]
        j = bisect.bisect_left(si, (tw,))
        if j < len(si) and si[j][0] <= t:
            ts, prio = si[j]
        else:  # woken while still on its CPU (it had not switched out yet): no wait
            ts, prio = tw, si[j - 1][1] if j > 0 else "?"
        hops.append((comm.get(cur, "?"), prio, (ts - tw) * 1e3, (t - ts) * 1e3))
        if waker == typist or tw < t0:
            break
        cur, t = waker, tw
    return list(reversed(hops))


def report(args, wakings, switchin, comm, n, typist, span):
    keys = keystrokes(wakings, typist, args.display)
    if not keys:
        print(f"window {n} (typist {typist}): no keystrokes found")
        return
    lat = sorted((b - a) * 1e3 for a, b, _ in keys)
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    print(f"window {n} (typist {typist}, {span[0]:.1f}-{span[1]:.1f} s): {len(keys)} keystrokes, "
          f"p50 {pct(0.5):.2f} p90 {pct(0.9):.2f} p99 {pct(0.99):.2f} ms")
    agg = {True: collections.defaultdict(lambda: [0, 0.0, 0.0]),
           False: collections.defaultdict(lambda: [0, 0.0, 0.0])}
    count, slow_paths = collections.Counter(), []
    for a, b, last in keys:
        slow = (b - a) * 1e3 >= args.slow_ms
        count[slow] += 1
        hops = path(wakings, switchin, comm, typist, a, b, last)
        if slow:
            slow_paths.append(((b - a) * 1e3, hops))
        for name, prio, w, s in hops:
            e = agg[slow][(name, prio)]
            e[0] += 1
            e[1] += w
            e[2] += s
    for slow in (True, False):
        k = max(1, count[slow])
        print(f"  {'slow' if slow else 'fast'} ({'>=' if slow else '<'} {args.slow_ms} ms): "
              f"{count[slow]} keystrokes; per keystroke: hops, runnable wait, span (ms)")
        for (name, prio), (h, w, s) in sorted(agg[slow].items(), key=lambda kv: -(kv[1][1] + kv[1][2])):
            print(f"    {name:16} prio {prio:>3}  hops {h / k:4.2f}  wait {w / k:6.3f}  span {s / k:6.3f}")
    for ms, hops in sorted(slow_paths, reverse=True)[: args.show]:
        print(f"  {ms:6.2f} ms: " + " > ".join(f"{h[0]}/{h[1]}({h[2]:.2f}/{h[3]:.2f})" for h in hops))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("perf_data")
    ap.add_argument("--slow-ms", type=float, default=4.0, help="keystrokes at least this slow")
    ap.add_argument("--show", type=int, default=8, help="print this many of the slowest paths")
    ap.add_argument("--display", default="Xvfb", help="the display server's thread name")
    args = ap.parse_args()
    wakings, switchin, comm, typists = parse(args.perf_data)
    if not typists:
        sys.exit("keystroke-path: no thread ran at SCHED_FIFO 10 (prio 89): not a bench run?")
    for n, (typist, span) in enumerate(typists, 1):
        report(args, wakings, switchin, comm, n, typist, span)


if __name__ == "__main__":
    main()
