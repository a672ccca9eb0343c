#!/usr/bin/env bash
# The first launch after a daemon's start (docs/results/2026-11-29/first-launch/README.md):
#   sudo BFQ=true|false WRITERS=0|1 ORDER=writers|daemon WAIT=S REPS=N run.sh [UXSCHED]
# Per repetition: two fio writers like the bench's `write` load (WRITERS=1), the daemon (mode
# uxsched, `switch_to_bfq = BFQ` for vda), in ORDER (writers first, WAIT s apart, or the daemon
# first), then the app in front (app.py as nobody, focused), whose four launches print when
# each was up after its fork and when it had the real-time I/O class.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=${1:-$here/../../../../target/release/uxsched}
tmp=$(mktemp -d /tmp/first-launch.XXXXXX)
chmod 755 "$tmp"
trap 'kill "${d:-}" 2>/dev/null; pkill -f name=fl-write || true; rm -rf "$tmp" /var/tmp/fl-write' EXIT
printf 'socket = "%s/s.sock"\njournal = "%s/j.sqlite"\n[storage]\nswitch_to_bfq = %s\nbfq_devices = ["vda"]\n' \
  "$tmp" "$tmp" "${BFQ:-false}" >"$tmp/cfg.toml"
mkdir -p /var/tmp/fl-write
writers() {
  [ "${WRITERS:-1}" = 1 ] || return 0
  fio --name=fl-write --rw=write --bs=1M --ioengine=psync --direct=0 --fsync=256 --size=3G \
    --numjobs=2 --directory=/var/tmp/fl-write --time_based --runtime=$((8 + ${WAIT:-0})) \
    --unlink=1 >/dev/null &
}
echo "BFQ=${BFQ:-false} WRITERS=${WRITERS:-1} ORDER=${ORDER:-writers} WAIT=${WAIT:-0}; $(date -u +%FT%TZ)"
for rep in $(seq "${REPS:-4}"); do
  out=$tmp/out.$rep; : >"$out"; chmod 666 "$out"
  if [ "${ORDER:-writers}" = writers ]; then writers; sleep "${WAIT:-0}"; fi
  "$B" daemon --mode uxsched --config "$tmp/cfg.toml" 2>"$tmp/daemon.$rep.log" &
  d=$!
  until "$B" status --socket "$tmp/s.sock" >/dev/null 2>&1; do sleep 0.05; done
  if [ "${ORDER:-writers}" = daemon ]; then sleep "${WAIT:-0}"; writers; fi
  setsid setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 "$here/app.py" "$here" "$out" &
  a=$!
  sleep 0.1
  "$B" focus "$a" --socket "$tmp/s.sock" >/dev/null
  wait "$a"
  echo "rep $rep: $(paste -sd';' "$out")"
  kill "$d"; wait "$d" || true
  pkill -f name=fl-write || true; wait 2>/dev/null || true
done
