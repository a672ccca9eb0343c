"""A launch: how long after its parent's fork it is up, and whether the daemon's real-time I/O
class (IOPRIO_CLASS_RT) was on it by then, or when it came."""
import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
t0 = float(sys.argv[1])
up = time.time()
while True:
    v = libc.syscall(252, 1, 0)  # ioprio_get(IOPRIO_WHO_PROCESS, self)
    if v >> 13 == 1:
        print(f"up {1000 * (up - t0):.0f} ms, RT at {1000 * (time.time() - t0):.0f} ms")
        break
    if time.time() - up > 3:
        print(f"up {1000 * (up - t0):.0f} ms, no RT class in 3 s (ioprio {v:#x})")
        break
    time.sleep(0.001)
