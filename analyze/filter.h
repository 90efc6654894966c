/*
 * analyze/filter.h — `opprof report --pid/--tid/--comm`: keep the samples of
 * some processes or threads, as perf report's filters of the same names.
 */
#ifndef OPPROF_ANALYZE_FILTER_H
#define OPPROF_ANALYZE_FILTER_H

#include <stddef.h>

#include "analyze/profile.h"

/* Comma-separated lists; NULL: that filter is off. A sample is kept when it
 * passes every filter given: its process id is in pids, its thread id in
 * tids, its thread's name or its process's executable (basename) in comms. */
struct sample_filter {
    const char *pids;
    const char *tids;
    const char *comms;
};

/* Keeps p's matching samples (total_weight follows) and adds a warning that
 * says which filter kept how many, so every view and export names it.
 * Returns 0; -1 with a sentence in err for a malformed list, or when no
 * sample matches (err then lists the processes and threads there are); -2
 * on out of memory. The profile is left unchanged on error. */
int profile_filter_samples(struct profile *p, const struct sample_filter *f, char *err, size_t errlen);

#endif
