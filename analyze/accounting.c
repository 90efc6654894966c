/*
 * analyze/accounting.c — ACCOUNTING records (docs/format.md): per process,
 * CPU time that produced no sample (SIGTRAP blocked, threads shorter than a
 * period), the agent's start-up and shutdown CPU time, and samples a full
 * disk kept out of the stream. Summed into profile.acct for the report
 * header's "unsampled" line and the overhead line (issue 18, items 5-7).
 * AGENT_CPU records: the agent's cost on CPU clocks, for the overhead line
 * (issue 17).
 */
#include <stddef.h>
#include <string.h>

#include "analyze/profile_internal.h"

static int on_accounting(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct profile *p = stream_profile(ctx);
    struct opr_accounting a;
    memcpy(&a, rec->body, sizeof a);
    p->acct.startup_cpu_ns += a.startup_cpu_ns + a.shutdown_cpu_ns;
    p->acct.unsampled_ns += a.unsampled_ns;
    p->acct.cpu_ns += a.unsampled_ns + a.sampled_ns; /* with the cost: see the header line */
    p->acct.trap_blocked_threads += a.trap_blocked_threads;
    p->acct.trap_blocked_cpu_ns += a.trap_blocked_cpu_ns;
    p->acct.threads_started += a.threads_started;
    p->acct.threads_sampled += a.threads_sampled;
    p->acct.unwritten_samples += a.unwritten_samples;
    p->acct.streams++;
    return 0;
}

_Static_assert(PROFILE_HANDLER_BUCKETS == OPR_HANDLER_BUCKETS, "profile.h's bucket count is format.h's");

/* AGENT_CPU: the handler's CPU time is known for the timed calls; their mean
 * times all calls of the same stream estimates the stream's total (the timed
 * calls are every Nth per thread, independent of what the handler did). */
static int on_agent_cpu(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct profile *p = stream_profile(ctx);
    struct opr_agent_cpu c = {0};
    /* older streams end before offcpu_same_wait, omp_hook_ns, clock_read_ns, drains, omp_team_wait_ns or timing_ns: 0 */
    memcpy(&c, rec->body, rec->len < sizeof c ? rec->len : sizeof c);
    struct profile_agent_cpu *a = &p->agent_cpu;
    if (c.handler_timed && c.handler_calls >= c.handler_timed) {
        /* A damaged record can make the estimate exceed any u64 (converting
         * that is undefined): at most the whole CPU a stream can claim. */
        double est = opr_agent_cpu_estimate_ns(&c);
        a->handler_cpu_est_ns += est < 1e18 ? (uint64_t)est : (uint64_t)1e18;
        /* older agents: the histogram's shift, the timed calls' clock read
         * weighted by them (with timing_ns the calls hold no read) */
        double reads = c.timing_ns ? 0 : (double)c.clock_read_ns * (double)c.handler_timed;
        a->clock_read_timed_ns += reads < 1e18 ? (uint64_t)reads : (uint64_t)1e18;
        double timing = opr_agent_cpu_timing_ns(&c);
        a->timing_ns += timing < 1e18 ? (uint64_t)timing : (uint64_t)1e18;
    }
    a->handler_timed += c.handler_timed;
    a->handler_calls += c.handler_calls;
    if (c.handler_timed == 0)
        a->untimed_calls += c.handler_calls;
    for (unsigned b = 0; b < OPR_HANDLER_BUCKETS && b < c.nbuckets; b++)
        a->buckets[b] += c.buckets[b];
    a->maps_rereads += c.maps_rereads;
    a->maps_probes += c.maps_probes;
    a->phdr_refreshes += c.phdr_refreshes;
    a->schedstat_reads += c.schedstat_reads;
    a->pystack_hits += c.pystack_hits;
    a->pystack_misses += c.pystack_misses;
    a->offcpu_same_wait += c.offcpu_same_wait;
    a->omp_hook_ns += c.omp_hook_ns;
    a->omp_team_wait_ns += c.omp_team_wait_ns;
    a->drains += c.drains;
    a->quiet_drains += c.quiet_drains;
    a->steady_drains += c.steady_drains;
    a->timed_every = c.timed_every;
    a->streams++;
    return 0;
}

void profile_agent_cpu_add(struct profile_agent_cpu *to, const struct profile_agent_cpu *from)
{
    to->handler_cpu_est_ns += from->handler_cpu_est_ns;
    to->handler_timed += from->handler_timed;
    to->handler_calls += from->handler_calls;
    to->untimed_calls += from->untimed_calls;
    for (unsigned b = 0; b < PROFILE_HANDLER_BUCKETS; b++)
        to->buckets[b] += from->buckets[b];
    to->maps_rereads += from->maps_rereads;
    to->maps_probes += from->maps_probes;
    to->phdr_refreshes += from->phdr_refreshes;
    to->schedstat_reads += from->schedstat_reads;
    to->pystack_hits += from->pystack_hits;
    to->pystack_misses += from->pystack_misses;
    to->offcpu_same_wait += from->offcpu_same_wait;
    to->omp_hook_ns += from->omp_hook_ns;
    to->omp_team_wait_ns += from->omp_team_wait_ns;
    to->drains += from->drains;
    to->quiet_drains += from->quiet_drains;
    to->steady_drains += from->steady_drains;
    to->clock_read_timed_ns += from->clock_read_timed_ns;
    to->timing_ns += from->timing_ns;
    if (from->timed_every)
        to->timed_every = from->timed_every;
    to->streams += from->streams;
}

/* The q-quantile (0..1) of the handler's CPU time per call from the
 * histogram, interpolated linearly inside its bucket (the open last bucket
 * answers with its lower bound). 0 when nothing was timed. */
double profile_handler_quantile_ns(const struct profile_agent_cpu *a, double q)
{
    return opr_bucket_quantile_ns(a->buckets, q);
}

static int stream_begin(struct stream_load *sl, void *state, const struct opr_file_header *h, struct opr_reader *r)
{
    (void)sl, (void)h;
    if (opr_reader_on(r, OPR_REC_AGENT_CPU, offsetof(struct opr_agent_cpu, offcpu_same_wait), on_agent_cpu, state) != 0)
        return -1;
    return opr_reader_on(r, OPR_REC_ACCOUNTING, sizeof(struct opr_accounting), on_accounting, state);
}

const struct stream_feature accounting_stream_feature = {
    .name = "accounting",
    .state_size = sizeof(int), /* no state; a size the loader can allocate */
    .begin = stream_begin,
};
