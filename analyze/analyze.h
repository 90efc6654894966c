/*
 * analyze/analyze.h — from a result directory to numbers.
 *
 * profile_load() reads a result directory (only through the raw format of
 * sampler/sampler.h), symbolizes every distinct (pid, pc) once, and builds an
 * in-memory profile: frames, stacks (as frame ids), threads, processes and
 * samples. Everything after that (hotspot tables, callers/callees) is a pure
 * function of the profile, which is what the unit tests exercise.
 */
#ifndef OPPROF_ANALYZE_H
#define OPPROF_ANALYZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------- */
/* The profile model                                                          */
/* ------------------------------------------------------------------------- */

enum frame_kind {
    FRAME_NATIVE = 0,  /* a symbolized native function */
    FRAME_UNKNOWN = 1, /* no symbol: shown as module+0xoffset */
    FRAME_PYTHON = 2,  /* a Python function: name = co_qualname, module = file
                          basename, source_file = co_filename, line = the line
                          executing in that frame when the sample was taken */
};

/* A distinct code location after symbolization. Two PCs inside the same
 * function are two frames with the same name. All strings are owned by the
 * profile and are never NULL (unknown pieces are ""), except source_file. */
struct prof_frame {
    const char *name;        /* function, or "libfoo.so+0x1234" when unknown */
    const char *module;      /* module basename, "[unknown]" when unmapped */
    const char *source_file; /* NULL when no line info */
    int line;
    enum frame_kind kind;
};

struct prof_stack {
    uint32_t nframes;
    uint32_t *frames; /* indices into profile.frames, leaf first */
};

struct prof_thread {
    uint32_t pid;
    uint32_t tid;
    char name[16];
    uint64_t samples;
    uint64_t first_ns, last_ns;
};

struct prof_process {
    uint32_t pid;
    uint32_t ppid;
    char *exe;
    char *cmdline;        /* argv joined with spaces */
    uint64_t samples;     /* samples read for this process */
    uint64_t lost;        /* samples the agent dropped (queue full) */
    uint64_t truncated;   /* samples whose stack hit the frame limit */
    uint64_t unwind_failed;
    bool ended_cleanly;   /* an END record was found */
    bool stream_truncated;/* the stream file ended inside a record */
    char **notes;         /* warnings the agent recorded */
    size_t nnotes;
};

struct prof_sample {
    uint64_t time_ns;
    uint32_t thread;  /* index into profile.threads */
    uint32_t stack;   /* index into profile.stacks */
    uint32_t weight;  /* timer periods this sample stands for */
    uint32_t flags;   /* OPR_SAMPLE_* */
};

struct profile {
    char *dir;
    /* From the info file. */
    char *command;
    char *event;
    uint64_t period_ns;
    unsigned frequency_hz;
    char *call_graph;
    uint64_t start_ns, end_ns;   /* monotonic; end_ns == 0 when recording did not finish */
    int exit_status;             /* -1 when unknown */
    int exit_signal;             /* 0 when the workload exited normally */
    bool complete;               /* the launcher wrote its final info */
    bool user_only;              /* kernel time not sampled */

    struct prof_frame *frames;    size_t nframes;
    struct prof_stack *stacks;    size_t nstacks;
    struct prof_thread *threads;  size_t nthreads;
    struct prof_process *processes; size_t nprocesses;
    struct prof_sample *samples;  size_t nsamples; /* sorted by time */

    uint64_t total_weight;   /* sum of sample weights */
    uint64_t lost_samples;
    uint64_t truncated_samples;
    uint64_t unknown_frames; /* frames (distinct (pid,pc)) without a function */
    /* The agent's own cost, summed over processes that ended cleanly. */
    uint64_t agent_handler_ns, agent_handler_calls, agent_writer_cpu_ns, process_cpu_ns;
    char **warnings;         /* loader warnings: truncated files, missing modules */
    size_t nwarnings;

    void *priv; /* string interning, symbolizer */
};

/* Loads dir. On failure returns -1, prints nothing, and writes one sentence
 * naming the problem and the fix into err. */
int profile_load(const char *dir, struct profile **out, char *err, size_t errlen);
void profile_free(struct profile *p);

/* Newest opprof.NNN in the current directory, or -1 when there is none. */
int profile_find_newest(char *out, size_t outlen);

/* Builds a profile from memory (tests and fixtures): frames and stacks are
 * copied. Used by unit tests to exercise aggregation without a recording. */
struct profile *profile_new_empty(void);
uint32_t profile_add_frame(struct profile *p, const char *name, const char *module,
                           const char *source_file, int line, enum frame_kind kind);
uint32_t profile_add_stack(struct profile *p, const uint32_t *frames, uint32_t nframes);
uint32_t profile_add_thread(struct profile *p, uint32_t pid, uint32_t tid, const char *name);
void profile_add_sample(struct profile *p, uint64_t time_ns, uint32_t thread,
                        uint32_t stack, uint32_t weight);

/* ------------------------------------------------------------------------- */
/* Hotspots: self/total per key                                               */
/* ------------------------------------------------------------------------- */

enum group_by {
    GROUP_FUNCTION = 0,
    GROUP_MODULE,
    GROUP_THREAD,
    GROUP_PROCESS,
};

enum sort_key {
    SORT_SELF = 0,
    SORT_TOTAL,
    SORT_SAMPLES,
    SORT_NAME,
};

struct hotspot_row {
    char *name;            /* key text (function, module, "tid 123 (name)", ...) */
    char *module;          /* for GROUP_FUNCTION: module; else NULL */
    char *source;          /* "file:line" of the function where known; else NULL */
    uint64_t self;         /* weight where this key is the leaf */
    uint64_t total;        /* weight where the key is anywhere on the stack (once per sample) */
    uint64_t samples;      /* number of samples counted in total */
};

struct hotspot_table {
    struct hotspot_row *rows;
    size_t nrows;
    uint64_t total_weight; /* denominator of every percentage */
    uint64_t period_ns;    /* to turn weights into time */
};

/* Computes the table for the whole profile. Returns 0, -1 on out of memory. */
int hotspots_compute(const struct profile *p, enum group_by by, struct hotspot_table *out);

/* Callers (callees == false) or callees of the function(s) named name:
 * one row per immediate caller/callee, weight = samples whose stack has that
 * edge (counted once per sample). Returns 0; -1 when no frame matches name. */
int hotspots_neighbours(const struct profile *p, const char *name, bool callees,
                        struct hotspot_table *out);

void hotspots_sort(struct hotspot_table *t, enum sort_key key);
void hotspots_free(struct hotspot_table *t);

int group_by_parse(const char *text, enum group_by *out);
int sort_key_parse(const char *text, enum sort_key *out);
const char *group_by_name(enum group_by by);
/* Canonical word for a sort key ("self", "total", ...), as sort_key_parse takes it. */
const char *sort_key_name(enum sort_key key);

#endif
