#!/bin/sh
# test_limits.sh — collection limits of opprof record on known_split (one
# busy thread, so CPU time = wall time and 1 kHz gives 1,000 samples a second):
#   --delay 1 --duration 1: about 1,000 samples (the window's CPU time), every
#     sample's time inside [1 s, 2 s] after the start (from the Chrome trace),
#     the split still 5:3:2, and the samples outside the window counted
#     (recorded + outside ~ the whole run's samples);
#   --max-size 64K: the stream stops growing near the cap, the dropped samples
#     are counted in the report (JSON and the text warning) and in record's
#     summary, and recorded + dropped ~ the whole run's samples;
#   bad values are refused with one line and exit 2.
. "$(dirname "$0")/lib.sh"
require_all

record "$WORK/win" --delay 1 --duration 1 -- "$KNOWN_SPLIT" --seconds 3
[ "$RECORD_STATUS" -eq 0 ] || die "record --delay 1 --duration 1 exited $RECORD_STATUS"
grep -q "outside that window were not recorded" "$RECORD_ERR" &&
    pass "record's summary counts the samples outside the window" ||
    fail "record's summary does not mention the window"
report_json "$WORK/win" "$WORK/win.json" || die "report of the window run failed"
check_split "$WORK/win.json" "" 1000 "$TOL_PP"
limited "$OPPROF" export "$WORK/win" --chrome-trace "$WORK/win.trace" >/dev/null 2>&1 ||
    fail "export --chrome-trace of the window run failed"
limited "$OPPROF" report "$WORK/win" >"$WORK/win.txt" 2>&1
pycheck '
doc = load(sys.argv[1]); trace = load(sys.argv[2])
tw, outside = doc["total_weight"], doc.get("outside_window_samples", -1)
print("window 1-2 s: %d samples recorded (expected ~1000), %d outside the window" % (tw, outside))
if not 850 <= tw <= 1150:
    fail("%d samples in a 1 s window of one busy thread at 1 kHz, expected 1000 +- 15 %%" % tw)
# The run is ~3 s of CPU: recorded + outside is every sample taken.
if not 2500 <= tw + outside <= 3500:
    fail("recorded %d + outside %d = %d, expected about 3000 (3 s at 1 kHz)" % (tw, outside, tw + outside))
ts = [e["ts"] for e in trace["traceEvents"] if e.get("ph") == "X"]
lo, hi = min(ts) / 1e6, max(ts) / 1e6
print("sample slices from %.3f s to %.3f s after the start (window 1.0-2.0 s)" % (lo, hi))
if lo < 0.99 or hi > 2.01:
    fail("samples outside the window: %.3f-%.3f s" % (lo, hi))
txt = open(sys.argv[3]).read()
if "window      samples from 1.0 s to 2.0 s after the start" not in txt:
    fail("the text report does not show the window")
' "$WORK/win.json" "$WORK/win.trace" "$WORK/win.txt"

record "$WORK/cap" --max-size 64K -- "$KNOWN_SPLIT" --seconds 2
[ "$RECORD_STATUS" -eq 0 ] || die "record --max-size 64K exited $RECORD_STATUS"
grep -q -- "--max-size reached: [0-9]* samples dropped" "$RECORD_ERR" &&
    pass "record's summary counts the dropped samples" || fail "record's summary does not mention --max-size"
report_json "$WORK/cap" "$WORK/cap.json" || die "report of the capped run failed"
limited "$OPPROF" report "$WORK/cap" >"$WORK/cap.txt" 2>&1
stream_bytes=$(cat "$WORK"/cap/proc-*.raw | wc -c)
pycheck '
doc = load(sys.argv[1]); size = int(sys.argv[2])
tw, dropped = doc["total_weight"], doc.get("size_cap_dropped_samples", -1)
print("--max-size 64K: stream %d bytes, %d samples recorded, %d dropped" % (size, tw, dropped))
# The writer checks the cap per sample and flushes every 10 ms: it may pass
# the cap by one drain (~10 samples of ~50 bytes) plus the closing records.
if size > 65536 + 16384:
    fail("the stream is %d bytes, more than the 64 KiB cap + 16 KiB" % size)
if dropped <= 0:
    fail("no dropped samples counted although a 2 s run does not fit in 64 KiB")
if not 1700 <= tw + dropped <= 2300:
    fail("recorded %d + dropped %d = %d, expected about 2000 (2 s at 1 kHz)" % (tw, dropped, tw + dropped))
if "later samples were dropped" not in open(sys.argv[3]).read():
    fail("the text report does not warn about the dropped samples")
' "$WORK/cap.json" "$stream_bytes" "$WORK/cap.txt"

for bad in "--delay 0" "--duration abc" "--max-size 10" "--max-size 5Q"; do
    # shellcheck disable=SC2086
    limited "$OPPROF" record -o "$WORK/bad" $bad -- "$KNOWN_SPLIT" --seconds 0.1 >"$WORK/bad.out" 2>"$WORK/bad.err"
    st=$?
    if [ "$st" -eq 2 ] && [ "$(wc -l <"$WORK/bad.err")" -eq 1 ] && [ ! -d "$WORK/bad" ]; then
        pass "record $bad: exit 2, one line: $(cat "$WORK/bad.err")"
    else
        fail "record $bad: exit $st (want 2), $(wc -l <"$WORK/bad.err") lines, dir left: $([ -d "$WORK/bad" ] && echo yes || echo no)"
    fi
done
finish
