#!/bin/sh
# test_signal_safety.sh — the agent's objects call only async-signal-safe
# functions, or functions that signal_safety.allow excuses for that source file
# with a reason (code that runs outside the SIGTRAP handler: the constructor,
# the writer thread, the exec and dlclose wrappers).
#
# For every object of the libraries named by the allowlist's @libraries line
# (the agent and sampler/common, in the build tree), lists the undefined
# symbols (nm -u), drops those any of these objects defines (calls between the
# agent's own files), and reports each remaining (file, symbol) pair that the
# allowlist does not allow: FAIL names the object and the symbol.
#
# Limits: the check is per file, not per function: a call excused for a file's
# writer-thread code is not caught if the same file's handler code makes it
# too. It sees calls, not what a called function does (e.g. syscall's number).
. "$(dirname "$0")/lib.sh"
ALLOW="$OPPROF_SRCDIR/tests/integration/signal_safety.allow"
NM=${NM:-nm}
[ -r "$ALLOW" ] || die "no allowlist $ALLOW"
command -v "$NM" >/dev/null 2>&1 || skip "nm not found (install binutils)"
make_workdir

# The objects: libtool's PIC objects (.libs/LIB-NAME.o) of each library, found
# wherever the sources live now; not those of a distcheck tree inside the build.
libs=$(awk '$1 == "@libraries" { for (i = 2; i <= NF; i++) print $i }' "$ALLOW")
[ -n "$libs" ] || die "$ALLOW has no @libraries line"
: >"$WORK/objects"
for lib in $libs; do
    find "$OPPROF_BUILDDIR" -maxdepth 5 -path "*/.libs/$lib-*.o" \
        ! -path "$OPPROF_BUILDDIR/opprof-[0-9]*" >>"$WORK/objects"
done
sort -o "$WORK/objects" "$WORK/objects"
nobj=$(wc -l <"$WORK/objects" | tr -d ' ')
[ "$nobj" -gt 0 ] || die "no objects of $libs under $OPPROF_BUILDDIR (is the agent built? did the library names change? see @libraries in $ALLOW)"
log "$nobj objects of: $(echo $libs)"

# file<TAB>symbol of every undefined symbol; and every symbol the objects define.
: >"$WORK/undef"
: >"$WORK/defined"
while read -r obj; do
    base=$(basename "$obj" .o)
    file=${base#*_la-}.c
    "$NM" -u "$obj" | awk -v f="$file" -v o="$obj" 'NF >= 2 { print f "\t" $2 "\t" o }' >>"$WORK/undef" \
        || die "$NM -u $obj failed"
    "$NM" --defined-only -g "$obj" | awk 'NF >= 3 { print $3 }' >>"$WORK/defined"
done <"$WORK/objects"
[ -s "$WORK/undef" ] || die "nm listed no undefined symbol at all: cannot be right"

# Allowlist lines: FILE|* SYMBOLS REASON (comments and blank lines skipped).
awk -v allow="$ALLOW" '
    FILENAME == ARGV[1] {
        if ($0 ~ /^[ \t]*(#|$)/ || $1 == "@libraries") next
        if (NF < 3) { printf "%s:%d: needs FILE SYMBOLS REASON: %s\n", allow, FNR, $0; bad = 1; next }
        n = split($2, s, ",")
        for (i = 1; i <= n; i++) ok[$1 "\t" s[i]] = 1
        next
    }
    FILENAME == ARGV[2] { own[$1] = 1; next }
    {
        if (own[$2] || ok["*\t" $2] || ok[$1 "\t" $2]) { allowed++; next }
        printf "FAIL: %s calls %s (%s): not async-signal-safe, and %s has no exception for %s\n", $1, $2, $3, allow, $1
        bad = 1
    }
    END {
        printf "%d undefined symbol(s) checked\n", allowed + 0
        exit bad
    }' "$ALLOW" "$WORK/defined" "$WORK/undef" >"$WORK/result"
st=$?
cat "$WORK/result"
if [ "$st" -ne 0 ]; then
    FAILURES=$((FAILURES + $(grep -c '^FAIL\|needs FILE' "$WORK/result")))
    log "A call from the signal handler must be async-signal-safe (signal-safety(7)). If the call"
    log "runs outside the handler (constructor, writer thread, a wrapper), add to $ALLOW:"
    log "  FILE SYMBOL why-it-is-not-on-the-handler's-path"
else
    pass "every call of the agent's objects is async-signal-safe or excused in signal_safety.allow"
fi

# Exceptions no object needs any more (code moved): a note, not a failure.
awk 'FILENAME == ARGV[1] {
        if ($0 ~ /^[ \t]*(#|$)/ || $1 == "@libraries" || $1 == "*") next
        n = split($2, s, ",")
        for (i = 1; i <= n; i++) ex[$1 "\t" s[i]] = 1
        next
     }
     { used[$1 "\t" $2] = 1 }
     END { for (k in ex) if (!used[k]) { split(k, p, "\t"); printf "note: unused exception: %s %s\n", p[1], p[2] } }' \
    "$ALLOW" "$WORK/undef" | sort
finish
