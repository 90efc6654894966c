/*
 * analyze/accounting.c — ACCOUNTING records (docs/format.md): per process,
 * CPU time that produced no sample (SIGTRAP blocked, threads shorter than a
 * period), the agent's start-up and shutdown CPU time, and samples a full
 * disk kept out of the stream. Summed into profile.acct for the report
 * header's "unsampled" line and the overhead line (issue 18, items 5-7).
 */
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

static int stream_begin(struct stream_load *sl, void *state, const struct opr_file_header *h, struct opr_reader *r)
{
    (void)sl, (void)h;
    return opr_reader_on(r, OPR_REC_ACCOUNTING, sizeof(struct opr_accounting), on_accounting, state);
}

const struct stream_feature accounting_stream_feature = {
    .name = "accounting",
    .state_size = sizeof(int), /* no state; a size the loader can allocate */
    .begin = stream_begin,
};
