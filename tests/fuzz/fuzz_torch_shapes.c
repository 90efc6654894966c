/*
 * tests/fuzz/fuzz_torch_shapes.c — libFuzzer target over a torch_shapes.<pid>.tsv
 * (record --torch-shapes): the workload writes it, so it is untrusted. The
 * reader must skip and count bad lines, refuse a file without the header, and
 * compute FLOPs of whatever shapes it holds without crashing or overflowing.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "analyze/analyze.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct torch_shapes ts;
    memset(&ts, 0, sizeof ts);
    char err[256];
    if (torch_shapes_parse(&ts, (const char *)data, size, err, sizeof err) == 0)
        torch_shapes_compute(&ts);
    torch_shapes_free(&ts);
    return 0;
}
