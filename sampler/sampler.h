/*
 * sampler/sampler.h — the sampler stage's interface.
 *
 * Two halves live here:
 *   1. The raw on-disk format (documented in docs/format.md). The injected agent
 *      writes it; analyze/ reads it. Nothing after the sampler reads anything else.
 *   2. The launcher API used by `opprof record` (fork/exec the workload with the
 *      agent preloaded, forward signals, wait, summarize).
 *
 * All multi-byte integers in the raw format are little-endian (the host order on
 * x86-64, the only target so far); every record is 8-byte aligned.
 */
#ifndef OPPROF_SAMPLER_H
#define OPPROF_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* ------------------------------------------------------------------------- */
/* Raw format                                                                 */
/* ------------------------------------------------------------------------- */

#define OPR_FORMAT_VERSION 1
#define OPR_FILE_MAGIC "OPPROFR1" /* 8 bytes, no terminator in the file */
#define OPR_INFO_FILE "info"      /* key=value text written by the launcher */
#define OPR_LIVE_FILE ".live"     /* shared counters for the live status line */
#define OPR_MAX_FRAMES 256        /* native frames kept per sample */
#define OPR_MAX_PYFRAMES 128      /* Python frames kept per sample */
#define OPR_BUILD_ID_MAX 20

/* Per-process stream file: "proc-<pid>-<generation>.raw". A process that calls
 * exec() gets a new generation for the new image (same pid). */
struct opr_file_header {
    char magic[8];          /* OPR_FILE_MAGIC */
    uint32_t version;       /* OPR_FORMAT_VERSION */
    uint32_t header_size;   /* sizeof(struct opr_file_header) */
    uint32_t pid;
    uint32_t ppid;
    uint64_t start_ns;      /* CLOCK_MONOTONIC when the agent started in this image */
    uint64_t period_ns;     /* sampling period of the timer event */
};

enum opr_record_type {
    OPR_REC_PROCESS = 1, /* struct opr_process + exe path + NUL-separated argv */
    OPR_REC_MAP = 2,     /* struct opr_map + path */
    OPR_REC_THREAD = 3,  /* struct opr_thread */
    OPR_REC_STACK = 4,   /* struct opr_stack + uint64_t pcs[nframes] */
    OPR_REC_SAMPLE = 5,  /* struct opr_sample */
    OPR_REC_LOST = 6,    /* struct opr_lost (cumulative counters) */
    OPR_REC_END = 7,     /* struct opr_end: the image shut down cleanly */
    OPR_REC_NOTE = 8,    /* struct opr_note + text: a warning the agent wants shown */
    OPR_REC_PYCODE = 9,  /* struct opr_pycode + filename + qualname */
    OPR_REC_PYSTACK = 10,/* struct opr_pystack + struct opr_pyframe[nframes] */
    OPR_REC_AGENT_COST = 11, /* struct opr_agent_cost: what sampling cost this process */
};

/* Every record starts with this header. size counts the header and the padding
 * up to the next multiple of 8. Readers skip types they do not know. */
struct opr_record_header {
    uint32_t type;
    uint32_t size;
};

struct opr_process {
    uint32_t pid;
    uint32_t ppid;
    uint64_t time_ns;
    uint32_t exe_len;     /* bytes of exe path that follow (no NUL) */
    uint32_t cmdline_len; /* bytes of NUL-separated argv after the exe path */
};

struct opr_map {
    uint64_t start;       /* executable mapping [start, end) in the process */
    uint64_t end;
    uint64_t pgoff;       /* file offset of start */
    uint8_t build_id_len; /* 0 when the file has no NT_GNU_BUILD_ID note */
    uint8_t build_id[OPR_BUILD_ID_MAX];
    uint8_t pad;
    uint16_t path_len;    /* bytes of path that follow (no NUL) */
};

struct opr_thread {
    uint32_t tid;
    uint32_t flags;       /* OPR_THREAD_* */
    uint64_t time_ns;
    char name[16];        /* comm, NUL-padded */
};
#define OPR_THREAD_MAIN 1u /* tid == pid */

/* A distinct native call chain, leaf first. pcs[0] is the interrupted
 * instruction; pcs[1..] are return addresses. */
struct opr_stack {
    uint32_t stack_id; /* unique within the stream file */
    uint32_t nframes;
};

struct opr_sample {
    uint64_t time_ns;
    uint32_t tid;
    uint32_t stack_id;
    uint32_t flags;  /* OPR_SAMPLE_* */
    uint32_t weight; /* number of timer periods this sample stands for (>= 1) */
};
/* Optional tail of a SAMPLE record (present when the body is >= 32 bytes). */
struct opr_sample_python {
    uint32_t py_stack_id_plus1; /* 0: no Python frames; else PYSTACK id + 1 */
    uint32_t reserved;
};
#define OPR_SAMPLE_TRUNCATED 1u /* unwinding stopped at OPR_MAX_FRAMES */
#define OPR_SAMPLE_UNWIND_FAILED 2u /* only the interrupted PC is known */

/* A Python code object (function), written once per stream. */
struct opr_pycode {
    uint32_t code_id;
    int32_t first_line;    /* co_firstlineno: the def line */
    uint32_t filename_len; /* bytes of co_filename that follow */
    uint32_t qualname_len; /* bytes of co_qualname after the filename */
};
#define OPR_PYCODE_UNKNOWN 0xffffffffu /* a frame whose code object could not be read */

struct opr_pyframe {
    uint32_t code_id;
    int32_t line;   /* the line executing in this frame */
    uint32_t flags; /* OPR_PYFRAME_* */
    uint32_t pad;
};
#define OPR_PYFRAME_ENTRY 1u /* entered from C: one native eval-loop frame below */

/* A distinct Python call chain, leaf first. */
struct opr_pystack {
    uint32_t py_stack_id;
    uint32_t nframes;
};

struct opr_lost {
    uint64_t time_ns;
    uint64_t lost_samples;  /* dropped because the agent's queue was full */
    uint64_t total_samples; /* samples taken by the handler so far */
};

/* Written with END: the agent's own CPU cost, measured in the process. */
struct opr_agent_cost {
    uint64_t handler_ns;      /* wall time inside the SIGTRAP handler, summed */
    uint64_t handler_calls;   /* samples the handler took (incl. lost ones) */
    uint64_t writer_cpu_ns;   /* CPU time of the writer thread */
    uint64_t process_cpu_ns;  /* CPU time of the whole process (workload + agent) */
};

struct opr_end {
    uint64_t time_ns;
    uint64_t total_samples;
    uint64_t lost_samples;
};

struct opr_note {
    uint64_t time_ns;
    uint32_t text_len;
    uint32_t pad;
};

/* Shared between the launcher and every agent through a MAP_SHARED file; only
 * updated by the agents' writer threads, read by the launcher's status line. */
struct opr_live {
    char magic[8];
    uint64_t samples;
    uint64_t lost;
    uint64_t threads;
    uint64_t processes;
    uint64_t bytes;
};
#define OPR_LIVE_MAGIC "OPLIVE01"

/* Environment variables the launcher passes to the agent. */
#define OPR_ENV_DIR "OPPROF_RESULT_DIR"
#define OPR_ENV_PERIOD "OPPROF_PERIOD_NS"
#define OPR_ENV_CALLGRAPH "OPPROF_CALL_GRAPH"

/* ------------------------------------------------------------------------- */
/* Launcher (opprof record)                                                   */
/* ------------------------------------------------------------------------- */

enum call_graph_mode {
    CALL_GRAPH_DWARF = 0, /* CFI unwinding (.eh_frame / .debug_frame) */
    CALL_GRAPH_FP = 1,    /* frame-pointer walk */
    CALL_GRAPH_NONE = 2,  /* leaf PC only */
};

struct record_options {
    unsigned frequency_hz;  /* samples per second of CPU time per thread */
    const char *output_dir; /* NULL: next free opprof.NNN in the cwd */
    enum call_graph_mode call_graph;
    char *const *argv;      /* the workload's command, argv[0] looked up in PATH */
    bool quiet;             /* no live status line, no summary */
};

/* Runs the workload under the sampler. Returns the exit status opprof should
 * exit with: the workload's own (128+signal when it was killed by a signal),
 * 127 when the command was not found, 126 when it could not be executed, or 2
 * (with a message on stderr) when recording could not start. */
int record_run(const struct record_options *opts);

/* Returns the first free name opprof.NNN in dir_of (buffer must hold PATH_MAX). */
int record_next_result_dir(const char *dir_of, char *out, size_t outlen);

const char *call_graph_mode_name(enum call_graph_mode mode);

#endif
