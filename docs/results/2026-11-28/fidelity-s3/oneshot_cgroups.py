#!/usr/bin/env python3
"""Run rt-app on cgroups.json with its groups made and its threads moved once (cgroup-v1 cpu,
cpu.shares from the workload's uxsched_cgroup_weights), instead of validate's enforcer thread,
which keeps polling every millisecond for the whole run. Prints per task the wake-up latency
p50/p90, the share above 300 us and rt-app's misses (negative slack).
usage: oneshot_cgroups.py WORKLOAD OUTDIR RUNS"""
import json, os, subprocess, sys, time
wl, out, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
w = json.load(open(wl))
weights = w['global'].pop('uxsched_cgroup_weights')
group_of = {n: t['taskgroup'] for n, t in w['tasks'].items() if 'taskgroup' in t}
for r in range(runs):
    d = os.path.join(out, 'run%d' % r); os.makedirs(d, exist_ok=True)
    base = '/sys/fs/cgroup/cpu/fid34-oneshot-%d-%d' % (os.getpid(), r)
    os.mkdir(base)
    for g, sh in weights.items():
        os.mkdir(base + g)
        open(base + g + '/cpu.shares', 'w').write(str(sh))
    x = json.loads(json.dumps(w)); x['global']['logdir'] = d; x['global']['log_basename'] = 'oneshot'
    f = os.path.join(d, 'workload.json'); json.dump(x, open(f, 'w'))
    p = subprocess.Popen(['rt-app', f], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=d)
    moved, t0 = {}, time.time()
    want = sum(t.get('instance', 1) for n, t in w['tasks'].items() if n in group_of)
    while len(moved) < want and time.time() - t0 < 2:
        try:
            for tid in os.listdir('/proc/%d/task' % p.pid):
                if tid in moved:
                    continue
                comm = open('/proc/%d/task/%s/comm' % (p.pid, tid)).read().strip()
                name = next((n for n in group_of if comm == n or comm.startswith(n + '-') or comm == n[:15]), None)
                if name:
                    open(base + group_of[name] + '/tasks', 'w').write(tid)
                    moved[tid] = comm
        except (FileNotFoundError, ProcessLookupError):
            pass
        time.sleep(0.0005)
    print('run %d: moved %d threads once, within %.1f ms: %s' % (r, len(moved), 1000 * (time.time() - t0), sorted(moved.values())))
    time.sleep(3)
    for g in weights:
        print('run %d: %s tasks 3 s later: %d' % (r, g, len(open(base + g + '/tasks').read().split())))
    p.wait()
    for g in weights:
        os.rmdir(base + g)
    os.rmdir(base)
    for n in ('hi-tick', 'lo-tick'):
        lat, miss = [], 0
        for fn in os.listdir(d):
            if fn.startswith('oneshot-%s-' % n) and fn.endswith('.log'):
                for line in open(os.path.join(d, fn)):
                    v = line.split()
                    if not line.startswith('#') and len(v) >= 11:
                        lat.append(int(v[10])); miss += int(v[7]) < 0
        lat.sort()
        if lat:
            print('run %d %-7s n=%d p50=%d p90=%d slow>300us=%.3f misses=%d' % (r, n, len(lat), lat[len(lat) // 2], lat[int(len(lat) * 0.9)], sum(1 for v in lat if v > 300) / len(lat), miss))
