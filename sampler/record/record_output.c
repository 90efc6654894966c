/*
 * sampler/record/record_output.c — `opprof record -o` patterns: %r rank,
 * %p pid, %h short host name, %% a percent (one result per rank of a job).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sampler/common/common.h"
#include "sampler/record/record.h"

int record_expand_output(const char *pattern, long pid, char *out, size_t outlen, char *err, size_t errlen)
{
    size_t o = 0;
    for (const char *s = pattern; *s; s++) {
        char piece[300];
        if (*s != '%') {
            piece[0] = *s;
            piece[1] = '\0';
        } else if (s[1] == '%') {
            strcpy(piece, "%");
            s++;
        } else if (s[1] == 'p') {
            snprintf(piece, sizeof piece, "%ld", pid);
            s++;
        } else if (s[1] == 'h') {
            char host[256] = "";
            gethostname(host, sizeof host - 1);
            host[strcspn(host, ".")] = '\0'; /* short name: node01, not node01.cluster.example */
            snprintf(piece, sizeof piece, "%s", host[0] ? host : "unknown-host");
            s++;
        } else if (s[1] == 'r') {
            struct opr_rank r;
            opr_rank_from_env(&r);
            if (r.rank == OPR_RANK_UNSET) {
                snprintf(err, errlen,
                         "-o %s: %%r needs the job's rank but none of RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, "
                         "SLURM_PROCID is set: start opprof under torchrun/mpirun/srun (one opprof per rank), "
                         "or drop %%r (one opprof around the launcher records every rank in one directory)",
                         pattern);
                return -1;
            }
            snprintf(piece, sizeof piece, "%d", (int)r.rank);
            s++;
        } else {
            snprintf(err, errlen, "-o %s: unknown pattern %%%c; use %%r (rank), %%p (pid), %%h (host) or %%%% (a %%)",
                     pattern, s[1] ? s[1] : ' ');
            return -1;
        }
        size_t n = strlen(piece);
        if (o + n >= outlen) {
            snprintf(err, errlen, "-o %s: the expanded name is too long", pattern);
            return -1;
        }
        memcpy(out + o, piece, n);
        o += n;
    }
    out[o] = '\0';
    return 0;
}
