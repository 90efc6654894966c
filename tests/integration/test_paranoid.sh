#!/bin/sh
# test_paranoid.sh — recording as an unprivileged user. Either it works (and
# the result has samples) or opprof fails with one sentence that mentions
# perf_event_paranoid. As root the test drops to nobody:nogroup with setpriv
# (or su); as a non-root user it runs as that user. The kernel setting is
# printed, never changed.
. "$(dirname "$0")/lib.sh"
require_all

paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo unknown)
log "kernel.perf_event_paranoid = $paranoid"

chmod 0777 "$WORK"
if [ "$(id -u)" -eq 0 ]; then
    if command -v setpriv >/dev/null 2>&1 &&
        setpriv --reuid=nobody --regid=nogroup --clear-groups true 2>/dev/null; then
        as_user() { limited setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"; }
        how="setpriv --reuid=nobody --regid=nogroup --clear-groups"
    elif command -v su >/dev/null 2>&1 && su nobody -s /bin/sh -c true 2>/dev/null; then
        as_user() { limited su nobody -s /bin/sh -c 'exec "$@"' sh "$@"; }
        how="su nobody"
    else
        skip "running as root and neither setpriv nor su can switch to nobody"
    fi
    as_user test -x "$OPPROF" || skip "user nobody cannot execute $OPPROF (build tree not readable)"
    as_user test -x "$KNOWN_SPLIT" || skip "user nobody cannot execute $KNOWN_SPLIT"
    as_user test -w "$WORK" || skip "user nobody cannot write $WORK"
else
    as_user() { limited "$@"; }
    how="the current user ($(id -un), not root)"
fi
log "recording as $how: uid $(as_user id -u), gid $(as_user id -g)"

cd "$WORK" || die "cd"
as_user env HOME="$WORK" "$OPPROF" record -o "$WORK/res" -- "$KNOWN_SPLIT" --seconds 1 \
    >"$WORK/rec.out" 2>"$WORK/rec.err"
st=$?
log "opprof record as an unprivileged user: exit $st"
[ "$st" -eq 124 ] && die "opprof record as an unprivileged user hung (killed after ${TIME_LIMIT}s)"
show stderr "$WORK/rec.err" 8

if [ "$st" -eq 0 ]; then
    report_json "$WORK/res" "$WORK/func.json" || die "opprof report on the unprivileged recording failed"
    pycheck '
doc = load(sys.argv[1])
tw = doc.get("total_weight", 0)
names = [r.get("name") for r in doc.get("rows", [])][:4]
print("unprivileged recording: %d samples (weight) of about 1000, top %s" % (tw, names))
# Kernel sampling needs perf_event_paranoid <= 1 for a normal user: above,
# record says so in one line, the report says what the samples cover, and the
# samples carry weights (thread CPU time) so the total still covers the run.
said = "allows user-mode samples only" in open(sys.argv[2]).read()
want = int(sys.argv[3]) >= 2 if sys.argv[3].isdigit() else said
if said != want or doc.get("user_only") is not want:
    fail("paranoid=%s: record said user-mode only: %s, report user_only: %r (want %s)" % (sys.argv[3], said, doc.get("user_only"), want))
else:
    ok("paranoid=%s: user mode only = %s, said by record and the report" % (sys.argv[3], want))
if tw < 500:
    fail("unprivileged recording has %d samples, expected >= 500" % tw)
if "spin_a" not in names:
    fail("spin_a is not among the top functions")
' "$WORK/func.json" "$WORK/rec.err" "$paranoid"
else
    # opprof's own message: lines that are not the workload's.
    grep -v '^known_split' "$WORK/rec.err" >"$WORK/own.err"
    n=$(wc -l <"$WORK/own.err" | tr -d ' ')
    if ! grep -q 'perf_event_paranoid' "$WORK/own.err"; then
        fail "recording failed (exit $st) without mentioning perf_event_paranoid (paranoid=$paranoid)"
    elif [ "$n" -ne 1 ]; then
        fail "recording failed with $n lines on stderr, expected one sentence"
    else
        pass "recording refused with: $(cat "$WORK/own.err")"
    fi
    if grep -q '^known_split' "$WORK/rec.err"; then
        log "note: the workload ran although recording failed"
    fi
fi

# record -c on a kernel-side event where only user mode may be counted would
# sample nothing: refused with one line naming perf_event_paranoid, exit 2.
if [ "$paranoid" != unknown ] && [ "$paranoid" -ge 2 ] && [ "$(as_user id -u)" -ne 0 ]; then
    as_user env HOME="$WORK" "$OPPROF" record -o "$WORK/cs" -e context-switches -c 1 -- true \
        >"$WORK/cs.out" 2>"$WORK/cs.err"
    st=$?
    n=$(wc -l <"$WORK/cs.err" | tr -d ' ')
    if [ "$st" -eq 2 ] && [ "$n" -eq 1 ] && grep -q 'perf_event_paranoid' "$WORK/cs.err" && [ ! -d "$WORK/cs" ]; then
        pass "-e context-switches -c 1 in user mode only: $(cat "$WORK/cs.err")"
    else
        fail "-e context-switches -c 1 in user mode only: exit $st, $n lines (expected 2, one line naming perf_event_paranoid)"
        show stderr "$WORK/cs.err" 4
    fi
fi

finish
