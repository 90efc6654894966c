/*
 * tests/unit/test_symbolize.c — CUnit tests for symbolize/.
 *
 * Fixtures are built at run time with cc/strip/objcopy into a mkdtemp
 * directory (no binaries in the tree). Expected addresses come from nm and the
 * files' own program headers, and mappings are laid out the way ld.so would
 * map them, so the tests check the symbolizer against the toolchain rather
 * than against itself.
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


static void test_demangle(void)
{
    char *d = symbolize_demangle("_ZN2at4_ops3bmm4callERKNS_6TensorES4_");
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_STRING_EQUAL(d, "at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)");
    free(d);
    CU_ASSERT_PTR_NULL(symbolize_demangle("main"));
    CU_ASSERT_PTR_NULL(symbolize_demangle("i")); /* a C function, not the type "int" */
    CU_ASSERT_PTR_NULL(symbolize_demangle("_Zgarbage!"));
    CU_ASSERT_PTR_NULL(symbolize_demangle(NULL));
}

static void test_symtab_names(void)
{
    REQUIRE_FIXTURES();
    const char *lib = fx("full/libtwo.so");
    /* Initialized: clang cannot tell that CU_ASSERT_FATAL does not return. */
    uint64_t a = 0, as = 0, h = 0, hs = 0, b = 0, bs = 0, z = 0, zs = 0;
    CU_ASSERT_FATAL(nm_sym(lib, "alpha", false, &a, &as) && nm_sym(lib, "hidden_helper", false, &h, &hs));
    CU_ASSERT_FATAL(nm_sym(lib, "_ZN2at4_ops3bmm4callERKNS_6TensorES4_", false, &b, &bs));
    CU_ASSERT_FATAL(nm_sym(lib, "zsym", false, &z, &zs));
    struct symbolizer *s = symbolizer_new(NULL);
    CU_ASSERT_FATAL(map_file(s, 10, LIB_BASE, lib, lib, NULL, 0, NULL) > 0);
    struct sym_frame f;
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 10, LIB_BASE + a + 3, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "alpha");
    CU_ASSERT_EQUAL(f.symbol_offset, 3);
    CU_ASSERT_EQUAL(f.module_offset, a + 3);
    CU_ASSERT_STRING_EQUAL(f.module, "libtwo.so");
    CU_ASSERT_STRING_EQUAL(f.module_path, lib);
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 10, LIB_BASE + h, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "hidden_helper"); /* static: only in .symtab */
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 10, LIB_BASE + b + 1, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)");
    /* Size-0 symbol: only its exact address. */
    CU_ASSERT_EQUAL(zs, 0);
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 10, LIB_BASE + z, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "zsym");
    symbolizer_lookup(s, 10, LIB_BASE + z + 1, false, &f);
    CU_ASSERT(f.function == NULL || strcmp(f.function, "zsym") != 0);
    struct symbolizer_stats st;
    symbolizer_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.modules, 1);
    CU_ASSERT_EQUAL(st.modules_without_symbols, 0);
    symbolizer_free(s);
}

static void check_lines(const char *lib)
{
    uint64_t a = 0, as = 0, b = 0, bs = 0; /* initialized: as above */
    CU_ASSERT_FATAL(nm_sym(lib, "alpha", false, &a, &as) && nm_sym(lib, "beta", false, &b, &bs));
    struct symbolizer *s = symbolizer_new(NULL);
    map_file(s, 1, LIB_BASE, lib, lib, NULL, 0, NULL);
    struct sym_frame f;
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, LIB_BASE + a, false, &f), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f.source_file);
    CU_ASSERT(strstr(f.source_file, "libtwo.c") != NULL);
    CU_ASSERT_EQUAL(f.line, 2);
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, LIB_BASE + b + 5, false, &f), 0);
    CU_ASSERT_EQUAL(f.line, 4);
    symbolizer_lookup(s, 1, LIB_BASE + 0x10, false, &f); /* ELF header page: no CU */
    CU_ASSERT_PTR_NULL(f.source_file);
    symbolizer_free(s);
}

static void test_file_line(void)
{
    REQUIRE_FIXTURES();
    check_lines(fx("full/libtwo.so"));
    check_lines(fx("noar/libtwo.so")); /* no .debug_aranges: CU range table */
}

static void test_dynsym_stripped(void)
{
    REQUIRE_FIXTURES();
    const char *lib = fx("stripped/libtwo.so");
    uint64_t a, as, h, hs, x;
    CU_ASSERT_FATAL(nm_sym(lib, "alpha", true, &a, &as));
    CU_ASSERT_FATAL(!nm_sym(lib, "hidden_helper", true, &x, &x));
    CU_ASSERT_FATAL(nm_sym(fx("full/libtwo.so"), "hidden_helper", false, &h, &hs));
    CU_ASSERT_FATAL(h >= a + as); /* the static helper sits past alpha's st_size */
    struct symbolizer *s = symbolizer_new(NULL);
    map_file(s, 7, LIB_BASE, lib, lib, NULL, 0, NULL);
    struct sym_frame f;
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 7, LIB_BASE + a + 1, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "alpha");
    /* Inside the stripped static function: unknown, never "alpha". */
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 7, LIB_BASE + h + 2, false, &f), -1);
    CU_ASSERT_PTR_NULL(f.function);
    CU_ASSERT_EQUAL(f.module_offset, h + 2);
    CU_ASSERT_STRING_EQUAL(f.module, "libtwo.so");
    /* First byte after alpha: as a leaf PC it is not alpha; as a return
     * address the call site (pc-1) is the last byte of alpha. */
    symbolizer_lookup(s, 7, LIB_BASE + a + as, false, &f);
    CU_ASSERT(f.function == NULL || strcmp(f.function, "alpha") != 0);
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 7, LIB_BASE + a + as, true, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "alpha");
    CU_ASSERT_EQUAL(f.symbol_offset, as - 1);
    CU_ASSERT_PTR_NULL(f.source_file);
    struct symbolizer_stats st;
    symbolizer_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.lookups, 4);
    CU_ASSERT(st.unknown >= 1 && st.unknown <= 2);
    symbolizer_free(s);
}

static void check_debuglink(const char *lib)
{
    uint64_t h, hs;
    CU_ASSERT_FATAL(nm_sym(fx("full/libtwo.so"), "hidden_helper", false, &h, &hs));
    struct symbolizer *s = symbolizer_new(NULL);
    map_file(s, 3, LIB_BASE, lib, lib, NULL, 0, NULL);
    struct sym_frame f;
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 3, LIB_BASE + h + 1, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "hidden_helper");
    CU_ASSERT_EQUAL(f.line, 3); /* line table from the debug file too */
    symbolizer_free(s);
}

static void test_debuglink(void)
{
    REQUIRE_FIXTURES();
    CU_ASSERT_EQUAL(sym_crc32(0, "123456789", 9), 0xCBF43926u);
    check_debuglink(fx("linked/libtwo.so")); /* matched by build-id */
    check_debuglink(fx("crc/libtwo.so"));    /* no build-id: matched by CRC */
    /* A debug file whose CRC no longer matches is ignored. */
    CU_ASSERT_FATAL(run("printf x >> %s", fx("crc/libtwo.dbg")) == 0);
    uint64_t h, hs;
    CU_ASSERT_FATAL(nm_sym(fx("full/libtwo.so"), "hidden_helper", false, &h, &hs));
    struct symbolizer *s = symbolizer_new(NULL);
    map_file(s, 3, LIB_BASE, fx("crc/libtwo.so"), fx("crc/libtwo.so"), NULL, 0, NULL);
    struct sym_frame f;
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 3, LIB_BASE + h + 1, false, &f), -1);
    symbolizer_free(s);
}

static void test_build_id_debug_dir(void)
{
    REQUIRE_FIXTURES();
    const char *lib = fx("stripped/libtwo.so");
    uint8_t bid[64];
    size_t n = readelf_build_id(lib, bid);
    CU_ASSERT_FATAL(n >= 2);
    char hex[200] = "";
    for (size_t i = 1; i < n; i++)
        sprintf(hex + 2 * (i - 1), "%02x", bid[i]);
    CU_ASSERT_FATAL(run("mkdir -p %s/bid/.build-id/%02x && cp %s %s/bid/.build-id/%02x/%s.debug", dir,
                        bid[0], fx("linked/libtwo.debug"), dir, bid[0], hex) == 0);
    uint64_t h, hs;
    CU_ASSERT_FATAL(nm_sym(fx("full/libtwo.so"), "hidden_helper", false, &h, &hs));
    elf_set_debug_root(fx("bid"));
    struct symbolizer *s = symbolizer_new(NULL);
    map_file(s, 3, LIB_BASE, lib, lib, bid, n, NULL);
    struct sym_frame f;
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 3, LIB_BASE + h, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "hidden_helper");
    symbolizer_free(s);
    elf_set_debug_root(NULL);
}

static void check_exe(const char *exe, uint64_t base, bool expect_pgoff)
{
    uint64_t c, cs, pgoff = 0;
    CU_ASSERT_FATAL(nm_sym(exe, "compute", false, &c, &cs));
    struct symbolizer *s = symbolizer_new(NULL);
    CU_ASSERT_FATAL(map_file(s, 99, base, exe, exe, NULL, 0, &pgoff) > 0);
    if (expect_pgoff)
        CU_ASSERT(pgoff != 0);
    struct sym_frame f;
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 99, base + c + 4, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "compute");
    CU_ASSERT_EQUAL(f.module_offset, c + 4);
    CU_ASSERT_EQUAL(f.symbol_offset, 4);
    symbolizer_free(s);
}

static void test_pie_and_static_exe(void)
{
    REQUIRE_FIXTURES();
    check_exe(fx("pie"), 0x555555554000ull, true);
    check_exe(fx("nopie"), 0, true);
}


static void test_build_id_and_missing(void)
{
    REQUIRE_FIXTURES();
    const char *lib = fx("full/libtwo.so");
    uint64_t a, as;
    CU_ASSERT_FATAL(nm_sym(lib, "alpha", false, &a, &as));
    uint8_t bid[64], bad[20];
    size_t n = readelf_build_id(lib, bid);
    CU_ASSERT_FATAL(n > 0);
    memset(bad, 0xab, sizeof bad);
    struct symbolizer *s = symbolizer_new(NULL);
    map_file(s, 1, LIB_BASE, lib, lib, bid, n, NULL);        /* matches */
    map_file(s, 2, LIB_BASE, lib, lib, bad, sizeof bad, NULL); /* another build */
    symbolizer_add_mapping(s, 1, 0x1000000, 0x1010000, 0, "/nonexistent/libgone.so", NULL, 0);
    symbolizer_add_mapping(s, 2, 0x1000000, 0x1010000, 0, "/nonexistent/libgone.so", bad, 20);
    struct sym_frame f;
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, LIB_BASE + a, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "alpha");
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 2, LIB_BASE + a, false, &f), -1);
    CU_ASSERT_PTR_NULL(f.function);
    CU_ASSERT_STRING_EQUAL(f.module, "libtwo.so");
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x1000123, false, &f), -1);
    CU_ASSERT_STRING_EQUAL(f.module, "libgone.so");
    CU_ASSERT_EQUAL(f.module_offset, 0x123);
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 2, 0x1000456, false, &f), -1);
    /* "(deleted)" suffix from /proc/pid/maps: the file itself, if unchanged. */
    char deleted[PATH_MAX + 16];
    snprintf(deleted, sizeof deleted, "%s (deleted)", lib);
    map_file(s, 3, LIB_BASE, lib, deleted, bid, n, NULL);
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 3, LIB_BASE + a, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.module_path, deleted);
    struct symbolizer_stats st;
    symbolizer_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.modules_mismatched, 1);
    CU_ASSERT_EQUAL(st.modules_missing, 1);
    CU_ASSERT_EQUAL(st.lookups, 5);
    CU_ASSERT_EQUAL(st.unknown, 3);
    CU_ASSERT_EQUAL(st.modules, 3); /* libtwo once (by build-id), mismatch, missing */
    struct problems p = {0};
    symbolizer_for_each_problem(s, collect, &p);
    CU_ASSERT_EQUAL_FATAL(p.n, 2);
    CU_ASSERT_STRING_EQUAL(p.what[0], "build-id mismatch");
    CU_ASSERT_STRING_EQUAL(p.path[0], lib);
    CU_ASSERT_STRING_EQUAL(p.what[1], "missing");
    CU_ASSERT_STRING_EQUAL(p.path[1], "/nonexistent/libgone.so");
    symbolizer_free(s);
}

static void test_shared_module_cache(void)
{
    REQUIRE_FIXTURES();
    const char *lib = fx("full/libtwo.so");
    uint64_t a, as;
    CU_ASSERT_FATAL(nm_sym(lib, "alpha", false, &a, &as));
    struct symbolizer *s = symbolizer_new(NULL);
    for (uint32_t pid = 100; pid < 108; pid++)
        map_file(s, pid, LIB_BASE + pid * 0x100000ull, lib, lib, NULL, 0, NULL);
    struct sym_frame f;
    for (int rep = 0; rep < 2; rep++)
        for (uint32_t pid = 100; pid < 108; pid++) {
            CU_ASSERT_EQUAL(symbolizer_lookup(s, pid, LIB_BASE + pid * 0x100000ull + a, false, &f), 0);
            CU_ASSERT_STRING_EQUAL(f.function, "alpha");
        }
    struct symbolizer_stats st;
    symbolizer_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.modules, 1);
    CU_ASSERT_EQUAL(st.lookups, 16);
    CU_ASSERT_EQUAL(st.unknown, 0);
    symbolizer_free(s);
}

static void test_pseudo_and_unmapped(void)
{
    struct symbolizer *s = symbolizer_new(NULL);
    symbolizer_add_mapping(s, 5, 0x10000, 0x20000, 0, "[heap]", NULL, 0);
    symbolizer_add_mapping(s, 5, 0x30000, 0x40000, 0, "", NULL, 0);
    symbolizer_add_mapping(s, 5, 0x50000, 0x60000, 0, "//anon", NULL, 0);
    symbolizer_add_mapping(s, 5, 0x70000, 0x80000, 0, "[anon:jit]", NULL, 0);
    symbolizer_add_mapping(s, 5, 0x90000, 0xa0000, 0, NULL, NULL, 0);
    CU_ASSERT_EQUAL(symbolizer_add_mapping(s, 5, 0xb0000, 0xb0000, 0, "x", NULL, 0), -1);
    struct sym_frame f;
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 5, 0x10010, false, &f), -1);
    CU_ASSERT_STRING_EQUAL(f.module, "[heap]");
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 5, 0x30010, true, &f), -1);
    CU_ASSERT_STRING_EQUAL(f.module, "[anon]");
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 5, 0x50010, false, &f), -1);
    CU_ASSERT_STRING_EQUAL(f.module, "//anon");
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 5, 0x70010, false, &f), -1);
    CU_ASSERT_STRING_EQUAL(f.module, "[anon:jit]");
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 5, 0x90010, false, &f), -1);
    CU_ASSERT_STRING_EQUAL(f.module, "[anon]");
    /* Outside every mapping, unknown pid, pc 0. */
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 5, 0x20000, false, &f), -1);
    CU_ASSERT_PTR_NULL(f.module);
    CU_ASSERT_PTR_NULL(f.module_path);
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 6, 0x10010, false, &f), -1);
    CU_ASSERT_PTR_NULL(f.module);
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 5, 0, true, &f), -1);
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 5, UINT64_MAX, false, &f), -1);
    struct symbolizer_stats st;
    symbolizer_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.modules, 0); /* pseudo paths are not module files */
    struct problems p = {0};
    symbolizer_for_each_problem(s, collect, &p);
    CU_ASSERT_EQUAL(p.n, 0);
    symbolizer_free(s);
    /* NULL-tolerance of the public entry points. */
    symbolizer_free(NULL);
    CU_ASSERT_EQUAL(symbolizer_lookup(NULL, 1, 1, false, &f), -1);
}

static void test_vdso(void)
{
    REQUIRE_FIXTURES();
    /* Dump this process's vDSO the way the agent does. */
    uint64_t base = getauxval(AT_SYSINFO_EHDR), start = 0, end = 0;
    FILE *m = fopen("/proc/self/maps", "r");
    char line[1024];
    while (m && fgets(line, sizeof line, m))
        if (strstr(line, "[vdso]"))
            sscanf(line, "%lx-%lx", &start, &end);
    if (m)
        fclose(m);
    const char *img = fx("res/vdso.so");
    const char *want = "clock_gettime";
    uint64_t c, cs;
    if (base != 0 && base == start && end > start) {
        CU_ASSERT_FATAL(write_file(img, (const void *)(uintptr_t)start, end - start));
        CU_ASSERT_FATAL(nm_sym(img, "__vdso_clock_gettime", true, &c, &cs));
    } else { /* no vDSO here (valgrind): any ELF image exercises the path */
        CU_ASSERT_FATAL(run("cp %s %s", fx("full/libtwo.so"), img) == 0);
        CU_ASSERT_FATAL(nm_sym(img, "alpha", false, &c, &cs));
        start = LIB_BASE;
        end = LIB_BASE + 0x10000;
        want = "alpha";
    }
    struct symbolizer *s = symbolizer_new(fx("res"));
    symbolizer_add_mapping(s, 1, start, end, 0, "[vdso]", NULL, 0);
    struct sym_frame f;
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, start + c + 1, false, &f), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f.function);
    CU_ASSERT(strstr(f.function, want) != NULL);
    CU_ASSERT_STRING_EQUAL(f.module, "[vdso]");
    symbolizer_free(s);
    /* No result dir: counted as missing. */
    s = symbolizer_new(NULL);
    symbolizer_add_mapping(s, 1, start, end, 0, "[vdso]", NULL, 0);
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, start + c, false, &f), -1);
    struct symbolizer_stats st;
    symbolizer_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.modules_missing, 1);
    symbolizer_free(s);
}


static void test_libc_file(void)
{
    uint64_t a, as;
    CU_ASSERT_FATAL(access(LIBC, R_OK) == 0);
    CU_ASSERT_FATAL(nm_sym(LIBC, "strlen", true, &a, &as));
    struct symbolizer *s = symbolizer_new(NULL);
    CU_ASSERT_FATAL(map_file(s, 42, 0x7fabc0000000ull, LIBC, LIBC, NULL, 0, NULL) > 0);
    struct sym_frame f;
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 42, 0x7fabc0000000ull + a, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "strlen");
    CU_ASSERT_STRING_EQUAL(f.module, "libc.so.6");
    CU_ASSERT_EQUAL(f.module_offset, a);
    symbolizer_free(s);
}

/* Adds this process's real executable mappings whose path contains needle. */
static int map_self(struct symbolizer *s, const char *needle)
{
    FILE *m = fopen("/proc/self/maps", "r");
    char line[2 * PATH_MAX];
    int n = 0;
    while (m && fgets(line, sizeof line, m)) {
        unsigned long st, en, off;
        char perms[8], path[PATH_MAX] = "";
        if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %4095[^\n]", &st, &en, perms, &off, path) < 4)
            continue;
        if (perms[2] == 'x' && strstr(path, needle) &&
            symbolizer_add_mapping(s, (uint32_t)getpid(), st, en, off, path, NULL, 0) == 0)
            n++;
    }
    if (m)
        fclose(m);
    return n;
}

static void test_live_process(void)
{
    REQUIRE_FIXTURES();
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *two = dlopen(fx("full/libtwo.so"), RTLD_NOW);
    CU_ASSERT_FATAL(libc && two);
    void *gp = dlsym(libc, "getpid"), *al = dlsym(two, "beta");
    CU_ASSERT_FATAL(gp && al);
    struct symbolizer *s = symbolizer_new(NULL);
    CU_ASSERT_FATAL(map_self(s, "libc.so.6") > 0 && map_self(s, "libtwo.so") > 0);
    struct sym_frame f;
    CU_ASSERT_EQUAL(symbolizer_lookup(s, (uint32_t)getpid(), (uintptr_t)gp, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "getpid");
    CU_ASSERT_EQUAL(symbolizer_lookup(s, (uint32_t)getpid(), (uintptr_t)al + 1, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "beta");
    CU_ASSERT_EQUAL(f.line, 4);
    symbolizer_free(s);
    dlclose(two);
    dlclose(libc);
}

void register_symbolize_tests(void)
{
    CU_pSuite suite = CU_add_suite("symbolize", suite_init, suite_clean);
    if (!suite)
        return;
    CU_add_test(suite, "demangle", test_demangle);
    CU_add_test(suite, "names from .symtab", test_symtab_names);
    CU_add_test(suite, "file:line with -g", test_file_line);
    CU_add_test(suite, ".dynsym when stripped, st_size honored", test_dynsym_stripped);
    CU_add_test(suite, ".gnu_debuglink debug file", test_debuglink);
    CU_add_test(suite, "build-id debug directory", test_build_id_debug_dir);
    CU_add_test(suite, "PIE and non-PIE executables", test_pie_and_static_exe);
    CU_add_test(suite, "build-id mismatch and missing file", test_build_id_and_missing);
    CU_add_test(suite, "one module for many processes", test_shared_module_cache);
    CU_add_test(suite, "pseudo paths and unmapped pcs", test_pseudo_and_unmapped);
    CU_add_test(suite, "[vdso] from the result directory", test_vdso);
    CU_add_test(suite, "libc.so.6 .dynsym", test_libc_file);
    CU_add_test(suite, "live process mappings", test_live_process);
}
