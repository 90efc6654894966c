#!/usr/bin/env bash
# scripts/deps.sh — installs the Debian packages opprof needs to build and test
# (only those missing). Sourced by scripts/demo.sh and scripts/test.sh.
set -euo pipefail

OPPROF_BUILD_PACKAGES="autoconf automake libtool pkg-config make gcc g++ libdw-dev libelf-dev
  libpfm4-dev libunwind-dev libcunit1-dev zlib1g-dev libomp-14-dev"
OPPROF_TEST_PACKAGES="python3 python3-torch linux-perf binutils elfutils util-linux chromium
  openmpi-bin libopenmpi-dev valgrind npm"

opprof_install_packages() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "opprof: installing ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Builds opprof in $1 (out of tree) with extra configure flags after it.
opprof_build() {
    local builddir=$1; shift
    local srcdir
    srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    if [ ! -x "$srcdir/configure" ] || [ "$srcdir/configure.ac" -nt "$srcdir/configure" ] \
        || [ "$srcdir/Makefile.am" -nt "$srcdir/Makefile.in" ]; then
        (cd "$srcdir" && autoreconf -fi >/dev/null 2>&1) || { echo "opprof: autoreconf failed" >&2; return 1; }
    fi
    mkdir -p "$builddir"
    (cd "$builddir" && { [ -f Makefile ] || "$srcdir/configure" -q "$@"; } && make -s -j"$(nproc)")
}
