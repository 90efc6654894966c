#!/bin/sh
# test_untrusted.sh — a result directory, and the binaries its MAP records
# name, are untrusted input (issue 18). Each check says whether it failed on
# the round-1 code.
#   1. a binary named by a result replaced by a FIFO: `report` must not block
#      in open() (round 1 did, for ever), and reads the rest of the profile;
#   2. the same binary replaced by a link to a device that never ends
#      (/dev/zero): not read (round 1 passed this one: it checked S_ISREG
#      after open; kept so that a reader which forgets the check is caught).
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
finish
