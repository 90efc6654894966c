/*
 * analyze/profile_info.c — the info file of a result directory (docs/format.md,
 * "info"): key=value lines the launcher writes at the start and rewrites at
 * the end. Keys this reader does not know are ignored, so newer writers can
 * add keys; the format line decides whether the streams can be read at all.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "analyze/profile_internal.h"
#include "format/format.h"

static char *unescape(const char *s)
{
    char *out = malloc(strlen(s) + 1), *o = out;
    if (!out)
        return NULL;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] == 'n') {
            *o++ = '\n';
            s++;
        } else if (s[0] == '\\' && s[1] == '\\') {
            *o++ = '\\';
            s++;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
    return out;
}

/* *slot = a copy of val (unescaped for text the launcher escaped). 0, or -1
 * with errno ENOMEM. */
static int set_text(char **slot, const char *val, bool escaped)
{
    free(*slot);
    *slot = escaped ? unescape(val) : strdup(val);
    if (!*slot) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

/* One key=value line into p; *format gets the format line's version (-2:
 * unreadable). Unknown keys are ignored. 0, or -1 with errno ENOMEM. */
static int info_kv(struct profile *p, const char *key, const char *val, int *format)
{
    if (strcmp(key, "format") == 0) {
        if (sscanf(val, "opprof-raw %d", format) != 1)
            *format = -2;
    } else if (strcmp(key, "command") == 0) {
        return set_text(&p->command, val, true);
    } else if (strcmp(key, "event") == 0) {
        return set_text(&p->event, val, false);
    } else if (strcmp(key, "call_graph") == 0) {
        return set_text(&p->call_graph, val, false);
    } else if (strcmp(key, "period_ns") == 0) {
        p->period_ns = strtoull(val, NULL, 10);
    } else if (strcmp(key, "sample_period") == 0) {
        p->sample_period = strtoull(val, NULL, 10); /* -c N */
    } else if (strcmp(key, "sample_role") == 0) {
        p->sample_role = atoi(val); /* enum pmu_role of the leader */
    } else if (strcmp(key, "frequency_hz") == 0) {
        p->frequency_hz = (unsigned)strtoul(val, NULL, 10);
    } else if (strcmp(key, "start_ns") == 0) {
        p->start_ns = strtoull(val, NULL, 10);
    } else if (strcmp(key, "end_ns") == 0) {
        p->end_ns = strtoull(val, NULL, 10);
    } else if (strcmp(key, "online_cpus") == 0) {
        p->online_cpus = (unsigned)strtoul(val, NULL, 10);
    } else if (strcmp(key, "exit_status") == 0) {
        p->exit_status = atoi(val);
    } else if (strcmp(key, "exit_signal") == 0) {
        p->exit_signal = atoi(val);
    } else if (strcmp(key, "complete") == 0) {
        p->complete = atoi(val) == 1;
    } else if (strcmp(key, "window_start_ns") == 0) {
        p->window_start_ns = strtoull(val, NULL, 10);
    } else if (strcmp(key, "window_end_ns") == 0) {
        p->window_end_ns = strtoull(val, NULL, 10);
    } else if (strcmp(key, "unwritten_samples") == 0) { /* disk full: counted by the launcher (accounting.c) */
        p->acct.info_unwritten = strtoull(val, NULL, 10);
    } else if (strcmp(key, "max_size_bytes") == 0) {
        p->max_size_bytes = strtoull(val, NULL, 10);
    } else if (strcmp(key, "mode") == 0) { /* "attach": sampled from outside by opprof attach */
        p->attached = strcmp(val, "attach") == 0;
    } else if (strcmp(key, "user_only") == 0) {
        p->user_only = atoi(val) == 1;
    } else if (strcmp(key, "timer") == 0) { /* "tick": record --timer tick */
        p->tick_timer = strcmp(val, "tick") == 0;
    } else if (strcmp(key, "sample_weight") == 0) {
        p->cpu_time_weights = strcmp(val, "thread_cpu_time") == 0;
    } else if (strncmp(key, "openmp_", 7) == 0) {
        return threading_info_kv(p, key, val); /* threads and OpenMP */
    } else {
        return ranks_info_kv(p, key, val) < 0 ? -1 : 0; /* rank, local_rank, world_size, hostname */
    }
    return 0;
}

int profile_load_info(struct profile *p, const char *dir, char *err, size_t errlen)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/" OPR_INFO_FILE, dir);
    struct stat st;
    int fd = opr_open_regular(path, &st);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        const char *why = errno == EINVAL ? "not a regular file"
                          : errno == ELOOP ? "a symbolic link, not followed"
                                           : strerror(errno);
        snprintf(err, errlen, "%s is not an opprof result directory (no readable info file: %s); "
                 "pass a directory written by `opprof record`", dir, why);
        return -1;
    }
    char line[8192];
    int format = -1, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        rc = info_kv(p, line, eq + 1, &format);
    }
    fclose(f);
    if (rc != 0) {
        snprintf(err, errlen, "out of memory");
        errno = ENOMEM;
        return -1;
    }
    if (format == -1 || format == -2) {
        snprintf(err, errlen, "%s/info does not name an opprof raw format: the directory is corrupt "
                 "or was not written by opprof record", dir);
        return -1;
    }
    if (format != OPR_FORMAT_VERSION && format != OPR_INFO_VERSION_EVENTS) {
        snprintf(err, errlen, "%s was written in raw format version %d, this opprof reads versions %d and %d: "
                 "use the opprof that recorded it", dir, format, OPR_FORMAT_VERSION, OPR_INFO_VERSION_EVENTS);
        return -1;
    }
    if (p->sample_period) {
        p->period_ns = 0; /* -c N: a sample is N events, no time */
        p->frequency_hz = 0;
    }
    else if (p->period_ns == 0)
        p->period_ns = 1000000;
    if ((!p->event && set_text(&p->event, "task-clock", false) != 0) ||
        (!p->command && set_text(&p->command, "", false) != 0) ||
        (!p->call_graph && set_text(&p->call_graph, "dwarf", false) != 0)) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}
