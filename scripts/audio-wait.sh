#!/bin/bash
# The audio boost's effect (docs/desktops.md, "Audio"): pw-play's data thread's run-queue wait per
# run over 10 s, with 6 CPU hogs (`yes`) in its session, without the daemon and then with it. As
# root: uid 65534 runs a session bus, PipeWire with a null sink, WirePlumber, an Xvfb on :91 (the
# session the daemon's discovery finds) and the player with its hogs; the daemon is the test
# fixture's `daemon` role (cargo build --release -p uxsched-daemon). Everything is stopped by pid.
set -u
W=/tmp/audm; R=/run/user/65534; MADE=0
[ -d $R ] || { mkdir -p $R; chown 65534:65534 $R; chmod 700 $R; MADE=1; }
mkdir -p $W/home; chmod 755 $W; chown 65534:65534 $W/home
sed -n '/^const PIPEWIRE_CONF/,/^"#;/p' /work/main/crates/daemon/tests/audio.rs | sed '1d;$d' > $W/pw.conf
python3 -c "
import wave
w=wave.open('$W/tone.wav','wb'); w.setnchannels(2); w.setsampwidth(2); w.setframerate(48000); w.writeframes(b'\x10\x00'*2*48000*90); w.close()"
chmod 644 $W/tone.wav $W/pw.conf
U="setpriv --reuid 65534 --regid 65534 --clear-groups env -i PATH=/usr/bin:/bin HOME=$W/home XDG_RUNTIME_DIR=$R DBUS_SESSION_BUS_ADDRESS=unix:path=$W/home/bus"
PIDS=()
PLAYER=
DP=
cleanup() {
  [ -n "$DP" ] && kill -TERM $DP 2>/dev/null && wait $DP
  [ -n "$PLAYER" ] && kill -TERM -- -$PLAYER 2>/dev/null  # the player's session: pw-play, the hogs
  for p in "${PIDS[@]}"; do kill $p 2>/dev/null; done
  sleep 1
  rm -f $R/pipewire-0 $R/pipewire-0.lock; [ $MADE = 1 ] && rm -rf $R
  rm -rf $W
}
trap cleanup EXIT
trap 'exit 1' TERM INT
cd /
$U dbus-daemon --session --address=unix:path=$W/home/bus --nofork >/dev/null 2>&1 & PIDS+=($!)
sleep 0.5
$U pipewire -c $W/pw.conf >/dev/null 2>&1 & PIDS+=($!)
sleep 1
$U wireplumber >/dev/null 2>&1 & PIDS+=($!)
setpriv --reuid 65534 --regid 65534 --clear-groups Xvfb :91 -nolisten tcp >/dev/null 2>&1 & PIDS+=($!)
sleep 2
$U setsid sh -c "echo \$\$ > $W/home/player.pid; pw-play $W/tone.wav & for i in 1 2 3 4 5 6; do yes > /dev/null & done; wait" >/dev/null 2>&1 &
sleep 2
PLAYER=$(cat $W/home/player.pid)
PP=$(pgrep -P $PLAYER -x pw-play | head -1)
D=$(ls /proc/$PP/task | grep -v "^$PP$" | head -1)
echo "pw-play $PP data thread $D: $(cat /proc/$PP/task/$D/sched | grep -E '^se.custom_slice|^prio' | tr -s ' ' | tr '\n' ' ')"
measure() {
  read r0 w0 n0 < /proc/$PP/task/$D/schedstat; sleep 10; read r1 w1 n1 < /proc/$PP/task/$D/schedstat
  [ $n1 -gt $n0 ] || { echo "$1: the data thread did not run"; return; }
  echo "$1: runs $((n1-n0)) in 10 s, run-queue wait per run $(( (w1-w0)/(n1-n0)/1000 )) us, total wait $(( (w1-w0)/1000000 )) ms"
}
measure "no daemon"
cat > $W/d.toml <<EOC
mode = "uxsched"
socket = "$W/d.sock"
journal = "$W/journal.sqlite"
cgroup_name = "uxsched-audm"
sources = ["explicit"]
[tracker]
enabled = false
lever = "fair"
[audio]
enable = true
EOC
UXSCHED_TEST_CONFIG=$W/d.toml /work/main/target/release/uxsched-daemon-fixture daemon >/dev/null 2> $W/daemon.log & DP=$!
for i in $(seq 1 100); do grep -q "audible processes pids=\[[0-9]" $W/daemon.log 2>/dev/null && break; sleep 0.2; done
sleep 0.5
echo "daemon: $(grep -E 'audible processes' $W/daemon.log | head -1 | cut -c1-200)"
echo "data thread: $(grep -E 'policy|prio' /proc/$PP/task/$D/sched | tr -s ' ' | tr '\n' ' ') nice=$(awk '{print $19}' /proc/$PP/task/$D/stat)"
measure "daemon, audible boost"
exit 0
