#!/usr/bin/env bash
# tests/integration/test_sweep.sh — `opprof sweep` and `opprof diff` on
# torch.bmm with the bundled runner (tools/op_bench.py), and on plain commands.
#
# 1. torch.bmm over three shapes plus a malformed one, -e cycles: a row for
#    each; GFLOP/s = 2*B*M*K*N / median time (1 %); the median agrees with a
#    direct timing of the same bmm done here (measured once more when a
#    burst of contention puts it out of bounds); the malformed row fails with the
#    runner's reason and the others run; exit status 1; -e reaches every row's
#    record and CPI/BW carry the reason they are missing.
# 2. sweep.svg parses as XML, its bars stand on a y axis from 0 (height /
#    value the same for every bar, values equal to the JSON's GFLOP/s), the
#    failed row is marked; sweep.html holds the table and the plot inline;
#    sweep.csv has the same rows.
# 3. An unknown op: rows fail with the reason.
# 4. `opprof diff SW:0 SW:2` compares the timed calls only, where aten::bmm is
#    nearly all the time; --all-samples shows start-up dominating instead.
# 5. --param: {n} substituted verbatim (no shell); a value for which the
#    command fails keeps the other rows; two --param give the cross product.
. "$(dirname "$0")/lib.sh"

PYTHON=${OPPROF_TEST_PYTHON:-/usr/bin/python3}
require_python3
require_opprof
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
    [ "${CI:-}" = true ] && die "$PYTHON cannot import torch (python3-torch should be installed)"
    skip "$PYTHON cannot import torch (apt-get install python3-torch)"
fi
make_workdir

# Shapes whose calls take >= ~150 us with the reference BLAS (8x64x13x64 is
# 0.85 Mflop): perf_counter resolution, the loop's own Python overhead (a few
# us) and a timer sample landing in a call are then small against a call.
SHAPES="8x64x64x64,8x64x32x64,8x64x13x64"

# Direct timing of the same bmm, same thread count, same method as the
# runner (per-call perf_counter over >= 0.2 s of calls): median and fastest
# call. It runs before and after the sweep and the faster round counts.
# The machine is shared (2 CPUs, other builds and tests): contention only
# ever makes calls slower, and it came in bursts that slowed a whole round
# (a direct round x2 slower once failed a "median within 2" check; a sweep
# row whose 143 calls took 1.4 ms of wall time each had its median x1.8).
# So the check that the runner times the op and nothing else compares the
# fastest calls (min of >= 20 calls: one uncontended call is enough) within
# a factor of 2, and the medians, which a burst can move, within a factor of
# 3: still far from what a wrong timing gives (a unit slip is x1000, timing
# input creation or the whole loop is x20 and more).
direct_timing() {
    "$PYTHON" - "$SHAPES" >"$1" <<'PYEOF' || die "direct timing failed"
import json, statistics, sys, time, torch
torch.set_num_threads(1)
torch.manual_seed(0)
out = {}
for s in sys.argv[1].split(","):
    b, m, k, n = map(int, s.split("x"))
    x, y = torch.randn(b, m, k), torch.randn(b, k, n)
    for _ in range(3):
        torch.bmm(x, y)
    t = []
    start = time.perf_counter()
    while len(t) < 20 or time.perf_counter() - start < 0.2:
        t0 = time.perf_counter()
        torch.bmm(x, y)
        t.append(time.perf_counter() - t0)
    out[s] = [statistics.median(t), min(t)]
print(json.dumps(out))
PYEOF
}
direct_timing "$WORK/direct1.json"

limited "$OPPROF" sweep --op torch.bmm --shapes "$SHAPES,8x64x64" --threads 1 --repeat 20 --min-time 0.2 \
    -e cycles --python "$PYTHON" --timeout 40 -o "$WORK/sw" --format json >"$WORK/sweep.json" 2>"$WORK/sweep.err"
status=$?
[ "$status" -eq 124 ] && die "opprof sweep hung"
[ "$status" -eq 1 ] || { show stderr "$WORK/sweep.err"; fail "sweep with a malformed shape: exit $status, want 1"; }
direct_timing "$WORK/direct2.json"

# timing_check SWEEP_JSON DIRECT1 DIRECT2 SHAPES: the runner times the op
# and nothing else: each row's fastest call within 2 of the fastest direct
# call, its median within 3 of the faster direct round's median.
timing_check() {
    pycheck '
rows = load(sys.argv[1])["rows"]
d1, d2 = load(sys.argv[2]), load(sys.argv[3])
for s in sys.argv[4].split(","):
    r = [r for r in rows if r["x"] == s and r["ok"]]
    if not r:
        fail("%s: no row that ran" % s); continue
    r = r[0]
    direct, fastest = min(d1[s][0], d2[s][0]), min(d1[s][1], d2[s][1])
    ratio = r["min_s"] / fastest
    (ok if 0.5 <= ratio <= 2.0 else fail)(
        "%s: fastest call %.1f us of %d vs direct %.1f us: x%.2f, within 2" %
        (s, r["min_s"] * 1e6, r["calls"], fastest * 1e6, ratio))
    ratio = r["median_s"] / direct
    (ok if 1 / 3 <= ratio <= 3.0 else fail)(
        "%s: median %.1f us vs direct %.1f us (rounds %.1f, %.1f): x%.2f, within 3" %
        (s, r["median_s"] * 1e6, direct * 1e6, d1[s][0] * 1e6, d2[s][0] * 1e6, ratio))
' "$@"
}

pycheck '
rows = load(sys.argv[1])["rows"]
shapes = sys.argv[2].split(",")
sweepdir = sys.argv[3]
(ok if len(rows) == 4 else fail)("4 rows (3 shapes + 1 malformed), got %d" % len(rows))
for s in shapes:
    r = [r for r in rows if r["x"] == s]
    if not r:
        fail("a row for %s" % s); continue
    r = r[0]
    if not r["ok"]:
        fail("%s ok (reason: %s)" % (s, r["reason"])); continue
    b, m, k, n = map(int, s.split("x"))
    want = 2 * b * m * k * n / r["median_s"] / 1e9
    (ok if abs(r["gflops"] - want) <= 0.01 * want else fail)(
        "%s: GFLOP/s %.3f = 2BMKN/median %.3f" % (s, r["gflops"], want))
    (ok if r["calls"] >= 20 and r["p25_s"] <= r["median_s"] <= r["p75_s"] else fail)(
        "%s: %d calls, quartiles %.1f <= %.1f <= %.1f us" %
        (s, r["calls"], r["p25_s"] * 1e6, r["median_s"] * 1e6, r["p75_s"] * 1e6))
    (ok if r["threads_active"] >= 1 and r["hot_kernel"] else fail)(
        "%s: hot kernel %s, %d threads active" % (s, r["hot_kernel"], r["threads_active"]))
    c = r["counters"] or ""
    (ok if r["cpi"] is None and (c.startswith("no PMU") or "can be counted here" in c) else fail)(
        "%s: CPI null with the reason: %s" % (s, c))
    err = open(r["result_dir"] + ".err").read()
    (ok if "opprof record: cycles" in err else fail)("%s: -e cycles reached record: %s" % (s, err.strip()[:100]))
m = [r for r in rows if r["x"] == "8x64x64"]
(ok if len(m) == 1 and not m[0]["ok"] and "malformed shape" in (m[0]["reason"] or "") else fail)(
    "malformed shape row fails with the reason: %s" % (m[0]["reason"] if m else None))
' "$WORK/sweep.json" "$SHAPES" "$WORK/sw"

# The timing comparison. Bursts of contention on this shared 2-CPU machine
# have slowed everything (the direct round and the sweep row alike) x2 for
# seconds: CI once saw one row at 2.04 ms for its fastest of 92 calls, with
# quartiles 2.15-2.21 ms, against 0.92 ms in the direct round after the
# sweep. So a row outside the bounds is measured once more, sweep and direct
# timing back to back (both attempts printed, with the load average); a
# runner that times the wrong thing fails both.
saved_failures=$FAILURES
if ! timing_check "$WORK/sweep.json" "$WORK/direct1.json" "$WORK/direct2.json" "$SHAPES"; then
    log "note: timing outside the bounds on attempt 1 (load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)); measuring again"
    FAILURES=$saved_failures
    direct_timing "$WORK/direct3.json"
    limited "$OPPROF" sweep --op torch.bmm --shapes "$SHAPES" --threads 1 --repeat 20 --min-time 0.2 \
        --python "$PYTHON" --timeout 40 -o "$WORK/sw_again" --format json >"$WORK/sweep_again.json" 2>"$WORK/sweep_again.err"
    status=$?
    [ "$status" -eq 0 ] || { show stderr "$WORK/sweep_again.err"; fail "sweep (second timing attempt): exit $status"; }
    direct_timing "$WORK/direct4.json"
    timing_check "$WORK/sweep_again.json" "$WORK/direct3.json" "$WORK/direct4.json" "$SHAPES"
fi

# The plot: XML; every bar on the same linear scale from 0; ticks where the
# scale puts them; values the table's; the failed row marked.
pycheck '
import xml.etree.ElementTree as ET
rows = load(sys.argv[1])["rows"]
NS = "{http://www.w3.org/2000/svg}"
try:
    root = ET.parse(sys.argv[2]).getroot()
except ET.ParseError as e:
    fail("sweep.svg is not XML: %s" % e); sys.exit(1)
ok("sweep.svg parses as XML")
(ok if root.get("data-metric") == "gflops" else fail)("plotted metric: %s" % root.get("data-metric"))
axis = root.find(NS + "g[@class=\"y-axis\"]")
bottom, plot_h, ymax = float(axis.get("data-plot-bottom")), float(axis.get("data-plot-height")), float(axis.get("data-max"))
ticks = [(float(t.get("data-value")), float(t.get("data-y"))) for t in axis.iter(NS + "text") if t.get("class") == "tick"]
(ok if len(ticks) >= 3 and ticks[0][0] == 0 and abs(ticks[-1][0] - ymax) < 1e-9 else fail)(
    "y axis: %d ticks from 0 to %g" % (len(ticks), ymax))
bad_ticks = [t for t in ticks if abs(bottom - t[1] - t[0] / ymax * plot_h) > 0.02]
(ok if not bad_ticks else fail)("ticks at their value on the scale (off: %s)" % bad_ticks)
bars = {b.get("data-label"): b for b in root.iter(NS + "rect") if b.get("class") == "bar"}
good = [r for r in rows if r["ok"]]
(ok if len(bars) == len(good) == 3 else fail)("%d bars for %d rows that ran" % (len(bars), len(good)))
for r in good:
    b = bars.get(r["label"])
    if b is None:
        fail("no bar for %s" % r["label"]); continue
    v, h, y = float(b.get("data-value")), float(b.get("height")), float(b.get("y"))
    want_h = r["gflops"] / ymax * plot_h
    (ok if abs(v - r["gflops"]) <= 1e-6 * r["gflops"] and abs(h - want_h) < 0.01 and abs(y + h - bottom) < 0.01
     else fail)("%s: bar %.3f px for %.4g GFLOP/s (JSON %.4g; scale %.3f px per GFLOP/s)" %
                (r["label"], h, v, r["gflops"], plot_h / ymax))
failed = [g for g in root.iter(NS + "g") if g.get("class") == "failed"]
(ok if len(failed) == 1 and "malformed shape" in "".join(failed[0].itertext()) else fail)(
    "the failed row is marked with its reason (%d marks)" % len(failed))
xl = [t.text for t in root.iter(NS + "text") if t.get("class") == "x-label"]
(ok if xl == [r["x"] for r in rows] else fail)("x labels per row: %s" % xl)
html = open(sys.argv[3]).read()
(ok if "<table" in html and "<svg" in html and "<?xml" not in html and all(r["label"] in html for r in rows)
 else fail)("sweep.html: the table (%d rows) and the plot inline" % len(rows))
import csv
cr = list(csv.DictReader(open(sys.argv[4])))
(ok if [c["label"] for c in cr] == [r["label"] for r in rows] and
    all(abs(float(c["gflops"]) - r["gflops"]) <= 1e-6 * r["gflops"] for c, r in zip(cr, rows) if r["ok"]) else fail)(
    "sweep.csv: the same %d rows and GFLOP/s" % len(cr))
' "$WORK/sweep.json" "$WORK/sw/sweep.svg" "$WORK/sw/sweep.html" "$WORK/sw/sweep.csv"

# An unknown op: its rows fail with the runner's reason, the sweep exits 1.
limited "$OPPROF" sweep --op torch.nosuchop --shapes 4x4 --python "$PYTHON" --timeout 40 -o "$WORK/sw_unknown" \
    >"$WORK/unknown.txt" 2>"$WORK/unknown.err"
status=$?
[ "$status" -eq 1 ] && grep -q "FAILED: op_bench: unknown op 'torch.nosuchop'" "$WORK/unknown.txt" &&
    pass "unknown op: row failed with the reason, exit 1" ||
    { show out "$WORK/unknown.txt"; fail "unknown op: exit $status"; }

# diff of two sweep rows: the timed calls only. Each call is >= 150 us of
# sgemm_ under aten::bmm against a few us of Python loop, so aten::bmm has
# nearly all of the compared self time; over all samples, start-up and
# `import torch` ([no operator]) dominate instead.
limited "$OPPROF" diff "$WORK/sw:0" "$WORK/sw:2" >"$WORK/diff.txt" 2>"$WORK/diff.err"
status=$?
[ "$status" -eq 0 ] && grep -q "^Compared: the timed calls only" "$WORK/diff.txt" && grep -q "aten::bmm" "$WORK/diff.txt" &&
    pass "opprof diff SW:0 SW:2 compares the timed calls" ||
    { show diff "$WORK/diff.txt"; show stderr "$WORK/diff.err"; fail "opprof diff SW:0 SW:2: exit $status"; }
limited "$OPPROF" diff --sweep "$WORK/sw" 0 8x64x13x64 --format json >"$WORK/diff.json" 2>"$WORK/diff.err"
limited "$OPPROF" diff "$WORK/sw:0" "$WORK/sw:2" --all-samples --format json >"$WORK/diff_all.json" 2>>"$WORK/diff.err"
pycheck '
d, a = load(sys.argv[1]), load(sys.argv[2])
(ok if d["compared"].startswith("the timed calls only") and "002-bmm_8x64x13x64" in d["b"] else fail)(
    "--sweep DIR 0 8x64x13x64: B = %s; compared: %s" % (d["b"], d["compared"]))
bmm = [r for r in d["rows"] if r["name"] == "aten::bmm"]
bmm_all = [r for r in a["rows"] if r["name"] == "aten::bmm"]
if not bmm or not bmm_all:
    fail("aten::bmm in both diffs"); sys.exit(1)
b, ba = bmm[0], bmm_all[0]
(ok if b["a_share"] >= 0.7 and b["b_share"] >= 0.7 else fail)(
    "timed calls: aten::bmm %.1f%% of A, %.1f%% of B (want >= 70%%)" % (b["a_share"] * 100, b["b_share"] * 100))
(ok if a["compared"] == "all samples" and ba["a_share"] < b["a_share"] else fail)(
    "--all-samples: aten::bmm only %.1f%% of A" % (ba["a_share"] * 100))
changes = [abs(r["change_pp"]) for r in d["rows"]]
(ok if changes == sorted(changes, reverse=True) else fail)("rows sorted by absolute change: %s" % changes)
' "$WORK/diff.json" "$WORK/diff_all.json" || show stderr "$WORK/diff.err"

# --param: {n} substituted inside a longer argument, metacharacters verbatim.
limited "$OPPROF" sweep --param n=3,5 --timeout 40 -o "$WORK/sw_param" --format csv -- \
    "$PYTHON" -c 'import sys; open(sys.argv[1], "w").write(sys.argv[2])' "$WORK/param-{n}.txt" 'x{n}$(id);|' \
    >"$WORK/param.csv" 2>"$WORK/param.err"
status=$?
[ "$status" -eq 0 ] && [ "$(cat "$WORK/param-3.txt" 2>/dev/null)" = 'x3$(id);|' ] &&
    [ "$(cat "$WORK/param-5.txt" 2>/dev/null)" = 'x5$(id);|' ] && [ "$(grep -c '^n=' "$WORK/param.csv")" -eq 2 ] &&
    pass "--param substitutes {n} verbatim" || { show csv "$WORK/param.csv"; fail "--param sweep: exit $status"; }

# Two parameters, one value of which makes the command fail: the cross
# product of rows (2 x 3), the failing ones with the command's reason, the
# others run (each writes its file), exit status 1.
limited "$OPPROF" sweep --param a=1,2 --param b=x,bad,z --timeout 40 -o "$WORK/sw_cross" --format json -- \
    "$PYTHON" -c 'import sys
a, b = sys.argv[1:3]
if b == "bad": sys.exit("no good value: " + b)
open("cross-%s-%s" % (a, b), "w").write("ran")' '{a}' '{b}' >"$WORK/cross.json" 2>"$WORK/cross.err"
status=$?
[ "$status" -eq 1 ] && pass "one failing value: exit 1" || { show stderr "$WORK/cross.err"; fail "cross sweep: exit $status, want 1"; }
pycheck '
import os, xml.etree.ElementTree as ET
rows = load(sys.argv[1])["rows"]
want = ["a=%s,b=%s" % (a, b) for a in ("1", "2") for b in ("x", "bad", "z")]
(ok if [r["label"] for r in rows] == want else fail)("cross product rows: %s" % [r["label"] for r in rows])
for r in rows:
    a, b = r["label"][2], r["label"].split("b=")[1]
    if b == "bad":
        (ok if not r["ok"] and "no good value: bad" in r["reason"] and "exit status 1" in r["reason"] else fail)(
            "%s failed with the reason: %s" % (r["label"], r["reason"]))
    else:
        ran = os.path.exists("cross-%s-%s" % (a, b))
        (ok if r["ok"] and ran and r["median_s"] > 0 else fail)("%s ran (%.3f s)" % (r["label"], r["median_s"] or 0))
    (ok if r["x"] == a and r["series"] == "b=" + b else fail)("%s: x %s, series %s" % (r["label"], r["x"], r["series"]))
root = ET.parse(sys.argv[2]).getroot()
NS = "{http://www.w3.org/2000/svg}"
legend = [t.text for t in root.iter(NS + "text") if t.get("class") == "legend"]
(ok if root.get("data-metric") == "time" and legend == ["b=x", "b=bad", "b=z"] else fail)(
    "plot of time per call, one series per b: %s" % legend)
' "$WORK/cross.json" "$WORK/sw_cross/sweep.svg"

finish
