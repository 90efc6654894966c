/*
 * sampler/common/python_layout.h — where CPython keeps what the frame walker reads,
 * per CPython version. Only sampler/common's Python files include it: the
 * walker (python_walk.c) and the name/line resolver (python_code.c) only ever
 * see a struct py_layout, picked by py_layout_find() from py_layouts[] below,
 * so adding a version is adding an entry here, never a branch in the walk.
 *
 * Names follow the CPython structs they mirror:
 *   PyThreadState.cframe -> _PyCFrame.current_frame -> _PyInterpreterFrame
 *   _PyInterpreterFrame.{f_code, previous, prev_instr, is_entry, owner}
 *   PyCodeObject.{co_firstlineno, co_filename, co_name, co_qualname,
 *                 co_linetable, _co_firsttraceable, co_code_adaptive}
 */
#ifndef OPPROF_PYTHON_LAYOUT_H
#define OPPROF_PYTHON_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

struct py_layout {
    unsigned major, minor;
    /* PyThreadState */
    uint16_t tstate_cframe;
    uint16_t tstate_native_thread_id;
    /* _PyCFrame */
    uint16_t cframe_current_frame;
    /* _PyInterpreterFrame */
    uint16_t iframe_f_code;
    uint16_t iframe_previous;
    uint16_t iframe_prev_instr;
    uint16_t iframe_is_entry;
    uint16_t iframe_owner;
    uint8_t owner_generator; /* FRAME_OWNED_BY_GENERATOR */
    /* PyObject */
    uint16_t object_type;
    /* PyCodeObject */
    uint16_t code_firstlineno;
    uint16_t code_filename;
    uint16_t code_name;
    uint16_t code_qualname;
    uint16_t code_linetable;
    uint16_t code_firsttraceable;
    uint16_t code_code_adaptive;
    /* str and bytes objects */
    uint16_t ascii_length;
    uint16_t ascii_state;
    uint16_t ascii_data;     /* sizeof(PyASCIIObject) */
    uint16_t compact_utf8;   /* PyCompactUnicodeObject.utf8 */
    uint16_t compact_data;   /* sizeof(PyCompactUnicodeObject) */
    uint16_t bytes_size;     /* PyVarObject.ob_size */
    uint16_t bytes_data;     /* PyBytesObject.ob_sval */
    /* Reaching every thread's state from outside the process (attach mode):
     * _PyRuntime.interpreters.head -> PyInterpreterState.threads.head ->
     * PyThreadState.next, each state's .interp pointing back. */
    uint16_t runtime_interpreters_head;
    uint16_t interp_threads_head;
    uint16_t tstate_next;
    uint16_t tstate_interp;
};

/* x86-64, checked against Debian's 3.11.2 headers. */
static const struct py_layout py_layout_3_11 = {
    .major = 3, .minor = 11,
    .tstate_cframe = 56, .tstate_native_thread_id = 160,
    .cframe_current_frame = 8,
    .iframe_f_code = 32, .iframe_previous = 48, .iframe_prev_instr = 56,
    .iframe_is_entry = 68, .iframe_owner = 69, .owner_generator = 1,
    .object_type = 8,
    .code_firstlineno = 72, .code_filename = 112, .code_name = 120, .code_qualname = 128,
    .code_linetable = 136, .code_firsttraceable = 168, .code_code_adaptive = 184,
    .ascii_length = 16, .ascii_state = 32, .ascii_data = 48,
    .compact_utf8 = 56, .compact_data = 72,
    .bytes_size = 16, .bytes_data = 32,
    .runtime_interpreters_head = 40, .interp_threads_head = 16, .tstate_next = 8, .tstate_interp = 16,
};

/* Every version with a layout; py_layout_find() (python_walk.c) is the one
 * place that picks an entry by version. */
static const struct py_layout *const py_layouts[] = {&py_layout_3_11};

/* python_walk.c: the bytes of a PyCodeObject that hold every field the walk
 * and python_code.c read (one copy per code object). */
size_t py_code_header_bytes(const struct py_layout *L) __attribute__((visibility("hidden")));

/* python_linetable.c: the line of the instruction at code-unit offset instr
 * (-1: before the first) from a 3.11 co_linetable, first_line when not found. */
int python_line_from_table(const uint8_t *table, size_t len, int first_line, int32_t instr)
    __attribute__((visibility("hidden")));

/* Writes code point cp as UTF-8 at out (room for 4 bytes); returns the bytes
 * written. For str objects stored as Latin-1/UCS-2/UCS-4 (python_linetable.c). */
size_t python_utf8_put(uint32_t cp, char *out) __attribute__((visibility("hidden")));

/* What tells a code object from one allocated later at the same address
 * (sample names are cached by (address, fingerprint)): its co_name and
 * co_filename pointers and co_firstlineno. co_name and the first line alone
 * did not: a .pth file's exec'd "<string>" module, sampled during interpreter
 * start-up and freed, had its address reused by the main script's module
 * code (co_name "<module>", first line 1 for both), whose frames were then
 * named "<string>". Handler-safe: arithmetic only. */
static inline uint64_t py_code_fingerprint(uint64_t name, uint64_t filename, int32_t first_line)
{
    return name ^ (filename * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(uint32_t)first_line << 48);
}

#endif
