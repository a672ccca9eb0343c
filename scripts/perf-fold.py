#!/usr/bin/env python3
"""Where the daemon's fast path spends its CPU, from frame-pointer `perf` samples.

    perf script -F comm,tid,ip,sym -i perf.data [...] | python3 scripts/perf-fold.py

Keeps the samples whose stack holds `on_event` (the loop handling an event: the fast path and
what surrounds it) and not a pass (`Daemon::apply`), then prints how many of them hold each
frame of interest (inclusive) and the commonest leaves. Build with
`RUSTFLAGS=-Cforce-frame-pointers=yes` (DWARF unwinding lost samples on the 2-vCPU VM).
"""
import collections
import sys

FRAMES = ["sqlite3", "add_planned", "ksys_read", "still_same", "state::chain", "fast_plan",
          "uids_of", "pwrite", "publish_rt", "fcntl", "follow_more", "sched_setattr",
          "apply_start", "tracing", "drop_in_place", "free", "malloc", "plan_start",
          "sched_getattr", "Desired", "bounded"]


def samples(lines):
    stack = None
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if stack is not None:
                yield stack
            stack = None
        elif stack is None:
            stack = []  # the sample's head line (comm, tid)
        else:
            parts = line.strip().split(" ", 1)
            stack.append(parts[-1])
    if stack is not None:
        yield stack


def main():
    all_ = list(samples(sys.stdin))
    fast = [s for s in all_ if any("on_event" in f for f in s)
            and not any("Daemon::apply" in f for f in s)]
    print(f"samples {len(all_)}, of the fast path and its event handling {len(fast)}")
    if not fast:
        return
    holding = collections.Counter(k for s in fast for k in FRAMES if any(k in f for f in s))
    for k, n in holding.most_common():
        print(f"{n:6d} {100 * n / len(fast):5.1f}% {k}")
    print("--- leaves")
    for k, n in collections.Counter(s[0][:90] for s in fast if s).most_common(15):
        print(f"{n:6d} {k}")


if __name__ == "__main__":
    main()
