# Edges per episode from `RUST_LOG=uxsched_tracker=trace trace_episodes` logs (stderr).
# usage (in this directory): python3 parse.py LOG [EPISODES]; ROLES=FILE names tgids.
import re,sys,collections
# map tgid -> role
import subprocess,os
OLD=dict(l.split() for l in open(os.environ.get('ROLES', 'before/roles-of-the-traces.txt')))
def role(tgid):
    if tgid in OLD: return OLD[tgid]
    try:
        a=open(f'/proc/{tgid}/cmdline','rb').read().replace(b'\0',b' ').decode()
        m=re.search(r'--type=([a-z-]+)',a)
        if m:
            r=m.group(1); u=re.search(r'--utility-sub-type=(\w+)',a)
            return r+(':'+u.group(1) if u else '')
        return os.path.basename(a.split(' ')[0]) or '?'
    except Exception: return 'gone'
roles={}
tre=re.compile(r'Task \{ tid: (\d+), tgid: (\d+), start_ns: \d+, comm: "([^"]*)", kthread: (\w+) \}')
def nm(m):
    tid,tgid,comm,k=m
    if tgid not in roles: roles[tgid]=role(tgid)
    return f'{comm}[{roles[tgid]}/{tid}]'
eps=[]
for l in open(sys.argv[1]):
    if 'tracker event' not in l: continue
    kind=l.split('tracker event ')[1].split(' ')[0]
    if kind not in ('Start','Edge','End'): continue
    ts=int(re.search(r'ts: (\d+)',l).group(1))
    tasks=tre.findall(l)
    if kind=='Start':
        eps.append([ts,[]]); 
    if eps: eps[-1][1].append((kind,(ts-eps[-1][0])/1e6,[nm(t) for t in tasks]))
n=int(sys.argv[2]) if len(sys.argv)>2 else 99
for st,evs in eps[:n]:
    print('---')
    for k,t,ts in evs: print(f'  {k:5} +{t:7.3f}ms ' + ' -> '.join(ts))
