#!/usr/bin/env bash
# tests/integration/test_ranks_torch.sh — a torch.distributed job (gloo, CPU,
# 2 ranks on this machine; tests/workloads/ddp_allreduce.py): every step each
# rank runs compute_step (matrix products), then all_reduce; rank 1 does 3x
# the products. Launched two ways: torchrun running one `opprof record -o
# prof.%r` per rank, and one `opprof record` around torch.multiprocessing.
# Ground truth: rank 1 is the slowest, because of an operator called from
# compute_step with ~3x the time it takes on rank 0; rank 0 waits in all_reduce
# (gloo blocks: off-CPU time), as long as the workload itself measured with
# perf_counter around dist.all_reduce, and much longer than rank 1 waits.
. "$(dirname "$0")/lib.sh"
PYTHON=${OPPROF_TEST_PYTHON:-/usr/bin/python3}
require_python3
require_opprof
"$PYTHON" -c 'import torch.distributed as d; assert d.is_available() and d.is_gloo_available()' 2>/dev/null \
    || skip "$PYTHON cannot import torch.distributed with gloo (install python3-torch: scripts/deps.sh)"
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null \
    || skip "$PYTHON is not CPython 3.11 (the version whose frames opprof reads)"
make_workdir
WORKLOAD="$OPPROF_SRCDIR/tests/workloads/ddp_allreduce.py"
# Enough steps that rank 1's extra products (about 0.03 s per step) outweigh
# the spread of each rank's start-up (importing torch: ~2 s of CPU, user and
# kernel, varying by ±0.2 s between ranks): with 20 steps the rank that
# imported slower was named slowest in 2 of 3 runs.
STEPS=${OPPROF_TEST_TORCH_STEPS:-60}
free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# torchrun's flag for a non-Python entry point: --no-python (torch >= 2) or --no_python (1.13).
NO_PYTHON=--no_python
"$PYTHON" -m torch.distributed.run --help 2>/dev/null | grep -q -- '--no-python' && NO_PYTHON=--no-python
# Debian's torch 1.13 on Python 3.11: the default --redirects/--tee value "0"
# parses to None (IntFlag iteration changed) and torchrun crashes; 1 works.
REDIRECT=()
"$PYTHON" -c 'import sys; from torch.distributed.elastic.multiprocessing.api import Std; sys.exit(Std.from_str("0") is None)' 2>/dev/null \
    || REDIRECT=(--redirects 1 --tee 1)

check() { # check JSON WORKLOAD_STDOUT WHAT
pycheck '
doc = load(sys.argv[1])["ranks"]
what = sys.argv[3]
truth = {}
# The ranks print at the same time: their lines can run together.
for m in re.finditer(r"rank (\d+) of \d+: \d+ steps x \d+ products, [0-9.]+ s wall, ([0-9.]+) s in all_reduce",
                     open(sys.argv[2]).read()):
    if m:
        truth[int(m.group(1))] = float(m.group(2))
rows = {r["rank"]: r for r in doc["rows"]}
print("%s:" % what)
print("  %-5s %7s %8s %10s %16s %10s  %s" % ("rank", "CPU s", "compute", "comm wait", "truth all_reduce", "other wait", "top"))
for r in doc["rows"]:
    print("  %-5s %7.2f %8.2f %10.2f %16.2f %10.2f  %s (%.1f %%)" % (r["rank"], r["cpu_s"], r["compute_s"],
          r["comm_wait_s"] or 0, truth.get(r["rank"], float("nan")), r["other_wait_s"] or 0, r["top"], 100 * r["top_share"]))
s = doc["slowest"]
if s:
    print("  slowest: %s because of %s (%s): %.2f s vs %.2f s elsewhere" % (s["label"], s["because"], s["python"],
          s["because_s"], s["median_because_s"]))
if sorted(k for k in rows if k is not None) != [0, 1]:
    fail("%s: ranks %s, expected 0 and 1" % (what, sorted(rows)))
    sys.exit(1)
if not doc["offcpu_recorded"]:
    fail("%s: no off-CPU records: gloo waits are invisible" % what)
if not s or s["label"] != "rank 1":
    fail("%s: slowest is %s, expected rank 1" % (what, s and s["label"]))
elif not s["because"].startswith("aten::") or "ddp_allreduce.py" not in s["python"]:
    fail("%s: blamed on %s from %s, expected an operator called from ddp_allreduce.py compute_step" % (what, s["because"], s["python"]))
# 3x the products is 3x the work, but not quite 3x the CPU time on this
# 2-vCPU VM: the products of rank 0 run while rank 1 computes too (shared core and
# caches: slower per product), two thirds of those of rank 1 while rank 0 waits.
# Measured 1.7x-3.0x; below 1.5x the excess would no longer stand out.
elif s["median_because_s"] <= 0 or not 1.5 <= s["because_s"] / s["median_because_s"] <= 4.5:
    fail("%s: %s takes %.2f s on rank 1 vs %.2f s: expected about 3x" % (what, s["because"], s["because_s"], s["median_because_s"]))
w0, w1 = rows[0]["comm_wait_s"] or 0, rows[1]["comm_wait_s"] or 0
if w0 < 3 * w1 or w0 < 0.1:
    fail("%s: rank 0 all_reduce wait %.2f s vs rank 1 %.2f s: expected rank 0 >> rank 1" % (what, w0, w1))
if 0 in truth and not 0.6 * truth[0] <= w0 <= 1.25 * truth[0] + 0.05:
    fail("%s: rank 0 comm wait %.2f s, the workload measured %.2f s in all_reduce (expected 0.6x..1.25x)" % (what, w0, truth[0]))
sys.exit(failures)
' "$@"
}

# Both cases run twice at most: rank 1 is slowest by its CPU time outside
# communication, and on these shared 2-vCPU VMs a busy host can inflate one
# rank's CPU time (CI once measured rank 0 at 4.07 s against 2.5 s idle, with
# every product 1.7x slower: rank 0 was named slowest). A second attempt is
# printed with the load average; a real attribution bug fails both.

# 1. torchrun, one opprof per rank.
torchrun_case() {
    # free_port's port is free when it answers, not necessarily when torchrun
    # binds it (another process may take it between): such a launch is
    # started again on another port, at most twice.
    for launch in 1 2 3; do
        rm -rf prof.0 prof.1
        PORT=$(free_port)
        log "+ torchrun --nproc_per_node 2 --master_port $PORT ${REDIRECT[*]} $NO_PYTHON opprof record -q -o prof.%r -- $PYTHON ddp_allreduce.py --steps $STEPS"
        OMP_NUM_THREADS=1 limited "$PYTHON" -m torch.distributed.run --nproc_per_node 2 --master_addr 127.0.0.1 \
            --master_port "$PORT" "${REDIRECT[@]}" "$NO_PYTHON" "$OPPROF" record -q -o "$WORK/prof.%r" -- \
            "$PYTHON" "$WORKLOAD" --steps "$STEPS" >torchrun.out 2>torchrun.err
        st=$?
        if [ "$st" -ne 0 ] && [ "$launch" -lt 3 ] && grep -qiE 'address already in use|EADDRINUSE' torchrun.err; then
            log "note: port $PORT was taken before torchrun bound it (launch $launch); another port"
            continue
        fi
        break
    done
    show out torchrun.out 4
    [ "$st" -eq 0 ] || { show err torchrun.err 12; die "torchrun of opprof record exited $st"; }
    for r in 0 1; do
        [ -d "prof.$r" ] || die "no result directory prof.$r (the -o %r pattern did not expand per rank)"
    done
    pass "one result per rank: prof.0 prof.1"
    limited "$OPPROF" report prof.0 prof.1 --limit 5 >report.txt 2>report.err || die "opprof report prof.0 prof.1 failed"
    sed -n '/^Ranks/,$p' report.txt
    _ok=0
    grep -Eq '^  rank 0 ' report.txt && grep -Eq '^  rank 1 .*<- slowest' report.txt \
        || { fail "the merged text report does not list rank 0 and rank 1 (slowest)"; _ok=1; }
    report_json prof.0 torchrun.json prof.1 --ranks || die "opprof report prof.0 prof.1 --ranks failed"
    check torchrun.json torchrun.out "torchrun, opprof record -o prof.%r per rank" || { FAILURES=$((FAILURES + 1)); _ok=1; }
    return $_ok
}

# 2. One opprof record around torch.multiprocessing (the workers set RANK).
spawn_case() {
    rm -rf one
    log "+ opprof record -q -o one -- $PYTHON ddp_allreduce.py --spawn 2 --steps $STEPS"
    limited "$OPPROF" record -q -o one -- "$PYTHON" "$WORKLOAD" --spawn 2 --steps "$STEPS" >spawn.out 2>spawn.err
    st=$?
    show out spawn.out 4
    [ "$st" -eq 0 ] || { show err spawn.err 12; die "opprof record of the spawned job exited $st"; }
    report_json one spawn.json --ranks || die "opprof report one --ranks failed"
    check spawn.json spawn.out "one opprof record, torch.multiprocessing.spawn" || { FAILURES=$((FAILURES + 1)); return 1; }
    return 0
}

for case in torchrun_case spawn_case; do
    for try in 1 2; do
        saved=$FAILURES
        "$case" && break
        if [ "$try" = 1 ]; then
            log "note: $case outside its bounds on attempt 1 (load average: $(cut -d' ' -f1-3 /proc/loadavg)); measuring again"
            FAILURES=$saved
        fi
    done
done
finish
