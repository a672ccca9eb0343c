#!/usr/bin/env bash
# Is a cold read slower in the first seconds after a copy starts? (docs/storage.md, "The first
# launch of a repetition under BFQ".) Two fio writers like the bench's `write` load (1 MiB
# buffered writes, fsync every 256 MiB) start at t = 0; a reader at nice 0 reads every 0.5 s
# (PROBE=file, the default: one cold 1.5 MiB file, in one process that lives through the trial)
# or every 1 s (PROBE=pages: a fresh process doing 150 random 16 KiB preads over eight cold
# 64 MiB files, about what a launch's page faults ask; it prints wall/CPU ms). Each read's time
# in ms is printed against the time since the writers started. TRIALS times, with the disk
# under DIR on ELEVATOR (default bfq; its elevator is put back at the end), the writers' files
# removed, the dirty data synced and the page cache dropped between trials.
#   sudo [PROBE=file|pages] [FRESH=1] [WARM=1] [CLASS="-c1 -n4"] [WRITERS=N] \
#        scripts/bfq-writer-start.sh [DIR] [TRIALS] [SECONDS] [ELEVATOR]
# FRESH=1 switches the disk from its original elevator to ELEVATOR again right before each
# trial's writers start (as a daemon's `switch_to_bfq` at its start), WARM=1 then reads 1 GiB
# from the disk with O_DIRECT first (so BFQ has measured the disk's rate), CLASS is the probe's
# ionice(1) class, WRITERS the number of writers (0: the idle machine; default 2).
set -euo pipefail
dir=${1:-/var/tmp}
trials=${2:-3}
secs=${3:-20}
elevator=${4:-bfq}
probe=${PROBE:-file}
[ "$(id -u)" = 0 ] || { echo "bfq-writer-start: needs root (the elevator, the cache drop)" >&2; exit 2; }
for t in fio python3 findmnt lsblk ionice; do
    command -v "$t" >/dev/null || { echo "bfq-writer-start: $t missing (apt install fio python3 util-linux)" >&2; exit 2; }
done
case $probe in file | pages) ;; *) echo "bfq-writer-start: PROBE=$probe: expected file or pages" >&2; exit 2 ;; esac
. "$(dirname "$0")/lib/elevator.sh"
elevator_of "$dir" bfq-writer-start
grep -qw "$elevator" "$queue" || { echo "bfq-writer-start: $disk offers no $elevator ($(cat "$queue"))" >&2; exit 2; }
work=$(mktemp -d "$dir/bfq-writer-start.XXXXXX")
trap 'pkill -f "name=bws-write" || true; echo "$was" >"$queue"; rm -rf "$work"' EXIT
if [ "$probe" = file ]; then
    n=$((secs * 2))
    for i in $(seq 0 $((n - 1))); do head -c 1572864 /dev/urandom >"$work/p$i"; done
else
    n=$secs
    for i in $(seq 0 7); do head -c 64M /dev/urandom >"$work/f$i"; done
fi
# WARM's 1 GiB, read with O_DIRECT from a file (a sandbox may refuse opening the disk itself).
[ "${WARM:-0}" = 1 ] && head -c 1G /dev/urandom >"$work/warm" && sync
cat >"$work/read.py" <<'EOF'
import os, sys, time
start = float(sys.argv[2]); n = int(sys.argv[3])
row = []
for i in range(n):
    time.sleep(max(0.0, start + 0.5 * i - time.time()))
    fd = os.open(os.path.join(sys.argv[1], f"p{i}"), os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    t = time.monotonic()
    while os.read(fd, 1 << 20):
        pass
    row.append((time.monotonic() - t) * 1e3)
    os.close(fd)
print(" ".join(f"{x:5.0f}" for x in row))
EOF
cat >"$work/pages.py" <<'EOF'
import os, random, sys, time
fds = [os.open(os.path.join(sys.argv[1], f"f{i}"), os.O_RDONLY) for i in range(8)]
for fd in fds:
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
r = random.Random(int(sys.argv[2]))
size = os.fstat(fds[0]).st_size
t, c = time.monotonic(), time.process_time()
for _ in range(150):
    os.pread(r.choice(fds), 16384, r.randrange(0, size // 16384) * 16384)
print(f"{(time.monotonic() - t) * 1e3:.0f}/{(time.process_time() - c) * 1e3:.0f}")
EOF
echo "$elevator" >"$queue"
echo "disk $disk on $elevator (was $was); $(date -u +%FT%TZ); loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
echo "PROBE=$probe FRESH=${FRESH:-0} WARM=${WARM:-0} CLASS=${CLASS:-none} WRITERS=${WRITERS:-2}"
if [ "$probe" = file ]; then
    echo "ms per 1.5 MiB cold read at t = 0.0, 0.5, 1.0 … s after two writers start"
else
    echo "wall/CPU ms of 150 random 16 KiB cold reads by a new process at t = 0.5, 1.5, 2.5 … s"
fi
for trial in $(seq "$trials"); do
    sync; echo 3 >/proc/sys/vm/drop_caches; sleep 2
    if [ "${FRESH:-0}" = 1 ]; then echo "$was" >"$queue"; echo "$elevator" >"$queue"; fi
    if [ "${WARM:-0}" = 1 ]; then
        dd if="$work/warm" of=/dev/null bs=1M iflag=direct status=none
    fi
    t0=$(date +%s.%N)
    if [ "${WRITERS:-2}" = 0 ]; then
        sleep $((secs + 2)) &
    else
        fio --name=bws-write --rw=write --bs=1M --ioengine=psync --direct=0 --fsync=256 \
            --size=3G --numjobs="${WRITERS:-2}" --directory="$work" --time_based \
            --runtime=$((secs + 2)) --unlink=1 >/dev/null &
    fi
    load=$!
    if [ "$probe" = file ]; then
        # shellcheck disable=SC2086 # CLASS is ionice's arguments
        ionice ${CLASS:--c0} python3 "$work/read.py" "$work" "$t0" "$n"
    else
        row=""
        for k in $(seq 0 $((n - 1))); do
            python3 -c "import time; time.sleep(max(0.0, $t0 + $k + 0.5 - time.time()))"
            # shellcheck disable=SC2086
            row="$row $(ionice ${CLASS:--c0} python3 "$work/pages.py" "$work" "$trial$k")"
        done
        echo "$row"
    fi
    wait "$load" || true
    rm -f "$work"/bws-write.*
done
