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
#     2 s: Python shares of spin_a/b/c within 3 pp (or 3 sigma of the samples
#     that kept Python frames) of 50/30/20 and of each other; samples left
#     without Python frames are counted in info; the lag of the Python reads
#     is in info; the target finishes.
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
TSTART=$(date +%s)
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
cpu0=$(cut -d' ' -f1 "/proc/$TPID/schedstat")
"$OPPROF" record -o "$WORK/int" -p "$TPID" >"$WORK/int.out" 2>"$WORK/int.err" &
OPID=$!
sleep 1.5
kill -INT "$OPID"
wait "$OPID"
st=$?
cpu1=$(cut -d' ' -f1 "/proc/$TPID/schedstat")
log "opprof record -p (SIGINT after 1.5 s): exit $st, stop=$(info_value "$WORK/int" attach_stop), complete=$(info_value "$WORK/int" complete)"
show stderr "$WORK/int.err" 6
[ "$st" -eq 0 ] || fail "opprof record -p interrupted by SIGINT exited $st (expected 0)"
[ "$(info_value "$WORK/int" attach_stop)" = interrupt ] || fail "info attach_stop is not interrupt after SIGINT"
[ "$(info_value "$WORK/int" complete)" = 1 ] || fail "info complete is not 1 after SIGINT"
still_running "$TPID" "SIGINT"
if report_json "$WORK/int" "$WORK/int.json" --group-by function; then
    # Samples at 1 kHz against the target's own CPU time (schedstat) over
    # the ~1.5 s, of which the sampling window (info start_ns..end_ns; ASan
    # and a loaded machine stretch the attach before it) is a part: its
    # share of that CPU time, halved for a CPU share that is uneven at the
    # scheduler's granularity, is the least, the whole time (+20 %) the most.
    # (Beside busy loops at load 25 the target got 0.1 CPU: 100 samples.)
    pycheck '
info = {l.split("=", 1)[0]: l.split("=", 1)[1].strip() for l in open(sys.argv[2]) if "=" in l}
n = load(sys.argv[1]).get("total_weight", 0)
cpu_ms = (int(sys.argv[4]) - int(sys.argv[3])) / 1e6
window = (int(info.get("end_ns", 0)) - int(info.get("start_ns", 0))) / 1e9
least = 0.5 * cpu_ms * min(window / 1.5, 1.0)
print("samples in ~1.5 s before SIGINT: %d (target CPU %.0f ms over the 1.5 s, window %.2f s; expected %.0f-%.0f)"
      % (n, cpu_ms, window, least, 1.2 * cpu_ms + 20))
if n < least or n == 0 or n > 1.2 * cpu_ms + 20:
    fail("%d samples before SIGINT for %.0f ms of the target'"'"'s CPU time" % (n, cpu_ms))
' "$WORK/int.json" "$WORK/int/info" "$cpu0" "$cpu1"
else
    fail "opprof report after SIGINT failed"
fi

log "=== C: no --duration: the recording ends when the target exits"
# The target ends after 12 s of its own CPU time, so how long this takes is
# the CPU time it still needs over the CPU share it has been getting (its
# schedstat run time over its life): beside busy loops at load 25 it got
# 0.08 CPU and ran 163 s. The hang limit is 3 times that, at least TIME_LIMIT.
tail_limit=$(awk -v run="$(cut -d' ' -f1 "/proc/$TPID/schedstat")" -v age="$(($(date +%s) - TSTART))" \
    -v lim="$TIME_LIMIT" 'BEGIN { share = run / 1e9 / (age > 0 ? age : 1); if (share < 0.01) share = 0.01;
        need = 3 * (12 - run / 1e9) / share; printf "%d", (need > lim ? need : lim) }')
log "  target: $(awk '{ printf "%.2f", $1 / 1e9 }' "/proc/$TPID/schedstat") s of CPU in $(($(date +%s) - TSTART)) s; time limit ${tail_limit} s"
saved_limit=$TIME_LIMIT
TIME_LIMIT=$tail_limit
attach "$WORK/tail" -p "$TPID"
TIME_LIMIT=$saved_limit
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
# The Threading section of an attached result says why it has no scheduling
# data (attach samples from outside; only the agent inside a recorded program
# reads it), not "recorded by an older opprof?" (what it said before).
limited "$OPPROF" report "$WORK/thr" --threading >"$WORK/thr.threading" 2>&1
show threading "$WORK/thr.threading" 6
if grep -q 'opprof attach samples the process from outside' "$WORK/thr.threading" &&
    ! grep -q 'older opprof' "$WORK/thr.threading"; then
    pass "attach: the Threading section says attach cannot see scheduling"
else
    fail "attach: the Threading section does not give attach as the reason for no scheduling data"
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
"$PYTHON" "$OPPROF_SRCDIR/tests/workloads/py_split.py" 14 >"$WORK/py.out" 2>"$WORK/py.err" &
PPID_T=$!
TARGETS="$TARGETS $PPID_T"
sleep 0.8
report_json "$WORK/pystart" "$WORK/pystart.json" --group-by python || die "report --group-by python (reference) failed"
# From outside, a sample keeps Python frames only when opprof can tell they
# are the sample's (sampler/attach/attach_pending.c): read while the thread
# was still switched out right at the sample, or while it ran on without a
# switch. Frames read where the scheduler preempted the thread are left out
# and counted (python_moved_on): beside busy loops they are most samples,
# and kept, they had put 13-64 % of the samples in run_work with no spin_*.
# So the shares are checked on the samples with Python frames, with the
# statistical error of that many samples: 3 sigma of a binomial share, at
# least ATTACH_TOL_PP. Too few kept samples for any check: attach again.
# Starved: the kept samples lean toward the longest phase the more are left
# out (survivorship: spin_a +4 to +6 pp with 63 % left out beside a CI run
# and two busy loops; +3.75 pp with 24 % left out beside three, a load of
# 4.2 on 2 CPUs, where 25 % was the threshold; under 3 % left out on a quiet
# machine), so past 15 % left out, when the reader says its reads came late
# (python_lag_late_pct at least 5 % and half the share left out:
# test_python_split.sh measured the two nearly equal), the split is not
# judged on that attempt. Up to five attempts: three starved pass on the
# accounting checks alone, and say so; three judged and failed fail.
starved=0
judged_failed=0
SANITIZED=0
sanitized_build && SANITIZED=1
for try in 1 2 3 4 5; do
    rm -rf "$WORK/pyatt"
    attach "$WORK/pyatt" -F "$HZ" -p "$PPID_T" --duration 2
    [ "$ATTACH_STATUS" -eq 0 ] || fail "opprof record -p (Python) exited $ATTACH_STATUS"
    still_running "$PPID_T" "Python"
    report_json "$WORK/pyatt" "$WORK/pyatt.json" --group-by python || die "report --group-by python (attached) failed"
    log "python read lag: median $(info_value "$WORK/pyatt" python_lag_median_us) us, max $(info_value "$WORK/pyatt" python_lag_max_us) us"
    log "python frames kept: exact $(info_value "$WORK/pyatt" python_exact), running $(info_value "$WORK/pyatt" python_running), left out $(info_value "$WORK/pyatt" python_moved_on)"
    saved=$FAILURES
    pycheck '
import math
tol = float(sys.argv[3])
info = {l.split("=", 1)[0]: l.split("=", 1)[1].strip() for l in open(sys.argv[4]) if "=" in l}
def shares(path):
    doc = load(path)
    by = {r["name"]: r for r in doc["rows"]}
    inside = by.get("run_work", {}).get("samples", 0)
    nopy = by.get("[no Python frame]", {}).get("samples", 0)
    return ({n: (100.0 * by.get(n, {"samples": 0})["samples"] / inside if inside else 0.0)
             for n in ("spin_a", "spin_b", "spin_c")}, inside, nopy, doc.get("total_weight", 0))
ref, ref_in, ref_nopy, ref_n = shares(sys.argv[1])
att, att_in, att_nopy, att_n = shares(sys.argv[2])
moved = int(info.get("python_moved_on", "-1"))
kept = int(info.get("python_exact", "0")) + int(info.get("python_running", "0"))
print("samples: from-start %d, attached %d: %d with Python frames, %d without (%d left out as read after the thread moved on)"
      % (ref_n, att_n, att_n - att_nopy, att_nopy, moved))
if moved < 0:
    fail("info has no python_moved_on")
# Every sample without Python frames is accounted for: left out, or read with
# none (a handful, e.g. while the interpreter starts a call).
if att_nopy < moved or att_nopy - moved > 0.02 * att_n + 5:
    fail("%d samples without Python frames, but %d counted as left out" % (att_nopy, moved))
if abs(kept - (att_n - att_nopy)) > 0.02 * att_n + 5:
    fail("info says %d samples kept their Python frames, the report has %d" % (kept, att_n - att_nopy))
withpy = att_n - att_nopy
lost = 100.0 * att_nopy / att_n if att_n else 100.0
late = float(info.get("python_lag_late_pct", "0"))
# The reader of a sanitizer build, starved, can keep too few samples to judge
# anything but the accounting above (the ASan stage of CI on a VM whose system
# calls cost ~1 us: 98.9-100 % left out, median lag 57-78 ms at -F 4000, 0-54
# kept): that is what a starved attempt is judged on. In the regular build
# too few kept is a failure, starved or not.
if withpy < 30 and not (sys.argv[7] == "1" and lost > 15 and late >= max(5.0, lost / 2)):
    fail("only %d samples kept their Python frames: too few to check shares" % withpy)
    sys.exit(1)
if lost > 15 and late >= max(5.0, lost / 2):
    starved = int(sys.argv[5]) + 1
    open(sys.argv[6], "w").write("%d\n" % starved)
    msg = ("starved: %.1f %% of the samples left out, %.1f %% of the reads a period or more late: the split is "
           "not judged" % (lost, late))
    if starved < 3:
        fail(msg)
    else:
        print("note: " + msg + " (3 attempts starved; the accounting above is checked)")
    sys.exit(min(failures, 100))
if att_in < 0.9 * withpy:
    fail("attached: run_work holds %d of the %d samples with Python frames (frames of other moments?)" % (att_in, withpy))
print("%-8s %9s %10s %8s %7s" % ("function", "attached", "from-start", "truth", "tol"))
for n, truth in (("spin_a", 50.0), ("spin_b", 30.0), ("spin_c", 20.0)):
    sigma = 100 * math.sqrt(truth / 100 * (1 - truth / 100) / att_in)
    t = max(tol, 3 * sigma)
    print("%-8s %8.2f%% %9.2f%% %7.1f%% %6.1f" % (n, att[n], ref[n], truth, t))
    if abs(att[n] - truth) > t:
        fail("attached: %s is %.2f %% of run_work, expected %.1f +- %.1f (%d samples)" % (n, att[n], truth, t, att_in))
    if abs(att[n] - ref[n]) > t:
        fail("%s: attached %.2f %% vs from-start %.2f %% (> %.1f pp apart)" % (n, att[n], ref[n], t))
'  "$WORK/pystart.json" "$WORK/pyatt.json" "$ATTACH_TOL_PP" "$WORK/pyatt/info" "$starved" "$WORK/starved" "$SANITIZED" && break
    if [ -f "$WORK/starved" ]; then
        starved=$(cat "$WORK/starved") && rm -f "$WORK/starved"
    else
        judged_failed=$((judged_failed + 1))
    fi
    [ "$try" = 5 ] || [ "$judged_failed" = 3 ] && break
    log "note: attempt $try failed (load average: $(cut -d' ' -f1-3 /proc/loadavg)); attaching again"
    FAILURES=$saved
done
[ -n "$(info_value "$WORK/pyatt" python_lag_median_us)" ] || fail "info has no python_lag_median_us"
wait "$PPID_T"
pst=$?
log "Python target exit status: $pst (expected 0); its output: $(cat "$WORK/py.err")"
[ "$pst" -eq 0 ] || fail "the attached Python target exited $pst"
grep -q '^rounds [0-9]' "$WORK/py.err" || fail "the attached Python target did not print its rounds"
finish
