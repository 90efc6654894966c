#!/bin/sh
# bench/run.sh — opprof's recording and reporting costs next to perf's, on a
# fixed amount of work. Not part of `make check`; a few minutes on a quiet 2-core machine.
#
#   bench/run.sh [BUILDDIR]      (default: $OPPROF_BUILDDIR, else the source tree)
#
# Workload: tests/workloads/known_split --threads 2 --iterations N (the same
# inner-loop iterations every run; N from $BENCH_ITERATIONS, default 1e9 per
# thread, ~1.5 s). Three ways, $BENCH_RUNS runs each (default 3), median:
#   bare     the workload alone
#   opprof   opprof record (default rate 1000 Hz, full DWARF/CFI stacks)
#   attach   the workload started alone, opprof record -p attached to it at once
#            (out of process: perf_event rings, stack copies unwound by opprof;
#            wall and CPU count the workload and opprof together)
#   perf     perf record -e cpu-clock -F 1000 --call-graph dwarf (when perf works)
# Prints wall time and its ratio to bare, samples, bytes on disk per sample, and
# report throughput (samples/s) of `opprof report` and `perf report` on those
# recordings. Then, for a native, a PyTorch and an OpenMP workload, the agent's
# own overhead figure beside the outside CPU and wall ratios to bare (and to
# the sampling timer alone, and to the floor: bench/null_sampler.c) and bytes
# per sample; short OpenMP regions also under record --no-openmp-regions,
# for the region hooks' outside cost beside the agent's figure for them. Then builds and
# runs bench/hotspots_bench.c when it exists.
# BENCH_ONLY_OVERHEAD=1 runs only that overhead comparison; BENCH_ONLY_OPENMP=1
# only the OpenMP keep-vs-swap comparison that follows it; BENCH_ONLY_CHURN=1
# only the process-churn case.
set -u

SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-${OPPROF_BUILDDIR:-$SRC}}
BUILD=$(cd "$BUILD" && pwd) || exit 1
OPPROF="$BUILD/opprof"
WORKLOAD="$BUILD/tests/workloads/known_split"
ITER=${BENCH_ITERATIONS:-1000000000}
RUNS=${BENCH_RUNS:-3}
THREADS=2

if [ ! -x "$WORKLOAD" ]; then
    echo "bench: building the workload ($WORKLOAD)"
    make -C "$BUILD" tests/workloads/known_split >/dev/null || {
        echo "bench: cannot build $WORKLOAD (configure and make first)" >&2
        exit 1
    }
fi
[ -x "$OPPROF" ] || { echo "bench: $OPPROF not built (run make)" >&2; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/opprof-bench.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM HUP
cd "$TMP" || exit 1

now_ns() { date +%s%N; }
# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# timed FILE CMD...: runs CMD, appends "wall_s cpu_s minflt" (CPU = user+sys of
# CMD and all its descendants, minflt their minor page faults) to FILE;
# returns CMD's status.
timed() {
    _f=$1
    shift
    python3 "$TMP/timed.py" "$_f" "$@"
}
cat >"$TMP/timed.py" <<'PY'
import os, resource, subprocess, sys, time
t0 = time.monotonic()
st = subprocess.call(sys.argv[2:])
wall = time.monotonic() - t0
r = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "a") as f:
    f.write("%.4f %.4f %d\n" % (wall, r.ru_utime + r.ru_stime, r.ru_minflt))
sys.exit(st if st >= 0 else 128 - st)
PY
col() { awk -v c="$1" '{ print $c }' "$2"; }
dir_bytes() { du -sb "$1" 2>/dev/null | awk '{ print $1 }'; }
perf_works() {
    command -v perf >/dev/null 2>&1 &&
        perf record -q -e cpu-clock -F 1000 --call-graph dwarf -o probe.data -- true >/dev/null 2>&1
    _st=$?
    rm -f probe.data
    return $_st
}

# --- process churn: many short fork+exec children ------------------------------
# What a shell script or a build under record costs: every child loads the
# agent, opens its stream and timer, and leaves. Runs alternated per mode. CPU
# is user+sys of the whole tree: part of a child's cost is paid by the shell
# that reaps it (the kernel's /proc clean-up in wait4), which no wall-clock
# figure of the child shows.
churn() {
    CHURN=${BENCH_CHURN_CHILDREN:-500}
    churn_cmd="i=0; while [ \$i -lt $CHURN ]; do /bin/true; i=\$((i+1)); done"
    echo "== process churn: sh running /bin/true $CHURN times, $RUNS runs per mode, median"
    for i in $(seq 1 "$RUNS"); do
        timed churn_bare.t sh -c "$churn_cmd" >/dev/null 2>&1
        rm -rf "$TMP/churn.$i"
        timed churn_op.t "$BUILD/opprof" record -q -o "$TMP/churn.$i" -- sh -c "$churn_cmd" >/dev/null 2>&1
        if [ "$have_perf" = 1 ]; then
            timed churn_pf.t perf record -q -e cpu-clock -F 1000 --call-graph dwarf -o "$TMP/churn.$i.perf" -- \
                sh -c "$churn_cmd" >/dev/null 2>&1
            rm -f "$TMP/churn.$i.perf"
        fi
    done
    cb=$(col 1 churn_bare.t | median)
    cbc=$(col 2 churn_bare.t | median)
    printf "%-8s %8s %9s %12s %8s %9s %12s\n" mode "wall s" "vs bare" "ms per child" "cpu s" "vs bare" \
        "cpu ms/child"
    for m in bare op pf; do
        [ -s "churn_$m.t" ] || continue
        w=$(col 1 "churn_$m.t" | median)
        c=$(col 2 "churn_$m.t" | median)
        name=$m; [ "$m" = op ] && name=opprof; [ "$m" = pf ] && name=perf
        printf "%-8s %8.3f %9.3f %12.2f %8.3f %9.3f %12.2f\n" "$name" "$w" \
            "$(awk -v a="$w" -v b="$cb" 'BEGIN{print a/b}')" \
            "$(awk -v a="$w" -v b="$cb" -v n="$CHURN" 'BEGIN{print (a-b)*1000/n}')" "$c" \
            "$(awk -v a="$c" -v b="$cbc" 'BEGIN{print (b > 0 ? a/b : 0)}')" \
            "$(awk -v a="$c" -v b="$cbc" -v n="$CHURN" 'BEGIN{print (a-b)*1000/n}')"
    done
    echo "runs (wall cpu): bare $(tr '\n' ' ' <churn_bare.t)| opprof $(tr '\n' ' ' <churn_op.t)"
}

# --- forked children of a PyTorch process -------------------------------------
# A DataLoader forks its workers from a process that has imported torch (~300
# shared objects mapped): each child starts a stream of its own. CPU of the
# whole tree, bare and under record, runs alternated; the cost per child is
# (record - bare) / children, less what record adds to the parent alone (the
# same script with 0 children, alternated too).
forks() {
    FORKS=${BENCH_FORKS_CHILDREN:-40}
    echo "== forked children: tests/workloads/torch_forks.py $FORKS (and 0), $RUNS runs per mode, median"
    for i in $(seq 1 "$RUNS"); do
        for n in "$FORKS" 0; do
            timed "forks_bare_$n.t" /usr/bin/python3 "$SRC/tests/workloads/torch_forks.py" "$n" >/dev/null 2>&1
            rm -rf "$TMP/forks.$i"
            timed "forks_op_$n.t" "$BUILD/opprof" record -q -o "$TMP/forks.$i" -- \
                /usr/bin/python3 "$SRC/tests/workloads/torch_forks.py" "$n" >/dev/null 2>&1
        done
    done
    printf "%-8s %10s %10s %12s %12s\n" mode "cpu s" "cpu s (0)" "vs bare" "cpu ms/child"
    fb=$(col 2 "forks_bare_$FORKS.t" | median)
    fb0=$(col 2 forks_bare_0.t | median)
    for m in bare op; do
        c=$(col 2 "forks_${m}_$FORKS.t" | median)
        c0=$(col 2 "forks_${m}_0.t" | median)
        name=$m; [ "$m" = op ] && name=opprof
        printf "%-8s %10.3f %10.3f %12.3f %12.2f\n" "$name" "$c" "$c0" \
            "$(awk -v a="$c" -v b="$fb" 'BEGIN{print (b > 0 ? a/b : 0)}')" \
            "$(awk -v a="$c" -v a0="$c0" -v b="$fb" -v b0="$fb0" -v n="$FORKS" 'BEGIN{print ((a-a0)-(b-b0))*1000/n}')"
    done
    echo "runs (wall cpu): bare $(tr '\n' ' ' <"forks_bare_$FORKS.t")| opprof $(tr '\n' ' ' <"forks_op_$FORKS.t")"
}

echo "opprof bench: $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
if [ "${BENCH_ONLY_FORKS:-0}" = 1 ]; then # BENCH_ONLY_FORKS: only the forked-children case
    forks
    exit 0
fi
if [ "${BENCH_ONLY_CHURN:-0}" = 1 ]; then # BENCH_ONLY_CHURN: only the process-churn case
    have_perf=0
    perf_works && have_perf=1
    churn
    exit 0
fi
echo "workload: known_split --threads $THREADS --iterations $ITER (fixed work), $RUNS runs per mode, median"
echo

# --- the agent's own overhead figure beside the outside ratios ------------------
# For a native, a PyTorch and an OpenMP workload: $RUNS runs alternated bare /
# recorded (slow phases of a noisy machine hit both), median wall and CPU
# (user+sys of the whole command, children included) and their ratio to bare;
# beside them what the agent measured itself (the report's overhead line: its
# share of the processes' CPU time, the handler's CPU time per sample, median
# and p99, the writer thread's CPU time) and bytes on disk per sample, median
# over the recorded runs. The agent's figure leaves out the kernel's signal
# delivery and the launcher; the outside CPU ratio includes everything.
# "timer": the same workload under `perf record -e task-clock -c 1 ms` with
# no call graph, timed inside perf (perf's own process is not counted): what
# the workload pays for the sampling timer alone, the interrupt and the
# kernel's sample, which no profiler that samples at that rate avoids (on a
# VM each timer interrupt is a trip to the hypervisor). "vs timer" divides
# opprof's CPU by it: what the agent adds over the timer.
# "floor": the workload with bench/null_sampler.c preloaded, opprof's own
# timer (the same task-clock event, a SIGTRAP to the sampled thread) and a
# handler that only counts: what any in-process sampler pays at that rate
# before it does anything, the signal frame and sigreturn included, which
# perf's timer column does not pay. "vs floor" divides opprof's CPU by it:
# what the handler's walks and the writer add.
# overhead_case NAME CMD...: one row.
overhead_case() {
    _name=$1
    shift
    : >"oc_$_name.bare.t"
    : >"oc_$_name.op.t"
    : >"oc_$_name.agent"
    : >"oc_$_name.pf.t"
    : >"oc_$_name.nl.t"
    # The agent's unwind tables are cached by build-id across runs (a user's
    # second run of a program reads them instead of compiling): one unmeasured
    # run fills a cache private to this bench first. BENCH_COLD_CACHE=1: every
    # run starts with an empty cache instead (the first run of a program).
    export OPPROF_UNWIND_CACHE="$TMP/unwind-cache"
    rm -rf "$OPPROF_UNWIND_CACHE"
    # shellcheck disable=SC2086 # OC_RECORD_ARGS: record options of this row (--timer tick)
    [ "${BENCH_COLD_CACHE:-0}" = 1 ] || "$OPPROF" record -q ${OC_RECORD_ARGS:-} -o "$TMP/warm_$_name" -- "$@" >/dev/null 2>&1
    rm -rf "$TMP/warm_$_name"
    for i in $(seq 1 "$RUNS"); do
        timed "oc_$_name.bare.t" "$@" >/dev/null 2>&1 || echo "bench: $_name bare run failed" >&2
        _d="$TMP/oc_$_name.$i"
        rm -rf "$_d"
        [ "${BENCH_COLD_CACHE:-0}" = 1 ] && rm -rf "$OPPROF_UNWIND_CACHE"
        # shellcheck disable=SC2086
        if timed "oc_$_name.op.t" "$OPPROF" record -q ${OC_RECORD_ARGS:-} -o "$_d" -- "$@" >/dev/null 2>&1; then
            # samples: the sum of weights (periods) is what the bytes paid for
            _n=$("$OPPROF" report "$_d" --limit 1 2>/dev/null | sed -n 's/^  samples *\([0-9]*\) .*/\1/p' | head -n 1)
            _line=$("$OPPROF" report "$_d" --limit 1 2>/dev/null | grep '^  overhead')
            _b=$(dir_bytes "$_d")
            echo "$_line" | awk -v n="${_n:-0}" -v b="${_b:-0}" '{
                share = "-"; med = "-"; p99 = "-"; writer = "-"; omp = 0
                for (i = 1; i <= NF; i++) {
                    # the region hooks and the team spinning through them (s)
                    if ($i == "around" && $(i + 1) == "OpenMP") omp += $(i - 2)
                    if ($i == "teams" && $(i + 1) == "spinning") omp += $(i - 4)
                    if ($i == "%" && $(i + 1) == "of") share = $(i - 1)
                    if ($i == "(median") { med = $(i + 1); sub(/,$/, "", med) }
                    if ($i == "p99") { p99 = $(i + 1); sub(/;$/, "", p99) }
                    if ($i == "writer" && $(i + 1) == "thread") writer = $(i - 2)
                }
                printf "%s %s %s %s %s %s\n", share, med, p99, writer, (n > 0 ? b / n : "-"), omp
            }' >>"oc_$_name.agent"
        else
            echo "bench: opprof record of $_name failed" >&2
        fi
        [ "$have_timer_perf" = 1 ] && perf record -q -B -N -e task-clock -c 1000000 -o "$TMP/timer.data" -- \
            python3 "$TMP/timed.py" "oc_$_name.pf.t" "$@" >/dev/null 2>&1
        rm -f "$TMP/timer.data"
        if [ -n "$NULL_SO" ]; then
            timed "oc_$_name.nl.tmp" env LD_PRELOAD="$NULL_SO" "$@" >/dev/null 2>"$TMP/null.err"
            # a run that did not sample is not a floor
            grep -q '^null_sampler: [1-9][0-9]* samples' "$TMP/null.err" && cat "oc_$_name.nl.tmp" >>"oc_$_name.nl.t"
            rm -f "oc_$_name.nl.tmp"
        fi
    done
    _pc=$(col 2 "oc_$_name.pf.t" | median)
    _nc=$(col 2 "oc_$_name.nl.t" | median)
    _bw=$(col 1 "oc_$_name.bare.t" | median)
    _bc=$(col 2 "oc_$_name.bare.t" | median)
    _ow=$(col 1 "oc_$_name.op.t" | median)
    _oc=$(col 2 "oc_$_name.op.t" | median)
    printf "%-10s %8.3f %8.3f %9s %9s %9s %9s %9s %9s %7s%% %8s %8s %8s %9s\n" "$_name" "$_bw" "$_bc" \
        "$(awk -v a="$_ow" -v b="$_bw" 'BEGIN { printf (b > 0 ? "x%.3f" : "-"), a / b }')" \
        "$(awk -v a="$_oc" -v b="$_bc" 'BEGIN { printf (b > 0 ? "x%.3f" : "-"), a / b }')" \
        "$(awk -v a="$_pc" -v b="$_bc" 'BEGIN { printf (a != "nan" && b > 0 ? "x%.3f" : "-"), a / b }')" \
        "$(awk -v a="$_oc" -v b="$_pc" 'BEGIN { printf (b != "nan" && b > 0 ? "x%.3f" : "-"), a / b }')" \
        "$(awk -v a="$_nc" -v b="$_bc" 'BEGIN { printf (a != "nan" && b > 0 ? "x%.3f" : "-"), a / b }')" \
        "$(awk -v a="$_oc" -v b="$_nc" 'BEGIN { printf (b != "nan" && b > 0 ? "x%.3f" : "-"), a / b }')" \
        "$(col 1 "oc_$_name.agent" | median)" "$(col 2 "oc_$_name.agent" | median)" \
        "$(col 3 "oc_$_name.agent" | median)" "$(col 4 "oc_$_name.agent" | median)" \
        "$(col 5 "oc_$_name.agent" | median | awk '{ printf ($1 == "nan" ? "-" : "%.0f"), $1 }')"
    oc_resolution "$_name" >>oc_spread
    echo "  runs: bare wall $(col 1 "oc_$_name.bare.t" | tr '\n' ' ')cpu $(col 2 "oc_$_name.bare.t" | tr '\n' ' ')| opprof wall $(col 1 "oc_$_name.op.t" | tr '\n' ' ')cpu $(col 2 "oc_$_name.op.t" | tr '\n' ' ')| timer cpu $(col 2 "oc_$_name.pf.t" | tr '\n' ' ')| floor cpu $(col 2 "oc_$_name.nl.t" | tr '\n' ' ')| agent % $(col 1 "oc_$_name.agent" | tr '\n' ' ')" >>oc_runs
}
# oc_resolution NAME: whether a row's medians resolve anything. Its runs are
# paired (bare i, opprof i and floor i ran one after another), so the spread
# of the per-pair CPU ratios shows how far a median ratio can move on this
# machine; beside it the bare runs' own spread, and the minor page faults
# the agent adds (median over pairs of opprof - bare and floor - bare): CPU
# of the thread that takes them, so in the agent's line where the handler
# or the writer took them, not where `opprof record` itself did.
oc_resolution() {
    paste -d ' ' "oc_$1.bare.t" "oc_$1.op.t" | awk -v name="$1" -v floorf="oc_$1.nl.t" '
        function sortn(a, n,   i, j, t) { for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } }
        function med(a, n) { sortn(a, n); return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        NF >= 6 && $2 > 0 {
            n++; r[n] = $5 / $2; bc[n] = $2; df[n] = $6 - $3
            if ((getline fl < floorf) > 0) { split(fl, f, " "); if (f[2] > 0) { m++; rf[m] = $5 / f[2]; ff[m] = f[3] - $3 } }
        }
        END {
            if (n == 0) exit
            sortn(r, n); sortn(bc, n)
            line = sprintf("  %-10s pairs: cpu/bare x%.3f-x%.3f", name, r[1], r[n])
            if (m > 0) { sortn(rf, m); line = line sprintf(", vs floor x%.3f-x%.3f", rf[1], rf[m]) }
            line = line sprintf("; bare cpu %.3f-%.3f s (%+.1f %%/%+.1f %% of its median)", bc[1], bc[n],
                                100 * (bc[1] / med(bc, n) - 1), 100 * (bc[n] / med(bc, n) - 1))
            line = line sprintf("; minor faults %+.0f", med(df, n))
            if (m > 0) line = line sprintf(" (floor %+.0f)", med(ff, m))
            print line " over bare"
        }'
}
TORCH_STEPS=${BENCH_TORCH_STEPS:-60}
# torch-long: the same loop 4x as long, so that the imports (~0.65 s of
# CPU, where the agent loads its tables and meets most new Python code) are
# a tenth of the run, as in training, not a quarter; 0 leaves the row out.
TORCH_LONG_STEPS=${BENCH_TORCH_LONG_STEPS:-240}
OMP_SHORT_REGIONS=${BENCH_OMP_SHORT_REGIONS:-200000}
OMP_REGIONS=${BENCH_OMP_REGIONS:-20000} # ~0.6 s: 2,000 took 37 ms, where the agent's start-up (its first maps read, the tables) set the ratio
if [ "${BENCH_ONLY_OPENMP:-0}" != 1 ]; then # BENCH_ONLY_OPENMP: straight to the OpenMP section
echo "== the agent's own overhead figure beside the outside ratios ($RUNS paired runs each, median)"
have_timer_perf=0
command -v perf >/dev/null 2>&1 && perf record -q -B -N -e task-clock -c 1000000 -o timer_probe.data -- true \
    >/dev/null 2>&1 && have_timer_perf=1
rm -f timer_probe.data
# the floor column's sampler (see overhead_case); no compiler, no column
NULL_SO="$TMP/null_sampler.so"
${CC:-cc} -O2 -shared -fPIC -I"$BUILD" -I"$SRC" -o "$NULL_SO" "$SRC/bench/null_sampler.c" 2>/dev/null || NULL_SO=
printf "%-10s %8s %8s %9s %9s %9s %9s %9s %9s %8s %8s %8s %8s %9s\n" workload "bare s" "bare cpu" "wall" "cpu" "timer" \
    "opprof" "floor" "opprof" "agent" "hdl med" "hdl p99" "writer" "B/sample"
printf "%-10s %8s %8s %9s %9s %9s %9s %9s %9s %8s %8s %8s %8s %9s\n" "" "" "" "vs bare" "vs bare" "cpu/bare" \
    "vs timer" "cpu/bare" "vs floor" "says" "us" "us" "cpu s" ""
: >oc_runs
: >oc_spread
overhead_case native "$WORKLOAD" --threads "$THREADS" --iterations "$ITER"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    overhead_case pytorch /usr/bin/python3 "$SRC/tests/workloads/torch_train.py" --steps "$TORCH_STEPS"
    [ "$TORCH_LONG_STEPS" -gt 0 ] 2>/dev/null &&
        overhead_case torch-long /usr/bin/python3 "$SRC/tests/workloads/torch_train.py" --steps "$TORCH_LONG_STEPS"
else
    echo "pytorch    (torch not importable by /usr/bin/python3: skipped)"
fi
OMP_WORKLOAD="$BUILD/tests/workloads/omp_regions_gomp"
[ -x "$OMP_WORKLOAD" ] || make -C "$BUILD" tests/workloads/omp_regions_gomp >/dev/null 2>&1
if [ -x "$OMP_WORKLOAD" ]; then
    overhead_case openmp "$OMP_WORKLOAD" --regions "$OMP_REGIONS" --size 20000
    # omp-short / omp-sh-nr: 200,000 regions of ~4 us (--size 200), with the
    # region hooks and under record --no-openmp-regions (the GOMP_* wrappers
    # only forward): the CPU between the two rows is the hooks' cost seen from
    # outside, the team's spinning through them included, printed beside the
    # agent's figure for them. Short regions, so that the hooks are ~10 % of
    # the CPU: on the openmp row's 20,000 they are ~2 %, inside the runs' spread.
    overhead_case omp-short "$OMP_WORKLOAD" --regions "$OMP_SHORT_REGIONS" --size 200
    OC_RECORD_ARGS="--no-openmp-regions" overhead_case omp-sh-nr "$OMP_WORKLOAD" --regions "$OMP_SHORT_REGIONS" --size 200
    awk -v a="$(col 2 oc_omp-short.op.t | median)" -v b="$(col 2 oc_omp-sh-nr.op.t | median)" \
        -v says="$(col 6 oc_omp-short.agent | median)" 'BEGIN {
        printf "  omp-short region hooks: %.3f s of CPU from outside (omp-short - omp-sh-nr, medians); the agent says %.3f s (around regions + teams spinning)\n", a - b, says }'
else
    echo "openmp     ($OMP_WORKLOAD could not be built: skipped)"
fi
# --timer tick (agent_tick.c): the same workloads with a POSIX CPU-time timer
# per thread; "switch": a two-thread pipe ping-pong (bench/switch_pingpong.c),
# ~2 context switches a round, where the perf timer's hrtimer costs most. The
# timer and floor columns stay the perf timer's, for comparison.
SWITCH="$TMP/switch_pingpong"
${CC:-cc} -O2 -pthread -o "$SWITCH" "$SRC/bench/switch_pingpong.c" 2>/dev/null || SWITCH=
if [ -n "$SWITCH" ]; then
    overhead_case switch "$SWITCH" "${BENCH_SWITCH_ROUNDS:-100000}"
    OC_RECORD_ARGS="--timer tick" overhead_case switch-tk "$SWITCH" "${BENCH_SWITCH_ROUNDS:-100000}"
fi
OC_RECORD_ARGS="--timer tick" overhead_case native-tk "$WORKLOAD" --threads "$THREADS" --iterations "$ITER"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    OC_RECORD_ARGS="--timer tick" overhead_case pytorch-tk /usr/bin/python3 "$SRC/tests/workloads/torch_train.py" \
        --steps "$TORCH_STEPS"
fi
[ -x "$OMP_WORKLOAD" ] &&
    OC_RECORD_ARGS="--timer tick" overhead_case openmp-tk "$OMP_WORKLOAD" --regions "$OMP_REGIONS" --size 20000
cat oc_spread oc_runs
echo "workloads: native = known_split --threads $THREADS --iterations $ITER; pytorch = /usr/bin/python3"
echo "tests/workloads/torch_train.py --steps $TORCH_STEPS (torch-long: --steps $TORCH_LONG_STEPS); openmp = omp_regions_gomp --regions $OMP_REGIONS --size 20000"
echo "(omp-short: the same with --regions $OMP_SHORT_REGIONS --size 200; omp-sh-nr: that under record --no-openmp-regions,"
echo "whose GOMP_* wrappers only forward)."
echo "agent says: the report's overhead line (handler CPU time, writer thread CPU, start-up, as a"
echo "share of the processes' CPU time); hdl: the handler's time per sample (1 in 8 timed, less the timing's reads);"
echo "timer: CPU under perf record -e task-clock -c 1ms, no call graph, perf's own process not counted"
echo "$([ "$have_timer_perf" = 1 ] || echo "(perf cannot record here: no timer column) ")(the sampling timer's own cost); vs timer: opprof's CPU / that."
echo "floor: CPU with bench/null_sampler.c preloaded (opprof's timer and SIGTRAP, a handler that only"
echo "counts$([ -n "$NULL_SO" ] || echo "; it could not be built here: no floor column")); vs floor: opprof's CPU / that, what the walks and the writer add."
echo "pairs: the lowest and highest per-pair CPU ratio (bare, opprof and floor run i ran back to back): a"
echo "median ratio inside that range, or a difference between rows smaller than the bare runs' own spread, is"
echo "not resolved by $RUNS runs (BENCH_RUNS=N for more). minor faults: median over pairs of opprof's minus bare's"
echo "(the command and its descendants: ru_minflt), the floor's beside it; each costs ~2-15 us on a VM."
echo "B/sample: result dir bytes / samples. Unwind-table cache: $([ "${BENCH_COLD_CACHE:-0}" = 1 ] &&
    echo "empty at every run (BENCH_COLD_CACHE=1)" || echo "filled by one unmeasured run first")."
fi
[ "${BENCH_ONLY_OVERHEAD:-0}" = 1 ] && exit 0

# --- OpenMP: the program's own libgomp (default) against the old swap ---------
# omp_imbalance gaps: balanced GNU libgomp regions separated by serial gaps in
# which the worker waits in libgomp (tests/integration/test_gomp.sh). Its work
# is a fixed CPU time of the opener, so the process's CPU time is that work
# plus how the runtime waits: the ratio to bare is opprof's cost when the
# runtime is kept, and opprof's cost plus a different runtime's waiting under
# --openmp-runtime auto (LLVM libomp preloaded: round 1's default). Runs
# alternate bare / keep / swap; medians of the paired ratios (goal <= 1.05).
omp_keep_vs_swap() {
    _w="$BUILD/tests/workloads/omp_imbalance"
    [ -x "$_w" ] || make -C "$BUILD" tests/workloads/omp_imbalance >/dev/null 2>&1
    if [ ! -x "$_w" ]; then
        echo "openmp keep vs swap: $_w could not be built: skipped"
        return
    fi
    _secs=${BENCH_OMP_SECONDS:-2}
    export OMP_NUM_THREADS=2
    : >oks.bare; : >oks.keep; : >oks.swap; : >oks.ratio
    for i in $(seq 1 "$RUNS"); do
        timed oks.bare "$_w" gaps "$_secs" >/dev/null 2>&1
        rm -rf "$TMP/oks_k$i" "$TMP/oks_s$i"
        timed oks.keep "$OPPROF" record -q -o "$TMP/oks_k$i" -- "$_w" gaps "$_secs" >/dev/null 2>&1
        timed oks.swap "$OPPROF" record -q --openmp-runtime auto -o "$TMP/oks_s$i" -- \
            "$_w" gaps "$_secs" >/dev/null 2>"$TMP/oks_s$i.err"
        b=$(sed -n "${i}p" oks.bare | awk '{ print $2 }')
        k=$(sed -n "${i}p" oks.keep | awk '{ print $2 }')
        w=$(sed -n "${i}p" oks.swap | awk '{ print $2 }')
        echo "$b $k $w" | awk '{ printf "%.4f %.4f\n", ($1 > 0 ? $2 / $1 : 0), ($1 > 0 ? $3 / $1 : 0) }' >>oks.ratio
    done
    echo "== OpenMP: CPU time of omp_imbalance gaps $_secs (OMP_NUM_THREADS=2) vs bare, $RUNS paired runs"
    printf "%-34s %10s %10s\n" "" "cpu s" "vs bare"
    printf "%-34s %10.3f %10s\n" "bare (GNU libgomp)" "$(col 2 oks.bare | median)" "-"
    printf "%-34s %10.3f %10s\n" "opprof record (keep libgomp)" "$(col 2 oks.keep | median)" \
        "x$(col 1 oks.ratio | median)"
    printf "%-34s %10.3f %10s\n" "opprof record --openmp-runtime auto" "$(col 2 oks.swap | median)" \
        "x$(col 2 oks.ratio | median)"
    echo "  paired ratios keep / swap: $(tr '\n' ' ' <oks.ratio)"
    grep -h "openmp\|libomp" "$TMP"/oks_s*.err 2>/dev/null | sort -u | head -n 2 | sed 's/^/  swap: /'
    unset OMP_NUM_THREADS
}
omp_keep_vs_swap
[ "${BENCH_ONLY_OPENMP:-0}" = 1 ] && exit 0
echo

# --- bare ------------------------------------------------------------------
: >bare.t
for i in $(seq "$RUNS"); do
    timed bare.t "$WORKLOAD" --threads "$THREADS" --iterations "$ITER" 2>/dev/null ||
        echo "bench: the bare workload failed" >&2
done
bare=$(col 1 bare.t | median)
bare_cpu=$(col 2 bare.t | median)

# --- opprof, launched and attached (record -p) ------------------------------
# opprof_runs P launch|attach: $RUNS recordings into P1..PN, each reported
# once; appends to P.t (wall, cpu), P.samples, P.bytes and P.rep (report
# samples/s). Attached: the workload is started alone and opprof attaches to it
# at once; sh is the parent of both, so timed counts their CPU together.
opprof_runs() {
    _p=$1
    _mode=$2
    : >"$_p.t"
    : >"$_p.samples"
    : >"$_p.bytes"
    : >"$_p.rep"
    for i in $(seq "$RUNS"); do
        _d=$_p$i
        rm -rf "$_d"
        if [ "$_mode" = attach ]; then
            set -- sh -c '"$1" --threads "$2" --iterations "$3" 2>/dev/null & w=$!
                "$4" record -o "$5" -p "$w" >/dev/null; st=$?; wait "$w"; exit $st' \
                sh "$WORKLOAD" "$THREADS" "$ITER" "$OPPROF" "$_d"
        else
            set -- "$OPPROF" record -o "$_d" -- "$WORKLOAD" --threads "$THREADS" --iterations "$ITER"
        fi
        if timed "$_p.t" "$@" >/dev/null 2>"$_d.err"; then
            n=$(sed -n 's/^opprof record: \([0-9]*\) samples.*/\1/p' "$_d.err" | tail -n 1)
            [ -n "$n" ] || n=0
            echo "$n" >>"$_p.samples"
            dir_bytes "$_d" >>"$_p.bytes"
            : >"$_p.rep1"
            timed "$_p.rep1" "$OPPROF" report "$_d" --format text >/dev/null 2>&1
            awk -v n="$n" '{ if ($1 > 0) printf "%.1f\n", n / $1 }' "$_p.rep1" >>"$_p.rep"
        else
            echo "bench: opprof record ($_mode) failed: $(tail -n 1 "$_d.err")" >&2
        fi
    done
}
opprof_runs op launch
op=$(col 1 op.t | median)
op_cpu=$(col 2 op.t | median)
op_samples=$(median <op.samples)
op_bytes=$(median <op.bytes)
op_rep=$(median <op.rep)
opprof_runs at attach
at=$(col 1 at.t | median)
at_cpu=$(col 2 at.t | median)
at_samples=$(median <at.samples)
at_bytes=$(median <at.bytes)
at_rep=$(median <at.rep)

# --- perf --------------------------------------------------------------------
have_perf=0
perf_works && have_perf=1
if [ "$have_perf" = 1 ]; then
    : >pf.t
    : >pf.samples
    : >pf.bytes
    : >pf.rep
    for i in $(seq "$RUNS"); do
        if timed pf.t perf record -q -e cpu-clock -F 1000 --call-graph dwarf -o "pf$i.data" -- \
            "$WORKLOAD" --threads "$THREADS" --iterations "$ITER" >/dev/null 2>"pf$i.err"; then
            # Sample count: the Samples column of a per-comm table.
            n=$(perf report -i "pf$i.data" --stdio -q -n --no-children --sort comm -g none 2>/dev/null |
                awk '$1 ~ /%$/ { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) { s += $i; break } }
                     END { print s + 0 }')
            echo "$n" >>pf.samples
            wc -c <"pf$i.data" >>pf.bytes
            : >pf.rep1
            timed pf.rep1 perf report -i "pf$i.data" --stdio >/dev/null 2>&1
            awk -v n="$n" '{ if ($1 > 0) printf "%.1f\n", n / $1 }' pf.rep1 >>pf.rep
        else
            echo "bench: perf record failed: $(tail -n 1 "pf$i.err")" >&2
        fi
        rm -f "pf$i.data"
    done
    pf=$(col 1 pf.t | median)
    pf_cpu=$(col 2 pf.t | median)
    pf_samples=$(median <pf.samples)
    pf_bytes=$(median <pf.bytes)
    pf_rep=$(median <pf.rep)
fi

# --- table -------------------------------------------------------------------
row() { # name wall cpu samples bytes report_rate
    awk -v name="$1" -v t="$2" -v c="$3" -v bare="$bare" -v bcpu="$bare_cpu" -v n="$4" -v b="$5" -v r="$6" 'BEGIN {
        ratio = (bare > 0) ? sprintf("x%.3f", t / bare) : "-"
        cratio = (bcpu > 0) ? sprintf("x%.3f", c / bcpu) : "-"
        bps = (n > 0 && b != "-") ? sprintf("%.0f", b / n) : "-"
        printf "%-8s %8.3f %9s %8.3f %9s %8s %11s %9s %12s\n", name, t, ratio, c, cratio,
            (n == "-" ? "-" : sprintf("%d", n)), (b == "-" ? "-" : sprintf("%d", b)), bps,
            (r == "-" || r == "nan" ? "-" : sprintf("%.0f", r))
    }'
}
hdr() { printf "%-8s %8s %9s %8s %9s %8s %11s %9s %12s\n" "$@"; }
hdr mode "wall s" "vs bare" "cpu s" "vs bare" samples bytes "B/sample" "report smp/s"
hdr -------- ------ ------- ----- ------- ------- ----- -------- ------------
row bare "$bare" "$bare_cpu" - - -
row opprof "$op" "$op_cpu" "$op_samples" "$op_bytes" "$op_rep"
row attach "$at" "$at_cpu" "$at_samples" "$at_bytes" "$at_rep"
if [ "$have_perf" = 1 ]; then
    row perf "$pf" "$pf_cpu" "$pf_samples" "$pf_bytes" "$pf_rep"
else
    echo "perf     (perf missing or perf record with cpu-clock/dwarf fails here: skipped)"
fi
echo
echo "median of $RUNS runs each. wall s / cpu s: wall time and user+sys CPU of the whole command"
echo "(workload, opprof or perf, and their helpers); vs bare: ratio to the bare workload."
echo "samples: opprof's summary line / perf report -n. bytes: result dir (du -sb) / perf.data."
echo "report smp/s: samples / wall time of 'opprof report DIR --format text' and"
echo "'perf report --stdio' (default call graphs)."
echo "runs (wall s): bare $(col 1 bare.t | tr '\n' ' ')| opprof $(col 1 op.t | tr '\n' ' ')$([ "$have_perf" = 1 ] && echo "| perf $(col 1 pf.t | tr '\n' ' ')")"

echo
churn
echo
forks

# --- hotspots_bench ------------------------------------------------------------
echo
if [ -f "$SRC/bench/hotspots_bench.c" ]; then
    echo "== bench/hotspots_bench.c"
    if gcc -std=gnu11 -O2 -D_GNU_SOURCE -I"$SRC" -I"$BUILD" "$SRC/bench/hotspots_bench.c" \
        "$SRC/analyze/hotspots.c" "$SRC/analyze/profile_model.c" "$SRC/report/table.c" \
        -o "$TMP/hotspots_bench" -lm 2>"$TMP/hb.err" ||
        gcc -std=gnu11 -O2 -D_GNU_SOURCE -I"$SRC" -I"$BUILD" "$SRC/bench/hotspots_bench.c" \
            "$BUILD/.libs/libopprof_core.a" $(pkg-config --libs libdw libelf 2>/dev/null) -lpfm \
            -lstdc++ -lpthread -lm -o "$TMP/hotspots_bench" 2>>"$TMP/hb.err"; then
        "$TMP/hotspots_bench" || echo "hotspots_bench exited $?"
    else
        echo "hotspots_bench did not build:"
        tail -n 10 "$TMP/hb.err" | sed 's/^/  /'
    fi
else
    echo "(bench/hotspots_bench.c not present: skipped)"
fi
