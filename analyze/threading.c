/*
 * analyze/threading.c — threads and OpenMP: how many threads were really
 * active, was the machine oversubscribed, and which operator's parallel
 * regions it was.
 *
 * Inputs (read from the streams by threading_load.c): SCHED_TICK records (the
 * OS-level view: per-thread run and runqueue-wait time from schedstat, any
 * runtime, no OMPT needed), OMP_TICK / OMP_REGION / OMP_CONTEXT records (the
 * OMPT view) and each sample's parallel region.
 *
 * threading_attribute() charges OpenMP worker samples to the calling context
 * of the thread that opened their region (HPCToolkit's approach with OMPT):
 * worker frames from the leaf down to the runtime, then the opener's stack
 * from the caller of the runtime's fork entry (GOMP_parallel, __kmpc_fork_call)
 * to the root, Python frames included. It runs once per profile, in
 * profile_prepare right after loading, so every report and export of a
 * result sees the same grafted stacks.
 *
 * threading_analyze() is a pure function of the profile: a 10 ms timeline
 * (active OpenMP threads, runnable threads summed over all processes, usable
 * CPUs), the summary figures of the report's Threading section, and findings.
 * Which operator each region sample belongs to is threading_ops.c.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/profile_internal.h"

#define RUNTIME_WAIT_FINDING 0.25 /* runtime wait share of samples that gets a finding */
#define OVERSUB_RATIO 1.2      /* runnable / usable CPUs above this: oversubscribed bucket */
#define NEAR_NS 50000000ull    /* approximate attribution window */

static bool stack_has_python(const struct profile *p, const struct prof_stack *st)
{
    for (uint32_t i = 0; i < st->nframes; i++)
        if (p->frames[st->frames[i]].kind == FRAME_PYTHON)
            return true;
    return false;
}

/* ---- attribution --------------------------------------------------------- */

struct key_idx {
    uint64_t key;
    uint64_t time;
    uint32_t idx;
};

static int cmp_key_time(const void *a, const void *b)
{
    const struct key_idx *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->time < y->time ? -1 : x->time > y->time;
}

/* First entry with (key, time >= t) in a sorted array; n when none. */
static size_t lower_bound(const struct key_idx *a, size_t n, uint64_t key, uint64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a[mid].key < key || (a[mid].key == key && a[mid].time < t))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Nearest entry of key to time t (within window ns); pred filters. */
static long nearest(const struct key_idx *a, size_t n, uint64_t key, uint64_t t, uint64_t window,
                    bool (*pred)(uint32_t idx, const void *arg), const void *arg, int max_scan)
{
    size_t at = lower_bound(a, n, key, t);
    long best = -1;
    uint64_t best_d = window + 1;
    for (size_t i = at, k = 0; i < n && a[i].key == key && k < (size_t)max_scan; i++, k++) {
        uint64_t d = a[i].time - t;
        if (d > best_d)
            break;
        if (!pred || pred(a[i].idx, arg)) {
            best = (long)a[i].idx, best_d = d;
            break;
        }
    }
    for (size_t i = at, k = 0; i-- > 0 && a[i].key == key && k < (size_t)max_scan; k++) {
        uint64_t d = t - a[i].time;
        if (d >= best_d)
            break;
        if (!pred || pred(a[i].idx, arg)) {
            best = (long)a[i].idx, best_d = d;
            break;
        }
    }
    return best_d <= window ? best : -1;
}

struct in_region {
    const struct profile *p;
    uint32_t region; /* index + 1 */
};

static bool sample_in_region(uint32_t idx, const void *arg)
{
    const struct in_region *r = arg;
    return r->p->samples[idx].omp_region == r->region;
}

/* Worker part + opener context -> a new stack. */
static uint32_t graft(struct profile *p, uint32_t worker, uint32_t context, uint32_t **buf, size_t *cap)
{
    const struct prof_stack *ws = &p->stacks[worker], *cs = &p->stacks[context];
    size_t j = 0;
    if (ws->nframes && threading_is_runtime_or_agent(&p->frames[ws->frames[0]]))
        j = 1; /* spinning in the runtime: keep the leaf */
    else if (ws->nframes > 1 && threading_is_spin_name(p->frames[ws->frames[0]].name) &&
             threading_is_runtime_or_agent(&p->frames[ws->frames[1]]))
        j = 2; /* a call the runtime makes (sched_yield in its wait loop): keep the call
                * and the runtime frame that made it, which says it is runtime waiting;
                * cut at the call alone, LLVM libomp workers' waits (~40 % of region
                * samples at OMP_NUM_THREADS=8 on 2 CPUs) were named "sched_yield"
                * and not counted as runtime spin */
    else
        while (j < ws->nframes && !threading_is_runtime_or_agent(&p->frames[ws->frames[j]]))
            j++;
    /* Caller of the runtime's fork entry: after the rootmost runtime frame. */
    size_t k = 0;
    for (size_t i = 0; i < cs->nframes; i++)
        if (threading_is_runtime_or_agent(&p->frames[cs->frames[i]]))
            k = i + 1;
    size_t n = j + (cs->nframes - k);
    if (profile_grow_to(buf, cap, n + 1, sizeof **buf) != 0)
        return UINT32_MAX;
    memcpy(*buf, ws->frames, j * sizeof **buf);
    memcpy(*buf + j, cs->frames + k, (cs->nframes - k) * sizeof **buf);
    return profile_add_stack(p, *buf, (uint32_t)n);
}

static uint64_t pid_tid_key(uint32_t pid, uint32_t tid) { return ((uint64_t)pid << 32) | tid; }

size_t threading_attribute(struct profile *p)
{
    struct prof_threading *t = p->threading;
    if (!t || t->nregions == 0 || p->nsamples == 0)
        return 0;
    /* Samples per (pid, tid) by time; contexts per (pid, tid) by time, per
     * (pid, region) for the exact match, and per (pid, tid) by region id for
     * a region that repeats its opener's previous context. */
    struct key_idx *by_thread = malloc(p->nsamples * sizeof *by_thread);
    struct key_idx *ctx_thread = malloc((t->ncontexts + 1) * sizeof *ctx_thread);
    struct key_idx *ctx_region = malloc((t->ncontexts + 1) * sizeof *ctx_region);
    struct key_idx *ctx_opener = malloc((t->ncontexts + 1) * sizeof *ctx_opener);
    if (!by_thread || !ctx_thread || !ctx_region || !ctx_opener) {
        free(by_thread), free(ctx_thread), free(ctx_region), free(ctx_opener);
        errno = ENOMEM; /* nothing charged: profile_prepare fails the load */
        return 0;
    }
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct prof_thread *th = &p->threads[p->samples[i].thread];
        by_thread[i] = (struct key_idx){pid_tid_key(th->pid, th->tid), p->samples[i].time_ns, (uint32_t)i};
    }
    qsort(by_thread, p->nsamples, sizeof *by_thread, cmp_key_time);
    for (size_t i = 0; i < t->ncontexts; i++) {
        const struct prof_omp_context *c = &t->contexts[i];
        ctx_thread[i] = (struct key_idx){pid_tid_key(c->pid, c->tid), c->time_ns, (uint32_t)i};
        ctx_region[i] = (struct key_idx){c->region_id ^ ((uint64_t)c->pid << 40), 0, (uint32_t)i};
        ctx_opener[i] = (struct key_idx){pid_tid_key(c->pid, c->tid), c->region_id, (uint32_t)i};
    }
    qsort(ctx_thread, t->ncontexts, sizeof *ctx_thread, cmp_key_time);
    qsort(ctx_region, t->ncontexts, sizeof *ctx_region, cmp_key_time);
    qsort(ctx_opener, t->ncontexts, sizeof *ctx_opener, cmp_key_time);

    uint32_t *buf = NULL;
    size_t cap = 0, charged = 0;
    t->attributed_exact = t->attributed_near = t->unattributed = t->unrecorded = 0;
    for (size_t i = 0; i < p->nsamples; i++) {
        struct prof_sample *s = &p->samples[i];
        if (!s->omp_region || s->omp_region > t->nregions)
            continue;
        const struct prof_omp_region *r = &t->regions[s->omp_region - 1];
        const struct prof_thread *th = &p->threads[s->thread];
        if (r->opener_tid == 0) { /* a placeholder: which thread opened it, and so which samples need its
                                   * context, is not known; counted, so that the report says so */
            t->unrecorded++;
            continue;
        }
        if (th->tid == r->opener_tid || stack_has_python(p, &p->stacks[s->stack]))
            continue;
        uint64_t okey = pid_tid_key(r->pid, r->opener_tid);
        struct in_region ir = {p, s->omp_region};
        long ctx_stack = -1;
        bool exact = true;
        long os = nearest(by_thread, p->nsamples, okey, s->time_ns, UINT64_MAX / 2, sample_in_region, &ir, 256);
        if (os >= 0) {
            ctx_stack = p->samples[os].stack;
        } else {
            size_t at = lower_bound(ctx_region, t->ncontexts, r->id ^ ((uint64_t)r->pid << 40), 0);
            if (at < t->ncontexts && ctx_region[at].key == (r->id ^ ((uint64_t)r->pid << 40))) {
                ctx_stack = t->contexts[ctx_region[at].idx].stack;
            } else if (r->flags & OPR_OMP_REGION_CONTEXT_REPEATED) {
                /* the opener's own latest context before this region: ids
                 * count up in the order its regions began (times converted
                 * from the TSC at two drains could cross on short regions) */
                at = lower_bound(ctx_opener, t->ncontexts, okey, r->id);
                if (at > 0 && ctx_opener[at - 1].key == okey)
                    ctx_stack = t->contexts[ctx_opener[at - 1].idx].stack;
            }
        }
        if (ctx_stack < 0) {
            exact = false;
            long ns = nearest(by_thread, p->nsamples, okey, s->time_ns, NEAR_NS, NULL, NULL, 1);
            long nc = nearest(ctx_thread, t->ncontexts, okey, s->time_ns, NEAR_NS, NULL, NULL, 1);
            uint64_t ds = ns >= 0 ? (uint64_t)llabs((long long)(p->samples[ns].time_ns - s->time_ns)) : UINT64_MAX;
            uint64_t dc = nc >= 0 ? (uint64_t)llabs((long long)(t->contexts[nc].time_ns - s->time_ns)) : UINT64_MAX;
            if (nc >= 0 && dc <= ds)
                ctx_stack = t->contexts[nc].stack;
            else if (ns >= 0)
                ctx_stack = p->samples[ns].stack;
        }
        if (ctx_stack < 0) {
            t->unattributed++;
            continue;
        }
        uint32_t grafted = graft(p, s->stack, (uint32_t)ctx_stack, &buf, &cap);
        if (grafted == UINT32_MAX) { /* profile_prepare fails the load: what was charged does not matter */
            charged = 0;
            errno = ENOMEM;
            break;
        }
        s->stack = grafted;
        if (exact)
            t->attributed_exact++;
        else
            t->attributed_near++;
        charged++;
    }
    free(buf);
    free(by_thread);
    free(ctx_thread);
    free(ctx_region);
    free(ctx_opener);
    return charged;
}

/* ---- the timeline ------------------------------------------------------- */

/* Adds amount (thread-ns) spread evenly over [from, to) to field of the
 * buckets, as average threads per bucket. */
static void spread(struct threading_bucket *b, size_t nb, uint64_t t0, uint64_t bns, uint64_t from, uint64_t to,
                   double amount, size_t field_off)
{
    if (to <= from || amount <= 0)
        return;
    if (from < t0)
        from = t0;
    if (to <= from)
        return;
    double rate = amount / (double)(to - from); /* threads */
    for (uint64_t x = from; x < to;) {
        size_t i = (size_t)((x - t0) / bns);
        if (i >= nb)
            break;
        uint64_t end = t0 + (uint64_t)(i + 1) * bns;
        if (end > to)
            end = to;
        double *f = (double *)((char *)&b[i] + field_off);
        *f += rate * (double)(end - x) / (double)bns;
        x = end;
    }
}

/* A thread's cumulative run and wait time at its last tick. */
struct last_val {
    uint64_t run, wait;
};

/* The row of thread key in vals (index map: key -> row, rows added in
 * order); *fresh when the key is new. NULL with errno ENOMEM. */
static struct last_val *last_for(struct hashmap *index, struct last_val *vals, uint64_t key, bool *fresh)
{
    uint64_t row = hashmap_count(index);
    int rc = hashmap_find_or_add_u64(index, key, row, &row);
    if (rc < 0)
        return NULL;
    *fresh = rc == 0;
    if (*fresh)
        vals[row] = (struct last_val){0, 0};
    return &vals[row];
}

static void add_finding(struct threading_summary *s, const char *text)
{
    if (s->nfindings < sizeof s->findings / sizeof s->findings[0])
        snprintf(s->findings[s->nfindings++], sizeof s->findings[0], "%s", text);
}

static void describe_view(const struct profile *p, struct threading_summary *s)
{
    const struct prof_threading *t = p->threading;
    char rt[200] = "";
    if (t->saw_libomp || t->saw_libgomp || t->saw_libiomp)
        snprintf(rt, sizeof rt, " (runtimes loaded: %s%s%s)", t->saw_libomp ? "LLVM libomp " : "",
                 t->saw_libiomp ? "Intel libiomp5 " : "", t->saw_libgomp ? "GNU libgomp" : "");
    char swap[600] = "";
    if (t->openmp_runtime && strcmp(t->openmp_runtime, "keep") == 0)
        snprintf(swap, sizeof swap, "; the workload's own runtime (record's default: nothing swapped)");
    else if (t->openmp_libomp)
        snprintf(swap, sizeof swap, "; record preloaded %s in place of GNU libgomp", t->openmp_libomp);
    else if (t->openmp_setup && strncmp(t->openmp_setup, "none-needed", 11) == 0)
        snprintf(swap, sizeof swap, "; record left the runtime alone (the command does not link GNU libgomp)");
    else if (t->openmp_runtime)
        snprintf(swap, sizeof swap, "; no LLVM libomp found at record time (set OPPROF_LIBOMP)");
    if (s->has_ompt)
        snprintf(s->view, sizeof s->view, "%s (%s) + OS schedstat%s%s",
                 t->runtime_version && strncmp(t->runtime_version, "GNU libgomp", 11) == 0 ? "OpenMP regions" : "OMPT",
                 t->runtime_version ? t->runtime_version : "?",
                 rt, swap);
    else if (t->openmp_regions_off)
        snprintf(s->view, sizeof s->view,
                 "OS-level only (schedstat; OpenMP regions not recorded: record --no-openmp-regions)%s%s", rt, swap);
    else
        snprintf(s->view, sizeof s->view,
                 "OS-level only (schedstat; no OpenMP runtime started the OMPT tool: GNU libgomp has no OMPT, "
                 "or no OpenMP at all)%s%s",
                 rt, swap);
}

/* Step 1: the time range the ticks cover, and the usable CPUs (the
 * smallest of online, affinity and the cgroup limit, each at its largest). */
static void time_range(const struct prof_threading *t, struct threading_summary *s, uint64_t *t0_out,
                       uint64_t *t1_out)
{
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (size_t i = 0; i < t->nsched_ticks; i++) {
        const struct prof_sched_tick *k = &t->sched_ticks[i];
        t0 = k->time_ns < t0 ? k->time_ns : t0;
        t1 = k->time_ns > t1 ? k->time_ns : t1;
        if (k->online > s->online)
            s->online = k->online;
        if (k->affinity > s->affinity)
            s->affinity = k->affinity;
        double lim = k->limit_milli / 1000.0;
        if (lim > 0 && (s->cgroup_limit == 0 || lim > s->cgroup_limit))
            s->cgroup_limit = lim;
    }
    for (size_t i = 0; i < t->nomp_ticks; i++) {
        const struct opr_omp_tick *k = &t->omp_ticks[i].t;
        uint64_t from = k->time_ns - k->interval_ns;
        t0 = from < t0 ? from : t0;
        t1 = k->time_ns > t1 ? k->time_ns : t1;
    }
    s->usable_cpus = s->online;
    if (s->affinity && s->affinity < s->usable_cpus)
        s->usable_cpus = s->affinity;
    if (s->cgroup_limit > 0 && s->cgroup_limit < s->usable_cpus)
        s->usable_cpus = s->cgroup_limit;
    *t0_out = t0, *t1_out = t1;
}

/* Step 2, the OS view: runnable = (delta run + delta wait) / period, per
 * thread, spread over the buckets; run and wait totals, processes that
 * matter, involuntary switches. 0, or -1 on out of memory. */
static int os_view(const struct prof_threading *t, struct threading_summary *s, struct threading_bucket *b, size_t nb,
                   uint64_t t0, uint64_t bns)
{
    /* One row per distinct thread: at most one per sched_threads entry. */
    struct hashmap index;
    hashmap_init_u64(&index);
    struct last_val *last = calloc(t->nsched_threads + 1, sizeof *last);
    uint32_t *pids = calloc(t->nsched_ticks + 1, sizeof *pids);
    uint64_t *prev_time = calloc(t->nsched_ticks + 1, sizeof *prev_time);
    uint64_t *first_time = calloc(t->nsched_ticks + 1, sizeof *first_time); /* a process's first tick */
    double *pid_load = calloc(t->nsched_ticks + 1, sizeof *pid_load); /* run + wait per process */
    size_t npids = 0;
    if (!last || !pids || !prev_time || !first_time || !pid_load) {
        free(last), free(pids), free(prev_time), free(first_time), free(pid_load);
        errno = ENOMEM;
        return -1;
    }
    double run = 0, wait = 0;
    for (size_t i = 0; i < t->nsched_ticks; i++) {
        const struct prof_sched_tick *k = &t->sched_ticks[i];
        size_t pi = 0;
        while (pi < npids && pids[pi] != k->pid)
            pi++;
        if (pi == npids) {
            pids[npids++] = k->pid;
            first_time[pi] = k->time_ns;
        }
        uint64_t from = prev_time[pi];
        for (size_t j = 0; j < k->n; j++) {
            const struct prof_sched_thread *e = &t->sched_threads[k->first + j];
            bool fresh;
            struct last_val *lv = last_for(&index, last, pid_tid_key(k->pid, e->tid), &fresh);
            if (!lv)
                goto nomem;
            if (fresh)
                s->nthreads++;
            uint64_t dr = 0, dw = 0;
            if (!fresh || from) { /* a thread new since the last tick: from 0 */
                dr = e->run_ns >= lv->run ? e->run_ns - lv->run : 0;
                dw = e->wait_ns >= lv->wait ? e->wait_ns - lv->wait : 0;
            }
            lv->run = e->run_ns, lv->wait = e->wait_ns;
            if (from) {
                run += (double)dr, wait += (double)dw;
                pid_load[pi] += (double)(dr + dw);
                /* The kernel adds a runqueue wait to schedstat only when it
                 * ends (at the switch-in), so on a loaded machine one period
                 * can report waits that began periods earlier (4.33
                 * runnable over 1 thread when spread over this period
                 * alone). A thread is runnable at most all the time: what
                 * exceeds the period is spread back over the time just
                 * before it, where that wait happened. */
                uint64_t amount = dr + dw, span = k->time_ns - from;
                uint64_t start = amount > span ? (k->time_ns - t0 > amount ? k->time_ns - amount : t0) : from;
                spread(b, nb, t0, bns, start, k->time_ns, (double)amount,
                       offsetof(struct threading_bucket, runnable));
            }
        }
        prev_time[pi] = k->time_ns;
    }
    /* Processes that matter: 10 % of all runnable thread time, or busy over
     * their own lifetime (half a runnable thread on average between their
     * first and last tick) with 2 % of it. A shell or launcher that only
     * waits does not count; a worker that finished early does: beside two
     * busy loops one of two libgomp processes was done in 0.6 s while the
     * other ran 6.3 s, it held 9 % of the runnable time, and the thread view
     * said 1 process. */
    for (size_t i = 0; i < npids; i++) {
        double life = (double)(prev_time[i] - first_time[i]);
        bool busy = life > 0 && pid_load[i] >= 0.5 * life && pid_load[i] >= 0.02 * (run + wait);
        if (run + wait > 0 && (pid_load[i] >= 0.1 * (run + wait) || busy))
            s->nprocesses++;
    }
    /* Involuntary switches and switches in: the last value per thread. */
    hashmap_clear(&index);
    for (size_t i = t->nsched_ticks; i-- > 0;) {
        const struct prof_sched_tick *k = &t->sched_ticks[i];
        for (size_t j = 0; j < k->n; j++) {
            bool fresh;
            const struct prof_sched_thread *e = &t->sched_threads[k->first + j];
            if (!last_for(&index, last, pid_tid_key(k->pid, e->tid), &fresh))
                goto nomem;
            if (fresh) {
                s->nivcsw += e->nivcsw;
                s->switches_in += e->timeslices;
            }
        }
    }
    free(last), free(pids), free(prev_time), free(first_time), free(pid_load);
    hashmap_free(&index);
    /* Where spread-back waits overlap a thread's earlier periods, a bucket
     * could still count a thread more than once: no more runnable threads
     * than threads sampled. */
    for (size_t i = 0; i < nb; i++)
        if (s->nthreads && b[i].runnable > (double)s->nthreads)
            b[i].runnable = (double)s->nthreads;
    s->run_s = run / 1e9, s->wait_s = wait / 1e9;
    s->wait_share = run + wait > 0 ? wait / (run + wait) : 0;
    return 0;
nomem:
    free(last), free(pids), free(prev_time), free(first_time), free(pid_load);
    hashmap_free(&index);
    errno = ENOMEM;
    return -1;
}

/* Step 3, the OMPT view: threads in region bodies over the buckets, region
 * counts and sizes, imbalance. */
static void ompt_view(const struct prof_threading *t, struct threading_summary *s, struct threading_bucket *b,
                      size_t nb, uint64_t t0, uint64_t bns)
{
    double work = 0, team = 0, region_ns = 0;
    for (size_t i = 0; i < t->nomp_ticks; i++) {
        const struct opr_omp_tick *k = &t->omp_ticks[i].t;
        spread(b, nb, t0, bns, k->time_ns - k->interval_ns, k->time_ns, (double)k->work_ns,
               offsetof(struct threading_bucket, active_omp));
        work += (double)k->work_ns, team += (double)k->team_ns, region_ns += (double)k->region_ns;
        s->regions += k->regions_ended;
        s->omp_events_lost += k->events_lost;
        s->contexts_repeated += k->contexts_repeated; /* no OMP_CONTEXT of their own: see below */
        s->nested += k->nested;
        if (k->max_team > s->max_team)
            s->max_team = k->max_team;
        if (k->max_requested > s->max_requested)
            s->max_requested = k->max_requested;
    }
    s->region_avg_us = s->regions ? region_ns / (double)s->regions / 1e3 : 0;
    s->imbalance = team > 0 ? 1.0 - work / team : 0;
    if (s->imbalance < 0)
        s->imbalance = 0;
}

/* Step 4: statistics over the buckets where something ran. */
static void bucket_stats(struct threading_summary *s, const struct threading_bucket *b, size_t nb, uint64_t span_ns)
{
    size_t busy = 0, active_n = 0, over = 0;
    double rsum = 0, asum = 0;
    for (size_t i = 0; i < nb; i++) {
        if (b[i].runnable >= 0.5) {
            busy++;
            rsum += b[i].runnable;
            if (b[i].runnable > s->runnable_max)
                s->runnable_max = b[i].runnable;
            if (s->usable_cpus > 0 && b[i].runnable > s->usable_cpus * OVERSUB_RATIO)
                over++;
        }
        if (b[i].active_omp >= 0.05) {
            active_n++;
            asum += b[i].active_omp;
            if (b[i].active_omp > s->active_max)
                s->active_max = b[i].active_omp;
        }
    }
    s->runnable_avg = busy ? rsum / (double)busy : 0;
    s->active_avg = active_n ? asum / (double)active_n : 0;
    s->oversub_avg = s->usable_cpus > 0 ? s->runnable_avg / s->usable_cpus : 0;
    s->oversub_max = s->usable_cpus > 0 ? s->runnable_max / s->usable_cpus : 0;
    s->oversub_time_share = busy ? (double)over / (double)busy : 0;
    double span_s = (double)span_ns / 1e9;
    s->regions_per_s = span_s > 0 ? (double)s->regions / span_s : 0;
}

/* Large OpenMP runtime wait (team threads outside region bodies): which kind
 * and where, so the fix can be chosen. Only with region data, where the
 * share is measured rather than guessed from symbol names. */
static void runtime_wait_finding(struct threading_summary *s)
{
    if (!s->has_ompt || s->spin_share < RUNTIME_WAIT_FINDING || s->oversubscribed)
        return; /* oversubscription has its own finding and fix */
    char where[400] = "";
    if (s->nops && snprintf(where, sizeof where, " Regions mostly from %s%s%s.", s->ops[0].name,
                            s->ops[0].python[0] ? " called from " : "", s->ops[0].python) < 0)
        where[0] = '\0';
    const char *why;
    char contended[400];
    if (s->external_contention) {
        /* Not the program's work split: beside two busy loops a libgomp team
         * of 2 on 2 CPUs showed 98 % runtime wait and "imbalance 98 %" while
         * its threads waited for a CPU 52 % of the time. */
        snprintf(contended, sizeof contended,
                 "team threads waited for a CPU %.1f%% of the time although the workload does not outnumber "
                 "the CPUs: other processes take them, and a region ends only when its last thread has run. Fix: "
                 "run where the CPUs are free, or use fewer threads (OMP_NUM_THREADS) than the CPUs left free; "
                 "OMP_WAIT_POLICY=passive gives a waiting thread's CPU back.",
                 100 * s->wait_share);
        why = contended;
    } else if (s->regions_per_s > 1000 && s->region_avg_us < 50)
        why = "regions are short (grains too small): fork/join and barriers cost as much as the work. Fix: "
              "give each region more work (fewer, larger parallel loops), or fewer threads for small inputs.";
    else if (s->imbalance > 0.3)
        why = "the team waits at the closing barrier (imbalance: team time in regions not in bodies). Fix: "
              "even out the work per thread (schedule(dynamic) or smaller chunks).";
    else
        why = "threads spin between regions while the opener runs serial code. Fix: OMP_WAIT_POLICY=passive "
              "(or GOMP_SPINCOUNT / KMP_BLOCKTIME lower) to free the CPUs, or parallelize the serial part.";
    char text[768];
    snprintf(text, sizeof text, "OpenMP runtime wait: %.1f%% of samples were in the runtime (team threads outside region bodies) "
                                "(imbalance %.0f%%, %.0f regions/s of %.0f us): %s%s",
             100 * s->spin_share, 100 * s->imbalance, s->regions_per_s, s->region_avg_us, why, where);
    add_finding(s, text);
}

/* Step 6: the findings (oversubscription, nested parallelism, runtime wait),
 * each quoting the figures it rests on. */
static void threading_findings(struct threading_summary *s)
{
    char text[768];
    bool by_runnable = s->has_sched && s->usable_cpus > 0 && s->oversub_avg > 1.25 && s->wait_share > 0.15 &&
                       s->oversub_time_share > 0.2;
    /* OpenMP teams larger than the CPUs the process may use oversubscribe by
     * construction. Counting runnable threads alone missed it where the
     * runtime waits passively: PyTorch with GNU libgomp's 8-thread teams on 2
     * CPUs beside two busy loops averaged x1.15 runnable while its threads
     * waited for a CPU 66 % of the time. */
    bool by_team = s->has_ompt && s->usable_cpus > 0 && s->max_team > 1.25 * s->usable_cpus && s->wait_share > 0.15;
    s->oversubscribed = by_runnable || by_team;
    s->multi_process_oversub = by_runnable && s->nprocesses > 1;
    if (s->oversubscribed) {
        char who[400] = "";
        uint64_t who_samples = s->nops ? (s->ops[0].oversub_samples ? s->ops[0].oversub_samples : s->ops[0].samples) : 0;
        if (s->nops && (s->ops[0].oversub_samples || by_team)) {
            /* A long operator name or Python location is cut, not overflowed. */
            int n = snprintf(who, sizeof who, " Most oversubscribed parallel regions: %s%s%s (%llu samples).",
                             s->ops[0].name, s->ops[0].python[0] ? " called from " : "", s->ops[0].python,
                             (unsigned long long)who_samples);
            if (n < 0)
                who[0] = '\0';
        }
        unsigned u = (unsigned)(s->usable_cpus + 0.5);
        if (u == 0)
            u = 1;
        unsigned each = s->nprocesses ? u / s->nprocesses : u;
        if (s->multi_process_oversub)
            snprintf(text, sizeof text,
                     "Oversubscription across %u processes: together %.1f runnable threads on %.3g usable CPUs "
                     "(x%.2f) in %.0f%% of the busy time; threads waited for a CPU %.1f%% of the time.%s Fix: "
                     "share the %u CPUs: OMP_NUM_THREADS=%u in each process (torch.set_num_threads(%u) per "
                     "worker), or run fewer worker processes.",
                     s->nprocesses, s->runnable_avg, s->usable_cpus, s->oversub_avg, 100 * s->oversub_time_share,
                     100 * s->wait_share, who, u, each ? each : 1, each ? each : 1);
        else if (!by_runnable)
            snprintf(text, sizeof text,
                     "Oversubscription: OpenMP teams of %u threads on %.3g usable CPUs; threads waited for a CPU "
                     "%.1f%% of the time (%.1f runnable on average).%s Fix: OMP_NUM_THREADS=%u (or "
                     "torch.set_num_threads(%u)); with several worker processes, divide the CPUs among them.",
                     s->max_team, s->usable_cpus, 100 * s->wait_share, s->runnable_avg, who, u, u);
        else
            snprintf(text, sizeof text,
                     "Oversubscription: %.1f runnable threads on %.3g usable CPUs (x%.2f) in %.0f%% of the busy "
                     "time; threads waited for a CPU %.1f%% of the time.%s Fix: OMP_NUM_THREADS=%u (or "
                     "torch.set_num_threads(%u)); with several worker processes, divide the CPUs among them.",
                     s->runnable_avg, s->usable_cpus, s->oversub_avg, 100 * s->oversub_time_share,
                     100 * s->wait_share, who, u, u);
        add_finding(s, text);
    }
    /* Waiting without oversubscribing: the CPUs were busy with other work. */
    s->external_contention = !s->oversubscribed && s->wait_share > 0.15 && s->oversub_avg <= 1.25;
    runtime_wait_finding(s);
    if (s->nested > 0) {
        snprintf(text, sizeof text,
                 "Nested parallelism: %llu parallel regions were opened inside another region; each multiplies "
                 "the thread count. Fix: OMP_MAX_ACTIVE_LEVELS=1, or OMP_NUM_THREADS=\"%u,1\".",
                 (unsigned long long)s->nested, s->usable_cpus > 0 ? (unsigned)(s->usable_cpus + 0.5) : 1);
        add_finding(s, text);
    }
}

int threading_analyze(const struct profile *p, struct threading_summary *s)
{
    memset(s, 0, sizeof *s);
    const struct prof_threading *t = p->threading;
    s->total_samples = p->sample_count;
    s->attached = p->attached;
    if (!t)
        return 0;
    s->has_sched = t->nsched_ticks > 0;
    s->has_ompt = t->ompt_processes > 0;
    describe_view(p, s);
    uint64_t t0, t1;
    time_range(t, s, &t0, &t1);
    if (t1 <= t0) /* no ticks: no timeline, sample figures only */
        t0 = t1 = 0;
    uint64_t bns = THREADING_BUCKET_NS;
    while ((t1 - t0) / bns > 400000)
        bns *= 2;
    size_t nb = t1 > t0 ? (size_t)((t1 - t0) / bns) + 1 : 0;
    struct threading_bucket *b = calloc(nb + 1, sizeof *b);
    if (!b)
        return -1;
    for (size_t i = 0; i < nb; i++) {
        b[i].t_ns = t0 + i * bns;
        b[i].cpus = s->usable_cpus;
    }
    s->timeline = b, s->nbuckets = nb, s->bucket_ns = bns;
    if (os_view(t, s, b, nb, t0, bns) != 0)
        return -1;
    ompt_view(t, s, b, nb, t0, bns);
    bucket_stats(s, b, nb, t1 - t0);

    /* Step 5, samples: in regions, spinning in the runtime, per operator (threading_ops.c). */
    if (threading_samples_by_op(p, s, b, nb, t0, bns, s->usable_cpus > 0 ? s->usable_cpus * OVERSUB_RATIO : 0) != 0)
        return -1;
    uint64_t all = p->total_weight ? p->total_weight : 1;
    s->spin_share = (double)s->spin_samples / (double)all;
    s->attributed_exact = t->attributed_exact;
    s->attributed_near = t->attributed_near;
    s->unattributed = t->unattributed;
    s->unrecorded = t->unrecorded;
    /* Regions that repeated their opener's context: counted by the ticks
     * (ompt_view); older agents wrote each as an OMP_CONTEXT with flag
     * REPEATED, counted in ncontexts and t->contexts_repeated instead. */
    s->contexts = t->ncontexts + s->contexts_repeated;
    s->contexts_repeated += t->contexts_repeated;
    threading_findings(s);
    return 0;
}

void threading_summary_free(struct threading_summary *s)
{
    free(s->timeline);
    s->timeline = NULL;
    s->nbuckets = 0;
}
