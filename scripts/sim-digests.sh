#!/usr/bin/env bash
# The simulator's determinism fingerprint set: the event-log digest of every built-in scenario
# under every fair policy, and of the `sim validate` suite under eevdf on 2 CPUs, 10 s each.
# An optimisation of the engine must leave every line unchanged.
#
#   scripts/sim-digests.sh              print the set
#   scripts/sim-digests.sh --check      compare with scripts/sim-digests.txt (exit 1 on a difference)
#   scripts/sim-digests.sh --write      rewrite scripts/sim-digests.txt (a deliberate model change)
#
# UXSCHED (default target/release/uxsched) is the binary used.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${UXSCHED:-target/release/uxsched}
golden=scripts/sim-digests.txt
[ -x "$bin" ] || { echo "sim-digests: $bin missing; build it: cargo build --release -p uxsched" >&2; exit 2; }

digest() { # workload, then sim run options
    local w=$1; shift
    local line
    line=$("$bin" sim run "$w" --duration 10s --json --determinism-check "$@" 2>&1 >/dev/null \
        | grep 'determinism check') || { echo "sim-digests: $w $*: no digest" >&2; exit 2; }
    echo "$w $* ${line##* }"
}

produce() {
    local names
    names=$("$bin" sim list | awk '/^built-in/{on=1; next} /^[^ ]/{on=0} on{print $1}')
    for w in $names; do
        for p in cfs eevdf vtcfs mcfs; do
            digest "$w" --sched "$p"
        done
        digest "$w" --sched cfs --cfs-model paper
    done
    for f in scenarios/validate/*.json; do
        digest "$f" --sched eevdf --cpus 2 --hz 250
        digest "$f" --sched cfs --cpus 2 --hz 250
    done
}

case "${1:-}" in
    --check)
        if diff -u "$golden" <(produce); then echo "sim-digests: all $(wc -l <"$golden") digests identical"; else
            echo "sim-digests: the event logs changed (above: - expected, + now)" >&2; exit 1; fi ;;
    --write) produce >"$golden.tmp" && mv "$golden.tmp" "$golden" && echo "wrote $golden" ;;
    "") produce ;;
    *) echo "usage: $0 [--check|--write]" >&2; exit 2 ;;
esac
