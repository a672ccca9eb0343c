#!/usr/bin/env bash
# Seed 003's Table 8 on the real kernel with every column, the I/O manager alone included
# (`uxsched-io`: the daemon with cpu_levers = false); run from the repository root as root on a
# quiet machine. BIN: the binary (default target/release/uxsched).
set -u
bin=${BIN:-target/release/uxsched}
out=docs/results/2026-11-28/table8-io
{ echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD) loadavg $(cat /proc/loadavg)"; echo "# uxsched bench launch --layout same-session --load cpu+write --modes idle,stock,uxsched-cpu,uxsched-no-ioprio,uxsched-io,uxsched --reps 4 --launches 8 --duration 60s"; } >"$out/table8.txt"
"$bin" bench launch --layout same-session --load cpu+write \
	--modes idle,stock,uxsched-cpu,uxsched-no-ioprio,uxsched-io,uxsched --reps 4 --launches 8 --duration 60s \
	--save "$out/table8.json" >>"$out/table8.txt" 2>"$out/table8.err"
echo "# end $(date -u +%FT%TZ) loadavg $(cat /proc/loadavg)" >>"$out/table8.txt"
