/*
 * sampler/common/python_layout.h — where CPython keeps what the frame walker reads,
 * per CPython version. Only sampler/common's Python files include it: the
 * walker (python_walk.c) and the name/line resolver (python_code.c) only ever
 * see a struct py_layout, picked by py_layout_find() from py_layouts[] below,
 * so adding a version is adding an entry here, never a branch in the walk.
 * Where versions differ in shape rather than in offsets (which struct holds
 * the current frame, how the instruction is recorded, what marks an entry
 * frame, which line-table format), the layout says so in a field: an offset
 * of PY_ABSENT or one of the enums below.
 *
 * Names follow the CPython structs they mirror:
 *   3.9, 3.10: PyThreadState.frame -> PyFrameObject.{f_back, f_code, f_lasti}
 *   3.11, 3.12: PyThreadState.cframe -> _PyCFrame.current_frame -> _PyInterpreterFrame
 *   3.13+:     PyThreadState.current_frame -> _PyInterpreterFrame
 *   _PyInterpreterFrame.{f_code (3.13+: f_executable; 3.14: a tagged
 *                        _PyStackRef), previous, prev_instr (3.13+:
 *                        instr_ptr), is_entry (3.11), owner}
 *   PyCodeObject.{co_firstlineno, co_filename, co_name, co_qualname,
 *                 co_lnotab / co_linetable, _co_firsttraceable, co_code_adaptive}
 *
 * The offsets of 3.9-3.12 (and 3.13's and 3.14's fields that _Py_DebugOffsets
 * does not carry) were printed by an offsetof program compiled against each
 * interpreter's headers with -DPy_BUILD_CORE (the program is
 * tests/unit/python_layout_offsets.c); every one is checked again at run time
 * (the thread id a state names, the type of every code object and str read).
 */
#ifndef OPPROF_PYTHON_LAYOUT_H
#define OPPROF_PYTHON_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An offset the version does not have. */
#define PY_ABSENT (-1)

/* How a frame records the instruction it is executing. */
enum py_instr_kind {
    PY_INSTR_LASTI_BYTES,   /* 3.9 f_lasti: int, byte offset of the last instruction, -1 before the first */
    PY_INSTR_LASTI_UNITS,   /* 3.10 f_lasti: int, the same in 2-byte code units */
    PY_INSTR_POINTER,       /* 3.11/3.12 prev_instr, 3.13 instr_ptr: pointer into co_code_adaptive */
};

/* What tells that a frame was entered from C (its own _PyEval_EvalFrameDefault
 * call is the native frame below it): mixed-stack splicing needs it. */
enum py_entry_rule {
    PY_ENTRY_EVERY_FRAME, /* 3.9/3.10: each PyFrameObject is one _PyEval_EvalFrameDefault call */
    PY_ENTRY_FLAG,        /* 3.11: _PyInterpreterFrame.is_entry */
    PY_ENTRY_CSTACK_SHIM, /* 3.12+: the eval loop pushes a shim frame owned by the C stack
                             (owner_cstack) below the first frame it runs */
};

/* Which format co_linetable (co_lnotab) has. */
enum py_linetable_format {
    PY_LINES_LNOTAB,    /* 3.9 co_lnotab: (byte delta, signed line delta) pairs */
    PY_LINES_310,       /* 3.10 co_linetable: (byte delta, signed line delta, -128 none) pairs */
    PY_LINES_LOCATIONS, /* 3.11+ co_linetable: location entries (Objects/locations.md) */
};

/* Which struct _Py_DebugOffsets (the head of _PyRuntime) is: CPython grows
 * it from version to version, adding members inside its groups, so each
 * version's bytes are read with that version's struct
 * (python_debug_offsets.c). */
enum py_debug_offsets_kind {
    PY_DEBUG_OFFSETS_NONE, /* 3.9-3.12: the table's offsets are all there is */
    PY_DEBUG_OFFSETS_3_13, /* 584 bytes */
    PY_DEBUG_OFFSETS_3_14, /* 760 bytes: threads_main, stackpointer, co_tlbc, set/gen objects, debugger support */
};

/* How a thread state names its thread. */
enum py_thread_id_kind {
    PY_THREAD_NATIVE_ID, /* 3.11+ native_thread_id: the kernel tid */
    PY_THREAD_PTHREAD,   /* 3.9/3.10 thread_id: pthread_self(); the tid is read from glibc's struct pthread */
};

struct py_layout {
    unsigned major, minor;
    /* enum py_debug_offsets_kind: _Py_DebugOffsets at the head of
     * _PyRuntime (3.13+) overrides the offsets it carries
     * (python_debug_offsets.c). */
    uint8_t debug_offsets;
    /* PyThreadState */
    int16_t tstate_cframe;        /* PY_ABSENT: the state holds the current frame itself */
    int16_t current_frame;        /* in _PyCFrame, or in PyThreadState when tstate_cframe is absent */
    int16_t tstate_thread_id;
    uint8_t thread_id_kind;       /* enum py_thread_id_kind */
    /* 3.11+: the data-stack chunk that holds the thread's newest frames
     * (struct _PyStackChunk { previous; size; top; data[] }); PY_ABSENT
     * before 3.11, whose frames are heap objects. */
    int16_t tstate_datastack_chunk;
    /* _PyInterpreterFrame (PyFrameObject for 3.9/3.10) */
    int16_t frame_code;
    /* 3.14: f_executable is a _PyStackRef whose low bits (Py_TAG_BITS, 3 in
     * builds with a GIL) say how the reference is counted; the code object
     * is the value with them cleared. 0: a plain pointer. */
    uint8_t frame_code_tag_bits;
    int16_t frame_previous;
    int16_t frame_instr;
    uint8_t instr_kind;           /* enum py_instr_kind */
    uint8_t entry_rule;           /* enum py_entry_rule */
    int16_t frame_is_entry;       /* PY_ENTRY_FLAG only */
    int16_t frame_owner;          /* PY_ABSENT: no incomplete or shim frames */
    uint8_t owner_generator;      /* FRAME_OWNED_BY_GENERATOR */
    uint8_t owner_cstack;         /* the entry shim's owner (PY_ENTRY_CSTACK_SHIM only): FRAME_OWNED_BY_CSTACK
                                     in 3.12/3.13, FRAME_OWNED_BY_INTERPRETER in 3.14 (both 3) */
    /* PyObject */
    int16_t object_type;
    /* PyCodeObject */
    int16_t code_firstlineno;
    int16_t code_filename;
    int16_t code_name;
    int16_t code_qualname;        /* PY_ABSENT before 3.11: co_name is all there is */
    int16_t code_linetable;       /* co_lnotab in 3.9 */
    uint8_t linetable_format;     /* enum py_linetable_format */
    int16_t code_firsttraceable;  /* PY_ABSENT before 3.11 */
    int16_t code_code_adaptive;   /* PY_ABSENT before 3.11 */
    /* str and bytes objects */
    int16_t ascii_length;
    int16_t ascii_state;
    int16_t ascii_data;     /* sizeof(PyASCIIObject) */
    int16_t compact_utf8;   /* PyCompactUnicodeObject.utf8 */
    int16_t compact_data;   /* sizeof(PyCompactUnicodeObject) */
    int16_t bytes_size;     /* PyVarObject.ob_size */
    int16_t bytes_data;     /* PyBytesObject.ob_sval */
    /* Reaching every thread's state from outside the process (attach mode):
     * _PyRuntime.interpreters.head -> PyInterpreterState.threads.head
     * (tstate_head before 3.11) -> PyThreadState.next, each state's .interp
     * pointing back. */
    int16_t runtime_interpreters_head;
    int16_t interp_threads_head;
    int16_t tstate_next;
    int16_t tstate_interp;
};

/* struct _PyStackChunk (3.11-3.14): previous, size (bytes, header
 * included), top, then the frames. */
#define PY_STACK_CHUNK_SIZE 8
#define PY_STACK_CHUNK_DATA 24

/* The str and bytes objects of 3.9-3.11 (PyASCIIObject with its wstr field). */
#define PY_STR_WITH_WSTR \
    .ascii_length = 16, .ascii_state = 32, .ascii_data = 48, .compact_utf8 = 56, .compact_data = 72, \
    .bytes_size = 16, .bytes_data = 32
/* 3.12+: wstr is gone. */
#define PY_STR_NO_WSTR \
    .ascii_length = 16, .ascii_state = 32, .ascii_data = 40, .compact_utf8 = 48, .compact_data = 56, \
    .bytes_size = 16, .bytes_data = 32

/* x86-64, from pyenv's 3.9.18 headers. */
static const struct py_layout py_layout_3_9 = {
    .major = 3, .minor = 9,
    .tstate_cframe = PY_ABSENT, .current_frame = 24,
    .tstate_thread_id = 176, .thread_id_kind = PY_THREAD_PTHREAD, .tstate_datastack_chunk = PY_ABSENT,
    .frame_code = 32, .frame_previous = 24, .frame_instr = 104, .instr_kind = PY_INSTR_LASTI_BYTES,
    .entry_rule = PY_ENTRY_EVERY_FRAME, .frame_is_entry = PY_ABSENT, .frame_owner = PY_ABSENT,
    .object_type = 8,
    .code_firstlineno = 40, .code_filename = 104, .code_name = 112, .code_qualname = PY_ABSENT,
    .code_linetable = 120, .linetable_format = PY_LINES_LNOTAB,
    .code_firsttraceable = PY_ABSENT, .code_code_adaptive = PY_ABSENT,
    PY_STR_WITH_WSTR,
    .runtime_interpreters_head = 32, .interp_threads_head = 8, .tstate_next = 8, .tstate_interp = 16,
};

/* x86-64, from pyenv's 3.10.13 headers: 3.9's layout but f_lasti moved and
 * counts code units, and co_linetable replaced co_lnotab. */
static const struct py_layout py_layout_3_10 = {
    .major = 3, .minor = 10,
    .tstate_cframe = PY_ABSENT, .current_frame = 24,
    .tstate_thread_id = 176, .thread_id_kind = PY_THREAD_PTHREAD, .tstate_datastack_chunk = PY_ABSENT,
    .frame_code = 32, .frame_previous = 24, .frame_instr = 96, .instr_kind = PY_INSTR_LASTI_UNITS,
    .entry_rule = PY_ENTRY_EVERY_FRAME, .frame_is_entry = PY_ABSENT, .frame_owner = PY_ABSENT,
    .object_type = 8,
    .code_firstlineno = 40, .code_filename = 104, .code_name = 112, .code_qualname = PY_ABSENT,
    .code_linetable = 120, .linetable_format = PY_LINES_310,
    .code_firsttraceable = PY_ABSENT, .code_code_adaptive = PY_ABSENT,
    PY_STR_WITH_WSTR,
    .runtime_interpreters_head = 32, .interp_threads_head = 8, .tstate_next = 8, .tstate_interp = 16,
};

/* x86-64, checked against Debian's 3.11.2 and pyenv's 3.11.7 headers. */
static const struct py_layout py_layout_3_11 = {
    .major = 3, .minor = 11,
    .tstate_cframe = 56, .current_frame = 8,
    .tstate_thread_id = 160, .thread_id_kind = PY_THREAD_NATIVE_ID, .tstate_datastack_chunk = 296,
    .frame_code = 32, .frame_previous = 48, .frame_instr = 56, .instr_kind = PY_INSTR_POINTER,
    .entry_rule = PY_ENTRY_FLAG, .frame_is_entry = 68, .frame_owner = 69, .owner_generator = 1,
    .object_type = 8,
    .code_firstlineno = 72, .code_filename = 112, .code_name = 120, .code_qualname = 128,
    .code_linetable = 136, .linetable_format = PY_LINES_LOCATIONS,
    .code_firsttraceable = 168, .code_code_adaptive = 184,
    PY_STR_WITH_WSTR,
    .runtime_interpreters_head = 40, .interp_threads_head = 16, .tstate_next = 8, .tstate_interp = 16,
};

/* x86-64, from pyenv's 3.12.1 headers. */
static const struct py_layout py_layout_3_12 = {
    .major = 3, .minor = 12,
    .tstate_cframe = 56, .current_frame = 0,
    .tstate_thread_id = 144, .thread_id_kind = PY_THREAD_NATIVE_ID, .tstate_datastack_chunk = 232,
    .frame_code = 0, .frame_previous = 8, .frame_instr = 56, .instr_kind = PY_INSTR_POINTER,
    .entry_rule = PY_ENTRY_CSTACK_SHIM, .frame_is_entry = PY_ABSENT, .frame_owner = 70,
    .owner_generator = 1, .owner_cstack = 3,
    .object_type = 8,
    .code_firstlineno = 68, .code_filename = 112, .code_name = 120, .code_qualname = 128,
    .code_linetable = 136, .linetable_format = PY_LINES_LOCATIONS,
    .code_firsttraceable = 176, .code_code_adaptive = 192,
    PY_STR_NO_WSTR,
    .runtime_interpreters_head = 40, .interp_threads_head = 72, .tstate_next = 8, .tstate_interp = 16,
};

/* x86-64, from pyenv's 3.13.0 headers; at run time the process's own
 * _Py_DebugOffsets replaces every offset it carries (python_debug_offsets.c),
 * so only _co_firsttraceable, the owner values and the str layout come from here. */
static const struct py_layout py_layout_3_13 = {
    .major = 3, .minor = 13, .debug_offsets = PY_DEBUG_OFFSETS_3_13,
    .tstate_cframe = PY_ABSENT, .current_frame = 72,
    .tstate_thread_id = 160, .thread_id_kind = PY_THREAD_NATIVE_ID, .tstate_datastack_chunk = 232,
    .frame_code = 0, .frame_previous = 8, .frame_instr = 56, .instr_kind = PY_INSTR_POINTER,
    .entry_rule = PY_ENTRY_CSTACK_SHIM, .frame_is_entry = PY_ABSENT, .frame_owner = 70,
    .owner_generator = 1, .owner_cstack = 3,
    .object_type = 8,
    .code_firstlineno = 68, .code_filename = 112, .code_name = 120, .code_qualname = 128,
    .code_linetable = 136, .linetable_format = PY_LINES_LOCATIONS,
    .code_firsttraceable = 184, .code_code_adaptive = 200,
    PY_STR_NO_WSTR,
    .runtime_interpreters_head = 632, .interp_threads_head = 7344, .tstate_next = 8, .tstate_interp = 16,
};

/* x86-64, from Debian sid's 3.14.10 headers (libpython3.14-dev); like 3.13,
 * the process's own _Py_DebugOffsets replaces every offset it carries. New
 * in shape: f_executable is a tagged _PyStackRef (frame_code_tag_bits), and
 * the entry shim's owner is FRAME_OWNED_BY_INTERPRETER, 3 like 3.13's
 * FRAME_OWNED_BY_CSTACK (which 3.14 renumbered to 4 and no longer assigns).
 * Free-threaded builds (3.14t) are refused by the debug offsets' flag. */
static const struct py_layout py_layout_3_14 = {
    .major = 3, .minor = 14, .debug_offsets = PY_DEBUG_OFFSETS_3_14,
    .tstate_cframe = PY_ABSENT, .current_frame = 72,
    .tstate_thread_id = 160, .thread_id_kind = PY_THREAD_NATIVE_ID, .tstate_datastack_chunk = 232,
    .frame_code = 0, .frame_code_tag_bits = 3, .frame_previous = 8, .frame_instr = 56,
    .instr_kind = PY_INSTR_POINTER,
    .entry_rule = PY_ENTRY_CSTACK_SHIM, .frame_is_entry = PY_ABSENT, .frame_owner = 74,
    .owner_generator = 1, .owner_cstack = 3,
    .object_type = 8,
    .code_firstlineno = 68, .code_filename = 112, .code_name = 120, .code_qualname = 128,
    .code_linetable = 136, .linetable_format = PY_LINES_LOCATIONS,
    .code_firsttraceable = 192, .code_code_adaptive = 208,
    PY_STR_NO_WSTR,
    .runtime_interpreters_head = 808, .interp_threads_head = 7344, .tstate_next = 8, .tstate_interp = 16,
};

/* Every version with a layout; py_layout_find() (python_walk.c) is the one
 * place that picks an entry by version. */
static const struct py_layout *const py_layouts[] = {
    &py_layout_3_9, &py_layout_3_10, &py_layout_3_11, &py_layout_3_12, &py_layout_3_13, &py_layout_3_14,
};

/* python_walk.c: the bytes of a PyCodeObject that hold every field the walk
 * and python_code.c read (one copy per code object). */
size_t py_code_header_bytes(const struct py_layout *L) __attribute__((visibility("hidden")));

/* python_linetable.c: the line of the instruction at code-unit offset instr
 * (-1: before the first) from a code object's line table in the given
 * format (enum py_linetable_format), first_line when not found. */
int python_line_lookup(unsigned format, const uint8_t *table, size_t len, int first_line, int32_t instr)
    __attribute__((visibility("hidden")));
/* The three formats one by one (the unit tests call them directly). */
int python_line_from_table(const uint8_t *table, size_t len, int first_line, int32_t instr)
    __attribute__((visibility("hidden")));
int python_line_from_lnotab(const uint8_t *table, size_t len, int first_line, int32_t instr)
    __attribute__((visibility("hidden")));
int python_line_from_310(const uint8_t *table, size_t len, int first_line, int32_t instr)
    __attribute__((visibility("hidden")));

/* Writes code point cp as UTF-8 at out (room for 4 bytes); returns the bytes
 * written. For str objects stored as Latin-1/UCS-2/UCS-4 (python_linetable.c). */
size_t python_utf8_put(uint32_t cp, char *out) __attribute__((visibility("hidden")));

/* python_debug_offsets.c: a copy of base with the offsets that the
 * _Py_DebugOffsets bytes at head (len bytes, from the start of _PyRuntime)
 * carry, read with the struct of base->debug_offsets. False, with the reason
 * in why, when the cookie, version, build kind or any size is not what
 * base's CPython version would have. */
bool py_layout_from_debug_offsets(const struct py_layout *base, const uint8_t *head, size_t len,
                                  struct py_layout *out, char *why, size_t why_cap)
    __attribute__((visibility("hidden")));

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
