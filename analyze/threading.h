/*
 * analyze/threading.h — threads and OpenMP (analyze/threading*.c).
 * Part of analyze/analyze.h, the folder's one interface: include that, not
 * this file, from outside analyze/.
 */
#ifndef OPPROF_ANALYZE_THREADING_H
#define OPPROF_ANALYZE_THREADING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analyze/profile.h"
#include "format/format.h" /* struct opr_omp_tick */

/* ------------------------------------------------------------------------- */
/* Threads and OpenMP (analyze/threading_load.c: the records; threading.c:   */
/* grafting and the summary; report/threading_section.c)                     */
/* ------------------------------------------------------------------------- */
/* What the loader keeps of the OMP_* and SCHED_TICK records (docs/format.md). */
struct prof_omp_region {
    uint32_t pid, opener_tid; /* opener_tid 0: the REGION record is missing */
    uint64_t id, parent, begin_ns, end_ns;
    uint32_t requested, actual, flags;
};
struct prof_omp_context {
    uint32_t pid, tid;
    uint64_t region_id, time_ns;
    uint32_t stack; /* profile stack (Python frames spliced in) */
};
struct prof_omp_tick {
    uint32_t pid;
    struct opr_omp_tick t;
};
struct prof_sched_tick {
    uint32_t pid;
    uint64_t time_ns;
    uint32_t online, affinity, limit_milli;
    size_t first, n; /* entries in prof_threading.sched_threads */
};
struct prof_sched_thread {
    uint32_t tid;
    uint64_t run_ns, wait_ns, timeslices, nivcsw;
};
struct prof_threading {
    struct prof_omp_region *regions;   size_t nregions, regions_cap;
    struct prof_omp_context *contexts; size_t ncontexts, contexts_cap;
    struct prof_omp_tick *omp_ticks;   size_t nomp_ticks, omp_ticks_cap;
    struct prof_sched_tick *sched_ticks; size_t nsched_ticks, sched_ticks_cap;
    struct prof_sched_thread *sched_threads; size_t nsched_threads, sched_threads_cap;
    char *runtime_version;  /* the first OMPT runtime's version string */
    unsigned ompt_processes;/* processes whose runtime started the OMPT tool */
    char *openmp_runtime, *openmp_setup, *openmp_libomp; /* from the info file */
    bool openmp_regions_off;                             /* info: openmp_regions=off (--no-openmp-regions) */
    bool saw_libgomp, saw_libomp, saw_libiomp; /* runtimes mapped in some process */
    uint64_t attributed_exact, attributed_near, unattributed; /* set by threading_attribute */
    uint64_t unrecorded;        /* samples in regions with no REGION record (its events lost): opener unknown */
    uint64_t contexts_repeated; /* OMP_CONTEXTs the agent sent as "unchanged", no walk */
};
/* prof_sample.omp_region of a team thread sampled outside any region body
 * (GNU libgomp path: the SAMPLE tail's bit 63, docs/format.md): runtime time,
 * spin/barrier/fork/join/idle wait, known without trusting runtime symbols. */
#define THREADING_OUTSIDE_BODY UINT32_MAX
struct prof_threading *threading_get(struct profile *p); /* creates it on first use */
void threading_free(struct prof_threading *t);
/* An openmp_* key of the info file. 0, or -1 with errno ENOMEM. */
int threading_info_kv(struct profile *p, const char *key, const char *val);
/* Charges OpenMP worker samples (no Python frames, inside a region opened by
 * another thread) to the opener's calling context: the opener's own sample
 * in that region nearest in time, else its stack at region begin, else (an
 * approximation, counted apart) its nearest sample or context within 50 ms.
 * Replaces those samples' stacks; returns how many were charged (0 with
 * errno ENOMEM when memory ran out). Run once
 * per profile by profile_prepare (after loading), never by a renderer. */
size_t threading_attribute(struct profile *p);
/* Loader: index + 1 of region id of the stream whose regions start at first
 * (sorted on the first call, *nsorted 0 before); a placeholder region (opener unknown) is added when it is missing.
 * 0 for id 0; UINT32_MAX with errno ENOMEM when out of memory. */
uint32_t threading_region_lookup(struct profile *p, size_t first, size_t *nsorted, uint32_t pid, uint64_t id);
/* One OMP_REGION, OMP_TICK, OMP_INFO or SCHED_TICK body of process pid, with
 * the decoders the loader's handlers use (threading_load.c): for bodies held
 * outside a stream (unit tests). */
/* These three: 0, or -1 with errno ENOMEM (util/util.h). */
int threading_load_record(struct profile *p, uint32_t pid, uint32_t type, const char *body, size_t len);
int threading_add_context(struct profile *p, uint32_t pid, uint32_t tid, uint64_t region_id, uint64_t time_ns,
                          uint32_t stack);
int threading_note_module(struct profile *p, const char *path); /* MAP: which OpenMP runtime */
/* Whether a module basename is an OpenMP runtime (libgomp, libomp, libiomp5). */
bool threading_is_omp_runtime(const char *module);

#define THREADING_BUCKET_NS 10000000ull
struct threading_bucket {
    uint64_t t_ns;     /* bucket start (CLOCK_MONOTONIC) */
    double active_omp; /* threads in OpenMP region bodies (average over the bucket) */
    double runnable;   /* threads running or waiting on a runqueue, all processes */
    double cpus;       /* usable CPUs */
};
struct threading_op {
    char name[160];            /* operator, or function that opened the region */
    char python[160];          /* innermost Python file:line, "" when none */
    uint64_t samples;          /* samples in OpenMP regions charged to it */
    uint64_t oversub_samples;  /* of those, in oversubscribed buckets */
};
struct threading_summary {
    bool has_sched, has_ompt;
    bool attached;             /* opprof attach: scheduling is read by the agent only, so it cannot be there */
    char view[512];            /* which view and runtime were used, one sentence */
    unsigned online, affinity; double cgroup_limit, usable_cpus;
    unsigned nprocesses, nthreads;
    double run_s, wait_s, wait_share; uint64_t nivcsw;
    uint64_t switches_in; /* times threads were switched in (schedstat timeslices), summed over threads */
    double runnable_avg, runnable_max, oversub_avg, oversub_max, oversub_time_share;
    uint64_t regions; double regions_per_s, region_avg_us;
    uint64_t omp_events_lost; /* region begin/end events the agent lost (a full ring): regions left out */
    unsigned max_requested, max_team; uint64_t nested;
    double active_max, active_avg, imbalance;
    uint64_t region_samples, spin_samples, total_samples; double spin_share;
    uint64_t attributed_exact, attributed_near, unattributed, unrecorded;
    uint64_t contexts, contexts_repeated; /* openers' contexts at region begin, and those not walked */
    struct threading_op ops[8]; size_t nops;
    bool oversubscribed, multi_process_oversub;
    bool external_contention; /* runqueue wait without oversubscribing: other processes on the machine */
    char findings[3][768]; size_t nfindings;
    struct threading_bucket *timeline; size_t nbuckets; uint64_t bucket_ns;
};
/* Pure function of the profile. 0, or -1 on out of memory. */
int threading_analyze(const struct profile *p, struct threading_summary *out);
void threading_summary_free(struct threading_summary *s);

#endif
