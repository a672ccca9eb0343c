"""Reads a daemon log: how many tasks had an inherited setting put back, how many of those
were launches, and how many launches the daemon saw (a run that saw none tested nothing)."""
import re, sys
put = {}; launch = set()
for l in open(sys.argv[1]):
    m = re.search(r'put back a setting the task inherited.*tid=(\d+)', l)
    if m: put[m.group(1)] = True
    m = re.search(r'launch while the app is in front pid=(\d+)', l)
    if m: launch.add(m.group(1))
print(len(put), len([p for p in put if p in launch]), len(launch))
