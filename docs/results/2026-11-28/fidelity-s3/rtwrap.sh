#!/bin/bash
# rt-app, then keep its logs (and the workload copy) under $KEEP for analysis; with PERF set,
# NOTE: with this wrapper validate's slice/cgroup enforcer looks for rt-app's threads under the wrapper's pid and finds none: custom slices and cgroups are never applied. Used here only for nice-mix (neither); see rtexec.sh
# under perf record of the scheduler's switch/wake-up/migration events on every CPU
d=${KEEP:?}/$(date +%s%N); mkdir -p $d
if [ -n "$PERF" ]; then
  perf record -q -o $d/perf.data -e sched:sched_switch -e sched:sched_wakeup -e sched:sched_waking -e sched:sched_migrate_task -a -- /usr/bin/rt-app "$@"; rc=$?
else
  /usr/bin/rt-app "$@"; rc=$?
fi
cp *.log *.json $d/ 2>/dev/null
exit $rc
