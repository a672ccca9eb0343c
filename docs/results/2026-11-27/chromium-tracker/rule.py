# The old classification replayed on a trace: seed 003 cycle rule, episode ended at its first
# display wake-up (Xvfb). Used by rule2.py.
import re,sys,collections
exec(open('parse.py').read().split('eps=[]')[0])
DISP={'Xvfb'}
def eps_of(path):
    eps=[]
    for l in open(path):
        if 'tracker event' not in l: continue
        kind=l.split('tracker event ')[1].split(' ')[0]
        if kind not in ('Start','Edge','End'): continue
        ts=int(re.search(r'ts: (\d+)',l).group(1))
        t=tre.findall(l)
        if kind=='Start': eps.append({'ui':t[-1][0],'edges':[],'names':{},'t0':ts})
        elif eps:
            eps[-1]['edges'].append(((ts-eps[-1]['t0'])/1e6,t[0][0],t[1][0],t[1][2]))
        for x in t:
            if eps: eps[-1]['names'][x[0]]=nm(x)
    return eps
def crit(ui,edges,disp):
    fwd={ui}; ch=True
    while ch:
        ch=False
        for a,b in edges:
            if a in fwd and b not in fwd: fwd.add(b); ch=True
    back={ui}|disp; ch=True
    while ch:
        ch=False
        for a,b in edges:
            if b in back and a not in back: back.add(a); ch=True
    return (fwd&back)-disp
def run(path):
    eps=eps_of(path)
    cnt=collections.Counter(); n=0
    for e in eps:
        edges=[];disp=set()
        for t,a,b,comm in e['edges']:
            edges.append((a,b))
            if comm in DISP and a!=e['ui'] or comm in DISP: 
                disp.add(b); break
        c1=crit(e['ui'],edges,disp)
        alle=[(a,b) for t,a,b,c in e['edges']]
        alld={b for t,a,b,c in e['edges'] if c in DISP}
        c2=crit(e['ui'],alle,alld)
        n+=1
        print(len(e['edges']), 'END-at-first:', sorted(e['names'][x] for x in c1))
        print('     full:', sorted(e['names'][x] for x in c2))
run(sys.argv[1])
