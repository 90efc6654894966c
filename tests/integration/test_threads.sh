#!/bin/sh
# test_threads.sh — known_split --threads 2: the same 50/30/20 split over all
# samples, ~100 % under run_work and worker_main, and two worker threads
# (split-w0, split-w1) in --group-by thread with about equal samples.
# Then a worker that names itself only after 0.2 s of CPU time and exits
# before the process does: its thread row has the name it ended with, as
# perf's comm events give (the agent's status poll sees the rename; before
# it, the name read at the first sample stayed, and --comm split-w0 found
# nothing).
. "$(dirname "$0")/lib.sh"
require_all

record_checked_split "$WORK/res" worker_main --threads 2 --seconds "$SECONDS_OF_WORK" ||
    die "no report to check further"
pid=$(worker_pid "$RECORD_ERR")
log "workload pid: ${pid:-unknown}"

report_json "$WORK/res" "$WORK/thread.json" --group-by thread --sort samples ||
    die "opprof report --group-by thread failed"
pycheck '
doc = load(sys.argv[1]); pid = sys.argv[2]
rows = doc.get("rows", [])
tw = doc.get("total_weight", 0)
print("threads (--group-by thread):")
for r in rows:
    print("  %-40s samples %6d  total %6.2f%%" % (r.get("name"), r.get("samples", 0), r.get("total_pct", 0)))
workers = [r for r in rows if re.search(r"\(split-w[01]\)", str(r.get("name")))]
if len(workers) != 2:
    fail("expected 2 rows for threads split-w0 and split-w1, found %d" % len(workers))
    sys.exit(failures)
for r in workers:
    m = re.match(r"^(tid )?(\d+) \((.*)\) pid (\d+)$", str(r.get("name")))
    if not m:
        fail("thread row name %r is not \"tid T (name) pid P\"" % r.get("name"))
    elif pid and m.group(4) != pid:
        fail("thread row %r: pid %s, the workload pid is %s" % (r.get("name"), m.group(4), pid))
    elif pid and m.group(2) == pid:
        fail("thread row %r: a worker thread has the tid of the main thread" % r.get("name"))
a, b = (r.get("samples", 0) for r in workers)
share = sum(r.get("total_pct", 0) for r in workers)
print("worker samples %d and %d (ratio %.3f), together %.2f%% of all (expected >= 95%%)" % (a, b, min(a, b) / max(a, b, 1), share))
if min(a, b) < 0.8 * max(a, b):
    fail("worker threads have unequal samples: %d vs %d (same work each, expected within 20%%)" % (a, b))
if share < 95.0:
    fail("worker threads hold %.2f%% of the samples, expected >= 95%%" % share)
' "$WORK/thread.json" "${pid:-}"

record "$WORK/late" -- "$KNOWN_SPLIT" --threads 1 --name-after 0.2 --seconds 1.5
[ "$RECORD_STATUS" -eq 0 ] || die "known_split --name-after failed under opprof record (exit $RECORD_STATUS)"
report_json "$WORK/late" "$WORK/late.json" --group-by thread --sort samples || die "opprof report --group-by thread failed"
pycheck '
doc = load(sys.argv[1])
rows = {str(r.get("name")): r.get("samples", 0) for r in doc.get("rows", [])}
print("threads, worker named after 0.2 s: %s" % rows)
named = sum(n for k, n in rows.items() if "(split-w0)" in k)
total = sum(rows.values())
# The worker does ~1.7 of the ~1.8 s of CPU time (the main thread calibrates
# for ~0.03 s and waits): its row, named split-w0, holds most samples.
if named < 0.8 * total:
    fail("the worker renamed after its first samples: %d of %d samples under split-w0 (expected >= 80 %%)" % (named, total))
' "$WORK/late.json"
if "$OPPROF" report "$WORK/late" --comm split-w0 >/dev/null 2>"$WORK/late-comm.err"; then
    pass "report --comm split-w0 finds the thread that took that name after its first samples"
else
    fail "report --comm split-w0: $(head -n 1 "$WORK/late-comm.err")"
fi

finish
