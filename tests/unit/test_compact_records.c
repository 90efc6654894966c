/*
 * tests/unit/test_compact_records.c — the loader on the compact records the
 * writer uses by default: prefix-shared chains (STACK_TAIL, PYSTACK_TAIL)
 * and sample runs (SAMPLE_RUN) load as the classic records would, and
 * damaged or hostile ones are skipped without losing what came before.
 * Streams are built through format/'s writer (tests/unit/test_stream.c).
 */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "format/format.h"
#include "tests/unit/unit.h"

static unsigned next_random(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(*x >> 33);
}

static size_t count_type(const struct test_buf *b, uint32_t type)
{
    size_t n = 0;
    for (size_t off = sizeof(struct opr_file_header); off + 8 <= b->len;) {
        uint32_t t, size;
        memcpy(&t, b->data + off, 4);
        memcpy(&size, b->data + off + 4, 4);
        n += t == type;
        off += size ? size : b->len;
    }
    return n;
}

/* Samples in SAMPLE_RUN records (their count fields). */
static size_t run_entries(const struct test_buf *b)
{
    size_t n = 0;
    for (size_t off = sizeof(struct opr_file_header); off + 8 <= b->len;) {
        struct opr_record_header h;
        memcpy(&h, b->data + off, sizeof h);
        if (h.type == OPR_REC_SAMPLE_RUN) {
            struct opr_sample_run run;
            memcpy(&run, b->data + off + sizeof h, sizeof run);
            n += run.count;
        }
        off += h.size ? h.size : b->len;
    }
    return n;
}

/* 600 samples on chains that each drop a few leaf frames of the one before
 * and add a few more from a small pool, as real stacks do;
 * native chains reach OPR_MAX_FRAMES, Python ones OPR_MAX_PYFRAMES. */
static struct test_buf chain_stream(bool whole)
{
    static const char *const files[] = {"/w/a.py", "/w/b.py", "/w/c.py", "/w/d.py"};
    static const char *const names[] = {"fa", "fb", "fc", "fd", "fe", "ff", "fg", "fh"};
    struct test_stream s;
    test_stream_begin(&s, 7, whole);
    uint64_t x = 42, root[OPR_MAX_FRAMES], pcs[OPR_MAX_FRAMES];
    unsigned pyroot[OPR_MAX_PYFRAMES], n = 0, npy = 0;
    struct test_pyframe frames[OPR_MAX_PYFRAMES];
    struct opr_pyframe_key keys[OPR_MAX_PYFRAMES];
    for (int i = 0; i < 600; i++) {
        n -= next_random(&x) % (n < 8 ? n + 1 : 8); /* drop up to 7 leaf frames */
        for (unsigned k = 1 + next_random(&x) % 12; k > 0 && n < OPR_MAX_FRAMES; k--)
            root[n++] = 0x1000 + 16 * (next_random(&x) % 48);
        for (unsigned k = 0; k < n; k++)
            pcs[k] = root[n - 1 - k];
        int64_t id = opr_writer_stack_id(s.w, pcs, n);
        npy -= next_random(&x) % (npy < 5 ? npy + 1 : 5);
        for (unsigned k = 1 + next_random(&x) % 6; k > 0 && npy < OPR_MAX_PYFRAMES; k--)
            pyroot[npy++] = next_random(&x) % 32; /* code object c % 8, instruction c / 8 */
        for (unsigned k = 0; k < npy; k++) {
            unsigned c = pyroot[npy - 1 - k];
            frames[k] = (struct test_pyframe){files[c % 4], names[c % 8], 10 * (int32_t)(c % 8),
                                              10 * (int32_t)(c % 8) + (int32_t)(c / 8)};
            keys[k] = (struct opr_pyframe_key){0x7000 + 0x100 * (c % 8), 1, c / 8, c % 3 == 0, 0};
        }
        uint32_t py = i % 5 ? opr_writer_python_stack(s.w, keys, npy, frames) : 0;
        CU_ASSERT_TRUE_FATAL(id >= 0);
        struct opr_sample smp = {(uint64_t)i, 7, (uint32_t)id, i % 7 ? 0 : OPR_SAMPLE_TRUNCATED, 1 + i % 3};
        opr_writer_sample(s.w, &smp, py, 0);
    }
    return test_stream_finish(&s);
}

static struct profile *load_buf(const struct test_buf *b)
{
    unit_dir_new();
    unit_dir_write_info("");
    unit_dir_write("proc-7-0.raw", b->data, b->len);
    struct profile *p = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL(profile_load(unit_dir, &p, err, sizeof err), 0);
    unit_dir_remove();
    return p;
}

/* The same chains and samples written in the classic records and in the
 * compact ones (STACK_TAIL, PYSTACK_TAIL, SAMPLE_RUN) load as the same
 * stacks, frame by frame, with the same weights and flags; the compact
 * stream is the smaller. */
static void test_shared_chains_load_whole(void)
{
    struct test_buf whole = chain_stream(true), shared = chain_stream(false);
    CU_ASSERT_EQUAL(count_type(&whole, OPR_REC_STACK_TAIL) + count_type(&whole, OPR_REC_PYSTACK_TAIL) +
                        count_type(&whole, OPR_REC_SAMPLE_SHORT) + count_type(&whole, OPR_REC_SAMPLE_RUN), 0);
    /* nothing between the samples but definitions: runs of ~400 (4 KB of entries) */
    CU_ASSERT_EQUAL(count_type(&shared, OPR_REC_SAMPLE_SHORT), 0);
    CU_ASSERT_EQUAL(run_entries(&shared), 600);
    CU_ASSERT_TRUE(count_type(&shared, OPR_REC_SAMPLE_RUN) >= 1 && count_type(&shared, OPR_REC_SAMPLE_RUN) <= 3);
    CU_ASSERT_TRUE(count_type(&shared, OPR_REC_STACK_TAIL) > 100);
    CU_ASSERT_TRUE(count_type(&shared, OPR_REC_PYSTACK_TAIL) > 50);
    CU_ASSERT_TRUE(shared.len * 3 < whole.len);
    struct profile *a = load_buf(&whole), *b = load_buf(&shared);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL_FATAL(a->nsamples, b->nsamples);
    CU_ASSERT_EQUAL(a->sample_count, 600);
    CU_ASSERT_EQUAL(a->total_weight, 1200); /* 1 + i % 3 */
    size_t differ = 0, deepest = 0;
    for (size_t i = 0; i < a->nsamples; i++) {
        const struct prof_stack *sa = &a->stacks[a->samples[i].stack], *sb = &b->stacks[b->samples[i].stack];
        bool same = sa->nframes == sb->nframes && a->samples[i].weight == b->samples[i].weight &&
                    a->samples[i].flags == b->samples[i].flags;
        for (uint32_t k = 0; same && k < sa->nframes; k++)
            same = strcmp(a->frames[sa->frames[k]].name, b->frames[sb->frames[k]].name) == 0 &&
                   a->frames[sa->frames[k]].line == b->frames[sb->frames[k]].line;
        differ += !same;
        deepest = sa->nframes > deepest ? sa->nframes : deepest;
    }
    CU_ASSERT_EQUAL(differ, 0);
    CU_ASSERT_TRUE(deepest >= 200);
    profile_free(a);
    profile_free(b);
    free(whole.data);
    free(shared.data);
}

/* A SAMPLE_RUN damaged inside: the entries before the damage load, the
 * rest of the run is skipped with one warning, and the records after it
 * still load. */
static void test_damaged_sample_run(void)
{
    struct test_stream s;
    test_stream_begin(&s, 7, false);
    uint64_t pcs[] = {0x1000};
    test_stream_stack(&s, 0, pcs, 1);
    for (int i = 0; i < 5; i++) {
        struct opr_sample smp = {1000000 * (uint64_t)i, 7, 0, 0, 1};
        opr_writer_sample(s.w, &smp, 0, 0);
    }
    opr_writer_note(s.w, "after the run"); /* closes the run */
    struct opr_sample last = {9000000, 7, 0, 0, 1};
    opr_writer_sample(s.w, &last, 0, 0);
    struct test_buf b = test_stream_finish(&s);
    CU_ASSERT_EQUAL_FATAL(count_type(&b, OPR_REC_SAMPLE_RUN), 2);
    /* 0xff from the fourth entry to the body's end: a number that never ends */
    size_t off = sizeof(struct opr_file_header);
    struct opr_record_header h = {0, 0};
    while (off < b.len) {
        memcpy(&h, b.data + off, sizeof h);
        if (h.type == OPR_REC_SAMPLE_RUN)
            break;
        off += h.size;
    }
    unsigned char *e = b.data + off + sizeof h + sizeof(struct opr_sample_run);
    size_t entry[5] = {0}, at = 0;
    for (int i = 0; i < 5; i++) { /* five numbers an entry, each ending at a byte < 0x80 */
        entry[i] = at;
        for (int k = 0; k < 5; k++)
            while (e[at++] & 0x80)
                ;
    }
    memset(e + entry[3], 0xff, h.size - sizeof h - sizeof(struct opr_sample_run) - entry[3]);
    struct profile *p = load_buf(&b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->sample_count, 4); /* 3 of the run, the one after the note */
    bool warned = false;
    for (size_t i = 0; i < p->nwarnings; i++)
        warned |= strstr(p->warnings[i], "damaged after 3 of its samples") != NULL;
    CU_ASSERT_TRUE(warned);
    profile_free(p);
    free(b.data);
}

/* Hostile tails: an unknown parent, a skip past the parent's end, a chain
 * deeper than OPR_MAX_FRAMES, a truncated body are skipped (their samples
 * with them); an empty tail (a root-side run of its parent) is valid. */
static void test_bad_tails_skipped(void)
{
    struct test_stream s;
    test_stream_begin(&s, 7, false);
    uint64_t pcs[OPR_MAX_FRAMES] = {0x10, 0x20, 0x30};
    CU_ASSERT_EQUAL(opr_writer_stack_id(s.w, pcs, 3), 0);
    struct opr_chain_tail bad_skip = {1, 1, 0, 3}, no_parent = {2, 1, 9, 0}, empty = {3, 0, 0, 1},
                          too_deep = {4, OPR_MAX_FRAMES - 2, 0, 0}, short_body = {5, 4, 0, 0};
    test_stream_record(&s, OPR_REC_STACK_TAIL, &bad_skip, sizeof bad_skip, pcs, 8);
    test_stream_record(&s, OPR_REC_STACK_TAIL, &no_parent, sizeof no_parent, pcs, 8);
    test_stream_record(&s, OPR_REC_STACK_TAIL, &empty, sizeof empty, NULL, 0);
    test_stream_record(&s, OPR_REC_STACK_TAIL, &too_deep, sizeof too_deep, pcs, (OPR_MAX_FRAMES - 2) * 8);
    test_stream_record(&s, OPR_REC_STACK_TAIL, &short_body, sizeof short_body, pcs, 16);
    struct opr_chain_tail py_no_parent = {0, 1, 0, 0};
    struct opr_pyframe pf = {0, 1, 0, 0};
    test_stream_record(&s, OPR_REC_PYSTACK_TAIL, &py_no_parent, sizeof py_no_parent, &pf, sizeof pf);
    for (uint32_t id = 1; id <= 5; id++)
        test_stream_sample(&s, id, 7, id, id == 3 ? 1 : 0);
    struct test_buf b = test_stream_finish(&s);
    struct profile *p = load_buf(&b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL_FATAL(p->nsamples, 1);
    const struct prof_stack *st = &p->stacks[p->samples[0].stack];
    CU_ASSERT_EQUAL(st->nframes, 2); /* 0x20, 0x30: no Python frames (PYSTACK 0 was refused) */
    profile_free(p);
    free(b.data);
}

void register_compact_records_tests(void)
{
    CU_pSuite s = CU_add_suite("compact records", NULL, NULL);
    CU_add_test(s, "prefix-shared chains load as whole ones", test_shared_chains_load_whole);
    CU_add_test(s, "bad chain tails skipped", test_bad_tails_skipped);
    CU_add_test(s, "a damaged sample run keeps the samples before the damage", test_damaged_sample_run);
}
