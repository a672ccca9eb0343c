"""The app in front for run.sh: six launches 0.5 s apart, each `sh -c` forking /bin/true three
times and then exec'ing `sleep 0.3`."""
import subprocess, time
time.sleep(1)
for _ in range(6):
    subprocess.Popen(["/bin/sh", "-c", "/bin/true; /bin/true; /bin/true; exec /bin/sleep 0.3"])
    time.sleep(0.5)
time.sleep(0.5)
