/* tests/unit/test_perf_map.c — the symbolizer naming anonymous code from a
 * perf map (symbolize/perf_map.c) the way CPython 3.12+ writes one under
 * -X perf, and refusing what an untrusted file can throw at it. The maps are
 * written into a temporary result dir as perf-PID.map, which the symbolizer
 * reads before /tmp/perf-PID.map. */
#include <CUnit/CUnit.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolize/symbolize.h"
#include "tests/unit/unit.h"

/* A pid no live process has here (above pid_max's default), so that no
 * /tmp/perf-PID.map of a real process is read by mistake. */
#define FAKE_PID 4190001u

static char dir[64];

static void write_map(const char *text, size_t len)
{
    char path[128];
    snprintf(path, sizeof path, "%s/perf-%u.map", dir, FAKE_PID);
    unlink(path);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fwrite(text, 1, len, f);
    fclose(f);
}

/* A symbolizer over dir with: anonymous code at 0x7f0000000000-+0x10000,
 * libfoo.so (a file-backed mapping, missing on disk) at 0x7f0000100000. */
static struct symbolizer *new_sym(void)
{
    struct symbolizer *s = symbolizer_new(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(symbolizer_add_mapping(s, 1, 0x7f0000000000, 0x7f0000010000, 0, "", NULL, 0), 0);
    CU_ASSERT_EQUAL(symbolizer_add_mapping(s, 1, 0x7f0000100000, 0x7f0000110000, 0, "/nonexistent/libfoo.so",
                                           NULL, 0), 0);
    CU_ASSERT_EQUAL(symbolizer_set_os_pid(s, 1, FAKE_PID), 0);
    return s;
}

static void test_cpython_trampolines(void)
{
    const char map[] = "7f0000000000 b py::_find_and_load:<frozen importlib._bootstrap>\n"
                       "7f00000037bc b py::spin_a:/work/tests/workloads/py_split.py\n"
                       "7f00000037c7 b py::body:/work/a dir with spaces/py_split.py\n"
                       "7f0000100000 100 libfoo_override\n";
    write_map(map, sizeof map - 1);
    struct symbolizer *s = new_sym();
    struct sym_frame f;
    /* A return address inside the trampoline: looked up at pc-1. */
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x7f00000037c0, true, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "py::spin_a:/work/tests/workloads/py_split.py");
    CU_ASSERT_STRING_EQUAL(f.module, "[perf map]");
    CU_ASSERT_EQUAL(f.function_start, 0x7f00000037bc);
    CU_ASSERT_EQUAL(f.symbol_offset, 3);
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x7f00000037c7, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "py::body:/work/a dir with spaces/py_split.py");
    /* Between entries, past the last one: unknown, still [anon]. */
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x7f0000000100, false, &f), -1);
    CU_ASSERT_STRING_EQUAL(f.module, "[anon]");
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x7f00000037d2, false, &f), -1);
    /* A file-backed mapping is never named from the perf map. */
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x7f0000100010, false, &f), -1);
    CU_ASSERT_STRING_EQUAL(f.module, "libfoo.so");
    /* Another process (no os pid given): no perf map. */
    symbolizer_add_mapping(s, 2, 0x7f0000000000, 0x7f0000010000, 0, "", NULL, 0);
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 2, 0x7f00000037c0, false, &f), -1);
    struct symbolizer_stats st;
    symbolizer_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.perf_maps, 1);
    CU_ASSERT_EQUAL(st.perf_map_names, 2);
    symbolizer_free(s);
}

static void test_malformed_lines(void)
{
    /* Each bad line is skipped on its own; the good ones still count. A later
     * line at the same start wins (the address was re-used). */
    char map[4096];
    char longname[1200];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    int n = snprintf(map, sizeof map,
                     "zzz 10 not_hex\n"
                     "7f0000000010 0 zero_size\n"
                     "7f0000000020 10\n"                      /* no name */
                     "fffffffffffffff0 100 wraps_around\n"
                     "17f0000000000 10 beyond_every_mapping\n"
                     "7f0000000040 10 first\n"
                     "7f0000000040 10 second\n"
                     "0x7f0000000060 0x10 with_0x\n"
                     "7f0000000080 10 ctl\x01\x1b[31mred\xff\xfe end\r\n"
                     "7f00000000a0 10 %s\n"
                     "7f00000000c0 10 half_written",
                     longname);
    write_map(map, (size_t)n);
    struct symbolizer *s = new_sym();
    struct sym_frame f;
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x7f0000000010, false, &f), -1);
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x7f0000000020, false, &f), -1);
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x7f0000000040, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "second");
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x7f0000000065, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "with_0x");
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x7f0000000080, false, &f), 0);
    CU_ASSERT_STRING_EQUAL(f.function, "ctl??[31mred?? end");
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x7f00000000a0, false, &f), 0);
    CU_ASSERT(f.function && strlen(f.function) == 400);
    /* The last line has no newline: the writer may be mid-line. */
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x7f00000000c0, false, &f), -1);
    symbolizer_free(s);
}

static void test_not_a_regular_file(void)
{
    char path[128], target[128];
    snprintf(path, sizeof path, "%s/perf-%u.map", dir, FAKE_PID);
    snprintf(target, sizeof target, "%s/target.map", dir);
    FILE *f = fopen(target, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("7f0000000000 10 through_a_symlink\n", f);
    fclose(f);
    struct sym_frame fr;
    /* A symlink is not followed (anyone can plant one in /tmp). */
    unlink(path);
    CU_ASSERT_EQUAL(symlink(target, path), 0);
    struct symbolizer *s = new_sym();
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x7f0000000004, false, &fr), -1);
    symbolizer_free(s);
    /* A FIFO with no writer: no hang, no name. */
    unlink(path);
    CU_ASSERT_EQUAL(mkfifo(path, 0600), 0);
    s = new_sym();
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x7f0000000004, false, &fr), -1);
    symbolizer_free(s);
    /* A directory, and an empty file. */
    unlink(path);
    CU_ASSERT_EQUAL(mkdir(path, 0700), 0);
    s = new_sym();
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x7f0000000004, false, &fr), -1);
    symbolizer_free(s);
    rmdir(path);
    write_map("", 0);
    s = new_sym();
    CU_ASSERT_EQUAL(symbolizer_lookup(s, 1, 0x7f0000000004, false, &fr), -1);
    symbolizer_free(s);
    unlink(path);
    unlink(target);
}

static int suite_init(void)
{
    snprintf(dir, sizeof dir, "/tmp/opprof-unit-perfmap.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int suite_clean(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/perf-%u.map", dir, FAKE_PID);
    unlink(path);
    return rmdir(dir);
}

void register_perf_map_tests(void)
{
    CU_pSuite suite = CU_add_suite("perf map", suite_init, suite_clean);
    if (!suite)
        return;
    CU_add_test(suite, "CPython -X perf trampolines named", test_cpython_trampolines);
    CU_add_test(suite, "malformed lines skipped, names cleaned", test_malformed_lines);
    CU_add_test(suite, "symlink, FIFO, directory, empty file", test_not_a_regular_file);
}
