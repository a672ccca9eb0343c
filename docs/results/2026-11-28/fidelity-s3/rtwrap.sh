#!/bin/bash
# usage: KEEP=<dir> [PERF=1] uxsched sim validate --rt-app rtwrap.sh ...
# rt-app, then keep its logs (and the workload copy) under $KEEP for analysis; with PERF set,
# under perf record of the scheduler's switch/wake-up/migration events on every CPU
d=${KEEP:?}/$(date +%s%N); mkdir -p $d
if [ -n "$PERF" ]; then
  perf record -q -o $d/perf.data -e sched:sched_switch -e sched:sched_wakeup -e sched:sched_waking -e sched:sched_migrate_task -a -- /usr/bin/rt-app "$@"; rc=$?
else
  /usr/bin/rt-app "$@"; rc=$?
fi
cp *.log *.json $d/ 2>/dev/null
exit $rc
