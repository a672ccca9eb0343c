#!/bin/bash
# The BFQ switch measured with the bench waiting 25 s after a switching daemon answered
# (BFQ_SETTLE of 6b57b4b's crates/bench/src/modes/daemon.rs: the bound of BFQ's weight-raising
# of queues new at the switch) before each repetition: a cold launch under two writers and the
# gallery under four random readers, beside stock and the default daemon. The wait did not
# remove the stall it was for and was reverted after this run: to repeat it, build 6b57b4b.
# Run from the repository root as root on a quiet machine.
# BIN: the binary (default target/release/uxsched).
set -u
out=docs/results/2026-11-28/bfq-settled
bin=${BIN:-target/release/uxsched}
for cell in "launch --load write --launches 6 --reps 3 --duration 60s" "gallery --load io --reps 4 --duration 30s"; do
  set -- $cell
  name=$1
  echo "# $(date -u +%FT%TZ) $(git describe --always --dirty) loadavg $(cat /proc/loadavg)" > $out/$name.txt
  echo "# uxsched bench $cell --layout same-session --modes idle,stock,uxsched,uxsched-bfq" >> $out/$name.txt
  $bin bench "$@" --layout same-session --modes idle,stock,uxsched,uxsched-bfq --save $out/$name.json >> $out/$name.txt 2> $out/$name.err
  echo "# end $(date -u +%FT%TZ) loadavg $(cat /proc/loadavg)" >> $out/$name.txt
done
