#!/usr/bin/env bash
# tests/integration/test_ranks_mpi.sh — one result per rank of an Open MPI job
# and the report over them (tests/workloads/mpi_allreduce.c: every step each
# rank runs spin_compute for a fixed CPU time, rank 1 three times as long, then
# MPI_Allreduce). Ground truth: rank 1's spin_compute is 3x rank 0's, rank 1
# is the slowest and spin_compute is why; Open MPI busy-polls while rank 0
# waits, so a large share of rank 0's CPU time is in MPI frames. The Chrome
# trace puts each rank in a lane named by its rank. Also one
# `opprof record -- mpirun ...` around the whole job must split by rank.
. "$(dirname "$0")/lib.sh"
require_python3
require_opprof
command -v mpicc >/dev/null 2>&1 || skip "mpicc not found (install libopenmpi-dev: scripts/deps.sh)"
command -v mpirun >/dev/null 2>&1 || skip "mpirun not found (install openmpi-bin: scripts/deps.sh)"
make_workdir
STEPS=${OPPROF_TEST_MPI_STEPS:-30}
mpicc -O2 -g -o mpi_allreduce "$OPPROF_SRCDIR/tests/workloads/mpi_allreduce.c" || die "mpicc failed"
MPIRUN=(mpirun -np 2 --oversubscribe)
[ "$(id -u)" -eq 0 ] && MPIRUN+=(--allow-run-as-root)

# 1. One opprof per rank: -o prof.%r
log "+ ${MPIRUN[*]} opprof record -q -o prof.%r -- ./mpi_allreduce $STEPS 10"
limited "${MPIRUN[@]}" "$OPPROF" record -q -o "$WORK/prof.%r" -- ./mpi_allreduce "$STEPS" 10 >run.out 2>run.err
st=$?
show out run.out 4
[ "$st" -eq 0 ] || { show err run.err 10; die "mpirun of opprof record exited $st"; }
for r in 0 1; do
    [ -d "prof.$r" ] || die "no result directory prof.$r (the -o %r pattern did not expand per rank)"
    grep -qx "rank=$r" "prof.$r/info" || fail "prof.$r/info does not say rank=$r"
done
pass "one result per rank: prof.0 prof.1, info rank=0 / rank=1"

limited "$OPPROF" report prof.0 prof.1 --limit 5 >report.txt 2>report.err || die "opprof report prof.0 prof.1 failed"
sed -n '/^Hotspots/,$p' report.txt
grep -q "spin_compute" report.txt || fail "merged hotspot table lacks spin_compute"
grep -Eq '^  rank 1 .*<- slowest' report.txt || fail "text report does not mark rank 1 as slowest"
report_json prof.0 per_rank.json prof.1 --ranks || die "opprof report --ranks --format json failed"

check_ranks() { # check_ranks JSON WHAT
pycheck '
doc = load(sys.argv[1])["ranks"]
what = sys.argv[2]
rows = {r["rank"]: r for r in doc["rows"]}
print("%s:" % what)
print("  %-6s %7s %8s %9s %7s  %s" % ("rank", "CPU s", "compute", "comm CPU", "comm %", "top"))
for r in doc["rows"]:
    print("  %-6s %7.2f %8.2f %9.2f %6.1f%%  %s (%.1f %%)" % (r["rank"], r["cpu_s"], r["compute_s"], r["comm_cpu_s"],
          100 * r["comm_cpu_s"] / max(r["cpu_s"], 1e-9), r["top"], 100 * r["top_share"]))
s = doc["slowest"]
print("  slowest: %s because of %s: %.2f s vs %.2f s elsewhere (expected rank 1, spin_compute, ratio 3)"
      % (s and s["label"], s and s["because"], s and s["because_s"], s and s["median_because_s"]))
if sorted(k for k in rows if k is not None) != [0, 1]:
    fail("%s: ranks %s, expected 0 and 1" % (what, sorted(rows)))
    sys.exit(1)
if not s or s["label"] != "rank 1":
    fail("%s: slowest is %s, expected rank 1" % (what, s and s["label"]))
if not s or s["because"] != "spin_compute":
    fail("%s: the slow rank is blamed on %s, expected spin_compute" % (what, s and s["because"]))
elif s["median_because_s"] > 0:
    ratio = s["because_s"] / s["median_because_s"]
    print("  spin_compute rank 1 / rank 0 = %.2f (truth 3.00)" % ratio)
    if not 2.2 <= ratio <= 4.0:
        fail("%s: spin_compute ratio %.2f, expected 3 (2.2..4.0)" % (what, ratio))
r0, r1 = rows[0], rows[1]
share0 = r0["comm_cpu_s"] / max(r0["cpu_s"], 1e-9)
share1 = r1["comm_cpu_s"] / max(r1["cpu_s"], 1e-9)
if share0 < 0.3 or share0 < 2 * share1:
    fail("%s: rank 0 MPI share %.1f %% (rank 1: %.1f %%): expected >= 30 %% and twice rank 1 (busy-polling wait)"
         % (what, 100 * share0, 100 * share1))
sys.exit(failures)
' "$@"
}
check_ranks per_rank.json "opprof report prof.0 prof.1 --ranks" || FAILURES=$((FAILURES + 1))

# Chrome trace over both results: a lane per rank, named by rank, on one clock.
limited "$OPPROF" export prof.0 prof.1 --chrome-trace trace.json 2>export.err || die "opprof export --chrome-trace failed"
pycheck '
d = load(sys.argv[1])
names = {e["pid"]: e["args"]["name"] for e in d["traceEvents"] if e.get("name") == "process_name"}
slices = {}
for e in d["traceEvents"]:
    if e["ph"] in ("X", "B"): # call stacks are nested B/E slices since the exports work
        slices[e["pid"]] = slices.get(e["pid"], 0) + 1
print("chrome trace lanes: " + ", ".join("%s: %d slices" % (names.get(p), n) for p, n in slices.items()))
for r in (0, 1):
    lanes = [p for p, n in names.items() if n.startswith("rank %d: " % r)]
    if len(lanes) != 1 or not slices.get(lanes[0]):
        fail("no lane named rank %d with slices" % r)
if d["otherData"].get("clock_aligned") is not True:
    fail("one host, but the trace does not say its clock is aligned")
sys.exit(failures)
' trace.json || FAILURES=$((FAILURES + 1))

# 2. One opprof around mpirun: the agent reads OMPI_COMM_WORLD_RANK per process.
log "+ opprof record -q -o one -- ${MPIRUN[*]} ./mpi_allreduce $STEPS 10"
limited "$OPPROF" record -q -o one -- "${MPIRUN[@]}" ./mpi_allreduce "$STEPS" 10 >one.out 2>one.err
st=$?
[ "$st" -eq 0 ] || { show err one.err 10; die "opprof record -- mpirun exited $st"; }
report_json one one.json --ranks || die "opprof report one --ranks failed"
check_ranks one.json "opprof report one --ranks (one result, two rank processes)" || FAILURES=$((FAILURES + 1))
finish
