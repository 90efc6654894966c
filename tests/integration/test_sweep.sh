#!/usr/bin/env bash
# tests/integration/test_sweep.sh — `opprof sweep` and `opprof diff` on
# torch.bmm with the bundled runner (tools/op_bench.py).
#
# One sweep over three small shapes plus a malformed shape and, in a second
# sweep, an unknown op: every combination gets a row; the good rows' GFLOP/s
# must equal 2*B*M*K*N / median time (within 1 %), the median must be within a
# factor of 2 of a direct timing of the same bmm done here, the bad rows fail
# with the runner's reason, the exit status is 1. `opprof diff` of two rows'
# result directories must show aten::bmm. A --param sweep substitutes {n}
# verbatim (no shell).
. "$(dirname "$0")/lib.sh"

PYTHON=${OPPROF_TEST_PYTHON:-/usr/bin/python3}
require_python3
require_opprof
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
    [ "${CI:-}" = true ] && die "$PYTHON cannot import torch (python3-torch should be installed)"
    skip "$PYTHON cannot import torch (apt-get install python3-torch)"
fi
make_workdir

SHAPES="4x32x32x32,4x64x64x64,4x64x13x64"
limited "$OPPROF" sweep --op torch.bmm --shapes "$SHAPES,4x64x64" --threads 1 --repeat 50 \
    --python "$PYTHON" --timeout 40 -o "$WORK/sw" --format json >"$WORK/sweep.json" 2>"$WORK/sweep.err"
status=$?
[ "$status" -eq 124 ] && die "opprof sweep hung"
[ "$status" -eq 1 ] || { show stderr "$WORK/sweep.err"; fail "sweep with a malformed shape: exit $status, want 1"; }
[ -s "$WORK/sw/sweep.svg" ] && grep -q "<svg" "$WORK/sw/sweep.svg" && pass "sweep.svg written" || fail "no sweep.svg"

# Direct timing of the same bmm, same thread count, same method.
"$PYTHON" - "$SHAPES" >"$WORK/direct.json" <<'EOF' || die "direct timing failed"
import json, sys, time, torch
torch.set_num_threads(1)
torch.manual_seed(0)
out = {}
for s in sys.argv[1].split(","):
    b, m, k, n = map(int, s.split("x"))
    x, y = torch.randn(b, m, k), torch.randn(b, k, n)
    for _ in range(3):
        torch.bmm(x, y)
    t = []
    for _ in range(50):
        t0 = time.perf_counter()
        torch.bmm(x, y)
        t.append(time.perf_counter() - t0)
    t.sort()
    out[s] = (t[24] + t[25]) / 2
print(json.dumps(out))
EOF

python3 - "$WORK/sweep.json" "$WORK/direct.json" "$SHAPES" <<'EOF' || fail "sweep rows"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
direct = json.load(open(sys.argv[2]))
shapes = sys.argv[3].split(",")
bad = 0
def check(cond, what):
    global bad
    print(("ok: " if cond else "FAIL: ") + what)
    bad += not cond
check(len(rows) == 4, "4 rows (3 shapes + 1 malformed), got %d" % len(rows))
for s in shapes:
    r = [r for r in rows if s in r["label"]]
    if not r:
        check(False, "a row for %s" % s); continue
    r = r[0]
    if not r["ok"]:
        check(False, "%s ok (reason: %s)" % (s, r["reason"])); continue
    b, m, k, n = map(int, s.split("x"))
    want = 2 * b * m * k * n / r["median_s"] / 1e9
    check(abs(r["gflops"] - want) <= 0.01 * want, "%s: GFLOP/s %.3f = 2BMKN/median %.3f" % (s, r["gflops"], want))
    ratio = r["median_s"] / direct[s]
    check(0.5 <= ratio <= 2.0, "%s: median %.1f us vs direct %.1f us (x%.2f, within 2)" %
          (s, r["median_s"] * 1e6, direct[s] * 1e6, ratio))
    check(r["threads_active"] >= 1 and r["hot_kernel"], "%s: hot kernel %s, %d threads active" %
          (s, r["hot_kernel"], r["threads_active"]))
m = [r for r in rows if "4x64x64 " in r["label"] + " " and not r["ok"]]
check(len(m) == 1 and "malformed shape" in (m[0]["reason"] or ""),
      "malformed shape row fails with the reason: %s" % (m[0]["reason"] if m else None))
sys.exit(1 if bad else 0)
EOF

# An unknown op: its rows fail with the runner's reason, the sweep exits 1.
limited "$OPPROF" sweep --op torch.nosuchop --shapes 4x4 --python "$PYTHON" --timeout 40 -o "$WORK/sw_unknown" \
    >"$WORK/unknown.txt" 2>"$WORK/unknown.err"
status=$?
[ "$status" -eq 1 ] && grep -q "FAILED: op_bench: unknown op 'torch.nosuchop'" "$WORK/unknown.txt" &&
    pass "unknown op: row failed with the reason, exit 1" ||
    { show out "$WORK/unknown.txt"; fail "unknown op: exit $status"; }

# diff of two rows' result directories names aten::bmm.
a=$(ls -d "$WORK"/sw/000-*/ | head -1)
b=$(ls -d "$WORK"/sw/001-*/ | head -1)
limited "$OPPROF" diff "$a" "$b" >"$WORK/diff.txt" 2>"$WORK/diff.err"
status=$?
[ "$status" -eq 0 ] && grep -q "aten::bmm" "$WORK/diff.txt" && pass "opprof diff shows aten::bmm" ||
    { show diff "$WORK/diff.txt"; show stderr "$WORK/diff.err"; fail "opprof diff: exit $status, no aten::bmm"; }
limited "$OPPROF" diff "$a" "$b" --format json >"$WORK/diff.json" 2>/dev/null &&
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert any(r["name"]=="aten::bmm" for r in d["rows"])' \
        "$WORK/diff.json" && pass "opprof diff --format json" || fail "opprof diff --format json"

# --param: {n} substituted inside a longer argument, metacharacters verbatim.
limited "$OPPROF" sweep --param n=3,5 --timeout 40 -o "$WORK/sw_param" --format csv -- \
    "$PYTHON" -c 'import sys; open(sys.argv[1], "w").write(sys.argv[2])' "$WORK/param-{n}.txt" 'x{n}$(id);|' \
    >"$WORK/param.csv" 2>"$WORK/param.err"
status=$?
[ "$status" -eq 0 ] && [ "$(cat "$WORK/param-3.txt" 2>/dev/null)" = 'x3$(id);|' ] &&
    [ "$(cat "$WORK/param-5.txt" 2>/dev/null)" = 'x5$(id);|' ] && [ "$(grep -c '^n=' "$WORK/param.csv")" -eq 2 ] &&
    pass "--param substitutes {n} verbatim" || { show csv "$WORK/param.csv"; fail "--param sweep: exit $status"; }

finish
