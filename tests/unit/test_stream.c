/*
 * tests/unit/test_stream.c — raw streams and result directories built by
 * hand for the loader's tests (test_profile_load.c, test_compact_records.c).
 *
 * Streams are built record by record (not by the agent or attach mode), so
 * that each field's meaning in docs/format.md is exercised on its own, but
 * through format/'s stream writer, the one both samplers write through: the
 * framing, padding and id assignment the loader is tested on are the
 * samplers' by construction. Declared in tests/unit/unit.h.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/format.h"
#include "tests/unit/unit.h"

static void test_buf_put(struct test_buf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 256;
        b->data = realloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

/* The writer's byte sink: the stream stays in memory. */
static size_t put_bytes(void *ctx, const void *bytes, size_t len)
{
    test_buf_put(ctx, bytes, len);
    return len;
}

/* The writer's Python-frame resolver: the test's frames carry their names. */
static bool resolve_test_pyframe(void *ctx, const void *frames, unsigned i, struct opr_pycode_names *out,
                                 bool need_names)
{
    const struct test_pyframe *f = (const struct test_pyframe *)frames + i;
    if (!f->filename)
        return false;
    snprintf(out->filename, sizeof out->filename, "%s", f->filename);
    snprintf(out->qualname, sizeof out->qualname, "%s", f->qualname);
    out->first_line = f->first_line;
    out->line = f->line;
    return true;
}

void test_stream_begin(struct test_stream *s, uint32_t pid, bool classic_records)
{
    memset(s, 0, sizeof *s);
    struct opr_writer_config config = {
        .classic_records = classic_records,
        .ops = {.ctx = &s->out, .write = put_bytes, .resolve_pyframe = resolve_test_pyframe},
    };
    s->w = opr_writer_new(&config);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s->w);
    opr_writer_begin(s->w, pid, 1, 0, 1000000);
}

struct test_buf test_stream_finish(struct test_stream *s)
{
    opr_writer_flush(s->w);
    opr_writer_free(s->w);
    return s->out;
}

void test_stream_record(struct test_stream *s, uint32_t type, const void *body, size_t body_len, const void *tail,
                        size_t tail_len)
{
    opr_writer_emit(s->w, type, body, body_len, tail, tail_len);
}

void test_stream_sample(struct test_stream *s, uint64_t t, uint32_t tid, uint32_t stack, uint32_t py_plus1)
{
    struct opr_sample smp = {t, tid, stack, 0, 1};
    struct opr_sample_python py = {py_plus1, 0};
    test_stream_record(s, OPR_REC_SAMPLE, &smp, sizeof smp, &py, sizeof py);
}

void test_stream_stack(struct test_stream *s, uint32_t id, const uint64_t *pcs, uint32_t n)
{
    CU_ASSERT_EQUAL(opr_writer_stack_id(s->w, pcs, n), id);
}

char unit_dir[256];

void unit_dir_write(const char *name, const void *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", unit_dir, name);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fwrite(data, 1, len, f);
    fclose(f);
}

void unit_dir_write_info(const char *extra)
{
    char text[512];
    snprintf(text, sizeof text,
             "format=opprof-raw 1\ncommand=./app 'a b'\nevent=task-clock\nperiod_ns=1000000\n"
             "frequency_hz=1000\nstart_ns=100\nend_ns=5000100\nexit_status=0\ncomplete=1\n%s",
             extra);
    unit_dir_write("info", text, strlen(text));
}

void unit_dir_new(void)
{
    snprintf(unit_dir, sizeof unit_dir, "/tmp/opprof-unit-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(unit_dir));
}

void unit_dir_remove(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", unit_dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}
