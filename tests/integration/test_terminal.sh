#!/bin/sh
# test_terminal.sh — `opprof report` on a terminal fits its width; to a file
# or a pipe it keeps every character:
#   - under a pseudo-terminal (script(1)) of 80 and 72 columns, no line is
#     wider than the terminal, but for one word that has no place to break
#     (a path longer than the line, after its label: kept whole);
#   - the prose (header, findings, threading) is wrapped, not cut: its words,
#     in order, are those of the same report written to a pipe;
#   - the table keeps its numbers: every row's self %, self time and samples
#     are those of the piped report (only the name/module/source cells shrink);
#   - the piped report does have lines wider than 80 (else this proves nothing).
. "$(dirname "$0")/lib.sh"
require_all
command -v script >/dev/null 2>&1 || skip "script(1) not found (Debian package bsdutils)"

record "$WORK/ks" -- "$KNOWN_SPLIT" --seconds 1
[ "$RECORD_STATUS" -eq 0 ] || die "record failed"
limited "$OPPROF" report "$WORK/ks" --limit 8 >"$WORK/pipe.txt" 2>"$WORK/pipe.err" || die "report to a pipe failed"
widest=$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$WORK/pipe.txt")
[ "$widest" -gt 80 ] || die "the piped report's widest line is $widest characters: nothing to fit"
log "piped report: widest line $widest characters"

for cols in 80 72; do
    # script(1) gives opprof a terminal; stty sets its width. The report goes
    # to the typescript (stdout here), \r\n line ends removed.
    script -qec "stty cols $cols; '$OPPROF' report '$WORK/ks' --limit 8" /dev/null 2>/dev/null |
        tr -d '\r' >"$WORK/tty$cols.txt"
    python3 - "$WORK/pipe.txt" "$WORK/tty$cols.txt" "$cols" <<'EOF' || fail "report on a $cols-column terminal"
import re, sys
pipe = open(sys.argv[1]).read().splitlines()
tty = open(sys.argv[2]).read().splitlines()
cols, bad = int(sys.argv[3]), 0
def unbreakable(l):
    """A line that is one word after its label (a path longer than the
    terminal, as in a deep build directory): prose wraps at spaces, and a
    word with none is kept whole rather than cut, so that it can be copied."""
    word = l.split()[-1]
    return len(l.split()) <= 2 and len(l) - len(word) < 20 and len(word) > cols - 20
wide = [l for l in tty if len(l) > cols and not unbreakable(l)]
for l in wide[:3]:
    print("FAIL: %d characters on a %d-column terminal: %s" % (len(l), cols, l))
bad += len(wide)
def split(lines):
    """prose words (outside the table) and table rows (number columns)"""
    words, rows, in_table = [], [], False
    for l in lines:
        if re.match(r"\s*Self %\s+Self time", l):
            in_table = True
            continue
        if l.startswith("Self time total"):
            in_table = False
        if in_table:
            rows.append(l.split()[:6])
        else:
            words.extend(l.split())
    return words, rows
pw, pr = split(pipe)
tw, tr = split(tty)
if pw != tw:
    i = next((k for k, (a, b) in enumerate(zip(pw, tw)) if a != b), min(len(pw), len(tw)))
    print("FAIL: the prose differs from the piped report at word %d: %r vs %r" % (i, pw[i:i + 5], tw[i:i + 5]))
    bad += 1
if pr != tr:
    print("FAIL: the table's figures differ: %r vs %r" % (pr[:2], tr[:2]))
    bad += 1
if len(tty) <= len(pipe):
    print("FAIL: nothing was wrapped (%d lines on the terminal, %d piped)" % (len(tty), len(pipe)))
    bad += 1
print("%d columns: %d lines (piped: %d), widest %d; %d prose words and %d table rows as piped" %
      (cols, len(tty), len(pipe), max(map(len, tty)), len(tw), len(tr)))
sys.exit(1 if bad else 0)
EOF
done
[ "$FAILURES" -eq 0 ] && pass "the report fits 80 and 72 columns on a terminal, wrapping prose and shrinking name cells only"
finish
