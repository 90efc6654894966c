#!/usr/bin/env bash
# scripts/test.sh — installs what is missing, builds opprof, runs every test
# (CUnit units + integration tests on real workloads), then the same again in
# an ASan/UBSan build. Exit status 0 only when everything passed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/deps.sh"
opprof_install_packages $OPPROF_BUILD_PACKAGES $OPPROF_TEST_PACKAGES
root=$(cd "$here/.." && pwd)
status=0

run_suite() {
    local builddir=$1; shift
    opprof_build "$builddir" "$@"
    if ! make -C "$builddir" -j1 check; then
        status=1
        for trs in "$builddir"/tests/unit/*.trs "$builddir"/tests/integration/*.trs; do
            [ -f "$trs" ] && grep -q -E "^:test-result: (FAIL|ERROR)" "$trs" && { echo "==== ${trs%.trs}.log"; cat "${trs%.trs}.log"; }
        done
    fi
    # CUnit's summary, for the record.
    [ -f "$builddir/tests/unit/run_unit.log" ] && sed -n '/Run Summary/,/Elapsed/p' "$builddir/tests/unit/run_unit.log"
}

echo "== regular build =="
run_suite "${OPPROF_BUILD:-$root/build}"
echo "== ASan/UBSan build =="
run_suite "${OPPROF_BUILD_SAN:-$root/build-san}" --enable-sanitizers
exit $status
