/*
 * sampler/agent/agent_python.c — the Python call stack of the sampled thread, read
 * at the same instant as its native stack.
 *
 * SIGNAL-HANDLER CODE: agent_python_capture() runs inside the SIGTRAP handler.
 * No malloc, no locks, no stdio. It only follows pointers of the sampled
 * thread's own frame chain (which no other thread modifies) and records, per
 * frame, the code object's address, a fingerprint of it (py_code_fingerprint:
 * its co_name and co_filename pointers and co_firstlineno) and the
 * instruction offset. Turning those into names and
 * line numbers (reading strings, decoding the line table) happens in the
 * writer thread (agent_python_resolve), which reads memory through
 * process_vm_readv so that a code object freed in between cannot crash it, and
 * checks the fingerprint so that a reused address is not given stale names.
 *
 * Which thread state: PyGILState_GetThisThreadState() returns the calling
 * thread's own state even while it has released the GIL inside a torch op;
 * _PyThreadState_UncheckedGet() would return the GIL holder's instead.
 *
 * The walk and the name resolution themselves are sampler/common's
 * (python_walk.c, python_code.c, shared with attach mode); this file finds
 * the interpreter, says how memory is read here (struct agent_reader) and
 * which thread state to start from.
 *
 * The same call finds the state in every supported version (3.9-3.14):
 * PyGILState_GetThisThreadState is exported by the executable or, for
 * shared-library builds (pyenv's), by libpython, which the executable loads
 * as a dependency, so dlsym(RTLD_DEFAULT) sees it from our constructor on.
 * 3.13 no longer exports the thread-local current state, but this one (the
 * GIL-state TSS key) is still there. Handler-safe in every version: in
 * pyenv's 3.12.1 and 3.13.0 it is PyThread_tss_is_created() then
 * pthread_getspecific() (read from their disassembly), no lock, and NULL
 * before Py_Initialize created the key.
 *
 * Versions: the layout comes from py_layout_for_process() through one
 * pointer; an unsupported version leaves Python capture off with a note in
 * the stream.
 */
#include <signal.h>
#include <stdatomic.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sampler/agent/agent.h"
#include "sampler/common/common.h"

typedef void *(*get_tstate_fn)(void);

static const struct py_layout *layout;
static get_tstate_fn get_this_thread_state;
static uint64_t code_type_addr; /* &PyCode_Type */
static uint64_t unicode_type_addr; /* &PyUnicode_Type */
static int32_t pthread_tid_offset; /* 3.9/3.10: see py_tstate_native_tid */
static _Atomic int python_state; /* 0 not found yet, 1 on, -1 off for good */
static _Atomic int layout_verified; /* 0 unknown, 1 ok, -1 mismatch seen in a handler */
static char python_note[256];

/* Looks for a CPython runtime in the process (the executable or a loaded
 * libpython). Called at start and whenever new code was mapped. Returns 1
 * when capture is on. Not handler code. */
int agent_python_probe(void)
{
    if (atomic_load(&python_state) != 0)
        return atomic_load(&python_state) == 1;
    get_tstate_fn fn = (get_tstate_fn)dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
    if (!fn)
        return 0; /* not a Python process (yet) */
    const unsigned long *version = dlsym(RTLD_DEFAULT, "Py_Version");
    const char *(*get_version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
    unsigned major = 0, minor = 0;
    if (version) {
        major = (unsigned)(*version >> 24) & 0xff;
        minor = (unsigned)(*version >> 16) & 0xff;
    } else if (get_version) {
        if (sscanf(get_version(), "%u.%u", &major, &minor) != 2)
            major = minor = 0;
    }
    /* 3.13+ describe their own structs at the head of _PyRuntime (exported
     * by the executable or libpython, static data: readable before
     * Py_Initialize); older versions take the table's layout. */
    const void *runtime = dlsym(RTLD_DEFAULT, "_PyRuntime");
    char why[200];
    layout = py_layout_for_process(major, minor, runtime, runtime ? PY_RUNTIME_HEAD_BYTES : 0, why, sizeof why);
    void *code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
    void *unicode_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
    if (!layout || !code_type || !unicode_type) {
        snprintf(python_note, sizeof python_note, "%s: native stacks only",
                 layout ? "PyCode_Type or PyUnicode_Type not found" : why);
        py_layout_release(layout);
        layout = NULL;
        atomic_store(&python_state, -1);
        return 0;
    }
    pthread_tid_offset = py_pthread_tid_offset();
    code_type_addr = (uint64_t)code_type;
    unicode_type_addr = (uint64_t)unicode_type;
    get_this_thread_state = fn;
    agent_tstate_prefault(); /* before any handler walks Python and remembers a thread */
    atomic_store(&python_state, 1);
    return 1;
}

/* A note for the stream (once), or NULL. */
const char *agent_python_take_note(void)
{
    static bool layout_note_given;
    if (python_note[0]) {
        static char copy[256];
        memcpy(copy, python_note, sizeof copy);
        python_note[0] = '\0';
        return copy;
    }
    if (atomic_load(&layout_verified) == -1 && !layout_note_given) {
        layout_note_given = true;
        return "the CPython thread-state layout did not match this interpreter build: Python frames are off";
    }
    return NULL;
}

/* The agent's struct py_reader (python_walk.c reads through it). In the
 * handler a region is read in place once agent_memmap_listed says it is
 * mapped: the thread walks its own frames, which nobody frees while it is
 * stopped in here; except the innermost one, which may be in the middle of
 * being popped (_PyEvalFrameClearAndPop: f_code decref'd, the data-stack
 * chunk munmapped, and only then current_frame moves on), or not set yet
 * (3.11 sets tstate->cframe before cframe.current_frame: stack garbage). A
 * sample taken on the way out of that munmap (kernel mode is sampled) found
 * the chunk gone though the mapping table still listed it: so the innermost
 * frame and its code object (PY_READ_INNERMOST) are read in place only once
 * the kernel says they are readable now (agent_memmap_readable_now: a futex
 * word read per page, ~1-3 us in the handler, against ~10 us for the
 * process_vm_readv copy it replaced). What the table does not list (yet:
 * see agent_read) takes the same check. Two exceptions save those system
 * calls: an innermost frame inside the chunk the thread state names now is
 * read in place (python_walk.c: current_chunk, 3.11+), and one found
 * unmoved since the thread's previous sample, or moved on in the same call
 * (up to 8 samples in a row), reuses that sample's code object reference
 * (innermost_memo below; py_split.py: 2,757 -> 626 copies a 3 s run,
 * when these were copies). The
 * off-CPU poll walks ANOTHER thread's frames, which that thread may pop and
 * free (CPython munmaps data-stack chunks) between any check and the read,
 * so there every region is copied with process_vm_readv (copy_all), which
 * fails with EFAULT instead of faulting; so does the writer's name
 * resolution. Handler-safe: a table lookup, memcpy and a system call or
 * two. */
struct agent_reader {
    int table;           /* agent_memmap table (handler) */
    bool copy_all;       /* copy every region with process_vm_readv (writer) */
    bool check_innermost; /* handler: the innermost frame and its code must be readable now too */
    pid_t task;          /* a thread of this process to read through (its tid: no getpid per read) */
    /* Handler: the two ranges the table listed last, the latest first. A
     * walk's frames lie in one data-stack chunk and its code objects in a
     * few arenas, read in turn: most reads fall in one of them and skip the
     * table's binary search. */
    uint64_t listed_lo[2], listed_hi[2];
};

/* Whether [addr, addr+len) lies in [lo, hi), written so that a garbage
 * address near 2^64 cannot wrap past the end. */
static inline bool within(uint64_t addr, size_t len, uint64_t lo, uint64_t hi)
{
    return addr >= lo && addr < hi && len <= hi - addr;
}

/* Whether the table lists [addr, addr+len), asked of the two ranges it
 * listed last before the table itself. Inlined into agent_read, every read's
 * path: called out of line once agent_in_place used it too, it cost the
 * switch shape of bench/python_capture.sh ~750 instructions a capture. */
static inline __attribute__((always_inline)) bool listed(struct agent_reader *r, uint64_t addr, size_t len)
{
    if (within(addr, len, r->listed_lo[0], r->listed_hi[0]))
        return true;
    uint64_t lo = r->listed_lo[1], hi = r->listed_hi[1];
    if (!within(addr, len, lo, hi) && !agent_memmap_listed(r->table, addr, len, &lo, &hi))
        return false;
    r->listed_lo[1] = r->listed_lo[0];
    r->listed_hi[1] = r->listed_hi[0];
    r->listed_lo[0] = lo;
    r->listed_hi[0] = hi;
    return true;
}

static bool read_mem_via(pid_t task, uint64_t addr, void *out, size_t len)
{
    struct iovec local = {out, len};
    struct iovec remote = {(void *)addr, len};
    return syscall(SYS_process_vm_readv, task, &local, 1, &remote, 1, 0) == (long)len;
}

static bool agent_read(void *ctx, uint64_t addr, void *buf, size_t len, unsigned flags)
{
    struct agent_reader *r = ctx;
    if (r->copy_all)
        return read_mem_via(r->task, addr, buf, len);
    /* The innermost frame and its code object must also be readable now
     * (the table may still list a chunk just unmapped): they are only this
     * thread's to free (its frame holds the code until the pop), and the
     * thread is stopped here. */
    if (listed(r, addr, len) && !(r->check_innermost && (flags & PY_READ_INNERMOST))) {
        memcpy(buf, (const void *)(uintptr_t)addr, len);
        return true;
    }
    /* Not in the table: memory mapped since the writer's last look, or
     * garbage (the innermost frame above). Read in place once the kernel
     * says it is readable now, like the innermost frame (between the check
     * and the read only another thread could unmap it: a live frame's
     * memory is not another thread's to free, and a garbage pointer takes
     * the chance the innermost frame's check always took); else refused,
     * as a copy would be. The table learns of a new mapping only from a miss like
     * this one (the writer adds every mapping missed since its last look at
     * its next drain, agent_memmap.c); refusing unlisted reads outright cut
     * the chain short (no <module>, no entry frame to splice at) for the
     * first 20-35 ms in each new pymalloc arena or data-stack chunk: 22-91
     * of ~11,700 py_split.py samples at 4000 Hz per run. Every miss
     * measured on py_split.py (3.9-3.13) and torch_train.py was such a
     * mapping (all readable). They used to be copied with process_vm_readv,
     * 10-20 us each in the handler (the task lookup, access check and page
     * pinning on caches the workload has just cooled), and the first miss
     * woke the writer (a futex wake: 7-15 us more). Three torch_train.py
     * --steps 60 runs, a throw-away build timing each part of 1 in 8
     * handler calls (2026-11-29): 18 of the 19 Python walks over 10 us held
     * such a copy, and 22 of 862 calls paid the wake. What stays is a
     * system call per page, and more reads that miss between two drains. */
    if (agent_memmap_readable_now(addr, len)) {
        memcpy(buf, (const void *)(uintptr_t)addr, len);
        return true;
    }
    return false;
}

/* py_reader.in_place: the handler's own thread's current data-stack chunk,
 * when the table lists it whole (the walk then uses its frames where they
 * are). Never for the writer's copies of another thread's frames. */
static bool agent_in_place(void *ctx, uint64_t addr, size_t len)
{
    struct agent_reader *r = ctx;
    return !r->copy_all && listed(r, addr, len);
}

/* Several regions in one process_vm_readv (py_reader.readv): the writer's
 * names of a new code object (python_code.c). Copies only (copy_all): the
 * handler reads in place and never names code. */
static unsigned agent_readv(void *ctx, const struct py_span *spans, unsigned n)
{
    const struct agent_reader *r = ctx;
    return r->copy_all ? py_readv_task(r->task, spans, n) : 0;
}

/* This thread's last innermost frame (struct py_innermost_memo): a thread
 * sampled while its Python code waits in one long native call (a torch
 * operator) finds the same frame at the same instruction sample after
 * sample, and then reads no code object. Handler only: a signal handler
 * never interrupts itself on one thread (SIGTRAP is blocked while it runs). */
static __thread struct py_innermost_memo innermost_memo __attribute__((tls_model("initial-exec")));
/* The outer frames' memo (struct py_outer_memo): 4,624 bytes of TLS. */
static __thread struct py_outer_memo outer_memo __attribute__((tls_model("initial-exec")));
/* A capture on this thread is using the memos: a SIGTRAP that interrupts an
 * OpenMP opener's capture (capture_context, not a handler) walks without
 * them, so that neither sees the other's half-written entries. */
static __thread volatile sig_atomic_t memos_busy __attribute__((tls_model("initial-exec")));

static struct py_target target_with(struct agent_reader *r, struct py_innermost_memo *memo,
                                    struct py_outer_memo *outer)
{
    return (struct py_target){
        layout, code_type_addr, unicode_type_addr, {agent_read, r, agent_readv, agent_in_place}, pthread_tid_offset,
        memo,   outer, NULL};
}

/* The walk from a known thread state: the handler's own, or (off-CPU poll)
 * a blocked thread's, checked to still belong to tid. The first walk also
 * checks the layout on a value we know: the state's thread id. */
static unsigned walk_thread(struct agent_reader *r, struct py_innermost_memo *memo, struct py_outer_memo *outer,
                            uint64_t ts, struct py_frame_ref *out, unsigned max, uint32_t tid)
{
    struct py_target t = target_with(r, memo, outer);
    int verified = atomic_load_explicit(&layout_verified, memory_order_relaxed);
    if (verified == 0 || r->copy_all) {
        uint64_t native_tid;
        if (!py_tstate_native_tid(&t, ts, &native_tid))
            return 0;
        if (verified == 0) {
            if (native_tid != tid) {
                atomic_store(&layout_verified, -1);
                return 0;
            }
            atomic_store(&layout_verified, 1);
        } else if (native_tid != tid) {
            return 0; /* a state freed and reused by another thread */
        }
    }
    return py_walk_frames(&t, ts, out, max);
}

static unsigned capture_walk(int table, struct py_frame_ref *out, unsigned max, uint32_t tid)
{
    uint64_t ts = (uint64_t)get_this_thread_state();
    if (ts == 0)
        return 0; /* a thread that never ran Python (OpenMP worker, BLAS thread) */
    struct agent_reader r = {.table = table, .copy_all = false, .check_innermost = true, .task = (pid_t)tid};
    bool mine = !memos_busy;
    memos_busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    unsigned n = mine ? walk_thread(&r, &innermost_memo, &outer_memo, ts, out, max, tid)
                      : walk_thread(&r, NULL, NULL, ts, out, max, tid);
    atomic_signal_fence(memory_order_seq_cst);
    if (mine)
        memos_busy = 0;
    if (n > 0)
        agent_tstate_remember(tid, ts); /* ranks: lets the off-CPU poll find this thread's frames */
    return n;
}

unsigned agent_python_capture(struct py_frame_ref *out, unsigned max, uint32_t tid)
{
    if (atomic_load_explicit(&python_state, memory_order_acquire) != 1 ||
        atomic_load_explicit(&layout_verified, memory_order_relaxed) == -1)
        return 0;
    int t = agent_memmap_begin();
    if (t < 0)
        return 0;
    unsigned n = capture_walk(t, out, max, tid);
    agent_memmap_end(t);
    return n;
}

/* Writer (off-CPU poll): another thread's frames, read with
 * process_vm_readv (see struct agent_reader). Its thread state must name tid
 * (a state freed and reused by another thread does not). */
unsigned agent_python_capture_thread(uint64_t ts, struct py_frame_ref *out, unsigned max, uint32_t tid)
{
    if (atomic_load_explicit(&python_state, memory_order_acquire) != 1 ||
        atomic_load_explicit(&layout_verified, memory_order_relaxed) != 1 || ts == 0 || (ts & 7))
        return 0;
    /* Same address space; a thread that has exited fails the read (ESRCH). */
    struct agent_reader r = {.table = -1, .copy_all = true, .task = (pid_t)tid};
    return walk_thread(&r, NULL, NULL, ts, out, max, tid);
}

/* ------------------------------------------------------------------------- */
/* Writer side: names and lines                                               */
/* ------------------------------------------------------------------------- */

/* Fills names and the line for one captured frame (python_code.c). Returns
 * false when the code object is gone or is not what the handler saw. pid:
 * the caller's (a getpid here was a system call per name resolved, 1,210 of
 * the writer's ~9,000 in a torch_train.py run). */
bool agent_python_resolve(const struct py_frame_ref *f, struct agent_pycode_info *info, bool need_names, pid_t pid)
{
    if (!layout)
        return false;
    struct agent_reader r = {.table = -1, .copy_all = true, .task = pid};
    struct py_target t = target_with(&r, NULL, NULL);
    static struct py_line_cache *lines; /* writer only; a fork child's copy holds the same objects */
    if (!lines)
        lines = py_line_cache_new();
    t.lines = lines;
    struct py_code_names names = {info->filename, sizeof info->filename, info->qualname, sizeof info->qualname};
    return py_code_resolve(&t, f, need_names ? &names : NULL, &info->first_line, &info->line);
}
