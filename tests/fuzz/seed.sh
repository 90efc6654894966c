#!/usr/bin/env bash
# tests/fuzz/seed.sh BUILDDIR — remakes the seed corpus in tests/fuzz/corpus/
# from real recordings made with BUILDDIR's opprof: a two-thread known_split
# (native stacks), py_split under /usr/bin/python3 when it is there (Python
# records),
# and a -e page-faults run (counter records). Streams larger than 48 KB are
# cut at a record boundary near 48 KB (libFuzzer mutates small inputs best),
# and the paths of their MAP records name no file (see below).
# ELF seeds: the stripped test library, a workload binary with DWARF lines,
# and a saved vDSO. Run it after a format change; commit what it writes.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: seed.sh BUILDDIR}" && pwd)
out="$src/tests/fuzz/corpus"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# corpus/torch_shapes/ is written by hand (see README), not here: kept.
rm -rf "$out/stream" "$out/info" "$out/elf"
mkdir -p "$out/stream" "$out/info" "$out/elf"
opprof="$build/opprof"
"$opprof" record -q -o "$tmp/native" -- "$build/tests/workloads/known_split" --seconds 0.2 --threads 2 2>/dev/null
"$opprof" record -q -e page-faults -o "$tmp/counters" -- "$build/tests/workloads/fault_split" --pages 2000 --seconds 0.2 2>/dev/null
if [ -x /usr/bin/python3 ]; then
    "$opprof" record -q -o "$tmp/python" -- /usr/bin/python3 "$src/tests/workloads/py_split.py" --seconds 0.3 2>/dev/null || true
fi
for run in "$tmp"/*/; do
    name=$(basename "$run")
    cp "$run/info" "$out/info/$name"
    # The largest two streams of each run (python3 may be a pyenv shim that
    # runs a few small processes first).
    for s in $(ls -S "$run"/proc-*.raw | head -n 2); do
        python3 - "$s" "$out/stream/$name-$(basename "$s" .raw)" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
hsize = struct.unpack_from("<I", data, 12)[0]
off = hsize
while off + 8 <= len(data) and off < 48 * 1024:
    rtype, size = struct.unpack_from("<II", data, off)
    if size < 8:
        break
    # MAP (type 2): struct opr_map is 48 bytes, then the path. Its first '/'
    # becomes '@', so the path names no file: the stream target then spends
    # its time reading the stream, not symbolizing real libraries (fuzz_elf
    # covers those).
    if rtype == 2 and off + 8 + 48 < len(data) and data[off + 8 + 48] == ord("/"):
        data[off + 8 + 48] = ord("@")
    off += size
open(sys.argv[2], "wb").write(data[:min(off, len(data))])
PY
    done
done
cp "$build/tests/workloads/bin/libsplit_stripped.so" "$out/elf/libsplit_stripped.so"
cp "$build/tests/workloads/stat_probe" "$out/elf/stat_probe"
[ -f "$tmp/native/vdso.so" ] && cp "$tmp/native/vdso.so" "$out/elf/vdso.so"
du -sh "$out"
