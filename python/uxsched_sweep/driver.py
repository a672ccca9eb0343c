"""The Ray side of `uxsched sim sweep --ray` (docs/sweep.md). The uxsched binary runs this file
(compiled into it) with `python3 -c`, writes one sweep point per line (JSON) to its stdin, and
reads one line per finished point from its stdout as soon as the point finishes; it writes
them into the sweep's journal itself. Each point is a Ray task that calls the engine in-process
(`uxsched_sweep.simulate`); a task whose worker dies is retried up to --max-retries times by Ray.

stdout lines: {"ready": {...}}, then per point {"index", "engine", "outcome"} or {"index", "error"}.
Exit status 3: Ray or the wheel is missing here (the message says what to install).
"""

import argparse
import json
import os
import signal
import sys


def parse_args(argv):
    p = argparse.ArgumentParser(prog="uxsched-sweep-driver")
    p.add_argument("--address", required=True, help="`auto` (a local Ray) or a cluster's address")
    p.add_argument("--workers", type=int, required=True, help="CPUs of the local Ray (`auto`)")
    p.add_argument("--max-retries", type=int, required=True)
    p.add_argument("--engine", required=True, help="the binary's engine stamp")
    return p.parse_args(argv)


def die(msg):
    print("uxsched: --ray: " + msg, file=sys.stderr)
    sys.exit(3)


def protocol_stream():
    """Our stdout, kept for the protocol; fd 1 then points at stderr, so that nothing Ray or a
    library prints can be mistaken for a result."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto


def connect(ray, args):
    if args.address == "auto":
        try:
            import uxsched_sweep
        except ImportError as e:
            die(f"the uxsched_sweep wheel is not installed for {sys.executable} ({e}): run scripts/setup.sh")
        if uxsched_sweep.engine() != args.engine:
            die(f"the installed uxsched_sweep wheel was built from other engine sources "
                f"({uxsched_sweep.engine()}, this binary: {args.engine}): run scripts/setup.sh to rebuild it")
        # `local`: always a new Ray of our own, never a cluster that happens to run here.
        ray.init(address="local", num_cpus=args.workers, include_dashboard=False)
    else:
        ray.init(address=args.address)


def error_text(e):
    """The cause in one line: the point's own error, or the worker's death after the retries."""
    cause = getattr(e, "cause", None)
    if cause is not None:
        return f"{type(cause).__name__}: {cause}"
    lines = [line for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[-1] if lines else e}"


def run(ray, args, proto):
    @ray.remote(max_retries=args.max_retries, retry_exceptions=False)
    def run_point(point_json):
        import uxsched_sweep
        return uxsched_sweep.engine(), uxsched_sweep.simulate(point_json)

    cpus = int(ray.cluster_resources().get("CPU", 1))
    proto.write(json.dumps({"ready": {"cpus": cpus}}) + "\n")
    # A window of tasks in flight: every CPU busy, without holding a huge sweep in memory.
    window = max(2, 2 * cpus)
    pending = {}

    def finish_one():
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            index = pending.pop(ref)
            try:
                engine, outcome = ray.get(ref)
            except Exception as e:  # a bad point, or its worker died more than max_retries times
                proto.write(json.dumps({"index": index, "error": error_text(e)}) + "\n")
                continue
            proto.write('{"index":%d,"engine":%s,"outcome":%s}\n' % (index, json.dumps(engine), outcome))

    for line in sys.stdin:
        if not line.strip():
            continue
        index = json.loads(line)["index"]
        pending[run_point.remote(line)] = index
        while len(pending) >= window:
            finish_one()
    while pending:
        finish_one()


def main():
    args = parse_args(sys.argv[1:])
    proto = protocol_stream()
    # SIGTERM (the uxsched binary gone: PR_SET_PDEATHSIG) still shuts the local Ray down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError as e:
        die(f"Ray is not installed for {sys.executable} ({e}): run scripts/setup.sh (pip install ray)")
    connect(ray, args)
    try:
        run(ray, args, proto)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
