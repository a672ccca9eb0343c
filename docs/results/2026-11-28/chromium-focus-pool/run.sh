#!/usr/bin/env bash
# Issue 30's three Chromium cells after the focus stops raising a learned name a pool shares (binary from
# 5fbe436: the app's ThreadPoolForeg join when the path reaches them),
# one bench run each, modes interleaved; run from the repository root as root on a quiet machine.
# BIN: the binary (default target/release/uxsched).
set -u
bin=${BIN:-target/release/uxsched}
out=docs/results/2026-11-28/chromium-focus-pool
cell() {
  local name=$1; shift
  { echo "# $(date -u +%FT%TZ) binary $("$bin" --version 2>/dev/null) commit $(git rev-parse --short HEAD) loadavg $(cat /proc/loadavg)"; echo "# uxsched bench $*"; } >"$out/$name.txt"
  "$bin" bench "$@" --save "$out/$name.json" >>"$out/$name.txt" 2>"$out/$name.err"
  echo "# end $(date -u +%FT%TZ) loadavg $(cat /proc/loadavg)" >>"$out/$name.txt"
}
cell no-autogroup-hogs chromium --layout no-autogroup --load cpu --load-workers 12 --modes idle,stock,android,fifo,uxsched --reps 6 --duration 10s
cell same-session-hogs chromium --layout same-session --load cpu --load-workers 12 --modes idle,stock,android,fifo,uxsched --reps 6 --duration 10s
cell same-session-kbuild chromium --layout same-session --load kbuild --modes idle,stock,android,fifo,uxsched --reps 8 --duration 10s
