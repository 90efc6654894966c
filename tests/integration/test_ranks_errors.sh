#!/usr/bin/env bash
# tests/integration/test_ranks_errors.sh — bad input around ranks: a report
# over a valid and a corrupt result names the corrupt one (one line, exit 2,
# nothing on stdout); -o with %r outside a launcher, and an unknown %x, are
# one clear line each and create no directory.
. "$(dirname "$0")/lib.sh"
require_all
record_split good --seconds 0.5 >/dev/null
[ -d good ] || die "no result directory good"
mkdir bad && printf 'format=opprof-raw 1\n' >bad/info && printf 'not a stream' >bad/proc-1-0.raw

limited "$OPPROF" report good bad >mix.out 2>mix.err
st=$?
log "opprof report good bad: exit $st, stderr: $(cat mix.err)"
[ "$st" -eq 2 ] || fail "exit status $st, expected 2"
[ "$(wc -l <mix.err)" -eq 1 ] || fail "expected one error line, got $(wc -l <mix.err)"
grep -q "bad" mix.err && grep -q "result 2 of 2" mix.err || fail "the error does not name the corrupt result (bad, 2 of 2)"
[ -s mix.out ] && fail "a report was printed despite the error"

unset RANK OMPI_COMM_WORLD_RANK PMI_RANK SLURM_PROCID
limited "$OPPROF" record -q -o 'norank.%r' -- true >r.out 2>r.err
st=$?
log "opprof record -o norank.%r (no launcher): exit $st, stderr: $(cat r.err)"
[ "$st" -eq 2 ] || fail "exit status $st, expected 2"
grep -q "RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID" r.err || fail "the error does not name the rank variables"
ls -d norank.* >/dev/null 2>&1 && fail "a directory was created"

limited "$OPPROF" record -q -o 'x.%q' -- true >q.out 2>q.err
st=$?
log "opprof record -o x.%q: exit $st, stderr: $(cat q.err)"
[ "$st" -eq 2 ] && grep -q "unknown pattern %q" q.err || fail "unknown %q: exit $st, expected 2 and 'unknown pattern %q'"

RANK=3 limited "$OPPROF" record -q -o 'r%r.p%p.%%' -- true >ok.out 2>ok.err
d=$(ls -d r3.p*.% 2>/dev/null)
log "RANK=3 opprof record -o r%r.p%p.%%: $d"
[ -n "$d" ] && grep -qx "rank=3" "$d/info" && grep -qx "rank_source=RANK" "$d/info" \
    || fail "RANK=3 -o r%r.p%p.%% gave '$d' (expected r3.p<pid>.% with rank=3 in info)"
finish
