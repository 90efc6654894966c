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

/* How much of an _PyInterpreterFrame the walk reads (the fields it uses, in
 * whatever order the version puts them). */
static size_t frame_bytes(const struct py_layout *L)
{
    const struct field_span used[] = {
        {L->iframe_f_code, 8}, {L->iframe_previous, 8}, {L->iframe_prev_instr, 8},
        {L->iframe_is_entry, 1}, {L->iframe_owner, 1},
    };
    return spans_end(used, sizeof used / sizeof used[0]);
}

/* How much of a PyCodeObject the walk and the resolver (python_code.c) read
 * at once: every field either uses. */
size_t py_code_header_bytes(const struct py_layout *L)
{
    const struct field_span used[] = {
        {L->object_type, 8}, {L->code_firstlineno, 4}, {L->code_filename, 8}, {L->code_name, 8},
        {L->code_qualname, 8}, {L->code_linetable, 8}, {L->code_firsttraceable, 4},
    };
    return spans_end(used, sizeof used / sizeof used[0]);
}

bool py_tstate_native_tid(const struct py_target *t, uint64_t tstate, uint64_t *tid)
{
    return read_field64(t, tstate, t->layout->tstate_native_thread_id, tid);
}

/* One frame of the chain into out (when it is a complete one). Returns false
 * when the walk must stop here; *previous is the next frame out. */
static bool walk_one(const struct py_target *t, uint64_t frame, unsigned flags, struct py_frame_ref *out,
                     bool *taken, uint64_t *previous)
{
    const struct py_layout *L = t->layout;
    uint8_t f[128], c[256];
    size_t fbytes = frame_bytes(L), cbytes = py_code_header_bytes(L);
    *taken = false;
    if (fbytes > sizeof f || cbytes > sizeof c || !read_obj(t, frame, f, fbytes, flags))
        return false;
    uint64_t code = field64(f, L->iframe_f_code);
    if (!read_obj(t, code, c, cbytes, flags) || field64(c, L->object_type) != t->code_type)
        return false; /* the frame changed under us, or is not a frame: keep what was read */
    uint64_t prev_instr = field64(f, L->iframe_prev_instr);
    uint64_t code_start = code + L->code_code_adaptive;
    int32_t first_traceable = field32(c, L->code_firsttraceable);
    *previous = field64(f, L->iframe_previous);
    /* Incomplete frames (still being set up: prev_instr before the first
     * traceable instruction) are not real calls yet; a generator's frame
     * is always complete. */
    if (f[L->iframe_owner] != L->owner_generator &&
        (int64_t)prev_instr < (int64_t)(code_start + 2 * (uint64_t)first_traceable))
        return true;
    /* prev_instr points at the last instruction started, in 2-byte code units. */
    int64_t offset = ((int64_t)prev_instr - (int64_t)code_start) / 2;
    *out = (struct py_frame_ref){
        .code = code,
        .fingerprint = py_code_fingerprint(field64(c, L->code_name), field64(c, L->code_filename),
                                           field32(c, L->code_firstlineno)),
        .instr = offset < 0 ? -1 : (int32_t)offset,
        .is_entry = f[L->iframe_is_entry],
    };
    *taken = true;
    return true;
}

unsigned py_walk_frames(const struct py_target *t, uint64_t tstate, struct py_frame_ref *out, unsigned max)
{
    const struct py_layout *L = t->layout;
    uint64_t cframe = 0, frame = 0;
    if (!read_field64(t, tstate, L->tstate_cframe, &cframe) ||
        !read_field64(t, cframe, L->cframe_current_frame, &frame))
        return 0;
    unsigned n = 0;
    /* Bounded: a chain corrupted into a cycle ends after 4x the frames kept. */
    for (unsigned steps = 0; frame != 0 && n < max && steps < 4 * OPR_MAX_PYFRAMES; steps++) {
        bool taken;
        uint64_t previous = 0;
        if (!walk_one(t, frame, steps == 0 ? PY_READ_INNERMOST : 0, &out[n], &taken, &previous))
            break;
        n += taken;
        frame = previous;
    }
    return n;
}

bool py_runtime_threads(const struct py_target *t, uint64_t runtime, uint64_t *interp, uint64_t *first)
{
    const struct py_layout *L = t->layout;
    return read_field64(t, runtime, L->runtime_interpreters_head, interp) && *interp != 0 &&
           read_field64(t, *interp, L->interp_threads_head, first);
}

bool py_tstate_links(const struct py_target *t, uint64_t tstate, struct py_tstate_links *out)
{
    const struct py_layout *L = t->layout;
    return read_field64(t, tstate, L->tstate_interp, &out->interp) &&
           read_field64(t, tstate, L->tstate_native_thread_id, &out->native_tid) &&
           read_field64(t, tstate, L->tstate_next, &out->next);
}
