/*
 * analyze/memory.c — memory over time: the MEM_TICK and MEM_LIMIT records of
 * each stream (a stream_feature of the loader), and the RSS growth between
 * two readings charged to what the process ran in between.
 *
 * The charging rule (memory_charge): RSS is a property of the process, not
 * of a thread, and a reading says only how much it changed over an interval
 * (~10 ms), not which instruction changed it. So the change is split over
 * the process's samples in that interval in proportion to their weights:
 * the code that ran most while the RSS grew gets most of the growth. Unlike
 * charging it all to the interval's dominant stack, this keeps the sum of
 * the charges equal to the growth, and a function that grows memory across
 * many intervals gets its share in each. It cannot tell two busy threads
 * apart: a thread that computes while another allocates shares the growth
 * (the Memory section says so).
 *
 * Out of memory (util/util.h): -1 with errno ENOMEM, nothing aborts.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/hotspots_internal.h"
#include "analyze/profile_internal.h"
#include "util/util.h"

/* ---- the charging rule --------------------------------------------------- */

void memory_charge(const struct opr_mem_tick *ticks, size_t nticks, const struct memory_sample_time *samples,
                   size_t nsamples, double *grown, double *released, double *unattr_grown, double *unattr_released)
{
    size_t lo = 0; /* first sample after the previous interval's start */
    for (size_t k = 1; k < nticks; k++) {
        const struct opr_mem_tick *prev = &ticks[k - 1], *t = &ticks[k];
        double delta = (double)t->rss_bytes - (double)prev->rss_bytes;
        /* the growth happened after the reading before t (since_ns), never
         * before the record before it */
        uint64_t from = t->since_ns > prev->time_ns ? t->since_ns : prev->time_ns;
        while (lo < nsamples && samples[lo].time_ns <= from)
            lo++;
        size_t hi = lo;
        uint64_t weight = 0;
        while (hi < nsamples && samples[hi].time_ns <= t->time_ns)
            weight += samples[hi++].weight;
        if (delta == 0)
            continue;
        if (weight == 0) {
            if (delta > 0)
                *unattr_grown += delta;
            else
                *unattr_released -= delta;
            continue;
        }
        for (size_t i = lo; i < hi; i++) {
            double share = delta * (double)samples[i].weight / (double)weight;
            if (share > 0)
                grown[i] += share;
            else
                released[i] -= share;
        }
    }
}

/* ---- reading the records (stream_feature) ------------------------------- */

struct memory_load {
    size_t stream_plus1; /* 1 + index into p->memory->streams once a record was read */
};

void prof_memory_free(struct prof_memory *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nstreams; i++) {
        free(m->streams[i].ticks);
        free(m->streams[i].cgroup);
    }
    free(m->streams);
    free(m->charges);
    if (m->charge_index) {
        hashmap_free(m->charge_index);
        free(m->charge_index);
    }
    free(m);
}

/* The stream's entry in p->memory, added on its first record; NULL (ENOMEM). */
static struct prof_memory_stream *stream_entry(struct stream_load *sl, struct memory_load *st)
{
    struct profile *p = stream_profile(sl);
    if (!p->memory && !(p->memory = calloc(1, sizeof *p->memory)))
        return NULL;
    struct prof_memory *m = p->memory;
    if (!st->stream_plus1) {
        if (profile_grow_to(&m->streams, &m->streams_cap, m->nstreams + 1, sizeof *m->streams) != 0)
            return NULL;
        memset(&m->streams[m->nstreams], 0, sizeof m->streams[0]);
        m->streams[m->nstreams].pid = stream_pid(sl);
        st->stream_plus1 = ++m->nstreams;
    }
    return &m->streams[st->stream_plus1 - 1];
}

void memory_tick_without_agent(struct opr_mem_tick *t)
{
    if (t->agent_bytes > t->rss_bytes)
        t->agent_bytes = t->rss_bytes;
    if (t->agent_file_bytes > t->agent_bytes)
        t->agent_file_bytes = t->agent_bytes;
    uint64_t agent_anon = t->agent_bytes - t->agent_file_bytes;
    t->rss_bytes -= t->agent_bytes;
    t->anon_bytes -= agent_anon < t->anon_bytes ? agent_anon : t->anon_bytes;
    t->file_bytes -= t->agent_file_bytes < t->file_bytes ? t->agent_file_bytes : t->file_bytes;
}

static int on_tick(void *ctx, void *arg, const struct opr_record *rec)
{
    struct prof_memory_stream *ms = stream_entry(ctx, arg);
    if (!ms)
        return -1;
    struct opr_mem_tick t = {0};
    memcpy(&t, rec->body, rec->len < sizeof t ? rec->len : sizeof t);
    memory_tick_without_agent(&t);
    if (ms->nticks && t.time_ns < ms->ticks[ms->nticks - 1].time_ns) {
        stream_warn(ctx, "MEM_TICK at byte %zu goes back in time: ignored", rec->off);
        return 0;
    }
    if (profile_grow_to(&ms->ticks, &ms->ticks_cap, ms->nticks + 1, sizeof *ms->ticks) != 0)
        return -1;
    ms->ticks[ms->nticks++] = t;
    return 0;
}

static int on_limit(void *ctx, void *arg, const struct opr_record *rec)
{
    struct prof_memory_stream *ms = stream_entry(ctx, arg);
    if (!ms)
        return -1;
    memcpy(&ms->limit, rec->body, sizeof ms->limit);
    ms->has_limit = true;
    size_t len = ms->limit.path_len;
    if (len > rec->len - sizeof ms->limit)
        len = rec->len - sizeof ms->limit; /* a corrupt length: keep what is there */
    free(ms->cgroup);
    if (!(ms->cgroup = malloc(len + 1)))
        return -1;
    memcpy(ms->cgroup, rec->body + sizeof ms->limit, len);
    ms->cgroup[len] = '\0';
    ms->cgroup[strnlen(ms->cgroup, len)] = '\0';
    return 0;
}

static int stream_begin(struct stream_load *sl, void *state, const struct opr_file_header *h, struct opr_reader *r)
{
    (void)sl, (void)h;
    if (opr_reader_on(r, OPR_REC_MEM_TICK, OPR_MEM_TICK_MIN_BODY, on_tick, state) != 0)
        return -1;
    return opr_reader_on(r, OPR_REC_MEM_LIMIT, sizeof(struct opr_mem_limit), on_limit, state);
}

struct timed_sample {
    struct memory_sample_time t;
    uint32_t stack_id, py_plus1;
};

static int cmp_timed(const void *a, const void *b)
{
    uint64_t x = ((const struct timed_sample *)a)->t.time_ns, y = ((const struct timed_sample *)b)->t.time_ns;
    return x < y ? -1 : x > y;
}

/* Adds a charge to the profile stack's row. 0, or -1 (ENOMEM). */
static int add_charge(struct prof_memory *m, uint32_t stack, double grown, double released)
{
    if (!m->charge_index) {
        if (!(m->charge_index = malloc(sizeof(struct hashmap))))
            return -1;
        hashmap_init_u64(m->charge_index);
    }
    uint64_t row;
    int rc = hashmap_find_or_add_u64(m->charge_index, stack, m->ncharges, &row);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        if (profile_grow_to(&m->charges, &m->charges_cap, m->ncharges + 1, sizeof *m->charges) != 0)
            return -1; /* the index names a row not added: the load fails as a whole */
        m->charges[m->ncharges++] = (struct prof_memory_charge){stack, 0, 0};
    }
    m->charges[row].grown += grown;
    m->charges[row].released += released;
    return 0;
}

/* After the samples: charge each interval's RSS change to its samples. */
static int stream_end(struct stream_load *sl, void *state)
{
    struct memory_load *st = state;
    struct profile *p = stream_profile(sl);
    if (!st->stream_plus1 || !p->memory)
        return 0;
    struct prof_memory_stream *ms = &p->memory->streams[st->stream_plus1 - 1];
    size_t n;
    const struct stream_sample *ss = stream_samples(sl, &n);
    struct timed_sample *ts = calloc(n ? n : 1, sizeof *ts);
    struct memory_sample_time *times = calloc(n ? n : 1, sizeof *times);
    double *grown = calloc(n ? n : 1, sizeof *grown), *released = calloc(n ? n : 1, sizeof *released);
    int rc = -1;
    if (!ts || !times || !grown || !released)
        goto out;
    for (size_t i = 0; i < n; i++)
        ts[i] = (struct timed_sample){{ss[i].s.time_ns, ss[i].s.weight ? ss[i].s.weight : 1},
                                      ss[i].s.stack_id, ss[i].py_stack_plus1};
    qsort(ts, n, sizeof *ts, cmp_timed); /* threads' samples interleave out of order */
    for (size_t i = 0; i < n; i++)
        times[i] = ts[i].t;
    memory_charge(ms->ticks, ms->nticks, times, n, grown, released, &ms->unattributed_grown,
                  &ms->unattributed_released);
    for (size_t i = 0; i < n; i++) {
        if (grown[i] == 0 && released[i] == 0)
            continue;
        errno = 0;
        uint32_t stack = stream_resolve_stack(sl, ts[i].stack_id, ts[i].py_plus1);
        if (stack == UINT32_MAX) {
            if (errno == ENOMEM)
                goto out;
            ms->unattributed_grown += grown[i]; /* a sample whose stack is unknown */
            ms->unattributed_released += released[i];
            continue;
        }
        if (add_charge(p->memory, stack, grown[i], released[i]) != 0)
            goto out;
    }
    rc = 0;
out:
    if (rc != 0)
        errno = ENOMEM;
    free(ts);
    free(times);
    free(grown);
    free(released);
    return rc;
}

const struct stream_feature memory_stream_feature = {
    .name = "memory",
    .state_size = sizeof(struct memory_load),
    .begin = stream_begin,
    .end = stream_end,
};
