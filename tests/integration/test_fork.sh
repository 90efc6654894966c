#!/bin/sh
# test_fork.sh — known_split --fork and --exec: the work runs in a child
# process (forked; forked then exec'd); the parent only waits. The child's
# samples must be recorded with the same 50/30/20 split, and --group-by process
# must show the child pid with ~all samples.
. "$(dirname "$0")/lib.sh"
require_all

for mode in fork exec; do
    log "=== --$mode"
    # A hang fails the test but the other mode still runs.
    RECORD_HANG_OK=1
    record_checked_split "$WORK/res-$mode" main --"$mode" --seconds "$SECONDS_OF_WORK" || continue
    RECORD_HANG_OK=0
    child=$(worker_pid "$RECORD_ERR")
    [ -n "$child" ] || die "could not find the child pid in the workload output"
    log "child pid: $child"

    if report_json "$WORK/res-$mode" "$WORK/proc-$mode.json" --group-by process; then
        pycheck '
doc = load(sys.argv[1]); child = sys.argv[2]; mode = sys.argv[3]
rows = doc.get("rows", [])
print("processes (--group-by process):")
for r in rows:
    print("  %-60s samples %6d  total %6.2f%%" % (r.get("name"), r.get("samples", 0), r.get("total_pct", 0)))
for r in rows:
    if not re.match(r"^pid \d+ \S", str(r.get("name"))):
        fail("process row name %r is not \"pid P exe\"" % r.get("name"))
mine = [r for r in rows if str(r.get("name")).startswith("pid %s " % child)]
share = sum(r.get("total_pct", 0) for r in mine)
print("--%s: child pid %s holds %.2f%% of the samples (expected >= 95%%)" % (mode, child, share))
if not mine:
    fail("--%s: no row for the child pid %s" % (mode, child))
elif share < 95.0:
    fail("--%s: child pid %s has %.2f%% of the samples, expected >= 95%%" % (mode, child, share))
for r in mine:
    if "known_split" not in str(r.get("name")):
        fail("--%s: child row %r does not name the known_split executable" % (mode, r.get("name")))
' "$WORK/proc-$mode.json" "$child" "$mode"
    else
        fail "--$mode: opprof report --group-by process failed"
    fi
done

# Many fork+exec'd children, each sampled from its first instruction, and
# each exec made while the child's timer runs: a tick that lands inside
# execve must not kill the new image (its SIGTRAP would, with the default
# action). Ground truth: every child exits 0, so the shell does, and so does
# record; and each child process is a stream of its own.
log "=== 300 fork+exec children (sh), 100 subprocess + 100 os.fork/os.execv (python)"
limited "$OPPROF" record -q -o "$WORK/res-storm" -- sh -c \
    'i=0; while [ $i -lt 300 ]; do /bin/true || exit 9; i=$((i+1)); done' 2>"$WORK/storm.err"
st=$?
if [ "$st" -ne 0 ]; then
    fail "sh with 300 fork+exec children: record exit $st, want 0 (a child killed by a stray SIGTRAP exits 133)"
    sed 's/^/  stderr: /' "$WORK/storm.err" | head -5
else
    pass "sh with 300 fork+exec children: every child exited 0"
fi
# The threads the Threading section counts are the workload's: sh and its 300
# children, one thread each. The agent's writer thread is not the workload's
# and is never polled (it was in each child's first poll, made before the
# writer had published its tid: 591 threads, and each read of its /proc files
# cost the reaping shell ~2 ms of kernel CPU in wait4).
if report_json "$WORK/res-storm" "$WORK/storm-threading.json" --threading; then
    pycheck '
t = load(sys.argv[1])["threading"]
msg = "sh with 300 children: the Threading section counts %s threads (truth: 301, sh and its children)" % t.get("threads")
(ok if t.get("threads") == 301 else fail)(msg)
' "$WORK/storm-threading.json"
else
    fail "opprof report --threading --format json failed on the 300-children recording"
fi
limited "$OPPROF" record -q -o "$WORK/res-storm-py" -- "${OPPROF_TEST_PYTHON:-python3}" -c '
import os, subprocess, sys
bad = []
for i in range(100):
    r = subprocess.run(["/bin/true"])
    if r.returncode: bad.append(("subprocess", r.returncode))
    pid = os.fork()
    if pid == 0:
        os.execv("/bin/true", ["true"])
    st = os.waitpid(pid, 0)[1]
    if st: bad.append(("fork+execv", st))
print("storm: children not exiting 0:", bad)
sys.exit(1 if bad else 0)' >"$WORK/storm-py.out" 2>&1
st=$?
if [ "$st" -ne 0 ]; then
    fail "python with 200 children: exit $st: $(tail -1 "$WORK/storm-py.out")"
else
    pass "python with 100 subprocess.run and 100 fork+execv children: every child exited 0"
fi

finish
