#!/bin/sh
# test_torch_threads.sh — PyTorch (Debian's python3-torch, GNU libgomp) running
# layer_norm in a loop for ~3 s, twice: with OMP_NUM_THREADS=8 (at least 4x
# the CPUs) and with OMP_NUM_THREADS=2. Recorded with record's default: torch
# keeps its GNU libgomp (the program's maps list the same runtime with and
# without opprof), and the regions come from the agent's interposed
# GOMP_parallel (agent_gomp.c).
#   - at 8 the Threading section flags oversubscription and names
#     aten::native_layer_norm, called from the script's line, as the operator
#     whose regions were oversubscribed, and the finding says the fix; at 2
#     on a machine with 2 or more CPUs it flags none;
#   - each worker sample in a region is charged to the opener's context
#     exactly (the context of its own region, not the nearest in time) for at
#     least 95 % of them: every region carries its opener's context, most of
#     them found unchanged without a walk (agent_ompt.c), at both counts.
. "$(dirname "$0")/lib.sh"
require_python3
require_opprof
PY=/usr/bin/python3
[ -x "$PY" ] && "$PY" -c 'import torch' 2>/dev/null || skip "$PY cannot import torch (install python3-torch)"
make_workdir
CPUS=$(nproc)
MANY=$((CPUS * 4))
[ "$MANY" -lt 8 ] && MANY=8
cat >"$WORK/ln.py" <<PY
import time, torch
x = torch.randn(256, 4096)
w, b = torch.randn(4096), torch.randn(4096)
t0 = time.time()
while time.time() - t0 < $SECONDS_OF_WORK:
    y = torch.nn.functional.layer_norm(x, (4096,), w, b)
print("threads", torch.get_num_threads())
import sys
for l in open("/proc/self/maps"):
    if " r-xp " in l and ("libgomp" in l or "libomp" in l or "libiomp" in l):
        print("omp-runtime-map:", l.split()[-1], file=sys.stderr)
PY
for THREADS in $MANY 2; do
    log "== OMP_NUM_THREADS=$THREADS on $CPUS CPUs"
    OMP_NUM_THREADS=$THREADS "$PY" "$WORK/ln.py" 2>&1 >/dev/null | grep '^omp-runtime-map:' | sort >"$WORK/maps.bare"
    OMP_NUM_THREADS=$THREADS record "$WORK/res$THREADS" -- "$PY" "$WORK/ln.py"
    [ "$RECORD_STATUS" -eq 0 ] || die "record exited $RECORD_STATUS"
    grep '^omp-runtime-map:' "$RECORD_ERR" | sort >"$WORK/maps.rec"
    cmp -s "$WORK/maps.bare" "$WORK/maps.rec" && [ -s "$WORK/maps.bare" ] ||
        fail "OpenMP runtime differs under opprof: bare [$(cat "$WORK/maps.bare")] recorded [$(cat "$WORK/maps.rec")]"
    grep -q 'OpenMP runtime swapped' "$RECORD_ERR" && fail "record swapped the runtime by default"
    report_json "$WORK/res$THREADS" "$WORK/thr$THREADS.json" --threading || die "opprof report --threading failed"
    "$OPPROF" report "$WORK/res$THREADS" --threading | sed 's/^/  /'
    pycheck '
d = load(sys.argv[1]).get("threading", {})
threads, cpus = int(sys.argv[2]), int(sys.argv[3])
many = threads >= 4 * cpus
if many and not d.get("oversubscribed"):
    fail("oversubscription not flagged at %d threads on %d CPUs (runnable %.2f on %.3g CPUs, wait %.1f%%)" % (
        threads, cpus, d.get("runnable_avg", 0), d.get("usable_cpus", 0), 100 * d.get("wait_share", 0)))
if threads <= cpus and d.get("oversubscribed"):
    fail("oversubscription flagged at %d threads on %d CPUs" % (threads, cpus))
ops = d.get("operators", [])
if not ops or "layer_norm" not in ops[0]["name"]:
    fail("top operator in OpenMP regions is not layer_norm: %r" % ops[:3])
else:
    ok("top operator in regions: %s from %s (%d samples, %d oversubscribed)" % (
        ops[0]["name"], ops[0]["python"], ops[0]["samples"], ops[0]["oversubscribed_samples"]))
    if not ops[0]["python"].startswith("ln.py:"):
        fail("operator not charged to the script line (python=%r)" % ops[0]["python"])
f = " ".join(d.get("findings", []))
if many and ("layer_norm" not in f or "torch.set_num_threads" not in f):
    fail("finding does not name the operator and the fix: %r" % f)
ex, near, un = d.get("attributed_exact", 0), d.get("attributed_near", 0), d.get("unattributed", 0)
n = ex + near + un
if not d.get("has_ompt"):
    fail("no OpenMP regions from the libgomp of torch (view: %s)" % d.get("view"))
elif n == 0:
    fail("no worker sample in a region was charged to the opener")
elif ex < 0.95 * n:
    fail("%d of %d worker samples in regions charged to their own region opener context (< 95 %%)" % (ex, n))
else:
    ok("%d of %d worker samples charged exactly; %d contexts for %d regions, %d found unchanged (no walk)" % (
        ex, n, d.get("contexts", 0), d.get("regions", 0), d.get("contexts_repeated", 0)))
if d.get("contexts", 0) < d.get("regions", 0) * 0.99:
    fail("%d opener contexts for %d regions: some regions carry none" % (d.get("contexts", 0), d.get("regions", 0)))
' "$WORK/thr$THREADS.json" "$THREADS" "$CPUS"
done
finish
