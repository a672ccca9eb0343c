#!/bin/bash
# Issue 33's `none` path on the real kernel: the disk on the `none` elevator (the default for
# NVMe), where no I/O class acts, a cold launch under the two writers (`write`) and under random
# readers (`io`), modes idle, stock, uxsched (its default levers) and uxsched-bfq (the opt-in
# switch, which switches `none` to BFQ and back). Run from the repository root as root on a quiet
# machine; the disk's elevator is put back at the end. BIN: the binary (default a copy of
# target/release/uxsched in OUT).
set -u
dev=${DEV:-vda}
out=${OUT:-docs/results/2026-11-29/none-launch}
q=/sys/block/$dev/queue
orig=$(sed -n 's/.*\[\(.*\)\].*/\1/p' $q/scheduler)
bin=${BIN:-$out/uxsched}
[ -x "$bin" ] || cp target/release/uxsched "$bin"
trap 'echo "$orig" > $q/scheduler' EXIT
echo none > $q/scheduler
for load in write io; do
  name=launch-none-$load
  echo "# $dev: $(cat $q/scheduler); $(date -u +%T); commit $(git describe --always --dirty); load $(cut -d' ' -f1-3 /proc/loadavg)" > $out/$name.txt
  "$bin" bench launch --layout same-session --load $load --launches 6 \
    --modes idle,stock,uxsched,uxsched-bfq --reps 3 --duration 60s --save $out/$name.json >> $out/$name.txt 2>$out/$name.err
  echo "# after: $(cat $q/scheduler); $(date -u +%T); load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out/$name.txt
done
