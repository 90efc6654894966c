#!/usr/bin/env bash
# tests/integration/test_python_split.sh — Python stacks of a plain Python
# script (no torch) against ground truth: spin_a/spin_b/spin_c run the same
# loop body 5:3:2 (tests/workloads/py_split.py), so their total shares of the
# time inside run_work are 50/30/20 %; every sample inside run_work must show
# the Python chain <module> -> run_work -> spin_X -> body.
. "$(dirname "$0")/lib.sh"
PYTHON=${OPPROF_TEST_PYTHON:-/usr/bin/python3}
require_python3
require_opprof
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null \
    || skip "$PYTHON is not CPython 3.11 (the version whose frames opprof reads)"
make_workdir
record "$WORK/res" -- "$PYTHON" "$OPPROF_SRCDIR/tests/workloads/py_split.py" "$SECONDS_OF_WORK"
[ "$RECORD_STATUS" -eq 0 ] || die "the Python workload failed under opprof record (exit $RECORD_STATUS)"
report_json "$WORK/res" "$WORK/py.json" --group-by python || die "opprof report --group-by python failed"
report_json "$WORK/res" "$WORK/fn.json" --callers body || die "opprof report --callers body failed"
python3 - "$WORK/py.json" "$WORK/fn.json" "$TOL_PP" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
tol = float(sys.argv[3])
by = {r["name"]: r for r in rows}
failures = 0
def fail(msg):
    global failures
    print("FAIL:", msg)
    failures += 1
if "run_work" not in by:
    fail("no Python function run_work in the report (Python frames missing?)")
    sys.exit(1)
inside = by["run_work"]["total_ns"]
print("run_work total: %.2f %% of all samples" % by["run_work"]["total_pct"])
if by["run_work"]["total_pct"] < 90:
    fail("run_work holds only %.2f %% of the samples (expected >= 90 %%)" % by["run_work"]["total_pct"])
print("%-8s %8s %8s" % ("function", "opprof", "truth"))
for name, truth in (("spin_a", 50.0), ("spin_b", 30.0), ("spin_c", 20.0)):
    got = 100.0 * by.get(name, {"total_ns": 0})["total_ns"] / inside if inside else 0.0
    print("%-8s %7.2f%% %7.1f%%" % (name, got, truth))
    if abs(got - truth) > tol:
        fail("%s: %.2f %% of run_work, expected %.1f %% +- %.1f" % (name, got, truth, tol))
body = by.get("body")
if not body or body["total_ns"] < 0.95 * inside:
    fail("body (the loop all three call) is not under ~all of run_work")
callers = {r["name"] for r in json.load(open(sys.argv[2]))["rows"]}
if not {"spin_a", "spin_b", "spin_c"} <= callers:
    fail("callers of body are %s, expected spin_a, spin_b, spin_c" % sorted(callers))
sys.exit(1 if failures else 0)
PY
[ $? -eq 0 ] || fail "Python function shares differ from the known split (see above)"
finish
