/*
 * tests/unit/test_stream_writer.c — format/'s stream writer on its own: the
 * framing (8-byte padding, no record split across two writes), the id tables
 * (a chain written once, a Python frame read once per instruction), and the
 * records it reads from /proc/self (PROCESS, THREAD, MAP with build-ids, the
 * saved vDSO), with the build-id reader checked against libelf's.
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

/* A memory sink that remembers where each write() of the writer ended. */
struct sink {
    unsigned char *data;
    size_t len, cap;
    size_t write_ends[64];
    unsigned nwrites;
};

static size_t sink_write(void *ctx, const void *bytes, size_t len)
{
    struct sink *k = ctx;
    if (k->len + len > k->cap) {
        k->cap = (k->len + len) * 2;
        k->data = realloc(k->data, k->cap);
    }
    memcpy(k->data + k->len, bytes, len);
    k->len += len;
    if (k->nwrites < 64)
        k->write_ends[k->nwrites++] = k->len;
    return len;
}

/* Counts the frames the writer asked to read, and how many with names. */
static unsigned resolved, resolved_with_names;

struct fake_frame {
    const char *qualname; /* NULL: its code object is gone */
    int32_t line;
};

static bool resolve_fake(void *ctx, const void *frames, unsigned i, struct opr_pycode_names *out, bool need_names)
{
    const struct fake_frame *f = (const struct fake_frame *)frames + i;
    resolved++;
    resolved_with_names += need_names;
    if (!f->qualname)
        return false;
    snprintf(out->filename, sizeof out->filename, "/w/app.py");
    snprintf(out->qualname, sizeof out->qualname, "%s", f->qualname);
    out->first_line = 1;
    out->line = f->line;
    return true;
}

static struct opr_writer *new_writer(struct sink *k, const char *proc_dir, const char *result_dir,
                                     const char *unreadable_name)
{
    memset(k, 0, sizeof *k);
    struct opr_writer_config config = {
        .proc_dir = proc_dir,
        .result_dir = result_dir,
        .unreadable_thread_name = unreadable_name,
        .ops = {.ctx = k, .write = sink_write, .resolve_pyframe = resolve_fake},
    };
    struct opr_writer *w = opr_writer_new(&config);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    return w;
}

/* Walks the records after the file header; counts those of `type` (all when
 * 0) and checks that each is 8-byte sized and inside the stream. */
static unsigned count_records(const struct sink *k, uint32_t type)
{
    unsigned n = 0;
    size_t off = sizeof(struct opr_file_header);
    while (off + sizeof(struct opr_record_header) <= k->len) {
        struct opr_record_header h;
        memcpy(&h, k->data + off, sizeof h);
        CU_ASSERT_EQUAL_FATAL(h.size % 8, 0);
        CU_ASSERT_FATAL(h.size >= sizeof h && off + h.size <= k->len);
        n += type == 0 || h.type == type;
        off += h.size;
    }
    CU_ASSERT_EQUAL(off, k->len);
    return n;
}

/* count_records after flushing what w holds. */
static unsigned count_records_pending(struct opr_writer *w, const struct sink *k, uint32_t type)
{
    opr_writer_flush(w);
    return count_records(k, type);
}

/* The first record of `type`'s body (NULL when there is none). */
static const unsigned char *find_record(const struct sink *k, uint32_t type, unsigned nth)
{
    size_t off = sizeof(struct opr_file_header);
    while (off + sizeof(struct opr_record_header) <= k->len) {
        struct opr_record_header h;
        memcpy(&h, k->data + off, sizeof h);
        if (h.type == type && nth-- == 0)
            return k->data + off + sizeof h;
        off += h.size;
    }
    return NULL;
}

static void test_framing(void)
{
    struct sink k;
    struct opr_writer *w = new_writer(&k, NULL, NULL, NULL);
    opr_writer_begin(w, 5, 1, 7, 1000000);
    /* 8 + 5 bytes: padded to 16 with zeros. */
    opr_writer_emit(w, 99, "abc", 3, "de", 2);
    CU_ASSERT_EQUAL(opr_writer_pending(w), sizeof(struct opr_file_header) + 16);
    /* ~600 KB of 1 KB records: the 256 KB buffer is flushed between records. */
    static unsigned char body[1000];
    for (int i = 0; i < 600; i++)
        opr_writer_emit(w, 98, body, sizeof body, NULL, 0);
    opr_writer_flush(w);
    CU_ASSERT_EQUAL(opr_writer_pending(w), 0);
    CU_ASSERT_EQUAL(opr_writer_bytes(w), k.len);
    CU_ASSERT_TRUE(k.nwrites >= 3);
    struct opr_file_header h;
    memcpy(&h, k.data, sizeof h);
    CU_ASSERT_EQUAL(memcmp(h.magic, OPR_FILE_MAGIC, 8), 0);
    CU_ASSERT_EQUAL(h.pid, 5);
    CU_ASSERT_EQUAL(h.start_ns, 7);
    const unsigned char *first = find_record(&k, 99, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(first);
    CU_ASSERT_EQUAL(memcmp(first, "abcde\0\0\0", 8), 0);
    CU_ASSERT_EQUAL(count_records(&k, 0), 601);
    /* Every write ended on a record boundary. */
    for (unsigned i = 0; i < k.nwrites; i++) {
        size_t off = sizeof(struct opr_file_header);
        while (off < k.write_ends[i]) {
            struct opr_record_header rh;
            memcpy(&rh, k.data + off, sizeof rh);
            off += rh.size;
        }
        CU_ASSERT_EQUAL(off, k.write_ends[i]);
    }
    opr_writer_free(w);
    free(k.data);
}

/* Record types in stream order (at most 64). */
static unsigned record_types(const struct sink *k, uint32_t *types)
{
    unsigned n = 0;
    for (size_t off = sizeof(struct opr_file_header); off + 8 <= k->len && n < 64;) {
        struct opr_record_header h;
        memcpy(&h, k->data + off, sizeof h);
        types[n++] = h.type;
        off += h.size;
    }
    return n;
}

static size_t refuse_write(void *ctx, const void *bytes, size_t len)
{
    (void)ctx, (void)bytes, (void)len;
    return 0; /* disk full */
}

/* Samples are packed into SAMPLE_RUN records and read back field for field
 * (times going back, gaps past 2^32 ns, tid changes, the largest weight,
 * flags); definitions written between them do not break the run, any other
 * record does; a sample followed by counters is written alone; samples a
 * short write lost are counted per entry; damaged entries stop the cursor. */
static void test_sample_runs(void)
{
    struct sink k;
    struct opr_writer *w = new_writer(&k, NULL, NULL, NULL);
    opr_writer_begin(w, 5, 1, 0, 1000000);
    uint64_t a[] = {0x10, 0x20}, b[] = {0x11, 0x20};
    CU_ASSERT_EQUAL(opr_writer_stack_id(w, a, 2), 0);
    const struct opr_sample in[] = {
        {1000, 7, 0, 0, 1},
        {1000 + 1000000, 7, 1, OPR_SAMPLE_UNWIND_FAILED, OPR_SAMPLE_SHORT_MAX_WEIGHT},
        {1000 + 999700, 9, 0, OPR_SAMPLE_TRUNCATED, 3}, /* queued after a later one */
        {1000 + 6000000000ull, 4194303, 1, 0, 100000},
        {1000 + 6000000001ull, 4194303, 0, 0, 1},
    };
    const uint32_t py[] = {0, 3, 0, 1u << 20, UINT32_MAX};
    for (unsigned i = 0; i < 5; i++) {
        if (i == 1)
            CU_ASSERT_EQUAL(opr_writer_stack_id(w, b, 2), 1); /* a STACK inside the run */
        opr_writer_sample(w, &in[i], py[i], 0);
    }
    opr_writer_note(w, "ends the run");
    opr_writer_sample(w, &in[0], 0, 0);
    opr_writer_emit(w, OPR_REC_COUNTER_SAMPLE, "counter!", 8, NULL, 0); /* its sample goes alone */
    opr_writer_flush(w);
    uint32_t types[64];
    unsigned n = record_types(&k, types);
    const uint32_t expect[] = {OPR_REC_STACK, OPR_REC_STACK, OPR_REC_SAMPLE_RUN, OPR_REC_NOTE, OPR_REC_SAMPLE_SHORT,
                               OPR_REC_COUNTER_SAMPLE};
    CU_ASSERT_EQUAL_FATAL(n, 6);
    CU_ASSERT_EQUAL(memcmp(types, expect, sizeof expect), 0);
    const unsigned char *body = find_record(&k, OPR_REC_SAMPLE_RUN, 0);
    struct opr_record_header h;
    memcpy(&h, body - sizeof h, sizeof h);
    CU_ASSERT_TRUE(h.size <= 5 * 32 / 2); /* at most half their SAMPLE_SHORTs, these hard cases included */
    struct opr_record rec = {OPR_REC_SAMPLE_RUN, 0, (const char *)body, h.size - sizeof h, 0};
    struct opr_sample_run_cursor c;
    opr_sample_run_begin(&c, &rec);
    struct opr_sample out;
    uint32_t out_py;
    for (unsigned i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL_FATAL(opr_sample_run_next(&c, &out, &out_py), 1);
        CU_ASSERT_EQUAL(memcmp(&out, &in[i], sizeof out), 0);
        CU_ASSERT_EQUAL(out_py, py[i]);
    }
    CU_ASSERT_EQUAL(opr_sample_run_next(&c, &out, &out_py), 0);
    /* Damage: a body cut inside the last entry; a tid of 0 in the first. */
    rec.len = (size_t)(c.at - (const unsigned char *)body) - 1;
    opr_sample_run_begin(&c, &rec);
    for (unsigned i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(opr_sample_run_next(&c, &out, &out_py), 1);
    CU_ASSERT_EQUAL(opr_sample_run_next(&c, &out, &out_py), -1);
    CU_ASSERT_EQUAL(opr_sample_run_next(&c, &out, &out_py), 0);
    unsigned char bad[sizeof(struct opr_sample_run) + 8] = {0};
    bad[8] = 1;                       /* count 1 */
    memcpy(bad + 16, "\0\0\0\0\0", 5); /* dt 0, tid 0 in a first entry */
    struct opr_record bad_rec = {OPR_REC_SAMPLE_RUN, 0, (const char *)bad, sizeof bad, 0};
    opr_sample_run_begin(&c, &bad_rec);
    CU_ASSERT_EQUAL(opr_sample_run_next(&c, &out, &out_py), -1);
    memcpy(bad + 16, "\0\x80\x80\x80\x80\x10", 6); /* a tid of 2^32 */
    opr_sample_run_begin(&c, &bad_rec);
    CU_ASSERT_EQUAL(opr_sample_run_next(&c, &out, &out_py), -1);
    opr_writer_free(w);
    free(k.data);

    /* A disk full from the start: every entry of the run is an unwritten sample. */
    struct opr_writer_config config = {.ops = {.write = refuse_write}};
    w = opr_writer_new(&config);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    opr_writer_begin(w, 5, 1, 0, 1000000);
    for (unsigned i = 0; i < 1000; i++)
        opr_writer_sample(w, &in[i % 5], 0, 0);
    CU_ASSERT_TRUE(opr_writer_pending(w) > 1000 * 5);
    opr_writer_flush(w);
    CU_ASSERT_EQUAL(opr_writer_unwritten_samples(w), 1000);
    opr_writer_free(w);
}

static void test_ids_written_once(void)
{
    struct sink k;
    struct opr_writer *w = new_writer(&k, NULL, NULL, NULL);
    opr_writer_begin(w, 5, 1, 0, 1000000);
    uint64_t a[] = {0x10, 0x20}, b[] = {0x11, 0x20};
    CU_ASSERT_EQUAL(opr_writer_stack_id(w, a, 2), 0);
    CU_ASSERT_EQUAL(opr_writer_stack_id(w, b, 2), 1);
    CU_ASSERT_EQUAL(opr_writer_stack_id(w, a, 2), 0);

    /* step at two lines (two instructions), main, and a frame whose code
     * object is gone. */
    resolved = resolved_with_names = 0;
    struct fake_frame frames[] = {{"step", 10}, {"main", 3}, {NULL, 0}};
    struct opr_pyframe_key keys[] = {{0x100, 1, 4, 0, 0}, {0x200, 2, 8, 1, 0}, {0x300, 3, 0, 0, 0}};
    CU_ASSERT_EQUAL(opr_writer_python_stack(w, keys, 3, frames), 1);
    CU_ASSERT_EQUAL(resolved, 3);
    CU_ASSERT_EQUAL(resolved_with_names, 3);
    /* A new chain of frames seen before: a PYSTACK, but nothing is read;
     * the same chain again: nothing is written either. */
    CU_ASSERT_EQUAL(opr_writer_python_stack(w, keys, 2, frames), 2);
    CU_ASSERT_EQUAL(opr_writer_python_stack(w, keys, 2, frames), 2);
    CU_ASSERT_EQUAL(resolved, 3);
    /* step at another instruction: its line is read, not its names. */
    frames[0].line = 11;
    keys[0].instr = 6;
    CU_ASSERT_EQUAL(opr_writer_python_stack(w, keys, 2, frames), 3);
    CU_ASSERT_EQUAL(resolved, 4);
    CU_ASSERT_EQUAL(resolved_with_names, 3);
    CU_ASSERT_EQUAL(opr_writer_python_stack(w, keys, 0, frames), 0);
    opr_writer_flush(w);

    CU_ASSERT_EQUAL(count_records(&k, OPR_REC_STACK), 2);
    CU_ASSERT_EQUAL(count_records(&k, OPR_REC_PYCODE), 2);
    CU_ASSERT_EQUAL(count_records(&k, OPR_REC_PYSTACK), 3);
    const unsigned char *ps = find_record(&k, OPR_REC_PYSTACK, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ps);
    struct opr_pyframe f[3];
    memcpy(f, ps + sizeof(struct opr_pystack), sizeof f);
    CU_ASSERT_EQUAL(f[0].code_id, 0);
    CU_ASSERT_EQUAL(f[0].line, 10);
    CU_ASSERT_EQUAL(f[1].code_id, 1);
    CU_ASSERT_EQUAL(f[1].flags, OPR_PYFRAME_ENTRY);
    CU_ASSERT_EQUAL(f[2].code_id, OPR_PYCODE_UNKNOWN);
    const unsigned char *pc = find_record(&k, OPR_REC_PYCODE, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pc);
    struct opr_pycode c;
    memcpy(&c, pc, sizeof c);
    CU_ASSERT_EQUAL(c.code_id, 1);
    CU_ASSERT_EQUAL(memcmp(pc + sizeof c, "/w/app.pymain", c.filename_len + c.qualname_len), 0);

    /* A reset forgets the ids: the next stream starts from 0 again. */
    opr_writer_reset(w);
    CU_ASSERT_EQUAL(opr_writer_stack_id(w, b, 2), 0);
    opr_writer_free(w);
    free(k.data);
}

/* The chain cache: a Python chain captured before is answered by one lookup
 * with the id the frame-by-frame path gave it (nothing read, nothing
 * written), a chain that differs in one instruction is built again, and a
 * reset forgets the cache with the ids. */
static void test_python_chain_cache(void)
{
    struct sink k;
    struct opr_writer *w = new_writer(&k, NULL, NULL, NULL);
    opr_writer_begin(w, 5, 1, 0, 1000000);
    resolved = 0;
    struct fake_frame frames[] = {{"step", 10}, {"main", 3}};
    struct opr_pyframe_key keys[] = {{0x100, 1, 4, 0, 0}, {0x200, 2, 8, 1, 0}};
    uint64_t hits, misses;
    CU_ASSERT_EQUAL(opr_writer_python_stack(w, keys, 2, frames), 1);
    CU_ASSERT_EQUAL(resolved, 2);
    for (int i = 0; i < 1000; i++)
        CU_ASSERT_EQUAL(opr_writer_python_stack(w, keys, 2, frames), 1);
    CU_ASSERT_EQUAL(resolved, 2);
    opr_writer_python_cache_counts(w, &hits, &misses);
    CU_ASSERT_EQUAL(hits, 1000);
    CU_ASSERT_EQUAL(misses, 1);
    keys[0].instr = 6; /* same code, another instruction: another line, another chain */
    frames[0].line = 11;
    CU_ASSERT_EQUAL(opr_writer_python_stack(w, keys, 2, frames), 2);
    CU_ASSERT_EQUAL(resolved, 3);
    keys[0].instr = 4; /* back: the first chain, from the cache */
    CU_ASSERT_EQUAL(opr_writer_python_stack(w, keys, 2, frames), 1);
    CU_ASSERT_EQUAL(resolved, 3);
    opr_writer_flush(w);
    CU_ASSERT_EQUAL(count_records(&k, OPR_REC_PYSTACK), 2);
    /* Many distinct chains: the cache grows past its first size and keeps answering. */
    for (uint64_t c = 0; c < 3000; c++) {
        struct opr_pyframe_key one = {0x1000 + c * 16, 7, 2, 0, 0};
        uint32_t id = opr_writer_python_stack(w, &one, 1, frames);
        CU_ASSERT_EQUAL(opr_writer_python_stack(w, &one, 1, frames), id);
    }
    opr_writer_reset(w);
    opr_writer_python_cache_counts(w, &hits, &misses);
    CU_ASSERT_EQUAL(hits + misses, 0);
    resolved = 0;
    keys[0].instr = 6;
    CU_ASSERT_EQUAL(opr_writer_python_stack(w, keys, 2, frames), 1); /* ids start again at 0 */
    CU_ASSERT_EQUAL(resolved, 2);
    opr_writer_free(w);
    free(k.data);
}

/* The chain the cache missed, built from the last one's root-side frames
 * where their keys match (py_prev_keys): the same code ids, lines and entry
 * flags the per-frame tables give, at the positions of a longer or shorter
 * chain, and nothing reused after a reset (the ids restart). */
static bool chain_is(const struct opr_writer *w, const uint32_t *codes, const int32_t *lines, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (w->py_chain[i].code_id != codes[i] || w->py_chain[i].line != lines[i] ||
            (w->py_chain[i].flags == OPR_PYFRAME_ENTRY) != (i == n - 1))
            return false;
    return true;
}

static void test_python_frames_reused(void)
{
    struct sink k;
    struct opr_writer *w = new_writer(&k, NULL, NULL, NULL);
    opr_writer_begin(w, 5, 1, 0, 1000000);
    resolved = 0;
    struct fake_frame frames[] = {{"leaf", 10}, {"mid", 20}, {"main", 30}, {NULL, 0}};
    struct opr_pyframe_key a[] = {{0x100, 1, 4, 0, 0}, {0x200, 2, 8, 0, 0}, {0x300, 3, 12, 1, 0}};
    CU_ASSERT_EQUAL(opr_writer_python_stack(w, a, 3, frames), 1);
    CU_ASSERT_TRUE(chain_is(w, (uint32_t[]){0, 1, 2}, (int32_t[]){10, 20, 30}, 3));
    CU_ASSERT_EQUAL(opr_writer_python_frames_reused(w), 0);
    CU_ASSERT_EQUAL(resolved, 3);
    /* the leaf at another instruction: two frames from the last chain */
    a[0].instr = 6;
    frames[0].line = 11;
    CU_ASSERT_EQUAL(opr_writer_python_stack(w, a, 3, frames), 2);
    CU_ASSERT_TRUE(chain_is(w, (uint32_t[]){0, 1, 2}, (int32_t[]){11, 20, 30}, 3));
    CU_ASSERT_EQUAL(opr_writer_python_frames_reused(w), 2);
    CU_ASSERT_EQUAL(resolved, 4);
    /* one frame deeper: the three known frames move up one place */
    struct fake_frame deeper[] = {{"inner", 5}, {"leaf", 11}, {"mid", 20}, {"main", 30}};
    struct opr_pyframe_key b[] = {{0x400, 4, 2, 0, 0}, a[0], a[1], a[2]};
    CU_ASSERT_EQUAL(opr_writer_python_stack(w, b, 4, deeper), 3);
    CU_ASSERT_TRUE(chain_is(w, (uint32_t[]){3, 0, 1, 2}, (int32_t[]){5, 11, 20, 30}, 4));
    CU_ASSERT_EQUAL(opr_writer_python_frames_reused(w), 5);
    CU_ASSERT_EQUAL(resolved, 5);
    /* two frames shallower: mid and main where the chain now ends */
    CU_ASSERT_EQUAL(opr_writer_python_stack(w, &a[1], 2, &frames[1]), 4);
    CU_ASSERT_TRUE(chain_is(w, (uint32_t[]){1, 2}, (int32_t[]){20, 30}, 2));
    CU_ASSERT_EQUAL(opr_writer_python_frames_reused(w), 7);
    CU_ASSERT_EQUAL(resolved, 5);
    /* another root: nothing in common, every frame from the tables */
    struct opr_pyframe_key c[] = {{0x100, 1, 4, 0, 0}, {0x500, 5, 8, 1, 0}};
    struct fake_frame cf[] = {{"leaf", 10}, {"other", 40}};
    CU_ASSERT_EQUAL(opr_writer_python_stack(w, c, 2, cf), 5);
    CU_ASSERT_TRUE(chain_is(w, (uint32_t[]){0, 4}, (int32_t[]){10, 40}, 2));
    CU_ASSERT_EQUAL(opr_writer_python_frames_reused(w), 7);
    /* after a reset the ids restart: the same chain again takes nothing
     * from before (its code ids were 0 and 4, now 0 and 1) */
    opr_writer_reset(w);
    CU_ASSERT_EQUAL(opr_writer_python_stack(w, c, 2, cf), 1);
    CU_ASSERT_TRUE(chain_is(w, (uint32_t[]){0, 1}, (int32_t[]){10, 40}, 2));
    CU_ASSERT_EQUAL(opr_writer_python_frames_reused(w), 0);
    opr_writer_free(w);
    free(k.data);
}

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
    dprintf(fd, "1000-2000 r-xp 00000000 00:00 0 /a\n3000-4000 r-xp 00000000 00:00 0 /%s\n"
                "garbage\n5000-6000 r-xp 00000000 00:00 0 /b\n7000-8000 r-xp 00000000 00:00 0 /c\n"
                "9000-a000 r-xp 00000000 00:00 0 /d\n", longpath);
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
        .ops = {.ctx = &k,
                .write = sink_write,
                .resolve_pyframe = resolve_fake,
                .loaded_build_id = fake_loaded_build_id},
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

/* A chain_trie keeps the id_table's copy of each chain (id_table_last_added),
 * so a caller's buffer reused for the next chain changes nothing it shares;
 * the longest shared run is found whether the last chain added or an older
 * one holds it. */
static void test_trie_keeps_table_copy(void)
{
    bool added;
    struct id_table chains = {0};
    struct chain_trie t = {0};
    uint64_t buf[4] = {10, 20, 30, 40};
    uint32_t parent = 99, skip = 99;
    CU_ASSERT_EQUAL(id_table_find_or_add(&chains, buf, sizeof buf, &added), 0);
    const void *kept = id_table_last_added(&chains);
    CU_ASSERT_TRUE(kept != (const void *)buf && memcmp(kept, buf, sizeof buf) == 0);
    CU_ASSERT_EQUAL(chain_trie_add(&t, 0, kept, 4, sizeof buf[0], &parent, &skip), 0);
    buf[0] = 11, buf[1] = 21; /* the next chain in the same buffer: 30, 40 shared */
    CU_ASSERT_EQUAL(id_table_find_or_add(&chains, buf, sizeof buf, &added), 1);
    CU_ASSERT_EQUAL(chain_trie_add(&t, 1, id_table_last_added(&chains), 4, sizeof buf[0], &parent, &skip), 2);
    CU_ASSERT_EQUAL(parent, 0);
    CU_ASSERT_EQUAL(skip, 2);
    buf[0] = 12, buf[1] = 20; /* 20, 30, 40: only chain 0 has it, unchanged */
    CU_ASSERT_EQUAL(id_table_find_or_add(&chains, buf, sizeof buf, &added), 2);
    CU_ASSERT_EQUAL(chain_trie_add(&t, 2, id_table_last_added(&chains), 4, sizeof buf[0], &parent, &skip), 3);
    CU_ASSERT_EQUAL(parent, 0);
    CU_ASSERT_EQUAL(skip, 1);
    /* one frame deeper than the last chain: all of it shared, from element 0 */
    uint64_t deeper[5] = {5, 12, 20, 30, 40};
    CU_ASSERT_EQUAL(id_table_find_or_add(&chains, deeper, sizeof deeper, &added), 3);
    CU_ASSERT_EQUAL(chain_trie_add(&t, 3, id_table_last_added(&chains), 5, sizeof buf[0], &parent, &skip), 4);
    CU_ASSERT_EQUAL(parent, 2);
    CU_ASSERT_EQUAL(skip, 0);
    /* one shallower: chain 0's run from element 2 (the last chain's from 3) */
    CU_ASSERT_EQUAL(id_table_find_or_add(&chains, &buf[1], 3 * sizeof buf[0], &added), 4);
    CU_ASSERT_EQUAL(chain_trie_add(&t, 4, id_table_last_added(&chains), 3, sizeof buf[0], &parent, &skip), 3);
    CU_ASSERT_TRUE((parent == 0 && skip == 1) || (parent == 2 && skip == 1) || (parent == 3 && skip == 2));
    chain_trie_clear(&t);
    id_table_clear(&chains);
}

void register_stream_writer_tests(void)
{
    CU_pSuite s = CU_add_suite("stream_writer", NULL, NULL);
    CU_add_test(s, "framing: padding, no record split across writes", test_framing);
    CU_add_test(s, "stacks, Python code and stacks written once", test_ids_written_once);
    CU_add_test(s, "Python chain cache: same ids, nothing read again", test_python_chain_cache);
    CU_add_test(s, "a missed Python chain takes its root side from the last", test_python_frames_reused);
    CU_add_test(s, "samples packed in runs, read back field for field", test_sample_runs);
    CU_add_test(s, "build-ids as libelf reads them", test_build_id_matches_libelf);
    CU_add_test(s, "PROCESS, THREAD, MAP and the vDSO from /proc/self", test_process_records);
    CU_add_test(s, "a fork child's MAP records written again from memory", test_maps_replayed_after_reset);
    CU_add_test(s, "a thread named after its first record: THREAD again", test_thread_renamed);
    CU_add_test(s, "code mapped late: its one mapping queried, not the maps read", test_late_code_queried);
    CU_add_test(s, "maps lines parsed by hand as sscanf reads them", test_maps_parse);
    CU_add_test(s, "maps read in chunks: split lines, a long one skipped", test_maps_read);
    CU_add_test(s, "a chain_trie keeps the id_table's copy of each chain", test_trie_keeps_table_copy);
}
