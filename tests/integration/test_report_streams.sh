#!/bin/sh
# test_report_streams.sh — the report aggregates samples per (thread, stack,
# flags) while it reads the streams (PROFILE_LOAD_AGGREGATED, issue 17): every
# output must be byte for byte what loading sample by sample gives
# (OPPROF_LOAD_EVERY_SAMPLE=1, the loader as it was before aggregation), on
# real recordings of each kind of stream:
#   known_split, 2 threads at 4000 Hz  native stacks, folded (~5 stacks, many samples each)
#   known_split -e page-faults          per-sample counters: that stream stays per sample
#   omp_regions_gomp                    OpenMP-region samples: that stream stays per sample
#   py_split.py                         Python frames spliced into native stacks
#   torch_train.py --seconds 2          PyTorch operators, phases, libgomp regions (when torch imports)
# Outputs: report text (--sort self / total, --group-by thread / op / line),
# csv, json, the merged report of DIR DIR, and the exports that sum per stack
# (folded, pprof, callgrind, pstats, flame graph). The timeline exports
# (Chrome trace, HTML, speedscope) load sample by sample either way.
. "$(dirname "$0")/lib.sh"
require_all
PYTHON=${OPPROF_TEST_PYTHON:-/usr/bin/python3}
GOMP="$OPPROF_BUILDDIR/tests/workloads/omp_regions_gomp"

# same NAME ARGS...: opprof ARGS with and without OPPROF_LOAD_EVERY_SAMPLE=1;
# stdout, exit status and the output file (@OUT@) must be identical.
same() {
    _name=$1
    shift
    for _mode in folded every; do
        _args=
        for _a in "$@"; do
            case $_a in @OUT@) _a="$WORK/$_name.$_mode.file" ;; esac
            _args="$_args '$_a'"
        done
        if [ $_mode = every ]; then
            eval "OPPROF_LOAD_EVERY_SAMPLE=1 limited \"$OPPROF\" $_args" >"$WORK/$_name.$_mode" 2>"$WORK/$_name.$_mode.err"
        else
            eval "limited \"$OPPROF\" $_args" >"$WORK/$_name.$_mode" 2>"$WORK/$_name.$_mode.err"
        fi
        echo "exit status $?" >>"$WORK/$_name.$_mode"
        if [ -f "$WORK/$_name.$_mode.file" ]; then
            cat "$WORK/$_name.$_mode.file" >>"$WORK/$_name.$_mode"
            rm -f "$WORK/$_name.$_mode.file"
        fi
    done
    if ! grep -q '^exit status 0$' "$WORK/$_name.folded"; then
        fail "$_name: opprof $* failed"
        show stderr "$WORK/$_name.folded.err" 5
    elif cmp -s "$WORK/$_name.folded" "$WORK/$_name.every"; then
        pass "$_name: identical ($(wc -c <"$WORK/$_name.folded") bytes)"
    else
        fail "$_name: aggregated and sample-by-sample loads differ"
        diff "$WORK/$_name.every" "$WORK/$_name.folded" | head -8 | sed 's/^/  /'
    fi
}

# compare_all DIR: every output on DIR.
compare_all() {
    _b=$(basename "$1")
    same "$_b.report" report "$1"
    same "$_b.report-total" report "$1" --sort total --limit 0
    same "$_b.report-thread" report "$1" --group-by thread
    same "$_b.report-op" report "$1" --group-by op
    same "$_b.report-line" report "$1" --group-by line
    same "$_b.report-csv" report "$1" --format csv
    same "$_b.report-json" report "$1" --format json
    same "$_b.report-merged" report "$1" "$1"
    same "$_b.report-memory" report "$1" --memory
    for _f in folded pprof callgrind pstats flamegraph; do
        same "$_b.$_f" export "$1" --$_f @OUT@
    done
}

record ks -F 4000 -- "$KNOWN_SPLIT" --threads 2 --seconds 1
[ "$RECORD_STATUS" -eq 0 ] || die "recording known_split failed"
compare_all ks
same ks.report-comm report ks --comm split-w0   # report --comm keeps some threads' rows
# The folded report counts every sample: its total is the sample-by-sample one.
n_every=$(OPPROF_LOAD_EVERY_SAMPLE=1 "$OPPROF" report ks --limit 1 | awk '$1 == "samples" { print $2 }')
n_folded=$("$OPPROF" report ks --limit 1 | awk '$1 == "samples" { print $2 }')
if [ -n "$n_folded" ] && [ "$n_folded" = "$n_every" ] && [ "$n_folded" -gt 1000 ]; then
    pass "known_split: $n_folded samples either way"
else
    fail "known_split: $n_folded samples aggregated, $n_every sample by sample"
fi

# Per-sample counters (-e): that stream stays per sample too.
record cnt -e page-faults -- "$KNOWN_SPLIT" --seconds 0.5
if [ "$RECORD_STATUS" -eq 0 ]; then compare_all cnt; else fail "recording known_split -e page-faults failed"; fi

if [ -x "$GOMP" ]; then
    OMP_NUM_THREADS=2 record omp -- "$GOMP" --regions 2000
    if [ "$RECORD_STATUS" -eq 0 ]; then
        compare_all omp
        same omp.report-threading report omp --threading
    else
        fail "recording omp_regions_gomp failed"
    fi
else
    log "omp_regions_gomp not built: OpenMP streams not compared"
fi

if [ -x "$PYTHON" ]; then
    record py -- "$PYTHON" "$OPPROF_SRCDIR/tests/workloads/py_split.py"
    if [ "$RECORD_STATUS" -eq 0 ]; then compare_all py; else fail "recording py_split.py failed"; fi
    if "$PYTHON" -c 'import torch' 2>/dev/null; then
        record torch -- "$PYTHON" "$OPPROF_SRCDIR/tests/workloads/torch_train.py" --seconds 2
        if [ "$RECORD_STATUS" -eq 0 ]; then compare_all torch; else fail "recording torch_train.py failed"; fi
    else
        log "$PYTHON cannot import torch: PyTorch streams not compared"
    fi
else
    log "$PYTHON missing: Python streams not compared"
fi
finish
