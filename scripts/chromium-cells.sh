#!/usr/bin/env bash
# Issue 30's three Chromium cells, one bench run each with the modes interleaved: no-autogroup and
# same-session under 12 CPU hogs (6 reps), same-session under `kbuild` (KBUILD_REPS, default 8);
# modes idle, stock, android, fifo (the whole app and the X server at SCHED_FIFO: the limit),
# uxsched; 10 s each. Each cell writes OUT/<cell>.txt (header with date, binary, commit, load
# average; the report; an end line), .json (--save) and .err. Run from the repository root as
# root on a quiet machine; the records in docs/results/ call it with their own directory.
#   scripts/chromium-cells.sh OUT [KBUILD_REPS]      BIN: the binary (default target/release/uxsched)
set -u
out=${1:?usage: chromium-cells.sh OUT [KBUILD_REPS]}
kbuild_reps=${2:-8}
bin=${BIN:-target/release/uxsched}
mkdir -p "$out"
cell() {
  local name=$1; shift
  { echo "# $(date -u +%FT%TZ) binary $("$bin" --version 2>/dev/null) commit $(git rev-parse --short HEAD) loadavg $(cat /proc/loadavg)"; echo "# uxsched bench $*"; } >"$out/$name.txt"
  "$bin" bench "$@" --save "$out/$name.json" >>"$out/$name.txt" 2>"$out/$name.err"
  echo "# end $(date -u +%FT%TZ) loadavg $(cat /proc/loadavg)" >>"$out/$name.txt"
}
modes=idle,stock,android,fifo,uxsched
cell no-autogroup-hogs chromium --layout no-autogroup --load cpu --load-workers 12 --modes $modes --reps 6 --duration 10s
cell same-session-hogs chromium --layout same-session --load cpu --load-workers 12 --modes $modes --reps 6 --duration 10s
cell same-session-kbuild chromium --layout same-session --load kbuild --modes $modes --reps "$kbuild_reps" --duration 10s
