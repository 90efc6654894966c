#!/bin/sh
# test_hostile_output.sh — `record -o DIR` when DIR, or the filesystem under
# it, works against opprof (issue 18; opprof often runs as root):
#   1. a link planted as DIR/info.tmp while the workload runs (DIR our own,
#      empty at the start): round 1 wrote the info text through it into the
#      link's target at the end; now the target is untouched and info is
#      complete;
#   2. DIR exists but belongs to another user: refused, one line, exit 2
#      (round 1 accepted any empty directory) — as root only;
#   3. DIR is a dangling symbolic link: one line that says so, exit 2 (round 1
#      said "exists and is not empty");
#   4. a filesystem with one page (4 KiB) free: one line naming the lack of
#      space, exit 2, before the workload runs (round 1: SIGBUS writing the
#      .live page, exit 135, no word) — needs root and a tmpfs mount.
. "$(dirname "$0")/lib.sh"
require_all

# one_line_exit2 NAME PATTERN: the last command's status is in $st, its
# stderr in $WORK/err.
one_line_exit2() {
    _lines=$(wc -l <"$WORK/err" | tr -d ' ')
    log "$1: exit $st, $_lines line(s): $(head -n 1 "$WORK/err")"
    if [ "$st" -eq 2 ] && [ "$_lines" -eq 1 ] && grep -q "$2" "$WORK/err"; then
        pass "$1: exit 2, one line saying '$2'"
    else
        fail "$1: exit $st with $_lines line(s), expected exit 2 and one line saying '$2'"
    fi
}

# 1. A link planted as info.tmp during the run.
printf 'the victim file\n' >"$WORK/victim"
mkdir "$WORK/res"
"$OPPROF" record -q -o "$WORK/res" -- "$KNOWN_SPLIT" --seconds 1.5 >/dev/null 2>"$WORK/rec.err" &
rec=$!
sleep 0.5
ln -s "$WORK/victim" "$WORK/res/info.tmp" 2>/dev/null || log "note: info.tmp existed when the link was planted"
wait "$rec"
st=$?
log "record with a planted info.tmp link: exit $st; victim now: $(head -c 80 "$WORK/victim")"
if [ "$(cat "$WORK/victim")" = "the victim file" ]; then
    pass "planted info.tmp link: its target is untouched"
else
    fail "planted info.tmp link: opprof wrote through it into $WORK/victim"
fi
[ "$st" -eq 0 ] && grep -q '^complete=1$' "$WORK/res/info" 2>/dev/null &&
    pass "planted info.tmp link: the run's info is complete (exit 0)" ||
    fail "planted info.tmp link: exit $st, info complete: $(grep complete "$WORK/res/info" 2>/dev/null)"

# 2. A directory that belongs to someone else.
if [ "$(id -u)" -eq 0 ]; then
    mkdir "$WORK/theirs"
    chown nobody "$WORK/theirs"
    limited "$OPPROF" record -o "$WORK/theirs" -- "$KNOWN_SPLIT" --seconds 0.1 >/dev/null 2>"$WORK/err"
    st=$?
    one_line_exit2 "-o DIR owned by nobody" "belongs to another user"
else
    log "note: not root: the other user's directory is not tested (chown needs root)"
fi

# 3. A dangling symbolic link.
ln -s "$WORK/nowhere" "$WORK/dangling"
limited "$OPPROF" record -o "$WORK/dangling" -- "$KNOWN_SPLIT" --seconds 0.1 >/dev/null 2>"$WORK/err"
st=$?
one_line_exit2 "-o a dangling link" "symbolic link"
[ -e "$WORK/nowhere" ] && fail "-o a dangling link: opprof created its target"

# 4. One page free.
mkdir "$WORK/small"
if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=64k tmpfs "$WORK/small" 2>/dev/null; then
    dd if=/dev/zero of="$WORK/small/fill" bs=4096 count=15 2>/dev/null
    log "tmpfs: $(df -k "$WORK/small" | tail -n 1)"
    limited "$OPPROF" record -o "$WORK/small/res" -- "$KNOWN_SPLIT" --seconds 0.1 >/dev/null 2>"$WORK/err"
    st=$?
    umount "$WORK/small"
    one_line_exit2 "4 KiB free" "no space left"
else
    log "note: a full filesystem is not tested (needs root and a tmpfs mount)"
fi
finish
