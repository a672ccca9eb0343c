#!/bin/bash
# What the daemon's CPU goes to, thread by thread (issue 32): each thread's CPU time over a
# window, from /proc/PID/task/TID/stat (utime + stime, clock ticks; the kernel scales them to
# the thread's exact run time, so they add up to it at 10 ms resolution) and
# /proc/PID/task/TID/schedstat (run time, ns), summed by thread name; the threads that exited
# in the window (the process's own utime + stime less its live threads' run time); the children it
# runs (`pw-dump --monitor`, …): those alive at either end by their own stat, those that ended
# and were reaped by the daemon's cutime + cstime. Optionally other processes over the same
# window (`--also PID`: the PipeWire or X server the daemon talks to, whose work for it is not
# in the daemon's own time).
#
#   scripts/daemon-cpu.sh measure PID [SECONDS] [--also PID]...
#       a running daemon (default 60 s)
#   scripts/daemon-cpu.sh run [--x11] [--audio] [--play] [--procs N] [--seconds N] [--warmup N]
#                             [--binary PATH] [--extra 'TOML LINES']
#       as root: a daemon of BINARY (default target/release/uxsched) with the built-in defaults
#       and `sources = ["auto", "x11"]`, `[x11] display` this script's own — auto's discovery as
#       it runs alone, the X display followed by the same code auto would use, but no other X
#       server of the machine (another test's) followed; its socket, journal, tracker store and
#       cgroup names in a temporary directory, so it disturbs no other daemon — and, with --x11, an
#       Xvfb as uid 65534 with openbox and a focused xterm (what tests/idle.rs runs), with
#       --audio PipeWire + WirePlumber for that user in /run/user/65534 (as tests/audio.rs),
#       with --play a tone playing through it, with --procs N sleeping processes more on the
#       machine (what grows with them); measured for SECONDS (60) after WARMUP (10) s,
#       then everything it started is stopped (SIGTERM: the daemon restores what it changed).
#
# Output: one line per thread name — threads, CPU ms (utime+stime, in whole ticks: a thread
# under 10 ms shows 0), run ms (schedstat, exact) and % of one CPU from the run ms — then the
# threads that exited (the process's total less its live threads' run ms: ±10 ms), children,
# the process total, and --also's.
# Needs nothing but bash and coreutils for `measure`; `run` needs Xvfb, openbox, xterm,
# xdotool, xauth, pipewire, wireplumber, pw-play, dbus-daemon and python3 for what it asks.
set -euo pipefail

HZ=$(getconf CLK_TCK)

# One reading: lines `T tid comm ticks run_ns`, `P ticks cticks`, `C pid:start comm ticks`,
# `A pid comm ticks` (an --also process).
snapshot() {
    local pid=$1
    local line rest f comm t
    { read -r line <"/proc/$pid/stat"; } 2>/dev/null || { echo "daemon-cpu: process $pid is gone" >&2; return 1; }
    rest=${line##*) }
    # shellcheck disable=SC2086
    set -- $rest
    echo "P $((${12} + ${13})) $((${14} + ${15}))"
    for t in /proc/"$pid"/task/*; do
        [[ -r $t/stat ]] || continue
        { read -r line <"$t/stat" && read -r comm <"$t/comm" && read -r f _ <"$t/schedstat"; } 2>/dev/null || continue
        rest=${line##*) }
        # shellcheck disable=SC2086
        set -- $rest
        echo "T ${t##*/} ${comm// /_} $((${12} + ${13})) $f"
    done
    # Children: every process whose parent is the daemon (field 4), with its start time.
    for f in /proc/[0-9]*/stat; do
        { read -r line <"$f"; } 2>/dev/null || continue
        rest=${line##*) }
        # shellcheck disable=SC2086
        set -- $rest
        [[ $2 == "$pid" ]] || continue
        comm=${line#*(}; comm=${comm%)*}
        local c=${f#/proc/}; c=${c%/stat}
        echo "C $c:${20} ${comm// /_} $((${12} + ${13} + ${14} + ${15}))"
    done
}

also_snapshot() {
    local p line rest comm
    for p in "$@"; do
        { read -r line <"/proc/$p/stat"; } 2>/dev/null || continue
        rest=${line##*) }
        comm=${line#*(}; comm=${comm%)*}
        # shellcheck disable=SC2086
        set -- $rest
        echo "A $p ${comm// /_} $((${12} + ${13}))"
    done
}

# measure PID SECONDS [ALSO...]: the table.
measure() {
    local pid=$1 secs=$2; shift 2
    local also=("$@")
    [[ -d /proc/$pid ]] || { echo "daemon-cpu: no process $pid" >&2; exit 2; }
    local a b
    a=$(snapshot "$pid" && also_snapshot "${also[@]}")
    local t0 t1
    t0=$(date +%s%N)
    sleep "$secs"
    b=$(snapshot "$pid" && also_snapshot "${also[@]}")
    t1=$(date +%s%N)
    printf '%s\n--\n%s\n' "$a" "$b" | awk -v hz="$HZ" -v wall_ns=$((t1 - t0)) -v pid="$pid" '
        /^--$/ { second = 1; next }
        {
            k = $1 " " $2
            if ($1 == "P") { if (second) { p1 = $2; c1 = $3 } else { p0 = $2; c0 = $3 } ; next }
            name[k] = $3
            if (second) { v1[k] = $4; r1[k] = $5; seen1[k] = 1 } else { v0[k] = $4; r0[k] = $5; seen0[k] = 1 }
            keys[k] = 1
        }
        END {
            ms = 1000 / hz; wall_ms = wall_ns / 1e6
            printf "daemon %d, %.1f s, %d ticks/s; %% = of one CPU\n", pid, wall_ms / 1000, hz
            printf "%-24s %7s %10s %10s %8s\n", "thread (name)", "threads", "cpu ms", "run ms", "% CPU"
            live = 0
            for (k in keys) {
                split(k, kk, " ")
                if (kk[1] != "T") continue
                d = (v1[k] - v0[k]) * ms; r = (r1[k] - r0[k]) / 1e6
                if (!seen0[k]) { d = v1[k] * ms; r = r1[k] / 1e6 }
                if (!seen1[k]) continue
                n = name[k]; cpu[n] += d; run[n] += r; cnt[n]++; live += r
            }
            total = (p1 - p0) * ms
            for (n in cpu) order[n] = run[n]
            while (length(order) > 0) {
                best = ""; for (n in order) if (best == "" || order[n] > order[best]) best = n
                printf "%-24s %7d %10.0f %10.1f %8.3f\n", best, cnt[best], cpu[best], run[best], 100 * run[best] / wall_ms
                delete order[best]
            }
            # The process total (ticks) less its live threads'"'"' run time: to within the
            # total'"'"'s 10 ms, what threads that ended in the window used.
            gone = total - live; if (gone < 0) gone = 0
            printf "%-24s %7s %10.0f %10s %8.3f\n", "(threads that exited)", "", gone, "", 100 * gone / wall_ms
            printf "%-24s %7s %10.0f %10s %8.3f\n", "daemon process", "", total, "", 100 * total / wall_ms
            # Children: alive at the end (their time since the start, or all of it if born
            # since), reaped ones through the daemon'"'"'s cutime+cstime less what those had at the
            # start.
            child = (c1 - c0) * ms
            for (k in keys) {
                split(k, kk, " ")
                if (kk[1] != "C") continue
                if (seen1[k]) { d = (seen0[k] ? v1[k] - v0[k] : v1[k]) * ms; ch[name[k]] += d; chn[name[k]]++; child += d }
                else if (seen0[k]) child -= v0[k] * ms
            }
            for (n in ch) printf "%-24s %7d %10.0f %10s %8.3f\n", "child " n, chn[n], ch[n], "", 100 * ch[n] / wall_ms
            reaped = (c1 - c0) * ms
            printf "%-24s %7s %10.0f %10s %8.3f\n", "children, all", "", child, "", 100 * child / wall_ms
            printf "%-24s %7s %10.0f %10s %8.3f\n", "daemon + children", "", total + child, "", 100 * (total + child) / wall_ms
            for (k in keys) {
                split(k, kk, " ")
                if (kk[1] != "A" || !seen0[k] || !seen1[k]) continue
                d = (v1[k] - v0[k]) * ms
                printf "%-24s %7s %10.0f %10s %8.3f\n", "also " name[k] " " kk[2], "", d, "", 100 * d / wall_ms
            }
        }'
}

# ---- run: a daemon (and a desktop) of our own ------------------------------------------------

USER_ID=65534
STARTED=()
TMP=""
cleanup() {
    local i
    for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do
        kill -TERM "${STARTED[$i]}" 2>/dev/null || true
    done
    for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do
        for _ in $(seq 100); do kill -0 "${STARTED[$i]}" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "${STARTED[$i]}" 2>/dev/null || true
    done
    rm -f "/run/user/$USER_ID/pipewire-0" "/run/user/$USER_ID/pipewire-0.lock" \
        "/run/user/$USER_ID/pipewire-0-manager" "/run/user/$USER_ID/pipewire-0-manager.lock"
    [[ -n $TMP && $TMP == /tmp/daemon-cpu.* ]] && rm -rf "$TMP"
}

# `as_user CMD` in the foreground; `(exec "${AS_USER[@]}" CMD) &` in the background, so that
# `$!` is the program's own pid.
AS_USER=(setpriv --reuid="$USER_ID" --regid="$USER_ID" --clear-groups)
as_user() { "${AS_USER[@]}" "$@"; }

start_x11() {
    local n=$1
    mcookie | { read -r c; xauth -q -f "$TMP/xauth" add ":$n" . "$c"; }
    chown "$USER_ID:$USER_ID" "$TMP/xauth"
    (exec "${AS_USER[@]}" env -i PATH=/usr/bin:/bin HOME="$TMP/home" Xvfb ":$n" -auth "$TMP/xauth" \
        -nolisten tcp -screen 0 1024x768x24 >"$TMP/xvfb.log" 2>&1) &
    STARTED+=($!)
    XPID=$!
    for _ in $(seq 100); do grep -q "/tmp/.X11-unix/X$n" /proc/net/unix 2>/dev/null && break; sleep 0.1; done
    local x=(env -i PATH=/usr/bin:/bin HOME="$TMP/home" DISPLAY=":$n" XAUTHORITY="$TMP/xauth")
    (exec "${AS_USER[@]}" "${x[@]}" openbox >"$TMP/openbox.log" 2>&1) &
    STARTED+=($!)
    sleep 1
    (exec "${AS_USER[@]}" "${x[@]}" xterm -geometry 80x24+0+0 -e sleep 100000 >/dev/null 2>&1) &
    STARTED+=($!)
    XTERM=$!
    local win
    win=$(timeout 20 "${AS_USER[@]}" "${x[@]}" xdotool search --sync --pid "$XTERM" | head -1)
    [[ -n $win ]] || { echo "daemon-cpu: xterm $XTERM showed no window" >&2; exit 1; }
    as_user "${x[@]}" xdotool windowactivate --sync "$win"
}

start_audio() {
    local rt=/run/user/$USER_ID
    if grep -q " $rt/pipewire-0\$" /proc/net/unix; then
        echo "daemon-cpu: a PipeWire already serves $rt (another test's?): not started twice" >&2
        exit 1
    fi
    if [[ ! -d $rt ]]; then
        mkdir -p "$rt" && chown "$USER_ID:$USER_ID" "$rt" && chmod 700 "$rt"
    fi
    cat >"$TMP/pipewire.conf" <<'EOF'
context.properties = { core.daemon = true core.name = pipewire-0 support.dbus = false }
context.spa-libs = { audio.convert.* = audioconvert/libspa-audioconvert support.* = support/libspa-support }
context.modules = [
    { name = libpipewire-module-protocol-native }
    { name = libpipewire-module-metadata }
    { name = libpipewire-module-spa-node-factory }
    { name = libpipewire-module-client-node }
    { name = libpipewire-module-adapter }
    { name = libpipewire-module-link-factory }
    { name = libpipewire-module-access }
    { name = libpipewire-module-session-manager }
    { name = libpipewire-module-profiler }
]
context.objects = [
    { factory = adapter args = { factory.name = support.null-audio-sink node.name = daemon-cpu-sink
      media.class = Audio/Sink audio.position = "FL,FR" object.linger = true } }
]
EOF
    chmod 644 "$TMP/pipewire.conf"
    # WirePlumber's bus: a private one open to all, as tests/common/bus.rs starts.
    cat >"$TMP/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$TMP/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/> <allow own="*"/> <allow send_destination="*"/> <allow receive_sender="*"/>
  </policy>
</busconfig>
EOF
    dbus-daemon --config-file="$TMP/bus.conf" --nofork --nopidfile --nosyslog >/dev/null 2>&1 &
    STARTED+=($!)
    for _ in $(seq 100); do [[ -S $TMP/bus ]] && break; sleep 0.1; done
    local u=(env -i PATH=/usr/bin:/bin HOME="$TMP/home" XDG_RUNTIME_DIR="$rt"
        DBUS_SESSION_BUS_ADDRESS="unix:path=$TMP/bus")
    (cd / && exec "${AS_USER[@]}" "${u[@]}" pipewire -c "$TMP/pipewire.conf" >"$TMP/pipewire.log" 2>&1) &
    STARTED+=($!)
    for _ in $(seq 100); do [[ -S $rt/pipewire-0 ]] && break; sleep 0.1; done
    (cd / && exec "${AS_USER[@]}" "${u[@]}" wireplumber >"$TMP/wireplumber.log" 2>&1) &
    STARTED+=($!)
    PW_ENV=("${u[@]}")
    for _ in $(seq 100); do [[ $(node_state daemon-cpu-sink) ]] && break; sleep 0.2; done
    PWPID=$(pgrep -u "$USER_ID" -x pipewire | head -1 || true)
    if [[ ${PLAY:-0} == 1 ]]; then
        python3 - "$TMP/tone.wav" <<'EOF'
import math, struct, sys, wave
w = wave.open(sys.argv[1], "wb"); w.setnchannels(2); w.setsampwidth(2); w.setframerate(48000)
frames = b"".join(struct.pack("<hh", s, s) for s in
    (int(2000 * math.sin(i * 440 * 2 * math.pi / 48000)) for i in range(48000)))
w.writeframes(frames * 600); w.close()
EOF
        chmod 644 "$TMP/tone.wav"
        # WirePlumber still starting may miss a stream (tests/audio.rs says the same): three tries.
        local try
        for try in 1 2 3; do
            (cd / && exec "${AS_USER[@]}" "${u[@]}" pw-play "$TMP/tone.wav" >/dev/null 2>&1) &
            local player=$!
            for _ in $(seq 50); do [[ $(node_state pw-play) == running ]] && break; sleep 0.2; done
            if [[ $(node_state pw-play) == running ]]; then STARTED+=("$player"); break; fi
            kill "$player"; wait "$player" 2>/dev/null || true
            echo "daemon-cpu: pw-play not running after 10 s (try $try of 3)" >&2
        done
    fi
}

# The state of PipeWire node NAME (`running`, `idle`, …; empty if there is none).
node_state() {
    (cd / && as_user "${PW_ENV[@]}" pw-dump 2>/dev/null) | python3 -c '
import json, sys
for o in json.load(sys.stdin):
    i = o.get("info") or {}
    if (i.get("props") or {}).get("node.name") == sys.argv[1]:
        print(i.get("state", "")); break' "$1" 2>/dev/null || true
}

run() {
    local x11=0 audio=0 secs=60 warmup=10 bin=target/release/uxsched extra="" procs=0
    PLAY=0
    while (($#)); do
        case $1 in
            --x11) x11=1 ;;
            --audio) audio=1 ;;
            --play) PLAY=1 ;;
            --procs) procs=$2; shift ;;
            --seconds) secs=$2; shift ;;
            --warmup) warmup=$2; shift ;;
            --binary) bin=$2; shift ;;
            --extra) extra=$2; shift ;;
            *) echo "daemon-cpu: unknown option $1" >&2; exit 2 ;;
        esac
        shift
    done
    [[ $(id -u) == 0 ]] || { echo "daemon-cpu run: needs root (the daemon and the user's desktop)" >&2; exit 2; }
    ((audio == 0 || x11 == 1)) || { echo "daemon-cpu run: --audio needs --x11 (a session names the user)" >&2; exit 2; }
    bin=$(realpath "$bin")
    TMP=$(mktemp -d /tmp/daemon-cpu.XXXXXX)
    chmod 755 "$TMP"
    mkdir "$TMP/home" && chown "$USER_ID:$USER_ID" "$TMP/home"
    trap cleanup EXIT
    # Other live X servers: the `auto` source follows them too (and their focus), so say so.
    local others
    others=$(awk '$6 == "01" && $8 ~ /^\/tmp\/.X11-unix\/X/ { print $8 }' /proc/net/unix | sort -u | tr '\n' ' ')
    [[ -z $others ]] || echo "daemon-cpu: note: X servers already listening (seen by discovery, not followed): $others" >&2
    local n=""
    XPID="" PWPID=""
    if ((x11)); then
        n=$((400 + RANDOM % 400))
        start_x11 "$n"
    fi
    ((audio)) && start_audio
    local i
    for ((i = 0; i < procs; i++)); do
        (exec sleep 100000) &
        STARTED+=($!)
    done
    local s=$$
    # `auto` runs its discovery as it would alone; the X displays are left to an `x11` source
    # on this script's display only (auto's follower for a display is that same code), so that
    # no other X server running on the machine (another test's) is followed and boosted.
    [[ -n $n ]] || n=$((800 + RANDOM % 100))
    cat >"$TMP/uxsched.toml" <<EOF
socket = "$TMP/s.sock"
journal = "$TMP/journal.sqlite"
cgroup_name = "uxsched-cpu-$s"
sources = ["auto", "x11"]
[x11]
display = ":$n"
[tracker]
store = "$TMP/tracker.sqlite"
$extra
EOF
    XAUTHORITY="$TMP/xauth" "$bin" daemon --config "$TMP/uxsched.toml" 2>"$TMP/daemon.log" &
    local d=$!
    STARTED+=("$d")
    for _ in $(seq 100); do "$bin" status --socket "$TMP/s.sock" >/dev/null 2>&1 && break; sleep 0.1; done
    sleep "$warmup"
    local focus
    focus=$("$bin" status --json --socket "$TMP/s.sock" | python3 -c 'import json,sys; s=json.load(sys.stdin); s=s.get("status", s); print(s.get("focus"), s.get("focus_comm"), "audible:", s.get("audible"))' 2>/dev/null || echo "?")
    echo "daemon-cpu: $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null) $(date -u +%FT%TZ)," \
        "x11=$x11 audio=$audio play=$PLAY procs=+$procs ($(ls -d /proc/[0-9]* | wc -l) now), focus: $focus"
    local also=()
    [[ -n $XPID ]] && also+=("$XPID")
    [[ -n $PWPID ]] && also+=("$PWPID")
    measure "$d" "$secs" "${also[@]}"
    grep -c . "$TMP/daemon.log" | sed 's/^/daemon-cpu: daemon log lines: /'
}

case ${1:-} in
    measure)
        shift
        pid=${1:?daemon-cpu measure PID [SECONDS] [--also PID]...}; shift
        secs=60
        if [[ ${1:-} =~ ^[0-9]+$ ]]; then secs=$1; shift; fi
        also=()
        while (($#)); do
            [[ $1 == --also && -n ${2:-} ]] || { echo "daemon-cpu: unknown argument $1" >&2; exit 2; }
            also+=("$2"); shift 2
        done
        measure "$pid" "$secs" "${also[@]}" ;;
    run) shift; run "$@" ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2 ;;
esac
