# tests/integration/lib.sh — shared helpers of the integration tests (sourced).
#
# Every test: `. "$(dirname "$0")/lib.sh"`, then calls the helpers below.
# Exit status: 0 pass, 1 fail, 77 skip (with a reason on stdout).
#
# Environment: OPPROF_BUILDDIR / OPPROF_SRCDIR (set by `make check`; default:
# the tree this file sits in), OPPROF_TEST_KEEP=1 keeps the temp dir,
# OPPROF_TEST_SECONDS overrides the workload length (default 3).
set -u

TEST_NAME=$(basename "$0" .sh)
_lib_dir=$(cd "$(dirname "$0")" && pwd)
: "${OPPROF_SRCDIR:=$(cd "$_lib_dir/../.." && pwd)}"
: "${OPPROF_BUILDDIR:=$OPPROF_SRCDIR}"
OPPROF="$OPPROF_BUILDDIR/opprof"
KNOWN_SPLIT="$OPPROF_BUILDDIR/tests/workloads/known_split"
SPLIT_LIB="$OPPROF_BUILDDIR/tests/workloads/bin/libsplit_stripped.so"
SECONDS_OF_WORK="${OPPROF_TEST_SECONDS:-3}"
# Tolerance, in percentage points, of every share checked against ground truth.
TOL_PP="${OPPROF_TEST_TOL_PP:-2}"
# Sampling rate of the known_split split checks (record_checked_split). At the
# default 1000 Hz, 3 s give ~2,750 samples: the sampling error of a 50 % share
# alone is then sigma = 0.95 pp, so TOL_PP is 2.1 sigma and one attempt in
# ~15 misses by chance (CI's test_fork missed twice in a row: 52.14 % and
# 47.79 % for spin_a). At 4000 Hz sigma is 0.48 pp (measured: the largest error
# of 18 --fork recordings was 1.12 pp).
SPLIT_FREQ="${OPPROF_TEST_SPLIT_FREQ:-4000}"
FAILURES=0
WORK=

# Seconds any one command (a recording, a report) may take before it counts as
# hung; `timeout` kills its whole process group (opprof and the workload).
TIME_LIMIT="${OPPROF_TEST_TIME_LIMIT:-60}"

log() { printf '%s\n' "$*"; }

# limited CMD...: runs CMD with the time limit; status 124 when it hung.
if command -v timeout >/dev/null 2>&1; then
    limited() { timeout -k 10 "$TIME_LIMIT" "$@"; }
else
    limited() { "$@"; }
fi

skip() {
    log "SKIP: $TEST_NAME: $*"
    exit 77
}

# Fatal failure.
die() {
    log "FAIL: $TEST_NAME: $*"
    exit 1
}

# Non-fatal failure: counted, reported by finish.
fail() {
    log "FAIL: $*"
    FAILURES=$((FAILURES + 1))
}

pass() {
    log "ok: $*"
}

finish() {
    if [ "$FAILURES" -ne 0 ]; then
        log "$TEST_NAME: $FAILURES check(s) failed"
        exit 1
    fi
    log "$TEST_NAME: all checks passed"
    exit 0
}

_cleanup() {
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        if [ "${OPPROF_TEST_KEEP:-0}" = 1 ]; then
            log "(kept $WORK)"
        else
            rm -rf "$WORK"
        fi
    fi
}

# sanitized_build: true in a build configured with --enable-sanitizers
# (ASan/UBSan): its attach-side reader runs several times slower, so a
# loaded machine can starve it of nearly every sample (tests say where).
sanitized_build() {
    case "$("$OPPROF_BUILDDIR/config.status" --config 2>/dev/null)" in
    *enable-sanitizers*) return 0 ;;
    esac
    return 1
}

# Creates $WORK, removed at exit; the test runs inside it.
make_workdir() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/opprof-$TEST_NAME.XXXXXX") || die "mktemp failed"
    trap _cleanup EXIT
    trap 'exit 1' INT TERM HUP
    cd "$WORK" || die "cannot cd to $WORK"
    # The agents' unwind-table cache (kept across runs by build-id) starts
    # empty in each test script, so that no test depends on what ran before.
    export OPPROF_UNWIND_CACHE="$WORK/unwind-cache"
}

# The directory of pyenv's interpreters: `pyenv root` when pyenv is on PATH,
# else $PYENV_ROOT, else pyenv's default ~/.pyenv. A shell without pyenv's
# set-up (CI runs with a bare PATH) still finds the interpreters installed
# there; empty when there is none.
pyenv_root_dir() {
    _r=$(pyenv root 2>/dev/null || true)
    [ -n "$_r" ] || _r=${PYENV_ROOT:-}
    [ -n "$_r" ] || { [ -n "${HOME:-}" ] && [ -d "$HOME/.pyenv/versions" ] && _r=$HOME/.pyenv; }
    echo "$_r"
}

require_python3() {
    command -v python3 >/dev/null 2>&1 || skip "python3 not found (needed to parse report JSON)"
    python3 -c 'import json' 2>/dev/null || skip "python3 cannot import json"
}

require_opprof() {
    [ -x "$OPPROF" ] || skip "opprof is not built ($OPPROF missing; run make first)"
}

require_workload() {
    [ -x "$KNOWN_SPLIT" ] || skip "workload not built ($KNOWN_SPLIT missing; run make check)"
    [ -f "$SPLIT_LIB" ] || skip "workload library not built ($SPLIT_LIB missing)"
}

require_all() {
    require_python3
    require_opprof
    require_workload
    make_workdir
}

# Shows a file with a prefix on each line (at most $3 lines, default 20).
show() {
    [ -s "$2" ] || return 0
    tail -n "${3:-20}" "$2" | sed "s/^/  $1: /"
}

# record OUTDIR [record options] -- CMD...
# Runs opprof record, stdout/stderr into OUTDIR.out / OUTDIR.err; sets
# RECORD_STATUS and RECORD_ERR (the stderr file). A hang (time limit) ends the
# test as failed, unless RECORD_HANG_OK=1: then it is a non-fatal failure and
# RECORD_STATUS is 124.
record() {
    _out=$1
    shift
    RECORD_ERR="$WORK/$(basename "$_out").err"
    log "+ opprof record -o $_out $*"
    limited "$OPPROF" record -o "$_out" "$@" >"$WORK/$(basename "$_out").out" 2>"$RECORD_ERR"
    RECORD_STATUS=$?
    log "  exit status $RECORD_STATUS"
    if [ "$RECORD_STATUS" -eq 124 ]; then
        show stderr "$RECORD_ERR" 8
        if [ "${RECORD_HANG_OK:-0}" = 1 ]; then
            fail "opprof record $* was still running after ${TIME_LIMIT}s: killed (hang)"
        else
            die "opprof record $* was still running after ${TIME_LIMIT}s: killed (hang)"
        fi
    fi
    show stderr "$RECORD_ERR" 8
}

# report_json DIR OUTFILE [report options]: JSON report into OUTFILE; sets
# REPORT_STATUS, REPORT_ERR.
report_json() {
    _dir=$1
    _json=$2
    shift 2
    REPORT_ERR="$_json.err"
    limited "$OPPROF" report "$_dir" --format json --limit 100000 "$@" >"$_json" 2>"$REPORT_ERR"
    REPORT_STATUS=$?
    [ "$REPORT_STATUS" -eq 124 ] && log "opprof report $_dir $* hung: killed after ${TIME_LIMIT}s"
    if [ "$REPORT_STATUS" -ne 0 ]; then
        log "+ opprof report $_dir --format json --limit 100000 $*: exit status $REPORT_STATUS"
        show stderr "$REPORT_ERR" 8
    fi
    return "$REPORT_STATUS"
}

# Records the known_split workload and checks it succeeded: record_split OUTDIR ARGS...
# RECORD_SPLIT_OPTS: more opprof record options (word-split).
# Returns 1 only after a hang allowed by RECORD_HANG_OK=1.
record_split() {
    _rs_dir=$1
    shift
    # shellcheck disable=SC2086
    record "$_rs_dir" ${RECORD_SPLIT_OPTS:-} -- "$KNOWN_SPLIT" "$@"
    # A hang with RECORD_HANG_OK=1 was counted already: the caller moves on.
    [ "$RECORD_STATUS" -eq 124 ] && [ "${RECORD_HANG_OK:-0}" = 1 ] && return 1
    if [ "$RECORD_STATUS" -ne 0 ]; then
        die "opprof record of known_split $* exited $RECORD_STATUS (expected 0)"
    fi
    [ -d "$_rs_dir" ] || die "opprof record exited 0 but wrote no result dir $_rs_dir"
    # The summary line of the contract.
    if grep -Eq '^opprof record: [0-9]+ samples \([0-9]+ lost\), [0-9]+ threads?, [0-9]+ process(es)? -> ' "$RECORD_ERR"; then
        pass "summary line: $(grep -E '^opprof record: ' "$RECORD_ERR" | tail -n 1)"
    else
        fail "no summary line 'opprof record: N samples (L lost), T threads, P processes -> DIR (SIZE)' on stderr"
    fi
}

# Runs python3 on the program given as $1 with the rest as sys.argv[1:]. The
# program prints its figures, and "FAIL: ..." lines for failed checks; its exit
# status counts the failures (0 = all good), added to FAILURES. $1 "-": the
# program is read from stdin (a quoted here-document, which may hold any quote).
# pycheck_soft: the same for an attempt that is measured again: failed checks
# print "miss: ...", FAILURES is left alone, the status says whether all held.
pycheck() {
    _pycheck_run FAIL "$@"
    _st=$?
    if [ "$_st" -ne 0 ]; then
        FAILURES=$((FAILURES + _st))
    fi
    return "$_st"
}
pycheck_soft() { _pycheck_run miss "$@"; }
_pycheck_run() {
    _label=$1
    _prog=$2
    shift 2
    [ "$_prog" = - ] && _prog=$(cat)
    python3 - "$@" <<EOF
import json, sys, re, time
failures = 0
def fail(msg):
    global failures
    failures += 1
    print("$_label: " + msg)
def ok(msg):
    print("ok: " + msg)
def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception as e:
        print("$_label: cannot parse %s as JSON: %s" % (path, e))
        sys.exit(1)
def rows_by_name(doc):
    out = {}
    for r in doc.get("rows", []):
        out.setdefault(r.get("name"), []).append(r)
    return out
$_prog
sys.exit(min(failures, 100))
EOF
}

# check_split JSON [ROOT] [EXPECTED_SAMPLES] [TOL] [BAND]
# The ground-truth checks of known_split on a --group-by function report:
#   self % of spin_a/spin_b/spin_c = 50/30/20 +- TOL (pp, default TOL_PP), total % of
#   phase_a/b/c the same, total of run_work (and ROOT, when given) >= 97 %,
#   spin_c's module is libsplit_stripped.so, spin_a/b's is known_split, no
#   sample named after a symbol that never runs, no other function with > 1 %
#   self, and (when given) at least half the expected number of samples, or
#   with BAND (a fraction) the expected number +- BAND.
check_split() {
    pycheck '
doc = load(sys.argv[1])
root = sys.argv[2] if len(sys.argv) > 2 else ""
expected_samples = float(sys.argv[3]) if len(sys.argv) > 3 else 0
tol = float(sys.argv[4])
band = float(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] else 0
rows = doc.get("rows", [])
by = rows_by_name(doc)
tw, period = doc.get("total_weight", 0), doc.get("period_ns", 0)
print("report: total_weight=%s period_ns=%s lost=%s rows=%d" % (tw, period, doc.get("lost_samples"), len(rows)))
if not tw:
    fail("total_weight is %r: no samples" % tw)
    sys.exit(failures)
if expected_samples and band:
    if abs(tw / expected_samples - 1) > band:
        fail("%d samples (weight), expected %d +- %d %% (the workload\x27s own CPU time x rate)" %
             (tw, expected_samples, 100 * band))
    else:
        ok("%d samples (weight), expected %d +- %d %% (the workload\x27s own CPU time x rate)" %
           (tw, expected_samples, 100 * band))
elif expected_samples:
    if tw < 0.5 * expected_samples:
        fail("only %d samples (weight), expected about %d" % (tw, expected_samples))
    else:
        ok("%d samples (weight), expected about %d" % (tw, expected_samples))
# The percentages must agree with the ns figures (same denominator).
den = float(tw) * float(period) if period else 0
for r in rows:
    for kind in ("self", "total"):
        pct, ns = r.get(kind + "_pct"), r.get(kind + "_ns")
        if den and pct is not None and ns is not None and abs(100.0 * ns / den - pct) > 0.11:
            fail("%s: %s_pct %.3f disagrees with %s_ns %d / (total_weight*period) = %.3f" %
                 (r.get("name"), kind, pct, kind, ns, 100.0 * ns / den))
def one(name):
    rs = by.get(name, [])
    if not rs:
        fail("no row named %s (rows: %s)" % (name, ", ".join(str(r.get("name")) for r in rows[:12])))
        return None
    if len(rs) > 1:
        fail("%d rows named %s (modules %s)" % (len(rs), name, [r.get("module") for r in rs]))
    return rs[0]
print("%-10s %8s %8s   %-8s %s" % ("function", "measured", "expected", "kind", "module"))
for leaf, phase, want in (("spin_a", "phase_a", 50.0), ("spin_b", "phase_b", 30.0), ("spin_c", "phase_c", 20.0)):
    r = one(leaf)
    if r:
        print("%-10s %7.2f%% %7.1f%%   %-8s %s" % (leaf, r["self_pct"], want, "self", r.get("module")))
        if abs(r["self_pct"] - want) > tol:
            fail("self %% of %s is %.2f, expected %.1f +- %.1f" % (leaf, r["self_pct"], want, tol))
    r = one(phase)
    if r:
        print("%-10s %7.2f%% %7.1f%%   %-8s %s" % (phase, r["total_pct"], want, "total", r.get("module")))
        if abs(r["total_pct"] - want) > tol:
            fail("total %% of %s is %.2f, expected %.1f +- %.1f (stack unwinding through %s?)" % (phase, r["total_pct"], want, tol, leaf))
for name in ["run_work"] + ([root] if root else []):
    r = one(name)
    if r:
        print("%-10s %7.2f%% %8s   %-8s %s" % (name, r["total_pct"], ">=97%", "total", r.get("module")))
        if r["total_pct"] < 97.0:
            fail("total %% of %s is %.2f, expected >= 97 (broken unwinding?)" % (name, r["total_pct"]))
r = by.get("spin_c", [None])[0]
if r is not None:
    if r.get("module") != "libsplit_stripped.so":
        fail("spin_c module is %r, expected libsplit_stripped.so" % r.get("module"))
    else:
        ok("spin_c is in libsplit_stripped.so (stripped, named from .dynsym)")
for name in ("spin_a", "spin_b", "phase_a", "run_work"):
    r = by.get(name, [None])[0]
    if r is not None and r.get("module") != "known_split":
        fail("%s module is %r, expected known_split" % (name, r.get("module")))
# Symbols that never run must never be named. (__cxa_finalize is not on the
# list: it really runs at exit, and a process that does almost nothing else,
# like the --exec parent, can take its one sample there.)
for bad in ("split_lib_before", "split_lib_after", "_init", "_fini"):
    if bad in by:
        fail("a sample was named %s, a function that never runs (PC given a neighbouring symbol?)" % bad)
others = [r for r in rows if r.get("name") not in ("spin_a", "spin_b", "spin_c") and r.get("self_pct", 0) > 1.0]
for r in others:
    fail("unexpected function %s (%s) with %.2f%% self time" % (r.get("name"), r.get("module"), r["self_pct"]))
for r in rows:
    if r.get("module") == "libsplit_stripped.so" and r.get("name") != "spin_c" and r.get("total_pct", 0) > 0.5:
        fail("libsplit_stripped.so frame %s has %.2f%% total (only spin_c runs there)" % (r.get("name"), r["total_pct"]))
if failures == 0:
    ok("known split 50/30/20 within %.1f pp" % tol)
' "$1" "${2:-}" "${3:-0}" "${4:-$TOL_PP}" "${5:-}"
}

# workload_samples ERRFILE HZ: samples expected from the CPU time known_split
# measured itself (the sum of the cpu=S figures of its "known_split[PID]: ..."
# lines: every worker thread, and the main thread) at HZ. Measured rather than
# assumed: the workload calibrates its length, and calibration is slowed by
# the sampler's own start-up cost.
workload_samples() {
    awk -v hz="$2" '/^known_split\[[0-9]+\]: / {
        for (i = 1; i <= NF; i++)
            if ($i ~ /^cpu=[0-9.]+s$/) { v = substr($i, 5); sub(/s$/, "", v); cpu += v }
    } END { printf "%d\n", cpu * hz }' "$1"
}

# record_checked_split OUTDIR ROOT KNOWN_SPLIT_ARGS...
# record_split at SPLIT_FREQ + report (group by function, into
# OUTDIR.func.json) + check_split, with the number of samples within 10 % of
# the workload's own CPU time. The machines are shared 2-core VMs: under a busy
# neighbour the split measured by perf too wanders, so a split outside the
# tolerance is re-measured once (both attempts printed, with the load average);
# a real attribution bug fails both. Returns 1 after a hang allowed by
# RECORD_HANG_OK=1 or a failed report.
record_checked_split() {
    _rc_dir=$1 _rc_root=$2
    shift 2
    for _rc_try in 1 2; do
        rm -rf "$_rc_dir"
        RECORD_SPLIT_OPTS="-F $SPLIT_FREQ" record_split "$_rc_dir" "$@" || return 1
        if ! report_json "$_rc_dir" "$_rc_dir.func.json" --group-by function; then
            fail "opprof report --format json on $_rc_dir failed"
            return 1
        fi
        _rc_saved=$FAILURES
        check_split "$_rc_dir.func.json" "$_rc_root" "$(workload_samples "$RECORD_ERR" "$SPLIT_FREQ")" "$TOL_PP" 0.1 && return 0
        if [ "$_rc_try" = 1 ]; then
            log "note: split outside ${TOL_PP} pp on attempt 1 (load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)); measuring again"
            FAILURES=$_rc_saved
        fi
    done
    return 0
}

# Prints the pid of the known_split process that did the work (from its
# "known_split[PID]: total ..." line in a stderr file).
worker_pid() {
    sed -n 's/^known_split\[\([0-9]*\)\]: \(total\|before\).*/\1/p' "$1" | tail -n 1
}
