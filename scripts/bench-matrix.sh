#!/usr/bin/env bash
# The measurement matrix of docs/results/README.md (issue 9): scenarios × load layouts × modes,
# one `uxsched bench` run per cell, each interleaving its modes (A B C A B C …) so ratios compare
# within one run.
#   sudo scripts/bench-matrix.sh OUTDIR [CELL…]      (no CELL: every cell, in the order below)
# A cell is SCENARIO/LAYOUT[/TAG]; its modes, reps, duration and load are set in `cell_args`.
# Each cell writes OUTDIR/CELL.txt (the report, headed by the date, commit and /proc/loadavg)
# and OUTDIR/CELL.json (`--save`: every run's raw samples). Uses ./target/release/uxsched
# (copied into OUTDIR first, so a rebuild during the matrix does not change the binary).
# Takes about 4 hours for every cell on 2 CPUs; run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/bench-matrix.sh OUTDIR [CELL…]}
shift
mkdir -p "$out"
bin="$out/uxsched"
if [ ! -x "$bin" ]; then
  cp target/release/uxsched "$bin"
  # The checkout the binary was copied from (a dirty tree is marked so).
  { git describe --always --dirty 2>/dev/null || echo unknown; } >"$out/commit"
fi
commit=$(cat "$out/commit" 2>/dev/null || echo unknown)

PEERS=idle,stock,android,s76,schedqos,fifo,uxsched
DAEMON_MODES=idle,stock,eimos,vtcfs,mcfs,facfs,shuffledog,uxsched
STORAGE_MODES=idle,stock,android,s76,uxsched-cpu,uxsched,uxsched-bfq

# The bench arguments of one cell.
cell_args() {
  local scenario=${1%%/*} rest=${1#*/}
  local layout=${rest%%/*} tag=${rest#*/}
  [ "$tag" = "$rest" ] && tag=peers
  local args=("$scenario" --layout "$layout") reps=3 duration=5s load=()
  case $scenario in
    # Real programs: ~13 keystrokes/s; 4 × 20 s per mode puts p99 on ≥ 10 samples.
    xterm | xedit) load=(--load cpu --load-workers 12) reps=4 duration=20s ;;
    # Issue 30's browser: 12 hogs, 3 × 10 s per mode (~13 keystrokes/s: p99 on ≥ 3 samples);
    # each run also starts Chromium and waits for its window and caret to settle.
    chromium) load=(--load cpu --load-workers 12) reps=3 duration=10s ;;
    # 10 wake-ups/s: 4 × 15 s per mode gives 600 samples (p99 on 6).
    alarm) reps=4 duration=15s ;;
    # 4 flips/s: 3 × 5 s gave 63 flips per mode, so p95 was the 4th-slowest flip and jumped
    # between a flip's two outcomes (cached read or one queued behind fio) from run to run.
    # 4 × 30 s: 480 flips, p95 on 24.
    gallery) reps=4 duration=30s ;;
    # Issue 33: a cold launch takes 0.2-2 s here plus the cache drop and closing; 3 × 6 launches
    # per mode (p95 is near the maximum).
    launch) args+=(--launches 6) reps=3 duration=60s ;;
    # An editor's save every 250 ms: 3 × 10 s, 120 saves per mode.
    fsync) reps=3 duration=10s ;;
  esac
  case $tag in
    peers) args+=(--modes "$PEERS") ;;
    daemon) args+=(--modes "$DAEMON_MODES") ;;
    short) args+=(--modes "$PEERS") reps=3 duration=10s ;;
    # The scenario's own load gives way to the build (one --load per run).
    kbuild) load=(--load kbuild) args+=(--modes idle,stock,android,schedqos,fifo,uxsched) ;;
    roles) args+=(--modes idle,stock,fifo,uxsched,uxsched-roles) ;;
    lever) args+=(--modes idle,stock,fifo,uxsched,uxsched-roles,uxsched-fair) ;;
    # Issue 10's effect cells: the tracker against name-based roles and the limit (fifo), beside
    # the peers, with p99 on ≥ 10 samples (4 × 10 s: about 1,200 frames per mode).
    long) args+=(--modes "$PEERS,uxsched-roles") reps=4 duration=10s ;;
    # Issue 30's modes: the limit is fifo over the browser's whole process tree and the X server.
    browser) args+=(--modes idle,stock,android,fifo,uxsched) ;;
    # Issue 33's storage modes, under the scenario's default load (`write` for launch and
    # fsync) or the named one: the peers, uxsched without its storage levers, with them, and
    # with the opt-in BFQ switch.
    storage) args+=(--modes "$STORAGE_MODES") ;;
    storage-io) load=(--load io) args+=(--modes "$STORAGE_MODES") ;;
    storage-write) load=(--load write) args+=(--modes "$STORAGE_MODES") ;;
    # Seed 001's read-ahead: eimos with and without its prefetch.
    readahead) load=(--load write) args+=(--modes idle,stock,eimos-no-prefetch,eimos,uxsched) ;;
    *) echo "unknown cell tag '$tag' in $1" >&2; exit 2 ;;
  esac
  args+=("${load[@]}" --reps "$reps" --duration "$duration")
  printf '%s\n' "${args[@]}"
}

ALL=(
  xterm/same-session painting/same-session worker/same-session
  painting/no-autogroup worker/no-autogroup xterm/no-autogroup
  painting/units worker/units painting/other-session worker/other-session
  xterm/units/short xterm/other-session/short
  xedit/same-session xedit/no-autogroup
  painting/same-session/daemon worker/same-session/daemon
  painting/same-session/kbuild
  xterm/same-session/roles xterm/no-autogroup/roles
  xterm/same-session/lever xterm/no-autogroup/lever
  xedit/units/short xedit/other-session/short
  chromium/same-session/browser chromium/no-autogroup/browser
  launch/same-session/storage launch/same-session/storage-io fsync/same-session/storage
  reader/same-session/storage-write reader/same-session/readahead
)
# The model scenarios in every layout (issue 9: every scenario × every layout).
for scenario in frames alarm player reader gallery; do
  for layout in same-session no-autogroup units other-session; do
    ALL+=("$scenario/$layout")
  done
done
[ $# -gt 0 ] && cells=("$@") || cells=("${ALL[@]}")

for cell in "${cells[@]}"; do
  mapfile -t args < <(cell_args "$cell")
  name=${cell//\//_}
  {
    echo "# $(date -u +%FT%TZ) commit $commit loadavg $(cat /proc/loadavg)"
    echo "# uxsched bench ${args[*]}"
  } >"$out/$name.txt"
  echo "== $cell: uxsched bench ${args[*]}"
  if ! "$bin" bench "${args[@]}" --save "$out/$name.json" >>"$out/$name.txt" 2>"$out/$name.err"; then
    echo "# FAILED: see $name.err" >>"$out/$name.txt"
  fi
  echo "# end $(date -u +%FT%TZ) loadavg $(cat /proc/loadavg)" >>"$out/$name.txt"
done
