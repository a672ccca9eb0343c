"""The app in front (run as nobody, not a child of sway): after 1 s, four launches 0.7 s apart,
each `swaymsg exec` of `python3 ../first-launch/poll.py T` (sway forks it: a double fork, then
`sh -c`), T the time just before swaymsg is started; the pollers append to OUT."""
import subprocess, sys, time
poll, out, ipc = sys.argv[1], sys.argv[2], sys.argv[3]
time.sleep(1)
for _ in range(4):
    t = repr(time.time())
    subprocess.run(["swaymsg", "-s", ipc, f"exec /usr/bin/python3 {poll} {t} >>{out}"],
                   stdout=subprocess.DEVNULL, check=True)
    time.sleep(0.7)
time.sleep(3.5)
