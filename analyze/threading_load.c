/*
 * analyze/threading_load.c — what the loader keeps for the Threading section:
 * the OMP_* and SCHED_TICK records (docs/format.md, "Threads and OpenMP"),
 * the info file's openmp_* keys, which OpenMP runtimes were mapped, and each
 * sample's parallel region. Registered with the loader as a stream_feature,
 * so profile_load.c knows none of these records.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/profile_internal.h"

struct prof_threading *threading_get(struct profile *p)
{
    if (!p->threading)
        p->threading = calloc(1, sizeof *p->threading);
    return p->threading;
}

void threading_free(struct prof_threading *t)
{
    if (!t)
        return;
    free(t->regions);
    free(t->contexts);
    free(t->omp_ticks);
    free(t->sched_ticks);
    free(t->sched_threads);
    free(t->runtime_version);
    free(t->openmp_runtime);
    free(t->openmp_setup);
    free(t->openmp_libomp);
    free(t);
}

int threading_info_kv(struct profile *p, const char *key, const char *val)
{
    struct prof_threading *t = threading_get(p);
    if (!t) {
        errno = ENOMEM;
        return -1;
    }
    if (strcmp(key, "openmp_regions") == 0)
        t->openmp_regions_off = strcmp(val, "off") == 0;
    char **slot = strcmp(key, "openmp_runtime") == 0 ? &t->openmp_runtime
                  : strcmp(key, "openmp_setup") == 0 ? &t->openmp_setup
                  : strcmp(key, "openmp_libomp") == 0 ? &t->openmp_libomp
                                                      : NULL;
    if (slot) {
        free(*slot);
        if (!(*slot = strdup(val))) {
            errno = ENOMEM;
            return -1;
        }
    }
    return 0;
}

/* ---- the records: each body decoded here and nowhere else -------------- */

/* The decoders: 0, or -1 with errno ENOMEM (nothing added). */
static int load_region(struct prof_threading *t, uint32_t pid, const char *body)
{
    struct opr_omp_region r;
    memcpy(&r, body, sizeof r);
    if (profile_grow_to(&t->regions, &t->regions_cap, t->nregions + 1, sizeof *t->regions) != 0)
        return -1;
    t->regions[t->nregions++] = (struct prof_omp_region){pid, r.opener_tid, r.region_id, r.parent_id,
                                                         r.begin_ns, r.end_ns, r.requested, r.actual, r.flags};
    return 0;
}

/* len >= OPR_OMP_TICK_MIN_BYTES; fields past a shorter body read as 0. */
static int load_omp_tick(struct prof_threading *t, uint32_t pid, const char *body, size_t len)
{
    if (profile_grow_to(&t->omp_ticks, &t->omp_ticks_cap, t->nomp_ticks + 1, sizeof *t->omp_ticks) != 0)
        return -1;
    struct prof_omp_tick *k = &t->omp_ticks[t->nomp_ticks++];
    k->pid = pid;
    memset(&k->t, 0, sizeof k->t);
    memcpy(&k->t, body, len < sizeof k->t ? len : sizeof k->t);
    if (k->t.interval_ns > k->t.time_ns)
        k->t.interval_ns = 0;
    return 0;
}

/* 0, or -1 (ENOMEM) when the version text could not be kept. */
static int load_omp_info(struct prof_threading *t, const char *body, size_t len)
{
    struct opr_omp_info info;
    memcpy(&info, body, sizeof info);
    t->ompt_processes++;
    if (!t->runtime_version && info.text_len <= len - sizeof info) {
        t->runtime_version = malloc(info.text_len + 1);
        if (!t->runtime_version) {
            errno = ENOMEM;
            return -1;
        }
        memcpy(t->runtime_version, body + sizeof info, info.text_len);
        t->runtime_version[info.text_len] = '\0';
    }
    return 0;
}

static int load_sched_tick(struct prof_threading *t, uint32_t pid, const char *body, size_t len)
{
    struct opr_sched_tick k;
    memcpy(&k, body, sizeof k);
    if (k.nthreads > (len - sizeof k) / sizeof(struct opr_sched_thread))
        return 0; /* malformed: skipped */
    /* Both grown before either is written: a failure leaves neither half-filled. */
    if (profile_grow_to(&t->sched_ticks, &t->sched_ticks_cap, t->nsched_ticks + 1, sizeof *t->sched_ticks) != 0 ||
        profile_grow_to(&t->sched_threads, &t->sched_threads_cap, t->nsched_threads + k.nthreads + 1,
                        sizeof *t->sched_threads) != 0)
        return -1;
    t->sched_ticks[t->nsched_ticks++] = (struct prof_sched_tick){pid, k.time_ns, k.online_cpus, k.affinity_cpus,
                                                                 k.cpu_limit_milli, t->nsched_threads, k.nthreads};
    for (uint32_t i = 0; i < k.nthreads; i++) {
        struct opr_sched_thread e;
        memcpy(&e, body + sizeof k + i * sizeof e, sizeof e);
        t->sched_threads[t->nsched_threads++] =
            (struct prof_sched_thread){e.tid, e.run_ns, e.wait_ns, e.timeslices, e.nonvoluntary_csw};
    }
    return 0;
}

/* Kept for callers that hold one body outside a stream (the unit tests):
 * the same decoders the stream handlers use. len >= the type's struct. */
int threading_load_record(struct profile *p, uint32_t pid, uint32_t type, const char *body, size_t len)
{
    struct prof_threading *t = threading_get(p);
    if (!t) {
        errno = ENOMEM;
        return -1;
    }
    if (type == OPR_REC_OMP_REGION)
        return load_region(t, pid, body);
    if (type == OPR_REC_OMP_TICK)
        return load_omp_tick(t, pid, body, len);
    if (type == OPR_REC_OMP_INFO)
        return load_omp_info(t, body, len);
    if (type == OPR_REC_SCHED_TICK)
        return load_sched_tick(t, pid, body, len);
    return 0;
}

int threading_add_context(struct profile *p, uint32_t pid, uint32_t tid, uint64_t region_id, uint64_t time_ns,
                          uint32_t stack)
{
    struct prof_threading *t = threading_get(p);
    if (!t || profile_grow_to(&t->contexts, &t->contexts_cap, t->ncontexts + 1, sizeof *t->contexts) != 0) {
        errno = ENOMEM;
        return -1;
    }
    t->contexts[t->ncontexts++] = (struct prof_omp_context){pid, tid, region_id, time_ns, stack};
    return 0;
}

int threading_note_module(struct profile *p, const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!threading_is_omp_runtime(base))
        return 0;
    struct prof_threading *t = threading_get(p);
    if (!t) {
        errno = ENOMEM;
        return -1;
    }
    if (strncmp(base, "libgomp", 7) == 0)
        t->saw_libgomp = true;
    else if (strncmp(base, "libiomp", 7) == 0)
        t->saw_libiomp = true;
    else
        t->saw_libomp = true;
    return 0;
}

static int cmp_region_id(const void *a, const void *b)
{
    const struct prof_omp_region *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

uint32_t threading_region_lookup(struct profile *p, size_t first, size_t *nsorted, uint32_t pid, uint64_t id)
{
    if (id == 0)
        return 0;
    struct prof_threading *t = threading_get(p);
    if (!t) {
        errno = ENOMEM;
        return UINT32_MAX;
    }
    if (*nsorted == 0 && t->nregions > first) {
        qsort(t->regions + first, t->nregions - first, sizeof *t->regions, cmp_region_id);
        *nsorted = t->nregions - first;
    }
    size_t lo = first, hi = first + *nsorted;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->regions[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < first + *nsorted && t->regions[lo].id == id)
        return (uint32_t)lo + 1;
    for (size_t i = first + *nsorted; i < t->nregions; i++) /* placeholders added after sorting */
        if (t->regions[i].id == id)
            return (uint32_t)i + 1;
    if (profile_grow_to(&t->regions, &t->regions_cap, t->nregions + 1, sizeof *t->regions) != 0)
        return UINT32_MAX;
    t->regions[t->nregions] = (struct prof_omp_region){.pid = pid, .id = id};
    return (uint32_t)++t->nregions;
}

bool threading_is_omp_runtime(const char *m)
{
    return m && (strncmp(m, "libgomp", 7) == 0 || strncmp(m, "libomp", 6) == 0 || strncmp(m, "libiomp", 7) == 0);
}


/* ---- the stream feature ---------------------------------------------------- */

struct threading_stream {
    size_t first_region;           /* this stream's regions start here */
    size_t nsorted;                /* for threading_region_lookup */
    struct opr_omp_context *ctx;   /* openers' stacks: resolved once the maps are read */
    size_t nctx, ctx_cap;
};

/* The stream's threading data, created on its first record. */
static struct prof_threading *stream_threading(struct stream_load *sl)
{
    struct prof_threading *t = threading_get(stream_profile(sl));
    if (!t)
        errno = ENOMEM;
    return t;
}

static int on_region(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct prof_threading *t = stream_threading(ctx);
    return t ? load_region(t, stream_pid(ctx), rec->body) : -1;
}

static int on_omp_tick(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct prof_threading *t = stream_threading(ctx);
    return t ? load_omp_tick(t, stream_pid(ctx), rec->body, rec->len) : -1;
}

static int on_omp_info(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct prof_threading *t = stream_threading(ctx);
    return t ? load_omp_info(t, rec->body, rec->len) : -1;
}

static int on_sched_tick(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct prof_threading *t = stream_threading(ctx);
    return t ? load_sched_tick(t, stream_pid(ctx), rec->body, rec->len) : -1;
}

static int on_context(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)ctx;
    struct threading_stream *ts = arg;
    if (profile_grow_to(&ts->ctx, &ts->ctx_cap, ts->nctx + 1, sizeof *ts->ctx) != 0)
        return -1;
    memcpy(&ts->ctx[ts->nctx++], rec->body, sizeof *ts->ctx);
    return 0;
}

static int stream_begin(struct stream_load *sl, void *state, const struct opr_file_header *h, struct opr_reader *r)
{
    (void)h;
    struct threading_stream *ts = state;
    struct profile *p = stream_profile(sl);
    ts->first_region = p->threading ? p->threading->nregions : 0;
    static const struct {
        uint32_t type;
        size_t min_body;
        opr_record_fn fn;
    } types[] = {
        {OPR_REC_OMP_REGION, sizeof(struct opr_omp_region), on_region},
        {OPR_REC_OMP_TICK, OPR_OMP_TICK_MIN_BYTES, on_omp_tick},
        {OPR_REC_OMP_INFO, sizeof(struct opr_omp_info), on_omp_info},
        {OPR_REC_SCHED_TICK, sizeof(struct opr_sched_tick), on_sched_tick},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (opr_reader_on(r, types[i].type, types[i].min_body, types[i].fn, ts) != 0)
            return -1;
    return opr_reader_on(r, OPR_REC_OMP_CONTEXT, sizeof(struct opr_omp_context), on_context, ts);
}

/* Once the samples are in the profile: each one's region (the SAMPLE's
 * OpenMP tail) as an index, then the openers' stacks at region begin. */
static int stream_end(struct stream_load *sl, void *state)
{
    struct threading_stream *ts = state;
    struct profile *p = stream_profile(sl);
    uint32_t pid = stream_pid(sl);
    size_t n;
    const struct stream_sample *ss = stream_samples(sl, &n);
    for (size_t i = 0; i < n; i++) {
        if (!ss[i].omp_region)
            continue;
        if (ss[i].omp_region >> 63) { /* a team thread in the runtime, not in a body */
            p->samples[ss[i].index].omp_region = THREADING_OUTSIDE_BODY;
            continue;
        }
        uint32_t r = threading_region_lookup(p, ts->first_region, &ts->nsorted, pid, ss[i].omp_region);
        if (r == UINT32_MAX)
            return -1;
        p->samples[ss[i].index].omp_region = r;
    }
    for (size_t i = 0; i < ts->nctx; i++) {
        const struct opr_omp_context *c = &ts->ctx[i];
        uint32_t stack = stream_resolve_stack(sl, c->stack_id, c->py_stack_id_plus1);
        if (stack == UINT32_MAX && errno == ENOMEM)
            return -1;
        if (stack != UINT32_MAX && threading_add_context(p, pid, c->tid, c->region_id, c->time_ns, stack) != 0)
            return -1;
        if (stack != UINT32_MAX && (c->flags & OPR_OMP_CONTEXT_REPEATED))
            threading_get(p)->contexts_repeated++; /* exists: threading_add_context made it */
    }
    return 0;
}

static void stream_release(void *state)
{
    struct threading_stream *ts = state;
    free(ts->ctx);
}

const struct stream_feature threading_stream_feature = {
    .name = "threading",
    .state_size = sizeof(struct threading_stream),
    .begin = stream_begin,
    .end = stream_end,
    .release = stream_release,
};
