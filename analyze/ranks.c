/*
 * analyze/ranks.c — one row per rank of a parallel job: CPU time, busy share,
 * top operator, time in communication (on CPU and blocked), and which rank is
 * the slow one and why.
 *
 * Where ranks come from, in order: the RANK records of the processes (the
 * agent reads RANK / OMPI_COMM_WORLD_RANK / PMI_RANK / SLURM_PROCID, so one
 * result holding a whole torchrun or mpirun job splits by rank); else the
 * info file's rank (opprof record -o prof.%r under the launcher); else, with
 * several results, one row per result. Processes without a rank (torchrun's
 * agent, mpirun itself) are counted apart.
 *
 * Communication on CPU: samples with a communication frame (ranks_is_comm_frame)
 * anywhere on the stack; Open MPI busy-polls while it waits, so its waits are
 * here. Blocked: OFFCPU intervals of Python threads (gloo waits on a condition
 * variable and is never sampled); those whose Python stack is inside a
 * torch.distributed collective are communication wait, the others other wait.
 *
 * The slowest rank is the one with the most CPU time outside communication
 * (ranks of a synchronous job share the wall clock; the slow one computes
 * while the others wait). What makes it slow: the operator (function, for
 * programs without operators) whose non-communication self time exceeds the
 * median of the other ranks by the most.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/profile_internal.h"

/* ---- the loader's side ---------------------------------------------------- */

struct prof_ranks *ranks_get(struct profile *p)
{
    if (!p->ranks) {
        p->ranks = calloc(1, sizeof *p->ranks);
        if (p->ranks)
            p->ranks->info_rank = p->ranks->info_local_rank = p->ranks->info_world_size = OPR_RANK_UNSET;
    }
    return p->ranks;
}

void ranks_free(struct prof_ranks *r)
{
    if (!r)
        return;
    free(r->info_rank_source);
    free(r->hostname);
    free(r->procs);
    free(r->offcpu);
    free(r);
}

int ranks_info_kv(struct profile *p, const char *key, const char *val)
{
    bool is_num = strcmp(key, "rank") == 0 || strcmp(key, "local_rank") == 0 || strcmp(key, "world_size") == 0;
    bool is_text = strcmp(key, "rank_source") == 0 || strcmp(key, "hostname") == 0;
    if (!is_num && !is_text)
        return 0;
    struct prof_ranks *r = ranks_get(p);
    if (!r) {
        errno = ENOMEM;
        return -1;
    }
    if (is_num) {
        int32_t *num = strcmp(key, "rank") == 0         ? &r->info_rank
                       : strcmp(key, "local_rank") == 0 ? &r->info_local_rank
                                                        : &r->info_world_size;
        char *end;
        long v = strtol(val, &end, 10);
        *num = (*end || v < 0 || v > 0x7fffffffL) ? OPR_RANK_UNSET : (int32_t)v;
        return 1;
    }
    char **text = strcmp(key, "rank_source") == 0 ? &r->info_rank_source : &r->hostname;
    free(*text);
    if (!(*text = strdup(val))) {
        errno = ENOMEM;
        return -1;
    }
    return 1;
}

/* The ranks row of process pid, added when new; NULL with errno ENOMEM. */
static struct prof_rank_process *rank_process(struct profile *p, uint32_t pid)
{
    struct prof_ranks *r = ranks_get(p);
    if (!r)
        return NULL;
    for (size_t i = 0; i < r->nprocs; i++)
        if (r->procs[i].pid == pid)
            return &r->procs[i];
    if (profile_grow_to(&r->procs, &r->procs_cap, r->nprocs + 1, sizeof *r->procs) != 0)
        return NULL;
    struct prof_rank_process *pr = &r->procs[r->nprocs++];
    memset(pr, 0, sizeof *pr);
    pr->pid = pid;
    pr->rank = pr->local_rank = pr->world_size = OPR_RANK_UNSET;
    return pr;
}

int ranks_add_offcpu(struct profile *p, uint64_t time_ns, uint64_t interval_ns, uint64_t offcpu_ns,
                     uint32_t thread, uint32_t stack)
{
    struct prof_ranks *r = ranks_get(p);
    if (!r || profile_grow_to(&r->offcpu, &r->offcpu_cap, r->noffcpu + 1, sizeof *r->offcpu) != 0) {
        errno = ENOMEM;
        return -1;
    }
    r->offcpu[r->noffcpu++] = (struct prof_offcpu){time_ns, interval_ns, offcpu_ns, thread, stack};
    return 0;
}

/* ---- the stream feature: RANK and OFFCPU records, each process's wall time --- */

struct ranks_stream {
    struct opr_offcpu *offcpu; /* resolved once the maps are read */
    size_t noffcpu, offcpu_cap;
};

/* The stream's process in the ranks table; ENOMEM when it cannot be made. */
static struct prof_rank_process *stream_rank_process(struct stream_load *sl)
{
    struct prof_rank_process *pr = rank_process(stream_profile(sl), stream_pid(sl));
    if (!pr)
        errno = ENOMEM;
    return pr;
}

/* The rank variables the agent saw. Older agents wrote none; a short body is
 * ignored, not reported, as before the reader existed. */
static int on_rank(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct opr_rank r;
    if (rec->len < sizeof r)
        return 0;
    memcpy(&r, rec->body, sizeof r);
    struct prof_rank_process *pr = stream_rank_process(ctx);
    if (!pr)
        return -1;
    if (r.rank < 0)
        return 0;
    pr->rank = r.rank; /* the last record wins: the program may set RANK itself */
    pr->local_rank = r.local_rank;
    pr->world_size = r.world_size;
    pr->source = r.source;
    return 0;
}

static int on_offcpu(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)ctx;
    struct ranks_stream *rs = arg;
    if (rec->len < sizeof *rs->offcpu)
        return 0;
    if (profile_grow_to(&rs->offcpu, &rs->offcpu_cap, rs->noffcpu + 1, sizeof *rs->offcpu) != 0)
        return -1;
    memcpy(&rs->offcpu[rs->noffcpu++], rec->body, sizeof *rs->offcpu);
    return 0;
}

static int stream_begin(struct stream_load *sl, void *state, const struct opr_file_header *h, struct opr_reader *r)
{
    struct prof_rank_process *pr = stream_rank_process(sl);
    if (!pr)
        return -1;
    if (pr->start_ns == 0 || h->start_ns < pr->start_ns)
        pr->start_ns = h->start_ns; /* the first image of the pid (exec keeps the pid) */
    if (opr_reader_on(r, OPR_REC_RANK, 0, on_rank, state) != 0)
        return -1;
    return opr_reader_on(r, OPR_REC_OFFCPU, 0, on_offcpu, state);
}

/* The process's wall time ends at its END record; blocked Python threads
 * get their Python stacks now that the stream's code objects are known. */
static int stream_end(struct stream_load *sl, void *state)
{
    struct ranks_stream *rs = state;
    struct profile *p = stream_profile(sl);
    uint64_t end_ns;
    if (stream_ended(sl, &end_ns)) {
        struct prof_rank_process *pr = stream_rank_process(sl);
        if (!pr)
            return -1;
        if (end_ns > pr->end_ns)
            pr->end_ns = end_ns;
    }
    for (size_t i = 0; i < rs->noffcpu; i++) {
        const struct opr_offcpu *o = &rs->offcpu[i];
        uint32_t thread = profile_add_thread(p, stream_pid(sl), o->tid, NULL);
        if (thread == UINT32_MAX)
            return -1;
        /* UINT32_MAX with errno 0: the record has no Python stack, kept as such. */
        uint32_t stack = stream_resolve_python(sl, o->py_stack_id_plus1);
        if (stack == UINT32_MAX && errno == ENOMEM)
            return -1;
        if (ranks_add_offcpu(p, o->time_ns, o->interval_ns, o->offcpu_ns, thread, stack) != 0)
            return -1;
    }
    return 0;
}

static void stream_release(void *state)
{
    struct ranks_stream *rs = state;
    free(rs->offcpu);
}

const struct stream_feature ranks_stream_feature = {
    .name = "ranks",
    .state_size = sizeof(struct ranks_stream),
    .begin = stream_begin,
    .end = stream_end,
    .release = stream_release,
};

/* ---- what is communication --------------------------------------------- */

static bool has_prefix(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static bool is_comm_module(const char *m)
{
    static const char *const prefixes[] = {"libmpi", "libopen-pal", "libopen-rte", "libpmix", "mca_",
                                           "libucp", "libuct", "libucs", "libgloo", "libfabric", "libpsm"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (has_prefix(m, prefixes[i]))
            return true;
    return false;
}

/* torch.distributed's collectives and point-to-point calls, as Python
 * functions of torch/distributed/ (distributed_c10d.py and friends). */
static bool is_comm_python(const char *name, const char *file)
{
    if (!file || !strstr(file, "/torch/distributed/"))
        return false;
    static const char *const calls[] = {
        "all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_into_tensor", "_all_gather_base",
        "all_gather_object", "all_gather_coalesced", "broadcast", "broadcast_object_list", "barrier",
        "monitored_barrier", "reduce", "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base",
        "gather", "gather_object", "scatter", "scatter_object_list", "all_to_all", "all_to_all_single",
        "send", "recv", "isend", "irecv", "batch_isend_irecv", "wait"};
    const char *dot = strrchr(name, '.'); /* qualname: Work.wait, Class.method */
    const char *leaf = dot ? dot + 1 : name;
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
        if (strcmp(leaf, calls[i]) == 0)
            return true;
    return false;
}

bool ranks_is_comm_frame(const struct prof_frame *f)
{
    if (f->kind == FRAME_PYTHON)
        return is_comm_python(f->name, f->source_file);
    const char *n = f->name;
    if (has_prefix(n, "gloo::") || strstr(n, "c10d::ProcessGroupGloo") || strstr(n, "c10d::ProcessGroupMPI") ||
        has_prefix(n, "MPI_") || has_prefix(n, "PMPI_") || has_prefix(n, "ompi_") || has_prefix(n, "mca_") ||
        has_prefix(n, "opal_progress") || has_prefix(n, "ucp_") || has_prefix(n, "uct_"))
        return true;
    return f->module && is_comm_module(f->module);
}

/* Per stack: 1 when a frame is communication. */
static uint8_t *comm_stacks(const struct profile *p)
{
    uint8_t *frame_comm = calloc(p->nframes + 1, 1);
    uint8_t *comm = calloc(p->nstacks + 1, 1);
    if (!frame_comm || !comm) {
        free(frame_comm);
        free(comm);
        return NULL;
    }
    for (size_t f = 0; f < p->nframes; f++)
        frame_comm[f] = ranks_is_comm_frame(&p->frames[f]);
    for (size_t s = 0; s < p->nstacks; s++)
        for (uint32_t k = 0; k < p->stacks[s].nframes && !comm[s]; k++)
            comm[s] = frame_comm[p->stacks[s].frames[k]];
    free(frame_comm);
    return comm;
}

/* ---- the rank table -------------------------------------------------------- */

/* The rank of process pid in p: its RANK record, else the info file's. */
int32_t ranks_rank_of_pid(const struct profile *p, uint32_t pid)
{
    const struct prof_ranks *r = p->ranks;
    if (!r)
        return OPR_RANK_UNSET;
    for (size_t i = 0; i < r->nprocs; i++)
        if (r->procs[i].pid == pid && r->procs[i].rank != OPR_RANK_UNSET)
            return r->procs[i].rank;
    return r->info_rank;
}

struct unit {
    size_t profile;
    int32_t rank;
    size_t *samples;
    size_t nsamples, cap;
    uint64_t start_ns, end_ns;
};

/* The unit of (profile, rank), added when new; -2 with errno ENOMEM. */
static long unit_index(struct unit **units, size_t *nunits, size_t *cap, size_t profile, int32_t rank)
{
    for (size_t i = 0; i < *nunits; i++)
        if ((*units)[i].profile == profile && (*units)[i].rank == rank)
            return (long)i;
    if (profile_grow_to(units, cap, *nunits + 1, sizeof **units) != 0)
        return -2; /* -1 is "no unit" to the caller */
    memset(&(*units)[*nunits], 0, sizeof **units);
    (*units)[*nunits].profile = profile;
    (*units)[*nunits].rank = rank;
    return (long)(*nunits)++;
}

/* By rank, then by result (unranked results keep their order). */
static int compare_units(const void *a, const void *b)
{
    const struct unit *x = a, *y = b;
    if (x->rank != y->rank && x->rank != OPR_RANK_UNSET && y->rank != OPR_RANK_UNSET)
        return x->rank < y->rank ? -1 : 1;
    return x->profile < y->profile ? -1 : x->profile > y->profile;
}

/* A view of p holding only some of its samples: shares everything else, so
 * the hotspot functions run on one rank without copying the profile. */
static struct profile view_of(const struct profile *p, const size_t *idx, size_t n, struct prof_sample *buf,
                              const uint8_t *comm, bool skip_comm)
{
    struct profile v = *p;
    size_t k = 0;
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) {
        const struct prof_sample *s = &p->samples[idx[i]];
        if (skip_comm && comm && s->stack < p->nstacks && comm[s->stack])
            continue;
        buf[k++] = *s;
        w += s->weight;
    }
    v.samples = buf;
    v.nsamples = k;
    v.total_weight = w;
    return v;
}

/* The first row that names an operator (or a function). */
static const struct hotspot_row *top_row(const struct hotspot_table *t)
{
    for (size_t i = 0; i < t->nrows; i++)
        if (!is_no_operator_row(t->rows[i].name) && t->rows[i].self > 0)
            return &t->rows[i];
    return NULL;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, compare_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void format_pids(const struct profile *p, const struct unit *u, char *out, size_t len)
{
    out[0] = '\0';
    size_t o = 0, shown = 0;
    for (size_t i = 0; i < p->nprocesses; i++) {
        uint32_t pid = p->processes[i].pid;
        int32_t r = ranks_rank_of_pid(p, pid);
        bool mine = u->rank == OPR_RANK_UNSET ? true : r == u->rank;
        if (!mine || p->processes[i].samples == 0)
            continue;
        if (shown == 3) {
            snprintf(out + o, len - o, ",...");
            return;
        }
        int w = snprintf(out + o, len - o, "%s%" PRIu32, shown ? "," : "", pid);
        if (w < 0 || (size_t)w >= len - o)
            return;
        o += (size_t)w;
        shown++;
    }
}

/* Self weight per key (op or function) of the units' non-communication samples. */
struct key_weights {
    char **names;
    uint64_t *weight; /* [nkeys * nunits] */
    size_t nkeys, cap;
};

static long key_index(struct key_weights *k, const char *name, size_t nunits)
{
    for (size_t i = 0; i < k->nkeys; i++)
        if (strcmp(k->names[i], name) == 0)
            return (long)i;
    if (k->nkeys == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 64;
        char **n = realloc(k->names, cap * sizeof *n);
        if (!n)
            return -1;
        k->names = n;
        uint64_t *w = realloc(k->weight, cap * nunits * sizeof *w);
        if (!w)
            return -1;
        k->weight = w;
        k->cap = cap;
    }
    k->names[k->nkeys] = strdup(name);
    if (!k->names[k->nkeys])
        return -1;
    memset(k->weight + k->nkeys * nunits, 0, nunits * sizeof *k->weight);
    return (long)k->nkeys++;
}

static bool has_operators(struct profile *const *profiles, size_t n)
{
    char buf[256];
    for (size_t i = 0; i < n; i++)
        for (size_t f = 0; f < profiles[i]->nframes; f++)
            if (op_frame_classify(profiles[i]->frames[f].name, buf, sizeof buf) != OP_FRAME_NONE)
                return true;
    return false;
}

/* Step 1: each sample of each profile to its unit (rank, or result when
 * there are no ranks); comm[pi] gets the communication stacks of profile
 * pi. 0, or -1 on out of memory. */
static int samples_to_units(struct profile *const *profiles, size_t n, uint8_t **comm, struct rank_summary *out,
                            struct unit **units, size_t *nunits, size_t *ucap)
{
    const char *host0 = NULL;
    out->one_host = true;
    for (size_t pi = 0; pi < n; pi++) {
        const struct profile *p = profiles[pi];
        if (!(comm[pi] = comm_stacks(p)))
            return -1;
        const char *host = p->ranks && p->ranks->hostname ? p->ranks->hostname : "";
        if (host0 && strcmp(host0, host) != 0)
            out->one_host = false;
        if (!host0)
            host0 = host;
        bool any_rank = false;
        if (p->ranks) {
            any_rank = p->ranks->info_rank != OPR_RANK_UNSET;
            for (size_t i = 0; i < p->ranks->nprocs && !any_rank; i++)
                any_rank = p->ranks->procs[i].rank != OPR_RANK_UNSET;
        }
        long *unit_of_thread = malloc((p->nthreads + 1) * sizeof *unit_of_thread);
        if (!unit_of_thread)
            return -1;
        for (size_t t = 0; t < p->nthreads; t++) {
            int32_t r = ranks_rank_of_pid(p, p->threads[t].pid);
            if (r == OPR_RANK_UNSET && (any_rank || n == 1))
                unit_of_thread[t] = -1; /* the launcher, or a result with no ranks */
            else if ((unit_of_thread[t] = unit_index(units, nunits, ucap, pi, r)) < 0) {
                free(unit_of_thread);
                return -1;
            }
        }
        for (size_t s = 0; s < p->nsamples; s++) {
            long u = p->samples[s].thread < p->nthreads ? unit_of_thread[p->samples[s].thread] : -1;
            if (u < 0) {
                out->unranked_samples += p->samples[s].count;
                continue;
            }
            struct unit *un = &(*units)[u];
            if (profile_grow_to(&un->samples, &un->cap, un->nsamples + 1, sizeof *un->samples) != 0) {
                free(unit_of_thread);
                return -1;
            }
            un->samples[un->nsamples++] = s;
        }
        if (p->ranks && p->ranks->noffcpu)
            out->offcpu_recorded = true; /* summed per row below */
        free(unit_of_thread);
    }
    return 0;
}

/* Step 2: a row's name, CPU and communication time, wall time and blocked
 * time, from the unit's samples and its processes. */
static void row_times(const struct profile *p, const struct unit *u, const uint8_t *comm, struct rank_row *row)
{
    double period_s = (double)(p->period_ns ? p->period_ns : 1000000) / 1e9;
    row->rank = u->rank;
    row->profile = u->profile;
    if (u->rank != OPR_RANK_UNSET)
        snprintf(row->label, sizeof row->label, "rank %d", (int)u->rank);
    else {
        const char *slash = p->dir ? strrchr(p->dir, '/') : NULL;
        snprintf(row->label, sizeof row->label, "%s", slash && slash[1] ? slash + 1 : (p->dir ? p->dir : "?"));
    }
    snprintf(row->host, sizeof row->host, "%s", p->ranks && p->ranks->hostname ? p->ranks->hostname : "");
    format_pids(p, u, row->pids, sizeof row->pids);

    uint64_t first = UINT64_MAX, last = 0, comm_w = 0;
    for (size_t i = 0; i < u->nsamples; i++) {
        const struct prof_sample *s = &p->samples[u->samples[i]];
        row->weight += s->weight;
        row->samples += s->count;
        if (s->stack < p->nstacks && comm[s->stack])
            comm_w += s->weight;
        /* A row may stand for several samples (PROFILE_LOAD_AGGREGATED):
         * the first and last of its thread bound them, and every sample of
         * a thread belongs to one unit. */
        const struct prof_thread *th = s->thread < p->nthreads ? &p->threads[s->thread] : NULL;
        uint64_t lo = th ? th->first_ns : s->time_ns, hi = th ? th->last_ns : s->time_ns;
        first = lo < first ? lo : first;
        last = hi > last ? hi : last;
    }
    row->cpu_s = (double)row->weight * period_s;
    row->comm_cpu_s = (double)comm_w * period_s;
    row->compute_s = row->cpu_s - row->comm_cpu_s;

    /* Wall: the rank's processes from stream start to END; else its samples. */
    uint64_t start = UINT64_MAX, end = 0;
    if (p->ranks)
        for (size_t i = 0; i < p->ranks->nprocs; i++) {
            const struct prof_rank_process *pr = &p->ranks->procs[i];
            int32_t r = pr->rank != OPR_RANK_UNSET ? pr->rank : p->ranks->info_rank;
            if (u->rank != OPR_RANK_UNSET && r != u->rank)
                continue;
            if (pr->start_ns && pr->start_ns < start)
                start = pr->start_ns;
            if (pr->end_ns > end)
                end = pr->end_ns;
        }
    if (start == UINT64_MAX)
        start = first != UINT64_MAX ? first : 0;
    if (end < last)
        end = last;
    row->wall_s = end > start ? (double)(end - start) / 1e9 : 0;
    row->busy = row->wall_s > 0 ? row->cpu_s / row->wall_s : 0;

    /* Blocked time of its Python threads. */
    if (p->ranks)
        for (size_t i = 0; i < p->ranks->noffcpu; i++) {
            const struct prof_offcpu *o = &p->ranks->offcpu[i];
            if (o->thread >= p->nthreads)
                continue;
            int32_t r = ranks_rank_of_pid(p, p->threads[o->thread].pid);
            if (u->rank != OPR_RANK_UNSET ? r != u->rank : false)
                continue;
            bool c = o->stack < p->nstacks && comm[o->stack];
            *(c ? &row->comm_wait_s : &row->other_wait_s) += (double)o->offcpu_ns / 1e9;
        }
}

/* Step 3: a row's top operator (all its samples) and the self weight of
 * each key over its non-communication samples (column ui of keys). 0, or -1
 * on out of memory. */
static int row_keys(const struct profile *p, const struct unit *u, const uint8_t *comm, enum group_by by, size_t ui,
                    size_t nunits, struct rank_row *row, struct key_weights *keys)
{
    struct prof_sample *buf = malloc((u->nsamples ? u->nsamples : 1) * sizeof *buf);
    if (!buf)
        return -1;
    struct profile v = view_of(p, u->samples, u->nsamples, buf, comm, false);
    struct hotspot_table t;
    if (hotspots_compute(&v, by, &t) != 0) {
        free(buf);
        return -1;
    }
    hotspots_sort(&t, SORT_SELF);
    const struct hotspot_row *top = top_row(&t);
    if (top) {
        snprintf(row->top, sizeof row->top, "%s", top->name);
        row->top_share = row->weight ? (double)top->self / (double)row->weight : 0;
    }
    hotspots_free(&t);
    v = view_of(p, u->samples, u->nsamples, buf, comm, true);
    if (hotspots_compute(&v, by, &t) != 0) {
        free(buf);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < t.nrows && rc == 0; i++) {
        if (is_no_operator_row(t.rows[i].name) || t.rows[i].self == 0)
            continue;
        long k = key_index(keys, t.rows[i].name, nunits);
        if (k < 0)
            rc = -1;
        else
            keys->weight[(size_t)k * nunits + ui] += t.rows[i].self;
    }
    hotspots_free(&t);
    free(buf);
    return rc;
}

/* Step 5: the Python line that runs the slowest key on the slow rank. */
static void slowest_python_line(const struct profile *sp, const struct unit *u, const uint8_t *comm,
                                struct rank_summary *out)
{
    struct prof_sample *buf = malloc((u->nsamples ? u->nsamples : 1) * sizeof *buf);
    if (!buf)
        return;
    struct profile v = view_of(sp, u->samples, u->nsamples, buf, comm, true);
    struct hotspot_table t;
    if (hotspots_op_neighbours(&v, out->slowest_key, false, &t) == 0) {
        hotspots_sort(&t, SORT_TOTAL);
        for (size_t i = 0; i < t.nrows; i++)
            if (strcmp(t.rows[i].name, NO_PYTHON_FRAME_NAME) != 0) {
                snprintf(out->slowest_python, sizeof out->slowest_python, "%s", t.rows[i].name);
                break;
            }
        hotspots_free(&t);
    }
    free(buf);
}

/* Step 4: the slowest rank (most compute) and the key whose time there
 * exceeds the median of the other ranks (with two ranks: the other one) by
 * the most. vals has room for nunits values. */
static void find_slowest(struct profile *const *profiles, const struct unit *units, size_t nunits,
                         uint8_t *const *comm, const struct key_weights *keys, double *vals, struct rank_summary *out)
{
    size_t slow = 0, nv = 0;
    for (size_t i = 0; i < nunits; i++)
        if (out->rows[i].compute_s > out->rows[slow].compute_s)
            slow = i;
    for (size_t i = 0; i < nunits; i++)
        if (i != slow)
            vals[nv++] = out->rows[i].compute_s;
    out->median_compute_s = median(vals, nv);
    out->slowest = (int)slow;
    const struct profile *sp = profiles[units[slow].profile];
    double period_s = (double)(sp->period_ns ? sp->period_ns : 1000000) / 1e9;
    double best = -1;
    for (size_t k = 0; k < keys->nkeys; k++) {
        nv = 0;
        for (size_t i = 0; i < nunits; i++)
            if (i != slow)
                vals[nv++] = (double)keys->weight[k * nunits + i];
        double mine = (double)keys->weight[k * nunits + slow];
        double med = median(vals, nv);
        if (mine - med > best) {
            best = mine - med;
            snprintf(out->slowest_key, sizeof out->slowest_key, "%s", keys->names[k]);
            out->slowest_key_s = mine * period_s;
            out->median_key_s = med * period_s;
        }
    }
    if (out->by_operator && out->slowest_key[0])
        slowest_python_line(sp, &units[slow], comm[units[slow].profile], out);
}

int ranks_analyze(struct profile *const *profiles, size_t n, struct rank_summary *out)
{
    memset(out, 0, sizeof *out);
    out->slowest = -1;
    out->by_operator = has_operators(profiles, n);
    enum group_by by = out->by_operator ? GROUP_OP : GROUP_FUNCTION;
    struct unit *units = NULL;
    size_t nunits = 0, ucap = 0;
    uint8_t **comm = calloc(n, sizeof *comm);
    int rc = -1;
    struct key_weights keys = {0};
    double *vals = NULL;
    if (!comm)
        return -1;
    if (samples_to_units(profiles, n, comm, out, &units, &nunits, &ucap) != 0)
        goto done;
    if (nunits > 1)
        qsort(units, nunits, sizeof *units, compare_units);
    out->rows = calloc(nunits ? nunits : 1, sizeof *out->rows);
    vals = calloc(nunits ? nunits : 1, sizeof *vals);
    if (!out->rows || !vals)
        goto done;
    out->nrows = nunits;
    for (size_t ui = 0; ui < nunits; ui++) {
        const struct unit *u = &units[ui];
        row_times(profiles[u->profile], u, comm[u->profile], &out->rows[ui]);
        if (row_keys(profiles[u->profile], u, comm[u->profile], by, ui, nunits, &out->rows[ui], &keys) != 0)
            goto done;
    }
    if (nunits >= 2)
        find_slowest(profiles, units, nunits, comm, &keys, vals, out);
    rc = 0;
done:
    for (size_t i = 0; i < nunits; i++)
        free(units[i].samples);
    free(units);
    for (size_t i = 0; i < n; i++)
        free(comm[i]);
    free(comm);
    for (size_t k = 0; k < keys.nkeys; k++)
        free(keys.names[k]);
    free(keys.names);
    free(keys.weight);
    free(vals);
    if (rc != 0)
        rank_summary_free(out);
    return rc;
}

void rank_summary_free(struct rank_summary *s)
{
    free(s->rows);
    s->rows = NULL;
    s->nrows = 0;
}
