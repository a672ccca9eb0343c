#!/usr/bin/env bash
# Every condition of README.md, in this order: sudo docs/results/2026-11-29/first-launch/all.sh
here=$(cd "$(dirname "$0")" && pwd)
BFQ=true WRITERS=0 "$here/run.sh" | tee "$here/bfq-idle.txt"
BFQ=true ORDER=daemon WAIT=0 "$here/run.sh" | tee "$here/bfq-daemon-then-writers.txt"
BFQ=false ORDER=daemon WAIT=0 "$here/run.sh" | tee "$here/mq-daemon-then-writers.txt"
BFQ=true ORDER=daemon WAIT=3 "$here/run.sh" | tee "$here/bfq-writers-3s-after-daemon.txt"
BFQ=true ORDER=writers WAIT=3 "$here/run.sh" | tee "$here/bfq-daemon-3s-after-writers.txt"
