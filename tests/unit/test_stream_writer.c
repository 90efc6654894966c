/*
 * tests/unit/test_stream_writer.c — format/'s stream writer on its own: the
 * framing (8-byte padding, no record split across two writes) and the id
 * tables (a chain written once, a Python frame read once per instruction);
 * the records it reads from /proc are in test_stream_process.c. The memory
 * sink and record walkers below serve both (tests/unit/unit.h).
 */
#include <CUnit/CUnit.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "format/format.h"
#include "format/writer_internal.h"
#include "symbolize/symbolize_internal.h"
#include "tests/unit/unit.h"

size_t sink_write(void *ctx, const void *bytes, size_t len)
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

struct opr_writer *new_writer(struct sink *k, const char *proc_dir, const char *result_dir, const char *unreadable_name)
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
unsigned count_records(const struct sink *k, uint32_t type)
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
unsigned count_records_pending(struct opr_writer *w, const struct sink *k, uint32_t type)
{
    opr_writer_flush(w);
    return count_records(k, type);
}

/* The first record of `type`'s body (NULL when there is none). */
const unsigned char *find_record(const struct sink *k, uint32_t type, unsigned nth)
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

/* An id_table's slots are zeroed by writing (format/id_table.c, grow): a
 * lookup that reads a slot on a page nothing wrote yet maps the shared zero
 * page, and the insert after it replaces that mapping: a second page fault,
 * and in the agent's writer a TLB flush on every CPU the workload runs on.
 * So growing a table costs about one minor fault per page it takes; read
 * first, ~1.9 (calloc'ed tables). Measured in a fresh process (run_unit
 * --id-table-faults): in this one, or a fork of it, malloc reuses memory
 * earlier tests faulted in, and faults count nothing. Returns the exit
 * status: 0 within one fault a page and a quarter. */
int id_table_faults_probe(void)
{
    mallopt(M_MMAP_THRESHOLD, 64 << 10); /* the tables past 64 KB: fresh mappings */
    struct id_table t = {0};
    bool added;
    struct rusage before, after;
    size_t n = 60000, pages = 0;
    getrusage(RUSAGE_THREAD, &before);
    for (uint64_t k = 1; k <= n; k++)
        if (id_table_find_or_add(&t, &k, sizeof k, &added) != (int64_t)(k - 1))
            return 2;
    getrusage(RUSAGE_THREAD, &after);
    for (size_t cap = 1024; cap <= t.cap; cap *= 2) /* every table it grew through */
        pages += (cap * sizeof(struct id_table_entry) + 4095) / 4096;
    pages += (n * 32 + 4095) / 4096; /* the keys' copies: 8 bytes in a 32-byte chunk */
    long faults = after.ru_minflt - before.ru_minflt;
    printf("\n    id_table: %zu keys, %zu slots: %ld minor faults for %zu pages\n", n, t.cap, faults, pages);
    id_table_clear(&t);
#if defined(__SANITIZE_ADDRESS__)
    printf("    (not judged: the sanitizer's allocator and shadow memory fault on their own)\n");
    return 0;
#else
    return faults <= (long)(pages + pages / 4 + 64) ? 0 : 1;
#endif
}

static void test_id_table_pages_written_first(void)
{
    fflush(stdout);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "run_unit", "--id-table-faults", (char *)NULL);
        _exit(3);
    }
    int status = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

void register_stream_writer_tests(void)
{
    CU_pSuite s = CU_add_suite("stream_writer", NULL, NULL);
    CU_add_test(s, "framing: padding, no record split across writes", test_framing);
    CU_add_test(s, "stacks, Python code and stacks written once", test_ids_written_once);
    CU_add_test(s, "Python chain cache: same ids, nothing read again", test_python_chain_cache);
    CU_add_test(s, "a missed Python chain takes its root side from the last", test_python_frames_reused);
    CU_add_test(s, "samples packed in runs, read back field for field", test_sample_runs);
    CU_add_test(s, "a chain_trie keeps the id_table's copy of each chain", test_trie_keeps_table_copy);
    CU_add_test(s, "an id_table's pages are written before they are read", test_id_table_pages_written_first);
}
