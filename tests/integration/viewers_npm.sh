#!/bin/sh
# viewers_npm.sh DIR — installs the npm packages that test_viewers.sh uses as
# real readers (speedscope, @tracerbench/trace-model, pprof-format) into
# DIR/node_modules, outside the checkout. Cached: a DIR that already holds all
# three is reused without asking the registry, so only the first run of a
# machine needs the network; bounded in time so an unreachable registry makes
# the checks skip instead of hanging the suite. Exit 0 when all are there.
dir=${1:?usage: viewers_npm.sh DIR}
pkgs="speedscope@1.25.0 @tracerbench/trace-model@8.0.0 pprof-format@2.3.2"
have() {
    [ -f "$dir/node_modules/speedscope/dist/release/index.html" ] &&
        [ -f "$dir/node_modules/@tracerbench/trace-model/package.json" ] &&
        [ -f "$dir/node_modules/pprof-format/package.json" ]
}
have && exit 0
command -v npm >/dev/null 2>&1 || { echo "npm not installed"; exit 1; }
mkdir -p "$dir" || exit 1
# shellcheck disable=SC2086 # the package list is meant to split
timeout -k 5 "${OPPROF_NPM_TIME_LIMIT:-180}" npm install --prefix "$dir" --no-audit --no-fund --silent $pkgs \
    >"$dir/npm.log" 2>&1 || { tail -n 3 "$dir/npm.log"; echo "npm install failed (no registry?)"; exit 1; }
have
