#!/bin/sh
# test_stat.sh — opprof stat against the kernel's own accounting.
#   1. task-clock of a 1 s busy workload is within 5 % of its CPU time
#      (the workload's getrusage, and /usr/bin/time around opprof less
#      /usr/bin/time around `opprof stat -- true`);
#      page faults and context switches agree with /proc/self/stat and
#      /proc/self/status of a workload that makes a known number of each.
#   2. -e cycles: hardware counted, or exactly one line saying why not, and
#      the software counts still there (no zero-filled hardware rows).
#   3. the workload's exit status (and 128+signal) is opprof's.
#   4. a misspelt event: exit 2 and one line naming the close match.
#   5. record -e cycles without a PMU: one line, then task-clock sampling.
. "$(dirname "$0")/lib.sh"
require_opprof
PROBE="$OPPROF_BUILDDIR/tests/workloads/stat_probe"
[ -x "$PROBE" ] || skip "workload not built ($PROBE missing; run make check)"
make_workdir

# field TABLE NAME: the count (or msec) of the row NAME (":u" suffix ignored).
field() {
    awk -v n="$2" '{ name = ($2 == "msec") ? $3 : $2; sub(/:u$/, "", name)
        if (name == n) { v = $1; gsub(/,/, "", v); print v; exit } }' "$1"
}
# within A B PCT ABS: |A-B| <= max(PCT % of B, ABS)
within() {
    awk -v a="$1" -v b="$2" -v p="$3" -v m="$4" 'BEGIN { d = a - b; if (d < 0) d = -d
        t = b * p / 100; if (t < m) t = m; exit !(d <= t) }'
}

# ---- 1. software counts vs the kernel's accounting ---------------------------
# /usr/bin/time around opprof counts opprof's own CPU too (tens of ms, more in
# a sanitizer build): measured first around `opprof stat -- true`, and taken
# off below.
limited /usr/bin/time -f '%U %S' -o time0.txt "$OPPROF" stat -o t0.txt -- true >/dev/null 2>&1 ||
    die "opprof stat -- true failed"
log "+ opprof stat -o t1.txt -- stat_probe --seconds 1 --pages 3000 --sleeps 60"
limited /usr/bin/time -f '%U %S' -o time.txt "$OPPROF" stat -o t1.txt -- \
    "$PROBE" --seconds 1 --pages 3000 --sleeps 60 >out1.txt 2>err1.txt
st=$?
log "  exit status $st"
show table t1.txt 14
show stderr err1.txt 4
[ "$st" -eq 0 ] || die "opprof stat exited $st (expected 0)"
probe=$(grep '^stat_probe\[' err1.txt | tail -n 1)
[ -n "$probe" ] || die "the workload printed no stat_probe line"
kv() { printf '%s\n' "$probe" | sed -n "s/.* $1=\([0-9]*\).*/\1/p"; }
tc_ms=$(field t1.txt task-clock)
cpu_ms=$(awk -v n="$(kv cpu_ns)" 'BEGIN { printf "%.2f", n / 1e6 }')
base_ms=$(awk '{ printf "%.2f", ($1 + $2) * 1000 }' time0.txt 2>/dev/null)
time_ms=$(awk -v b="$base_ms" '{ printf "%.2f", ($1 + $2) * 1000 - b }' time.txt 2>/dev/null)
log "task-clock ${tc_ms} ms; workload getrusage ${cpu_ms} ms; /usr/bin/time ${time_ms} ms (opprof + workload, less ${base_ms} ms for opprof stat -- true)"
if [ -z "$tc_ms" ]; then
    fail "no task-clock row in the table"
else
    within "$tc_ms" "$cpu_ms" 5 0 && pass "task-clock within 5 % of the workload's CPU time" ||
        fail "task-clock ${tc_ms} ms vs the workload's CPU time ${cpu_ms} ms: more than 5 % apart"
    within "$tc_ms" "$time_ms" 5 20 && pass "task-clock within 5 % of /usr/bin/time's user+sys (less opprof's own)" ||
        fail "task-clock ${tc_ms} ms vs /usr/bin/time ${time_ms} ms: more than 5 % apart"
fi
pf=$(field t1.txt page-faults)
flt=$(( $(kv minflt) + $(kv majflt) ))
log "page-faults ${pf}; /proc/self/stat minflt+majflt ${flt} (3000 touched pages)"
# /proc also counts the few faults between fork and exec; perf counts from exec.
if [ -n "$pf" ] && [ "$pf" -ge 3000 ] && within "$pf" "$flt" 5 80; then
    pass "page faults agree with /proc"
else
    fail "page-faults ${pf:-missing} vs /proc ${flt} (expected >= 3000 and within 5 %)"
fi
cs=$(field t1.txt context-switches)
csw=$(( $(kv vcsw) + $(kv ivcsw) ))
log "context-switches ${cs}; /proc/self/status voluntary+nonvoluntary ${csw} (60 sleeps)"
if [ -n "$cs" ] && [ "$cs" -ge 60 ] && within "$cs" "$csw" 10 5; then
    pass "context switches agree with /proc"
else
    fail "context-switches ${cs:-missing} vs /proc ${csw} (expected >= 60 and within 10 %)"
fi
util=$(awk '/task-clock/ { for (i = 1; i <= NF; i++) if ($i == "CPUs") print $(i-1) }' t1.txt)
# The truth is what the workload itself got: its CPU time over its own wall
# time (from main to its last line). On an idle machine that is ~1 CPU; on a
# busy one a single thread gets less, and opprof must say how much less.
# opprof's wall time also holds fork, exec and the loader (a few ms of ~1.1 s),
# so 10 % is room for those and the rounding of a 3-digit figure, not for load.
own_util=$(awk -v c="$(kv cpu_ns)" -v w="$(kv wall_ns)" 'BEGIN { if (w > 0) printf "%.3f", c / w }')
log "CPU utilization ${util} CPUs; the workload's own CPU time / wall time ${own_util} (load: $(cut -d' ' -f1-3 /proc/loadavg))"
within "${util:-0}" "${own_util:-1}" 10 0 && pass "CPU utilization within 10 % of the workload's own (CPU time / wall time)" ||
    fail "utilization ${util:-missing}, the workload's own ${own_util:-missing}"

# ---- 2. -e cycles: counted, or one line saying why -----------------------------
log "+ opprof stat -e cycles -o t2.txt -- stat_probe --seconds 0.2 --pages 10 --sleeps 1"
limited "$OPPROF" stat -e cycles -o t2.txt -- "$PROBE" --seconds 0.2 --pages 10 --sleeps 1 >out2.txt 2>err2.txt
st=$?
show stderr err2.txt 4
[ "$st" -eq 0 ] || fail "opprof stat -e cycles exited $st (expected 0)"
nreason=$(cat err2.txt out2.txt t2.txt | grep -c 'hardware events not counted')
if [ -n "$(field t2.txt cycles)" ]; then
    [ "$nreason" -eq 0 ] && pass "cycles counted (a PMU is present)" ||
        fail "cycles counted but a no-PMU line was printed too"
else
    [ "$nreason" -eq 1 ] && pass "no PMU: the reason is printed exactly once" ||
        fail "no cycles row and $nreason no-PMU lines (expected exactly 1)"
    grep 'hardware events not counted' err2.txt | grep -Eq 'no PMU|perf_event_paranoid' ||
        fail "the no-PMU line names no reason (virtual machine / perf_event_paranoid / unsupported CPU)"
    grep -Eq '^ +[0-9,]+ +(cycles|instructions)' t2.txt && fail "a zero-filled hardware row was printed"
fi
[ -n "$(field t2.txt task-clock)" ] && [ -n "$(field t2.txt page-faults)" ] &&
    pass "software events still counted with -e cycles" || fail "software rows missing with -e cycles"

# ---- 3. exit status ---------------------------------------------------------------
limited "$OPPROF" stat -o t3.txt -- "$PROBE" --seconds 0 --pages 0 --sleeps 0 --exit 7 >/dev/null 2>&1
st=$?
[ "$st" -eq 7 ] && pass "exit status 7 propagated" || fail "workload exit 7, opprof stat exited $st"
grep -q 'workload exit status 7' t3.txt || fail "the table does not show exit status 7"
limited "$OPPROF" stat -o t4.txt -- sh -c 'kill -TERM $$' >/dev/null 2>&1
st=$?
[ "$st" -eq 143 ] && pass "killed by SIGTERM: exit 143" || fail "workload killed by SIGTERM, opprof stat exited $st (expected 143)"
limited "$OPPROF" stat -- /nonexistent/command >/dev/null 2>err5.txt
st=$?
[ "$st" -eq 127 ] && pass "command not found: 127" || fail "missing command: exit $st (expected 127)"

# ---- 4. a misspelt event -------------------------------------------------------------
limited "$OPPROF" stat -e cycels -- true >/dev/null 2>err6.txt
st=$?
show stderr err6.txt 2
if [ "$st" -eq 2 ] && [ "$(wc -l <err6.txt)" -eq 1 ] && grep -q "closest known: cycles" err6.txt; then
    pass "unknown event: exit 2, one line with the close match"
else
    fail "unknown event cycels: exit $st, expected 2 and one line suggesting cycles"
fi

# ---- 5. record -e cycles ---------------------------------------------------------------
limited "$OPPROF" record -q -e cycles -o rec -- "$PROBE" --seconds 0.3 --pages 0 --sleeps 0 >/dev/null 2>err7.txt
st=$?
show stderr err7.txt 3
[ "$st" -eq 0 ] || fail "opprof record -e cycles exited $st"
[ -d rec ] || fail "opprof record -e cycles wrote no result directory"
n=$(grep -c 'task-clock timer' err7.txt)
[ "$n" -eq 1 ] && pass "record -e cycles: one line, then the task-clock timer" || fail "record -e cycles: $n task-clock fallback lines (expected 1)"
finish
