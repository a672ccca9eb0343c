#!/bin/bash
# usage: KEEP=<dir> uxsched sim validate --rt-app rtexec.sh ...
# exec's rt-app in place (same pid, so validate's enforcer finds its threads and sets the custom
# slices / cgroups as without a wrapper); a background copier keeps rt-app's logs under $KEEP once
# that pid is gone
d=${KEEP:?}/$(date +%s%N); mkdir -p $d
me=$$; cwd=$(pwd)
( while kill -0 $me 2>/dev/null; do sleep 0.02; done; cp $cwd/*.log $cwd/*.json $d/ 2>/dev/null ) &
exec /usr/bin/rt-app "$@"
