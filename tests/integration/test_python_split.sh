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
# At SPLIT_FREQ (lib.sh): at the default 1000 Hz the sampling error alone
# (sigma 0.9 pp for a 50 % share) is half the tolerance.
record "$WORK/res" -F "$SPLIT_FREQ" -- "$PYTHON" "$OPPROF_SRCDIR/tests/workloads/py_split.py" "$SECONDS_OF_WORK"
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

# Code objects re-created at the same address under another file name: one
# second of CPU time in module code of "<string>", one in "second_module.py"
# (same co_name and first line). Each file must get its own half; naming by
# address and co_name alone gave "<string>" 96 % of the time.
record "$WORK/reuse" -- "$PYTHON" "$OPPROF_SRCDIR/tests/workloads/py_code_reuse.py"
[ "$RECORD_STATUS" -eq 0 ] || die "py_code_reuse.py failed under opprof record (exit $RECORD_STATUS)"
report_json "$WORK/reuse" "$WORK/reuse.json" --group-by python || die "opprof report --group-by python failed"
python3 - "$WORK/reuse.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
files = ("<string>", "second_module.py")
w = {k: 0 for k in files}
for r in rows:
    if r["name"] == "<module>" and r.get("module") in files:
        w[r["module"]] += r["self_ns"]
both = sum(w.values()) or 1
share = {k: 100.0 * w[k] / both for k in files}
# Each file runs for 1.000 s of process time; 5 pp covers the ~2,000 samples'
# spread, the failure was 96 / 4.
print("module code by file: %s (truth 50 / 50 +- 5)" % ", ".join("%s %.1f %%" % (k, share[k]) for k in files))
sys.exit(1 if any(abs(share[k] - 50.0) > 5.0 for k in files) else 0)
PY
[ $? -eq 0 ] || fail "re-created code objects were named after the code that had their address before"
finish
