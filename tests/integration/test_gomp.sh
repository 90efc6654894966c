#!/bin/sh
# test_gomp.sh — GNU libgomp seen from inside (sampler/agent/agent_gomp.c):
# record keeps the program's own libgomp and the agent's interposed
# GOMP_parallel* entry points give region bodies, team sizes and openers.
# omp_imbalance (gcc -fopenmp), OMP_NUM_THREADS=2, OMP_WAIT_POLICY=active:
#   imbalance  thread 0 does 3x the work of thread 1 (nominal truth: bodies
#              67 %, runtime wait 33 %)
#   gaps       balanced regions separated by serial gaps on the opener while
#              the worker spins in libgomp (nominal: bodies 50 %, serial 25 %,
#              runtime 25 %)
#   hashed     imbalance, linked against libgomp copied under a pip wheel's
#              kind of name (libgomp-3c8a9d1e.so.1)
#   late       imbalance, from a library that a program without OpenMP
#              dlopens after start-up, RTLD_LOCAL (as import torch)
# Each case checks (a) the workload's own /proc/self/maps names the same
# OpenMP runtime with and without opprof, (b) the body and runtime shares
# within 5 pp of the split the workload measured itself (its CPU time in
# bodies, serial code and the rest; on a loaded machine the waiting thread
# spins longer than the nominal split, which is logged beside), (c) >= 95 %
# of worker samples in regions charged to the opener exactly, (d) where the
# workload timed its regions itself (omp_imbalance), the report's average
# region time within 2 % + 100 us of that, and (e) the first 64 regions
# recorded with begin and end times inside the ones it read around them.
# (f) 300,000 regions of ~1 us (omp_regions_gomp; 30,000 in a sanitizer
# build): each counted, or its lost
# events counted and shown, and at least half counted (99 % on this 2-CPU VM
# on 2026-11-29; a loaded machine starves the writer). (h) record
# --no-openmp-regions: the same program's result, no region recorded.
. "$(dirname "$0")/lib.sh"
require_python3
require_opprof
BIN="$OPPROF_BUILDDIR/tests/workloads/omp_imbalance"
[ -x "$BIN" ] || skip "workload not built ($BIN missing; run make check)"
make_workdir
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=active
TOL=5

# check NAME NOMINAL_BODY NOMINAL_RUNTIME ATTEMPT: the recording $WORK/NAME
# against the bare run's maps and the recorded run's own truth line. ATTEMPT
# "first": a (b) miss is noted and $WORK/NAME.again left for the caller to
# record again; "final": a miss fails.
check() {
    _n=$1
    grep '^omp-runtime-map:' "$WORK/$_n.bare.err" | sort >"$WORK/$_n.maps.bare"
    grep '^omp-runtime-map:' "$RECORD_ERR" | sort >"$WORK/$_n.maps.rec"
    if ! [ -s "$WORK/$_n.maps.bare" ] || ! cmp -s "$WORK/$_n.maps.bare" "$WORK/$_n.maps.rec"; then
        fail "$_n: OpenMP runtime differs under opprof: bare [$(cat "$WORK/$_n.maps.bare")] recorded [$(cat "$WORK/$_n.maps.rec")]"
    else
        log "  (a) same runtime with and without opprof: $(cat "$WORK/$_n.maps.rec")"
    fi
    grep -q 'OpenMP runtime swapped' "$RECORD_ERR" && fail "$_n: record swapped the runtime by default"
    truth=$(grep '^omp-truth:' "$RECORD_ERR")
    wall=$(grep '^omp-region-wall:' "$RECORD_ERR")
    report_json "$WORK/$_n" "$WORK/$_n.json" --threading || { fail "report on $_n failed"; return; }
    "$OPPROF" report "$WORK/$_n" --threading | sed 's/^/  /'
    pycheck '
d = load(sys.argv[1]).get("threading", {})
truth = dict(zip(sys.argv[2].split()[1::2], map(float, sys.argv[2].split()[2::2])))
tol, nb, nr = float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
# samples of the whole run: the JSON gives the runtime share and its count
total = d.get("spin_samples", 0) / d["spin_share"] if d.get("spin_share") else 0
if not total or not d.get("has_ompt"):
    fail("no OpenMP region data from libgomp (view: %s)" % d.get("view"))
    sys.exit(1)
body = 100.0 * d.get("region_samples", 0) / total
rt = 100.0 * d.get("spin_share", 0)
tb, tr = 100 * truth.get("body", -1), 100 * truth.get("runtime", -1)
print("  (b) bodies %.1f%% (run truth %.1f%%, nominal %.0f%%), runtime %.1f%% (run truth %.1f%%, nominal %.0f%%)" % (
    body, tb, nb, rt, tr, nr))
off = []
if abs(body - tb) > tol:
    off.append("bodies %.1f%% not within %g pp of %.1f%%" % (body, tol, tb))
if abs(rt - tr) > tol:
    off.append("runtime wait %.1f%% not within %g pp of %.1f%%" % (rt, tol, tr))
final = sys.argv[7] == "final"
for msg in off:
    fail(msg) if final else print("  note: " + msg)
if off and not final:
    open(sys.argv[8], "w").write("again\n")
if abs(tb - nb) > tol:
    print("  note: the run itself was %.1f pp off the nominal split (a loaded machine)" % (tb - nb))
ex, near, un = d.get("attributed_exact", 0), d.get("attributed_near", 0), d.get("unattributed", 0)
n = ex + near + un
print("  (c) worker samples charged exactly: %d of %d" % (ex, n))
if n == 0 or ex < 0.95 * n:
    fail("exact attribution %d of %d worker samples (< 95 %%)" % (ex, n))
if d.get("regions", 0) < 10:
    fail("only %s regions counted" % d.get("regions"))
# (d) region times (begin and end events, read with the TSC where the clock
# runs on it and converted by the writer) against the regions wall time the
# workload measured around its own calls: the same regions, so the averages
# differ by the call outside the events (~1 us of ~2-6 ms) and by the first
# region: the workload leaves it out of its average (its first call also
# pays the one-time set-up of the agent outside the events: 54 us quiet,
# ~12 ms once beside two busy loops) and the report keeps it, with the
# creation of the team and the first context walk inside (the average came
# out 46-82 us above that of the workload beside two busy loops, 2026-11-29).
# Quiet, the two agree within 0.3 us. A gross check, then (a wrong unit, no
# conversion); (e) below checks the times themselves to 2 us
if sys.argv[6]:
    want = float(sys.argv[6].split()[1])
    got = d.get("region_avg_us", 0)
    print("  (d) region time %.1f us on average (the workload measured %.1f us around its calls)" % (got, want))
    if want > 0 and abs(got - want) > 0.02 * want + 100:
        fail("average region %.1f us, the workload measured %.1f us (more than 2 %% + 100 us apart)" % (got, want))
' "$WORK/$_n.json" "$truth" "$TOL" "$2" "$3" "$wall" "$4" "$WORK/$_n.again"
    # (e) each region the stream recorded (OMP_REGION, type 40) among the
    # first 64, against the CLOCK_MONOTONIC times the workload read just
    # before and after the call that opened it: begin and end inside, within
    # 2 us (event times come from the TSC, converted by the writer); and each
    # region recorded whole says a team of OMP_NUM_THREADS requested and run
    # (omp_imbalance's regions have no num_threads clause, and libgomp gives
    # them that team on this 2-CPU machine)
    grep '^omp-region-time:' "$RECORD_ERR" >"$WORK/$_n.times"
    if [ -s "$WORK/$_n.times" ]; then
        pycheck '
import glob, os, struct
truth = {}
for line in open(sys.argv[2]):
    k, a, b = map(int, line.split()[1:4])
    truth[k] = (a, b)
seen, worst, teams = 0, 0, {}
want_team = int(sys.argv[3])
for path in glob.glob(os.path.join(sys.argv[1], "proc-*.raw")):
    data = open(path, "rb").read()
    off = struct.unpack_from("<I", data, 12)[0]
    while off + 8 <= len(data):
        rtype, size = struct.unpack_from("<II", data, off)
        if size < 8:
            break
        if rtype == 40 and size >= 8 + 44:
            rid, parent, begin, end, opener, requested, actual = struct.unpack_from("<4Q3I", data, off + 8)
            if end:
                teams[(requested, actual)] = teams.get((requested, actual), 0) + 1
            if rid in truth and end:
                a, b = truth[rid]
                seen += 1
                out = max(a - begin, end - b, 0, begin - end)
                worst = max(worst, out)
                if out > 2000:
                    fail("region %d recorded %d..%d ns, the workload had it within %d..%d (%.1f us outside)" % (
                        rid, begin, end, a, b, out / 1e3))
        off += (size + 7) & ~7
print("  (e) %d recorded regions of the first %d inside the times the workload read around them (worst %.1f us outside)" % (
    seen, len(truth), worst / 1e3))
if seen < 10:
    fail("only %d of the first %d regions recorded" % (seen, len(truth)))
print("  (e) team sizes (requested, actual): regions %s" % sorted(teams.items()))
if not teams or set(teams) != {(want_team, want_team)}:
    fail("regions recorded with team sizes %s, want %d requested and %d run" % (sorted(teams.items()), want_team, want_team))
' "$WORK/$_n" "$WORK/$_n.times" "$OMP_NUM_THREADS"
    fi
}

BINDIR="$OPPROF_BUILDDIR/tests/workloads"
for case in imbalance gaps hashed late; do
    case $case in
    imbalance | gaps) set -- "$BIN" $case ;;
    hashed) set -- "$BINDIR/bin/omp_hashed" imbalance ;;
    late) set -- "$BINDIR/omp_late" "$BINDIR/bin/libimbalance_omp.so" imbalance ;;
    esac
    [ -x "$1" ] || { fail "$case: workload $1 not built"; continue; }
    log "== $case: bare"
    "$@" "$SECONDS_OF_WORK" >/dev/null 2>"$WORK/$case.bare.err" || fail "bare $case run failed"
    # (b) compares CPU-time samples with the CPU time the workload measured
    # itself, which should hold on a loaded machine too; yet a CI run beside
    # two busy loops gave bodies 19.3 % against the run's own 25.1 %, the
    # report saying "team threads waited for a CPU 50.8 % of the time"
    # (2026-12-02; quiet runs agree within ~1 pp, and why load moves them is
    # not established). A miss is recorded again with the load average
    # printed, as the other timing tests do: a wrong attribution misses on
    # both attempts.
    for attempt in first final; do
        log "== $case: recorded ($attempt attempt)"
        rm -rf "$WORK/$case" "$WORK/$case.again"
        record "$WORK/$case" -- "$@" "$SECONDS_OF_WORK"
        [ "$RECORD_STATUS" -eq 0 ] || { fail "record $case exited $RECORD_STATUS"; break; }
        if [ $case = gaps ]; then check $case 50 25 $attempt; else check $case 67 33 $attempt; fi
        [ -e "$WORK/$case.again" ] || break
        log "note: $case: (b) outside $TOL pp on the first attempt (load average: $(cut -d' ' -f1-3 /proc/loadavg)); recording again"
    done
done

# Regions opened faster than the writer drains (~1 us regions, ~10^6 a
# second, a team spinning on every CPU): every region is counted or its lost
# events are. The opener asks for a drain when its event ring is half full
# (agent_ompt.c); what still overflows is counted in OMP_TICK and shown.
# And the result grows with samples and with the openers' distinct stacks,
# not with regions: a region that repeats its opener's previous context
# writes no record of its own (before, 40 bytes each).
GOMP="$BINDIR/omp_regions_gomp"
N=300000
# A sanitizer build walks each opener's context ~10x slower: 300,000 regions
# there, beside two busy loops, ran past record's 60 s limit (2026-11-29).
# 30,000 still fill an opener's ring half full several times over.
case "$("$OPPROF_BUILDDIR/config.status" --config 2>/dev/null)" in
*enable-sanitizers*) N=30000 ;;
esac
if [ -x "$GOMP" ]; then
    log "== fast regions: $N regions of omp_regions_gomp --size 200"
    # at most 20 s of regions: beside two busy loops a sanitizer build's 30,000
    # took over 60 s once (a spinning team waits a scheduler slice at a barrier)
    record "$WORK/fast" -- "$GOMP" --regions $N --size 200 --seconds 20
    RUN=$(sed -n 's/^omp_regions: \([0-9]*\) regions.*/\1/p' "$WORK/fast.out")
    [ -n "$RUN" ] && [ "$RUN" -lt "$N" ] && log "  the workload stopped after $RUN of $N regions (20 s)"
    N=${RUN:-$N}
    if [ "$RECORD_STATUS" -ne 0 ]; then
        fail "record fast regions exited $RECORD_STATUS"
    elif report_json "$WORK/fast" "$WORK/fast.json" --threading; then
        "$OPPROF" report "$WORK/fast" --threading | grep -E "^  (OpenMP|lost) " | sed 's/^/  /'
        bytes=$(du -sb "$WORK/fast" | cut -f1)
        report_json "$WORK/fast" "$WORK/fast.all.json" || fail "report on the fast regions failed"
        pycheck '
d = load(sys.argv[1]).get("threading", {})
n, regions, lost = int(sys.argv[2]), d.get("regions", 0), d.get("omp_events_lost", -1)
nbytes, full, samples = int(sys.argv[3]), d.get("contexts", 0) - d.get("contexts_repeated", 0), load(sys.argv[4]).get("total_weight", 0)
# a record per region was 40 bytes; a sample with its stack ~100-300, the
# maps, the vdso copy and the periodic ticks ~64 KB
bound = 10 * n + 512 * samples + 65536
print("  (g) result %d bytes for %d regions and %d samples (bound %d); %d full opener contexts" % (nbytes, n, samples, bound, full))
if nbytes > bound:
    fail("result of %d bytes for %d regions and %d samples: over 10 bytes a region" % (nbytes, n, samples))
print("  (f) %d regions counted and %d region events lost, of %d regions run; %d samples in regions without a record" % (regions, lost, n, d.get("in_unrecorded_regions", -1)))
if lost < 0:
    fail("no omp_events_lost in the report")
elif regions > n or regions + lost < n:
    fail("%d regions counted + %d events lost do not account for the %d regions run" % (regions, lost, n))
elif regions < 0.5 * n:
    fail("only %d of %d regions counted (%d events lost): the writer did not keep up" % (regions, n, lost))
' "$WORK/fast.json" $N "$bytes" "$WORK/fast.all.json"
    else
        fail "report --threading on the fast regions failed"
    fi
fi
# (h) record --no-openmp-regions: no region recorded, nothing around them
# (the wrappers only forward), the program computes what it computes bare,
# and the summary and the threading view say so.
if [ -x "$GOMP" ]; then
    log "== --no-openmp-regions: 5000 regions of omp_regions_gomp"
    "$GOMP" --regions 5000 --size 20000 >"$WORK/noreg.bare.out" 2>&1
    record "$WORK/noreg" --no-openmp-regions -- "$GOMP" --regions 5000 --size 20000
    sum_bare=$(sed -n 's/.*(checksum \(.*\))$/\1/p' "$WORK/noreg.bare.out")
    sum_rec=$(sed -n 's/.*(checksum \(.*\))$/\1/p' "$WORK/noreg.out")
    if [ "$RECORD_STATUS" -ne 0 ]; then
        fail "record --no-openmp-regions exited $RECORD_STATUS"
    elif [ -z "$sum_bare" ] || [ "$sum_bare" != "$sum_rec" ]; then
        fail "--no-openmp-regions: checksum '$sum_rec' recorded, '$sum_bare' bare"
    elif ! grep -q 'OpenMP regions not recorded (--no-openmp-regions)' "$RECORD_ERR"; then
        fail "--no-openmp-regions: the summary does not say so"
    elif report_json "$WORK/noreg" "$WORK/noreg.json" --threading && report_json "$WORK/noreg" "$WORK/noreg.all.json"; then
        pycheck '
d, a = load(sys.argv[1]).get("threading", {}), load(sys.argv[2]).get("agent", {})
print("  (h) %d regions, view: %s; %d ns around regions (resolving the entry points), %d ns team wait"
      % (d.get("regions", 0), d.get("view", ""), a.get("omp_hook_ns", -1), a.get("omp_team_wait_ns", -1)))
if d.get("regions", 0) or d.get("has_ompt"):
    fail("--no-openmp-regions: %d regions recorded" % d.get("regions", 0))
if "--no-openmp-regions" not in d.get("view", ""):
    fail("--no-openmp-regions: the threading view does not say so: %s" % d.get("view"))
# what remains is resolving each GOMP_* entry point once (dlsym: ~12 us
# each, a few ms beside busy loops), not a cost per region of 5,000
if a.get("omp_team_wait_ns") != 0 or not 0 <= a.get("omp_hook_ns", -1) < 20000000:
    fail("--no-openmp-regions: %s ns around regions, %s ns team wait" % (a.get("omp_hook_ns"), a.get("omp_team_wait_ns")))
' "$WORK/noreg.json" "$WORK/noreg.all.json"
    else
        fail "report --threading of --no-openmp-regions failed"
    fi
fi
# ... and with -p (no agent, so no region anyway): one line, status 2, no result dir
limited "$OPPROF" record -o "$WORK/noreg-p" -p 1 --no-openmp-regions >"$WORK/noreg-p.out" 2>"$WORK/noreg-p.err"
st=$?
if [ "$st" -eq 2 ] && [ "$(wc -l <"$WORK/noreg-p.err")" -eq 1 ] && [ ! -e "$WORK/noreg-p" ]; then
    pass "record -p 1 --no-openmp-regions: status 2, $(cat "$WORK/noreg-p.err")"
else
    show stderr "$WORK/noreg-p.err" 4
    fail "record -p 1 --no-openmp-regions: status $st (expected 2 with one line and no result dir)"
fi
finish
