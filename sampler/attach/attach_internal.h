/*
 * sampler/attach/attach_internal.h — private to `opprof record -p PID` (attach mode).
 *
 * Attach mode cannot inject the agent, so the launcher samples from outside
 * the way perf does and writes the same raw streams the agent writes:
 *   attach.c         life cycle: checks, result dir and info, the poll loop,
 *                    stop on timeout / Ctrl-C / target exit, the summary
 *   attach_events.c  perf_event per (thread, CPU), one ring per CPU, records
 *                    merged by time
 *   attach_stream.c  one proc-<pid>-<gen>.raw per process image, written
 *                    through format/'s stream writer: SAMPLE, LOST, LIMITS,
 *                    NOTE, END here; PROCESS, MAP, THREAD, STACK, PYCODE and
 *                    PYSTACK by the writer
 *   attach_unwind.c  native stacks: CFI unwinding of the sample's user-stack
 *                    copy with libdwfl (one Dwfl per process)
 *   attach_python.c  Python frames read with process_vm_readv right after the
 *                    sample was drained (the thread may have run on)
 *   attach_pending.c samples wait one drain for the context-switch records
 *                    that say whether their Python frames are theirs
 *
 * Nothing here may be included from outside sampler/.
 */
#ifndef OPPROF_ATTACH_INTERNAL_H
#define OPPROF_ATTACH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sampler/attach/attach.h"
#include "sampler/pmu/pmu.h" /* perf_event, paranoid */
#include "sampler/common/common.h"

uint64_t attach_now_ns(void); /* CLOCK_MONOTONIC, the clock of every record */

/* ---- attach_events.c ------------------------------------------------------ */

/* One decoded perf record, in time order across CPUs. */
enum attach_event_kind {
    ATTACH_EV_SAMPLE,
    ATTACH_EV_COMM,  /* exec flag in comm_exec */
    ATTACH_EV_FORK,
    ATTACH_EV_EXIT,
    ATTACH_EV_LOST,
    ATTACH_EV_SWITCH, /* the thread tid was switched out (switch_out) or in */
};

struct attach_event {
    enum attach_event_kind kind;
    uint64_t time_ns;
    uint32_t pid, tid;
    uint32_t ppid, ptid;       /* FORK, EXIT */
    bool comm_exec;            /* COMM written by exec() */
    bool switch_out;           /* SWITCH: out (else in) */
    char comm[16];
    uint64_t lost;             /* LOST: records the kernel dropped */
    uint64_t ip;               /* SAMPLE: interrupted user PC */
    const uint64_t *callchain; /* SAMPLE: kernel user callchain (fp mode), may be NULL */
    uint32_t ncallchain;
    const uint64_t *regs;      /* SAMPLE: user registers (perf order, see ATTACH_REGS_MASK), or NULL */
    const uint8_t *stack;      /* SAMPLE: user stack copy starting at SP */
    uint64_t stack_len;
    bool newer_in_batch;       /* SAMPLE: the same thread has a later sample in this drain */
};

struct attach_events;

/* Opens a disabled sampling event for every thread of pid on every online
 * CPU (rescanning /proc/pid/task until no thread was missed). 0, or -1 with
 * err holding one sentence (the sysctl to change when it is a permission
 * problem). */
int attach_events_open(struct attach_events **out, pid_t pid, uint64_t period_ns, enum call_graph_mode mode,
                       unsigned stack_bytes, char *err, size_t errlen);
/* Opens events for threads that appeared since (none normally: inherit
 * follows them). Returns how many were added. */
int attach_events_rescan(struct attach_events *ev);
void attach_events_enable(struct attach_events *ev, bool on);
/* Waits up to timeout_ms for data (or extra_fd readable, e.g. a pidfd; -1 for
 * none). Returns 1 when extra_fd is readable, 0 otherwise. */
int attach_events_wait(struct attach_events *ev, int timeout_ms, int extra_fd);
/* Reads everything pending from all rings, merged by time, and calls fn per
 * record. The pointers in a record are valid during the call only. */
void attach_events_drain(struct attach_events *ev, void (*fn)(const struct attach_event *, void *), void *arg);
unsigned attach_events_threads(const struct attach_events *ev);
unsigned attach_events_cpus(const struct attach_events *ev);
size_t attach_events_ring_bytes(const struct attach_events *ev);
void attach_events_close(struct attach_events *ev);

/* Perf's x86-64 user-register order for PERF_SAMPLE_REGS_USER: AX BX CX DX
 * SI DI BP SP IP, R8..R15 (bits 0-8 and 16-23), so 17 values per sample. */
#define ATTACH_REGS_MASK 0xff01ffull
#define ATTACH_NREGS 17
enum { ATTACH_REG_AX, ATTACH_REG_BX, ATTACH_REG_CX, ATTACH_REG_DX, ATTACH_REG_SI, ATTACH_REG_DI,
       ATTACH_REG_BP, ATTACH_REG_SP, ATTACH_REG_IP, ATTACH_REG_R8 };

/* ---- attach_unwind.c ------------------------------------------------------ */

struct attach_unwinder;
struct attach_unwinder *attach_unwinder_new(pid_t pid);
/* Unwinds one sample: pcs[0] the interrupted PC, then return addresses.
 * Returns the number of frames (>= 1); *failed when nothing past the leaf
 * could be unwound, *truncated when max was reached. */
unsigned attach_unwind(struct attach_unwinder *u, uint32_t tid, const uint64_t *regs, const uint8_t *stack,
                       uint64_t stack_len, uint64_t *pcs, unsigned max, bool *failed, bool *truncated);
/* The process mapped new code: modules are re-read at the next unwind. */
void attach_unwinder_maps_changed(struct attach_unwinder *u);
void attach_unwinder_free(struct attach_unwinder *u);

/* ---- attach_python.c ------------------------------------------------------ */

struct attach_python;
/* Looks for a CPython runtime in pid. NULL when the process runs no Python
 * (yet); note gets one sentence when it does but frames cannot be read. */
struct attach_python *attach_python_probe(pid_t pid, char *note, size_t notelen);
/* A sample's copy of the user stack: len bytes from address sp (bytes NULL
 * when there is none). */
struct attach_sample_stack {
    const uint8_t *bytes;
    uint64_t len, sp;
};
/* The thread's Python frames now, leaf first (0 when it has none);
 * *frame_moved when the stack copy shows that the thread has left the Python
 * frame it was in at the sample (3.11, 3.12 only; false when unknown). */
unsigned attach_python_capture(struct attach_python *py, uint32_t tid, const struct attach_sample_stack *st,
                               struct py_frame_ref *out, unsigned max, bool *frame_moved);
struct attach_pycode_info {
    char filename[512];
    char qualname[256];
    int first_line;
    int line;
};
bool attach_python_resolve(struct attach_python *py, const struct py_frame_ref *f,
                           struct attach_pycode_info *info, bool need_names);
/* A one-time warning from the reader (layout mismatch, memory refused), or NULL. */
const char *attach_python_take_note(struct attach_python *py);
void attach_python_free(struct attach_python *py);

/* ---- attach_stream.c ------------------------------------------------------ */

struct attach_stream;
struct attach_stream_totals {
    uint64_t samples, unwind_failed, truncated, python_samples, lost;
    uint64_t python_moved_on; /* samples whose thread left its Python frame before the read */
    uint64_t threads, processes, bytes;
    uint64_t dropped_size_cap; /* --max-size: samples not written */
};
/* --max-size: samples are dropped once all streams together hold this many bytes. */
void attach_stream_set_size_cap(uint64_t bytes);
/* Opens proc-<pid>-<gen>.raw (first free gen) and writes the header, the
 * PROCESS record and the executable mappings. NULL on failure (errno). */
struct attach_stream *attach_stream_open(const char *dir, pid_t pid, uint64_t period_ns,
                                         enum call_graph_mode mode);
pid_t attach_stream_pid(const struct attach_stream *s);
/* A sample taken from the rings but not yet written: its Python frames wait
 * for the switch records that say whether they are the sample's. */
struct attach_captured {
    uint64_t time_ns;
    uint32_t pid, tid;
    int64_t stack_id; /* STACK id in the stream of pid */
    uint32_t flags;
    unsigned npy;
    struct py_frame_ref *py;      /* npy frames (malloc'd), NULL when none */
    uint64_t read_from, read_to;  /* the Python read, CLOCK_MONOTONIC */
    bool newer_in_batch;          /* a later sample of the thread came in the same drain */
    bool frame_moved;             /* the stack copy shows the thread has left its Python frame */
    uint32_t emit_bound;          /* bytes its emit may write at most (--max-size's reserve) */
};
/* One sample: reads its Python frames (when the process has them), unwinds,
 * writes the STACK record as needed. False: not to be written (--max-size
 * reached, out of memory; counted). */
bool attach_stream_capture(struct attach_stream *s, const struct attach_event *e, struct attach_captured *c);
/* Writes the SAMPLE of c (and its PYSTACK when with_python). */
void attach_stream_emit(struct attach_stream *s, const struct attach_captured *c, bool with_python);
/* A captured sample that will not be written (its stream is gone): its
 * bytes leave --max-size's reserve. attach_stream_emit does this itself. */
void attach_stream_captured_gone(const struct attach_captured *c);
/* A LOST record (cumulative); final: the last one, written even past --max-size. */
void attach_stream_lost(struct attach_stream *s, uint64_t time_ns, uint64_t lost, uint64_t total, bool final);
/* Memory over time: a MEM_TICK when the RSS moved (at most every 10 ms;
 * final: always, when the process can still be read). */
void attach_stream_memory(struct attach_stream *s, bool final);
void attach_stream_note(struct attach_stream *s, const char *text);
void attach_stream_flush(struct attach_stream *s);
/* Thread names again, LOST, END when clean; closes the file. */
void attach_stream_close(struct attach_stream *s, bool clean, struct attach_stream_totals *add_to);

/* ---- attach_pending.c ----------------------------------------------------- */
struct attach_pending;
struct attach_python_kept {
    uint64_t exact, running, moved_on; /* samples with Python frames read, by what was kept */
};
struct attach_pending *attach_pending_new(void);
/* Takes c (and its frames); false when out of memory (then c is the caller's). */
bool attach_pending_add(struct attach_pending *p, const struct attach_captured *c);
/* A context switch of tid (out: switched out) at time_ns. */
void attach_pending_switch(struct attach_pending *p, uint32_t tid, uint64_t time_ns, bool out);
/* After a drain: writes the samples captured before it (all: every one),
 * with their Python frames where attach_pending.c's rule keeps them; frames
 * read after switches_until (sampling stopped: no switch recorded) are not. */
void attach_pending_flush(struct attach_pending *p, bool all, uint64_t switches_until,
                          struct attach_stream *(*stream_of)(void *, uint32_t), void *arg,
                          struct attach_python_kept *k);
/* Writes every waiting sample of pid now (its stream is about to close). */
void attach_pending_flush_pid(struct attach_pending *p, uint32_t pid,
                              struct attach_stream *(*stream_of)(void *, uint32_t), void *arg,
                              struct attach_python_kept *k);
void attach_pending_free(struct attach_pending *p);

#endif
