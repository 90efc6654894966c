/*
 * analyze/profile_internal.h — private to analyze/: the profile's bookkeeping
 * (string interning, dedup indexes) shared by profile_model.c and the
 * loader, and the loader's interface to the features that read their own
 * records (struct stream_feature).
 */
#ifndef OPPROF_PROFILE_INTERNAL_H
#define OPPROF_PROFILE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/analyze.h"
#include "format/format.h"
#include "util/util.h"

struct profile_priv {
    char **strings;
    size_t nstrings, strings_cap;
    struct hashmap string_index, frame_index, stack_index, thread_index; /* -> array index */
    struct hashmap row_index; /* (thread, stack, flags) -> aggregated sample row */
    bool aggregate;           /* loading with PROFILE_LOAD_AGGREGATED */
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
/* profile_grow in place: arrayp is the address of the caller's array pointer
 * (any element type). 0, or -1 with errno ENOMEM leaving *arrayp and *cap as
 * they were — so a call site is one checked line and cannot lose its array
 * by assigning NULL over it. */
int profile_grow_to(void *arrayp, size_t *cap, size_t need, size_t elem) __attribute__((warn_unused_result));
/* Sorts p->samples by time once every row is in; rows are not added after
 * (profile_add_sample_row's index is dropped). */
void profile_sort_samples(struct profile *p);
/* Appends a copy of text to p->warnings; -1 on out of memory. */
int profile_add_warning(struct profile *p, const char *text);
/* profile_load.c: a loader warning, printf-style (cut at 1 KB). */
void profile_warnf(struct profile *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* splice.c: merges a native chain and a Python chain (both leaf first) into
 * out (room for nnative + npython). Returns the merged length. */
size_t splice_stacks(const struct prof_frame *frames, const uint32_t *native, size_t nnative,
                     const uint32_t *python, const bool *python_entry, size_t npython,
                     uint32_t *out);

/* threading_ops.c, for threading.c: a frame of an OpenMP runtime or of the
 * agent; the region samples of s counted per operator and Python line (with
 * those in buckets of b where more than oversub_runnable threads were
 * runnable; 0: none flagged) and the runtime's spin samples. 0, or -1 with
 * errno ENOMEM. */
bool threading_is_runtime_or_agent(const struct prof_frame *f);
bool threading_is_spin_name(const char *name); /* wait/yield/spin/futex... (threading_ops.c) */
/* Whether sample sm is runtime wait: a team thread outside a region body (as
 * the agent marked it), or a leaf in the OpenMP runtime's wait/spin code. The
 * Threading section's "runtime spin/wait" and the operator table's
 * OMP_RUNTIME_WAIT_NAME row count the same samples. */
bool threading_sample_is_runtime_wait(const struct profile *p, const struct prof_sample *sm);
int threading_samples_by_op(const struct profile *p, struct threading_summary *s, const struct threading_bucket *b,
                            size_t nb, uint64_t t0, uint64_t bns, double oversub_runnable);

/* ---- reading one stream (profile_stream.c) ----------------------------------
 * The loader reads each stream file through format/'s reader. It handles the
 * records every profile has (process, maps, threads, stacks, Python code,
 * samples, loss and limits, end, notes, agent cost); each feature that keeps
 * more (threading, ranks, counters) is a stream_feature in its own file that
 * registers handlers for its own record types, so adding a record type is a
 * handler in one file, not a case in the loader. */
struct symbolizer;
/* Reads stream file dir/name into p (asid: the image's address-space id for
 * the symbolizer; scratch: a buffer shared across streams). 0 when its header
 * was valid (even if it was truncated later), -1 when the file is not a
 * usable stream (a warning says why), -2 with errno when memory ran out. */
int profile_load_stream(struct profile *p, struct symbolizer *sym, const char *dir, const char *name,
                        uint32_t asid, uint32_t **scratch, size_t *scratch_cap);

/* profile_fold.c: whether the stream in buf (records from header_size)
 * needs its samples one by one (OpenMP regions, counters): then it is not
 * folded even when the profile is aggregated. *memory: it has memory
 * readings, whose charging needs the stream's samples with their times
 * (they are folded into the profile's rows after the stream's end hooks). */
bool stream_wants_samples(const char *buf, size_t size, size_t header_size, bool *memory);

struct stream_load; /* one stream being read: opaque to the features */

/* A SAMPLE record, kept until the maps are all read and its stack can be
 * symbolized. */
struct stream_sample {
    struct opr_sample s;
    uint32_t thread;         /* profile thread */
    uint32_t py_stack_plus1; /* the SAMPLE's Python tail */
    uint64_t omp_region;     /* the SAMPLE's OpenMP tail (0: none); threading maps it */
    uint32_t counters;       /* set by counters' COUNTER_SAMPLE handler: 1 + row (0: none) */
    size_t index;            /* in profile.samples once added */
};

struct profile *stream_profile(struct stream_load *sl);
uint32_t stream_pid(const struct stream_load *sl);
/* A loader warning prefixed with the stream's file name. */
void stream_warn(struct stream_load *sl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The SAMPLE that rec qualifies (rec comes right after it and the sample was
 * kept), or NULL. */
struct stream_sample *stream_sample_before(struct stream_load *sl, const struct opr_record *rec);
/* After all records (a feature's end hook): the stream's samples, in record
 * order, with their profile index. */
const struct stream_sample *stream_samples(const struct stream_load *sl, size_t *n);
/* After all records: whether an END record was read, and its latest time. */
bool stream_ended(const struct stream_load *sl, uint64_t *end_ns);
/* After all records: the profile stack of a STACK id with its Python stack
 * spliced in (py_plus1 0: none); UINT32_MAX with errno 0 when the stream has
 * no such stack, UINT32_MAX with errno ENOMEM when out of memory. */
uint32_t stream_resolve_stack(struct stream_load *sl, uint32_t stack_id, uint32_t py_plus1);
/* After all records: a profile stack of the Python frames of PYSTACK
 * py_plus1 - 1 only; UINT32_MAX with errno 0 when there is none, with errno
 * ENOMEM when out of memory. */
uint32_t stream_resolve_python(struct stream_load *sl, uint32_t py_plus1);

/* A feature's part in reading streams. state is state_size zeroed bytes per
 * stream. Hooks return 0, or -1 with errno (ENOMEM) to fail the load. */
struct stream_feature {
    const char *name;
    size_t state_size;
    /* After the file header: register record handlers (opr_reader_on with
     * arg = state; the handlers' ctx is the struct stream_load). */
    int (*begin)(struct stream_load *sl, void *state, const struct opr_file_header *h, struct opr_reader *r);
    /* After the records and the samples (in that order): resolve what
     * waited for the maps. Not called when reading failed. */
    int (*end)(struct stream_load *sl, void *state);
    void (*release)(void *state); /* always, last; may be NULL */
};
extern const struct stream_feature threading_stream_feature; /* threading_load.c */
extern const struct stream_feature accounting_stream_feature; /* accounting.c */
extern const struct stream_feature ranks_stream_feature;     /* ranks.c */
extern const struct stream_feature counters_stream_feature;  /* counters.c */
extern const struct stream_feature memory_stream_feature;    /* memory.c */

#endif
