/*
 * analyze/profile_internal.h — private to analyze/: the profile's bookkeeping
 * (string interning, dedup indexes) shared by profile_model.c and
 * profile_load.c.
 */
#ifndef OPPROF_PROFILE_INTERNAL_H
#define OPPROF_PROFILE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/analyze.h"
#include "util/util.h"

/* profile_load.c's (stack, Python stack) map, until the loader moves to
 * util/util.h's hashmap like the indexes below. */
struct hash_slot {
    uint64_t hash;
    uint32_t value;
    uint32_t used;
};

/* Open addressing from a 64-bit hash to an index; equality decided by the caller. */
struct hash_index {
    struct hash_slot *slots;
    size_t cap, count;
};

struct profile_priv {
    char **strings;
    size_t nstrings, strings_cap;
    struct hashmap string_index, frame_index, stack_index, thread_index; /* -> array index */
    size_t frames_cap, stacks_cap, threads_cap, samples_cap, processes_cap, warnings_cap;
};

/* The profile's copy of s; NULL for NULL, and NULL (errno ENOMEM) when out
 * of memory. */
const char *profile_intern(struct profile *p, const char *s);

/* profile_info.c: reads DIR/info into p (command, event, period, times,
 * limits, OpenMP and rank keys). -1 with one sentence in err when the file
 * is missing or names another format. */
int profile_load_info(struct profile *p, const char *dir, char *err, size_t errlen);
/* Grows array to hold need elements of elem bytes. Like realloc: NULL with
 * errno ENOMEM when out of memory, array and *cap then unchanged and still
 * the caller's. Never aborts (util/util.h). */
void *profile_grow(void *array, size_t *cap, size_t need, size_t elem) __attribute__((warn_unused_result));
/* Appends a copy of text to p->warnings; -1 on out of memory. */
int profile_add_warning(struct profile *p, const char *text);

/* splice.c: merges a native chain and a Python chain (both leaf first) into
 * out (room for nnative + npython). Returns the merged length. */
size_t splice_stacks(const struct prof_frame *frames, const uint32_t *native, size_t nnative,
                     const uint32_t *python, const bool *python_entry, size_t npython,
                     uint32_t *out);

/* threading_ops.c, for threading.c: a frame of an OpenMP runtime or of the
 * agent; the region samples of s counted per operator and Python line (with
 * those in buckets of b where more than oversub_runnable threads were
 * runnable; 0: none flagged) and the runtime's spin samples. */
bool threading_is_runtime_or_agent(const struct prof_frame *f);
bool threading_is_spin_name(const char *name); /* wait/yield/spin/futex... (threading_ops.c) */
void threading_samples_by_op(const struct profile *p, struct threading_summary *s, const struct threading_bucket *b,
                             size_t nb, uint64_t t0, uint64_t bns, double oversub_runnable);

#endif
