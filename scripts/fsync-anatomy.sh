#!/usr/bin/env bash
# Where an editor's save waits under a copy (issue 33): a 320 KiB write timed alone, as the
# `fsync` scenario's save, while two fio writers copy through the page cache with fsync (the
# bench's `write` load), split into its parts —
#   direct        the data write only (O_DIRECT: no page cache, no cache flush)
#   fdatasync     write through the page cache + fdatasync (data, then the device cache flush)
# each in the best-effort class (what a thread has) and in the real-time class (what the daemon
# gives the critical set: IOPRIO_CLASS_RT 4 here, 0 for the test), interleaved, N samples each.
# Prints the filesystem's journal state, the device's elevator and write cache, and per variant
# p50 / p90 / max ms; idle first (no writers).
#   sudo scripts/fsync-anatomy.sh [DIR] [N]      (DIR on the disk to test; default /var/tmp)
set -euo pipefail
dir=${1:-/var/tmp}
n=${2:-30}
[ "$(id -u)" = 0 ] || { echo "run as root (ionice -c1 needs it)" >&2; exit 2; }
for t in fio ionice dd findmnt; do
  command -v $t >/dev/null || { echo "needs $t (apt-get install fio util-linux coreutils)" >&2; exit 2; }
done
work=$(mktemp -d "$dir/fsync-anatomy.XXXXXX")
trap 'pkill -f "fio --name=fsync-anatomy" 2>/dev/null || true; rm -rf "$work"' EXIT

src=$(findmnt -no SOURCE --target "$dir")
dev=$(basename "$(readlink -f "$src")")
disk=$dev
[ -e "/sys/block/$dev" ] || disk=$(basename "$(dirname "$(readlink -f "/sys/class/block/$dev")")")
fs=$(findmnt -no FSTYPE --target "$dir")
journal="no journal (no /proc/fs/jbd2/$dev*)"
ls -d /proc/fs/jbd2/"$dev"* >/dev/null 2>&1 && journal="jbd2 journal"
echo "# $(date -u +%FT%TZ) $(uname -r) loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $dir on $src ($fs, $journal); $disk: elevator $(cat /sys/block/$disk/queue/scheduler), write cache $(cat /sys/block/$disk/queue/write_cache), rotational $(cat /sys/block/$disk/queue/rotational)"

us() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(((e - s) / 1000)); }
save() { # VARIANT CLASS: one timed 320 KiB save, µs
  local io=(dd if=/dev/zero bs=320k count=1 status=none)
  case $1 in
    direct) io+=(of="$work/direct" oflag=direct) ;;
    fdatasync) io+=(of="$work/synced" conv=fdatasync) ;;
  esac
  if [ "$2" = rt ]; then us ionice -c1 -n0 "${io[@]}"; else us "${io[@]}"; fi
}
summary() { # LABEL < µs per line: nearest-rank percentiles
  sort -n | awk -v l="$1" '{ a[NR] = $1 } END {
    n = NR; i50 = int(n * 0.5 + 0.999); i90 = int(n * 0.9 + 0.999)
    printf "%-24s n=%d  p50 %.1f  p90 %.1f  max %.1f ms\n", l, n, a[i50] / 1000, a[i90] / 1000, a[n] / 1000 }'
}
measure() { # PHASE: every variant × class, interleaved, n rounds
  local v c
  for _ in $(seq "$n"); do
    for v in direct fdatasync; do
      for c in be rt; do
        echo "$v $c $(save $v $c)" >>"$work/$1"
        sleep 0.1
      done
    done
  done
  for v in direct fdatasync; do
    for c in be rt; do
      awk -v v=$v -v c=$c '$1 == v && $2 == c { print $3 }' "$work/$1" | summary "$1 $v $c"
    done
  done
}

measure idle
mkdir -p "$work/fio"
fio --name=fsync-anatomy --rw=write --bs=1M --ioengine=psync --direct=0 --fsync=256 \
  --size=2G --loops=1000000 --unlink_each_loop=1 --unlink=1 --runtime=3600 --time_based \
  --numjobs=2 --directory="$work/fio" --output=/dev/null &
sleep 5
measure writers
