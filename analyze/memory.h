/*
 * analyze/memory.h — memory over time (analyze/memory.c): per process the
 * RSS readings of MEM_TICK records, the cgroup limit, and the RSS growth
 * between readings charged to what the process ran meanwhile.
 * Part of analyze/analyze.h, the folder's one interface: include that, not
 * this file, from outside analyze/.
 */
#ifndef OPPROF_ANALYZE_MEMORY_H
#define OPPROF_ANALYZE_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analyze/profile.h"
#include "format/format.h"

/* The readings of one stream (a process image), in time order. */
struct prof_memory_stream {
    uint32_t pid;
    struct opr_mem_tick *ticks;
    size_t nticks, ticks_cap;
    bool has_limit;
    struct opr_mem_limit limit;
    char *cgroup;              /* the cgroup path of MEM_LIMIT (NULL: none) */
    double unattributed_grown;  /* growth in intervals without a sample of the process */
    double unattributed_released;
};

/* RSS change charged to one profile stack, summed over all processes. */
struct prof_memory_charge {
    uint32_t stack;  /* index into profile.stacks */
    double grown;    /* bytes of growth charged to it */
    double released; /* bytes of shrinking charged to it (positive) */
};

struct prof_memory {
    struct prof_memory_stream *streams;
    size_t nstreams, streams_cap;
    struct prof_memory_charge *charges;
    size_t ncharges, charges_cap;
    void *charge_index; /* stack -> charges row (analyze/memory.c) */
};
void prof_memory_free(struct prof_memory *m);

/* A reading as the workload's memory, pure (unit-tested): the agent's own
 * resident bytes (its sample ring and unwind tables) taken out of the RSS,
 * their anonymous part out of anon_bytes and their file-backed part (tables
 * mapped from the cache) out of file_bytes, so that they are neither the
 * workload's peak nor growth charged to its code. Never below 0, whatever
 * a damaged record says. */
void memory_tick_without_agent(struct opr_mem_tick *t);

/* The charging rule, pure (unit-tested). ticks: one stream's readings in time
 * order; samples: that process's samples sorted by time (time and weight).
 * For each pair of consecutive readings, the RSS change happened in
 * (since_ns of the later one, its time_ns] (since_ns, the reading before,
 * found the earlier one's RSS): it is split over the samples of that interval
 * in proportion to their weights, growth into grown[i], shrinking into
 * released[i] (as a positive amount); an interval without a sample adds to
 * *unattr_grown / *unattr_released. The first reading is the baseline. */
struct memory_sample_time {
    uint64_t time_ns;
    uint32_t weight;
};
void memory_charge(const struct opr_mem_tick *ticks, size_t nticks, const struct memory_sample_time *samples,
                   size_t nsamples, double *grown, double *released, double *unattr_grown,
                   double *unattr_released);

/* ---- the Memory section's figures (memory_analyze) ---------------------- */
struct memory_process {
    uint32_t pid;
    size_t stream;         /* index into profile.memory->streams (an exec'ed pid has one per image) */
    const char *command;   /* the process's command line ("" when unknown) */
    size_t nreadings;
    uint64_t peak_rss;     /* the largest RSS read */
    double peak_s;         /* when, in seconds from the start of the recording */
    uint64_t anon_at_peak, file_at_peak;
    uint64_t agent_at_peak, agent_last; /* the agent's own resident bytes, left out of the RSS figures */
    uint64_t hwm;          /* the kernel's peak (VmHWM / ru_maxrss) at the last reading; 0: unknown */
    uint64_t first_rss, last_rss;
    uint64_t minflt, majflt; /* faults between the first and the last reading */
    double seconds;        /* first to last reading */
    uint64_t limit;        /* cgroup memory limit (0: none) */
    uint32_t limit_version;
    const char *cgroup;
    double grown, released;             /* total growth / shrinking between readings */
    double unattributed_grown;          /* of grown: in intervals without samples */
    double unattributed_released;       /* of released: likewise */
};

enum memory_view { MEMORY_BY_FUNCTION = 0, MEMORY_BY_LINE, MEMORY_BY_OP, MEMORY_VIEWS };

struct memory_row {
    char *name;        /* function, "file:line", or operator */
    char *where;       /* module, the line's function, or the operator's Python line ("" when none) */
    double self_grown; /* growth charged where this key is the innermost (leaf / line / op) */
    double total_grown;/* growth charged where it is anywhere on the stack (once per stack) */
    double released;   /* shrinking charged where it is innermost */
};

struct memory_finding {
    char text[512];
};

struct memory_summary {
    struct memory_process *procs;
    size_t nprocs;
    struct memory_row *rows[MEMORY_VIEWS]; /* sorted by self growth + released, largest first */
    size_t nrows[MEMORY_VIEWS];
    double grown_total;       /* all growth between readings, all processes */
    double charged_total;     /* of it, charged to samples */
    double released_total;    /* all shrinking between readings */
    double charged_released;  /* of it, charged to samples */
    struct memory_finding *findings;
    size_t nfindings;
};

/* What a major fault is assumed to cost (a read from disk or swap): labelled
 * as an assumption wherever it is used. */
#define MEMORY_MAJOR_FAULT_ASSUMED_US 100.0

/* The Memory section of p; out->nprocs 0 when p has no readings. 0, or -1
 * with errno ENOMEM (out freed). */
int memory_analyze(const struct profile *p, struct memory_summary *out);
void memory_summary_free(struct memory_summary *s);
const char *memory_view_name(enum memory_view v); /* "function", "line", "op" */

#endif
