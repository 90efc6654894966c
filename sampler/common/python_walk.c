/*
 * sampler/common/python_walk.c — the one CPython frame walker, used by the
 * agent's signal handler, the agent's writer (another thread's frames) and
 * attach mode (another process's frames).
 *
 * HANDLER-SAFE: py_tstate_native_tid() and py_walk_frames() run in the
 * agent's SIGTRAP handler, so nothing in this file mallocs, locks or uses
 * stdio (names and lines, which need malloc, are python_code.c's); memory of the
 * target is only ever touched through the caller's struct py_reader, and what
 * it returns is copied into small buffers on the stack, so a reader that
 * copies (process_vm_readv) and one that checks and reads in place look the
 * same to the walk.
 *
 * Versions: the walk reads offsets from a struct py_layout and never names a
 * version; py_layout_find() is the one place a version picks a layout.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sampler/common/common.h"
#include "sampler/common/python_layout.h"

const struct py_layout *py_layout_find(unsigned major, unsigned minor)
{
    for (size_t i = 0; i < sizeof py_layouts / sizeof py_layouts[0]; i++)
        if (py_layouts[i]->major == major && py_layouts[i]->minor == minor)
            return py_layouts[i];
    return NULL;
}

/* Appends the decimal digits of v at buf[*o] while there is room. */
static void put_uint(char *buf, size_t cap, size_t *o, unsigned v)
{
    char digits[10];
    size_t n = 0;
    do
        digits[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (n > 0 && *o + 1 < cap)
        buf[(*o)++] = digits[--n];
}

/* For the "not supported" notes, so they name whatever the table holds.
 * Formatted by hand: this file stays free of stdio (handler rules). */
void py_layouts_supported(char *buf, size_t cap)
{
    size_t o = 0;
    if (cap == 0)
        return;
    for (size_t i = 0; i < sizeof py_layouts / sizeof py_layouts[0]; i++) {
        if (i > 0 && o + 2 < cap) {
            buf[o++] = ',';
            buf[o++] = ' ';
        }
        put_uint(buf, cap, &o, py_layouts[i]->major);
        if (o + 1 < cap)
            buf[o++] = '.';
        put_uint(buf, cap, &o, py_layouts[i]->minor);
    }
    buf[o] = '\0';
}

/* Reads len bytes of an object at addr. Every pointer the walk follows is
 * to an 8-aligned CPython object: NULL or a misaligned value means the chain
 * was caught mid-update (or the layout is wrong), and is not read at all. */
static bool read_obj(const struct py_target *t, uint64_t addr, void *buf, size_t len, unsigned flags)
{
    if (addr == 0 || (addr & 7))
        return false;
    return t->mem.read(t->mem.ctx, addr, buf, len, flags);
}

/* The 8-byte field at offset off of the object at base (checked like any
 * object pointer: the field offsets of pointers are multiples of 8). */
static bool read_field64(const struct py_target *t, uint64_t base, size_t off, uint64_t *out)
{
    return base != 0 && (base & 7) == 0 && read_obj(t, base + off, out, sizeof *out, 0);
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

/* A field's place in a struct: how far a copy must reach to hold it. */
struct field_span {
    size_t off, size;
};

static size_t spans_end(const struct field_span *s, size_t n)
{
    size_t end = 0;
    for (size_t i = 0; i < n; i++)
        end = s[i].off + s[i].size > end ? s[i].off + s[i].size : end;
    return end;
}

/* Adds a field to a span list when the version has it. */
static void span_add(struct field_span *s, size_t *n, int16_t off, size_t size)
{
    if (off != PY_ABSENT)
        s[(*n)++] = (struct field_span){(size_t)off, size};
}

/* How much of a frame (_PyInterpreterFrame, or PyFrameObject before 3.11)
 * the walk reads: the fields it uses, in whatever order the version puts them. */
static size_t frame_bytes(const struct py_layout *L)
{
    struct field_span used[5];
    size_t n = 0;
    span_add(used, &n, L->frame_code, 8);
    span_add(used, &n, L->frame_previous, 8);
    span_add(used, &n, L->frame_instr, L->instr_kind == PY_INSTR_POINTER ? 8 : 4);
    span_add(used, &n, L->frame_is_entry, 1);
    span_add(used, &n, L->frame_owner, 1);
    return spans_end(used, n);
}

/* How much of a PyCodeObject the walk and the resolver (python_code.c) read
 * at once: every field either uses. */
size_t py_code_header_bytes(const struct py_layout *L)
{
    struct field_span used[7];
    size_t n = 0;
    span_add(used, &n, L->object_type, 8);
    span_add(used, &n, L->code_firstlineno, 4);
    span_add(used, &n, L->code_filename, 8);
    span_add(used, &n, L->code_name, 8);
    span_add(used, &n, L->code_qualname, 8);
    span_add(used, &n, L->code_linetable, 8);
    span_add(used, &n, L->code_firsttraceable, 4);
    return spans_end(used, n);
}

/* The thread id a state names, as the kernel's tid. 3.9/3.10 keep only
 * pthread_self(), a pointer to glibc's struct pthread, whose tid field is
 * at t->pthread_tid_offset (py_pthread_tid_offset found it in our own
 * thread); handler-safe either way (two reads). */
bool py_tstate_native_tid(const struct py_target *t, uint64_t tstate, uint64_t *tid)
{
    const struct py_layout *L = t->layout;
    if (!read_field64(t, tstate, (size_t)L->tstate_thread_id, tid))
        return false;
    if (L->thread_id_kind == PY_THREAD_NATIVE_ID)
        return true;
    int32_t kernel_tid = 0;
    if (t->pthread_tid_offset <= 0 || *tid == 0 || (*tid & 7) ||
        !t->mem.read(t->mem.ctx, *tid + (uint64_t)t->pthread_tid_offset, &kernel_tid, sizeof kernel_tid, 0))
        return false;
    *tid = (uint64_t)(uint32_t)kernel_tid;
    return true;
}

/* Where glibc's struct pthread keeps the kernel tid: found once in the
 * calling thread (pthread_self() points at its struct pthread; the field
 * holding gettid() is the one), since glibc does not publish it. -1 when
 * not found. Not handler code; the glibc of a process we attach to is
 * assumed to be this machine's. */
int32_t py_pthread_tid_offset(void)
{
    const int32_t *self = (const int32_t *)(uintptr_t)pthread_self();
    int32_t tid = (int32_t)syscall(SYS_gettid);
    /* struct pthread starts with the TCB header and list links (pointers,
     * 0x2d0 bytes in glibc 2.36 on x86-64), then the tid. */
    for (size_t i = 2; self && i < 1024 / sizeof *self; i++)
        if (self[i] == tid)
            return (int32_t)(i * sizeof *self);
    return -1;
}

/* The executing instruction of frame f (code object at code, whose
 * co_firsttraceable is first_traceable) in 2-byte code units, -1 before the
 * first. False when the frame is still being set up (3.11+: an "incomplete"
 * frame, not a real call yet). */
static bool frame_instr(const struct py_layout *L, const uint8_t *f, uint64_t code, int32_t first_traceable,
                        int32_t *instr)
{
    switch (L->instr_kind) {
    case PY_INSTR_LASTI_BYTES: {
        int32_t lasti = field32(f, (size_t)L->frame_instr);
        *instr = lasti < 0 ? -1 : lasti / 2;
        return true;
    }
    case PY_INSTR_LASTI_UNITS: {
        int32_t lasti = field32(f, (size_t)L->frame_instr);
        *instr = lasti < 0 ? -1 : lasti;
        return true;
    }
    default: {
        /* prev_instr (3.11/3.12) / instr_ptr (3.13+) point into co_code_adaptive. */
        uint64_t at = field64(f, (size_t)L->frame_instr);
        uint64_t code_start = code + (uint64_t)L->code_code_adaptive;
        /* Incomplete frames (before the first traceable instruction) are
         * not real calls yet; a generator's frame is always complete. */
        if (f[L->frame_owner] != L->owner_generator &&
            (int64_t)at < (int64_t)(code_start + 2 * (uint64_t)first_traceable))
            return false;
        int64_t offset = ((int64_t)at - (int64_t)code_start) / 2;
        *instr = offset < 0 ? -1 : (int32_t)offset;
        return true;
    }
    }
}

/* What one frame of the chain turned out to be. */
enum walk_step { WALK_STOP, WALK_SKIP, WALK_TAKEN, WALK_SHIM };

/* A hash of a frame's header bytes (struct py_innermost_memo), the 8-byte
 * word at offset skip read as 0 (SIZE_MAX: none), so that a key can leave
 * out one pointer without copying the header. Whole words are loaded with a
 * fixed-size copy (one load); a copy of n - i bytes in every round was a
 * byte loop, ~30 instructions a word (bench/python_capture.sh). */
static uint64_t frame_hash_but(const uint8_t *f, size_t n, size_t skip)
{
    uint64_t h = n;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = 0;
        if (i != skip && n - i >= 8)
            memcpy(&w, f + i, 8);
        else if (i != skip)
            memcpy(&w, f + i, n - i);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    return h;
}

static uint64_t frame_hash(const uint8_t *f, size_t n)
{
    return frame_hash_but(f, n, SIZE_MAX);
}

/* What identifies one call of the innermost frame apart from where it is
 * (struct py_innermost_memo): 3.11+ frames hold only per-call pointers before
 * the instruction (f_code or f_executable, previous, the function, globals,
 * builtins, locals, the frame object), all of them hashed; a 3.9/3.10 frame
 * object's header has its refcount and value-stack fields there, so only
 * f_code and f_back. */
static uint64_t call_hash(const struct py_layout *L, const uint8_t *f, size_t fbytes)
{
    if (L->instr_kind == PY_INSTR_POINTER && L->frame_instr > 0 && (size_t)L->frame_instr <= fbytes)
        return frame_hash(f, (size_t)L->frame_instr);
    uint64_t key[2] = {field64(f, (size_t)L->frame_code), field64(f, (size_t)L->frame_previous)};
    return frame_hash((const uint8_t *)key, sizeof key);
}

/* The key of struct py_innermost_memo's seen[]: f_code and the frame's
 * header before the instruction but its previous frame (3.11+). 0: none. */
static uint64_t code_key(const struct py_layout *L, const uint8_t *f, size_t fbytes)
{
    if (L->instr_kind != PY_INSTR_POINTER || L->frame_instr <= 0 || (size_t)L->frame_instr > fbytes ||
        L->frame_previous < 0 || L->frame_previous % 8 || L->frame_previous + 8 > L->frame_instr)
        return 0;
    uint64_t k = frame_hash_but(f, (size_t)L->frame_instr, (size_t)L->frame_previous);
    return k ? k : 1;
}

/* moved: samples served since the code object was read; slot: its seen[]
 * entry, -1 for none */
static void memo_set(struct py_innermost_memo *memo, uint64_t frame, uint64_t code_field, uint64_t instr_field,
                     uint64_t call, const struct py_frame_ref *ref, int32_t first_traceable, uint8_t moved, int slot)
{
    memo->moved = moved;
    memo->seen_slot = (int8_t)slot;
    memo->frame = frame;
    memo->code_field = code_field;
    memo->instr_field = instr_field;
    memo->call_hash = call;
    memo->ref = *ref;
    memo->first_traceable = first_traceable;
    memo->valid = true;
}

/* What a walk reads of each frame and code object (frame_bytes,
 * py_code_header_bytes): the same for every frame of the walk, so taken
 * once per walk, not per frame (~35 instructions each, a fifth of the
 * handler's Python capture on py_split.py, 2026-11-30). in_place_lo/hi:
 * the handler's own thread's current data-stack chunk (current_chunk), once
 * the reader says it may be used in place (py_reader.in_place): its frames
 * are then not copied through the reader (an indirect call, the reader's
 * range checks and a 72-byte memcpy: ~90 instructions a frame, a third of
 * an outer frame's); 0, 0: none. */
struct walk_sizes {
    size_t frame, code;
    uint64_t in_place_lo, in_place_hi;
};

/* One frame of the chain into out (when it is a complete one); *previous is
 * the next frame out. WALK_SHIM: the frame is the C stack's entry shim
 * (3.12+), so the frame taken before it was the first of its eval call.
 * frame_flags and code_flags go to the reader with the frame's and its code
 * object's reads; memo (innermost frame only, else NULL): see struct
 * py_innermost_memo; last[0..nlast) (outer frames only, else NULL): the
 * previous walk's outer frames, searched from *cursor on; *key_out: this
 * frame's entry for the next walk's (struct py_outer_memo). */
static enum walk_step walk_one(const struct py_target *t, const struct walk_sizes *sizes, uint64_t frame,
                               unsigned frame_flags, unsigned code_flags, struct py_innermost_memo *memo,
                               const struct py_frame_memo *last, unsigned nlast, unsigned *cursor,
                               struct py_frame_memo *key_out, struct py_frame_ref *out, uint64_t *previous)
{
    const struct py_layout *L = t->layout;
    uint8_t fcopy[128], c[256];
    const uint8_t *f = fcopy;
    size_t fbytes = sizes->frame, cbytes = sizes->code;
    if (fbytes > sizeof fcopy || cbytes > sizeof c)
        return WALK_STOP;
    if (frame < sizes->in_place_hi && frame >= sizes->in_place_lo && fbytes <= sizes->in_place_hi - frame &&
        (frame & 7) == 0) /* first the compare that ends it where there is no chunk (3.9, 3.10) */
        f = (const uint8_t *)(uintptr_t)frame;
    else if (!read_obj(t, frame, fcopy, fbytes, frame_flags))
        return WALK_STOP;
    *previous = field64(f, (size_t)L->frame_previous);
    if (L->entry_rule == PY_ENTRY_CSTACK_SHIM && f[L->frame_owner] == L->owner_cstack)
        return WALK_SHIM; /* its f_code / f_executable is no user code (3.13+: None) */
    uint64_t code_field = field64(f, (size_t)L->frame_code);
    /* 3.14's tagged reference: the object is the value without its tag bits. */
    uint64_t code = code_field & ~(uint64_t)L->frame_code_tag_bits;
    uint64_t instr_field = L->instr_kind == PY_INSTR_POINTER ? field64(f, (size_t)L->frame_instr)
                                                             : (uint32_t)field32(f, (size_t)L->frame_instr);
    uint32_t is_entry = L->entry_rule == PY_ENTRY_EVERY_FRAME ? 1
                        : L->entry_rule == PY_ENTRY_FLAG      ? f[L->frame_is_entry]
                                                              : 0;
    uint64_t call = 0; /* call_hash(), computed when first needed (0: not yet) */
    if (memo && memo->valid && memo->frame == frame && memo->code_field == code_field) {
        if (memo->instr_field == instr_field) {
            *out = memo->ref;
            out->is_entry = is_entry;
            return WALK_TAKEN;
        }
        /* The same call, moved on: the code object is the one the frame
         * held then, only the instruction is new (no code object read). */
        int32_t instr;
        call = call_hash(L, f, fbytes);
        if (memo->call_hash == call && memo->moved < PY_MEMO_MOVED_MAX &&
            frame_instr(L, f, code, memo->first_traceable, &instr)) {
            memo->moved++;
            if (memo->seen_slot >= 0 && memo->seen[memo->seen_slot].code_field == code_field)
                memo->seen[memo->seen_slot].uses = memo->moved; /* one count for both */
            memo->instr_field = instr_field;
            memo->ref.instr = instr;
            *out = memo->ref;
            out->is_entry = is_entry;
            return WALK_TAKEN;
        }
    }
    struct py_code_seen *seen = NULL;
    uint64_t key = 0;
    if (memo) {
        memo->valid = false;
        key = code_key(L, f, fbytes);
        seen = key ? &memo->seen[(key ^ key >> 32) & (PY_CODE_SEEN - 1)] : NULL;
        int32_t instr;
        if (seen && seen->key == key && seen->code_field == code_field && seen->uses < PY_MEMO_MOVED_MAX) {
            /* the same function again: its code object is not read */
            if (!frame_instr(L, f, code, seen->first_traceable, &instr))
                return WALK_SKIP;
            *out = (struct py_frame_ref){
                .code = code, .fingerprint = seen->fingerprint, .instr = instr, .is_entry = is_entry};
            /* the memo's same-call hits count on from this entry's */
            seen->uses++;
            memo_set(memo, frame, code_field, instr_field, call ? call : call_hash(L, f, fbytes), out,
                     seen->first_traceable, seen->uses, (int)(seen - memo->seen));
            return WALK_TAKEN;
        }
    }
    if (last) {
        /* the previous walk's frames in the same order: look from where the
         * last match was on, PY_FRAME_MEMO_AHEAD entries at most. A frame
         * the memo does not hold (a deeper call, another generator's chain)
         * scanned all 48 entries: in a walk that alternates between two
         * generators' 40-frame chains, 38 % of its instructions. 16 is the
         * memo's old size, so every frame it found is still found: a frame
         * further ahead is a stack shallower by 16 frames than a sample ago. */
        *key_out = (struct py_frame_memo){.frame = frame, .code_field = code_field, .instr_field = instr_field};
        unsigned j = *cursor;                      /* <= nlast */
        if (j < nlast && last[j].frame != frame) { /* not where the last match leads: look ahead */
            unsigned end = nlast - j > PY_FRAME_MEMO_AHEAD ? j + PY_FRAME_MEMO_AHEAD : nlast;
            while (++j < end && last[j].frame != frame)
                ;
            if (j == end)
                j = nlast;
        }
        if (j < nlast) {
            *cursor = j + 1;
            if (last[j].code_field == code_field && last[j].instr_field == instr_field) {
                *out = last[j].ref;
                out->is_entry = is_entry;
                return WALK_TAKEN;
            }
        }
    }
    if (!read_obj(t, code, c, cbytes, code_flags) || field64(c, (size_t)L->object_type) != t->code_type)
        return WALK_STOP; /* the frame changed under us, or is not a frame: keep what was read */
    /* co_firsttraceable: 3.11+ only (the instruction is a pointer there) */
    int32_t instr, first_traceable = L->instr_kind == PY_INSTR_POINTER ? field32(c, (size_t)L->code_firsttraceable) : 0;
    if (!frame_instr(L, f, code, first_traceable, &instr))
        return WALK_SKIP;
    *out = (struct py_frame_ref){
        .code = code,
        .fingerprint = py_code_fingerprint(field64(c, (size_t)L->code_name), field64(c, (size_t)L->code_filename),
                                           field32(c, (size_t)L->code_firstlineno)),
        .instr = instr,
        .is_entry = is_entry,
    };
    if (memo) {
        memo_set(memo, frame, code_field, instr_field, call ? call : call_hash(L, f, fbytes), out, first_traceable, 0,
                 seen ? (int)(seen - memo->seen) : -1);
        if (seen)
            *seen = (struct py_code_seen){key, code_field, out->fingerprint, first_traceable, 0};
    }
    return WALK_TAKEN;
}

/* The frames of the data-stack chunk tstate names now (3.11+), as
 * [*lo, *hi). That chunk stays mapped while the state names it: CPython
 * unlinks a chunk from the state before it frees it (_PyThreadState_PopFrame
 * stores the previous chunk, then calls the arena allocator's free), so a
 * frame inside it can be read in place even while it is being popped. A
 * frame outside it (in a chunk on its way out, a generator's, a shim on the
 * C stack) is not vouched for. */
static bool current_chunk(const struct py_target *t, uint64_t tstate, uint64_t *lo, uint64_t *hi)
{
    const struct py_layout *L = t->layout;
    uint64_t chunk = 0, size = 0;
    if (L->tstate_datastack_chunk == PY_ABSENT || !read_field64(t, tstate, (size_t)L->tstate_datastack_chunk, &chunk) ||
        !read_field64(t, chunk, PY_STACK_CHUNK_SIZE, &size) || size <= PY_STACK_CHUNK_DATA || size > (1ull << 32) ||
        chunk > UINT64_MAX - size)
        return false;
    *lo = chunk + PY_STACK_CHUNK_DATA;
    *hi = chunk + size;
    return true;
}

unsigned py_walk_frames(const struct py_target *t, uint64_t tstate, struct py_frame_ref *out, unsigned max)
{
    const struct py_layout *L = t->layout;
    uint64_t holder = tstate, frame = 0;
    /* 3.11/3.12 keep the current frame in the state's _PyCFrame, the others in the state. */
    if ((L->tstate_cframe != PY_ABSENT && !read_field64(t, tstate, (size_t)L->tstate_cframe, &holder)) ||
        !read_field64(t, holder, (size_t)L->current_frame, &frame))
        return 0;
    /* The innermost frame and its code object may be on their way out
     * (PY_READ_INNERMOST), unless the frame is in the current chunk, whose
     * frames are then read in place. Asked only by the agent's handler (the
     * walk with a memo), on its own thread: the other readers copy every
     * region (another thread's chunk may be freed under them), and the two
     * reads would be wasted on them. */
    struct walk_sizes sizes = {frame_bytes(L), py_code_header_bytes(L), 0, 0};
    uint64_t lo = 0, hi = 0;
    bool chunk = t->memo && frame != 0 && current_chunk(t, tstate, &lo, &hi);
    unsigned innermost_frame_flags =
        chunk && frame >= lo && frame < hi && sizes.frame <= hi - frame ? 0 : PY_READ_INNERMOST;
    if (chunk && t->mem.in_place && t->mem.in_place(t->mem.ctx, lo, (size_t)(hi - lo))) {
        sizes.in_place_lo = lo;
        sizes.in_place_hi = hi;
    }
    unsigned n = 0, cursor = 0, nfresh = 0;
    /* this walk's outer frames go to the memo's other half: the next walk's memo */
    const struct py_frame_memo *last = t->outer ? t->outer->f[t->outer->half] : NULL;
    unsigned nlast = t->outer ? t->outer->n[t->outer->half] : 0;
    struct py_frame_memo *fresh = t->outer ? t->outer->f[!t->outer->half] : NULL;
    /* Bounded: a chain corrupted into a cycle ends after 4x the frames kept. */
    for (unsigned steps = 0; frame != 0 && n < max && steps < 4 * OPR_MAX_PYFRAMES; steps++) {
        uint64_t previous = 0;
        struct py_frame_memo key;
        enum walk_step step =
            steps == 0 ? walk_one(t, &sizes, frame, innermost_frame_flags, PY_READ_INNERMOST, t->memo, NULL, 0, NULL,
                                  NULL, &out[n], &previous)
                       : walk_one(t, &sizes, frame, 0, 0, NULL, last, nlast, &cursor, &key, &out[n], &previous);
        if (step == WALK_STOP)
            break;
        if (step == WALK_TAKEN && steps > 0 && t->outer && nfresh < PY_FRAME_MEMO) {
            key.ref = out[n];
            fresh[nfresh++] = key;
        }
        if (step == WALK_TAKEN)
            n++;
        else if (step == WALK_SHIM && n > 0)
            out[n - 1].is_entry = 1;
        frame = previous;
    }
    if (n == 0 && t->memo)
        t->memo->valid = false;
    if (t->outer) {
        t->outer->half = !t->outer->half;
        t->outer->n[t->outer->half] = nfresh;
    }
    return n;
}

bool py_runtime_threads(const struct py_target *t, uint64_t runtime, uint64_t *interp, uint64_t *first)
{
    const struct py_layout *L = t->layout;
    return read_field64(t, runtime, (size_t)L->runtime_interpreters_head, interp) && *interp != 0 &&
           read_field64(t, *interp, (size_t)L->interp_threads_head, first);
}

bool py_tstate_links(const struct py_target *t, uint64_t tstate, struct py_tstate_links *out)
{
    const struct py_layout *L = t->layout;
    return read_field64(t, tstate, (size_t)L->tstate_interp, &out->interp) &&
           py_tstate_native_tid(t, tstate, &out->native_tid) &&
           read_field64(t, tstate, (size_t)L->tstate_next, &out->next);
}

bool py_current_frame_slot(const struct py_target *t, uint64_t tstate, uint64_t *slot, bool *on_c_stack)
{
    const struct py_layout *L = t->layout;
    uint64_t holder = tstate;
    *on_c_stack = L->tstate_cframe != PY_ABSENT;
    if (*on_c_stack && !read_field64(t, tstate, (size_t)L->tstate_cframe, &holder))
        return false;
    *slot = holder + (uint64_t)L->current_frame;
    return holder != 0;
}
