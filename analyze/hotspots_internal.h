/*
 * analyze/hotspots_internal.h — the row builder of analyze/hotspots.c, shared
 * with analyze/hotspots_torch.c (the operator / Python-line / kernel views).
 * Not part of analyze.h: nothing outside analyze/ builds hotspot rows.
 */
#ifndef OPPROF_HOTSPOTS_INTERNAL_H
#define OPPROF_HOTSPOTS_INTERNAL_H

#include <stdint.h>
#include "analyze/analyze.h"

struct hs_slot {
    uint32_t hash;
    uint32_t row_plus1; /* 0: empty slot */
};

/* A growable row array plus a hash index on (name, module). Zero-initialize. */
struct hs_builder {
    struct hotspot_row *rows;
    size_t nrows, cap;
    uint32_t *gen;        /* per row: 1 + index of the last stack that counted it */
    const char **src_file;/* per row: source file of the lowest line seen */
    int *src_line;
    struct hs_slot *slots;
    size_t nslots;        /* power of two */
};

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

#endif
