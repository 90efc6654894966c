/*
 * analyze/ranks.h — ranks of a parallel job (analyze/ranks*.c).
 * Part of analyze/analyze.h, the folder's one interface: include that, not
 * this file, from outside analyze/.
 */
#ifndef OPPROF_ANALYZE_RANKS_H
#define OPPROF_ANALYZE_RANKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analyze/profile.h"

/* ------------------------------------------------------------------------- */
/* Ranks of a parallel job (analyze/ranks.c, analyze/ranks_merge.c,           */
/* report/ranks_section.c)                                                    */
/* ------------------------------------------------------------------------- */
/* What the loader keeps of the info file's rank keys and the RANK and OFFCPU
 * records (docs/format.md, "Ranks"). */
struct prof_rank_process {
    uint32_t pid;
    int32_t rank, local_rank, world_size; /* OPR_RANK_UNSET when not set */
    uint32_t source;                      /* enum opr_rank_source */
    uint64_t start_ns, end_ns;            /* stream start, END record (0: none) */
};
struct prof_offcpu {
    uint64_t time_ns, interval_ns, offcpu_ns;
    uint32_t thread; /* index into profile.threads */
    uint32_t stack;  /* profile stack of Python frames only; UINT32_MAX: none */
};
struct prof_ranks {
    int32_t info_rank, info_local_rank, info_world_size; /* the launcher's (-o %r runs) */
    char *info_rank_source, *hostname;
    struct prof_rank_process *procs; size_t nprocs, procs_cap;
    struct prof_offcpu *offcpu; size_t noffcpu, offcpu_cap;
};
struct prof_ranks *ranks_get(struct profile *p); /* creates it on first use */
void ranks_free(struct prof_ranks *r);
/* Loader hooks: an info key (1 when it was a rank key, 0 when not, -1 with
 * errno ENOMEM), OFFCPU intervals. The RANK, END and OFFCPU records are read
 * by ranks.c's stream_feature. */
int ranks_info_kv(struct profile *p, const char *key, const char *val);
/* 0, or -1 with errno ENOMEM. */
int ranks_add_offcpu(struct profile *p, uint64_t time_ns, uint64_t interval_ns, uint64_t offcpu_ns,
                     uint32_t thread, uint32_t stack);

/* Communication: a native frame of gloo, c10d's ProcessGroup*, MPI (MPI_*,
 * PMPI_*, ompi_*, mca_*, opal_progress, or any frame in libmpi, libopen-pal,
 * libopen-rte, an mca_* plugin, UCX), or a Python frame of a
 * torch.distributed collective (all_reduce, broadcast, barrier, ...). */
bool ranks_is_comm_frame(const struct prof_frame *f);
/* The rank of process pid: its RANK record, else the info file's rank, else
 * OPR_RANK_UNSET. */
int32_t ranks_rank_of_pid(const struct profile *p, uint32_t pid);

struct rank_row {
    int32_t rank;          /* OPR_RANK_UNSET: a result without rank (named by its dir) */
    char label[64];        /* "rank 1", or the dir's name */
    char host[64];
    char pids[64];         /* "1234" or "1234,1240" */
    size_t profile;        /* index of the profile it came from */
    uint64_t samples, weight;
    double cpu_s, wall_s, busy;       /* busy = cpu_s / wall_s */
    double comm_cpu_s, compute_s;     /* compute = cpu - comm cpu */
    double comm_wait_s, other_wait_s; /* off-CPU time of Python threads */
    char top[256];         /* top operator (or function) by self time, all samples */
    double top_share;      /* of this rank's CPU time */
};
struct rank_summary {
    struct rank_row *rows; size_t nrows;
    bool by_operator;      /* keys are operators, else functions */
    bool offcpu_recorded;  /* some result has OFFCPU records: the wait columns are measured */
    bool one_host;         /* every rank on one host: one clock */
    uint64_t unranked_samples; /* samples of processes that are no rank (torchrun, mpirun) */
    int slowest;           /* row index, -1 when fewer than 2 ranks */
    char slowest_key[256]; /* operator/function with the most excess compute vs the median rank */
    char slowest_python[256]; /* innermost Python line that runs it ("" when none) */
    double slowest_key_s, median_key_s; /* its time there, and the median of the other ranks */
    double median_compute_s;  /* of the other ranks */
};
/* Groups the samples of the profiles by rank (RANK records, else the info
 * file's rank, else one row per profile when there are several) and computes
 * the table. 0, or -1 on out of memory. */
int ranks_analyze(struct profile *const *profiles, size_t n, struct rank_summary *out);
void rank_summary_free(struct rank_summary *s);
/* One profile holding the samples of several (for the merged hotspot table):
 * frames, stacks, threads, processes and samples are copied; threading data
 * is not. 0, or -1 with one sentence in err. */
int profile_merge(struct profile *const *parts, size_t n, struct profile **out, char *err, size_t errlen);

#endif
