/*
 * report/export_pprof.c — pprof's profile.proto, gzipped (`go tool pprof`,
 * pprof.me, Google Cloud Profiler, speedscope, the pprof-format npm package).
 *
 * Written by hand with a few protobuf helpers (varints and length-delimited
 * fields): no protobuf library is needed for one message type.
 *   sample_type  samples/count and cpu/nanoseconds (record -c: samples/count
 *                and <event>/count), one Sample per distinct stack
 *   location     one per profile frame (function + line), leaf first in
 *                each sample as pprof wants, process-entry frames dropped
 *                as in every export
 *   function     one per export function (name, file, smallest line seen)
 *   mapping      one per module name; the profile keeps no addresses or
 *                build-ids, so memory ranges are 0 and build_id is empty
 * string_table[0] is "" (the format requires it); function.system_name is
 * left empty, as the reference says pprof expects.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "report/export_internal.h"
#include "report/report.h"
#include "util/util.h"

/* A growing byte buffer; oom latches so callers check once at the end. */
struct pb {
    unsigned char *b;
    size_t n, cap;
    bool oom;
};

static void pb_put(struct pb *w, const void *data, size_t len)
{
    if (w->oom)
        return;
    if (w->n + len > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->n + len)
            cap *= 2;
        unsigned char *b = realloc(w->b, cap);
        if (!b) {
            w->oom = true;
            return;
        }
        w->b = b;
        w->cap = cap;
    }
    memcpy(w->b + w->n, data, len);
    w->n += len;
}

static void pb_varint(struct pb *w, uint64_t v)
{
    unsigned char tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pb_put(w, tmp, n);
}

/* Field `field` as a varint (wire type 0); zero values are omitted, as
 * proto3 does. */
static void pb_uint(struct pb *w, unsigned field, uint64_t v)
{
    if (!v)
        return;
    pb_varint(w, (uint64_t)field << 3);
    pb_varint(w, v);
}

/* Field `field` length-delimited (wire type 2): a string or a sub-message. */
static void pb_bytes(struct pb *w, unsigned field, const void *data, size_t len)
{
    pb_varint(w, (uint64_t)field << 3 | 2);
    pb_varint(w, len);
    pb_put(w, data, len);
}

/* The string table: index by string pointer (profile strings are interned,
 * display names live once in the func map), so one lookup per use. */
struct strtab {
    struct hashmap index;
    struct pb out; /* the string_table fields (6), in index order */
    uint64_t n;
};

static uint64_t str_id(struct strtab *t, const char *s)
{
    if (!s || !s[0])
        return 0;
    uint64_t id;
    int rc = hashmap_find_or_add_u64(&t->index, (uint64_t)(uintptr_t)s, t->n, &id);
    if (rc < 0) {
        t->out.oom = true;
        return 0;
    }
    if (rc == 0) {
        pb_bytes(&t->out, 6, s, strlen(s));
        t->n++;
    }
    return id;
}

static void value_type(struct pb *w, unsigned field, struct strtab *st, const char *type, const char *unit)
{
    struct pb m = {0};
    pb_uint(&m, 1, str_id(st, type));
    pb_uint(&m, 2, str_id(st, unit));
    pb_bytes(w, field, m.b, m.n);
    w->oom = w->oom || m.oom;
    free(m.b);
}

/* Mappings (one per module), functions and locations. The mapping of a
 * module is found through the string id of its name. */
static void write_tables(struct pb *w, const struct profile *p, const struct export_funcs *fn, struct strtab *st)
{
    struct hashmap mapping_of;
    hashmap_init_u64(&mapping_of);
    uint64_t nmappings = 0;
    uint64_t *mapping = calloc(p->nframes + 1, sizeof *mapping);
    if (!mapping) {
        w->oom = true;
        return;
    }
    for (size_t i = 0; i < p->nframes && !w->oom; i++) {
        const char *module = p->frames[i].module ? p->frames[i].module : "[unknown]";
        uint64_t id;
        int rc = hashmap_find_or_add_u64(&mapping_of, str_id(st, module), nmappings + 1, &id);
        if (rc < 0) {
            w->oom = true;
            break;
        }
        mapping[i] = id;
        if (rc == 0) {
            struct pb m = {0};
            pb_uint(&m, 1, ++nmappings);
            pb_uint(&m, 5, str_id(st, module));
            pb_uint(&m, 7, 1); /* has_functions */
            pb_uint(&m, 8, 1); /* has_filenames */
            pb_uint(&m, 9, 1); /* has_line_numbers */
            pb_bytes(w, 3, m.b, m.n);
            w->oom = w->oom || m.oom;
            free(m.b);
        }
    }
    for (size_t f = 0; f < fn->nfuncs && !w->oom; f++) {
        const struct export_func *g = &fn->funcs[f];
        struct pb m = {0};
        pb_uint(&m, 1, f + 1);
        pb_uint(&m, 2, str_id(st, g->name));
        pb_uint(&m, 4, str_id(st, g->source_file ? g->source_file : g->module));
        pb_uint(&m, 5, g->min_line > 0 ? (uint64_t)g->min_line : 0);
        pb_bytes(w, 5, m.b, m.n);
        w->oom = w->oom || m.oom;
        free(m.b);
    }
    /* Location i + 1 is frame i; location nframes + 1 is "[no frames]". */
    for (size_t i = 0; i <= p->nframes && !w->oom; i++) {
        struct pb line = {0}, m = {0};
        pb_uint(&line, 1, (i < p->nframes ? fn->of_frame[i] : fn->none) + 1);
        pb_uint(&line, 2, i < p->nframes && p->frames[i].line > 0 ? (uint64_t)p->frames[i].line : 0);
        pb_uint(&m, 1, i + 1);
        pb_uint(&m, 2, mapping[i]);
        pb_bytes(&m, 4, line.b, line.n);
        pb_bytes(w, 4, m.b, m.n);
        w->oom = w->oom || m.oom || line.oom;
        free(m.b);
        free(line.b);
    }
    free(mapping);
    hashmap_free(&mapping_of);
}

/* One Sample per distinct stack: location ids leaf first, values
 * (samples, nanoseconds or events). Packed repeated fields. */
static int write_samples(struct pb *w, const struct profile *p)
{
    uint64_t *weight, *count;
    if (export_stack_weights(p, &weight, &count) != 0)
        return -1;
    uint64_t unit = p->sample_period ? p->sample_period : (p->period_ns ? p->period_ns : 1000000);
    for (size_t s = 0; s < p->nstacks && !w->oom; s++) {
        if (!count[s])
            continue;
        const struct prof_stack *st = &p->stacks[s];
        struct pb locs = {0}, vals = {0}, m = {0};
        uint32_t len = st->nframes ? export_stack_len(p, st) : 0;
        for (uint32_t k = 0; k < len; k++)
            pb_varint(&locs, (uint64_t)st->frames[k] + 1);
        if (len == 0)
            pb_varint(&locs, (uint64_t)p->nframes + 1);
        pb_varint(&vals, count[s]);
        pb_varint(&vals, weight[s] * unit);
        pb_bytes(&m, 1, locs.b, locs.n);
        pb_bytes(&m, 2, vals.b, vals.n);
        pb_bytes(w, 2, m.b, m.n);
        w->oom = w->oom || locs.oom || vals.oom || m.oom;
        free(locs.b);
        free(vals.b);
        free(m.b);
    }
    free(weight);
    free(count);
    return w->oom ? -1 : 0;
}

/* data as one gzip member into out. 0, or -1 (out of memory / zlib error). */
static int write_gzip(FILE *out, const unsigned char *data, size_t len)
{
    z_stream z = {0};
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16 /* gzip header */, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    unsigned char buf[65536];
    z.next_in = (unsigned char *)data;
    z.avail_in = (uInt)len; /* profiles stay far below 4 GB */
    int zr;
    do {
        z.next_out = buf;
        z.avail_out = sizeof buf;
        zr = deflate(&z, Z_FINISH);
        fwrite(buf, 1, sizeof buf - z.avail_out, out);
    } while (zr == Z_OK);
    deflateEnd(&z);
    return zr == Z_STREAM_END ? 0 : -1;
}

int export_pprof(FILE *out, const struct profile *p)
{
    struct export_funcs fn;
    if (export_funcs_build(p, &fn) != 0)
        return -1;
    struct strtab st = {.n = 1};
    hashmap_init_u64(&st.index);
    pb_bytes(&st.out, 6, "", 0); /* string_table[0] = "" */
    struct pb w = {0};
    value_type(&w, 1, &st, "samples", "count");
    if (p->sample_period)
        value_type(&w, 1, &st, p->event ? p->event : "events", "count");
    else
        value_type(&w, 1, &st, "cpu", "nanoseconds");
    int rc = write_samples(&w, p);
    if (rc == 0)
        write_tables(&w, p, &fn, &st);
    if (p->end_ns > p->start_ns)
        pb_uint(&w, 10, p->end_ns - p->start_ns); /* duration_nanos */
    if (p->sample_period) {
        value_type(&w, 11, &st, p->event ? p->event : "events", "count");
        pb_uint(&w, 12, p->sample_period);
    } else {
        value_type(&w, 11, &st, "cpu", "nanoseconds");
        pb_uint(&w, 12, p->period_ns ? p->period_ns : 1000000);
    }
    /* string_table after the fields that use it: field order is free in
     * protobuf, and every string is known only now. */
    pb_put(&w, st.out.b, st.out.n);
    if (rc == 0 && (w.oom || st.out.oom))
        rc = -1;
    if (rc == 0)
        rc = write_gzip(out, w.b, w.n);
    free(w.b);
    free(st.out.b);
    hashmap_free(&st.index);
    export_funcs_free(&fn);
    return rc;
}
