#!/usr/bin/env bash
# The four conditions of docs/results/2026-11-29/writer-start-pages/README.md, one after the
# other: sudo docs/results/2026-11-29/writer-start-pages/run.sh [OUT] (default: this folder).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
s=$here/../../../../scripts/bfq-writer-start.sh
PROBE=pages FRESH=1 bash "$s" /var/tmp 3 12 bfq | tee "$out/bfq-fresh.txt"
PROBE=pages FRESH=1 WARM=1 bash "$s" /var/tmp 3 12 bfq | tee "$out/bfq-fresh-warm.txt"
PROBE=pages FRESH=1 CLASS="-c1 -n4" bash "$s" /var/tmp 3 12 bfq | tee "$out/bfq-fresh-rt.txt"
PROBE=pages bash "$s" /var/tmp 3 12 mq-deadline | tee "$out/mq-deadline.txt"
PROBE=pages bash "$s" /var/tmp 3 12 bfq | tee "$out/bfq-kept.txt"
PROBE=pages WRITERS=0 bash "$s" /var/tmp 1 12 bfq | tee "$out/bfq-idle.txt"
