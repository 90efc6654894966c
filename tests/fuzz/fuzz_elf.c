/*
 * tests/fuzz/fuzz_elf.c — libFuzzer target over the ELF/DWARF/CFI reader
 * (symbolize/): a result's MAP records name binaries, and a binary on the
 * reporting machine may be anything. The input is written to a file that a
 * mapping of a fake process names; a few PCs spread over the mapping are then
 * looked up (symbols, .gnu_debuglink, line tables), and the .eh_frame table
 * is read and searched. Built by tests/fuzz/build.sh.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolize/symbolize.h"
#include "symbolize/symbolize_internal.h"

static char fuzz_dir[256], fuzz_file[300];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/opprof-fuzz-elf.XXXXXX", base);
    if (!mkdtemp(fuzz_dir)) {
        perror("fuzz_elf: mkdtemp");
        exit(1);
    }
    snprintf(fuzz_file, sizeof fuzz_file, "%s/lib.so", fuzz_dir);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = open(fuzz_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size)
        abort();
    close(fd);

    struct symbolizer *sym = symbolizer_new(fuzz_dir);
    if (!sym)
        return 0;
    const uint64_t start = 0x400000, len = 0x100000;
    symbolizer_add_mapping(sym, 1, start, start + len, 0, fuzz_file, NULL, 0);
    for (uint64_t pc = start; pc < start + len; pc += len / 16 + 0x123) {
        struct sym_frame info;
        symbolizer_lookup(sym, 1, pc, false, &info);
        symbolizer_lookup(sym, 1, pc + 7, true, &info);
    }
    symbolizer_free(sym);

    struct eh_frame *ef = eh_frame_open(fuzz_file);
    if (ef) {
        uint64_t lo, hi;
        for (uint64_t va = 0; va < 0x20000; va += 0x777)
            eh_frame_find(ef, va, &lo, &hi);
        eh_frame_free(ef);
    }
    return 0;
}
