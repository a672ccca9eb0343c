"""Per-episode view of `uxsched tracker watch` JSON lines for a Chromium run.
usage: analyse.py WATCH.jsonl ROLES.txt   (ROLES: 'tgid role' lines, taken while it ran)"""
import json, sys, collections
roles = dict(l.split(' ', 1) for l in open(sys.argv[2]).read().splitlines() if l.strip())
roles = {int(k): v for k, v in roles.items()}
def who(m):
    return f"{m['comm']}[{roles.get(m['id']['tgid'], '?')}]"
eps = collections.OrderedDict()
final = None
for line in open(sys.argv[1]):
    s = json.loads(line)
    final = s
    e = s['episode']
    if not e:
        continue
    rec = eps.setdefault(e['epoch'], {'start': e['start_ns'], 'end': None, 'why': None, 'edges': 0, 'set': None})
    rec['edges'] = max(rec['edges'], e['edges'])
    if e.get('end'):
        rec['end'], rec['why'] = e['end_ns'], e['end']
        rec['set'] = s['critical']
first = {}
for m in final['critical']:
    first[m['id']['tid']] = m
ends = collections.Counter(r['why'] for r in eps.values())
print(f"episodes seen: {len(eps)}; ends: {dict(ends)}")
for ep, r in eps.items():
    if r['end'] is None:
        continue
    dur = (r['end'] - r['start']) / 1e6
    new = [who(m) for m in (r['set'] or []) if m['status'] == 'confirmed' and r['start'] <= m['since_ns'] <= r['end']]
    print(f"  episode {ep:4} {r['why']:10} {dur:7.2f} ms {r['edges']:3} edges; newly confirmed: {', '.join(new) or '-'}")
conf = [m for m in final['critical'] if m['status'] == 'confirmed']
procs = collections.Counter(roles.get(m['id']['tgid'], '?') for m in conf)
print(f"critical set at the end: {len(conf)} threads in {len(procs)} processes")
for p, n in sorted(procs.items()):
    names = sorted(f"{m['comm']}({m['source']})" for m in conf if roles.get(m['id']['tgid'], '?') == p)
    print(f"  {p}: {n}: {', '.join(names)}")
