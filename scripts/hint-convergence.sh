#!/usr/bin/env bash
# A performance-hint session converging under CPU load (docs/api.md; measured in
# docs/results/README.md, "Seed 002 on the real kernel"):
# starts a private uxsched daemon (its own socket, journal and cgroup name; mode eimos, so only the
# session changes anything), runs crates/client/examples/hint_convergence.rs against it, stops it.
# As root. Arguments go to the example (e.g. --work-ms 4 --target-ms 8 --frames 240 --hogs 2).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "hint-convergence: run as root (the daemon changes nice levels)" >&2; exit 1; }
CARGO=${CARGO:-cargo}
PROFILE=${PROFILE:-release} # or dev (the example measures CPU time, not code speed)
out=$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
"$CARGO" build --profile "$PROFILE" --locked -p uxsched
"$CARGO" build --profile "$PROFILE" --locked -p uxsched-client --example hint_convergence
dir=$(mktemp -d /tmp/uxsched-hint.XXXXXX)
daemon_pid=""
cleanup() {
  if [ -n "$daemon_pid" ]; then kill -TERM "$daemon_pid" 2>/dev/null || true; wait "$daemon_pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
cat > "$dir/uxsched.toml" <<TOML
mode = "eimos"
socket = "$dir/uxsched.sock"
journal = "$dir/journal.sqlite"
cgroup_name = "uxsched-hint-$$"
[tracker]
store = "$dir/tracker.sqlite"
TOML
./target/"$out"/uxsched daemon --config "$dir/uxsched.toml" 2>"$dir/daemon.log" &
daemon_pid=$!
for _ in $(seq 100); do [ -S "$dir/uxsched.sock" ] && break; sleep 0.1; done
[ -S "$dir/uxsched.sock" ] || { cat "$dir/daemon.log" >&2; exit 1; }
./target/"$out"/examples/hint_convergence "$dir/uxsched.sock" "$@"
