/*
 * tests/unit/test_stream_process.c — the records format/stream_process.c
 * reads from /proc/self: PROCESS, THREAD and MAP with build-ids (the reader
 * checked against libelf's), the saved vDSO, the maps parser and reader,
 * code mapped late, and a fork child's MAP records written again from
 * memory.
 */
#include <CUnit/CUnit.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "format/format.h"
#include "format/writer_internal.h"
#include "symbolize/symbolize_internal.h"
#include "tests/unit/unit.h"

/* The libc build-id reader the samplers share agrees with libelf's
 * (symbolize/), on this test binary and on libc; a file that is not ELF has
 * none. */
static void test_build_id_matches_libelf(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CU_ASSERT_FATAL(n > 0);
    exe[n] = '\0';
    const char *paths[] = {exe, "/lib/x86_64-linux-gnu/libc.so.6"};
    for (int i = 0; i < 2; i++) {
        struct elf_ident id;
        if (elf_read_ident(paths[i], &id) != 0)
            continue; /* libc elsewhere on another distribution */
        uint8_t mine[OPR_BUILD_ID_MAX];
        int len = opr_read_build_id(paths[i], mine);
        CU_ASSERT_EQUAL(len, (int)id.build_id_len);
        CU_ASSERT_TRUE(len > 0 && memcmp(mine, id.build_id, (size_t)len) == 0);
    }
    uint8_t none[OPR_BUILD_ID_MAX];
    CU_ASSERT_EQUAL(opr_read_build_id("/proc/self/cmdline", none), 0);
    CU_ASSERT_EQUAL(opr_read_build_id("/nonexistent/file", none), 0);
}

/* The hand parser gives what sscanf gives, on every line of this process's
 * maps and on lines made to be awkward. */
static void test_maps_parse(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[PATH_MAX + 128];
    unsigned lines = 0, same = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long start, end, pgoff;
        char perms[8];
        int path_at = 0;
        int got = sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &pgoff, &path_at);
        CU_ASSERT_TRUE_FATAL(got >= 4);
        line[strcspn(line, "\n")] = '\0';
        struct opr_maps_line m;
        lines++;
        if (opr_maps_parse_line(line, line + strlen(line), &m) && m.start == start && m.end == end &&
            m.pgoff == pgoff && memcmp(m.perms, perms, 4) == 0 && m.path_len == strlen(line + path_at) &&
            memcmp(m.path, line + path_at, m.path_len) == 0)
            same++;
    }
    fclose(f);
    CU_ASSERT_TRUE(lines > 5);
    CU_ASSERT_EQUAL(same, lines);

    struct {
        const char *text;
        bool ok;
        uint64_t start, end, pgoff;
        const char *path;
    } cases[] = {
        {"7f0000001000-7f0000002000 r-xp 00001000 fe:01 1234   /usr/lib/a b.so (deleted)", true, 0x7f0000001000,
         0x7f0000002000, 0x1000, "/usr/lib/a b.so (deleted)"},
        {"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]", true,
         0xffffffffff600000, 0xffffffffff601000, 0, "[vsyscall]"},
        {"00400000-00401000 rw-p 00000000 00:00 0", true, 0x400000, 0x401000, 0, ""},
        {"00400000-00401000 rw-p 00000000 00:00 18446744073709551615 /x", true, 0x400000, 0x401000, 0, "/x"},
        {"00400000-00401000 rw-p", false, 0, 0, 0, NULL},
        {"00400000 00401000 rw-p 00000000 00:00 0", false, 0, 0, 0, NULL},
        {"00400000-00401000 rw-p 0000000g 00:00 0", false, 0, 0, 0, NULL},
        {"10000000000000000-1 r-xp 00000000 00:00 0", false, 0, 0, 0, NULL}, /* 17 hex digits */
        {"", false, 0, 0, 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct opr_maps_line m;
        const char *t = cases[i].text;
        bool ok = opr_maps_parse_line(t, t + strlen(t), &m);
        CU_ASSERT_EQUAL(ok, cases[i].ok);
        if (!ok || !cases[i].ok)
            continue;
        CU_ASSERT_EQUAL(m.start, cases[i].start);
        CU_ASSERT_EQUAL(m.end, cases[i].end);
        CU_ASSERT_EQUAL(m.pgoff, cases[i].pgoff);
        CU_ASSERT_TRUE(m.path_len == strlen(cases[i].path) && memcmp(m.path, cases[i].path, m.path_len) == 0);
    }
}

static bool count_maps_line(const struct opr_maps_line *line, void *ctx)
{
    unsigned *seen = ctx;
    seen[seen[0] + 1 < 8 ? seen[0] + 1 : 7] = (unsigned)line->start;
    seen[0]++;
    return seen[0] < 3; /* stop after the third */
}

/* opr_maps_read: lines split across reads, a line longer than the buffer
 * skipped (the next one kept), a bad line left out, and each() stopping it. */
static void test_maps_read(void)
{
    char path[] = "/tmp/opprof-unit-maps-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    unlink(path);
    char longpath[300];
    memset(longpath, 'x', sizeof longpath - 1);
    longpath[sizeof longpath - 1] = '\0';
    dprintf(fd,
            "1000-2000 r-xp 00000000 00:00 0 /a\n3000-4000 r-xp 00000000 00:00 0 /%s\n"
            "garbage\n5000-6000 r-xp 00000000 00:00 0 /b\n7000-8000 r-xp 00000000 00:00 0 /c\n"
            "9000-a000 r-xp 00000000 00:00 0 /d\n",
            longpath);
    lseek(fd, 0, SEEK_SET);
    char buf[128]; /* holds the short lines, not the long one */
    unsigned seen[8] = {0};
    long n = opr_maps_read(fd, buf, sizeof buf, count_maps_line, seen);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_EQUAL(seen[0], 3);
    CU_ASSERT_EQUAL(seen[1], 0x1000);
    CU_ASSERT_EQUAL(seen[2], 0x5000);
    CU_ASSERT_EQUAL(seen[3], 0x7000);
    close(fd);
    CU_ASSERT_EQUAL(opr_maps_read(-1, buf, sizeof buf, count_maps_line, seen), -1);
}

/* The loaded_build_id op: every object's id "from memory" while on. */
static bool fake_ids_on;
static int fake_loaded_build_id(void *ctx, uint64_t addr, uint8_t out[OPR_BUILD_ID_MAX])
{
    (void)ctx;
    (void)addr;
    if (!fake_ids_on)
        return -1; /* "not an object I know": the writer reads the file */
    memset(out, 0xab, 12);
    return 12;
}

/* The MAP records of a stream in the sink, concatenated (struct and path). */
static size_t map_records(const struct sink *k, unsigned char *out, size_t cap, unsigned *count)
{
    size_t len = 0;
    const unsigned char *m;
    *count = 0;
    for (unsigned i = 0; (m = find_record(k, OPR_REC_MAP, i)) != NULL; i++) {
        struct opr_map mr;
        memcpy(&mr, m, sizeof mr);
        size_t n = sizeof mr + mr.path_len;
        if (len + n > cap)
            break;
        memcpy(out + len, m, n);
        len += n;
        ++*count;
    }
    return len;
}

/* A fork child's stream (opr_writer_reset): the MAP records are written
 * again from memory, byte for byte, without a read of the maps; ids come
 * from the op where it knows the object, from the file where it does not. */
static void test_maps_replayed_after_reset(void)
{
    struct sink k;
    memset(&k, 0, sizeof k);
    struct opr_writer_config config = {
        .proc_dir = "/proc/self",
        .ops = {.ctx = &k, .write = sink_write, .loaded_build_id = fake_loaded_build_id},
    };
    struct opr_writer *w = opr_writer_new(&config);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    static unsigned char first[1 << 16], again[1 << 16];
    unsigned nfirst, nagain;
    uint64_t full, queries;

    fake_ids_on = true;
    opr_writer_begin(w, (uint32_t)getpid(), (uint32_t)getppid(), 0, 1000000);
    opr_writer_read_maps(w);
    opr_writer_flush(w);
    size_t len = map_records(&k, first, sizeof first, &nfirst);
    CU_ASSERT_TRUE_FATAL(nfirst > 0);
    const unsigned char *m = find_record(&k, OPR_REC_MAP, 0);
    struct opr_map mr;
    memcpy(&mr, m, sizeof mr);
    CU_ASSERT_EQUAL(mr.build_id_len, 12);
    CU_ASSERT_EQUAL(mr.build_id[11], 0xab);
    opr_writer_maps_counts(w, &full, &queries);
    CU_ASSERT_EQUAL(full, 1);

    opr_writer_reset(w);
    free(k.data);
    memset(&k, 0, sizeof k);
    fake_ids_on = false; /* a read now would give the files' ids */
    opr_writer_begin(w, (uint32_t)getpid(), (uint32_t)getppid(), 0, 1000000);
    opr_writer_read_maps(w);
    opr_writer_flush(w);
    CU_ASSERT_EQUAL(map_records(&k, again, sizeof again, &nagain), len);
    CU_ASSERT_EQUAL(nagain, nfirst);
    CU_ASSERT_EQUAL(memcmp(first, again, len), 0);
    opr_writer_maps_counts(w, &full, &queries);
    CU_ASSERT_EQUAL(full, 0);

    /* The next read is a read: the files' ids (this binary has one). */
    opr_writer_reset(w);
    free(k.data);
    memset(&k, 0, sizeof k);
    opr_writer_free(w);
    w = opr_writer_new(&config);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    opr_writer_begin(w, (uint32_t)getpid(), (uint32_t)getppid(), 0, 1000000);
    opr_writer_read_maps(w);
    opr_writer_flush(w);
    bool file_id = false;
    for (unsigned i = 0; (m = find_record(&k, OPR_REC_MAP, i)) != NULL; i++) {
        memcpy(&mr, m, sizeof mr);
        file_id = file_id || (mr.build_id_len > 0 && mr.build_id[0] != 0xab);
    }
    CU_ASSERT_TRUE(file_id);
    free(k.data);
    opr_writer_free(w);
}

/* PROCESS, THREAD and MAP read from /proc/self, and the vDSO saved. */
static void test_process_records(void)
{
    char dir[] = "/tmp/opprof-unit-writer-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    struct sink k;
    struct opr_writer *w = new_writer(&k, "/proc/self", dir, NULL);
    uint32_t pid = (uint32_t)getpid();
    opr_writer_begin(w, pid, (uint32_t)getppid(), 0, 1000000);
    opr_writer_process(w);
    CU_ASSERT_TRUE(opr_writer_note_thread(w, pid));
    CU_ASSERT_FALSE(opr_writer_note_thread(w, pid));
    CU_ASSERT_TRUE(opr_writer_note_thread(w, 0x7ffffff0)); /* no such thread: remembered, no record */
    opr_writer_read_maps(w);
    size_t after_first_read = opr_writer_pending(w);
    opr_writer_read_maps(w); /* nothing new */
    CU_ASSERT_EQUAL(opr_writer_pending(w), after_first_read);
    opr_writer_flush(w);

    CU_ASSERT_EQUAL(count_records(&k, OPR_REC_PROCESS), 1);
    CU_ASSERT_EQUAL(count_records(&k, OPR_REC_THREAD), 1);
    const unsigned char *t = find_record(&k, OPR_REC_THREAD, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    struct opr_thread tr;
    memcpy(&tr, t, sizeof tr);
    CU_ASSERT_EQUAL(tr.tid, pid);
    CU_ASSERT_EQUAL(tr.flags, OPR_THREAD_MAIN);
    CU_ASSERT_EQUAL(strnlen(tr.name, sizeof tr.name) > 0, 1);
    /* This binary is among the mappings, with its build-id. */
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CU_ASSERT_FATAL(n > 0);
    exe[n] = '\0';
    bool found = false;
    const unsigned char *m;
    for (unsigned i = 0; (m = find_record(&k, OPR_REC_MAP, i)) != NULL; i++) {
        struct opr_map mr;
        memcpy(&mr, m, sizeof mr);
        if (mr.path_len == (size_t)n && memcmp(m + sizeof mr, exe, (size_t)n) == 0)
            found = found || mr.build_id_len > 0;
    }
    CU_ASSERT_TRUE(found);
    /* The vDSO image, byte for byte. */
    char path[sizeof dir + 16];
    snprintf(path, sizeof path, "%s/vdso.so", dir);
    unsigned long vdso = getauxval(AT_SYSINFO_EHDR);
    FILE *f = fopen(path, "rb");
    if (vdso) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        unsigned char head[64];
        CU_ASSERT_EQUAL(fread(head, 1, sizeof head, f), sizeof head);
        CU_ASSERT_EQUAL(memcmp(head, (const void *)vdso, sizeof head), 0);
    }
    if (f)
        fclose(f);
    unlink(path);
    rmdir(dir);
    opr_writer_free(w);
    free(k.data);

    /* With a name for unreadable threads, a thread gone still gets a record. */
    w = new_writer(&k, "/proc/self", NULL, "?");
    opr_writer_begin(w, pid, 1, 0, 1000000);
    opr_writer_note_thread(w, 0x7ffffff0);
    opr_writer_thread_names_again(w);
    opr_writer_flush(w);
    CU_ASSERT_EQUAL(count_records(&k, OPR_REC_THREAD), 2);
    t = find_record(&k, OPR_REC_THREAD, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    memcpy(&tr, t, sizeof tr);
    CU_ASSERT_STRING_EQUAL(tr.name, "?");
    opr_writer_free(w);
    free(k.data);
}

/* A name set after the thread's first record reaches the stream when the
 * agent's status poll sees it (opr_writer_thread_name_seen): one THREAD
 * record with the comm read then; none for the same name again, a name the
 * status file escaped, or a thread without a record. */
static void test_thread_renamed(void)
{
    struct sink k;
    uint32_t pid = (uint32_t)getpid();
    char before[16] = {0};
    CU_ASSERT_EQUAL_FATAL(prctl(PR_GET_NAME, before), 0);
    struct opr_writer *w = new_writer(&k, "/proc/self", NULL, NULL);
    opr_writer_begin(w, pid, 1, 0, 1000000);
    opr_writer_note_thread(w, pid);
    opr_writer_thread_name_seen(w, pid, before); /* unchanged */
    CU_ASSERT_EQUAL_FATAL(prctl(PR_SET_NAME, "opr-renamed"), 0);
    opr_writer_thread_name_seen(w, pid, "opr-renamed");
    opr_writer_thread_name_seen(w, pid, "opr-renamed");  /* written already */
    opr_writer_thread_name_seen(w, pid, "a\\\\b");       /* escaped by status: not comm's form */
    opr_writer_thread_name_seen(w, 0x7ffffff0, "other"); /* no record of that thread */
    prctl(PR_SET_NAME, before);
    opr_writer_flush(w);
    CU_ASSERT_EQUAL(count_records(&k, OPR_REC_THREAD), 2);
    const unsigned char *t = find_record(&k, OPR_REC_THREAD, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    struct opr_thread tr;
    memcpy(&tr, t, sizeof tr);
    CU_ASSERT_EQUAL(tr.tid, pid);
    CU_ASSERT_STRING_EQUAL(tr.name, "opr-renamed");
    opr_writer_free(w);
    free(k.data);
}

/* Code mapped after the maps were read: a stack holding a PC in it gets that
 * one mapping's MAP record from PROCMAP_QUERY, without a full read; a PC
 * where nothing is mapped gets none. A kernel without PROCMAP_QUERY reads
 * the maps in full instead, with the same MAP record. */
static void test_late_code_queried(void)
{
    struct sink k;
    struct opr_writer *w = new_writer(&k, "/proc/self", NULL, NULL);
    opr_writer_begin(w, (uint32_t)getpid(), (uint32_t)getppid(), 0, 1000000);
    opr_writer_read_maps(w);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    /* Three pages, the middle one not executable: only the first is asked for. */
    unsigned char *code = mmap(NULL, 3 * page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CU_ASSERT_FATAL(code != MAP_FAILED);
    CU_ASSERT_EQUAL_FATAL(mprotect(code + page, page, PROT_READ), 0);
    unsigned char *gap = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CU_ASSERT_FATAL(gap != MAP_FAILED);
    CU_ASSERT_EQUAL_FATAL(munmap(gap, page), 0); /* an address where nothing is mapped */
    unsigned maps_before = count_records_pending(w, &k, OPR_REC_MAP);
    uint64_t full0, queries0, full1, queries1;
    opr_writer_maps_counts(w, &full0, &queries0);
    usleep(60 * 1000); /* past the full read's rate limit (50 ms), for a kernel without PROCMAP_QUERY */
    uint64_t pcs[2] = {(uint64_t)(uintptr_t)(code + 16), (uint64_t)(uintptr_t)&count_records};
    CU_ASSERT(opr_writer_stack_id(w, pcs, 2) >= 0);
    opr_writer_maps_counts(w, &full1, &queries1);
    unsigned maps_after = count_records_pending(w, &k, OPR_REC_MAP);
    CU_ASSERT_EQUAL(maps_after, maps_before + 1);
    const unsigned char *m = find_record(&k, OPR_REC_MAP, maps_after - 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    struct opr_map mr;
    memcpy(&mr, m, sizeof mr);
    CU_ASSERT_EQUAL(mr.start, (uint64_t)(uintptr_t)code);
    CU_ASSERT_EQUAL(mr.end, (uint64_t)(uintptr_t)(code + page));
    CU_ASSERT_EQUAL(mr.path_len, 0);
    CU_ASSERT_EQUAL(mr.pgoff, 0); /* anonymous: no file offset, as the maps file prints it */
    bool queried = queries1 == queries0 + 1 && full1 == full0;
    bool read_in_full = queries1 == queries0 + 1 && full1 == full0 + 1; /* no PROCMAP_QUERY here */
    CU_ASSERT_TRUE(queried || read_in_full);
    /* Nothing mapped there: no MAP record; asked once, and no full read where
     * the kernel can be asked (a full read would not find it either). */
    uint64_t nothing[1] = {(uint64_t)(uintptr_t)gap + 8};
    CU_ASSERT(opr_writer_stack_id(w, nothing, 1) >= 0);
    uint64_t full2, queries2;
    opr_writer_maps_counts(w, &full2, &queries2);
    CU_ASSERT_EQUAL(count_records_pending(w, &k, OPR_REC_MAP), maps_after);
    if (queried)
        CU_ASSERT_TRUE(full2 == full1 && queries2 == queries1 + 1);
    munmap(code, 3 * page);
    opr_writer_free(w);
    free(k.data);
}

void register_stream_process_tests(void)
{
    CU_pSuite s = CU_add_suite("stream_process", NULL, NULL);
    CU_add_test(s, "build-ids as libelf reads them", test_build_id_matches_libelf);
    CU_add_test(s, "PROCESS, THREAD, MAP and the vDSO from /proc/self", test_process_records);
    CU_add_test(s, "a fork child's MAP records written again from memory", test_maps_replayed_after_reset);
    CU_add_test(s, "a thread named after its first record: THREAD again", test_thread_renamed);
    CU_add_test(s, "code mapped late: its one mapping queried, not the maps read", test_late_code_queried);
    CU_add_test(s, "maps lines parsed by hand as sscanf reads them", test_maps_parse);
    CU_add_test(s, "maps read in chunks: split lines, a long one skipped", test_maps_read);
}
