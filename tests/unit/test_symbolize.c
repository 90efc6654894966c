/*
 * tests/unit/test_symbolize.c — CUnit tests for symbolize/.
 *
 * Fixtures are built at run time with cc/strip/objcopy into a mkdtemp
 * directory (no binaries in the tree). Expected addresses come from nm and the
 * files' own program headers, and mappings are laid out the way ld.so would
 * map them, so the tests check the symbolizer against the toolchain rather
 * than against itself.
 */
#define _GNU_SOURCE
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

static char dir[PATH_MAX];
static bool fixtures_ok;

/* Line numbers below are asserted by the file:line tests. */
static const char lib_src[] =
    "/* fixture */\n"
    "int alpha(int x) { return x * 3 + 1; }\n"
    "static int __attribute__((noinline)) hidden_helper(int x) { return x * x - alpha(x); }\n"
    "int beta(int x) { return hidden_helper(x) + 7; }\n"
    "int at_bmm(int x) __asm__(\"_ZN2at4_ops3bmm4callERKNS_6TensorES4_\");\n"
    "int at_bmm(int x) { return x + 42; }\n"
    "__asm__(\".text\\n.globl zsym\\n.type zsym,@function\\nzsym:\\n nop\\n nop\\n ret\\n\");\n";

static const char exe_src[] =
    "int compute(int n) { int s = 0; for (int i = 0; i < n; i++) s += i; return s; }\n"
    "int main(int argc, char **argv) { (void)argv; return compute(argc) == 12345; }\n";

static int run(const char *fmt, ...)
{
    char cmd[4 * PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    if (rc != 0)
        fprintf(stderr, "test_symbolize: command failed (%d): %s\n", rc, cmd);
    return rc;
}

static const char *fx(const char *rel)
{
    static char bufs[8][PATH_MAX + 64];
    static int k;
    char *b = bufs[k++ & 7];
    snprintf(b, PATH_MAX + 64, "%s/%s", dir, rel);
    return b;
}

static bool write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

/* Address and size of name from nm (dynamic: .dynsym only). */
static bool nm_sym(const char *file, const char *name, bool dynamic, uint64_t *addr, uint64_t *size)
{
    char cmd[2 * PATH_MAX], line[4096];
    snprintf(cmd, sizeof cmd, "nm -S --defined-only %s '%s' 2>/dev/null", dynamic ? "-D" : "", file);
    FILE *p = popen(cmd, "r");
    if (!p)
        return false;
    bool found = false;
    while (!found && fgets(line, sizeof line, p)) {
        char f[4][1024];
        int n = sscanf(line, "%1023s %1023s %1023s %1023s", f[0], f[1], f[2], f[3]);
        const char *sym = n == 4 ? f[3] : n == 3 ? f[2] : NULL;
        if (!sym)
            continue;
        size_t len = strcspn(sym, "@");
        if (strlen(name) == len && strncmp(sym, name, len) == 0) {
            *addr = strtoull(f[0], NULL, 16);
            *size = n == 4 ? strtoull(f[1], NULL, 16) : 0;
            found = true;
        }
    }
    pclose(p);
    return found;
}

static uint64_t last_text_start, last_text_end; /* first executable mapping of map_file() */

/* Declares the executable PT_LOADs of elf_file as ld.so maps them at base
 * (page-aligned start and file offset). Returns the number of mappings. */
static int map_file(struct symbolizer *s, uint32_t pid, uint64_t base, const char *elf_file,
                    const char *recorded_path, const uint8_t *bid, size_t bidlen,
                    uint64_t *first_pgoff)
{
    elf_version(EV_CURRENT);
    int fd = open(elf_file, O_RDONLY);
    if (fd < 0)
        return 0;
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t phnum = 0;
    int n = 0;
    if (e && elf_getphdrnum(e, &phnum) == 0) {
        for (size_t i = 0; i < phnum; i++) {
            GElf_Phdr ph;
            if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
                continue;
            uint64_t start = base + (ph.p_vaddr & ~0xfffull);
            uint64_t end = (base + ph.p_vaddr + ph.p_memsz + 0xfff) & ~0xfffull;
            uint64_t pgoff = ph.p_offset & ~0xfffull;
            if (first_pgoff && n == 0)
                *first_pgoff = pgoff;
            if (n == 0)
                last_text_start = start, last_text_end = end;
            if (symbolizer_add_mapping(s, pid, start, end, pgoff, recorded_path, bid, bidlen) == 0)
                n++;
        }
    }
    if (e)
        elf_end(e);
    close(fd);
    return n;
}

static size_t readelf_build_id(const char *file, uint8_t *out)
{
    char cmd[2 * PATH_MAX], line[1024];
    snprintf(cmd, sizeof cmd, "readelf -n '%s' 2>/dev/null", file);
    FILE *p = popen(cmd, "r");
    size_t n = 0;
    while (p && fgets(line, sizeof line, p)) {
        char *h = strstr(line, "Build ID: ");
        if (!h)
            continue;
        for (h += 10; n < 64 && h[0] && h[1] && h[0] != '\n'; h += 2) {
            unsigned v;
            if (sscanf(h, "%2x", &v) != 1)
                break;
            out[n++] = (uint8_t)v;
        }
    }
    if (p)
        pclose(p);
    return n;
}

static int suite_init(void)
{
    snprintf(dir, sizeof dir, "%s/opprof-symtest-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir))
        return 0; /* tests then fail with a clear message instead of a suite error */
    if (!write_file(fx("libtwo.c"), lib_src, sizeof lib_src - 1) ||
        !write_file(fx("main.c"), exe_src, sizeof exe_src - 1))
        return 0;
    fixtures_ok =
        run("mkdir -p %s/full %s/stripped %s/linked %s/res %s/bid", dir, dir, dir, dir, dir) == 0 &&
        run("cd %s && cc -shared -fPIC -O0 -g -Wl,--build-id -o full/libtwo.so libtwo.c", dir) == 0 &&
        run("cd %s && strip --strip-all -o stripped/libtwo.so full/libtwo.so", dir) == 0 &&
        run("cd %s && objcopy --only-keep-debug full/libtwo.so linked/libtwo.debug", dir) == 0 &&
        run("cd %s && strip --strip-all -o linked/libtwo.so full/libtwo.so && "
            "objcopy --add-gnu-debuglink=linked/libtwo.debug linked/libtwo.so", dir) == 0 &&
        run("mkdir -p %s/noar && objcopy --remove-section=.debug_aranges %s/full/libtwo.so "
            "%s/noar/libtwo.so", dir, dir, dir) == 0 &&
        run("mkdir -p %s/crc && cd %s && cc -shared -fPIC -O0 -g -Wl,--build-id=none -o crc/full.so "
            "libtwo.c && objcopy --only-keep-debug crc/full.so crc/libtwo.dbg && strip --strip-all "
            "-o crc/libtwo.so crc/full.so && objcopy --add-gnu-debuglink=crc/libtwo.dbg crc/libtwo.so",
            dir, dir) == 0 &&
        run("cd %s && cc -O0 -g -fPIE -pie -o pie main.c && cc -O0 -fno-PIE -no-pie -o nopie main.c",
            dir) == 0;
    return 0;
}

static int suite_clean(void)
{
    if (dir[0])
        run("rm -rf '%s'", dir);
    return 0;
}

#define REQUIRE_FIXTURES()                                        \
    do {                                                          \
        CU_ASSERT_FATAL(fixtures_ok);                             \
    } while (0)

static const uint64_t LIB_BASE = 0x7f1200000000ull;

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
    uint64_t a, as, h, hs, b, bs, z, zs;
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
    uint64_t a, as, b, bs;
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

struct problems {
    int n;
    char what[8][64];
    char path[8][PATH_MAX];
};

static void collect(const char *path, const char *problem, void *arg)
{
    struct problems *p = arg;
    if (p->n < 8) {
        snprintf(p->path[p->n], PATH_MAX, "%s", path);
        snprintf(p->what[p->n], 64, "%s", problem);
    }
    p->n++;
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

static const char LIBC[] = "/usr/lib/x86_64-linux-gnu/libc.so.6";

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
    CU_add_test(suite, "corrupt and truncated files", test_garbage);
    CU_add_test(suite, "function start from .eh_frame when stripped", test_cfi_function_start);
    CU_add_test(suite, "python3.11 static functions by CFI", test_cfi_python);
    CU_add_test(suite, "big library load time", test_big_library_speed);
}
