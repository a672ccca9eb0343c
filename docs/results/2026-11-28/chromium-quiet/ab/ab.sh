#!/bin/bash
cd /work/main
for r in 1 2; do
  /tmp/ab/uxsched bench chromium --layout same-session --load cpu --load-workers 12 --modes idle,uxsched --reps 2 --duration 10s > /tmp/ab/default-$r.txt 2>&1
  /tmp/ab/uxsched bench chromium --layout same-session --load cpu --load-workers 12 --modes idle,uxsched --reps 2 --duration 10s --daemon-config /tmp/off.toml > /tmp/ab/off-$r.txt 2>&1
done
echo AB-DONE
