#!/bin/sh
# test_report_filters.sh — `opprof report --pid/--tid/--comm` keep the samples
# of some processes or threads (perf report's filters of the same names):
#   - known_split --threads 2 --fork: the forked child runs two workers
#     (split-w0, split-w1); the parent only waits. Each filter's sample count
#     equals that thread's or process's row of --group-by thread / process of
#     the unfiltered report, exactly;
#   - within one worker, spin_a/spin_b/spin_c keep the known 5:3:2 split;
#   - filters combine (--pid CHILD --comm split-w1 = split-w1's row), lists
#     work (--tid A,B = both rows), the report says it is filtered;
#   - a filter nothing matches, or a malformed id, is one error naming the
#     threads there are, exit status 2.
. "$(dirname "$0")/lib.sh"
require_all

record "$WORK/r" -F "$SPLIT_FREQ" -- "$KNOWN_SPLIT" --threads 2 --fork --seconds "$SECONDS_OF_WORK"
[ "$RECORD_STATUS" -eq 0 ] || die "record failed"
report_json "$WORK/r" "$WORK/threads.json" --group-by thread || die "report --group-by thread failed"
report_json "$WORK/r" "$WORK/procs.json" --group-by process || die "report --group-by process failed"

# The ids from the unfiltered thread view: "tid T (name) pid P".
eval "$(python3 - "$WORK/threads.json" <<'EOF'
import json, re, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    m = re.match(r"tid (\d+) \((.*)\) pid (\d+)", r["name"])
    if m and m.group(2) in ("split-w0", "split-w1"):
        key = m.group(2).replace("-", "_")
        print("TID_%s=%s PID_CHILD=%s N_%s=%d" % (key, m.group(1), m.group(3), key, r["samples"]))
EOF
)"
[ -n "${TID_split_w0:-}" ] && [ -n "${TID_split_w1:-}" ] || die "the thread view lacks split-w0/split-w1"
N_CHILD=$(python3 -c "
import json, sys
for r in json.load(open('$WORK/procs.json'))['rows']:
    if r['name'].startswith('pid $PID_CHILD'): print(r['samples'])")
log "child pid $PID_CHILD ($N_CHILD samples): split-w0 tid $TID_split_w0 ($N_split_w0), split-w1 tid $TID_split_w1 ($N_split_w1)"

# filter_samples NAME EXPECTED OPTIONS...: the filtered report's samples (the
# thread view: each sample in exactly one row).
filter_samples() {
    _name=$1 _want=$2
    shift 2
    report_json "$WORK/r" "$WORK/f.json" --group-by thread "$@" || { fail "$_name: report $* failed"; return; }
    _got=$(python3 -c "
import json
d = json.load(open('$WORK/f.json'))
print(sum(r['samples'] for r in d['rows']), any('filtered with' in w for w in d['warnings']))")
    if [ "$_got" = "$_want True" ]; then
        pass "$_name: $* keeps $_want samples and says it is filtered"
    else
        fail "$_name: $* gave '$_got', expected '$_want True' (samples, filter named in the warnings)"
    fi
}
filter_samples "tid" "$N_split_w0" --tid "$TID_split_w0"
filter_samples "comm" "$N_split_w1" --comm split-w1
filter_samples "pid" "$N_CHILD" --pid "$PID_CHILD"
filter_samples "pid+comm" "$N_split_w1" --pid "$PID_CHILD" --comm split-w1
filter_samples "tid list" "$((N_split_w0 + N_split_w1))" --tid "$TID_split_w0,$TID_split_w1"

# One worker alone still shows the known split (lib.sh's TOL_PP note: each
# worker has about half the samples, so its error is ~1.4x the whole run's;
# 3 pp).
report_json "$WORK/r" "$WORK/w0.json" --comm split-w0 || fail "report --comm split-w0 failed"
python3 - "$WORK/w0.json" <<'EOF' || fail "split-w0's own split is not 5:3:2"
import json, sys
rows = {r["name"]: r["self_pct"] for r in json.load(open(sys.argv[1]))["rows"]}
bad = 0
for name, want in (("spin_a", 50), ("spin_b", 30), ("spin_c", 20)):
    got = rows.get(name, 0)
    print("split-w0 %s %.2f %% (known %d %%)" % (name, got, want))
    bad += abs(got - want) > 3
sys.exit(1 if bad else 0)
EOF

# Errors: one sentence, exit 2, naming what there is.
limited "$OPPROF" report "$WORK/r" --tid 1 >"$WORK/e1.out" 2>"$WORK/e1.err"
st=$?
if [ "$st" -eq 2 ] && grep -q "no sample matches --tid 1" "$WORK/e1.err" && grep -q "split-w0" "$WORK/e1.err"; then
    pass "--tid 1: exit 2, '$(cut -c1-80 "$WORK/e1.err")...'"
else
    fail "--tid 1: exit $st, stderr: $(cat "$WORK/e1.err")"
fi
limited "$OPPROF" report "$WORK/r" --pid 12x >"$WORK/e2.out" 2>"$WORK/e2.err"
st=$?
if [ "$st" -eq 2 ] && grep -q -- "--pid takes process ids" "$WORK/e2.err" && [ "$(wc -l <"$WORK/e2.err")" -eq 1 ]; then
    pass "--pid 12x: exit 2, one line"
else
    fail "--pid 12x: exit $st, stderr: $(cat "$WORK/e2.err")"
fi
finish
