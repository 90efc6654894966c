#!/bin/sh
# test_vs_perf.sh — the same workload under perf and under opprof: self % of
# spin_a/spin_b/spin_c must agree within 3 pp, and opprof's must be within
# TOL_PP (2) of 50/30/20. Two tools sampling one 6 s run each have ~0.7 pp of
# binomial noise per share apiece, plus aliasing of a fixed 1 ms period with
# the workload's rounds: 2 pp between them failed 1 CI run in ~10 (3.5 pp
# seen, each tool within 2 pp of the truth); 3 pp is over 3 sigma.
# perf: perf record -e cpu-clock -F 1000 --call-graph dwarf. Skipped (77) when
# perf is missing or cannot record here.
. "$(dirname "$0")/lib.sh"
require_all
command -v perf >/dev/null 2>&1 || skip "perf not found"
VS_PERF_SECONDS=$((2 * SECONDS_OF_WORK))
VS_PERF_TOL_PP=3

# One measurement: perf, then opprof, then the comparison (0 when they agree).
measure() {
    log "+ perf record -e cpu-clock -F 1000 --call-graph dwarf -o perf.data -- known_split --seconds $VS_PERF_SECONDS"
    if ! limited perf record -q -e cpu-clock -F 1000 --call-graph dwarf -o "$WORK/perf.data" -- \
            "$KNOWN_SPLIT" --seconds "$VS_PERF_SECONDS" >"$WORK/perf-record.out" 2>"$WORK/perf-record.err"; then
        show perf "$WORK/perf-record.err" 5
        skip "perf record failed here (see above)"
    fi
    if ! limited perf report -i "$WORK/perf.data" --stdio --no-children --sort sym -q -g none \
            >"$WORK/perf-report.txt" 2>"$WORK/perf-report.err"; then
        show perf "$WORK/perf-report.err" 5
        skip "perf report failed here (see above)"
    fi
    grep -Eq '^ *[0-9.]+% ' "$WORK/perf-report.txt" || skip "perf report printed no percentages"

    record_split "$WORK/res" --seconds "$VS_PERF_SECONDS"
    report_json "$WORK/res" "$WORK/func.json" --group-by function || die "opprof report failed"

    pycheck '
doc = load(sys.argv[1]); tol = float(sys.argv[3]); tol_vs_perf = float(sys.argv[4])
perf = {}
for line in open(sys.argv[2]):
    m = re.match(r"^\s*([0-9.]+)%\s+\[[.k]\]\s+(\S+)", line)
    if m:
        perf[m.group(2)] = perf.get(m.group(2), 0.0) + float(m.group(1))
ours = {}
for r in doc.get("rows", []):
    ours[r.get("name")] = ours.get(r.get("name"), 0.0) + r.get("self_pct", 0.0)
print("%-8s %9s %9s %9s %9s" % ("self %", "opprof", "perf", "diff", "truth"))
for name, truth in (("spin_a", 50.0), ("spin_b", 30.0), ("spin_c", 20.0)):
    o, p = ours.get(name), perf.get(name)
    print("%-8s %9s %9s %9s %9.1f" % (name, "-" if o is None else "%.2f" % o, "-" if p is None else "%.2f" % p,
                                      "-" if o is None or p is None else "%+.2f" % (o - p), truth))
    if o is None:
        fail("opprof report has no %s" % name)
    elif p is None:
        fail("perf report has no %s" % name)
    elif abs(o - p) > tol_vs_perf:
        fail("%s: opprof %.2f%% vs perf %.2f%% differ by more than %.1f pp" % (name, o, p, tol_vs_perf))
    if o is not None and abs(o - truth) > tol:
        fail("%s: opprof %.2f%% is more than %.1f pp off the ground truth %.1f%%" % (name, o, tol, truth))
    if p is not None and abs(p - truth) > tol:
        print("note: perf itself is %.2f pp off the ground truth for %s" % (p - truth, name))
' "$WORK/func.json" "$WORK/perf-report.txt" "$TOL_PP" "$VS_PERF_TOL_PP"
}

# As in lib.sh's record_checked_split: a disagreement is measured again once
# (a busy neighbour on the shared VM moves perf's figures too).
saved=$FAILURES
if ! measure; then
    log "note: opprof and perf disagreed on attempt 1 (load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)); measuring again"
    FAILURES=$saved
    rm -rf "$WORK/res" "$WORK/perf.data"
    measure
fi

finish
