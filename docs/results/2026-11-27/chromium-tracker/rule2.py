# Per episode of a trace: the critical set by the old rule (END at the first display wake).
# usage (in this directory): python3 rule2.py LOG
import re,sys,collections
exec(open('rule.py').read().split('def run(path)')[0])
def eps2(path):
    eps=[]
    for l in open(path):
        if 'tracker event' not in l: continue
        kind=l.split('tracker event ')[1].split(' ')[0]
        if kind not in ('Start','Edge','End'): continue
        ts=int(re.search(r'ts: (\d+)',l).group(1))
        t=tre.findall(l)
        if kind=='Start': eps.append({'ui':t[-1][0],'edges':[],'disp':set(),'names':{},'t0':ts,'end':None})
        elif eps:
            eps[-1]['edges'].append((t[0][0],t[1][0]))
            if kind=='End': eps[-1]['disp'].add(t[1][0]); eps[-1]['end']=(ts-eps[-1]['t0'])/1e6
        for x in t:
            if eps: eps[-1]['names'][x[0]]=nm(x)
    return eps
E=eps2(sys.argv[1]); procs=collections.Counter(); withframe=0
for e in E:
    c=crit(e['ui'],e['edges'],e['disp'])
    names=sorted(e['names'][x] for x in c)
    if any('renderer' in n or 'gpu' in n for n in names): withframe+=1
    print(f"end={e['end']} edges={len(e['edges'])}", names)
print(len(E),'episodes; with renderer/gpu threads critical:',withframe)
