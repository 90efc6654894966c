#!/bin/sh
# test_out_of_memory.sh — the out-of-memory policy (util/util.h) on the real
# binary: with malloc failing from the Nth call on, `opprof report` and
# `opprof export --folded` of a small known_split result either succeed or
# exit 2 with exactly one "out of memory" line on stderr — never a crash
# (status >= 128, an ASan/UBSan report), a hang, or another message.
#
# How: tests/integration/failing_malloc.c, an LD_PRELOAD shim built here with
# $CC, makes malloc/calloc/realloc (and strdup, posix_memalign...) return
# NULL after N successful calls (OPPROF_TEST_FAIL_ALLOC_AFTER=N). It counts
# only calls made by opprof's own code (OPPROF_TEST_FAIL_ALLOC_SCOPE=exe):
# libdw exits or aborts by itself on out of memory, which is elfutils'
# policy, not opprof's. A first run without failures measures the number of
# calls a full run makes (COUNT, ~200 for report, ~160 for export); N then
# goes over 0..COUNT+2, every value up to 400 calls, else in steps that keep
# the test under ~60 s.
#
# ASan build (--enable-sanitizers): the sweep RUNS there too, with ASan's own
# allocator. ASan replaces malloc and must come first in the library list,
# so the shim is preloaded with ASAN_OPTIONS verify_asan_link_order=0 (and
# allocator_may_return_null=1) and forwards to ASan's malloc (dlsym
# RTLD_NEXT); ASan then also checks every failure path for memory errors.
# N steps by COUNT/150 + 1 there (each run is slower). Only when that
# combination does not run on a machine (the probe without failures must
# succeed) is the test SKIPPED, with that reason.
. "$(dirname "$0")/lib.sh"
require_all
make_workdir

CC_FOR_SHIM=${CC:-cc}
command -v "$CC_FOR_SHIM" >/dev/null 2>&1 || skip "no C compiler ($CC_FOR_SHIM) to build the malloc shim"
SHIM="$WORK/failing_malloc.so"
"$CC_FOR_SHIM" -O2 -shared -fPIC -o "$SHIM" "$OPPROF_SRCDIR/tests/integration/failing_malloc.c" -ldl \
    >"$WORK/shim.log" 2>&1 || skip "cannot build the malloc shim: $(head -c 300 "$WORK/shim.log")"

# ASan: detected from the binary (it links libasan), not from configure.
ASAN_BUILD=0
if command -v ldd >/dev/null 2>&1 && ldd "$OPPROF" 2>/dev/null | grep -q libasan; then
    ASAN_BUILD=1
    # halt_on_error: an ASan report ends the run with its own status (checked
    # below); detect_leaks=0: a run that fails halfway may leave what the
    # exit path does not free, which the policy allows.
    ASAN_OPTIONS="verify_asan_link_order=0:allocator_may_return_null=1:detect_leaks=0:abort_on_error=0:exitcode=99${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    UBSAN_OPTIONS="halt_on_error=1:exitcode=98${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
    export ASAN_OPTIONS UBSAN_OPTIONS
fi

record_split "$WORK/res" --seconds 1

# shimmed N ARGS...: opprof ARGS with the shim; status in $RC, stderr in
# $WORK/err. The shim's variables are set by the sh that execs opprof, so
# that timeout (limited) runs without them: it would count and fail too.
shimmed() {
    _n=$1
    shift
    limited sh -c 'SHIM=$1 N=$2 COUNT=$3; shift 3
        if [ "$N" = count ]; then
            OPPROF_TEST_COUNT_ALLOC=$COUNT OPPROF_TEST_FAIL_ALLOC_SCOPE=exe LD_PRELOAD=$SHIM exec "$@"
        fi
        OPPROF_TEST_FAIL_ALLOC_AFTER=$N OPPROF_TEST_FAIL_ALLOC_SCOPE=exe LD_PRELOAD=$SHIM exec "$@"' \
        sh "$SHIM" "$_n" "$WORK/count" "$OPPROF" "$@" >"$WORK/out" 2>"$WORK/err"
    RC=$?
}

sweep() {
    _what=$1
    shift
    rm -f "$WORK/count"
    shimmed count "$@"
    if [ "$RC" -ne 0 ]; then
        if [ "$ASAN_BUILD" = 1 ]; then
            skip "the malloc shim does not run under this ASan build (probe of '$_what' exited $RC: $(head -c 200 "$WORK/err" | tr '\n' ' '))"
        fi
        fail "$_what with the shim and no failures exited $RC: $(head -c 300 "$WORK/err")"
        return
    fi
    _count=$(cat "$WORK/count" 2>/dev/null)
    case "$_count" in '' | *[!0-9]*) fail "$_what: the shim counted no calls"; return ;; esac
    [ "$_count" -gt 0 ] || { fail "$_what: the shim counted 0 allocations (not preloaded?)"; return; }
    # Every N up to 400 calls; beyond, ~400 runs spread over the range.
    _step=$(( _count / 400 + 1 ))
    [ "$ASAN_BUILD" = 1 ] && _step=$(( _count / 150 + 1 ))
    _runs=0 _ok=0 _oom=0 _bad=0 _n=0
    _last=$(( _count + 2 ))
    while [ "$_n" -le "$_last" ]; do
        shimmed "$_n" "$@"
        _runs=$((_runs + 1))
        _lines=$(grep -c 'out of memory' "$WORK/err")
        if [ "$RC" -eq 0 ]; then
            _ok=$((_ok + 1))
        elif [ "$RC" -eq 2 ] && [ "$_lines" -eq 1 ] && ! grep -q -E 'ERROR: AddressSanitizer|runtime error:' "$WORK/err"; then
            _oom=$((_oom + 1))
        else
            _bad=$((_bad + 1))
            # A few examples are enough to debug; the count says how many.
            [ "$_bad" -le 5 ] && fail "$_what with allocation $_n failing: exit $RC, $_lines 'out of memory' line(s): $(head -c 400 "$WORK/err" | tr '\n' '|')"
        fi
        _n=$((_n + _step))
    done
    log "$_what: $_count allocations in a full run; N = 0..$_last step $_step: $_runs runs, $_ok succeeded, $_oom said out of memory, $_bad other"
    if [ "$_bad" -eq 0 ] && [ "$_oom" -gt 0 ]; then
        pass "$_what: every run succeeded or printed one 'out of memory' line and exited 2"
    elif [ "$_bad" -eq 0 ]; then
        fail "$_what: no run failed with out of memory (is the shim failing anything?)"
    else
        fail "$_what: $_bad of $_runs runs crashed, hung or printed something else"
    fi
    # The run with no failure is the normal output.
    shimmed 1000000000 "$@"
    [ "$RC" -eq 0 ] || fail "$_what with the shim's limit above the count exited $RC"
}

sweep "report --format json" report "$WORK/res" --format json
sweep "export --folded" export "$WORK/res" --folded "$WORK/out.folded"

finish
