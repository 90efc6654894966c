/*
 * analyze/counters.c — per-sample counter deltas in the profile: storage for
 * the loader, folding per stack / thread for the hotspot tables, and the
 * derived figures of a row (CPI, IPC, LLC miss ratio and rate, bandwidth
 * estimate) through the pure functions of metrics.c.
 *
 * Each sample carries, per counter, the raw delta and the time the counter
 * was enabled and running over the same interval. Rows sum the three and
 * scale once (sum of values x sum enabled / sum running): a per-sample scale
 * would divide by a running time that is often 0 for one interval when
 * counters are multiplexed, and would lose those counts.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/profile_internal.h"

static struct prof_counters *counters_of(struct profile *p)
{
    if (!p->counters)
        p->counters = calloc(1, sizeof *p->counters);
    return p->counters;
}

size_t counters_add_event(struct profile *p, const char *name, enum pmu_role role, uint32_t type,
                          uint64_t config, bool user_only)
{
    struct prof_counters *c = counters_of(p);
    if (!c) {
        errno = ENOMEM;
        return SIZE_MAX;
    }
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->ev[i].name, name) == 0 && c->ev[i].type == type && c->ev[i].config == config)
            return i;
    if (c->n >= OPR_MAX_COUNTERS * 4 || c->nrows) /* events are declared before any sample */
        return SIZE_MAX;
    struct prof_counter *ev = realloc(c->ev, (c->n + 1) * sizeof *ev);
    if (!ev) {
        errno = ENOMEM;
        return SIZE_MAX;
    }
    c->ev = ev;
    struct prof_counter *e = &c->ev[c->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    if (!e->name) {
        errno = ENOMEM;
        return SIZE_MAX;
    }
    e->role = role;
    e->type = type;
    e->config = config;
    e->user_only = user_only;
    return c->n++;
}

uint32_t counters_new_row(struct profile *p)
{
    struct prof_counters *c = p->counters;
    if (!c || c->n == 0)
        return 0;
    size_t width = c->n * COUNTER_SUMS;
    if (c->nrows == c->rows_cap) {
        size_t cap = c->rows_cap ? c->rows_cap * 2 : 1024;
        double *v = realloc(c->values, cap * width * sizeof *v);
        if (!v) {
            errno = ENOMEM;
            return 0;
        }
        c->values = v;
        c->rows_cap = cap;
    }
    double *row = c->values + c->nrows * width;
    for (size_t i = 0; i < width; i++)
        row[i] = NAN;
    return (uint32_t)++c->nrows;
}

void counters_set(struct profile *p, uint32_t row, size_t idx, uint64_t value, uint64_t enabled,
                  uint64_t running)
{
    struct prof_counters *c = p->counters;
    if (!c || row == 0 || row > c->nrows || idx >= c->n)
        return;
    double *v = c->values + ((size_t)(row - 1) * c->n + idx) * COUNTER_SUMS;
    v[0] = (double)value;
    v[1] = (double)enabled;
    v[2] = (double)running;
    c->ev[idx].value += (double)value;
    c->ev[idx].enabled += (double)enabled;
    c->ev[idx].running += (double)running;
    c->ev[idx].samples++;
}

void counters_free(struct prof_counters *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        free(c->ev[i].name);
    free(c->ev);
    free(c->values);
    free(c);
}

/* ---- the stream feature: COUNTER_DESC and COUNTER_SAMPLE records ---------- */

struct counters_stream {
    size_t map[OPR_MAX_COUNTERS]; /* this stream's counter index -> the profile's (SIZE_MAX: none) */
    size_t nmap;
};

static int on_desc(void *ctx, void *arg, const struct opr_record *rec)
{
    struct counters_stream *cs = arg;
    struct opr_counter_desc d;
    memcpy(&d, rec->body, sizeof d);
    if (d.name_len > rec->len - sizeof d || d.index >= OPR_MAX_COUNTERS)
        return 0;
    char *name = strndup(rec->body + sizeof d, d.name_len);
    if (!name) {
        errno = ENOMEM;
        return -1;
    }
    errno = 0;
    size_t g = counters_add_event(stream_profile(ctx), name, (enum pmu_role)d.role, d.type, d.config,
                                  (d.flags & OPR_COUNTER_USER_ONLY) != 0);
    free(name);
    if (g == SIZE_MAX && errno == ENOMEM)
        return -1;
    /* Else SIZE_MAX: an event past the limit, or declared after samples:
     * its values are dropped, as the loader always did. */
    while (cs->nmap <= d.index)
        cs->map[cs->nmap++] = SIZE_MAX;
    cs->map[d.index] = g;
    return 0;
}

/* The deltas of the SAMPLE record just before (same thread). */
static int on_sample(void *ctx, void *arg, const struct opr_record *rec)
{
    struct counters_stream *cs = arg;
    struct opr_counter_sample h;
    memcpy(&h, rec->body, sizeof h);
    struct stream_sample *s = stream_sample_before(ctx, rec);
    if (!s || h.ncounters > cs->nmap ||
        (size_t)h.ncounters * sizeof(struct opr_counter_value) > rec->len - sizeof h) {
        stream_warn(ctx, "counter values without their sample at byte %zu; skipped", rec->off);
        return 0;
    }
    struct profile *p = stream_profile(ctx);
    errno = 0;
    uint32_t row = counters_new_row(p);
    if (!row && errno == ENOMEM)
        return -1;
    for (uint32_t i = 0; row && i < h.ncounters; i++) {
        struct opr_counter_value v;
        memcpy(&v, rec->body + sizeof h + i * sizeof v, sizeof v);
        counters_set(p, row, cs->map[i], v.value, v.enabled, v.running);
    }
    s->counters = row;
    return 0;
}

static int stream_begin(struct stream_load *sl, void *state, const struct opr_file_header *h, struct opr_reader *r)
{
    (void)sl, (void)h;
    if (opr_reader_on(r, OPR_REC_COUNTER_DESC, sizeof(struct opr_counter_desc), on_desc, state) != 0)
        return -1;
    return opr_reader_on(r, OPR_REC_COUNTER_SAMPLE, sizeof(struct opr_counter_sample), on_sample, state);
}

const struct stream_feature counters_stream_feature = {
    .name = "counters",
    .state_size = sizeof(struct counters_stream),
    .begin = stream_begin,
};

int counters_add_leader(struct profile *p, const char *name, enum pmu_role role, bool user_only,
                        uint64_t period)
{
    struct prof_counters *c = p->counters;
    if (!c || c->n == 0)
        return 0; /* nothing to set it beside: the rows' event counts say it all */
    size_t oldn = c->n, newn = oldn + 1;
    struct prof_counter *ev = realloc(c->ev, newn * sizeof *ev);
    if (!ev)
        return -1;
    c->ev = ev;
    /* One more column: copy every row into the wider layout. */
    size_t rows = c->nrows;
    double *v = malloc((rows ? rows : 1) * newn * COUNTER_SUMS * sizeof *v);
    char *copy = strdup(name);
    if (!v || !copy) {
        free(v);
        free(copy);
        return -1;
    }
    for (size_t r = 0; r < c->nrows; r++) {
        memcpy(v + r * newn * COUNTER_SUMS, c->values + r * oldn * COUNTER_SUMS, oldn * COUNTER_SUMS * sizeof *v);
        for (size_t j = 0; j < COUNTER_SUMS; j++)
            v[(r * newn + oldn) * COUNTER_SUMS + j] = NAN;
    }
    free(c->values);
    c->values = v;
    c->rows_cap = rows ? rows : 1;
    struct prof_counter *e = &c->ev[oldn];
    memset(e, 0, sizeof *e);
    e->name = copy;
    e->role = role;
    e->user_only = user_only;
    e->leader = true;
    c->n = newn;
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct prof_sample *s = &p->samples[i];
        if (s->counters == 0)
            continue;
        uint64_t events = (uint64_t)s->weight * period;
        counters_set(p, s->counters, oldn, events, 1, 1); /* exact: enabled == running */
    }
    return 0;
}

double *counters_fold(const struct profile *p, bool by_stack, size_t *nkeys)
{
    const struct prof_counters *c = p->counters;
    if (!c || c->n == 0 || c->nrows == 0)
        return NULL;
    size_t keys = by_stack ? p->nstacks + 1 : p->nthreads + 1;
    size_t width = c->n * COUNTER_SUMS;
    double *out = calloc(keys * width, sizeof *out);
    if (!out)
        return NULL;
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct prof_sample *s = &p->samples[i];
        if (s->counters == 0 || s->counters > c->nrows)
            continue;
        size_t k = by_stack ? (s->stack < p->nstacks ? s->stack : p->nstacks)
                            : (s->thread < p->nthreads ? s->thread : p->nthreads);
        const double *v = c->values + (size_t)(s->counters - 1) * width;
        double *o = out + k * width;
        for (size_t j = 0; j < width; j++)
            if (!isnan(v[j]))
                o[j] += v[j];
    }
    if (nkeys)
        *nkeys = keys;
    return out;
}

double counter_scaled(const double *sums, size_t i)
{
    const double *v = sums + i * COUNTER_SUMS;
    if (v[2] <= 0.0)
        return v[1] <= 0.0 && v[0] == 0.0 ? 0.0 : NAN; /* no interval at all counts as 0 */
    if (v[1] <= v[2])
        return v[0];
    return v[0] * (v[1] / v[2]);
}

bool counters_have_role(const struct prof_counters *c, enum pmu_role role)
{
    for (size_t i = 0; c && i < c->n; i++)
        if (c->ev[i].role == role)
            return true;
    return false;
}

/* Sum of the scaled counts of every counter with this role; NaN when none. */
static double role_sum(const struct prof_counters *c, const double *sums, enum pmu_role role)
{
    double total = NAN;
    for (size_t i = 0; i < c->n; i++) {
        if (c->ev[i].role != role)
            continue;
        double v = counter_scaled(sums, i);
        if (isnan(v))
            continue;
        total = isnan(total) ? v : total + v;
    }
    return total;
}

void counter_metrics_compute(const struct prof_counters *c, const double *sums, double seconds,
                             struct counter_metrics *m)
{
    m->cycles = role_sum(c, sums, PMU_ROLE_CYCLES);
    m->instructions = role_sum(c, sums, PMU_ROLE_INSTRUCTIONS);
    m->llc_misses = role_sum(c, sums, PMU_ROLE_LLC_MISSES);
    m->llc_refs = role_sum(c, sums, PMU_ROLE_LLC_REFS);
    m->cpi = metric_cpi(m->cycles, m->instructions);
    m->ipc = metric_ipc(m->cycles, m->instructions);
    m->llc_miss_ratio = metric_ratio(m->llc_misses, m->llc_refs);
    m->llc_mpki = metric_ratio(m->llc_misses * 1000.0, m->instructions);
    /* Samples taken on an event (record -c) are no time: a counted
     * task-clock, when there is one, says how long the row ran. */
    if (!(seconds > 0)) {
        double task_ns = role_sum(c, sums, PMU_ROLE_TASK_CLOCK);
        seconds = isnan(task_ns) ? 0.0 : task_ns / 1e9;
    }
    m->bandwidth_est = metric_llc_estimate_bytes_per_s(m->llc_misses, seconds);
}
