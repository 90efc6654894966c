/*
 * analyze/filter.c — sample filters by process, thread and name (filter.h).
 * Thread and process tables stay whole: the threading section and the
 * accounting describe the run; the tables and exports read the samples.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/filter.h"
#include "analyze/profile_internal.h"

/* Whether the decimal id is an item of the comma-separated list. -1: the
 * list has an item that is not a number. */
static int id_listed(const char *list, uint32_t id)
{
    int found = 0;
    for (const char *s = list; *s;) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s || errno || v > UINT32_MAX || (*end && *end != ',') || *s == '-' || *s == '+')
            return -1;
        if (v == id)
            found = 1;
        s = *end ? end + 1 : end;
    }
    return found;
}

static bool name_listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *s = list; *s;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (len == n && n && strncmp(s, name, n) == 0)
            return true;
        s += len + (comma ? 1 : 0);
    }
    return false;
}

static const char *exe_name(const struct profile *p, uint32_t pid)
{
    for (size_t i = 0; i < p->nprocesses; i++)
        if (p->processes[i].pid == pid && p->processes[i].exe) {
            const char *slash = strrchr(p->processes[i].exe, '/');
            return slash ? slash + 1 : p->processes[i].exe;
        }
    return "";
}

/* Which threads pass (keep[t]); -1 on a malformed list (err says which). */
static int threads_kept(const struct profile *p, const struct sample_filter *f, bool *keep, char *err, size_t errlen)
{
    for (size_t t = 0; t < p->nthreads; t++) {
        const struct prof_thread *th = &p->threads[t];
        bool k = true;
        if (f->pids) {
            int r = id_listed(f->pids, th->pid);
            if (r < 0) {
                snprintf(err, errlen, "--pid takes process ids separated by commas (e.g. --pid 4242,4243), not '%s'",
                         f->pids);
                return -1;
            }
            k = k && r;
        }
        if (f->tids) {
            int r = id_listed(f->tids, th->tid);
            if (r < 0) {
                snprintf(err, errlen, "--tid takes thread ids separated by commas (e.g. --tid 4242,4250), not '%s'",
                         f->tids);
                return -1;
            }
            k = k && r;
        }
        if (f->comms)
            k = k && (name_listed(f->comms, th->name) || name_listed(f->comms, exe_name(p, th->pid)));
        keep[t] = k;
    }
    return 0;
}

/* "--pid 1 --comm x" for messages. */
static void describe(const struct sample_filter *f, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s%s%s%s", f->pids ? "--pid " : "", f->pids ? f->pids : "",
             f->tids ? (f->pids ? " --tid " : "--tid ") : "", f->tids ? f->tids : "",
             f->comms ? (f->pids || f->tids ? " --comm " : "--comm ") : "", f->comms ? f->comms : "");
}

/* err: "no sample matches ...; threads with samples: 4242/4242 (python3), ..." */
static void no_match(const struct profile *p, const struct sample_filter *f, char *err, size_t errlen)
{
    char what[512];
    describe(f, what, sizeof what);
    int n = snprintf(err, errlen, "no sample matches %s; threads with samples (pid/tid name):", what);
    size_t used = n > 0 ? (size_t)n : 0, shown = 0;
    for (size_t t = 0; t < p->nthreads && used + 1 < errlen; t++) {
        const struct prof_thread *th = &p->threads[t];
        if (!th->samples)
            continue;
        if (shown == 8) {
            snprintf(err + used, errlen - used, " ...");
            break;
        }
        n = snprintf(err + used, errlen - used, "%s %" PRIu32 "/%" PRIu32 " %s%s%s", shown ? "," : "", th->pid,
                     th->tid, th->name, strcmp(th->name, exe_name(p, th->pid)) ? " of " : "",
                     strcmp(th->name, exe_name(p, th->pid)) ? exe_name(p, th->pid) : "");
        used += n > 0 ? (size_t)n : 0;
        shown++;
    }
}

int profile_filter_samples(struct profile *p, const struct sample_filter *f, char *err, size_t errlen)
{
    if (!f->pids && !f->tids && !f->comms)
        return 0;
    bool *keep = calloc(p->nthreads ? p->nthreads : 1, sizeof *keep);
    if (!keep)
        return -2;
    if (threads_kept(p, f, keep, err, errlen) != 0) {
        free(keep);
        return -1;
    }
    size_t kept = 0; /* rows (a row may stand for several samples: count) */
    uint64_t weight = 0, kept_samples = 0, before = p->sample_count;
    for (size_t i = 0; i < p->nsamples; i++)
        if (p->samples[i].thread < p->nthreads && keep[p->samples[i].thread]) {
            kept++;
            weight += p->samples[i].weight;
            kept_samples += p->samples[i].count;
        }
    if (kept == 0) {
        free(keep);
        no_match(p, f, err, errlen);
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < p->nsamples; i++)
        if (p->samples[i].thread < p->nthreads && keep[p->samples[i].thread])
            p->samples[k++] = p->samples[i];
    free(keep);
    p->nsamples = kept;
    p->sample_count = kept_samples;
    p->total_weight = weight;
    char what[512];
    describe(f, what, sizeof what);
    profile_warnf(p, "filtered with %s: %" PRIu64 " of %" PRIu64 " samples kept; every share is of these", what,
                  kept_samples, before);
    return 0;
}
