#!/usr/bin/env bash
# tests/integration/test_python_capture.sh — the handler's Python capture
# (agent_python_capture with its memos), called from Python code through
# bench/python_capture.la (bench/python_capture.py drives it), against the
# interpreter's own view of the stack at the same call: every frame's code
# object, and every frame's instruction but the innermost one's (which
# moved on to the call since Python was asked). The memos are what this
# checks: the same stack again and again (operator), an innermost frame
# that moves while the outer ones stay (loop), a new code object at each
# capture (fresh, exec'd), and two generators' 40-frame chains in turn
# (switch: the memo holds the other chain). Unlike a profile's split, no
# sampling error here: one wrong frame in 500 captures fails.
# Run under the system python3 (OPPROF_TEST_PYTHON) and every pyenv CPython
# 3.9-3.14 here.
. "$(dirname "$0")/lib.sh"

make_workdir
LIB="$OPPROF_BUILDDIR/bench/.libs/python_capture.so"
DRIVER="$OPPROF_SRCDIR/bench/python_capture.py"
[ -f "$LIB" ] || skip "bench/python_capture.la is not built ($LIB missing; run make check)"
PYTHON=${OPPROF_TEST_PYTHON:-/usr/bin/python3}

# check_capture LABEL PYTHON
check_capture() {
    local label=$1 py=$2 s out
    for s in operator loop fresh switch; do
        # preloaded: the memos are initial-exec TLS, as in the agent
        out=$(LD_PRELOAD="$LIB" limited "$py" "$DRIVER" "$LIB" "$s" 500 --check 2>&1)
        case $? in
        0) pass "$label $s: $(echo "$out" | tail -n 1), each as Python sees the stack" ;;
        77) log "SKIP part: $label: $out"; return ;;
        *) fail "$label $s:"; echo "$out" | sed 's/^/    /' ;;
        esac
    done
}

RAN=0
if "$PYTHON" -c 'import sys; sys.exit(0 if (3, 9) <= sys.version_info[:2] <= (3, 14) else 1)' 2>/dev/null; then
    check_capture system "$PYTHON"
    RAN=1
else
    log "SKIP part: $PYTHON is not CPython 3.9-3.14"
fi
PYENV_ROOT_DIR=$(pyenv_root_dir)
for dir in ${PYENV_ROOT_DIR:+"$PYENV_ROOT_DIR"/versions/3.*}; do
    [ -d "$dir" ] || continue
    ver=$(basename "$dir")
    minor=$(echo "$ver" | cut -d. -f2)
    case "$ver" in *t | *-*) continue ;; esac
    [ "$minor" -ge 9 ] && [ "$minor" -le 14 ] 2>/dev/null || continue
    py="$dir/bin/python3.$minor"
    [ -x "$py" ] || { fail "pyenv $ver: $py is missing"; continue; }
    check_capture "pyenv-$ver" "$py"
    RAN=$((RAN + 1))
done
[ "$RAN" -gt 0 ] || skip "no CPython 3.9-3.14 interpreter here"
finish
