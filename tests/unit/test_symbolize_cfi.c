/*
 * tests/unit/test_symbolize_cfi.c — the symbolizer on damaged files, on .eh_frame
 * function starts for stripped code, and its load time on a big library.
 * (Split from test_symbolize.c; fixtures in symbolize_fixture.inc.)
 */
#include <CUnit/CUnit.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "symbolize/symbolize.h"
#include "symbolize/symbolize_internal.h"
#include "tests/unit/unit.h"
#include "tests/unit/symbolize_fixture.inc"

/* Corrupt, truncated and headerless files: never crash, answer unknown or a
 * name, and keep ASan quiet. */
static void lookup_all(const char *path, uint64_t a)
{
    struct symbolizer *s = symbolizer_new(NULL);
    symbolizer_add_mapping(s, 1, LIB_BASE, LIB_BASE + 0x10000, 0, path, NULL, 0);
    symbolizer_add_mapping(s, 1, LIB_BASE + 0x10000, LIB_BASE + 0x20000, 0x1000, path, NULL, 0);
    struct sym_frame f;
    for (uint64_t pc = LIB_BASE; pc < LIB_BASE + 0x20000; pc += 0x111)
        symbolizer_lookup(s, 1, pc, pc & 1, &f);
    symbolizer_lookup(s, 1, LIB_BASE + a, false, &f);
    symbolizer_lookup(s, 1, LIB_BASE + 0x10000 + a, false, &f);
    struct problems p = {0};
    symbolizer_for_each_problem(s, collect, &p);
    symbolizer_free(s);
}

static void test_garbage(void)
{
    REQUIRE_FIXTURES();
    const char *src = fx("full/libtwo.so");
    uint64_t a, as;
    CU_ASSERT_FATAL(nm_sym(src, "alpha", false, &a, &as));
    FILE *in = fopen(src, "rb");
    CU_ASSERT_FATAL(in != NULL);
    static unsigned char img[1 << 20], tmp[1 << 20];
    size_t len = fread(img, 1, sizeof img, in);
    fclose(in);
    CU_ASSERT_FATAL(len > 4096 && len < sizeof img);

    const char *p = fx("garbage.so");
    CU_ASSERT_FATAL(write_file(p, "", 0));
    lookup_all(p, a);
    for (size_t cut = 16; cut < len; cut = cut * 3 / 2) { /* truncated copies */
        CU_ASSERT_FATAL(write_file(p, img, cut));
        lookup_all(p, a);
    }
    /* No section headers at all: e_shoff/e_shnum/e_shstrndx zeroed. */
    memcpy(tmp, img, len);
    Elf64_Ehdr *eh = (Elf64_Ehdr *)tmp;
    size_t shoff = ((const Elf64_Ehdr *)img)->e_shoff;
    CU_ASSERT_FATAL(shoff > 0 && shoff < len);
    eh->e_shoff = 0;
    eh->e_shnum = 0;
    eh->e_shstrndx = 0;
    CU_ASSERT_FATAL(write_file(p, tmp, len));
    lookup_all(p, a);
    /* Random corruption, headers first (where damage matters most). */
    srand(12345);
    for (int iter = 0; iter < 150; iter++) {
        memcpy(tmp, img, len);
        int nflip = 1 + rand() % 16;
        for (int k = 0; k < nflip; k++) {
            size_t at = iter % 2 ? (size_t)rand() % 512 : (size_t)rand() % len;
            tmp[at] = (unsigned char)rand();
        }
        if (iter % 3 == 0) /* also damage section headers and the symbol tables */
            for (int k = 0; k < 64; k++)
                tmp[shoff + (size_t)rand() % (len - shoff)] =
                    (unsigned char)rand();
        CU_ASSERT_FATAL(write_file(p, tmp, len));
        lookup_all(p, a);
    }
    /* The unwind tables, read for PCs without a symbol: .eh_frame_hdr to the
     * end of its PT_LOAD, sometimes with a huge fde_count. */
    const Elf64_Ehdr *e = (const Elf64_Ehdr *)img;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(img + e->e_phoff);
    uint64_t lo = 0, hi = 0;
    for (int i = 0; i < e->e_phnum; i++)
        lo = ph[i].p_type == PT_GNU_EH_FRAME ? ph[i].p_offset : lo;
    for (int i = 0; i < e->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && lo >= ph[i].p_offset && lo - ph[i].p_offset < ph[i].p_filesz)
            hi = ph[i].p_offset + ph[i].p_filesz;
    CU_ASSERT_FATAL(lo > 0 && hi > lo && hi <= len);
    for (int iter = 0; iter < 150; iter++) {
        memcpy(tmp, img, len);
        for (int k = 0, nflip = 1 + rand() % 8; k < nflip; k++)
            tmp[lo + (size_t)rand() % (hi - lo)] = (unsigned char)rand();
        if (iter % 10 == 0)
            memset(tmp + lo + 8, 0x7f, 4);
        CU_ASSERT_FATAL(write_file(p, tmp, len));
        lookup_all(p, a);
    }
    for (size_t i = 0; i < len; i++)
        tmp[i] = (unsigned char)rand();
    CU_ASSERT_FATAL(write_file(p, tmp, len));
    lookup_all(p, a);
    lookup_all(dir, a); /* a directory, not a file */
}

/* Looks up the first, middle and last byte of every FDE that readelf (an
 * independent .eh_frame decoder) lists in file, mapped at base in pid 3: each
 * must give that FDE's start, from CFI exactly when no symbol names it.
 * Returns the number of FDEs; *unnamed counts PCs found only by CFI. */
static size_t check_fdes(struct symbolizer *s, uint64_t base, const char *file, size_t *unnamed,
                         size_t *wrong)
{
    char cmd[2 * PATH_MAX], line[1024], *pc;
    snprintf(cmd, sizeof cmd, "readelf --debug-dump=frames '%s' 2>/dev/null", file);
    FILE *p = popen(cmd, "r");
    size_t n = 0;
    unsigned long long lo, hi;
    *unnamed = *wrong = 0;
    while (p && fgets(line, sizeof line, p)) {
        if (!strstr(line, " FDE ") || !(pc = strstr(line, "pc=")) ||
            sscanf(pc, "pc=%llx..%llx", &lo, &hi) != 2 || hi <= lo)
            continue;
        n++;
        uint64_t pcs[3] = {lo, lo + (hi - lo) / 2, hi - 1};
        for (int k = 0; k < 3; k++) {
            struct sym_frame f;
            bool named = symbolizer_lookup(s, 3, base + pcs[k], false, &f) == 0;
            *unnamed += !named;
            *wrong += f.function_start != lo || f.function_start_from_cfi == named;
        }
    }
    if (p)
        pclose(p);
    return n;
}

/* PCs of a static function in a stripped library: no name, but one function
 * start for all of them, the one the unstripped .symtab gives. */
static void test_cfi_function_start(void)
{
    REQUIRE_FIXTURES();
    const char *lib = fx("stripped/libtwo.so");
    uint64_t a, as, h, hs, z, zs, x;
    CU_ASSERT_FATAL(nm_sym(fx("full/libtwo.so"), "hidden_helper", false, &h, &hs) && hs > 8);
    CU_ASSERT_FATAL(!nm_sym(lib, "hidden_helper", true, &x, &x));
    CU_ASSERT_FATAL(nm_sym(lib, "alpha", true, &a, &as) && nm_sym(lib, "zsym", true, &z, &zs));
    struct symbolizer *s = symbolizer_new(NULL);
    CU_ASSERT_FATAL(map_file(s, 3, LIB_BASE, lib, lib, NULL, 0, NULL) > 0);
    struct sym_frame f;
    uint64_t pcs[4] = {h + 1, h + hs - 1, h + hs /* as a return address: pc-1 */, h};
    for (int k = 0; k < 4; k++) {
        CU_ASSERT_EQUAL(symbolizer_lookup(s, 3, LIB_BASE + pcs[k], k == 2, &f), -1);
        CU_ASSERT_PTR_NULL(f.function);
        CU_ASSERT_EQUAL(f.module_offset, pcs[k] - (k == 2));
        CU_ASSERT_EQUAL(f.function_start, h);
        CU_ASSERT(f.function_start_from_cfi);
    }
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 3, LIB_BASE + a + 3, false, &f), 0); /* exported */
    CU_ASSERT_STRING_EQUAL(f.function, "alpha");
    CU_ASSERT(f.function_start == a && !f.function_start_from_cfi);
    /* zsym (asm, no CFI) and the ELF header: no FDE covers them. */
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 3, LIB_BASE + z + 1, false, &f), -1);
    CU_ASSERT(f.function_start == 0 && !f.function_start_from_cfi);
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 3, LIB_BASE + 0x10, false, &f), -1);
    CU_ASSERT_EQUAL(f.function_start, 0);
    size_t unnamed, wrong;
    CU_ASSERT(check_fdes(s, LIB_BASE, lib, &unnamed, &wrong) >= 4);
    CU_ASSERT(unnamed >= 3); /* hidden_helper, and crtstuff's static functions */
    CU_ASSERT_EQUAL(wrong, 0);
    symbolizer_free(s);
    s = symbolizer_new(NULL); /* unstripped: the symbol gives the start */
    map_file(s, 3, LIB_BASE, fx("full/libtwo.so"), fx("full/libtwo.so"), NULL, 0, NULL);
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 3, LIB_BASE + h + 2, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "hidden_helper");
    CU_ASSERT(f.function_start == h && !f.function_start_from_cfi);
    symbolizer_free(s);
}

/* A stripped distribution binary: most of its functions are found by CFI. */
static void test_cfi_python(void)
{
    const char *py = "/usr/bin/python3.11";
    if (access(py, R_OK) != 0) {
        printf("\n    [%s not present: skipped] ", py);
        return;
    }
    struct symbolizer *s = symbolizer_new(NULL); /* at its link-time vaddrs, PIE or not */
    CU_ASSERT_FATAL(map_file(s, 3, 0, py, py, NULL, 0, NULL) > 0);
    size_t unnamed, wrong, n = check_fdes(s, 0, py, &unnamed, &wrong);
    printf("\n    [%s: %zu FDEs, %zu PCs found by CFI only, %zu wrong] ", py, n, unnamed, wrong);
    CU_ASSERT(n > 100 && unnamed > 0);
    CU_ASSERT_EQUAL(wrong, 0);
    symbolizer_free(s);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Load time of a big stripped C++ library, when this machine has one. */
static void test_big_library_speed(void)
{
    const char *cands[] = {"/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13", LIBC};
    const char *lib = access(cands[0], R_OK) == 0 ? cands[0] : cands[1];
    struct symbolizer *s = symbolizer_new(NULL);
    CU_ASSERT_FATAL(map_file(s, 1, 0x7f0000000000ull, lib, lib, NULL, 0, NULL) > 0);
    struct sym_frame f;
    uint64_t st = last_text_start, len = last_text_end - last_text_start;
    double t0 = now_ms();
    symbolizer_lookup(s, 1, st, false, &f); /* loads the module */
    double t1 = now_ms();
    unsigned found = 0, n = 200000;
    uint64_t x = 88172645463325252ull;
    for (unsigned i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        found += symbolizer_lookup(s, 1, st + x % len, false, &f) == 0;
    }
    double t2 = now_ms();
    printf("\n    [%s: load %.1f ms, %.3f us/lookup, %u/%u named] ", lib, t1 - t0,
           (t2 - t1) * 1e3 / n, found, n);
    CU_ASSERT(t1 - t0 < 3000); /* generous: sanitizer builds are slow */
    CU_ASSERT(found > 0);
    symbolizer_free(s);
}

void register_symbolize_cfi_tests(void)
{
    CU_pSuite suite = CU_add_suite("symbolize_cfi", suite_init, suite_clean);
    CU_add_test(suite, "corrupt and truncated files", test_garbage);
    CU_add_test(suite, "function start from .eh_frame when stripped", test_cfi_function_start);
    CU_add_test(suite, "python3.11 static functions by CFI", test_cfi_python);
    CU_add_test(suite, "big library load time", test_big_library_speed);
}
