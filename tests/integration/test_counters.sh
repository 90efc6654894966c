#!/bin/sh
# test_counters.sh — per-sample counters (record -e) attributed like time.
#   1. record -e page-faults on fault_split: touch_pages writes one byte in
#      each of PAGES fresh pages (PAGES faults, THP refused), spin_kernel
#      touches no new memory. touch_pages gets >= 90 % of the page faults and
#      between 90 % and 101 % of PAGES; spin_kernel at most 5 % of PAGES.
#      Tolerance: counts are read at samples, so the faults between the
#      last sample in touch_pages and the first one after it land on the next
#      sample (spin_kernel); the fault handling is kernel time the user-mode
#      timer does not sample, so one sample interval spans ~150 faults here.
#      Page faults before a thread's first sample (program start) are not
#      attributed at all.
#   2. record -e cycles without a PMU: exactly one line naming the reason,
#      task-clock samples, and no cycles/CPI columns in the report.
#   3. the committed fixture (tests/fixtures/counters, hardware counters
#      with synthesized values, README there): CPI/IPC, LLC miss % and MPKI,
#      bandwidth estimate per function against hand-computed values, the
#      CPI > 1 finding on spin_b only, and the multiplexing lines.
#   4. (run before 3) -c: samples led by page-faults every 100 events (exact
#      counts: 400 samples, all in touch_pages, 40000 events), a hardware
#      leader without a PMU (one line, the timer), bad uses of -c, and diff
#      refusing page-fault shares against CPU-time shares.
. "$(dirname "$0")/lib.sh"
require_python3
require_opprof
FAULTS="$OPPROF_BUILDDIR/tests/workloads/fault_split"
[ -x "$FAULTS" ] || skip "workload not built ($FAULTS missing; run make check)"
FIXTURE="$OPPROF_SRCDIR/tests/fixtures/counters/result"
make_workdir

PAGES=40000

# ---- 1. page faults per function ---------------------------------------------
record pf -e page-faults -- "$FAULTS" --pages "$PAGES" --seconds 1
[ "$RECORD_STATUS" -eq 0 ] || die "opprof record -e page-faults exited $RECORD_STATUS"
grep -q '^counters=page-faults$' pf/info && pass "info names the counter: counters=page-faults" ||
    fail "info has no counters=page-faults line"
report_json pf pf.json || die "opprof report on pf failed"
"$OPPROF" report pf --limit 4 >pf.txt 2>&1
show report pf.txt 14
pycheck '
doc = load(sys.argv[1]); pages = int(sys.argv[2])
rows = rows_by_name(doc)
def faults(name):
    return sum((r.get("counters") or {}).get("page-faults") or 0 for r in rows.get(name, []))
total = sum((r.get("counters") or {}).get("page-faults") or 0 for r in doc["rows"])
touch, spin = faults("touch_pages"), faults("spin_kernel")
print("measured: page faults touch_pages=%d spin_kernel=%d all rows=%d; expected touch_pages ~%d, spin_kernel ~0"
      % (touch, spin, total, pages))
if total and touch >= 0.9 * total: ok("touch_pages has %.1f %% of the page faults (>= 90 %%)" % (100.0 * touch / total))
else: fail("touch_pages has %d of %d page faults (< 90 %%)" % (touch, total))
if 0.9 * pages <= touch <= 1.01 * pages: ok("touch_pages %d faults within [90 %%, 101 %%] of %d pages" % (touch, pages))
else: fail("touch_pages %d faults, expected within [90 %%, 101 %%] of %d pages" % (touch, pages))
if spin <= 0.05 * pages: ok("spin_kernel %d faults <= 5 %% of the pages" % spin)
else: fail("spin_kernel %d faults > 5 %% of %d pages" % (spin, pages))
sys.exit(failures)
' pf.json "$PAGES" || FAILURES=$((FAILURES + 1))

# ---- 2. -e cycles without a PMU -------------------------------------------------
record cy -e cycles -- "$FAULTS" --pages 1000 --seconds 0.3
[ "$RECORD_STATUS" -eq 0 ] || fail "opprof record -e cycles exited $RECORD_STATUS (expected 0)"
n=$(grep -c '^opprof record: ' "$RECORD_ERR" | tr -d ' ')
pmu=$(grep -c 'PMU' "$RECORD_ERR" | tr -d ' ')
log "measured: $n 'opprof record:' lines before the summary, $pmu naming the PMU; expected 1 + the summary line, 1"
if grep -q 'opprof record: cycles not counted: no PMU' "$RECORD_ERR" && [ "$pmu" -eq 1 ]; then
    pass "one line says cycles is not counted and why"
else
    fail "no single 'cycles not counted: no PMU' line on stderr"
fi
grep -q '^event=task-clock$' cy/info && pass "sampled with task-clock" || fail "info event is not task-clock"
grep -q '^counters=' cy/info && fail "info lists counters although none could be opened" ||
    pass "no counters= line in info"
"$OPPROF" report cy --format csv >cy.csv 2>cy.err || fail "report of the -e cycles result failed"
head -n 1 cy.csv | sed 's/^/  csv header: /'
if head -n 1 cy.csv | grep -Eqi 'cycles|cpi|ipc'; then
    fail "the report has cycles/CPI columns although cycles was not counted"
else
    pass "no cycles/CPI/IPC columns"
fi
samples=$(awk -F, 'NR > 1 { s += $7 } END { print s + 0 }' cy.csv)
[ "$samples" -gt 0 ] && pass "task-clock samples recorded ($samples row samples)" || fail "no samples"

# ---- 4. sampling on an event (-c) -------------------------------------------------
# -e page-faults -c 100: a sample every 100 page faults instead of every 1 ms
# of CPU time. touch_pages makes all PAGES faults after the agent starts
# (spin_kernel none), and the kernel counts exactly: PAGES/100 samples, all
# in touch_pages; rows count events, not time.
record lead -e page-faults -c 100 -- "$FAULTS" --pages "$PAGES" --seconds 1
[ "$RECORD_STATUS" -eq 0 ] || die "opprof record -e page-faults -c 100 exited $RECORD_STATUS"
grep -q '^event=page-faults$' lead/info && grep -q '^sample_period=100$' lead/info &&
    pass "info: event=page-faults, sample_period=100" || fail "info does not say event=page-faults, sample_period=100"
grep -q '^period_ns=' lead/info && fail "info has period_ns although samples are not time"
report_json lead lead.json || die "opprof report on the -c result failed"
"$OPPROF" report lead --limit 3 >lead.txt 2>&1
show report lead.txt 10
pycheck '
doc = load(sys.argv[1]); pages = int(sys.argv[2])
by = rows_by_name(doc)
tw = doc.get("total_weight", 0)
print("samples %d (expected %d = %d faults / 100); event %r, sample_period %r" %
      (tw, pages // 100, pages, doc.get("event"), doc.get("sample_period")))
if doc.get("event") != "page-faults" or doc.get("sample_period") != 100:
    fail("JSON event/sample_period are %r/%r, expected page-faults/100" % (doc.get("event"), doc.get("sample_period")))
if not pages // 100 <= tw <= pages // 100 + 3:
    fail("%d samples, expected %d (+3 for faults outside touch_pages)" % (tw, pages // 100))
t = (by.get("touch_pages") or [{}])[0]
print("touch_pages: self %.2f %%, %s events; spin_kernel rows: %s" %
      (t.get("self_pct", 0), t.get("self_events"), [r.get("samples") for r in by.get("spin_kernel", [])]))
if t.get("self_pct", 0) < 99.0:
    fail("touch_pages has %.2f %% of the page-fault samples, expected >= 99 %%" % t.get("self_pct", 0))
if abs((t.get("self_events") or 0) - pages) > 0.02 * pages:
    fail("touch_pages self_events %r, expected %d +- 2 %%" % (t.get("self_events"), pages))
if t.get("self_ns", 0) is not None:
    fail("self_ns is %r for samples that are not time (expected null)" % t.get("self_ns"))
if by.get("spin_kernel"):
    fail("spin_kernel (no page faults) has page-fault samples")
' lead.json "$PAGES"
grep -q 'one sample per 100 events: shares are shares of page-faults, not time' lead.txt &&
    grep -q 'Self events total: 40000 page-faults' lead.txt &&
    pass "the text report says what a sample is and totals events" ||
    fail "the text report does not say 'one sample per 100 events' / 'Self events total: 40000 page-faults'"

# diff: page-fault shares against CPU-time shares is refused; two page-fault
# recordings compare, with a note that there is no time.
"$OPPROF" diff lead cy >diff.out 2>diff.err
st=$?
if [ "$st" -eq 2 ] && grep -q 'A was sampled on page-faults, B on task-clock' diff.err; then
    pass "diff of page-fault and CPU-time samples: exit 2, $(cat diff.err)"
else
    fail "diff of page-fault and CPU-time samples: exit $st (expected 2 and one line naming both events)"
fi
"$OPPROF" diff lead lead >diff.out 2>diff.err && grep -q 'both were sampled on page-faults' diff.err &&
    grep -q 'touch_pages' diff.out && pass "diff of two page-fault recordings compares shares, says so" ||
    fail "diff lead lead did not compare with the note"

# report over both: their samples do not add up, so no merged table.
"$OPPROF" report lead cy >merge.out 2>merge.err
st=$?
if [ "$st" -eq 2 ] && [ "$(wc -l <merge.err)" -eq 1 ] && grep -q 'do not add up' merge.err; then
    pass "report of a page-fault and a CPU-time result together: exit 2, $(cat merge.err)"
else
    fail "report lead cy: exit $st (expected 2 and one line saying the samples do not add up)"
    show stderr merge.err 4
fi

# A hardware leader without a PMU: one line, then the timer; with a PMU
# (another machine): samples on cycles.
record lcy -e cycles,instructions -c 100000 -- "$FAULTS" --pages 1000 --seconds 0.3
[ "$RECORD_STATUS" -eq 0 ] || fail "opprof record -e cycles,instructions -c 100000 exited $RECORD_STATUS (expected 0)"
if grep -q '^event=cycles$' lcy/info; then
    grep -q '^sample_period=100000$' lcy/info && pass "a PMU here: sampled on cycles every 100000" ||
        fail "event=cycles without sample_period=100000"
elif grep -q 'cycles can be counted but cannot lead samples here' "$RECORD_ERR"; then
    # A PMU that counts but raises no overflow signals (some VMs): one line, the timer.
    grep -q '^event=task-clock$' lcy/info && pass "a PMU that cannot sample: one line, sampled on task-clock" ||
        fail "cycles cannot lead, but info's event is not task-clock"
else
    pmu=$(grep -c 'PMU' "$RECORD_ERR" | tr -d ' ')
    if [ "$pmu" -eq 1 ] && grep -q 'cycles, instructions not counted: no PMU.*sampling with the task-clock timer' "$RECORD_ERR" &&
        grep -q '^event=task-clock$' lcy/info; then
        pass "no PMU: one line names cycles and instructions and the reason; sampled on task-clock"
    else
        fail "no PMU: expected one line 'cycles, instructions not counted: no PMU ... task-clock timer' ($pmu lines name the PMU)"
        show stderr "$RECORD_ERR" 6
    fi
fi
# Bad uses: one line each, exit 2, nothing run.
for args in "-c 100" "-e task-clock -c 100" "-e page-faults -c 0" "-e page-faults -c 100 -F 500" "-e cycles -c 1000" \
    "-e page-faults -c 100 -p 1"; do
    # shellcheck disable=SC2086
    "$OPPROF" record -o bad $args -- true >bad.out 2>bad.err
    st=$?
    if [ "$st" -eq 2 ] && [ "$(wc -l <bad.err)" -eq 1 ] && [ ! -d bad ]; then
        pass "record $args: exit 2, one line: $(cat bad.err)"
    else
        fail "record $args: exit $st, $(wc -l <bad.err) lines (expected 2, one line, no result dir)"
        show stderr bad.err 4
    fi
    rm -rf bad
done

# ---- 3. the hardware-counter fixture ----------------------------------------------
[ -f "$FIXTURE/info" ] || die "fixture missing: $FIXTURE"
report_json "$FIXTURE" fx.json || die "opprof report on the fixture failed"
"$OPPROF" report "$FIXTURE" --limit 3 >fx.txt 2>&1 || fail "text report on the fixture failed"
show report fx.txt 22
"$OPPROF" report "$FIXTURE" --format csv >fx.csv 2>&1 || fail "csv report on the fixture failed"
head -n 1 fx.csv | sed 's/^/  csv header: /'
head -n 1 fx.csv | grep -q 'cycles,instructions,cache-references,cache-misses,cpi,ipc,llc_miss_pct,llc_misses_per_1k_instructions,bandwidth_est_gb_per_s' &&
    pass "csv has the counter and metric columns" || fail "csv header lacks the counter columns"
pycheck '
doc = load(sys.argv[1])
rows = rows_by_name(doc)
expect = {  # hand-computed in tests/fixtures/counters/README.md
    "spin_a": {"cpi": 0.5, "ipc": 2.0, "llc_miss_pct": 0.0, "llc_misses_per_1k_instructions": 0.0,
               "bandwidth_est_gb_per_s": 0.0},
    "spin_b": {"cpi": 2.0, "ipc": 0.5, "llc_miss_pct": 50.0, "llc_misses_per_1k_instructions": 20.0,
               "bandwidth_est_gb_per_s": 1.28},
    "spin_c": {"cpi": 1.0, "ipc": 1.0, "llc_miss_pct": 0.0, "llc_misses_per_1k_instructions": 0.0,
               "bandwidth_est_gb_per_s": 0.0},
}
for fn, want in expect.items():
    if fn not in rows: fail("no row for " + fn); continue
    got = rows[fn][0].get("counters") or {}
    n = rows[fn][0]["samples"]
    # scaled counts: per sample 100,000 refs for spin_a (raw 50,000 x 2)
    print("measured %s (%d samples): %s" % (fn, n, ", ".join("%s=%s" % (k, got.get(k)) for k in want)))
    for k, v in want.items():
        g = got.get(k)
        if g is None or abs(g - v) > 1e-3 * max(1.0, v): fail("%s %s = %s, expected %s" % (fn, k, g, v))
    if fn == "spin_a" and got.get("cache-references") != 100000 * n:
        fail("spin_a cache-references %s, expected %d (raw halves scaled by enabled/running = 2)"
             % (got.get("cache-references"), 100000 * n))
if failures == 0: ok("CPI, IPC, LLC miss %, MPKI and GB/s est. of spin_a/b/c match the hand-computed values")
cpi = [f for f in doc.get("findings", []) if f.get("id") == "high_cpi"]
print("measured: CPI findings: %s" % [f.get("text") for f in cpi])
if len(cpi) == 1 and cpi[0]["text"].startswith("spin_b has CPI 2.00") and "memory-bound" in cpi[0]["text"]:
    ok("one CPI finding, on spin_b, memory-bound")
else: fail("expected exactly one high_cpi finding on spin_b (memory-bound)")
sys.exit(failures)
' fx.json || FAILURES=$((FAILURES + 1))
grep -q 'multiplexed cache-misses counted 50.0 % of the time' fx.txt &&
    pass "header shows the multiplexing ratio (50.0 %)" || fail "no multiplexing line for cache-misses"
grep -q 'GB/s est\.' fx.txt && pass "bandwidth column labelled as an estimate" || fail "no 'GB/s est.' label"
finish
