/*
 * sampler/common/rank_env.c — which rank of a parallel job this process is, as the
 * launchers say it in the environment.
 *
 * Compiled into both the launcher (opprof record -o prof.%r, the info file)
 * and the agent (the RANK record, so that one result directory holding
 * several rank processes can be split by rank). Not signal-handler code.
 *
 * Launchers and their variables (first one set wins, in this order):
 *   torchrun / torch.distributed env://   RANK, LOCAL_RANK, WORLD_SIZE
 *   Open MPI mpirun                       OMPI_COMM_WORLD_RANK, _LOCAL_RANK, _SIZE
 *   MPICH / Intel MPI (hydra)             PMI_RANK, MPI_LOCALRANKID, PMI_SIZE
 *   Slurm srun                            SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS
 * RANK goes first because torchrun run under mpirun/srun renumbers ranks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sampler/common/common.h"

struct rank_vars {
    uint32_t source;
    const char *rank, *local_rank, *world_size;
};

static const struct rank_vars rank_vars[] = {
    {OPR_RANK_FROM_RANK, "RANK", "LOCAL_RANK", "WORLD_SIZE"},
    {OPR_RANK_FROM_OMPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"},
    {OPR_RANK_FROM_PMI, "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"},
    {OPR_RANK_FROM_SLURM, "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"},
};

/* A non-negative decimal integer, or OPR_RANK_UNSET. */
static int32_t parse_int(const char *v)
{
    if (!v || !*v)
        return OPR_RANK_UNSET;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < 0 || n > 0x7fffffffL)
        return OPR_RANK_UNSET;
    return (int32_t)n;
}

static const char *lookup_getenv(const char *name, void *ctx)
{
    (void)ctx;
    return getenv(name);
}

void opr_rank_from_env(struct opr_rank *out)
{
    opr_rank_from_lookup(out, lookup_getenv, NULL);
}

void opr_rank_from_lookup(struct opr_rank *out, const char *(*lookup)(const char *name, void *ctx), void *ctx)
{
    memset(out, 0, sizeof *out);
    out->rank = out->local_rank = out->world_size = OPR_RANK_UNSET;
    for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++) {
        int32_t r = parse_int(lookup(rank_vars[i].rank, ctx));
        if (r == OPR_RANK_UNSET)
            continue;
        out->rank = r;
        out->local_rank = parse_int(lookup(rank_vars[i].local_rank, ctx));
        out->world_size = parse_int(lookup(rank_vars[i].world_size, ctx));
        out->source = rank_vars[i].source;
        return;
    }
}

const char *opr_rank_variable(size_t i)
{
    size_t n = sizeof rank_vars / sizeof rank_vars[0];
    if (i >= 3 * n)
        return NULL;
    const struct rank_vars *v = &rank_vars[i / 3];
    return i % 3 == 0 ? v->rank : i % 3 == 1 ? v->local_rank : v->world_size;
}

const char *opr_rank_source_name(uint32_t source)
{
    for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++)
        if (rank_vars[i].source == source)
            return rank_vars[i].rank;
    return "";
}
