#!/bin/sh
# test_help.sh — help that says everything, in three places kept in step:
#   `opprof help CMD` prints CMD's own help, the same as `opprof CMD --help`,
#   for every subcommand; `opprof help` is `opprof --help`; an unknown
#   `opprof help X` is one line and exit 2;
#   every long option of cli/cmd_*.c (their getopt tables) is in `opprof
#   --help`, in the command's own help and in the man page docs/opprof.1; so
#   are the keys report --group-by and --sort accept (from their error lines).
. "$(dirname "$0")/lib.sh"
require_opprof
make_workdir
MAN="$OPPROF_SRCDIR/docs/opprof.1"
[ -r "$MAN" ] || die "no man page $MAN"
# Aliases the helps and the man page may leave out (CMD:option).
ALIASES="sweep:shape"

"$OPPROF" --help >"$WORK/global" 2>&1 || fail "opprof --help: exit status $?"
"$OPPROF" help >"$WORK/help" 2>&1 || fail "opprof help: exit status $?"
cmp -s "$WORK/global" "$WORK/help" && pass "opprof help is opprof --help" || fail "opprof help differs from opprof --help"

for cmd in record report export stat sweep diff; do
    "$OPPROF" help "$cmd" >"$WORK/$cmd.help" 2>"$WORK/$cmd.help.err"
    st=$?
    "$OPPROF" "$cmd" --help >"$WORK/$cmd.own" 2>&1
    if [ "$st" -ne 0 ]; then
        fail "opprof help $cmd: exit status $st"
    elif ! head -n 1 "$WORK/$cmd.help" | grep -q "^usage: opprof $cmd"; then
        fail "opprof help $cmd does not print $cmd's help: $(head -n 1 "$WORK/$cmd.help")"
    elif ! cmp -s "$WORK/$cmd.help" "$WORK/$cmd.own"; then
        fail "opprof help $cmd differs from opprof $cmd --help"
    else
        pass "opprof help $cmd = opprof $cmd --help"
    fi

    src="$OPPROF_SRCDIR/cli/cmd_$cmd.c"
    [ -r "$src" ] || { fail "no $src"; continue; }
    # name:short of each {"name", X_argument, NULL, 'c' or CONSTANT} (short: - when none)
    opts=$(sed -n "s/^[[:space:]]*{\"\([a-z][a-z0-9-]*\)\",[[:space:]]*[a-z]*_argument,[[:space:]]*NULL,[[:space:]]*\(.*\)}.*/\1:\2/p" "$src" |
        sed "s/:'\(.\)'\$/:\1/; s/:[^:]*[^:][^:]\+\$/:-/")
    [ -n "$opts" ] || { fail "found no long options in $src (has its getopt table changed form?)"; continue; }
    missing_global="" missing_own="" missing_man=""
    for os in $opts; do
        o=${os%%:*} short=${os#*:}
        [ "$o" = help ] && continue
        case " $ALIASES " in *" $cmd:$o "*) continue ;; esac
        if ! grep -q -e "--$o\\b" "$WORK/global"; then
            [ "$short" != - ] && grep -q -e "-$short\\b" "$WORK/global" || missing_global="$missing_global --$o"
        fi
        grep -q -e "--$o\\b" "$WORK/$cmd.own" || missing_own="$missing_own --$o"
        roff=$(printf '%s' "--$o" | sed 's/-/\\-/g')
        grep -q -F -e "$roff" "$MAN" || missing_man="$missing_man --$o"
    done
    [ -z "$missing_global" ] || fail "opprof --help lacks $cmd's$missing_global"
    [ -z "$missing_own" ] || fail "opprof $cmd --help lacks$missing_own"
    [ -z "$missing_man" ] || fail "docs/opprof.1 lacks $cmd's$missing_man"
    [ -z "$missing_global$missing_own$missing_man" ] &&
        pass "$cmd: all $(echo $opts | wc -w) long options in opprof --help, its own help and the man page"
    grep -q -F -e ".SS \"opprof $cmd" "$MAN" || fail "docs/opprof.1 has no section for $cmd"
done

# The keys of report --group-by and --sort, as the error line lists them.
for opt in group-by sort; do
    "$OPPROF" report --$opt opprof-test-bogus >/dev/null 2>"$WORK/keys.err"
    keys=$(sed -n 's/.*accepted: //p' "$WORK/keys.err" | tr -d ',')
    [ -n "$keys" ] || { fail "report --$opt bogus: no 'accepted:' list: $(cat "$WORK/keys.err")"; continue; }
    missing=""
    for k in $keys; do
        grep -e "--$opt" "$WORK/global" | grep -q -w -e "$k" || missing="$missing $k"
    done
    [ -z "$missing" ] && pass "opprof --help lists report --$opt's keys: $keys" ||
        fail "opprof --help lacks report --$opt keys:$missing"
done

"$OPPROF" help no-such-command >/dev/null 2>"$WORK/bad.err"
st=$?
lines=$(wc -l <"$WORK/bad.err" | tr -d ' ')
[ "$st" -eq 2 ] && [ "$lines" -eq 1 ] && pass "opprof help no-such-command: exit 2, one line" ||
    fail "opprof help no-such-command: exit $st, $lines line(s) on stderr"
finish
