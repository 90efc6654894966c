#!/bin/sh
# test_untrusted.sh — a result directory, and the binaries its MAP records
# name, are untrusted input (issue 18). Each check says whether it failed on
# the round-1 code.
#   1. a binary named by a result replaced by a FIFO: `report` must not block
#      in open() (round 1 did, for ever), and reads the rest of the profile;
#   2. the same binary replaced by a link to a device that never ends
#      (/dev/zero): not read (round 1 passed this one: it checked S_ISREG
#      after open; kept so that a reader which forgets the check is caught);
#   3. a stream with one crafted STACK record whose id is 0x80000000: round 1
#      aborted (exit 134, no message) allocating 3 GB for it; now the record
#      is skipped with a warning and the report stays small (max RSS checked
#      against 300 MB, ~10x what this report needs);
#   4. a FIFO named proc-*.raw, or info, in the result dir: round 1 blocked
#      in open() for ever; now the FIFO is skipped (stream) or refused with
#      one line (info), exit != 0, no hang;
#   5. info as a link to another file: refused (O_NOFOLLOW), not followed.
# A hang is what these checks catch: every command runs under `limited`
# (TIME_LIMIT seconds, 124 when killed), far above the ~1 s a report takes.
. "$(dirname "$0")/lib.sh"
require_all

# A private copy of the workload, so that the path its MAP record names can be
# replaced after the recording.
cp "$KNOWN_SPLIT" "$WORK/ks" || die "cannot copy $KNOWN_SPLIT"
record "$WORK/res" -- "$WORK/ks" --seconds 0.3
[ "$RECORD_STATUS" -eq 0 ] || die "opprof record of a copy of known_split exited $RECORD_STATUS"

# expect_report FILE NAME: report of $WORK/res finishes (not killed), exits 0, and
# still has the profile's samples (the replaced binary's functions show as
# unknown; the library's and libc's still resolve).
expect_report() {
    _json="$WORK/$1.json"
    shift
    report_json "$WORK/res" "$_json" --group-by function
    _st=$REPORT_STATUS
    if [ "$_st" -eq 124 ]; then
        fail "$1: opprof report hung (killed after ${TIME_LIMIT}s)"
    elif [ "$_st" -ne 0 ]; then
        fail "$1: opprof report exited $_st"
    elif python3 -c '
import json, sys
doc = json.load(open(sys.argv[1]))
sys.exit(0 if doc.get("total_weight", 0) > 0 and doc["rows"] else 1)' "$_json"; then
        pass "$1: report finished (exit 0) with the profile's samples"
    else
        fail "$1: report has no samples"
    fi
}

expect_report regular "regular binary"
rm -f "$WORK/ks"
mkfifo "$WORK/ks" || die "mkfifo failed"
expect_report fifo "binary replaced by a FIFO"
rm -f "$WORK/ks"
ln -s /dev/zero "$WORK/ks"
expect_report device "binary replaced by a link to /dev/zero"

# 3. A STACK record with id 0x80000000 appended to a real stream.
cp -r "$WORK/res" "$WORK/crafted"
stream=$(ls "$WORK/crafted"/proc-*.raw | head -n 1)
python3 - "$stream" <<'PY'
import struct, sys
# type 4 (STACK), size 24 (header 8, opr_stack 8, one PC): stack_id 0x80000000.
open(sys.argv[1], "ab").write(struct.pack("<IIIIQ", 4, 24, 0x80000000, 1, 0x401000))
PY
limited /usr/bin/time -f '%M' -o "$WORK/rss.txt" "$OPPROF" report "$WORK/crafted" --format json >"$WORK/crafted.json" 2>"$WORK/crafted.err"
st=$?
rss_kb=$(tail -n 1 "$WORK/rss.txt")
log "crafted stack id: exit $st, max RSS ${rss_kb} KB; stderr: $(head -c 300 "$WORK/crafted.err")"
if [ "$st" -ne 0 ]; then
    fail "crafted stack id: report exited $st (expected 0: the record is skipped, the rest reported)"
elif [ "${rss_kb:-999999}" -gt 307200 ]; then
    fail "crafted stack id: report took ${rss_kb} KB (over 300 MB)"
elif ! grep -q 'malformed stack record' "$WORK/crafted.json"; then
    fail "crafted stack id: no warning names the skipped record"
else
    pass "crafted stack id: skipped with a warning (in the JSON's warnings), exit 0, max RSS ${rss_kb} KB"
fi

# 4. FIFOs where the result's own files should be.
cp -r "$WORK/res" "$WORK/fifo-stream"
mkfifo "$WORK/fifo-stream/proc-999999-0.raw"
expect_report_dir() { # NAME DIR WANT(0|nonzero)
    limited "$OPPROF" report "$2" --format json >"$WORK/$1.out" 2>"$WORK/$1.err"
    _st=$?
    log "$1: exit $_st; stderr: $(head -n 2 "$WORK/$1.err" | tr '\n' ' ')"
    if [ "$_st" -eq 124 ]; then
        fail "$1: opprof report hung (killed after ${TIME_LIMIT}s)"
    elif [ "$_st" -ge 128 ]; then
        fail "$1: opprof report crashed (exit $_st)"
    elif [ "$3" = 0 ] && [ "$_st" -ne 0 ]; then
        fail "$1: exit $_st, expected 0"
    elif [ "$3" = nonzero ] && { [ "$_st" -eq 0 ] || [ "$(wc -l <"$WORK/$1.err")" -ne 1 ]; }; then
        fail "$1: exit $_st with $(wc -l <"$WORK/$1.err") line(s) on stderr, expected != 0 and one line"
    else
        pass "$1: exit $_st, no hang"
    fi
}
expect_report_dir "FIFO named proc-*.raw" "$WORK/fifo-stream" 0
mkdir "$WORK/fifo-info"
cp "$WORK/res"/proc-*.raw "$WORK/fifo-info/"
mkfifo "$WORK/fifo-info/info"
expect_report_dir "FIFO named info" "$WORK/fifo-info" nonzero

# 5. info as a link to a file that is not this result's.
mkdir "$WORK/link-info"
cp "$WORK/res"/proc-*.raw "$WORK/link-info/"
cp "$WORK/res/info" "$WORK/other-info"
ln -s "$WORK/other-info" "$WORK/link-info/info"
expect_report_dir "info is a symbolic link" "$WORK/link-info" nonzero
finish
