#!/usr/bin/env bash
# scripts/test.sh — installs what is missing, builds opprof, runs every test
# (CUnit units + integration tests on real workloads), then:
#   1. gcc with -Werror: every test;
#   2. ASan/UBSan (gcc): every test again;
#   3. clang-14 with -Werror: the build, the unit tests and the checks that
#      need no workload (the workloads are built with gcc-only flags, and the
#      integration tests' expected splits are gcc's code);
#   4. the libFuzzer targets (tests/fuzz/: a result's stream, its info file,
#      the binaries it names) under ASan/UBSan, OPPROF_FUZZ_SECONDS (60) each,
#      after replaying every input that once found a bug;
#   5. make distcheck on the regular build: the tarball builds, installs,
#      uninstalls and passes make check in a read-only tree. Steps 1 and 2
#      already ran every test on the checkout; here the tests are the ones
#      that read each kind of file the tarball must carry (C and Python
#      workloads, OpenMP workloads, fixtures, the man page, the signal-safety
#      allowlist, tools/), which keeps CI inside its time on a busy host.
#      OPPROF_DISTCHECK_TESTS=all runs all of make check there (~9 minutes).
# Exit status 0 only when everything passed. On a 2-core machine: about 25
# minutes. OPPROF_SKIP_DISTCHECK=1 leaves out step 5 (not in CI);
# OPPROF_DISTCHECK_TESTS='tests/unit/run_unit ...' names its tests.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/deps.sh"
opprof_install_packages $OPPROF_BUILD_PACKAGES $OPPROF_TEST_PACKAGES
root=$(cd "$here/.." && pwd)
status=0
SECONDS=0

# run_checks BUILDDIR [make arguments]: make check, then the logs of what failed.
run_checks() {
    local builddir=$1; shift
    if ! make -C "$builddir" -j1 check "$@"; then
        status=1
        for trs in "$builddir"/tests/unit/*.trs "$builddir"/tests/integration/*.trs; do
            [ -f "$trs" ] && grep -q -E "^:test-result: (FAIL|ERROR)" "$trs" && { echo "==== ${trs%.trs}.log"; cat "${trs%.trs}.log"; }
        done
    fi
    # The unit tests must have run: CUnit is installed above and configure is
    # given --with-cunit, so a SKIP here means something is wrong.
    if [ -f "$builddir/tests/unit/cunit_missing.sh.log" ]; then
        echo "opprof: the unit tests were skipped (CUnit missing) in $builddir" >&2
        status=1
    fi
    # CUnit's summary, for the record.
    [ -f "$builddir/tests/unit/run_unit.log" ] && sed -n '/Run Summary/,/Elapsed/p' "$builddir/tests/unit/run_unit.log"
    return 0
}

run_suite() {
    local builddir=$1; shift
    opprof_build "$builddir" "$@" || { status=1; return 0; }
    run_checks "$builddir"
}

step() { printf '== %s (at %d min %02d s)\n' "$1" $((SECONDS / 60)) $((SECONDS % 60)); }

# The distro matrix's roots (tests/integration/test_distros.sh): built once
# and cached in /var/cache/opprof-roots (first run ~4 min for trixie, more for
# bullseye; then seconds). A root that cannot be built is the test's SKIP
# with the reason, not a CI failure here.
step "distro roots (scripts/roots.sh)"
"$here/roots.sh" || echo "opprof: a distro root is unavailable: test_distros.sh reports it as SKIP with the reason" >&2

build=${OPPROF_BUILD:-$root/build}
step "regular build (gcc, -Werror)"
run_suite "$build" --enable-werror --with-cunit
step "ASan/UBSan build"
run_suite "${OPPROF_BUILD_SAN:-$root/build-san}" --enable-sanitizers --with-cunit

step "clang-14 build (-Werror): build, unit tests, signal-safety and help checks"
clang_build=${OPPROF_BUILD_CLANG:-$root/build-clang}
unit_progs="tests/unit/run_unit tests/unit/queue_stress tests/unit/snapshot_stress"
if opprof_build "$clang_build" CC=clang-14 --enable-werror --with-cunit; then
    run_checks "$clang_build" check_PROGRAMS="$unit_progs" \
        TESTS="$unit_progs tests/integration/test_signal_safety.sh tests/integration/test_help.sh"
else
    status=1
fi

step "fuzzing: ${OPPROF_FUZZ_SECONDS:-60} s per target (ASan/UBSan)"
"$root/tests/fuzz/run.sh" "${OPPROF_FUZZ_SECONDS:-60}" "${OPPROF_BUILD_FUZZ:-$root/build-fuzz}" || status=1

if [ "${OPPROF_SKIP_DISTCHECK:-0}" != 1 ]; then
    step "make distcheck"
    dist_tests=${OPPROF_DISTCHECK_TESTS:-tests/unit/run_unit tests/integration/test_known_split.sh
        tests/integration/test_python_split.sh tests/integration/test_openmp.sh tests/integration/test_counters.sh
        tests/integration/test_sweep.sh tests/integration/test_help.sh tests/integration/test_signal_safety.sh
        tests/integration/test_untrusted.sh}
    if [ "$dist_tests" = all ]; then
        make -C "$build" -s distcheck || status=1
    else
        make -C "$build" -s distcheck TESTS="$(echo $dist_tests)" || status=1
    fi
fi
step "done, status $status"
exit $status
