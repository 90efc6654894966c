/*
 * sampler/common/common.h — code both writers of the raw stream share (the
 * injected agent and the launcher's attach mode), built once under the
 * agent's rules: libc only, no sanitizers, nothing that calls back into the
 * workload. Signal-handler code is marked where it is called from there.
 *
 *   rank_env.c         which rank of a parallel job this process is
 *   id_table.c         byte-string -> id tables (stacks, Python code, stacks)
 *   map_ranges.c       sorted address ranges (which PCs are executable code)
 *   python_linetable.c CPython 3.11 line tables
 *   python_layout.h    CPython struct layouts (read by both frame walkers)
 */
#ifndef OPPROF_SAMPLER_COMMON_H
#define OPPROF_SAMPLER_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* ---- id_table.c: byte-string -> id tables for the stream writers ---------- */
struct id_table_entry {
    uint64_t hash;
    uint32_t id;
    uint32_t len;
    void *key; /* NULL marks an empty slot */
};
struct id_table {
    struct id_table_entry *entries;
    size_t cap, count;
};
/* Returns the key's id (ids count up from 0), -1 when out of memory. */
int64_t id_table_find_or_add(struct id_table *d, const void *key, size_t len, bool *added);
void id_table_clear(struct id_table *d);

/* ---- map_ranges.c ---------------------------------------------------------- */
struct map_range {
    uint64_t start, end;
};
bool map_ranges_contain(const struct map_range *r, size_t n, uint64_t pc); /* r sorted; handler-safe */
void map_ranges_sort(struct map_range *r, size_t n);

#endif
