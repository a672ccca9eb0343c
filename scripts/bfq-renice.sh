#!/usr/bin/env bash
# Why uxsched pins best-effort 4 on the threads it renices where a disk runs BFQ
# (docs/storage.md, "Where a disk runs BFQ"): BFQ weight-raises only queues of the default
# weight, and a nice below 0 derives another I/O level. Two fio random readers start 0.3 s before
# a reader that reads six 1.5 MiB files cold, 100 ms apart; the reader runs at nice 0, at nice −5,
# and at nice −5 with an explicit best-effort 4 (`ionice -c2 -n4`), TRIALS times each, with the
# disk under DIR on BFQ (its elevator is put back at the end). Prints each read's time in ms.
#   sudo scripts/bfq-renice.sh [DIR] [TRIALS]      (DIR default /var/tmp, TRIALS default 3)
set -euo pipefail
dir=${1:-/var/tmp}
trials=${2:-3}
[ "$(id -u)" = 0 ] || { echo "bfq-renice: needs root (the elevator, nice −5)" >&2; exit 2; }
for t in fio python3 ionice findmnt lsblk; do
    command -v "$t" >/dev/null || { echo "bfq-renice: $t missing (apt install fio python3 util-linux)" >&2; exit 2; }
done
. "$(dirname "$0")/lib/elevator.sh"
elevator_of "$dir" bfq-renice
grep -qw bfq "$queue" || { echo "bfq-renice: $disk offers no bfq ($(cat "$queue"))" >&2; exit 2; }
work=$(mktemp -d "$dir/bfq-renice.XXXXXX")
trap 'echo "$was" >"$queue"; rm -rf "$work"' EXIT
fio --name=lay --filename="$work/rand.dat" --size=256M --rw=write --bs=1M --direct=1 >/dev/null
for i in 0 1 2 3 4 5; do head -c 1572864 /dev/urandom >"$work/p$i"; done
cat >"$work/read.py" <<'EOF'
import os, sys, time
out = []
for i in range(6):
    fd = os.open(os.path.join(sys.argv[1], f"p{i}"), os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    t = time.monotonic()
    while os.read(fd, 1 << 20):
        pass
    out.append((time.monotonic() - t) * 1e3)
    os.close(fd)
    time.sleep(0.1)
print(sys.argv[2].ljust(12), " ".join(f"{x:5.0f}" for x in out))
EOF
echo bfq >"$queue"
echo "disk $disk on bfq (was $was); $(date -u +%FT%TZ); loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
echo "reader       ms per 1.5 MiB cold read, first to sixth"
for _ in $(seq "$trials"); do
    for v in nice0 nice-5 nice-5+be4; do
        fio --name=r --filename="$work/rand.dat" --size=256M --rw=randread --bs=4k --direct=1 \
            --ioengine=psync --numjobs=2 --time_based --runtime=4 >/dev/null &
        load=$!
        sleep 0.3
        case $v in
            nice0) python3 "$work/read.py" "$work" "$v" ;;
            nice-5) nice -n -5 python3 "$work/read.py" "$work" "$v" ;;
            nice-5+be4) nice -n -5 ionice -c2 -n4 python3 "$work/read.py" "$work" "$v" ;;
        esac
        wait "$load"
        sleep 1
    done
done
