#!/usr/bin/env bash
# Launches by the compositor while an app it did not start is in front (README.md):
#   sudo WRITERS=0|1 REPS=N run.sh UXSCHED...
# Per binary and repetition: sway headless as nobody; two fio writers like the bench's `write`
# load (WRITERS=1); the daemon (mode uxsched, defaults); the app in front (app.py as nobody,
# started outside sway's tree, focused), which asks sway four times to `exec` a poller that
# prints when it was up after the request and when it had the real-time I/O class.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
poll=$here/../first-launch/poll.py
tmp=$(mktemp -d /tmp/compositor-launch.XXXXXX)
chmod 755 "$tmp"
R=$tmp/run; mkdir -p "$R"; chown nobody:nogroup "$R"; chmod 700 "$R"
trap 'kill "${d:-}" 2>/dev/null; pkill -u nobody -x sway || true; pkill -f name=cl-write || true; rm -rf "$tmp" /var/tmp/cl-write' EXIT
printf 'socket = "%s/s.sock"\njournal = "%s/j.sqlite"\n' "$tmp" "$tmp" >"$tmp/cfg.toml"
mkdir -p /var/tmp/cl-write
U="setpriv --reuid=65534 --regid=65534 --clear-groups env XDG_RUNTIME_DIR=$R HOME=/tmp"
echo "WRITERS=${WRITERS:-1}; $(date -u +%FT%TZ); $(uname -r); vda $(cat /sys/block/vda/queue/scheduler)"
for rep in $(seq "${REPS:-3}"); do
  for B in "$@"; do
    out=$tmp/out; : >"$out"; chmod 666 "$out"
    setsid $U WLR_BACKENDS=headless WLR_LIBINPUT_NO_DEVICES=1 WLR_RENDERER=pixman sway -c /dev/null >/dev/null 2>&1 &
    until ls "$R"/wayland-? >/dev/null 2>&1 && ls "$R"/sway-ipc.*.sock >/dev/null 2>&1; do sleep 0.05; done
    W=$(basename "$(ls "$R"/wayland-? | head -1)"); S=$(ls "$R"/sway-ipc.*.sock | head -1)
    if [ "${WRITERS:-1}" = 1 ]; then
      fio --name=cl-write --rw=write --bs=1M --ioengine=psync --direct=0 --fsync=256 --size=3G \
        --numjobs=2 --directory=/var/tmp/cl-write --time_based --runtime=9 --unlink=1 >/dev/null &
    fi
    "$B" daemon --mode uxsched --config "$tmp/cfg.toml" 2>"$tmp/daemon.log" &
    d=$!
    until "$B" status --socket "$tmp/s.sock" >/dev/null 2>&1; do sleep 0.05; done
    setsid $U WAYLAND_DISPLAY="$W" /usr/bin/python3 "$here/app.py" "$poll" "$out" "$S" &
    a=$!
    sleep 0.1
    "$B" focus "$a" --socket "$tmp/s.sock" >/dev/null
    wait "$a"
    echo "rep $rep $(basename "$B"): $(paste -sd';' "$out")"
    kill "$d"; wait "$d" || true
    pkill -u nobody -x sway || true
    pkill -f name=cl-write || true; wait 2>/dev/null || true
    rm -f "$R"/*
  done
done
