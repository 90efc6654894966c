#!/usr/bin/env bash
# scripts/demo.sh — installs what is missing, builds opprof, then profiles the
# two bundled demo workloads and prints their reports:
#   1. a small PyTorch training loop (attention + MLP, forward/backward/SGD):
#      operators by self time with the Python line that calls them, phases,
#      findings, and the threading view;
#   2. a C program with a known 50/30/20 % split across three functions (one
#      in a stripped library), on two threads: function hotspots.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/deps.sh"
opprof_install_packages $OPPROF_BUILD_PACKAGES python3 python3-torch
build=${OPPROF_BUILD:-$here/../build}
opprof_build "$build"
make -s -C "$build" check TESTS= >/dev/null   # builds the bundled workloads
out=$(mktemp -d)
cd "$out"

echo "==== 1. PyTorch: opprof record -- python3 tests/workloads/torch_train.py --steps 60"
"$build/opprof" record -- /usr/bin/python3 "$here/../tests/workloads/torch_train.py" --steps 60
"$build/opprof" report --group-by op --sort self --limit 12
echo
echo "==== 2. C: opprof record -- known_split --threads 2 --seconds 2"
"$build/opprof" record -- "$build/tests/workloads/known_split" --threads 2 --seconds 2
"$build/opprof" report --sort self --limit 8
echo
echo "result directories: $out/opprof.000 (PyTorch), $out/opprof.001 (C)"
echo "try: $build/opprof export $out/opprof.000 --flamegraph flame.svg --html report.html"
