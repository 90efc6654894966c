#!/usr/bin/env bash
# tests/fuzz/build.sh [BUILDDIR] — builds the libFuzzer targets (clang-14,
# -fsanitize=fuzzer,address,undefined) in BUILDDIR (default build-fuzz/ at
# the top of the checkout): the core libraries are configured and built
# there with the fuzzer's instrumentation, then each tests/fuzz/fuzz_*.c
# target is linked against them:
#   fuzz_stream  a result's stream (proc-*.raw) beside a valid info file
#   fuzz_info    a result's info file beside a valid stream
#   fuzz_elf     a binary named by a result (ELF, DWARF lines, .eh_frame)
#   fuzz_torch_shapes  a torch_shapes.<pid>.tsv (record --torch-shapes)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build-fuzz}
CLANG=${CLANG:-clang-14}
command -v "$CLANG" >/dev/null || { echo "fuzz: $CLANG not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 2; }
flags="-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
mkdir -p "$build"
if [ ! -f "$build/Makefile" ]; then
    [ -x "$src/configure" ] || (cd "$src" && autoreconf -fi >/dev/null 2>&1)
    (cd "$build" && "$src/configure" -q CC="$CLANG" CFLAGS="$flags")
fi
make -C "$build" -s -j"$(nproc)" libopprof_common.la libopprof_core.la
libs="$build/.libs/libopprof_core.a $build/.libs/libopprof_common.a"
deps="$(pkg-config --libs libdw libelf) -lpfm -lstdc++ -lpthread -lm -lz"
link() { # link NAME SOURCE [DEFINES]
    "$CLANG" $flags -fsanitize=fuzzer -D_GNU_SOURCE ${3:-} -I"$src" -I"$build" -o "$build/$1" "$src/tests/fuzz/$2" $libs $deps
}
link fuzz_stream fuzz_result.c
link fuzz_info fuzz_result.c -DFUZZ_INFO
link fuzz_elf fuzz_elf.c
link fuzz_torch_shapes fuzz_torch_shapes.c
echo "fuzz: built $build/fuzz_stream $build/fuzz_info $build/fuzz_elf $build/fuzz_torch_shapes"
