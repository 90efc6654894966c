#!/usr/bin/env bash
# scripts/demo.sh — installs what is missing, builds opprof, profiles the bundled
# demo workload (a program with a known 50/30/20 % split across three
# functions, one in a stripped library, two threads) and prints the report.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/deps.sh"
opprof_install_packages $OPPROF_BUILD_PACKAGES
build=${OPPROF_BUILD:-$here/../build}
opprof_build "$build"
make -s -C "$build" check TESTS= >/dev/null   # builds the bundled workloads
out=$(mktemp -d)
cd "$out"
"$build/opprof" record -- "$build/tests/workloads/known_split" --threads 2 --seconds 2
"$build/opprof" report --sort self --limit 12
echo
"$build/opprof" report --group-by thread
echo
echo "result directory: $out/$(ls -d opprof.* | tail -1)"
