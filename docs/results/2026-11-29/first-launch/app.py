"""The app in front (run as nobody): after 1 s, four launches 0.7 s apart, each a new
`python3 poll.py T` (one process per launch, nothing else forked), T the time just before the
fork; the pollers append to OUT."""
import subprocess, sys, time
here, out = sys.argv[1], sys.argv[2]
time.sleep(1)
procs = []
for _ in range(4):
    with open(out, "a") as f:
        procs.append(subprocess.Popen([sys.executable, f"{here}/poll.py", repr(time.time())], stdout=f))
    time.sleep(0.7)
for p in procs:
    p.wait()
