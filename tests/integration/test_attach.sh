#!/bin/sh
# test_attach.sh — opprof record -p PID: attaching to a running process.
#   C: known_split recorded from its start (the agent), then a second,
#     already running instance attached three times: --delay 0.5 --duration 2
#     (self % of spin_a/b/c within 3 pp of 50/30/20 and of the from-start
#     figures, full stacks, the window and the delay in info), Ctrl-C after
#     ~1.5 s (detaches, exit 0, complete=1), and without --duration until the
#     target exits (attach_stop=target-exit). The target is still running after
#     each detach (kill -0) and in the end exits 0 with its normal output.
#   Threads: known_split --threads 2 attached for 1.5 s: both workers sampled.
#   Python: py_split.py under /usr/bin/python3 from its start and attached for
#     2 s: Python shares of spin_a/b/c within 3 pp of 50/30/20 and of each
#     other; the lag of the Python reads is in info; the target finishes.
#   Errors: a pid that does not exist, -p with a command, -p abc, --duration 0,
#     --duration without -p: exit != 0, one line, no result dir.
. "$(dirname "$0")/lib.sh"
require_all
# Targets this test started, ended by pid if the test stops early.
TARGETS=
trap 'for t in $TARGETS; do kill "$t" 2>/dev/null; done; _cleanup' EXIT
ATTACH_TOL_PP="${OPPROF_TEST_ATTACH_TOL_PP:-3}"
# 4 kHz: ~5,000 samples in the 2 s window even when the target gets only half
# a CPU, so one share's statistical error (~0.7 pp) stays well inside 3 pp.
HZ="${OPPROF_TEST_ATTACH_HZ:-4000}"
PYTHON=${OPPROF_TEST_PYTHON:-/usr/bin/python3}

# attach OUTDIR [options]: opprof record -o OUTDIR -p ... (under the time limit)
attach() {
    _out=$1
    shift
    log "+ opprof record -o $_out $*"
    limited "$OPPROF" record -o "$_out" "$@" >"$_out.out" 2>"$_out.err"
    ATTACH_STATUS=$?
    log "  exit status $ATTACH_STATUS"
    show stderr "$_out.err" 8
}

# info_value DIR KEY
info_value() { sed -n "s/^$2=//p" "$1/info" | tail -n 1; }

still_running() {
    if kill -0 "$1" 2>/dev/null; then
        pass "$2: target $1 still running after detach"
    else
        fail "$2: target $1 is gone after detach"
    fi
}

# split_shares JSON: prints "spin_a spin_b spin_c" self % of a function report.
split_shares() {
    python3 - "$1" <<'PY'
import json, sys
rows = {r["name"]: r for r in json.load(open(sys.argv[1]))["rows"]}
print(" ".join("%.2f" % rows.get(n, {"self_pct": 0.0})["self_pct"] for n in ("spin_a", "spin_b", "spin_c")))
PY
}

# compare_split NAME JSON REF_SHARES: spin_a/b/c self % against 50/30/20 and
# the reference run's shares, run_work total >= 97 %.
compare_split() {
    pycheck '
doc = load(sys.argv[1]); ref = [float(x) for x in sys.argv[2].split()]; tol = float(sys.argv[3]); name = sys.argv[4]
by = {r["name"]: r for r in doc.get("rows", [])}
print("%s: %d samples" % (name, doc.get("total_weight", 0)))
print("%-8s %9s %9s %9s" % ("function", "attached", "from-start", "truth"))
for i, (fn, truth) in enumerate((("spin_a", 50.0), ("spin_b", 30.0), ("spin_c", 20.0))):
    got = by.get(fn, {"self_pct": 0.0})["self_pct"]
    print("%-8s %8.2f%% %8.2f%% %8.1f%%" % (fn, got, ref[i], truth))
    if abs(got - truth) > tol:
        fail("%s: self %% of %s is %.2f, expected %.1f +- %.1f" % (name, fn, got, truth, tol))
    if abs(got - ref[i]) > tol:
        fail("%s: self %% of %s is %.2f attached vs %.2f from the start (> %.1f pp apart)" % (name, fn, got, ref[i], tol))
rw = by.get("run_work", {"total_pct": 0.0})["total_pct"]
print("run_work total %.2f%% (>= 97%% when stacks unwind)" % rw)
if rw < 97.0:
    fail("%s: run_work holds %.2f %% of the samples: stacks from outside did not unwind" % (name, rw))
if doc.get("total_weight", 0) < 500:
    fail("%s: only %d samples" % (name, doc.get("total_weight", 0)))
' "$2" "$3" "$ATTACH_TOL_PP" "$1"
}

# ---------------------------------------------------------------------------
log "=== C: known_split from its start (in-process agent), the reference"
record "$WORK/start" -F "$HZ" -- "$KNOWN_SPLIT" --seconds "$SECONDS_OF_WORK"
[ "$RECORD_STATUS" -eq 0 ] || die "reference recording failed (exit $RECORD_STATUS)"
report_json "$WORK/start" "$WORK/start.json" --group-by function || die "report of the reference failed"
REF=$(split_shares "$WORK/start.json")
log "from-start self % spin_a/b/c: $REF"

log "=== C: a running known_split, attached"
"$KNOWN_SPLIT" --seconds 12 >"$WORK/target.out" 2>"$WORK/target.err" &
TPID=$!
TARGETS="$TARGETS $TPID"
sleep 0.3
# As in lib.sh's record_checked_split: on these shared 2-core machines a split
# outside the tolerance is measured once more (both printed); a real
# attribution bug fails both attempts.
for try in 1 2; do
    rm -rf "$WORK/att"
    attach "$WORK/att" -F "$HZ" -p "$TPID" --delay 0.5 --duration 2
    [ "$ATTACH_STATUS" -eq 0 ] || fail "opprof record -p exited $ATTACH_STATUS (expected 0)"
    still_running "$TPID" "--duration 2"
    report_json "$WORK/att" "$WORK/att.json" --group-by function || { fail "opprof report on the attached recording failed"; break; }
    saved=$FAILURES
    compare_split "attach --delay 0.5 --duration 2" "$WORK/att.json" "$REF" && break
    [ "$try" = 1 ] && { log "note: outside ${ATTACH_TOL_PP} pp on attempt 1 (load average: $(cut -d' ' -f1-3 /proc/loadavg)); attaching again"; FAILURES=$saved; }
done
pycheck '
info = dict(l.rstrip("\n").split("=", 1) for l in open(sys.argv[1]) if "=" in l)
window = (int(info.get("end_ns", 0)) - int(info.get("start_ns", 0))) / 1e9
delay = (int(info.get("start_ns", 0)) - int(info.get("attach_ns", 0))) / 1e9
print("info: mode=%s attach_pid=%s window %.3f s (expected 2) delay %.3f s (expected 0.5) stop=%s running=%s complete=%s" %
      (info.get("mode"), info.get("attach_pid"), window, delay, info.get("attach_stop"),
       info.get("attach_target_running"), info.get("complete")))
if info.get("mode") != "attach" or info.get("attach_pid") != sys.argv[2]:
    fail("info lacks mode=attach / attach_pid=%s" % sys.argv[2])
if abs(window - 2.0) > 0.25:
    fail("sampling window %.3f s, expected 2 s" % window)
if abs(delay - 0.5) > 0.25:
    fail("delay before sampling %.3f s, expected 0.5 s" % delay)
if info.get("attach_stop") != "duration" or info.get("complete") != "1" or info.get("attach_target_running") != "1":
    fail("info: attach_stop/complete/attach_target_running are %s/%s/%s, expected duration/1/1" %
         (info.get("attach_stop"), info.get("complete"), info.get("attach_target_running")))
' "$WORK/att/info" "$TPID"

log "=== C: Ctrl-C detaches and leaves the target running"
"$OPPROF" record -o "$WORK/int" -p "$TPID" >"$WORK/int.out" 2>"$WORK/int.err" &
OPID=$!
sleep 1.5
kill -INT "$OPID"
wait "$OPID"
st=$?
log "opprof record -p (SIGINT after 1.5 s): exit $st, stop=$(info_value "$WORK/int" attach_stop), complete=$(info_value "$WORK/int" complete)"
show stderr "$WORK/int.err" 6
[ "$st" -eq 0 ] || fail "opprof record -p interrupted by SIGINT exited $st (expected 0)"
[ "$(info_value "$WORK/int" attach_stop)" = interrupt ] || fail "info attach_stop is not interrupt after SIGINT"
[ "$(info_value "$WORK/int" complete)" = 1 ] || fail "info complete is not 1 after SIGINT"
still_running "$TPID" "SIGINT"
if report_json "$WORK/int" "$WORK/int.json" --group-by function; then
    n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("total_weight", 0))' "$WORK/int.json")
    log "samples in ~1.5 s before SIGINT: $n"
    [ "${n:-0}" -ge 300 ] || fail "only ${n:-0} samples before SIGINT (expected >= 300)"
else
    fail "opprof report after SIGINT failed"
fi

log "=== C: no --duration: the recording ends when the target exits"
attach "$WORK/tail" -p "$TPID"
[ "$ATTACH_STATUS" -eq 0 ] || fail "opprof record -p until the target's exit exited $ATTACH_STATUS"
log "attach_stop=$(info_value "$WORK/tail" attach_stop) attach_target_running=$(info_value "$WORK/tail" attach_target_running)"
[ "$(info_value "$WORK/tail" attach_stop)" = target-exit ] || fail "attach_stop is not target-exit"
wait "$TPID"
tst=$?
log "target exit status: $tst (expected 0); its output: $(grep 'total' "$WORK/target.err")"
[ "$tst" -eq 0 ] || fail "the attached target exited $tst, expected 0"
grep -q "known_split\[$TPID\]: total spin_a=" "$WORK/target.err" || fail "the attached target did not print its normal totals"

log "=== threads: known_split --threads 2, attached"
"$KNOWN_SPLIT" --threads 2 --seconds 4 >"$WORK/thr.out" 2>"$WORK/thr.err" &
TPID2=$!
TARGETS="$TARGETS $TPID2"
sleep 0.3
# Each worker's own CPU time (schedstat run time) over the attach: on a busy
# host the scheduler may give one worker far less CPU than the other, so the
# truth for "both threads were sampled" is each one's CPU time, not equality.
thread_cpu() { # prints "name run_ns" per thread of $1
    for t in /proc/"$1"/task/*; do
        printf '%s %s\n' "$(cat "$t/comm" 2>/dev/null)" "$(cut -d' ' -f1 "$t/schedstat" 2>/dev/null)"
    done
}
thread_cpu "$TPID2" >"$WORK/thr.cpu0"
attach "$WORK/thr" -p "$TPID2" --duration 1.5
thread_cpu "$TPID2" >"$WORK/thr.cpu1"
[ "$ATTACH_STATUS" -eq 0 ] || fail "opprof record -p (2 threads) exited $ATTACH_STATUS"
still_running "$TPID2" "threads"
if report_json "$WORK/thr" "$WORK/thr.json" --group-by thread; then
    pycheck '
rows = load(sys.argv[1]).get("rows", [])
workers = [r for r in rows if re.search(r"\(split-w[01]\)", str(r.get("name")))]
for r in rows:
    print("  %-40s samples %6d" % (r.get("name"), r.get("samples", 0)))
def cpu(path):
    return {l.split()[0]: int(l.split()[1]) for l in open(path) if len(l.split()) == 2}
c0, c1 = cpu(sys.argv[2]), cpu(sys.argv[3])
run_ms = {n: (c1[n] - c0.get(n, 0)) / 1e6 for n in c1 if n.startswith("split-w")}
print("  workers'"'"' own CPU time over the attach (schedstat): %s" % ", ".join("%s %.0f ms" % kv for kv in sorted(run_ms.items())))
if len(workers) != 2:
    fail("expected both worker threads split-w0/split-w1 in the attached recording, found %d" % len(workers))
else:
    # Samples at 1 kHz against each thread'"'"'s CPU time: the attach window is
    # inside the measured span (set-up and tear-down are outside the samples),
    # so a thread may show fewer samples than its CPU time, never many more,
    # and no worker may fall below half of its share.
    for w in workers:
        name = re.search(r"\((split-w[01])\)", w["name"]).group(1)
        want = run_ms.get(name, 0)
        print("  %s: %d samples for %.0f ms of CPU" % (name, w["samples"], want))
        if want > 200 and w["samples"] < 0.5 * want:
            fail("%s: %d samples for %.0f ms of its own CPU time: barely sampled" % (name, w["samples"], want))
        if w["samples"] > 1.2 * want + 20:
            fail("%s: %d samples, more than its %.0f ms of CPU time allows" % (name, w["samples"], want))
' "$WORK/thr.json" "$WORK/thr.cpu0" "$WORK/thr.cpu1"
else
    fail "opprof report --group-by thread failed"
fi
wait "$TPID2" || fail "the 2-thread target exited $?"

log "=== errors"
sh -c 'exit 0' &
DEAD=$!
wait "$DEAD"
mkdir "$WORK/cli" && cd "$WORK/cli" || die "mkdir"
for args in "-p $DEAD" "-p $$ -- true" "-p abc" "-p $$ --duration 0"; do
    # shellcheck disable=SC2086
    limited "$OPPROF" record $args >"$WORK/e.out" 2>"$WORK/e.err"
    st=$?
    lines=$(wc -l <"$WORK/e.err" | tr -d ' ')
    log "record $args: exit $st, $lines line(s): $(head -n 1 "$WORK/e.err")"
    [ "$st" -ne 0 ] && [ "$st" -lt 124 ] || fail "record $args: exit $st, expected an error status"
    [ "$lines" -eq 1 ] || fail "record $args: $lines lines on stderr, expected one"
done
[ -z "$(ls -d opprof.* 2>/dev/null)" ] || fail "errors left result dirs: $(ls -d opprof.*)"
cd "$WORK" || die "cd"

# ---------------------------------------------------------------------------
log "=== Python: py_split.py from its start and attached"
if ! "$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null; then
    log "SKIP (part): $PYTHON is not CPython 3.11, the version whose frames opprof reads"
    finish
fi
record "$WORK/pystart" -F "$HZ" -- "$PYTHON" "$OPPROF_SRCDIR/tests/workloads/py_split.py" "$SECONDS_OF_WORK"
[ "$RECORD_STATUS" -eq 0 ] || die "Python reference recording failed (exit $RECORD_STATUS)"
"$PYTHON" "$OPPROF_SRCDIR/tests/workloads/py_split.py" 8 >"$WORK/py.out" 2>"$WORK/py.err" &
PPID_T=$!
TARGETS="$TARGETS $PPID_T"
sleep 0.8
report_json "$WORK/pystart" "$WORK/pystart.json" --group-by python || die "report --group-by python (reference) failed"
for try in 1 2; do
    rm -rf "$WORK/pyatt"
    attach "$WORK/pyatt" -F "$HZ" -p "$PPID_T" --duration 2
    [ "$ATTACH_STATUS" -eq 0 ] || fail "opprof record -p (Python) exited $ATTACH_STATUS"
    still_running "$PPID_T" "Python"
    report_json "$WORK/pyatt" "$WORK/pyatt.json" --group-by python || die "report --group-by python (attached) failed"
    log "python read lag: median $(info_value "$WORK/pyatt" python_lag_median_us) us, max $(info_value "$WORK/pyatt" python_lag_max_us) us"
    saved=$FAILURES
    pycheck '
tol = float(sys.argv[3])
def shares(path):
    doc = load(path)
    by = {r["name"]: r for r in doc["rows"]}
    inside = by.get("run_work", {}).get("total_ns", 0)
    return {n: (100.0 * by.get(n, {"total_ns": 0})["total_ns"] / inside if inside else 0.0)
            for n in ("spin_a", "spin_b", "spin_c")}, by.get("run_work", {}).get("total_pct", 0.0), doc.get("total_weight", 0)
ref, ref_rw, ref_n = shares(sys.argv[1])
att, att_rw, att_n = shares(sys.argv[2])
print("samples: from-start %d, attached %d" % (ref_n, att_n))
print("run_work total: from-start %.2f%%, attached %.2f%%" % (ref_rw, att_rw))
if att_rw < 90:
    fail("attached: run_work holds %.2f %% of the samples (Python frames missing?)" % att_rw)
print("%-8s %9s %10s %8s" % ("function", "attached", "from-start", "truth"))
for n, truth in (("spin_a", 50.0), ("spin_b", 30.0), ("spin_c", 20.0)):
    print("%-8s %8.2f%% %9.2f%% %7.1f%%" % (n, att[n], ref[n], truth))
    if abs(att[n] - truth) > tol:
        fail("attached: %s is %.2f %% of run_work, expected %.1f +- %.1f" % (n, att[n], truth, tol))
    if abs(att[n] - ref[n]) > tol:
        fail("%s: attached %.2f %% vs from-start %.2f %% (> %.1f pp apart)" % (n, att[n], ref[n], tol))
' "$WORK/pystart.json" "$WORK/pyatt.json" "$ATTACH_TOL_PP" && break
    [ "$try" = 1 ] && { log "note: outside ${ATTACH_TOL_PP} pp on attempt 1 (load average: $(cut -d' ' -f1-3 /proc/loadavg)); attaching again"; FAILURES=$saved; }
done
[ -n "$(info_value "$WORK/pyatt" python_lag_median_us)" ] || fail "info has no python_lag_median_us"
wait "$PPID_T"
pst=$?
log "Python target exit status: $pst (expected 0); its output: $(cat "$WORK/py.err")"
[ "$pst" -eq 0 ] || fail "the attached Python target exited $pst"
grep -q '^rounds [0-9]' "$WORK/py.err" || fail "the attached Python target did not print its rounds"
finish
