/*
 * sampler/common/common.h — code both writers of the raw stream share (the
 * injected agent and the launcher's attach mode), built once under the
 * agent's rules: libc only, no sanitizers, nothing that calls back into the
 * workload. Signal-handler code is marked where it is called from there.
 *
 *   rank_env.c         which rank of a parallel job this process is
 *   python_walk.c      the one CPython frame walker (handler-safe), layout lookup
 *   python_code.c      code objects -> file, qualified name, line (not handler code)
 *   python_linetable.c CPython line tables (3.9 lnotab, 3.10, 3.11+ locations)
 *   python_debug_offsets.c 3.13+ layouts from the process's own _Py_DebugOffsets
 *   python_layout.h    CPython struct layouts per version (common's own .c files only)
 *
 * The stream itself (framing, id tables, MAP/PROCESS/THREAD) is written by
 * format/'s one writer (format/format.h, "Stream writer"), also built into
 * this library; below are the two small adapters both samplers hand it their
 * Python frames through.
 */
#ifndef OPPROF_SAMPLER_COMMON_H
#define OPPROF_SAMPLER_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
    uint64_t fingerprint; /* py_code_fingerprint (python_layout.h), set by py_walk_frames */
    int32_t instr;        /* code-unit offset of the executing instruction, -1 before the first */
    uint32_t is_entry;    /* the frame was entered from C (a native eval loop frame below it) */
};

/* ---- python_walk.c, python_code.c: CPython frames ------------------------
 * One walker for the agent (its own thread, in the signal handler, or a
 * blocked thread from the writer) and for attach mode (another process). The
 * two differ only in how memory is read, so that is a callback: the walker
 * never touches the target's memory except through struct py_reader. The
 * CPython version enters once, through py_layout_find(); the walk itself
 * reads field offsets from the layout it is given. */
struct py_layout; /* python_layout.h: where one CPython version keeps each field */

/* flags for py_reader.read: the bytes are the innermost frame or its code
 * object, which the running thread may be freeing right now (the agent's
 * handler reads these in place only once the kernel says they are readable
 * now). An innermost frame in the thread's current data-stack chunk is not
 * marked (python_walk.c: current_chunk). */
#define PY_READ_INNERMOST 1u

/* One region of a vectored read (py_reader.readv). */
struct py_span {
    uint64_t addr;
    void *buf;
    size_t len;
};

/* read: copies len bytes at the target's address addr into buf; true only
 * when all of them were read. Must be async-signal-safe when the walk runs
 * in a handler. readv (optional, NULL: none): copies spans[0..n) in one
 * system call and returns how many leading spans were read whole, so that
 * naming a code object takes two reads instead of four (python_code.c); the
 * caller reads the others itself. in_place (optional, NULL: never): whether
 * the walker may use [addr, addr+len) where it is, without a read: only a
 * reader of the walking thread's own memory says yes (the agent's handler,
 * for the thread's current data-stack chunk when its table lists it). */
struct py_reader {
    bool (*read)(void *ctx, uint64_t addr, void *buf, size_t len, unsigned flags);
    void *ctx;
    unsigned (*readv)(void *ctx, const struct py_span *spans, unsigned n);
    bool (*in_place)(void *ctx, uint64_t addr, size_t len);
};
/* A readv for a process's memory: spans[0..n) (n <= 4) with one
 * process_vm_readv of task (a pid or tid); how many leading spans were read
 * whole. */
unsigned py_readv_task(int task, const struct py_span *spans, unsigned n);

/* What one thread's previous walk found innermost, so that the next walk
 * can skip reading the code object of a frame that has not moved: the same
 * frame address with the same raw f_code and instruction fields as last time
 * gives the same py_frame_ref (a thread waiting in one long native call, a
 * torch operator, is sampled there again and again). A code object freed
 * and another allocated at its address since, run by a new frame at the old
 * frame's address and stopped at the same instruction address, would be
 * named after the old one. The same call at another instruction (the same frame, f_code
 * and the rest of the frame's header before the instruction: call_hash)
 * gives the same code object and fingerprint, its instruction computed from
 * the frame alone (first_traceable: what that needs of the code object), for
 * at most PY_MEMO_MOVED_MAX samples in a row: code compiled and run again in
 * a loop (exec) can put a new code object, function, globals and frame at
 * the old addresses, and the old fingerprint names the new code after the
 * old one, which the writer cannot tell (tests/workloads/py_code_reuse.py:
 * 54 / 46 % for a true 50 / 50 with no bound). Kept per thread by the
 * agent's handler; NULL elsewhere. */
#define PY_MEMO_MOVED_MAX 8
#define PY_CODE_SEEN 32
struct py_code_seen {
    uint64_t key, code_field, fingerprint;
    int32_t first_traceable;
    uint8_t uses; /* samples served since the code object was read (at most PY_MEMO_MOVED_MAX) */
};
struct py_innermost_memo {
    uint64_t frame, code_field, instr_field, call_hash;
    struct py_frame_ref ref;
    int32_t first_traceable;
    uint8_t moved;    /* samples served by call_hash since the code object was read */
    int8_t seen_slot; /* the entry of seen[] for this code object, -1: none */
    bool valid;
    /* The code objects of the last innermost calls, by f_code and the
     * frame's header but its previous frame and instruction (code_key: the
     * same function called again, from anywhere, at any frame address): an
     * innermost frame found here reads no code object, which on
     * torch_train.py is a handful of module methods called over and over.
     * Each entry serves PY_MEMO_MOVED_MAX samples, then the code object is
     * read again, for the same reason as the bound above: unbounded, code
     * re-created in an exec loop kept the first file's name for the whole
     * run (py_code_reuse.py: 100 / 0 %). 3.11+ only (their frame headers
     * hold only per-call pointers). */
    struct py_code_seen seen[PY_CODE_SEEN];
};

/* The frames above the innermost one that the thread's previous walk read
 * (the first PY_FRAME_MEMO of them, in walk order): a frame found at the
 * same address with the same raw f_code and instruction fields as then is
 * taken from here without reading its code object again; those two fields
 * are all a frame's py_frame_ref comes from (is_entry is read afresh). An
 * outer frame is suspended in a call, so a training loop's outer frames
 * are the same sample after sample, and each code object read was a cache
 * miss or more (~114 cycles a read on torch_train.py). The code object is
 * kept alive by the frame; one freed and another allocated at its address
 * under the same frame is as unlikely as the innermost memo's case, and its
 * fingerprint would make the writer refuse it, never misname it. 48 frames:
 * a PyTorch model's calls nest 2-3 frames a module (__call__, _call_impl,
 * forward), and a frame beyond the memo reads its code object every time.
 * Two halves, the last walk's and the one the walk fills, so that neither a
 * copy of it nor a copy on the handler's stack is needed.
 * Kept per thread by the agent's handler; NULL elsewhere. */
#define PY_FRAME_MEMO 48
#define PY_FRAME_MEMO_AHEAD 16 /* entries a frame is looked for past the last match (python_walk.c) */
struct py_frame_memo {
    uint64_t frame, code_field, instr_field;
    struct py_frame_ref ref;
};
struct py_outer_memo {
    unsigned n[2], half; /* f[half][0..n[half]): the last walk's; the next walk writes the other half */
    struct py_frame_memo f[2][PY_FRAME_MEMO];
};

/* One interpreter to read: its layout, two type objects that tell a real
 * code object or str from reused memory, and how to read it. */
struct py_target {
    const struct py_layout *layout;
    uint64_t code_type;    /* &PyCode_Type in the target */
    uint64_t unicode_type; /* &PyUnicode_Type in the target */
    struct py_reader mem;
    int32_t pthread_tid_offset; /* py_pthread_tid_offset(): where 3.9/3.10 states lead to the tid */
    struct py_innermost_memo *memo; /* the walking thread's own (agent handler), or NULL */
    struct py_outer_memo *outer;    /* the walking thread's own (agent handler), or NULL */
    struct py_line_cache *lines;    /* line tables read before (py_code_resolve; not the handler), or NULL */
};

/* The layout of CPython major.minor, NULL when there is none: the one place a
 * version number picks a layout. */
const struct py_layout *py_layout_find(unsigned major, unsigned minor);
/* "3.9, 3.10, 3.11, 3.12, 3.13, 3.14": the versions the table holds, for notes. */
void py_layouts_supported(char *buf, size_t cap);

/* Where glibc's struct pthread keeps the kernel tid (found in the calling
 * thread), -1 if not found: 3.9/3.10 thread states name their thread only by
 * pthread_self(). Not handler code. */
int32_t py_pthread_tid_offset(void);
/* The layout for a process whose _PyRuntime starts with runtime_head
 * (head_len bytes; what versions with _Py_DebugOffsets need, ignored by the
 * others): the table entry, or for 3.13+ a copy (malloc'ed) with the
 * process's own offsets. NULL with the reason in why when the version has no
 * layout or its debug offsets are not what was expected. Not handler code. */
const struct py_layout *py_layout_for_process(unsigned major, unsigned minor, const void *runtime_head,
                                              size_t head_len, char *why, size_t why_cap);
/* How many bytes of _PyRuntime py_layout_for_process wants to see. */
#define PY_RUNTIME_HEAD_BYTES 1024
void py_layout_release(const struct py_layout *L);

/* Handler-safe. The kernel tid of the thread tstate belongs to
 * (native_thread_id, or 3.9/3.10 via pthread_self's struct pthread);
 * false: unreadable. */
bool py_tstate_native_tid(const struct py_target *t, uint64_t tstate, uint64_t *tid);
/* Handler-safe. The frames of tstate, innermost first, as struct
 * py_frame_ref: incomplete frames skipped, at most max kept, the walk bounded
 * and ended (keeping what was found) by the first unreadable frame or an
 * f_code that is not a code object. */
unsigned py_walk_frames(const struct py_target *t, uint64_t tstate, struct py_frame_ref *out, unsigned max);

/* The thread-state list from outside (attach): the main interpreter and its
 * first thread state, from the address of _PyRuntime. */
bool py_runtime_threads(const struct py_target *t, uint64_t runtime, uint64_t *interp, uint64_t *first);
/* One state of that list: its interpreter (back pointer), thread id, next state. */
struct py_tstate_links {
    uint64_t interp, native_tid, next;
};
bool py_tstate_links(const struct py_target *t, uint64_t tstate, struct py_tstate_links *out);
/* Where tstate's current-frame pointer is now: the address of the field,
 * and *on_c_stack when it is in a _PyCFrame, a local of the running
 * _PyEval_EvalFrameDefault (3.11, 3.12), so that a sample's copy of the user
 * stack holds its value at the sampled instant. False: unreadable. */
bool py_current_frame_slot(const struct py_target *t, uint64_t tstate, uint64_t *slot, bool *on_c_stack);

/* Where py_code_resolve puts a code object's names: the caller's buffers
 * (the agent's and attach's records keep their own structs). */
struct py_code_names {
    char *filename;
    size_t filename_cap;
    char *qualname;
    size_t qualname_cap;
};
/* Not handler code (mallocs the line table). For one captured frame: its
 * code object's co_firstlineno and the line of its instruction, and the file
 * and qualified name (UTF-8, cut to fit) unless names is NULL. False when the
 * code object is gone or is not the one the walk saw (its fingerprint
 * differs: the address was reused). With t->lines, a lines-only call (names
 * NULL) for a code object whose table was kept is answered from the copy,
 * also when the object was freed since: the walk saw it alive. */
bool py_code_resolve(const struct py_target *t, const struct py_frame_ref *f, const struct py_code_names *names,
                     int *first_line, int *line);
/* Code objects' line tables as py_code_resolve read them, kept by (address,
 * fingerprint) for a target's lifetime (bounded; emptied when full): a
 * frame of a code object resolved before, at an instruction not seen
 * before, then costs no read of the target. NULL when out of memory. */
struct py_line_cache;
struct py_line_cache *py_line_cache_new(void);
void py_line_cache_free(struct py_line_cache *c);

/* ---- handing captured Python frames to the stream writer ------------------ */
/* The writer's keys (format/format.h) of n captured frames, n clamped to
 * OPR_MAX_PYFRAMES; returns how many were filled. */
static inline unsigned py_frame_keys(const struct py_frame_ref *frames, unsigned n, struct opr_pyframe_key *out)
{
    if (n > OPR_MAX_PYFRAMES)
        n = OPR_MAX_PYFRAMES;
    for (unsigned i = 0; i < n; i++)
        out[i] = (struct opr_pyframe_key){frames[i].code, frames[i].fingerprint, frames[i].instr,
                                          frames[i].is_entry, 0};
    return n;
}

/* Fills a resolver's names into the writer's struct (longer names are cut at
 * its field sizes). */
static inline void py_code_names_copy(struct opr_pycode_names *out, const char *filename, const char *qualname,
                                      int first_line)
{
    size_t f = strnlen(filename, sizeof out->filename - 1), q = strnlen(qualname, sizeof out->qualname - 1);
    memcpy(out->filename, filename, f);
    out->filename[f] = '\0';
    memcpy(out->qualname, qualname, q);
    out->qualname[q] = '\0';
    out->first_line = first_line;
}

#endif
