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
 * Versions: the layout comes from python_layout.h through one pointer; an
 * unsupported version leaves Python capture off with a note in the stream.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sampler/agent/agent.h"
#include "sampler/common/python_layout.h"

typedef void *(*get_tstate_fn)(void);

static const struct py_layout *layout;
static get_tstate_fn get_this_thread_state;
static uint64_t code_type_addr; /* &PyCode_Type */
static uint64_t unicode_type_addr; /* &PyUnicode_Type */
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
    for (size_t i = 0; i < sizeof py_layouts / sizeof py_layouts[0]; i++)
        if (py_layouts[i]->major == major && py_layouts[i]->minor == minor)
            layout = py_layouts[i];
    void *code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
    void *unicode_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
    if (!layout || !code_type || !unicode_type) {
        snprintf(python_note, sizeof python_note,
                 "Python %u.%u is not supported for Python frames (supported: 3.11): native stacks only",
                 major, minor);
        atomic_store(&python_state, -1);
        return 0;
    }
    code_type_addr = (uint64_t)code_type;
    unicode_type_addr = (uint64_t)unicode_type;
    get_this_thread_state = fn;
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

/* Where the walk reads memory. In the handler (safe == false) a region is
 * read in place once agent_memmap_readable says it is mapped: the thread
 * walks its own frames, which nobody frees while it is stopped in here;
 * except the innermost one, which may be in the middle of being popped
 * (_PyEvalFrameClearAndPop: f_code decref'd, the data-stack chunk munmapped,
 * and only then current_frame moves on). A sample taken on the way out of
 * that munmap (kernel mode is sampled) found the chunk gone though the
 * mapping table still listed it: so the innermost frame and its code object
 * are copied with process_vm_readv (first_safe), the rest read in place. The
 * off-CPU poll walks ANOTHER thread's frames, which that thread may pop and
 * free (CPython munmaps data-stack chunks) between the mapping check and the
 * read, so there every region is copied with process_vm_readv, which fails
 * with EFAULT instead of faulting. */
struct walk_reader {
    int table;                   /* agent_memmap table (handler) */
    bool safe;                   /* copy with process_vm_readv (writer) */
    bool first_safe;             /* handler: copy the innermost frame and its code only */
    pid_t task;                  /* a thread of this process to read through (its tid: no getpid per read) */
    uint8_t buf[2][256];         /* copies: [0] frame/tstate/cframe, [1] code */
};

static bool read_mem_via(pid_t task, uint64_t addr, void *out, size_t len);
static bool read_mem(uint64_t addr, void *out, size_t len);

/* Points at len readable bytes of addr (in place, or a copy in slot), or NULL. */
static const uint8_t *view(struct walk_reader *r, int slot, uint64_t addr, size_t len)
{
    if (addr == 0 || (addr & 7))
        return NULL;
    if (!r->safe)
        return agent_memmap_readable(r->table, addr, len) ? (const uint8_t *)addr : NULL;
    if (len > sizeof r->buf[slot] || !read_mem_via(r->task, addr, r->buf[slot], len))
        return NULL;
    return r->buf[slot];
}

static inline uint64_t field64(const uint8_t *v, size_t off)
{
    uint64_t x;
    memcpy(&x, v + off, sizeof x);
    return x;
}

static inline int32_t field32(const uint8_t *v, size_t off)
{
    int32_t x;
    memcpy(&x, v + off, sizeof x);
    return x;
}

static unsigned capture_walk_from(struct walk_reader *r, uint64_t ts, struct py_frame_ref *out, unsigned max,
                                  uint32_t tid);

static unsigned capture_walk(int t, struct py_frame_ref *out, unsigned max, uint32_t tid)
{
    uint64_t ts = (uint64_t)get_this_thread_state();
    if (ts == 0)
        return 0; /* a thread that never ran Python (OpenMP worker, BLAS thread) */
    struct walk_reader r = {.table = t, .safe = false, .first_safe = true, .task = (pid_t)tid};
    unsigned n = capture_walk_from(&r, ts, out, max, tid);
    if (n > 0)
        agent_tstate_remember(tid, ts); /* ranks: lets the off-CPU poll find this thread's frames */
    return n;
}

/* The walk from a known thread state: the handler's own, or (off-CPU poll)
 * a blocked thread's, checked to still belong to tid. */
static unsigned capture_walk_from(struct walk_reader *r, uint64_t ts, struct py_frame_ref *out, unsigned max,
                                  uint32_t tid)
{
    const struct py_layout *L = layout;
    size_t ts_bytes = (size_t)(L->tstate_native_thread_id > L->tstate_cframe ? L->tstate_native_thread_id
                                                                               : L->tstate_cframe) + 8;
    const uint8_t *v = view(r, 0, ts, ts_bytes);
    if (!v)
        return 0;
    uint64_t native_tid = field64(v, L->tstate_native_thread_id);
    /* The first time, check the layout on a value we know: the thread id. */
    if (atomic_load_explicit(&layout_verified, memory_order_relaxed) == 0) {
        if (native_tid != tid) {
            atomic_store(&layout_verified, -1);
            return 0;
        }
        atomic_store(&layout_verified, 1);
    } else if (r->safe && native_tid != tid) {
        return 0; /* a state freed and reused by another thread */
    }
    uint64_t cframe = field64(v, L->tstate_cframe);
    if (!(v = view(r, 0, cframe, (size_t)L->cframe_current_frame + 8)))
        return 0;
    uint64_t frame = field64(v, L->cframe_current_frame);
    size_t frame_bytes = (size_t)L->iframe_owner + 1;
    size_t code_bytes = (size_t)L->code_code_adaptive;
    unsigned n = 0;
    /* Bounded walk; a pointer that is not readable, or an f_code that is
     * not a code object, ends it (the frames found so far are kept). */
    bool in_place = !r->safe;
    for (unsigned steps = 0; frame != 0 && n < max && steps < 4 * OPR_MAX_PYFRAMES; steps++) {
        r->safe = !in_place || (steps == 0 && r->first_safe);
        const uint8_t *f = view(r, 0, frame, frame_bytes);
        if (!f)
            break;
        uint64_t code = field64(f, L->iframe_f_code);
        const uint8_t *c = view(r, 1, code, code_bytes);
        if (!c || field64(c, L->object_type) != code_type_addr)
            break;
        uint64_t prev_instr = field64(f, L->iframe_prev_instr);
        uint8_t owner = f[L->iframe_owner];
        uint8_t is_entry = f[L->iframe_is_entry];
        int32_t first_traceable = field32(c, L->code_firsttraceable);
        uint64_t code_start = code + L->code_code_adaptive;
        /* Incomplete frames (still being set up) are not real calls yet. */
        bool incomplete = owner != L->owner_generator &&
                          (int64_t)prev_instr < (int64_t)(code_start + 2 * (uint64_t)first_traceable);
        if (!incomplete) {
            out[n].code = code;
            out[n].fingerprint = py_code_fingerprint(field64(c, L->code_name), field64(c, L->code_filename),
                                                     (int32_t)field32(c, L->code_firstlineno));
            int64_t offset = ((int64_t)prev_instr - (int64_t)code_start) / 2;
            out[n].instr = offset < 0 ? -1 : (int32_t)offset;
            out[n].is_entry = is_entry;
            n++;
        }
        frame = field64(f, L->iframe_previous);
    }
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
 * process_vm_readv (see struct walk_reader). Its thread state must name tid
 * (a state freed and reused by another thread does not). */
unsigned agent_python_capture_thread(uint64_t ts, struct py_frame_ref *out, unsigned max, uint32_t tid)
{
    if (atomic_load_explicit(&python_state, memory_order_acquire) != 1 ||
        atomic_load_explicit(&layout_verified, memory_order_relaxed) != 1 || ts == 0 || (ts & 7))
        return 0;
    static struct walk_reader r; /* writer thread only; 512 bytes off its stack */
    r.table = -1;
    r.task = (pid_t)tid; /* same address space; a thread that has exited fails the read (ESRCH) */
    r.safe = true;
    return capture_walk_from(&r, ts, out, max, tid);
}

/* ------------------------------------------------------------------------- */
/* Writer side: names and lines                                               */
/* ------------------------------------------------------------------------- */

static bool read_mem_via(pid_t task, uint64_t addr, void *out, size_t len)
{
    struct iovec local = {out, len};
    struct iovec remote = {(void *)addr, len};
    return syscall(SYS_process_vm_readv, task, &local, 1, &remote, 1, 0) == (long)len;
}

static bool read_mem(uint64_t addr, void *out, size_t len)
{
    return read_mem_via(getpid(), addr, out, len);
}

static bool read_u64(uint64_t addr, uint64_t *out) { return read_mem(addr, out, sizeof *out); }

/* Reads a str object as UTF-8 into out (NUL-terminated). */
static bool read_str(uint64_t obj, char *out, size_t cap)
{
    const struct py_layout *L = layout;
    uint64_t type, length;
    uint32_t state;
    /* Only a real str object: a code object freed and reused between the
     * sample and now could point anywhere. */
    if (!read_u64(obj + L->object_type, &type) || type != unicode_type_addr ||
        !read_u64(obj + L->ascii_length, &length) || !read_mem(obj + L->ascii_state, &state, sizeof state))
        return false;
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || length > 4096)
        return false;
    if (ascii) {
        size_t n = length < cap - 1 ? length : cap - 1;
        if (!read_mem(obj + L->ascii_data, out, n))
            return false;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)out[i] >= 0x80 || out[i] == '\0')
                return false; /* not what an ASCII str holds: memory was reused */
        out[n] = '\0';
        return true;
    }
    uint64_t utf8 = 0;
    read_u64(obj + L->compact_utf8, &utf8);
    if (utf8) {
        size_t n = 0;
        while (n < cap - 1 && read_mem(utf8 + n, out + n, 1) && out[n])
            n++;
        out[n] = '\0';
        return true;
    }
    /* Latin-1, UCS-2 or UCS-4 code points to UTF-8. */
    size_t o = 0;
    for (uint64_t i = 0; i < length && o + 4 < cap; i++) {
        uint32_t cp = 0;
        if (!read_mem(obj + L->compact_data + i * kind, &cp, kind))
            return false;
        o += python_utf8_put(cp, out + o);
    }
    out[o] = '\0';
    return true;
}

/* Fills names and the line for one captured frame. Returns false when the
 * code object is gone or is not what the handler saw. */
bool agent_python_resolve(const struct py_frame_ref *f, struct agent_pycode_info *info, bool need_names)
{
    const struct py_layout *L = layout;
    if (!L)
        return false;
    uint64_t type, name_ptr, filename_ptr, qualname_ptr, linetable;
    int32_t first_line;
    if (!read_u64(f->code + L->object_type, &type) || type != code_type_addr ||
        !read_u64(f->code + L->code_name, &name_ptr) || !read_u64(f->code + L->code_filename, &filename_ptr) ||
        !read_mem(f->code + L->code_firstlineno, &first_line, sizeof first_line))
        return false;
    if (py_code_fingerprint(name_ptr, filename_ptr, first_line) != f->fingerprint)
        return false; /* the address now holds another code object */
    info->first_line = first_line;
    if (need_names) {
        if (!read_u64(f->code + L->code_qualname, &qualname_ptr) ||
            !read_str(filename_ptr, info->filename, sizeof info->filename) ||
            !read_str(qualname_ptr, info->qualname, sizeof info->qualname))
            return false;
    }
    info->line = first_line;
    if (read_u64(f->code + L->code_linetable, &linetable)) {
        uint64_t size;
        if (read_u64(linetable + L->bytes_size, &size) && size > 0 && size < (1u << 20)) {
            uint8_t *table = malloc(size);
            if (table && read_mem(linetable + L->bytes_data, table, size))
                info->line = python_line_from_table(table, size, first_line, f->instr);
            free(table);
        }
    }
    return true;
}
