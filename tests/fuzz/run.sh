#!/usr/bin/env bash
# tests/fuzz/run.sh [SECONDS] [BUILDDIR] — builds the fuzz targets (build.sh)
# and runs each for SECONDS (default 60) under ASan/UBSan, starting from the
# seed corpus in tests/fuzz/corpus/<input> plus what earlier runs found (kept
# in BUILDDIR/corpus-<target>, never written into the checkout). Any crash,
# leak, sanitizer report or timeout (10 s per input) fails the run: the
# input is left in BUILDDIR/crash-<target>-* and named on stderr; make it a
# regression test (tests/fuzz/regressions/<target>/) once fixed. Prints one
# line per target: executions, corpus size, and the verdict.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${1:-60}
build=${2:-$src/build-fuzz}
"$src/tests/fuzz/build.sh" "$build" >/dev/null || exit 2
status=0
for target in fuzz_stream:stream fuzz_info:info fuzz_elf:elf fuzz_torch_shapes:torch_shapes; do
    name=${target%%:*} input=${target#*:}
    mkdir -p "$build/corpus-$name"
    # Regression inputs first: each must still pass on its own.
    regress="$src/tests/fuzz/regressions/$name"
    if [ -d "$regress" ] && [ -n "$(ls -A "$regress")" ]; then
        if ! "$build/$name" "$regress"/* >"$build/$name-regress.log" 2>&1; then
            echo "fuzz: $name: a regression input fails again (see $build/$name-regress.log)" >&2
            status=1
            continue
        fi
    fi
    "$build/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -artifact_prefix="$build/crash-$name-" -print_final_stats=1 \
        "$build/corpus-$name" "$src/tests/fuzz/corpus/$input" >"$build/$name.log" 2>&1
    st=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/$name.log")
    units=$(ls "$build/corpus-$name" | wc -l)
    if [ "$st" -eq 0 ]; then
        echo "fuzz: $name: ${execs:-?} executions in ${seconds} s, corpus $units inputs, no crash"
    else
        echo "fuzz: $name: FAILED (exit $st) after ${execs:-?} executions; input and report:" >&2
        ls "$build"/crash-"$name"-* "$build"/timeout-"$name"-* "$build"/leak-"$name"-* 2>/dev/null >&2
        grep -m 3 -E 'ERROR|runtime error|SUMMARY' "$build/$name.log" >&2
        status=1
    fi
done
exit $status
