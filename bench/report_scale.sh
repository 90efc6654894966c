#!/bin/sh
# bench/report_scale.sh — what `opprof report` costs on ten million samples:
# peak memory and time, this build beside another (main's) in one run.
# Not part of `make check`; about 2-4 minutes on 2 cores.
#
#   bench/report_scale.sh [BUILDDIR] [OLD_BUILDDIR]
#       BUILDDIR      default: $OPPROF_BUILDDIR, else the source tree
#       OLD_BUILDDIR  another build to compare with (e.g. main's); optional
#   REPORT_SCALE_HZ=20000        recording rate
#   REPORT_SCALE_SECONDS=8       CPU seconds per thread of known_split (2 threads)
#   REPORT_SCALE_SAMPLES=10000000  samples to reach by replicating the result dir
#   REPORT_SCALE_RUNS=3          runs per build (the median is printed)
#
# Records known_split once at a high rate, replicates the result dir (hard
# links) until the copies hold REPORT_SCALE_SAMPLES samples, and runs
# `opprof report COPY1 COPY2 ...` (the merged report, as for the ranks of a
# job) under /usr/bin/time. Prints samples, peak RSS, wall and CPU (user +
# sys) seconds and MB of peak RSS per million samples per build (CPU time is
# what to trust on a busy machine: neighbours stretch the wall time), and
# whether both builds printed the same report. Copies of one recording have
# the same distinct stacks and threads, so a report whose memory follows
# distinct stacks x threads stays flat as the sample count grows, and one that
# keeps every sample grows with it.
set -u

SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-${OPPROF_BUILDDIR:-$SRC}}
BUILD=$(cd "$BUILD" && pwd) || exit 1
OLD=${2:-}
[ -n "$OLD" ] && { OLD=$(cd "$OLD" && pwd) || exit 1; }
HZ=${REPORT_SCALE_HZ:-20000}
SECONDS_PER_THREAD=${REPORT_SCALE_SECONDS:-8}
WANT=${REPORT_SCALE_SAMPLES:-10000000}
RUNS=${REPORT_SCALE_RUNS:-3}
WORKLOAD="$BUILD/tests/workloads/known_split"
[ -x "$BUILD/opprof" ] || { echo "report_scale: $BUILD/opprof not built (run make)" >&2; exit 1; }
[ -z "$OLD" ] || [ -x "$OLD/opprof" ] || { echo "report_scale: $OLD/opprof not built" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "report_scale: needs /usr/bin/time (GNU time) for the peak RSS" >&2; exit 1; }
if [ ! -x "$WORKLOAD" ]; then
    make -C "$BUILD" tests/workloads/known_split >/dev/null || { echo "report_scale: cannot build $WORKLOAD" >&2; exit 1; }
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/opprof-report-scale.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM HUP
cd "$TMP" || exit 1

"$BUILD/opprof" record -q -F "$HZ" -o one -- "$WORKLOAD" --threads 2 --seconds "$SECONDS_PER_THREAD" \
    >/dev/null 2>&1 || { echo "report_scale: recording failed" >&2; exit 1; }
per=$("$BUILD/opprof" report one --limit 1 | awk '$1 == "samples" { print $2; exit }')
[ -n "$per" ] && [ "$per" -gt 0 ] || { echo "report_scale: no samples recorded" >&2; exit 1; }
copies=$(( (WANT + per - 1) / per ))
i=0
while [ $i -lt $copies ]; do
    i=$((i + 1))
    cp -al one "copy.$(printf %03d $i)" 2>/dev/null || cp -a one "copy.$(printf %03d $i)"
done
echo "report_scale: one recording of known_split --threads 2 at $HZ Hz: $per samples, $(du -sk one | cut -f1) KB;" \
     "$copies copies merged: $((per * copies)) samples"

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# one NAME OPPROF: one run of the merged report, "peak_kb wall_s cpu_s" appended to NAME.runs
one() {
    /usr/bin/time -f '%M %e %U %S' -o "$TMP/$1.time" "$2" report copy.* >"$TMP/$1.out" 2>"$TMP/$1.err" ||
        { echo "report_scale: $2 report failed:" >&2; cat "$TMP/$1.err" >&2; exit 1; }
    awk '{ printf "%s %s %.2f\n", $1, $2, $3 + $4 }' "$TMP/$1.time" >>"$TMP/$1.runs"
}
# row NAME: the medians of NAME's runs
row() {
    samples=$(awk '$1 == "samples" { print $2; exit }' "$TMP/$1.out")
    rss_kb=$(cut -d' ' -f1 "$TMP/$1.runs" | median)
    secs=$(cut -d' ' -f2 "$TMP/$1.runs" | median)
    cpu=$(cut -d' ' -f3 "$TMP/$1.runs" | median)
    awk -v n="$1" -v s="$samples" -v k="$rss_kb" -v t="$secs" -v c="$cpu" \
        'BEGIN { printf "%-8s %10d %10.1f %8.2f %8.2f %10.2f\n", n, s, k / 1024, t, c, k / 1024 / (s / 1e6) }'
}
# Old and new alternate run by run, so that a neighbour's load falls on both.
r=0
: >"$TMP/old.runs"
: >"$TMP/new.runs"
while [ $r -lt "$RUNS" ]; do
    r=$((r + 1))
    [ -n "$OLD" ] && one old "$OLD/opprof"
    one new "$BUILD/opprof"
done
printf '%-8s %10s %10s %8s %8s %10s\n' build samples "peak MB" "wall s" "CPU s" "MB/Msmp"
[ -n "$OLD" ] && row old
row new
if [ -n "$OLD" ]; then
    awk -v a="$(cut -d' ' -f1 "$TMP/old.runs" | median)" -v b="$(cut -d' ' -f1 "$TMP/new.runs" | median)" \
        -v c="$(cut -d' ' -f2 "$TMP/old.runs" | median)" -v d="$(cut -d' ' -f2 "$TMP/new.runs" | median)" \
        -v e="$(cut -d' ' -f3 "$TMP/old.runs" | median)" -v f="$(cut -d' ' -f3 "$TMP/new.runs" | median)" \
        'BEGIN { printf "new/old  peak RSS x%.3f, wall x%.3f, CPU x%.3f\n", b / a, d / c, f / e }'
    if cmp -s "$TMP/old.out" "$TMP/new.out"; then echo "reports: identical"; else echo "reports: DIFFERENT"; fi
fi
