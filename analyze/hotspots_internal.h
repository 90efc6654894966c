/*
 * analyze/hotspots_internal.h — the row builder of analyze/hotspots.c, shared
 * with analyze/hotspots_torch.c (the operator / Python-line / kernel views).
 * Not part of analyze.h: nothing outside analyze/ builds hotspot rows.
 */
#ifndef OPPROF_HOTSPOTS_INTERNAL_H
#define OPPROF_HOTSPOTS_INTERNAL_H

#include <stdint.h>
#include "analyze/analyze.h"
#include "util/util.h"

/* A growable row array plus a hash index on (name, module). Zero-initialize. */
struct hs_builder {
    struct hotspot_row *rows;
    size_t nrows, cap;
    uint32_t *gen;        /* per row: 1 + index of the last stack that counted it */
    const char **src_file;/* per row: source file of the lowest line seen */
    int *src_line;
    struct hashmap index; /* (name, module) -> row; set up by the first hs_builder_row */
    /* per-sample counters (analyze/counters.c): sums per fold key (a stack or
     * thread index) and per row; ctr_width 0 when the profile has none */
    double *key_ctr, *row_ctr;
    size_t ctr_width, nkeys, row_ctr_rows;
    const struct prof_counters *counters;
};
/* Folds the profile's counters per stack (by_stack) or per thread, so that
 * hs_builder_self_counters can add them to rows. No-op without counters. */
void hs_builder_use_counters(struct hs_builder *b, const struct profile *p, bool by_stack);
/* Adds the counters of fold key `key` to row r (where r is that key's self row). */
void hs_builder_self_counters(struct hs_builder *b, size_t r, size_t key);

/* The row for (name, module), added empty when new; -1 on out of memory.
 * module NULL is a key of its own. */
long hs_builder_row(struct hs_builder *b, const char *name, const char *module);
/* Remembers the lowest source line of f for the row's source column. */
void hs_builder_note_source(struct hs_builder *b, size_t row, const struct prof_frame *f);
/* Hands the rows to out (percentages of the profile's total weight) and frees
 * the index; -1 (everything freed) on out of memory. */
int hs_builder_finish(struct hs_builder *b, const struct profile *p, uint64_t counted_weight,
                      struct hotspot_table *out);
void hs_builder_abort(struct hs_builder *b);
/* Weight and count per stack index; index nstacks holds samples with a bad stack. */
int hs_fold_by_stack(const struct profile *p, uint64_t **weight, uint64_t **count);
/* The same for the samples that are OpenMP runtime wait only
 * (threading_sample_is_runtime_wait): the operator views' OMP_RUNTIME_WAIT_NAME. */
int hs_fold_runtime_wait(const struct profile *p, uint64_t **weight, uint64_t **count);

/* GROUP_OP, GROUP_LINE, GROUP_PYTHON, GROUP_KERNEL (analyze/hotspots_torch.c). */
int hotspots_compute_torch(const struct profile *p, enum group_by by, struct hotspot_table *out);

/* ---- operator frames of a profile (analyze/operators.c) ------------------ */

/* Every frame classified once: op id and kind per frame. */
struct op_index {
    uint32_t *frame_op;  /* per frame: 0 = no operator, else 1 + index into names */
    uint8_t *frame_kind; /* enum op_frame_kind per frame */
    char **names;        /* op names ("aten::mm", "AddmmBackward0") */
    size_t nnames;
    bool any_op;         /* some frame is an operator frame */
    bool any_python;     /* some frame is a Python frame */
};
int op_index_build(const struct profile *p, struct op_index *ix);
void op_index_free(struct op_index *ix);
/* Whether the stack has no ATen or autograd frame, so that at::native /
 * at::cpu frames count as its operator frames (the fallback rule). */
bool op_stack_fallback(const struct op_index *ix, const struct profile *p, const struct prof_stack *st);
/* 1 + op id of the frame at position i of st (given the stack's fallback
 * flag), 0 when it is not an operator frame there. */
uint32_t op_frame_at(const struct op_index *ix, const struct profile *p, const struct prof_stack *st,
                     size_t i, bool fallback);
/* Position of the innermost operator frame of st, -1 when there is none. */
long op_stack_innermost(const struct op_index *ix, const struct profile *p, const struct prof_stack *st);
/* Position of the first Python frame at or rootward of position from, -1 when none. */
long python_frame_from(const struct profile *p, const struct prof_stack *st, size_t from);
long user_python_frame_from(const struct profile *p, const struct prof_stack *st, size_t from);

#endif
