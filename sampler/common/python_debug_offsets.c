/*
 * sampler/common/python_debug_offsets.c — CPython 3.13+'s own description of
 * its structs: _Py_DebugOffsets, the head of _PyRuntime (a cookie
 * "xdebugpy", the version, then the offset of every field a debugger or
 * profiler reads). A process tells us where its fields are, so a 3.13 built
 * with other options (or patched by a distribution) is read right without a
 * table per build; the table entry (python_layout.h) supplies only what the
 * debug offsets do not carry (_co_firsttraceable, the frame-owner values).
 *
 * Anything unexpected (cookie, version, a free-threaded build, a size or an
 * offset that cannot be) refuses the layout with one reason: a wrong offset
 * would give wrong names, which is worse than native-only stacks.
 *
 * NOT HANDLER CODE (mallocs the derived layout); runs once per process.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/common/common.h"
#include "sampler/common/python_layout.h"

/* CPython 3.13's _Py_DebugOffsets (Include/internal/pycore_runtime.h), every
 * member a uint64_t after the cookie; the groups this reads, by their names
 * there. 584 bytes in 3.13.0. */
struct py_debug_offsets_3_13 {
    char cookie[8];
    uint64_t version;
    uint64_t free_threaded;
    struct { uint64_t size, finalizing, interpreters_head; } runtime_state;
    struct {
        uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
            gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked, gil_runtime_state_holder;
    } interpreter_state;
    struct {
        uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk, status;
    } thread_state;
    struct { uint64_t size, previous, executable, instr_ptr, localsplus, owner; } interpreter_frame;
    struct {
        uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
            localspluskinds, co_code_adaptive;
    } code_object;
    struct { uint64_t size, ob_type; } pyobject;
    struct { uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
    struct { uint64_t size, ob_item, ob_size; } tuple_object;
    struct { uint64_t size, ob_item, ob_size; } list_object;
    struct { uint64_t size, ma_keys, ma_values; } dict_object;
    struct { uint64_t size, ob_fval; } float_object;
    struct { uint64_t size, lv_tag, ob_digit; } long_object;
    struct { uint64_t size, ob_size, ob_sval; } bytes_object;
    struct { uint64_t size, state, length, asciiobject_size; } unicode_object;
};

/* A field of `width` bytes at off inside a struct of struct_size bytes,
 * stored in an int16_t offset: false when it cannot be. (Structs can be
 * large, _PyRuntimeState is ~100 KB, but the fields read sit near the start.) */
static bool field_fits(uint64_t off, unsigned width, uint64_t struct_size, int16_t *out)
{
    if (struct_size == 0 || struct_size > (1u << 24) || off + width > struct_size || off + width > INT16_MAX)
        return false;
    *out = (int16_t)off;
    return true;
}

bool py_layout_from_debug_offsets(const struct py_layout *base, const uint8_t *head, size_t len,
                                  struct py_layout *out, char *why, size_t why_cap)
{
    struct py_debug_offsets_3_13 d;
    if (len < sizeof d) {
        snprintf(why, why_cap, "only %zu bytes of _PyRuntime could be read", len);
        return false;
    }
    memcpy(&d, head, sizeof d);
    if (memcmp(d.cookie, "xdebugpy", 8) != 0) {
        snprintf(why, why_cap, "_PyRuntime does not start with the _Py_DebugOffsets cookie \"xdebugpy\"");
        return false;
    }
    unsigned major = (unsigned)(d.version >> 24) & 0xff, minor = (unsigned)(d.version >> 16) & 0xff;
    if (major != base->major || minor != base->minor) {
        snprintf(why, why_cap, "_Py_DebugOffsets says version %u.%u (0x%08llx), the interpreter %u.%u", major,
                 minor, (unsigned long long)d.version, base->major, base->minor);
        return false;
    }
    if (d.free_threaded) {
        snprintf(why, why_cap, "free-threaded builds (%u.%ut) are not supported", major, minor);
        return false;
    }
    *out = *base;
    const char *bad = NULL;
    if (!field_fits(d.runtime_state.interpreters_head, 8, d.runtime_state.size, &out->runtime_interpreters_head))
        bad = "runtime_state";
    else if (!field_fits(d.interpreter_state.threads_head, 8, d.interpreter_state.size, &out->interp_threads_head))
        bad = "interpreter_state";
    else if (!field_fits(d.thread_state.next, 8, d.thread_state.size, &out->tstate_next) ||
             !field_fits(d.thread_state.interp, 8, d.thread_state.size, &out->tstate_interp) ||
             !field_fits(d.thread_state.current_frame, 8, d.thread_state.size, &out->current_frame) ||
             !field_fits(d.thread_state.native_thread_id, 8, d.thread_state.size, &out->tstate_thread_id))
        bad = "thread_state";
    else if (!field_fits(d.interpreter_frame.previous, 8, d.interpreter_frame.size, &out->frame_previous) ||
             !field_fits(d.interpreter_frame.executable, 8, d.interpreter_frame.size, &out->frame_code) ||
             !field_fits(d.interpreter_frame.instr_ptr, 8, d.interpreter_frame.size, &out->frame_instr) ||
             !field_fits(d.interpreter_frame.owner, 1, d.interpreter_frame.size, &out->frame_owner))
        bad = "interpreter_frame";
    else if (!field_fits(d.code_object.filename, 8, d.code_object.size, &out->code_filename) ||
             !field_fits(d.code_object.name, 8, d.code_object.size, &out->code_name) ||
             !field_fits(d.code_object.qualname, 8, d.code_object.size, &out->code_qualname) ||
             !field_fits(d.code_object.linetable, 8, d.code_object.size, &out->code_linetable) ||
             !field_fits(d.code_object.firstlineno, 4, d.code_object.size, &out->code_firstlineno) ||
             /* co_code_adaptive is the variable-size tail: at the struct's end */
             !field_fits(d.code_object.co_code_adaptive, 0, d.code_object.size, &out->code_code_adaptive) ||
             out->code_firsttraceable + 4 > out->code_code_adaptive)
        bad = "code_object";
    else if (!field_fits(d.pyobject.ob_type, 8, d.pyobject.size, &out->object_type))
        bad = "pyobject";
    else if (!field_fits(d.bytes_object.ob_size, 8, d.bytes_object.size, &out->bytes_size) ||
             !field_fits(d.bytes_object.ob_sval, 1, d.bytes_object.size, &out->bytes_data))
        bad = "bytes_object";
    else if (!field_fits(d.unicode_object.length, 8, d.unicode_object.size, &out->ascii_length) ||
             !field_fits(d.unicode_object.state, 4, d.unicode_object.size, &out->ascii_state) ||
             d.unicode_object.asciiobject_size != (uint64_t)base->ascii_data)
        bad = "unicode_object"; /* the compact-str layout (utf8 after the ASCII head) is the table's */
    if (bad) {
        snprintf(why, why_cap, "_Py_DebugOffsets' %s offsets are not what CPython %u.%u has", bad, major, minor);
        return false;
    }
    return true;
}

const struct py_layout *py_layout_for_process(unsigned major, unsigned minor, const void *runtime_head,
                                              size_t head_len, char *why, size_t why_cap)
{
    const struct py_layout *table = py_layout_find(major, minor);
    if (!table) {
        char supported[64];
        py_layouts_supported(supported, sizeof supported);
        snprintf(why, why_cap, "Python %u.%u is not supported for Python frames (supported: %s)", major, minor,
                 supported);
        return NULL;
    }
    if (!table->has_debug_offsets)
        return table;
    struct py_layout *own = malloc(sizeof *own);
    char reason[200] = "";
    if (own && runtime_head &&
        py_layout_from_debug_offsets(table, runtime_head, head_len, own, reason, sizeof reason))
        return own;
    free(own);
    snprintf(why, why_cap, "Python %u.%u: %s", major, minor, reason[0] ? reason : "_PyRuntime could not be read");
    return NULL;
}

void py_layout_release(const struct py_layout *L)
{
    if (L && L->has_debug_offsets && L != py_layout_find(L->major, L->minor))
        free((void *)L);
}
