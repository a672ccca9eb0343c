#!/usr/bin/env bash
# Is a cold read slower in the first seconds after a copy starts, under BFQ? (docs/storage.md,
# "The first launch after the writers start".) Two fio writers like the bench's `write` load
# (1 MiB buffered writes, fsync every 256 MiB) start at t = 0; a reader at nice 0 reads a cold
# 1.5 MiB file every 0.5 s for SECONDS; each read's time in ms is printed against the time since
# the writers started. TRIALS times, with the disk under DIR on ELEVATOR (default bfq; its
# elevator is put back at the end), the writers' files removed and the dirty data synced between
# trials.
#   sudo scripts/bfq-writer-start.sh [DIR] [TRIALS] [SECONDS] [ELEVATOR]
set -euo pipefail
dir=${1:-/var/tmp}
trials=${2:-3}
secs=${3:-20}
elevator=${4:-bfq}
[ "$(id -u)" = 0 ] || { echo "bfq-writer-start: needs root (the elevator, the cache drop)" >&2; exit 2; }
for t in fio python3 findmnt lsblk; do
    command -v "$t" >/dev/null || { echo "bfq-writer-start: $t missing (apt install fio python3 util-linux)" >&2; exit 2; }
done
. "$(dirname "$0")/lib/elevator.sh"
elevator_of "$dir" bfq-writer-start
grep -qw "$elevator" "$queue" || { echo "bfq-writer-start: $disk offers no $elevator ($(cat "$queue"))" >&2; exit 2; }
work=$(mktemp -d "$dir/bfq-writer-start.XXXXXX")
trap 'pkill -f "name=bws-write" || true; echo "$was" >"$queue"; rm -rf "$work"' EXIT
n=$((secs * 2))
for i in $(seq 0 $((n - 1))); do head -c 1572864 /dev/urandom >"$work/p$i"; done
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
echo "$elevator" >"$queue"
echo "disk $disk on $elevator (was $was); $(date -u +%FT%TZ); loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
echo "ms per 1.5 MiB cold read at t = 0.0, 0.5, 1.0 … s after two writers start"
for _ in $(seq "$trials"); do
    sync; echo 3 >/proc/sys/vm/drop_caches; sleep 2
    t0=$(date +%s.%N)
    fio --name=bws-write --rw=write --bs=1M --ioengine=psync --direct=0 --fsync=256 \
        --size=3G --numjobs=2 --directory="$work" --time_based --runtime=$((secs + 2)) \
        --unlink=1 >/dev/null &
    load=$!
    python3 "$work/read.py" "$work" "$t0" "$n"
    wait "$load" || true
    rm -f "$work"/bws-write.*
done
