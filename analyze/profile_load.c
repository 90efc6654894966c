/*
 * analyze/profile_load.c — reads a result directory (docs/format.md) into a
 * profile: the info file (profile_info.c), then every stream file
 * (profile_stream.c), then the analysis steps every profile goes through
 * (profile_prepare).
 *
 * A result directory is untrusted input: it may be truncated (the workload or
 * opprof was killed), copied incompletely, or corrupt. No info file, an
 * unreadable dir, or no readable stream at all is an error sentence naming
 * the problem and the fix; a damaged stream is a warning and the rest is
 * read. Out of memory fails the load with errno ENOMEM and err "out of
 * memory"; the caller prints that one line and exits 2.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analyze/analyze.h"
#include "analyze/profile_internal.h"
#include "symbolize/symbolize.h"

void profile_warnf(struct profile *p, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* A warning is an optional note (util/util.h): when memory runs out it
     * is dropped, and whatever allocation fails next fails the load. */
    (void)profile_add_warning(p, buf);
}

struct stream_name {
    char name[256];
    unsigned pid, gen;
};

static int compare_stream_names(const void *a, const void *b)
{
    const struct stream_name *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return x->gen < y->gen ? -1 : x->gen > y->gen;
}

static void symbolizer_problem(const char *path, const char *problem, void *arg)
{
    profile_warnf(arg, "%s: %s (its frames show as module+offset)", path, problem);
}

/* The stream files of dir (proc-<pid>-<gen>.raw), by pid then generation, so
 * that the last image of a pid speaks last. 0, or -1 with err (errno ENOMEM
 * and err "out of memory" when memory ran out). */
static int list_streams(const char *dir, struct stream_name **out, size_t *nout, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "cannot read %s: %s", dir, strerror(errno));
        return -1;
    }
    struct stream_name *names = NULL;
    size_t nnames = 0, names_cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        unsigned pid, gen;
        char tail[8];
        if (sscanf(e->d_name, "proc-%u-%u.ra%1s", &pid, &gen, tail) == 3 && strcmp(tail, "w") == 0 &&
            strlen(e->d_name) < sizeof names[0].name) {
            if (profile_grow_to(&names, &names_cap, nnames + 1, sizeof *names) != 0) {
                closedir(d);
                free(names);
                snprintf(err, errlen, "%s: out of memory while listing its streams", dir);
                errno = ENOMEM;
                return -1;
            }
            snprintf(names[nnames].name, sizeof names[0].name, "%s", e->d_name);
            names[nnames].pid = pid;
            names[nnames].gen = gen;
            nnames++;
        }
    }
    closedir(d);
    if (nnames > 1)
        qsort(names, nnames, sizeof *names, compare_stream_names);
    *out = names;
    *nout = nnames;
    return 0;
}

/* The loader proper: the info file and every stream, nothing rewritten. */
static int profile_read(const char *dir, enum profile_load_mode mode, struct profile **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    struct stat stbuf;
    if (stat(dir, &stbuf) != 0) {
        snprintf(err, errlen, "%s: %s; pass a result directory written by `opprof record`", dir,
                 strerror(errno));
        return -1;
    }
    if (!S_ISDIR(stbuf.st_mode)) {
        snprintf(err, errlen, "%s is not a directory; pass a result directory written by `opprof record`", dir);
        return -1;
    }
    struct profile *p = profile_new_empty();
    if (!p || !(p->dir = strdup(dir))) {
        profile_free(p);
        snprintf(err, errlen, "out of memory");
        errno = ENOMEM;
        return -1;
    }
    ((struct profile_priv *)p->priv)->aggregate = mode == PROFILE_LOAD_AGGREGATED;
    if (profile_load_info(p, dir, err, errlen) != 0) {
        profile_free(p);
        return -1;
    }

    struct stream_name *names = NULL;
    size_t nnames = 0;
    if (list_streams(dir, &names, &nnames, err, errlen) != 0) {
        profile_free(p);
        return -1;
    }
    struct symbolizer *sym = symbolizer_new(dir);
    if (!sym) {
        free(names);
        profile_free(p);
        snprintf(err, errlen, "%s: out of memory while reading its streams", dir);
        errno = ENOMEM;
        return -1;
    }
    uint32_t *scratch = NULL;
    size_t scratch_cap = 0;
    size_t usable = 0;
    int failed = 0;
    for (size_t i = 0; i < nnames && !failed; i++) {
        int rc = profile_load_stream(p, sym, dir, names[i].name, (uint32_t)i, &scratch, &scratch_cap);
        if (rc == 0)
            usable++;
        else if (rc == -2)
            failed = errno ? errno : ENOMEM;
    }
    symbolizer_for_each_problem(sym, symbolizer_problem, p);
    struct symbolizer_stats sst;
    symbolizer_get_stats(sym, &sst);
    if (sst.modules_unreadable)
        profile_warnf(p, "%u binar%s named by this result not read: not readable by the result's owner uid %u "
                      "(as root, opprof reads only what the owner of a result could)",
                      sst.modules_unreadable, sst.modules_unreadable == 1 ? "y" : "ies", (unsigned)sst.owner_uid);
    symbolizer_free(sym);
    free(scratch);
    free(names);
    if (failed) {
        snprintf(err, errlen, "%s: %s while reading its streams", dir,
                 failed == ENOMEM ? "out of memory" : strerror(failed));
        profile_free(p);
        errno = failed;
        return -1;
    }

    if (nnames > 0 && usable == 0) {
        snprintf(err, errlen, "%s: none of its %zu sample stream(s) is readable (corrupt or not written by "
                 "opprof); record again", dir, nnames);
        profile_free(p);
        return -1;
    }
    if (nnames == 0)
        profile_warnf(p, "no sample streams in %s: the agent did not start in the workload (static or setuid "
                 "binary?) or the directory was copied incompletely", dir);
    if (!p->complete)
        profile_warnf(p, "the recording did not finish (opprof record was interrupted or is still running); "
                 "figures cover what was written");
    profile_sort_samples(p);
    /* record -c: the leader's own count per sample is known exactly */
    if (p->sample_period && p->nsamples &&
        counters_add_leader(p, p->event ? p->event : "leader", (enum pmu_role)p->sample_role, p->user_only,
                            p->sample_period) != 0) {
        snprintf(err, errlen, "%s: out of memory while adding the sampling event's counts", dir);
        profile_free(p);
        errno = ENOMEM;
        return -1;
    }
    *out = p;
    return 0;
}

/* The analysis steps every loaded profile goes through before anything reads
 * it. They rewrite samples, so they run here, once, and not in a report or an
 * export: then every output of one result shows the same data. */
int profile_prepare(struct profile *p)
{
    /* OpenMP worker grafting: a worker's sample in a region gets the calling
     * context (operator, Python line) of the thread that opened the region. */
    errno = 0;
    if (threading_attribute(p) == 0 && errno == ENOMEM)
        return -1;
    return 0;
}

int profile_load(const char *dir, struct profile **out, char *err, size_t errlen)
{
    return profile_load_as(dir, PROFILE_LOAD_SAMPLES, out, err, errlen);
}

int profile_load_as(const char *dir, enum profile_load_mode mode, struct profile **out, char *err, size_t errlen)
{
    /* OPPROF_LOAD_EVERY_SAMPLE=1 loads sample by sample what would be
     * aggregated: tests/integration/test_report_streams.sh compares the
     * outputs of both ways on real recordings (they must be identical). */
    const char *every = getenv("OPPROF_LOAD_EVERY_SAMPLE");
    if (every && strcmp(every, "1") == 0)
        mode = PROFILE_LOAD_SAMPLES;
    if (profile_read(dir, mode, out, err, errlen) != 0) {
        /* The cli tells out of memory (exit 2, one line) from a bad result
         * by errno, and the user by err: say it wherever it happened (the
         * info file, a stream, a feature). */
        if (errno == ENOMEM && !strstr(err, "out of memory")) {
            snprintf(err, errlen, "%s: out of memory while reading it", dir);
            errno = ENOMEM;
        }
        return -1;
    }
    if (profile_prepare(*out) != 0) {
        snprintf(err, errlen, "%s: out of memory while charging OpenMP worker samples to their openers", dir);
        profile_free(*out);
        *out = NULL;
        errno = ENOMEM;
        return -1;
    }
    return 0;
}
