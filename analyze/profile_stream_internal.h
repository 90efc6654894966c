/*
 * analyze/profile_stream_internal.h — private to the stream loader's two
 * files: profile_stream.c (reading a stream's records) and
 * profile_stream_stacks.c (turning its STACK and PYSTACK records into profile
 * stacks). The features see struct stream_load only through the accessors
 * in profile_internal.h; this header is what lets the loader's own two files
 * share its fields.
 */
#ifndef OPPROF_PROFILE_STREAM_INTERNAL_H
#define OPPROF_PROFILE_STREAM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/profile_internal.h"
#include "format/format.h"
#include "util/util.h"

struct raw_stack {
    uint32_t nframes;
    const uint64_t *pcs; /* points into the stream buffer */
    uint32_t global;     /* profile stack index once resolved, UINT32_MAX before */
};

struct raw_pycode {
    const char *qualname; /* interned; NULL until its PYCODE record is read */
    const char *filename;
    const char *basename;
};

struct raw_pystack {
    uint32_t nframes;
    const struct opr_pyframe *frames; /* points into the stream buffer */
};

/* Samples of one (thread, stack, Python stack, flags) folded while reading
 * (PROFILE_LOAD_AGGREGATED): the stream keeps one of these per distinct key,
 * not one stream_sample per sample. */
struct stream_row {
    uint32_t thread, stack_id, py_stack_plus1, flags;
    uint64_t weight, count, first_ns, last_ns;
};

struct stream_load {
    struct profile *p;
    struct symbolizer *sym;
    const char *name;
    uint32_t asid; /* address-space id handed to the symbolizer: one per image */
    uint32_t pid;
    struct raw_stack *stacks;
    size_t nstacks, stacks_cap;
    struct raw_pycode *pycodes;
    size_t npycodes, pycodes_cap;
    struct raw_pystack *pystacks;
    size_t npystacks, pystacks_cap;
    struct hashmap mixed;       /* stack id << 32 | pystack id + 1 -> profile stack (u64 keys) */
    struct stream_sample *samples;
    size_t nsamples, samples_cap;
    bool aggregate;             /* fold samples into rows (stream_row) instead of samples */
    bool fold_late;             /* keep the stream's samples, fold them into profile rows (memory readings) */
    struct stream_row *rows;    /* in the order of their first sample */
    size_t nrows, rows_cap;
    struct hashmap row_index;   /* stream_row key -> index in rows */
    size_t nread;               /* samples kept, either way */
    size_t last_row;            /* the row the previous sample went to (a thread's samples come in runs) */
    uint32_t last_tid, last_thread; /* the previous sample's tid and profile thread (last_thread + 1: 0 none) */
    bool last_sample_kept;      /* the last SAMPLE record had a known stack and is in samples */
    uint64_t lost;
    struct opr_limits limits;   /* the last LIMITS record: cumulative */
    struct opr_unwind unwind;   /* the last UNWIND record: cumulative (added to the profile as deltas) */
    bool ended;
    uint64_t end_ns;
    uint32_t **scratch;         /* frame ids while building a stack, shared by all streams */
    size_t *scratch_cap;
    size_t stream_bytes;        /* size of the stream file: bounds every id (stream_id_fits) */
    void **chain_copies;        /* whole chains of STACK_TAIL/PYSTACK_TAIL records (malloc'ed) */
    size_t nchain_copies, chain_copies_cap, chain_copy_bytes;
    bool chain_copy_capped;     /* tails beyond the copy budget were skipped (warned once) */
};

/* profile_stream.c: whether an id can be real in a stream of this size (ids
 * are dense from 0, one record each: never more ids than records fit); room
 * in sl->stacks / sl->pystacks for an id (0, or -1 when out of memory). */
bool stream_id_fits(const struct stream_load *sl, uint32_t id, size_t min_record);
int stream_room_for_stack(struct stream_load *sl, uint32_t id);
int stream_room_for_pystack(struct stream_load *sl, uint32_t id);

/* profile_stream_stacks.c: STACK_TAIL and PYSTACK_TAIL records (opr_reader
 * callbacks; their whole chains are copied out, freed by
 * stream_free_chain_copies when the stream is done). */
int stream_on_stack_tail(void *ctx, void *arg, const struct opr_record *rec);
int stream_on_pystack_tail(void *ctx, void *arg, const struct opr_record *rec);
void stream_free_chain_copies(struct stream_load *sl);

/* profile_stream_stacks.c: true when the native stack of stack_id (resolved
 * already) ends in unnamed code in anonymous memory (counted as truncated). */
bool stream_ends_in_anonymous_code(const struct stream_load *sl, uint32_t stack_id);

#endif
