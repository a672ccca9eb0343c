#!/usr/bin/env python3
"""Run rt-app on nice-slices.json with the custom slices set once (sched_setattr as soon as the
threads exist, then no more polling), instead of validate's enforcer thread, which re-checks
every millisecond for the whole run. Prints per task the wake-up latency p50/p90 and the share
above 300 us from rt-app's logs.  usage: oneshot_slices.py WORKLOAD OUTDIR RUNS"""
import ctypes, json, os, struct, subprocess, sys, time
wl, out, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
SYS_sched_setattr = 314
w = json.load(open(wl))
slices = {n: t['dl-runtime'] * 1000 for n, t in w['tasks'].items() if 'dl-runtime' in t}
nices = {n: t.get('priority', 0) for n, t in w['tasks'].items()}
def setattr_(tid, nice, runtime):
    # struct sched_attr (VER1, 56 bytes): size, policy, flags, nice, priority, runtime, deadline, period, util_min, util_max
    a = struct.pack('IIQiIQQQII', 56, 0, 0, nice, 0, runtime, 0, 0, 0, 0)
    buf = ctypes.create_string_buffer(a)
    return libc.syscall(SYS_sched_setattr, tid, buf, 0)
for r in range(runs):
    d = os.path.join(out, 'run%d' % r); os.makedirs(d, exist_ok=True)
    x = json.loads(json.dumps(w)); x['global']['logdir'] = d; x['global']['log_basename'] = 'oneshot'
    x['global'].pop('log_size', None)
    f = os.path.join(d, 'workload.json'); json.dump(x, open(f, 'w'))
    p = subprocess.Popen(['rt-app', f], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=d)
    done, t0 = set(), time.time()
    while len(done) < len(slices) and time.time() - t0 < 2:
        try:
            for tid in os.listdir('/proc/%d/task' % p.pid):
                comm = open('/proc/%d/task/%s/comm' % (p.pid, tid)).read().strip()
                if comm in slices and comm not in done:
                    rc = setattr_(int(tid), nices[comm], slices[comm])
                    sl = [l for l in open('/proc/%d/task/%s/sched' % (p.pid, tid)) if 'se.slice' in l]
                    print('run %d: %s tid %s sched_setattr rc %d after %.1f ms, %s' % (r, comm, tid, rc, 1000 * (time.time() - t0), sl[0].split()[-1] if sl else '?'))
                    done.add(comm)
        except FileNotFoundError:
            pass
        time.sleep(0.0005)
    time.sleep(3)
    for tid in os.listdir('/proc/%d/task' % p.pid):
        try:
            comm = open('/proc/%d/task/%s/comm' % (p.pid, tid)).read().strip()
            if comm in slices:
                sl = [l for l in open('/proc/%d/task/%s/sched' % (p.pid, tid)) if 'se.slice' in l]
                print('run %d: %s se.slice 3 s later: %s' % (r, comm, sl[0].split()[-1] if sl else '?'))
        except FileNotFoundError:
            pass
    p.wait()
    for n in ('short', 'long', 'niced'):
        lat = []
        for fn in os.listdir(d):
            if fn.startswith('oneshot-%s-' % n) and fn.endswith('.log'):
                for line in open(os.path.join(d, fn)):
                    v = line.split()
                    if not line.startswith('#') and len(v) >= 11:
                        lat.append(int(v[10]))
        lat.sort()
        if lat:
            print('run %d %-6s n=%d p50=%d p90=%d slow>300us=%.3f' % (r, n, len(lat), lat[len(lat) // 2], lat[int(len(lat) * 0.9)], sum(1 for v in lat if v > 300) / len(lat)))
