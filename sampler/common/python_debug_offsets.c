/*
 * sampler/common/python_debug_offsets.c — CPython 3.13+'s own description of
 * its structs: _Py_DebugOffsets, the head of _PyRuntime (a cookie
 * "xdebugpy", the version, then the offset of every field a debugger or
 * profiler reads). A process tells us where its fields are, so a 3.13 or
 * 3.14 built with other options (or patched by a distribution) is read right
 * without a table per build; the table entry (python_layout.h) supplies only
 * what the debug offsets do not carry (_co_firsttraceable, the frame-owner
 * values, 3.14's reference tag bits) and which version of the struct
 * _Py_DebugOffsets itself is.
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

/* The struct differs between versions (3.14 adds members inside groups:
 * interpreter_state.threads_main right after threads_head, so no version's
 * struct is a prefix of the next): each version's bytes are read with a
 * mirror of that version's struct, then the members used are copied, by
 * name, into struct debug_fields. Every member is a uint64_t after the
 * cookie. Names are CPython's (Include/internal/pycore_runtime.h in 3.13,
 * pycore_debug_offsets.h in 3.14). */

/* CPython 3.13's _Py_DebugOffsets: 584 bytes in 3.13.0. */
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

/* CPython 3.14's _Py_DebugOffsets: 760 bytes in 3.14.10. */
struct py_debug_offsets_3_14 {
    char cookie[8];
    uint64_t version;
    uint64_t free_threaded;
    struct { uint64_t size, finalizing, interpreters_head; } runtime_state;
    struct {
        uint64_t size, id, next, threads_head, threads_main, gc, imports_modules, sysdict, builtins, ceval_gil,
            gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked, gil_runtime_state_holder,
            code_object_generation, tlbc_generation;
    } interpreter_state;
    struct {
        uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk, status;
    } thread_state;
    struct {
        uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer, tlbc_index;
    } interpreter_frame;
    struct {
        uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
            localspluskinds, co_code_adaptive, co_tlbc;
    } code_object;
    struct { uint64_t size, ob_type; } pyobject;
    struct { uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
    struct { uint64_t size, ob_item, ob_size; } tuple_object;
    struct { uint64_t size, ob_item, ob_size; } list_object;
    struct { uint64_t size, used, table, mask; } set_object;
    struct { uint64_t size, ma_keys, ma_values; } dict_object;
    struct { uint64_t size, ob_fval; } float_object;
    struct { uint64_t size, lv_tag, ob_digit; } long_object;
    struct { uint64_t size, ob_size, ob_sval; } bytes_object;
    struct { uint64_t size, state, length, asciiobject_size; } unicode_object;
    struct { uint64_t size, collecting; } gc;
    struct { uint64_t size, gi_name, gi_iframe, gi_frame_state; } gen_object;
    struct { uint64_t next, prev; } llist_node;
    struct {
        uint64_t eval_breaker, remote_debugger_support, remote_debugging_enabled, debugger_pending_call,
            debugger_script_path, debugger_script_path_size;
    } debugger_support;
};

/* The members this file uses, whichever version's struct they came from. */
struct debug_fields {
    uint64_t free_threaded;
    struct { uint64_t size, interpreters_head; } runtime_state;
    struct { uint64_t size, threads_head; } interpreter_state;
    struct { uint64_t size, next, interp, current_frame, native_thread_id, datastack_chunk; } thread_state;
    struct { uint64_t size, previous, executable, instr_ptr, owner; } interpreter_frame;
    struct { uint64_t size, filename, name, qualname, linetable, firstlineno, co_code_adaptive; } code_object;
    struct { uint64_t size, ob_type; } pyobject;
    struct { uint64_t size, ob_size, ob_sval; } bytes_object;
    struct { uint64_t size, state, length, asciiobject_size; } unicode_object;
};

/* struct debug_fields from any version's struct d: the members have the
 * same names in every version. */
#define DEBUG_FIELDS_OF(d)                                                                                          \
    ((struct debug_fields){                                                                                       \
        .free_threaded = (d).free_threaded,                                                                       \
        .runtime_state = {(d).runtime_state.size, (d).runtime_state.interpreters_head},                          \
        .interpreter_state = {(d).interpreter_state.size, (d).interpreter_state.threads_head},                   \
        .thread_state = {(d).thread_state.size, (d).thread_state.next, (d).thread_state.interp,                  \
                         (d).thread_state.current_frame, (d).thread_state.native_thread_id,                      \
                         (d).thread_state.datastack_chunk},                                                      \
        .interpreter_frame = {(d).interpreter_frame.size, (d).interpreter_frame.previous,                        \
                              (d).interpreter_frame.executable, (d).interpreter_frame.instr_ptr,                 \
                              (d).interpreter_frame.owner},                                                      \
        .code_object = {(d).code_object.size, (d).code_object.filename, (d).code_object.name,                    \
                        (d).code_object.qualname, (d).code_object.linetable, (d).code_object.firstlineno,        \
                        (d).code_object.co_code_adaptive},                                                       \
        .pyobject = {(d).pyobject.size, (d).pyobject.ob_type},                                                    \
        .bytes_object = {(d).bytes_object.size, (d).bytes_object.ob_size, (d).bytes_object.ob_sval},             \
        .unicode_object = {(d).unicode_object.size, (d).unicode_object.state, (d).unicode_object.length,         \
                           (d).unicode_object.asciiobject_size},                                                 \
    })

/* The members used, read from head with the struct of the given kind (enum
 * py_debug_offsets_kind); false with the reason when head is too short. */
static bool read_debug_fields(unsigned kind, const uint8_t *head, size_t len, struct debug_fields *out, char *why,
                              size_t why_cap)
{
    size_t need;
    switch (kind) {
    case PY_DEBUG_OFFSETS_3_13: {
        struct py_debug_offsets_3_13 d;
        need = sizeof d;
        if (len < need)
            break;
        memcpy(&d, head, sizeof d);
        *out = DEBUG_FIELDS_OF(d);
        return true;
    }
    case PY_DEBUG_OFFSETS_3_14: {
        struct py_debug_offsets_3_14 d;
        need = sizeof d;
        if (len < need)
            break;
        memcpy(&d, head, sizeof d);
        *out = DEBUG_FIELDS_OF(d);
        return true;
    }
    default:
        snprintf(why, why_cap, "no known layout of _Py_DebugOffsets");
        return false;
    }
    snprintf(why, why_cap, "only %zu bytes of _PyRuntime could be read (_Py_DebugOffsets has %zu)", len, need);
    return false;
}

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
    char cookie[8];
    uint64_t version;
    if (len < sizeof cookie + sizeof version) {
        snprintf(why, why_cap, "only %zu bytes of _PyRuntime could be read", len);
        return false;
    }
    memcpy(cookie, head, sizeof cookie);
    memcpy(&version, head + sizeof cookie, sizeof version);
    if (memcmp(cookie, "xdebugpy", 8) != 0) {
        snprintf(why, why_cap, "_PyRuntime does not start with the _Py_DebugOffsets cookie \"xdebugpy\"");
        return false;
    }
    unsigned major = (unsigned)(version >> 24) & 0xff, minor = (unsigned)(version >> 16) & 0xff;
    if (major != base->major || minor != base->minor) {
        snprintf(why, why_cap, "_Py_DebugOffsets says version %u.%u (0x%08llx), the interpreter %u.%u", major,
                 minor, (unsigned long long)version, base->major, base->minor);
        return false;
    }
    struct debug_fields d;
    if (!read_debug_fields(base->debug_offsets, head, len, &d, why, why_cap))
        return false;
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
             !field_fits(d.thread_state.native_thread_id, 8, d.thread_state.size, &out->tstate_thread_id) ||
             !field_fits(d.thread_state.datastack_chunk, 8, d.thread_state.size, &out->tstate_datastack_chunk))
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
    if (table->debug_offsets == PY_DEBUG_OFFSETS_NONE)
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
    if (L && L->debug_offsets != PY_DEBUG_OFFSETS_NONE && L != py_layout_find(L->major, L->minor))
        free((void *)L);
}
