#!/usr/bin/env bash
# tests/integration/test_torch_shapes.sh — `opprof record --torch-shapes`:
# FLOPs per operator, GFLOP/s, and what the hook changes.
#
# tests/workloads/torch_shapes.py makes a known number of calls of mm, bmm,
# addmm, linear, layer_norm and softmax on known shapes. Recorded once with the
# hook and once without:
#   1. calls and FLOPs per operator equal those computed here from the shapes
#      and counts (FLOPs exactly: the formulas are written out below, apart from
#      opprof's code), and mm's bytes too;
#   2. mm's and bmm's GFLOP/s, in a third recording that calls only those
#      two, agree with the workload's own figure (its thread CPU time around
#      each burst), and are within 20 % of `opprof sweep`'s for the same
#      op and shape (see the section's comment for when a miss is the host's),
#      in
#      bursts of 50 calls as the sweep calls one operator back to back (after
#      layer_norm and softmax, whose inputs push mm's out of the caches, mm
#      ran ~10 % slower per call in the mixed loop: a real effect, not the
#      measurement's). The sweep prints FLOPs over the median wall time of a call,
#      which a loaded machine inflates at will (load 12 on these 2 CPUs: bmm's
#      median call took 5.3 ms, its fastest 1.4 ms); the report divides by
#      sampled CPU time. So the sweep's figure compared is the same FLOPs over
#      the CPU time its own recording sampled in the operator (its row's result
#      dir, warm-up and timed calls): the sweep's measurement, without the
#      waits; its wall-clock figure is printed beside it.
#   3. each operator's self share with the hook is within 4 sigma (+0.5 pp,
#      at least 3 pp) of its share without it, sigma from the two runs'
#      sample counts (5 operators at 3 sigma failed once in CI on a loaded
#      machine: bmm -3.14 pp, sigma 0.99). Shares are of the samples inside operators (not of all
#      samples): the hook's own samples are a row of their own, and the import
#      of torch, whose length varies from run to run, is no operator. With
#      OpenMP regions (torch 2.6 in Debian trixie, 2 threads) the runtime's
#      wait is its own row too: test_distros.sh checks this there.
#   4. record's summary says that a hook ran and what it cost, and the hook's
#      samples are their own row "[opprof --torch-shapes hook]".
# Plus: a Python program that never imports torch runs unchanged (no file, no
# torch import), and the user's own sitecustomize still runs.
. "$(dirname "$0")/lib.sh"

PYTHON=${OPPROF_TEST_PYTHON:-/usr/bin/python3}
WORKLOAD="$OPPROF_SRCDIR/tests/workloads/torch_shapes.py"
# 24 iterations of bursts of 50 calls: ~5,000 samples inside operators at
# 1 kHz, so a share's sampling error (sigma) is below 0.8 pp and the
# difference of two runs below 1.1 pp (the check computes it per operator).
ITERS=${OPPROF_TEST_TORCH_SHAPES_ITERS:-24}
TIME_LIMIT=${OPPROF_TEST_TIME_LIMIT:-300}

require_python3
require_opprof
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
    skip "$PYTHON cannot import torch (apt-get install python3-torch): nothing to hook"
fi
make_workdir

# --- a program without torch, and a user's sitecustomize -------------------
mkdir -p "$WORK/usersite"
echo 'import os; os.environ["USER_SITECUSTOMIZE_RAN"] = "yes"' >"$WORK/usersite/sitecustomize.py"
PYTHONPATH="$WORK/usersite" record "$WORK/plain" --torch-shapes -- "$PYTHON" -c \
    'import os, sys; print(os.environ.get("USER_SITECUSTOMIZE_RAN"), "torch" in sys.modules, [p for p in sys.path if os.path.exists(os.path.join(p, "opprof_torch_shapes.py"))])'
[ "$RECORD_STATUS" -eq 0 ] || fail "a plain Python program under --torch-shapes exited $RECORD_STATUS"
if [ "$(cat "$WORK/plain.out")" = "yes False []" ]; then
    pass "without torch: the user's sitecustomize ran, torch was not imported, sys.path holds no opprof directory"
else
    fail "without torch the program saw: '$(cat "$WORK/plain.out")' (expected 'yes False []')"
fi
ls "$WORK/plain"/torch_shapes.* >/dev/null 2>&1 && fail "a program without torch left a torch_shapes file"
grep -q "no process imported torch" "$RECORD_ERR" && pass "summary: $(grep -- '--torch-shapes' "$RECORD_ERR")" ||
    fail "record's summary does not say that no hook ran"

# --- the two recordings ------------------------------------------------------
# Every comparison of two processes below (the hook's shares, GFLOP/s
# against the sweep) runs them side by side with the test pinned to one CPU
# (taskset on this shell, inherited; the test's choice, not opprof's): the
# two share that vCPU's time slices and whatever the host does to it. On a
# Firecracker VM one after the other, the run without the hook took 8,655
# samples for the work that took the hooked run 5,907, and bmm's share moved
# 5.2 pp (CI's ASan stage at load 3.2); side by side unpinned, the two vCPUs
# ran the same mm at 3.2 and 5.9 GFLOP/s at once (see the GFLOP/s section).
PIN_CPU=$("$PYTHON" -c 'import os; print(min(os.sched_getaffinity(0)))')
PIN_MASK=$(taskset -p $$ 2>/dev/null | sed -n 's/.*: *//p')
if [ -n "$PIN_MASK" ] && taskset -pc "$PIN_CPU" $$ >/dev/null; then
    log "(the recordings and sweeps compared below share CPU $PIN_CPU: taskset on the test's shell)"
else
    log "note: taskset could not pin the test's shell: the processes compared below run side by side unpinned"
    PIN_MASK=
fi
( record "$WORK/plain_run" -- "$PYTHON" "$WORKLOAD" --iters "$ITERS"; exit "$RECORD_STATUS" ) >"$WORK/plain_run.log" 2>&1 &
plain_pid=$!
record "$WORK/hooked" --torch-shapes -- "$PYTHON" "$WORKLOAD" --iters "$ITERS"
wait "$plain_pid"
plain_status=$?
log "(beside it:)"
cat "$WORK/plain_run.log"
[ "$RECORD_STATUS" -eq 0 ] || die "the workload failed under --torch-shapes (exit $RECORD_STATUS)"
if grep -Eq '^opprof record: --torch-shapes: a dispatch hook ran in the workload \(torch [^,]+, TorchDispatchMode\): [0-9]+ operator calls intercepted, cost [0-9.]+ s' "$RECORD_ERR"; then
    pass "summary: $(grep -- '--torch-shapes' "$RECORD_ERR")"
else
    fail "record's summary does not say that a dispatch hook ran and what it cost"
fi
[ "$plain_status" -eq 0 ] || die "the workload failed under opprof record (exit $plain_status)"

report_json "$WORK/hooked" "$WORK/shapes.json" --torch-shapes || die "opprof report --torch-shapes failed"
report_json "$WORK/hooked" "$WORK/ops_hooked.json" --group-by op || die "opprof report --group-by op failed"
report_json "$WORK/plain_run" "$WORK/ops_plain.json" --group-by op || die "opprof report --group-by op failed"
"$PYTHON" "$WORKLOAD" --print-shapes >"$WORK/shapes_truth.json" || die "the workload cannot print its shapes"

# --- GFLOP/s against opprof sweep on the same ops and shapes ------------------
read -r MKN BMKN <<<"$("$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%dx%dx%d %dx%dx%dx%d" % (d["M"],d["K"],d["N"],d["BATCH"],d["M"],d["K"],d["N"]))' "$WORK/shapes_truth.json")"
# One attempt: the mm/bmm recording and, at the same time, the sweep of each.
# The recording's GFLOP/s is held to the workload's own figure: the same
# FLOPs over the thread CPU time of its bursts (torch_shapes.py --cpu-times,
# time.thread_time_ns around each burst). That figure includes the hook's
# Python code around each call and the loop (the report's operator time
# does not), so the report reads above it: 2.7-4.5 % in six quiet runs,
# +7.7 % (mm) and +5.3 % (bmm) in CI's gcc stage. So the report may be up
# to 10 % above it and 3 % below, plus 3 sigma of the operator's sampled
# time (sigma = 1/sqrt(samples); mm: ~1,100 samples, 9 %). This is the
# check of the time attribution: one process, one clock, whatever the host
# does.
# The sweep's figure comes from another process. Both are CPU time, yet CPU
# time per call of the same sgemm_ drifted by a third within minutes on this
# shared 2-CPU VM (measured one after the other: +31 %, then -26 %, then
# -5.6 % for mm in three attempts of one run, bmm moving the same way), hence
# side by side; and side by side, one landing CI saw the sweep's mm slower
# than the recording's in three attempts running (+44, +22, +48 %) while
# bmm's agreed: the two vCPUs are not equally fast at one moment (another
# landing CI, on a Firecracker VM: the sweep at 3.2-3.35 GFLOP/s in one
# attempt after another, the recording at 4.7-5.9 beside it, both alike
# by wall and by CPU time; alone, either vCPU ran this mm at 6.2-6.3). So
# the attempts run pinned to one CPU, as the two recordings above. The
# sweep is judged within 20 %, measured again up to 3 times; when every
# attempt missed by less than a factor of 1.6 (a wrong FLOP formula is a
# factor of 2 or more, and test_sweep.sh holds the sweep to a direct timing)
# and the recording matched its own process's CPU time in each, it is a
# note, not a failure. Exit status: 0 both hold, 2 the sweep missed within
# that factor, 1 otherwise.
sweeps() {
    for op in mm:$MKN bmm:$BMKN; do
        name=${op%%:*} shape=${op#*:}
        limited "$OPPROF" sweep --python "$PYTHON" --op "torch.$name" --shapes "$shape" --min-time 1 --warmup 3 \
            -o "$WORK/sweep_$name" --format json >"$WORK/sweep_$name.json" 2>"$WORK/sweep_$name.err" || return 1
    done
}
gflops_attempt() {
    rm -rf "$WORK/gflops" "$WORK/sweep_mm" "$WORK/sweep_bmm" "$WORK/gflops_cpu.json"
    # The sweeps run while the recording does, so that both see the machine
    # in the same state (the recording's loop spans both sweeps' timed
    # calls); one sweep at a time, so each is one process beside one.
    log "+ opprof sweep --op torch.mm --shapes $MKN, then torch.bmm $BMKN (--min-time 1), beside:"
    sweeps &
    sweeps_pid=$!
    record "$WORK/gflops" --torch-shapes -- "$PYTHON" "$WORKLOAD" --iters $((ITERS * 2)) --ops mm,bmm \
        --cpu-times "$WORK/gflops_cpu.json"
    wait "$sweeps_pid" || { show stderr "$WORK/sweep_mm.err" 8; show stderr "$WORK/sweep_bmm.err" 8; return 1; }
    [ "$RECORD_STATUS" -eq 0 ] || die "the mm/bmm workload failed under --torch-shapes (exit $RECORD_STATUS)"
    report_json "$WORK/gflops" "$WORK/gflops.json" --torch-shapes || die "opprof report --torch-shapes failed"
    for name in mm bmm; do
        report_json "$(ls -d "$WORK/sweep_$name"/000-*/ | head -n 1)" "$WORK/sweep_${name}_ops.json" --group-by op ||
            return 1
    done
    pycheck_soft - "$WORK" <<'PY'
import math
work = sys.argv[1]
load = lambda name: json.load(open("%s/%s" % (work, name)))  # raises: an attempt missed
gops = {o["name"]: o for o in load("gflops.json")["torch_shapes"]["operators"]}
own = load("gflops_cpu.json")
own_ok, sweep_near, sweep_ok = True, True, True
for name in ("mm", "bmm"):
    op = gops.get("aten::" + name, {})
    mine, cpu_ns = op.get("gflop_per_s"), own.get(name, {}).get("cpu_ns")
    if not mine or not cpu_ns or op.get("calls") != own[name]["calls"]:
        fail("aten::%s: no GFLOP/s, or calls %r against the workload's %r" % (name, op.get("calls"), own.get(name)))
        own_ok = False
        continue
    truth = op["flops"] / cpu_ns
    sigma3 = 3 / math.sqrt(max(op["time_s"] * 1000, 1))
    dev = mine / truth - 1
    msg = ("aten::%s %.2f GFLOP/s on its sampled CPU time, %.2f on the workload's own thread CPU time of its "
           "bursts (%+.1f %%, tolerance -%.1f / +%.1f %%)" % (name, mine, truth, 100 * dev, 100 * (0.03 + sigma3),
                                                            100 * (0.10 + sigma3)))
    if -(0.03 + sigma3) <= dev <= 0.10 + sigma3:
        ok(msg)
    else:
        print("FAIL: " + msg)
        own_ok = False
# GFLOP/s against opprof sweep (see the top comment for why CPU time): the
# sweep's row made warm-up + timed calls of one shape, each of the FLOPs the
# sweep's formula gives (its GFLOP/s x median time).
for name in ("mm", "bmm"):
    try:
        row = load("sweep_%s.json" % name)["rows"][0]
        row_ops = {r["name"]: r for r in load("sweep_%s_ops.json" % name)["rows"]}
    except Exception as e:
        fail("sweep %s: no row (%s)" % (name, e))
        sweep_near = sweep_ok = False
        continue
    mine = gops.get("aten::" + name, {}).get("gflop_per_s")
    op_ns = row_ops.get("aten::" + name, {}).get("total_ns")
    if not row.get("ok") or not row.get("gflops") or not mine or not op_ns:
        fail("sweep %s: no GFLOP/s to compare (%s; report %r)" % (name, row.get("reason"), mine))
        sweep_near = sweep_ok = False
        continue
    flops_per_call = row["gflops"] * 1e9 * row["median_s"]
    sweep_cpu = flops_per_call * (row["calls"] + 3) / (op_ns / 1e9) / 1e9
    dev = mine / sweep_cpu - 1
    msg = ("aten::%s %.2f GFLOP/s, opprof sweep %.2f GFLOP/s on its sampled CPU time (%+.1f %%; %.2f on its "
           "median wall time per call)" % (name, mine, sweep_cpu, 100 * dev, row["gflops"]))
    if abs(dev) <= 0.20:
        ok(msg)
    else:
        fail(msg + ": beyond 20 %")
        sweep_ok = False
        sweep_near = sweep_near and 1 / 1.6 <= mine / sweep_cpu <= 1.6
sys.exit(0 if own_ok and sweep_ok else 2 if own_ok and sweep_near else 1)
PY
}
gflops_ok=0
gflops_near=0
for attempt in 1 2 3; do
    gflops_attempt
    _rc=$?
    if [ "$_rc" = 0 ]; then
        gflops_ok=1
        break
    fi
    [ "$_rc" = 2 ] && gflops_near=$((gflops_near + 1))
    log "(attempt $attempt missed; load average: $(cut -d' ' -f1-3 /proc/loadavg))"
done
[ -z "$PIN_MASK" ] || taskset -p "$PIN_MASK" $$ >/dev/null || die "taskset could not restore the test's CPU mask $PIN_MASK"
if [ "$gflops_ok" = 1 ]; then
    pass "GFLOP/s of aten::mm/aten::bmm: the workload's own CPU time and opprof sweep's agree with the report"
elif [ "$gflops_near" = 3 ]; then
    log "note: in 3 attempts opprof sweep's mm/bmm ran at another speed than the recording's, within a factor of 1.6, while the recording matched its own process's CPU time each time: the host, not a measurement"
else
    fail "GFLOP/s of aten::mm/aten::bmm: the report missed the workload's own CPU time, or opprof sweep's by more than 20 % (a factor of 1.6 in some attempt), in 3 attempts"
fi

pycheck - "$WORK" <<'EOF'
work = sys.argv[1]
load = lambda name: json.load(open("%s/%s" % (work, name)))
truth, shapes = load("shapes_truth.json"), load("shapes.json")["torch_shapes"]
M, K, N, B, R, C, burst = (truth[k] for k in ("M", "K", "N", "BATCH", "ROWS", "COLS", "BURST"))
iters = int(__import__("os").environ.get("ITERS_FOR_CHECK", "0")) or None
ops = {o["name"]: o for o in shapes["operators"]}
calls = ops.get("aten::mm", {}).get("calls", 0)
# Expected figures, from the shapes and counts alone (float32: 4 bytes).
expected = {
    "aten::mm": (calls, 2.0 * M * K * N * calls),
    "aten::bmm": (calls, 2.0 * B * M * K * N * calls),
    # addmm(C[M,N], A, B) and linear(x, W, b) -> addmm(b[N], x, W^T): both
    # 2MKN multiply-adds plus the MN additions
    "aten::addmm": (2 * calls, (2.0 * M * K * N + M * N) * 2 * calls),
    "aten::native_layer_norm": (calls, 8.0 * R * C * calls),
    "aten::_softmax": (calls, 5.0 * R * C * calls),
}
if calls == 0 or calls % burst:
    fail("aten::mm calls %d: not a whole number of bursts of %d" % (calls, burst))
for name, (n, flops) in expected.items():
    o = ops.get(name)
    if not o:
        fail("%s missing from report --torch-shapes" % name)
        continue
    if o["calls"] != n:
        fail("%s: %d calls, expected %d" % (name, o["calls"], n))
    elif o["flops"] != flops:
        fail("%s: %r FLOPs, expected exactly %r" % (name, o["flops"], flops))
    else:
        ok("%s: %d calls, %.0f FLOPs = the formula exactly; %.2f GFLOP/s, %.2f FLOP/byte" %
           (name, n, flops, o["gflop_per_s"] or 0, o["flop_per_byte"] or 0))
mm_bytes = 4.0 * (M * K + K * N + M * N) * calls
if ops.get("aten::mm", {}).get("bytes") != mm_bytes:
    fail("aten::mm bytes %r, expected %r" % (ops.get("aten::mm", {}).get("bytes"), mm_bytes))
else:
    ok("aten::mm bytes touched %.0f = 4 (MK + KN + MN) per call" % mm_bytes)

# Hook row and operator shares.
def table(name):
    return {r["name"]: r for r in load(name)["rows"]}
hooked, plain = table("ops_hooked.json"), table("ops_plain.json")
hook = hooked.get("[opprof --torch-shapes hook]")
if not hook or hook["self_pct"] <= 0:
    fail("the --group-by op table has no '[opprof --torch-shapes hook]' row")
else:
    ok("hook row: %.2f %% of samples (%s); report --torch-shapes: %.3f s sampled, %.3f s timed by the hook" %
       (hook["self_pct"], hook.get("samples"), shapes["hook"]["self_s"], shapes["hook"]["timed_s"]))
def shares(t):
    ops_only = {k: v["self_pct"] for k, v in t.items() if k.startswith("aten::")}
    total = sum(ops_only.values())
    return {k: 100 * v / total for k, v in ops_only.items()}
import math
def op_samples(t):
    return sum(v.get("samples", 0) for k, v in t.items() if k.startswith("aten::"))
sh, sp = shares(hooked), shares(plain)
nh, np_ = max(op_samples(hooked), 1), max(op_samples(plain), 1)
for name in expected:
    a, b = sh.get(name, 0), sp.get(name, 0)
    # 4 sigma of the two runs' sampling error (binomial, these sample counts)
    # + 0.5 pp for the hook's own effect on per-call time; at least 3 pp.
    sigma = 100 * math.sqrt((a / 100) * (1 - a / 100) / nh + (b / 100) * (1 - b / 100) / np_)
    tol = max(3.0, 4 * sigma + 0.5)
    msg = "%s self share of operator time: %.2f %% with the hook, %.2f %% without (%+.2f pp, tolerance %.2f pp)" % (
        name, a, b, a - b, tol)
    (ok if abs(a - b) <= tol else fail)(msg)
EOF

# The text section, as users see it.
"$OPPROF" report "$WORK/hooked" --torch-shapes | sed 's/^/  /'
finish
