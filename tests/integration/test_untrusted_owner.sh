#!/bin/sh
# test_untrusted_owner.sh — root reporting on a result another user owns reads
# no file that user could not read (issue 18: "no root-owned secrets read on
# someone else's behalf"). A result's MAP records name the binaries the report
# opens; the result's owner writes them, so they can name any file. The rule
# (symbolize/file_access.c): when opprof runs as root and the result directory
# belongs to another uid, a file named by it is opened only if that uid may
# read it. Checks (the first failed on the round-1 code: root read the 0600
# binary and named its functions):
#   1. result owned by nobody, its binary root-only (0600): not read — its
#      functions show as module+offset and the report says which uid could not
#      read how many binaries;
#   2. the same binary 0644: read (the rule refuses nothing the owner may read);
#   3. 0644 but in a root-only (0700) directory: not read (search permission
#      on the path counts: the open runs with the owner's fs uid);
#   4. the result owned by root itself, binary 0600: read (no rule for root's
#      own results).
. "$(dirname "$0")/lib.sh"
require_all
[ "$(id -u)" -eq 0 ] || skip "needs root (checks what root reads on another user's behalf)"
nobody_uid=$(id -u nobody 2>/dev/null) || skip "no user 'nobody' on this machine"

# The binary in a directory of its own that nobody can search into: $WORK is
# mktemp's 0700, so open its search bit only.
chmod 711 "$WORK" || die "chmod $WORK failed"
mkdir "$WORK/bin" && chmod 755 "$WORK/bin" || die "mkdir failed"
cp "$KNOWN_SPLIT" "$WORK/bin/ks" || die "cannot copy $KNOWN_SPLIT"
record "$WORK/res" -- "$WORK/bin/ks" --seconds 0.3
[ "$RECORD_STATUS" -eq 0 ] || die "opprof record of a copy of known_split exited $RECORD_STATUS"
# A private TMPDIR (under /root) would refuse every binary: the "read" checks
# need nobody to reach $WORK.
if command -v runuser >/dev/null 2>&1 && ! runuser -u nobody -- test -x "$WORK/bin"; then
    skip "user nobody cannot reach $WORK (a private TMPDIR): set TMPDIR=/tmp"
fi
cp -r "$WORK/res" "$WORK/theirs"
chown -R nobody "$WORK/theirs" || die "chown nobody failed"

# check NAME DIR WANT: WANT=named: spin_a is a row (the binary was read);
# WANT=refused: no spin_a row, and a warning names uid nobody and 1 binary.
check() {
    report_json "$2" "$WORK/$1.json" --group-by function
    [ "$REPORT_STATUS" -eq 0 ] || { fail "$1: opprof report exited $REPORT_STATUS"; return; }
    python3 - "$WORK/$1.json" "$3" "$nobody_uid" "$WORK/bin/ks" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
want, uid, ks = sys.argv[2], sys.argv[3], sys.argv[4]
names = {r["name"] for r in doc["rows"]}
warns = doc.get("warnings", [])
# The count line, and the binary's own line. (The workload's library in the
# build tree is refused too when the build tree is private, e.g. under /root:
# so the count is not checked to be 1.)
count = [w for w in warns if "not readable by the result's owner uid " + uid in w]
ks_line = [w for w in warns if w.startswith(ks + ": not read")]
print("  spin_a named: %s; warnings: %s" % ("spin_a" in names, count + ks_line))
if want == "named":
    sys.exit(0 if "spin_a" in names and not ks_line else 1)
sys.exit(0 if "spin_a" not in names and len(count) == 1 and len(ks_line) == 1 else 1)
PY
    if [ $? -eq 0 ]; then
        pass "$1: binary $3"
    else
        fail "$1: expected the binary $3"
    fi
}

chmod 600 "$WORK/bin/ks"
check "root-only binary, result owned by nobody" "$WORK/theirs" refused
chmod 644 "$WORK/bin/ks"
check "world-readable binary, result owned by nobody" "$WORK/theirs" named
chmod 700 "$WORK/bin"
check "world-readable binary in a root-only directory, result owned by nobody" "$WORK/theirs" refused
chmod 755 "$WORK/bin"
chmod 600 "$WORK/bin/ks"
check "root-only binary, result owned by root" "$WORK/res" named
finish
