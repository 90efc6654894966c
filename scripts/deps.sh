#!/usr/bin/env bash
# scripts/deps.sh — installs the Debian packages opprof needs to build and test
# (only those missing). Sourced by scripts/demo.sh and scripts/test.sh.
set -euo pipefail

OPPROF_BUILD_PACKAGES="autoconf automake libtool pkg-config make gcc g++ libdw-dev libelf-dev
  libpfm4-dev libunwind-dev libcunit1-dev zlib1g-dev libomp-14-dev"
OPPROF_TEST_PACKAGES="python3 python3-torch linux-perf binutils elfutils util-linux chromium
  openmpi-bin libopenmpi-dev clang-14 libclang-rt-14-dev valgrind npm debootstrap"

opprof_install_packages() {
    local missing=()
    for p in "$@"; do
        # A Node.js not from Debian (nodesource's nodejs carries its own npm)
        # conflicts with Debian's npm package: any working npm will do.
        [ "$p" = npm ] && command -v npm >/dev/null 2>&1 && continue
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "opprof: installing ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Builds opprof in $1 (out of tree) with extra configure flags after it. A
# build dir configured before with other flags is configured again (without
# flags, whatever it was configured with is kept).
opprof_build() {
    local builddir=$1; shift
    local srcdir
    srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    if [ ! -x "$srcdir/configure" ] || [ "$srcdir/configure.ac" -nt "$srcdir/configure" ] \
        || [ "$srcdir/Makefile.am" -nt "$srcdir/Makefile.in" ]; then
        (cd "$srcdir" && autoreconf -fi >/dev/null 2>&1) || { echo "opprof: autoreconf failed" >&2; return 1; }
    fi
    mkdir -p "$builddir"
    local configure=no clean=no
    if [ ! -f "$builddir/Makefile" ]; then
        configure=yes
    elif [ $# -gt 0 ] && [ "$(cd "$builddir" && ./config.status --config | tr -d "'")" != "$*" ]; then
        configure=yes clean=yes # make does not rebuild objects when only the flags change
    fi
    (cd "$builddir" && { [ $configure = no ] || "$srcdir/configure" -q "$@"; } \
        && { [ $clean = no ] || make -s clean; } && make -s -j"$(nproc)")
}
