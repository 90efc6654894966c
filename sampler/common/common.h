/*
 * sampler/common/common.h — code both writers of the raw stream share (the
 * injected agent and the launcher's attach mode), built once under the
 * agent's rules: libc only, no sanitizers, nothing that calls back into the
 * workload. Signal-handler code is marked where it is called from there.
 *
 *   rank_env.c         which rank of a parallel job this process is
 *   python_linetable.c CPython 3.11 line tables
 *   python_layout.h    CPython struct layouts (read by both frame walkers)
 *
 * The stream itself (framing, id tables, MAP/PROCESS/THREAD) is written by
 * format/'s one writer (format/format.h, "Stream writer"), also built into
 * this library; below are the two small adapters both samplers hand it their
 * Python frames through.
 */
#ifndef OPPROF_SAMPLER_COMMON_H
#define OPPROF_SAMPLER_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "format/format.h"

/* Reads the rank variables of the environment (getenv), first hit in the
 * order RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID. Pure apart from
 * getenv; used by the launcher and (compiled in) by the agent. */
void opr_rank_from_env(struct opr_rank *out);
/* The same from another view of the environment (the agent's copy). */
void opr_rank_from_lookup(struct opr_rank *out, const char *(*lookup)(const char *name, void *ctx), void *ctx);
/* The i-th variable opr_rank_from_lookup reads (RANK, LOCAL_RANK, ...); NULL past the last. */
const char *opr_rank_variable(size_t i);
const char *opr_rank_source_name(uint32_t source); /* "RANK", ..., "" */

/* One Python frame as the handler saw it (names are resolved later). */
struct py_frame_ref {
    uint64_t code;        /* PyCodeObject address */
    uint64_t fingerprint; /* py_code_fingerprint (python_layout.h) */
    int32_t instr;        /* code-unit offset of the executing instruction, -1 before the first */
    uint32_t is_entry;    /* the frame was entered from C (a native eval loop frame below it) */
};

/* ---- handing captured Python frames to the stream writer ------------------ */
/* The writer's keys (format/format.h) of n captured frames, n clamped to
 * OPR_MAX_PYFRAMES; returns how many were filled. */
static inline unsigned py_frame_keys(const struct py_frame_ref *frames, unsigned n, struct opr_pyframe_key *out)
{
    if (n > OPR_MAX_PYFRAMES)
        n = OPR_MAX_PYFRAMES;
    for (unsigned i = 0; i < n; i++)
        out[i] = (struct opr_pyframe_key){frames[i].code, frames[i].fingerprint, frames[i].instr,
                                          frames[i].is_entry, 0};
    return n;
}

/* Fills a resolver's names into the writer's struct (longer names are cut at
 * its field sizes). */
static inline void py_code_names_copy(struct opr_pycode_names *out, const char *filename, const char *qualname,
                                      int first_line)
{
    size_t f = strnlen(filename, sizeof out->filename - 1), q = strnlen(qualname, sizeof out->qualname - 1);
    memcpy(out->filename, filename, f);
    out->filename[f] = '\0';
    memcpy(out->qualname, qualname, q);
    out->qualname[q] = '\0';
    out->first_line = first_line;
}

#endif
