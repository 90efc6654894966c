/*
 * report/export_chrome.c — Chrome Trace Event format (chrome://tracing,
 * Perfetto UI, ui.perfetto.dev's legacy JSON importer): what ran when.
 *
 * Per thread, the call stack over time as nested slices (one per function
 * and run of samples that keep it in place), Python frames and native ones
 * alike, process-entry frames dropped as in every export. A sample stands
 * for the timer period of CPU time that ended at its timestamp, so a slice
 * starts one period before its first sample; a gap longer than the samples'
 * own periods plus one means the thread was off CPU, and ends every slice.
 * Every event has a category (trace-model requires one). Processes and
 * threads get names ("M"
 * events), and each process a counter track ("C") of its active threads
 * (threads with at least one sample in each 10 ms bucket) next to the number of
 * online CPUs: a thread count above the CPU count is oversubscription.
 *
 * Several profiles (result dirs) go into one trace: they were recorded with
 * CLOCK_MONOTONIC on one machine, so one origin (the earliest start) keeps them
 * aligned. Each process is a lane (pid); a pid seen in two dirs gets a lane
 * number of its own so the runs do not mix.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "report/export_internal.h"
#include "report/report.h"

#define BUCKET_NS 10000000ull /* 10 ms, the active-threads resolution */

/* Lane pid of (profile, real pid): the real pid unless an earlier profile
 * used it already. */
struct lane {
    uint32_t pid;   /* real */
    uint32_t lane;  /* in the trace */
    size_t profile;
};

struct lanes {
    struct lane *v;
    size_t n, cap;
};

static long lane_of(struct lanes *l, size_t profile, uint32_t pid)
{
    bool taken = false;
    uint32_t max_lane = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].profile == profile && l->v[i].pid == pid)
            return (long)l->v[i].lane;
        taken = taken || l->v[i].lane == pid;
        if (l->v[i].lane > max_lane)
            max_lane = l->v[i].lane;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct lane *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    uint32_t lane = pid;
    if (taken)
        lane = max_lane < 4000000000u ? (max_lane > 10000000u ? max_lane + 1 : 10000000u + pid) : pid;
    l->v[l->n++] = (struct lane){pid, lane, profile};
    return (long)lane;
}

static const char *process_label(const struct profile *p, uint32_t pid)
{
    for (size_t i = 0; i < p->nprocesses; i++)
        if (p->processes[i].pid == pid && p->processes[i].exe)
            return export_base_name(p->processes[i].exe);
    for (size_t i = 0; i < p->nthreads; i++)
        if (p->threads[i].pid == pid && p->threads[i].tid == pid && p->threads[i].name[0])
            return p->threads[i].name;
    return "process";
}

/* One profile's samples grouped by thread: thread t's samples, in time
 * order, are samples[order[start[t]]] .. samples[order[start[t + 1] - 1]],
 * drawn in lane tlane[t]. */
struct thread_samples {
    const struct profile *p;
    size_t *start;
    size_t *order;
    long *tlane;
};

/* Names: one process_name (and sort index) per new lane, one thread_name per
 * thread; fills ts->tlane. 0, or -1 on out of memory. */
static int write_names(FILE *out, const struct thread_samples *ts, size_t pi, size_t nprofiles, struct lanes *lanes,
                       bool *first)
{
    const struct profile *p = ts->p;
    for (size_t t = 0; t < p->nthreads; t++) {
        const struct prof_thread *th = &p->threads[t];
        bool new_lane = true;
        for (size_t i = 0; i < lanes->n; i++)
            if (lanes->v[i].profile == pi && lanes->v[i].pid == th->pid)
                new_lane = false;
        ts->tlane[t] = lane_of(lanes, pi, th->pid);
        if (ts->tlane[t] < 0)
            return -1;
        if (new_lane) {
            char label[512];
            /* ranks: a rank's lane is named and ordered by its rank */
            int32_t rank = ranks_rank_of_pid(p, th->pid);
            char rank_label[32] = "";
            if (rank != OPR_RANK_UNSET)
                snprintf(rank_label, sizeof rank_label, "rank %d: ", (int)rank);
            /* The viewers show the pid next to the name already. */
            snprintf(label, sizeof label, "%s%s%s%s", rank_label, process_label(p, th->pid),
                     nprofiles > 1 ? " " : "", nprofiles > 1 && p->dir ? export_base_name(p->dir) : "");
            fprintf(out,
                    "%s{\"ph\":\"M\",\"cat\":\"__metadata\",\"name\":\"process_name\",\"pid\":%ld,\"tid\":0,"
                    "\"args\":{\"name\":",
                    *first ? "" : ",\n", ts->tlane[t]);
            *first = false;
            export_json_string(out, label);
            fprintf(out,
                    "}},\n{\"ph\":\"M\",\"cat\":\"__metadata\",\"name\":\"process_sort_index\",\"pid\":%ld,"
                    "\"tid\":0,\"args\":{\"sort_index\":%zu}}",
                    ts->tlane[t],
                    rank != OPR_RANK_UNSET ? (size_t)rank * 1000 : 1000000000u + pi * 1000 + t);
        }
        const char *tname = th->name[0] ? th->name : "thread";
        fprintf(out,
                ",\n{\"ph\":\"M\",\"cat\":\"__metadata\",\"name\":\"thread_name\",\"pid\":%ld,\"tid\":%" PRIu32
                ",\"args\":{\"name\":",
                ts->tlane[t], th->tid);
        export_json_string(out, tname);
        fputs("}}", out);
    }
    return 0;
}

/* The slices still open on one thread: functions root first; and, per
 * function, an id shared by the functions of the same display name (what
 * speedscope matches ends by) with a mark for the clash test. */
struct open_slices {
    uint32_t *func;
    size_t n;
    uint32_t *name_id, *mark;
};

static const struct export_funcs *sort_fn; /* qsort has no context argument */

static int by_name(const void *a, const void *b)
{
    return strcmp(sort_fn->funcs[*(const uint32_t *)a].name, sort_fn->funcs[*(const uint32_t *)b].name);
}

/* name_id[f]: the first function (in name order) with f's name. 0 or -1. */
static int name_ids(const struct export_funcs *fn, uint32_t *name_id)
{
    uint32_t *order = malloc((fn->nfuncs ? fn->nfuncs : 1) * sizeof *order);
    if (!order)
        return -1;
    for (size_t i = 0; i < fn->nfuncs; i++)
        order[i] = (uint32_t)i;
    sort_fn = fn;
    qsort(order, fn->nfuncs, sizeof *order, by_name);
    for (size_t i = 0; i < fn->nfuncs; i++)
        name_id[order[i]] = i && by_name(&order[i], &order[i - 1]) == 0 ? name_id[order[i - 1]] : order[i];
    free(order);
    return 0;
}

/* One begin or end event. No args: speedscope appends a slice's args to its
 * name, which would split one function into many frames. The end event
 * carries the name too, since speedscope checks it against the open slice. */
static void write_edge(FILE *out, const struct thread_samples *ts, size_t t, const struct export_func *g, char ph,
                       int64_t us)
{
    fprintf(out, ",\n{\"ph\":\"%c\",\"name\":", ph);
    export_json_string(out, g->name);
    fprintf(out, ",\"cat\":\"%s\",\"pid\":%ld,\"tid\":%" PRIu32 ",\"ts\":%" PRId64 "}", export_class_name(g->cls),
            ts->tlane[t], ts->p->threads[t].tid, us);
}

static void close_slices(FILE *out, const struct thread_samples *ts, size_t t, const struct export_funcs *fn,
                         struct open_slices *os, size_t keep, int64_t end)
{
    while (os->n > keep) {
        os->n--;
        write_edge(out, ts, t, &fn->funcs[os->func[os->n]], 'E', end);
    }
}

/* Slices: per thread, the call stack over time, as speedscope's time-order
 * view builds it: a function's slice lasts while consecutive samples keep it
 * at the same place in their stack (same callers), and a gap longer than
 * the samples' own periods plus one (the thread was off CPU) closes them all.
 * Times are whole microseconds, and a sample begins exactly where the
 * previous one ended, so a child never outlives its parent and slices that
 * touch never overlap (fractional times did, after the viewers' rounding).
 * Begin ("B") and end ("E") events rather than complete ones: at one
 * timestamp the file order (ends before begins, parents begin before
 * children) is what the viewers keep; complete events of equal start and
 * duration leave parent and child in an order speedscope may swap. */
static int write_slices(FILE *out, const struct thread_samples *ts, const struct export_funcs *fn,
                        uint64_t period, uint64_t origin)
{
    const struct profile *p = ts->p;
    uint32_t depth = 1;
    for (size_t s = 0; s < p->nstacks; s++)
        depth = p->stacks[s].nframes > depth ? p->stacks[s].nframes : depth;
    struct open_slices os = {malloc(depth * sizeof *os.func), 0, malloc((fn->nfuncs + 1) * sizeof *os.name_id),
                             calloc(fn->nfuncs + 1, sizeof *os.mark)};
    uint32_t gen = 0;
    if (!os.func || !os.name_id || !os.mark || name_ids(fn, os.name_id) != 0) {
        free(os.func);
        free(os.name_id);
        free(os.mark);
        return -1;
    }
    for (size_t t = 0; t < p->nthreads; t++) {
        int64_t prev_end = INT64_MIN;
        uint64_t last = 0;
        for (size_t i = ts->start[t]; i < ts->start[t + 1]; i++) {
            const struct prof_sample *a = &p->samples[ts->order[i]];
            const struct prof_stack *st = &p->stacks[a->stack];
            uint64_t back = period * a->weight;
            int64_t end = (int64_t)(a->time_ns - origin) / 1000;
            int64_t begin = (int64_t)(a->time_ns - origin - (a->time_ns - origin >= back ? back : 0)) / 1000;
            if (os.n && a->time_ns - last > period * ((uint64_t)a->weight + 1))
                close_slices(out, ts, t, fn, &os, 0, prev_end); /* off CPU */
            if (os.n || begin < prev_end)
                begin = prev_end; /* contiguous, or jitter: never before the previous end */
            if (end <= begin)
                end = begin + 1;
            uint32_t len = export_stack_len(p, st);
            size_t keep = 0;
            for (; keep < os.n && keep < (len ? len : 1); keep++) {
                uint32_t f = len ? fn->of_frame[st->frames[len - 1 - keep]] : fn->none;
                if (f != os.func[keep])
                    break;
            }
            /* speedscope takes a begin before an end of the same name at one
             * timestamp, so a slice closed and one of the same name opened at
             * the same time would nest wrongly ("Tried to end X when Y was on
             * the top"). Then the openings wait 1 us (0.1 % of a sample). */
            bool clash = false;
            if (keep < os.n && keep < len) {
                gen++;
                for (size_t j = keep; j < os.n; j++)
                    os.mark[os.name_id[os.func[j]]] = gen;
                for (size_t j = keep; j < len && !clash; j++)
                    clash = os.mark[os.name_id[fn->of_frame[st->frames[len - 1 - j]]]] == gen;
            }
            close_slices(out, ts, t, fn, &os, keep, begin);
            if (clash && ++begin >= end)
                end = begin + 1;
            for (; os.n < (len ? len : 1); os.n++) {
                os.func[os.n] = len ? fn->of_frame[st->frames[len - 1 - os.n]] : fn->none;
                write_edge(out, ts, t, &fn->funcs[os.func[os.n]], 'B', begin);
            }
            prev_end = end;
            last = a->time_ns;
        }
        close_slices(out, ts, t, fn, &os, 0, prev_end);
    }
    free(os.func);
    free(os.name_id);
    free(os.mark);
    return 0;
}

/* The counter track of one lane: active threads per 10 ms bucket, only where
 * the count changes (a counter holds its value until the next). 0, or -1 on
 * out of memory. */
static int write_lane_active_threads(FILE *out, const struct thread_samples *ts, long lane,
                                     const struct export_options *o, uint64_t origin)
{
    const struct profile *p = ts->p;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t t = 0; t < p->nthreads; t++) {
        if (ts->tlane[t] != lane || ts->start[t + 1] == ts->start[t])
            continue;
        uint64_t a = p->samples[ts->order[ts->start[t]]].time_ns;
        uint64_t b = p->samples[ts->order[ts->start[t + 1] - 1]].time_ns;
        lo = a < lo ? a : lo;
        hi = b > hi ? b : hi;
    }
    if (lo > hi)
        return 0;
    lo -= (lo - origin) % BUCKET_NS; /* buckets aligned on the shared origin */
    size_t nb = (size_t)((hi - lo) / BUCKET_NS) + 1;
    uint32_t *active = calloc(nb, sizeof *active);
    if (!active)
        return -1;
    for (size_t t = 0; t < p->nthreads; t++) {
        if (ts->tlane[t] != lane)
            continue;
        size_t prev = SIZE_MAX;
        for (size_t i = ts->start[t]; i < ts->start[t + 1]; i++) {
            size_t b = (size_t)((p->samples[ts->order[i]].time_ns - lo) / BUCKET_NS);
            if (b != prev)
                active[b]++;
            prev = b;
        }
    }
    for (size_t b = 0; b <= nb; b++) {
        uint32_t v = b < nb ? active[b] : 0;
        if (b > 0 && b < nb && v == active[b - 1])
            continue;
        fprintf(out, ",\n{\"ph\":\"C\",\"cat\":\"opprof\",\"name\":\"threads\",\"pid\":%ld,\"tid\":0,"
                     "\"ts\":%" PRIu64, lane, (uint64_t)((lo + b * BUCKET_NS - origin) / 1000));
        fprintf(out, ",\"args\":{\"active threads\":%" PRIu32, v);
        if (o && o->online_cpus)
            fprintf(out, ",\"online CPUs\":%u", o->online_cpus);
        fputs("}}", out);
    }
    free(active);
    return 0;
}

/* Memory over time: per process a "memory" counter track (RSS, anonymous,
 * file-backed, in MiB) from its MEM_TICK readings, and a "page faults"
 * track (faults per second between two readings, minor and major). A
 * process without samples still gets its lane. */
static int write_memory_counters(FILE *out, const struct profile *p, size_t pi, struct lanes *lanes, uint64_t origin,
                                 bool *first)
{
    for (size_t i = 0; p->memory && i < p->memory->nstreams; i++) {
        const struct prof_memory_stream *ms = &p->memory->streams[i];
        long lane = lane_of(lanes, pi, ms->pid);
        if (lane < 0)
            return -1;
        for (size_t k = 0; k < ms->nticks; k++) {
            const struct opr_mem_tick *t = &ms->ticks[k];
            if (t->time_ns < origin)
                continue;
            uint64_t us = (t->time_ns - origin) / 1000;
            fprintf(out, "%s{\"ph\":\"C\",\"cat\":\"opprof\",\"name\":\"memory\",\"pid\":%ld,\"tid\":0,"
                         "\"ts\":%" PRIu64 ",\"args\":{\"RSS MiB\":%.3f,\"anon MiB\":%.3f,\"file MiB\":%.3f}}",
                    *first ? "" : ",\n", lane, us, t->rss_bytes / 1048576.0, t->anon_bytes / 1048576.0, t->file_bytes / 1048576.0);
            *first = false;
            if (k == 0 || t->time_ns <= ms->ticks[k - 1].time_ns)
                continue;
            const struct opr_mem_tick *b = &ms->ticks[k - 1];
            double dt = (double)(t->time_ns - b->time_ns) / 1e9;
            fprintf(out, ",\n{\"ph\":\"C\",\"cat\":\"opprof\",\"name\":\"page faults/s\",\"pid\":%ld,\"tid\":0,"
                         "\"ts\":%" PRIu64 ",\"args\":{\"minor\":%.0f,\"major\":%.0f}}",
                    lane, (b->time_ns - origin) / 1000, (double)opr_counter_delta(t->minflt, b->minflt) / dt,
                    (double)opr_counter_delta(t->majflt, b->majflt) / dt);
        }
    }
    return 0;
}

static int write_profile(FILE *out, const struct profile *p, const struct export_options *o, size_t pi,
                         size_t nprofiles, uint64_t origin, struct lanes *lanes, bool *first)
{
    struct export_funcs fn;
    if (export_funcs_build(p, &fn) != 0)
        return -1;
    uint64_t period = p->period_ns ? p->period_ns : 1000000;
    struct thread_samples ts = {
        .p = p,
        .start = calloc(p->nthreads + 1, sizeof *ts.start),
        .order = malloc((p->nsamples ? p->nsamples : 1) * sizeof *ts.order),
        .tlane = malloc((p->nthreads ? p->nthreads : 1) * sizeof *ts.tlane),
    };
    size_t *fill = calloc(p->nthreads + 1, sizeof *fill);
    int rc = -1;
    if (!ts.start || !ts.order || !fill || !ts.tlane)
        goto done;
    export_order_by_thread(p, ts.start, fill, ts.order);

    if (write_names(out, &ts, pi, nprofiles, lanes, first) != 0)
        goto done;
    if (write_slices(out, &ts, &fn, period, origin) != 0)
        goto done;
    for (size_t li = 0; li < lanes->n; li++)
        if (lanes->v[li].profile == pi && write_lane_active_threads(out, &ts, (long)lanes->v[li].lane, o, origin) != 0)
            goto done;
    if (write_memory_counters(out, p, pi, lanes, origin, first) != 0)
        goto done;
    rc = 0;
done:
    free(ts.start);
    free(ts.order);
    free(fill);
    free(ts.tlane);
    export_funcs_free(&fn);
    return rc;
}

int export_chrome_trace(FILE *out, const struct profile *const *profiles, const struct export_options *o,
                        size_t nprofiles)
{
    /* One origin for all: the earliest recording start or sample. */
    uint64_t origin = UINT64_MAX;
    for (size_t i = 0; i < nprofiles; i++) {
        const struct profile *p = profiles[i];
        uint64_t period = p->period_ns ? p->period_ns : 1000000;
        if (p->start_ns && p->start_ns < origin)
            origin = p->start_ns;
        for (size_t s = 0; s < p->nsamples; s++) {
            uint64_t back = period * p->samples[s].weight;
            uint64_t t = p->samples[s].time_ns > back ? p->samples[s].time_ns - back : 0;
            if (t < origin)
                origin = t;
        }
    }
    if (origin == UINT64_MAX)
        origin = 0;
    struct lanes lanes = {0};
    bool first = true;
    fputs("{\"traceEvents\":[\n", out);
    int rc = 0;
    for (size_t i = 0; i < nprofiles && rc == 0; i++)
        rc = write_profile(out, profiles[i], o ? &o[i] : NULL, i, nprofiles, origin, &lanes, &first);
    fputs("\n],\n\"otherData\":{\"exporter\":\"opprof " PACKAGE_VERSION "\",\"clock\":\"CLOCK_MONOTONIC\",", out);
    /* ranks: CLOCK_MONOTONIC is one clock only on one machine */
    const char *host0 = NULL;
    bool one_host = true;
    for (size_t i = 0; i < nprofiles; i++) {
        const char *h = profiles[i]->ranks && profiles[i]->ranks->hostname ? profiles[i]->ranks->hostname : "";
        one_host = one_host && (!host0 || strcmp(host0, h) == 0);
        host0 = host0 ? host0 : h;
    }
    fprintf(out, "\"clock_aligned\":%s,", one_host ? "true" : "false");
    if (!one_host)
        fputs("\"clock_note\":\"results from several hosts: CLOCK_MONOTONIC of different machines is not aligned\",",
              out);
    fprintf(out, "\"origin_ns\":%" PRIu64 ",\"results\":[", origin);
    for (size_t i = 0; i < nprofiles; i++) {
        if (i)
            fputc(',', out);
        export_json_string(out, profiles[i]->dir ? profiles[i]->dir : "");
    }
    fputs("]}}\n", out);
    free(lanes.v);
    return rc;
}
