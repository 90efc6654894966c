#!/bin/sh
# bench/report_scale_same.sh — do two builds of opprof write the same report
# and exports for the same result directories? Byte for byte, every output:
# the report (text, --sort self, --sort total, --group-by thread, csv, json),
# the report of DIR merged with itself, and each export format.
#
#   bench/report_scale_same.sh OLD_OPPROF NEW_OPPROF DIR...
#
# Used to check that the streaming report (issue 17) changed no output:
# OLD_OPPROF from main built in another directory. Prints one line per output
# and result, "same" or "DIFFERENT" (with the first differing lines), and
# exits 1 when anything differed.
set -u
[ $# -ge 3 ] || { echo "usage: $0 OLD_OPPROF NEW_OPPROF DIR..." >&2; exit 2; }
OLD=$1
NEW=$2
shift 2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/opprof-same.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT
bad=0
# run NAME ARGS...: both builds, outputs to $TMP/{old,new}.NAME (stdout) and
# the files they name with @OUT@.
compare() {
    name=$1
    shift
    for v in old new; do
        bin=$OLD
        [ $v = new ] && bin=$NEW
        args=
        for a in "$@"; do
            case $a in @OUT@) a="$TMP/$v.$name.file" ;; esac
            args="$args '$a'"
        done
        eval "\"$bin\" $args" >"$TMP/$v.$name" 2>"$TMP/$v.$name.err"
        echo "exit $?" >>"$TMP/$v.$name"
        [ -f "$TMP/$v.$name.file" ] && { cat "$TMP/$v.$name.file" >>"$TMP/$v.$name"; rm -f "$TMP/$v.$name.file"; }
    done
    if cmp -s "$TMP/old.$name" "$TMP/new.$name"; then
        printf '%-40s same (%s bytes)\n' "$name" "$(wc -c <"$TMP/new.$name")"
    else
        printf '%-40s DIFFERENT\n' "$name"
        cmp "$TMP/old.$name" "$TMP/new.$name" | head -2
        diff "$TMP/old.$name" "$TMP/new.$name" 2>/dev/null | head -6
        bad=1
    fi
}
for d in "$@"; do
    b=$(basename "$d")
    compare "$b.report" report "$d"
    compare "$b.report-self" report "$d" --sort self --limit 0
    compare "$b.report-total" report "$d" --sort total --limit 0
    compare "$b.report-thread" report "$d" --group-by thread
    compare "$b.report-module" report "$d" --group-by module
    compare "$b.report-csv" report "$d" --format csv
    compare "$b.report-json" report "$d" --format json
    compare "$b.report-merged" report "$d" "$d"
    compare "$b.report-memory" report "$d" --memory
    compare "$b.report-comm" report "$d" --comm python3,known_split,omp_regions_gomp
    compare "$b.report-threading" report "$d" --threading
    compare "$b.report-op" report "$d" --group-by op
    compare "$b.report-line" report "$d" --group-by line
    compare "$b.report-process" report "$d" --group-by process
    compare "$b.report-ranks" report "$d" "$d" --ranks
    for f in folded speedscope pprof callgrind pstats chrome-trace html flamegraph; do
        compare "$b.$f" export "$d" --$f @OUT@
    done
done
exit $bad
