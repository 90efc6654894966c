#!/usr/bin/env bash
# tests/integration/test_torch_ops.sh — PyTorch operators by self time,
# checked against torch.profiler on the same run, and the Python line that
# calls bmm.
#
# One run of tests/workloads/torch_train.py under `opprof record`, with
# torch.profiler active around its training loop (--torch-profiler writes
# key_averages() to JSON). For every operator above 5 % of torch.profiler's
# self CPU time, opprof's total share (the operator and the operators it
# calls, of samples that are inside an operator) must be within 3 percentage
# points of torch.profiler's, and so must its self share where the operators
# it calls hold under 1 point (see below why not otherwise). Every
# `torch.bmm(` line of the workload must show as a Python caller of aten::bmm.
. "$(dirname "$0")/lib.sh"

PYTHON=${OPPROF_TEST_PYTHON:-/usr/bin/python3}
TORCH_TOL_PP=${OPPROF_TEST_TORCH_TOL_PP:-3}
WORKLOAD="$OPPROF_SRCDIR/tests/workloads/torch_train.py"

require_python3
require_opprof
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
    # In CI, torch is installed by scripts/test.sh: its absence is a failure.
    [ "${CI:-}" = true ] && die "$PYTHON cannot import torch (python3-torch should be installed)"
    skip "$PYTHON cannot import torch (apt-get install python3-torch)"
fi
make_workdir

# torch.profiler's self CPU is the calling thread's wall time inside each op,
# opprof's is CPU time: on an idle machine they agree, on a busy one the
# thread's runqueue waits fall unevenly on the ops that happen to be running.
# So a miss is measured again with the load average printed, as the other
# timing tests do; a real attribution error misses on every attempt. Three
# attempts, not two: on a busy machine the 6 s hold half the ~5,900 operator
# samples of an idle one (2,800-2,950), which widens each share's spread (a
# busy CI run missed once by 4.0 pp, at 2,809). A fixed number of steps
# instead keeps the samples but not the time: torch.profiler's key_averages()
# after 120 steps cost ~36 s of CPU beside a busy CI, whose ASan stage then hit
# the 60 s limit.
# In a sanitizer build the preloaded agent brings libasan, whose malloc then
# serves the whole Python process: key_averages() after the 6 s took the
# recording to 45 s of the 60 s limit on a quiet machine, and past it beside
# two busy loops (37,872 samples taken, not a hang; 2026-12-02). There this
# one recording gets three times the limit: a hang still ends in it.
RECORD_LIMIT=$TIME_LIMIT
case "$("$OPPROF_BUILDDIR/config.status" --config 2>/dev/null)" in
*enable-sanitizers*) RECORD_LIMIT=$((TIME_LIMIT * 3)) ;;
esac
compare_with_torch_profiler() {
    rm -rf "$WORK/res"
    TIME_LIMIT=$RECORD_LIMIT record "$WORK/res" -- "$PYTHON" "$WORKLOAD" --seconds "${OPPROF_TEST_TORCH_SECONDS:-6}" \
        --torch-profiler "$WORK/torch_profiler.json"
    [ "$RECORD_STATUS" -eq 0 ] || die "the PyTorch workload failed under opprof record (exit $RECORD_STATUS)"
    report_json "$WORK/res" "$WORK/ops.json" --group-by op || die "opprof report --group-by op failed"
    bmm_lines=$(grep -n "torch.bmm(" "$WORKLOAD" | cut -d: -f1 | tr '\n' ' ')
    report_json "$WORK/res" "$WORK/bmm_callers.json" --callers aten::bmm || fail "opprof report --callers aten::bmm failed"
    python3 - "$WORK/ops.json" "$WORK/torch_profiler.json" "$TORCH_TOL_PP" "$WORK/bmm_callers.json" "$bmm_lines" <<'EOF'
import json, sys
ops = json.load(open(sys.argv[1]))
tp = json.load(open(sys.argv[2]))
tol = float(sys.argv[3])
failures = 0

def norm(name):
    return name[len("aten::"):] if name.startswith("aten::") else name

# opprof: self and total weight per operator, over samples that are inside
# an operator (torch.profiler only sees time inside operators).
rows = [r for r in ops["rows"] if not r["name"].startswith("[")]
op_total = sum(r["self_ns"] for r in rows)
ours = {norm(r["name"]): (100.0 * r["self_ns"] / op_total, 100.0 * r["total_ns"] / op_total)
        for r in rows} if op_total else {}

# torch.profiler: self and total CPU per aten:: event over the sum of all
# self CPU time.
events = tp["ops"]
tp_total = sum(v["self_cpu_us"] for v in events.values())
theirs = {}
for key, v in events.items():
    if key.startswith("aten::"):
        theirs[norm(key)] = (100.0 * v["self_cpu_us"] / tp_total, 100.0 * v["cpu_total_us"] / tp_total)
print("steps under torch.profiler: %d; opprof operator samples: %.0f ms" % (tp["steps"], op_total / 1e6))
print("%-22s %8s %8s %7s   %8s %8s %7s" % ("operator", "self", "torch", "diff", "total", "torch", "diff"))
checked = 0
for name, (share, tshare) in sorted(theirs.items(), key=lambda kv: -kv[1][0]):
    mine, tmine = ours.get(name, (0.0, 0.0))
    diff, tdiff = mine - share, tmine - tshare
    line = "%-22s %7.2f%% %7.2f%% %+6.2f   %7.2f%% %7.2f%% %+6.2f" % ("aten::" + name, mine, share, diff, tmine, tshare, tdiff)
    if share < 5.0:
        # Shown for the record, not checked: torch.profiler's own cost (a few
        # us per call, counted as the op's self time) is a large part of a
        # small op's figure.
        if share >= 1.0:
            print(line + "  (not checked: < 5 %)")
        continue
    # The self shares part where an operator calls many small ones: aten::bmm
    # on these shapes calls aten::select 96 times a call (one per batch
    # matrix, ~300 aten:: calls in all). torch.profiler times a call between
    # its own two timestamps and counts the dispatch around them (and its
    # own recording of each call) as the caller's self time; opprof's samples
    # there are in the callee's frames. Measured (2026-12-01): aten::bmm self
    # 8.09 % against 10.15 %, total 10.38 % against 10.35 %; the ops it calls
    # held 2.3 points in opprof and 0.2 in torch.profiler. So the total is
    # compared for every operator, the self share only where the operators
    # it calls hold under 1 point in opprof.
    self_checked = tmine - mine < 1.0
    if not self_checked:
        line += "  (self not checked: its callees hold %.1f pp)" % (tmine - mine)
    print(line)
    checked += 1
    for what, d in (("total", tdiff), ("self", diff if self_checked else 0.0)):
        if abs(d) > tol:
            print("FAIL: aten::%s: opprof's %s share differs from torch.profiler's by %+.2f pp (more than %.1f)"
                  % (name, what, d, tol))
            failures += 1
if checked == 0:
    print("FAIL: torch.profiler reported no operator above 5 %: nothing was compared")
    failures += 1

# The Python lines that call bmm: each `torch.bmm(` line of the script must be
# a caller, and (callers being the innermost Python frame outside the torch
# package) the script's own lines must account for nearly all of bmm's time:
# forward from the bmm lines, backward from the loss.backward() line.
try:
    callers = json.load(open(sys.argv[4]))
    crow = [r for r in callers["rows"] if r.get("name")]
    print("callers of aten::bmm:", [(r.get("source") or r["name"], round(r["total_pct"], 2)) for r in crow[:6]])
    def line_of(r):
        src = r.get("source") or r["name"]
        return src.rsplit(":", 1)[-1] if src.endswith(tuple("0123456789")) else ""
    ours_rows = [r for r in crow if (r.get("source") or r["name"]).split(":")[0].endswith("torch_train.py")]
    for ln in sys.argv[5].split():
        hit = [r for r in ours_rows if line_of(r) == ln]
        if hit and hit[0]["total_pct"] > 0:
            print("ok: torch_train.py:%s (a torch.bmm call) calls aten::bmm: %.2f %% of all samples" % (ln, hit[0]["total_pct"]))
        else:
            print("FAIL: torch_train.py:%s calls torch.bmm but is not among the callers of aten::bmm" % ln)
            failures += 1
    all_w = sum(r["total_ns"] for r in crow)
    our_w = sum(r["total_ns"] for r in ours_rows)
    share = 100.0 * our_w / all_w if all_w else 0.0
    print("%.1f %% of aten::bmm time is attributed to lines of torch_train.py (expected >= 90 %%)" % share)
    if share < 90.0:
        print("FAIL: callers of aten::bmm point outside the user's script")
        failures += 1
except Exception as e:
    print("FAIL: cannot read the callers of aten::bmm: %s" % e)
    failures += 1
sys.exit(1 if failures else 0)
EOF
}

for attempt in 1 2 3; do
    compare_with_torch_profiler && break
    if [ "$attempt" -lt 3 ]; then
        log "note: outside the tolerance on attempt $attempt (load average: $(cut -d' ' -f1-3 /proc/loadavg)); measuring again"
    else
        fail "operator shares or bmm caller differ on all three attempts (see above)"
    fi
done

# --group-by kernel lists compute kernels only: libc, the loader, the
# interpreter, start-up and PyTorch's dispatch are rows of their own kind
# ("[not a kernel: ...]"), never a kernel named __libc_start_call_main or brk.
report_json "$WORK/res" "$WORK/kernels.json" --group-by kernel || fail "opprof report --group-by kernel failed"
python3 - "$WORK/kernels.json" "$WORK/ops.json" <<'EOF' || fail "--group-by kernel lists something that is not a compute kernel"
import json, os, sys
d = json.load(open(sys.argv[1]))
rows, bad = d["rows"], 0
total = sum(r["self_ns"] for r in rows)
want = d["total_weight"] * d["period_ns"]
if total != want:
    print("FAIL: kernel rows add up to %d ns, the profile to %d ns" % (total, want)); bad += 1
not_kernel = ("libc.so", "libc-", "ld-linux", "python", "libpython", "libstdc++", "libgcc_s", "libtorch_python")
for r in rows:
    if r["name"].startswith("["):
        continue
    m = os.path.basename(r["module"] or "")
    if m.startswith(not_kernel) or r["name"].startswith(("c10::", "at::_ops::", "torch::autograd::")):
        print("FAIL: %s (%s, %.2f %%) is listed as a compute kernel" % (r["name"], m, r["self_pct"])); bad += 1
ops = {}
for r in rows:
    if not r["name"].startswith("[") and (r.get("operator") or "").startswith("aten::"):
        ops[r["operator"]] = ops.get(r["operator"], 0) + r["self_pct"]
mm = ops.get("aten::mm", 0) + ops.get("aten::addmm", 0) + ops.get("aten::bmm", 0)
print("kernel rows: %d; under aten::mm/addmm/bmm %.1f %%; elsewhere rows: %s" % (len(rows), mm,
      ", ".join("%s %.1f %%" % (r["name"], r["self_pct"]) for r in rows if r["name"].startswith("[not a kernel"))))
# Most of the matmul operators' own time is their BLAS kernel: at least half
# (in round 1's runs, 85-95 %; the rest is dispatch and tensor set-up).
op_self = sum(r["self_pct"] for r in json.load(open(sys.argv[2]))["rows"]
              if r["name"] in ("aten::mm", "aten::addmm", "aten::bmm"))
print("aten::mm/addmm/bmm self time in the operator view: %.1f %%" % op_self)
if mm < 0.5 * op_self:
    print("FAIL: kernels under aten::mm/addmm/bmm hold %.1f %%, under half of the operators' %.1f %%" % (mm, op_self)); bad += 1
sys.exit(1 if bad else 0)
EOF

# export --fold-startup: every stack that enters the import machinery or the
# loader's library init ends in one "[start-up: ...]" box; those boxes hold
# exactly the samples of such stacks (counted here from the folded export),
# no importlib frame is drawn, and the graph's total is unchanged (every box
# drawn: --minwidth near 0).
if limited "$OPPROF" export "$WORK/res" --folded "$WORK/res.folded" --flamegraph "$WORK/fold.svg" --fold-startup --minwidth 0.00001 \
    2>"$WORK/fold.err"; then
    python3 - "$WORK/res.folded" "$WORK/fold.svg" <<'EOF' || fail "--fold-startup flame graph"
import re, sys
total = startup = 0
for line in open(sys.argv[1]):
    stack, n = line.rsplit(" ", 1)
    n = int(n)
    total += n
    frames = stack.split(";")
    # the product's rule (analyze/phases.c): importlib._bootstrap frames
    # (not importlib.util), and the loader's library init
    if any("importlib._bootstrap" in f or f in ("_dl_init", "call_init") for f in frames):
        startup += n
svg = open(sys.argv[2]).read()
boxes = re.findall(r"<title>([^\n<]*)\n(\d+) samples", svg)
folded_boxes = sum(int(n) for name, n in boxes if name.startswith("[start-up"))
drawn_total = int(re.search(r'data-total="(\d+)"', svg).group(1))
bad = 0
print("start-up: %d of %d samples by the folded stacks, %d in the [start-up] boxes" % (startup, total, folded_boxes))
if folded_boxes != startup or drawn_total != total:
    print("FAIL: start-up boxes %d (want %d), graph total %d (want %d)" % (folded_boxes, startup, drawn_total, total)); bad += 1
# `import torch` costs 0.8-1.0 s of CPU on the 2-core VM (806-983 samples
# at 1 kHz measured): 300 leaves room for a faster machine, not for none.
if startup < 300:
    print("FAIL: only %d of %d samples in start-up: import torch alone is more" % (startup, total)); bad += 1
if any("importlib" in name for name, n in boxes):
    print("FAIL: importlib frames are still drawn"); bad += 1
sys.exit(1 if bad else 0)
EOF
else
    fail "opprof export --fold-startup failed: $(cat "$WORK/fold.err")"
fi
finish
