/*
 * sampler/record/record.h — the launcher (`opprof record`): fork/exec the
 * workload with the agent preloaded, forward signals, wait, summarize.
 */
#ifndef OPPROF_RECORD_H
#define OPPROF_RECORD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "format/format.h"

/* Expands -o patterns: %r rank, %p pid, %h short host name, %% a percent.
 * 0, or -1 with one sentence in err (unknown %x; %r without a rank variable). */
int record_expand_output(const char *pattern, long pid, char *out, size_t outlen, char *err, size_t errlen);

struct record_options {
    unsigned frequency_hz;  /* samples per second of CPU time per thread */
    const char *output_dir; /* NULL: next free opprof.NNN in the cwd */
    enum call_graph_mode call_graph;
    char *const *argv;      /* the workload's command, argv[0] looked up in PATH */
    bool quiet;             /* no live status line, no summary */
    const char *events;     /* -e EVENTS as given (NULL: task-clock); see pmu.c */
    /* -c N: one sample every N events of the first -e event (the sampling
     * leader) instead of the CPU-time timer (0: the timer) */
    uint64_t sample_count;
    /* threading/OpenMP: NULL or "keep" (default: the workload's own runtime),
     * "auto" (opt-in: preload an LLVM libomp found on this machine in place of
     * GNU libgomp), or the path of a libomp to preload (opt-in) */
    const char *openmp_runtime;
    /* Collection limits: sample only from delay_s after the start for
     * duration_s seconds (0: unset); stop recording samples once the result
     * dir holds max_size_bytes (0: no cap). What they leave out is counted. */
    double delay_s, duration_s;
    uint64_t max_size_bytes;
    pid_t attach_pid;   /* -p: attach to this running process (0: launch argv) */
    /* --torch-shapes (opt-in, changes the program): a PyTorch dispatch hook
     * on the workload's PYTHONPATH records operator calls and input shapes */
    bool torch_shapes;
    /* --timer tick: per-thread POSIX CPU-time timers (agent_tick.c) instead
     * of the perf_event task-clock timer; samples weighted by CPU time */
    bool tick_timer;
    /* --no-openmp-regions: no OpenMP region recorded (the GOMP_* wrappers
     * only forward, no OMPT tool): the least overhead, the OS-level view */
    bool no_openmp_regions;
};

/* Runs the workload under the sampler. Returns the exit status opprof should
 * exit with: the workload's own (128+signal when it was killed by a signal),
 * 127 when the command was not found, 126 when it could not be executed, or 2
 * (with a message on stderr) when recording could not start. */
int record_run(const struct record_options *opts);

/* Returns the first free name opprof.NNN in dir_of (buffer must hold PATH_MAX). */
int record_next_result_dir(const char *dir_of, char *out, size_t outlen);

const char *call_graph_mode_name(enum call_graph_mode mode);

int record_attach(const struct record_options *opts);
/* Shared with launch.c: creates -o DIR (empty) or the next opprof.NNN, one
 * line on stderr on failure; and writes argv shell-quoted (info file). */
int record_make_result_dir(const struct record_options *opts, char *dir, size_t dirlen);
void record_write_command(FILE *f, char *const *argv);
/* --- end of attach mode --------------------------------------------------- */

/* Finds the first readable dir-of-/proc/self/exe + relative[i] (each starts
 * with '/'); 0 and the path in out, or -1. How installed and build-tree
 * binaries find their agent and data files. */
int path_beside_self(const char *const *relative, size_t n, char *out, size_t outlen);


/* record_files.c: the result directory may be hostile (opprof often runs as
 * root). An existing -o DIR must be a real directory owned by this user and
 * empty (0, or -1 with one sentence in err); files in it are created with
 * O_CREAT | O_EXCL | O_NOFOLLOW (record_create_file: an fd, or -1 with
 * errno); info is rewritten as info.tmp then renamed (record_begin_info,
 * record_end_info: NULL / -1 with errno on failure, nothing half written). */
int record_check_existing_dir(const char *dir, char *err, size_t errlen);
int record_create_file(const char *dir, const char *name, int flags);
FILE *record_begin_info(const char *dir);
int record_end_info(const char *dir, FILE *f);

#endif
