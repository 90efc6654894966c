/*
 * report/export_chrome.c — Chrome Trace Event format (chrome://tracing,
 * Perfetto UI, ui.perfetto.dev's legacy JSON importer): what ran when.
 *
 * Per thread, consecutive samples with the same innermost Python function (or,
 * for threads without Python frames, the same innermost function) become one
 * complete ("X") event. A sample stands for the timer period of CPU time that
 * ended at its timestamp, so a slice starts one period before its first
 * sample; a gap longer than the samples' own periods plus one means the thread
 * was off CPU, and ends the slice. Processes and threads get names ("M"
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

static void write_us(FILE *out, const char *key, int64_t ns)
{
    /* Microseconds with nanosecond precision, without float rounding. */
    int64_t a = ns < 0 ? -ns : ns;
    fprintf(out, "\"%s\":%s%" PRId64 ".%03" PRId64, key, ns < 0 ? "-" : "", a / 1000, a % 1000);
}

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

/* The slice key of a stack: innermost Python function, else innermost function. */
static uint32_t slice_key(const struct profile *p, const struct export_funcs *fn, uint32_t s)
{
    const struct prof_stack *st = &p->stacks[s];
    for (uint32_t k = 0; k < st->nframes; k++)
        if (p->frames[st->frames[k]].kind == FRAME_PYTHON)
            return fn->of_frame[st->frames[k]];
    return st->nframes ? fn->of_frame[st->frames[0]] : fn->none;
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
            snprintf(label, sizeof label, "%s%s (pid %" PRIu32 ")%s%s", rank_label, process_label(p, th->pid),
                     th->pid, nprofiles > 1 ? " " : "", nprofiles > 1 && p->dir ? export_base_name(p->dir) : "");
            fprintf(out, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%ld,\"tid\":0,\"args\":{\"name\":",
                    *first ? "" : ",\n", ts->tlane[t]);
            *first = false;
            export_json_string(out, label);
            fprintf(out, "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%ld,\"tid\":0,"
                         "\"args\":{\"sort_index\":%zu}}", ts->tlane[t],
                    rank != OPR_RANK_UNSET ? (size_t)rank * 1000 : 1000000000u + pi * 1000 + t);
        }
        char tname[64];
        snprintf(tname, sizeof tname, "%s (tid %" PRIu32 ")", th->name[0] ? th->name : "thread", th->tid);
        fprintf(out, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%ld,\"tid\":%" PRIu32 ",\"args\":{\"name\":",
                ts->tlane[t], th->tid);
        export_json_string(out, tname);
        fputs("}}", out);
    }
    return 0;
}

/* Slices: per thread, runs of samples with the same slice key (key[stack])
 * and no off-CPU gap become one complete ("X") event. */
static void write_slices(FILE *out, const struct thread_samples *ts, const struct export_funcs *fn,
                         const uint32_t *key, uint64_t period, uint64_t origin)
{
    const struct profile *p = ts->p;
    for (size_t t = 0; t < p->nthreads; t++) {
        int64_t prev_end = INT64_MIN;
        for (size_t i = ts->start[t]; i < ts->start[t + 1];) {
            const struct prof_sample *a = &p->samples[ts->order[i]];
            uint32_t k = key[a->stack];
            uint64_t n = 1, last = a->time_ns;
            size_t j = i + 1;
            for (; j < ts->start[t + 1]; j++) {
                const struct prof_sample *b = &p->samples[ts->order[j]];
                if (key[b->stack] != k || b->time_ns - last > period * ((uint64_t)b->weight + 1))
                    break;
                last = b->time_ns;
                n++;
            }
            int64_t begin = (int64_t)(a->time_ns - origin) - (int64_t)(period * a->weight);
            int64_t end = (int64_t)(last - origin);
            /* Samples come with jitter: a slice never starts before the
             * previous one of its thread ended (viewers require nesting). */
            if (begin < prev_end)
                begin = prev_end;
            prev_end = end;
            const struct export_func *g = &fn->funcs[k];
            fputs(",\n{\"ph\":\"X\",\"name\":", out);
            export_json_string(out, g->name);
            fprintf(out, ",\"cat\":\"%s\",\"pid\":%ld,\"tid\":%" PRIu32 ",", export_class_name(g->cls),
                    ts->tlane[t], p->threads[t].tid);
            write_us(out, "ts", begin);
            fputc(',', out);
            write_us(out, "dur", end - begin);
            fprintf(out, ",\"args\":{\"samples\":%" PRIu64, n);
            const struct prof_stack *st = &p->stacks[a->stack];
            uint32_t leaf = st->nframes ? fn->of_frame[st->frames[0]] : fn->none;
            if (leaf != k) {
                fputs(",\"innermost\":", out);
                export_json_string(out, fn->funcs[leaf].name);
            }
            if (g->source_file) {
                fputs(",\"file\":", out);
                export_json_string(out, g->source_file);
            }
            fputs("}}", out);
            i = j;
        }
    }
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
        fprintf(out, ",\n{\"ph\":\"C\",\"name\":\"threads\",\"pid\":%ld,\"tid\":0,", lane);
        write_us(out, "ts", (int64_t)(lo + b * BUCKET_NS - origin));
        fprintf(out, ",\"args\":{\"active threads\":%" PRIu32, v);
        if (o && o->online_cpus)
            fprintf(out, ",\"online CPUs\":%u", o->online_cpus);
        fputs("}}", out);
    }
    free(active);
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
    uint32_t *key = malloc((p->nstacks ? p->nstacks : 1) * sizeof *key);
    int rc = -1;
    if (!ts.start || !ts.order || !fill || !key || !ts.tlane)
        goto done;
    for (size_t s = 0; s < p->nstacks; s++)
        key[s] = slice_key(p, &fn, (uint32_t)s);
    export_order_by_thread(p, ts.start, fill, ts.order);

    if (write_names(out, &ts, pi, nprofiles, lanes, first) != 0)
        goto done;
    write_slices(out, &ts, &fn, key, period, origin);
    for (size_t li = 0; li < lanes->n; li++)
        if (lanes->v[li].profile == pi && write_lane_active_threads(out, &ts, (long)lanes->v[li].lane, o, origin) != 0)
            goto done;
    rc = 0;
done:
    free(ts.start);
    free(ts.order);
    free(fill);
    free(key);
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
