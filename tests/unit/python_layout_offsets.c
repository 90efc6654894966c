/*
 * tests/unit/python_layout_offsets.c — prints, for the CPython whose headers
 * it is compiled against, the offsets that sampler/common/python_layout.h
 * holds for that version. Not built by make (it needs each interpreter's
 * internal headers); the tables were filled from its output:
 *
 *   for v in 3.9.18 3.10.13 3.11.7 3.12.1 3.13.0; do m=${v%.*}
 *     inc=$(pyenv root)/versions/$v/include/python$m
 *     gcc -DPy_BUILD_CORE -I$inc -I$inc/internal -o /tmp/off$m tests/unit/python_layout_offsets.c && /tmp/off$m
 *   done
 *
 * 3.14 (Debian sid's 3.14.10, from libpython3.14-dev, whose pyconfig.h
 * includes <x86_64-linux-gnu/python3.14/pyconfig.h>):
 *   gcc -DPy_BUILD_CORE -I$inc -I$inc/internal -I$usr_include ...
 *
 * Names match python_layout.h's fields where the field exists in that version.
 */
#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1
#endif
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#if PY_MINOR_VERSION <= 10
#include "frameobject.h"
#endif
#if PY_MINOR_VERSION >= 11
#include "internal/pycore_frame.h"
#endif
#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"
#if PY_MINOR_VERSION <= 10
#define OFF_THREADS_HEAD offsetof(PyInterpreterState, tstate_head)
#else
#define OFF_THREADS_HEAD offsetof(PyInterpreterState, threads.head)
#endif
#define P(name, expr) printf("%-28s %zu\n", name, (size_t)(expr))
int main(void) {
    printf("version %d.%d\n", PY_MAJOR_VERSION, PY_MINOR_VERSION);
#if PY_MINOR_VERSION <= 10
    P("tstate_frame", offsetof(PyThreadState, frame));
    P("tstate_thread_id", offsetof(PyThreadState, thread_id));
    P("frame_f_back", offsetof(PyFrameObject, f_back));
    P("frame_f_code", offsetof(PyFrameObject, f_code));
    P("frame_f_lasti", offsetof(PyFrameObject, f_lasti));
#if PY_MINOR_VERSION == 9
    P("code_lnotab", offsetof(PyCodeObject, co_lnotab));
#else
    P("code_linetable", offsetof(PyCodeObject, co_linetable));
#endif
#else
#if PY_MINOR_VERSION <= 12
    P("tstate_cframe", offsetof(PyThreadState, cframe));
    P("cframe_current_frame", offsetof(_PyCFrame, current_frame));
    P("iframe_f_code", offsetof(_PyInterpreterFrame, f_code));
    P("iframe_prev_instr", offsetof(_PyInterpreterFrame, prev_instr));
#else
    P("tstate_current_frame", offsetof(PyThreadState, current_frame));
    P("iframe_f_executable", offsetof(_PyInterpreterFrame, f_executable));
    P("iframe_instr_ptr", offsetof(_PyInterpreterFrame, instr_ptr));
#endif
#if PY_MINOR_VERSION == 11
    P("iframe_is_entry", offsetof(_PyInterpreterFrame, is_entry));
#elif PY_MINOR_VERSION <= 13
    P("owner_cstack", FRAME_OWNED_BY_CSTACK);
#else
    /* 3.14's entry shim is owned by the interpreter; FRAME_OWNED_BY_CSTACK
     * (now 4) is assigned nowhere. */
    P("owner_cstack", FRAME_OWNED_BY_INTERPRETER);
#endif
    P("iframe_previous", offsetof(_PyInterpreterFrame, previous));
    P("iframe_owner", offsetof(_PyInterpreterFrame, owner));
    P("owner_generator", FRAME_OWNED_BY_GENERATOR);
    P("tstate_native_thread_id", offsetof(PyThreadState, native_thread_id));
    P("code_qualname", offsetof(PyCodeObject, co_qualname));
    P("code_linetable", offsetof(PyCodeObject, co_linetable));
    P("code_firsttraceable", offsetof(PyCodeObject, _co_firsttraceable));
    P("code_code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
#endif
    P("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
    P("code_filename", offsetof(PyCodeObject, co_filename));
    P("code_name", offsetof(PyCodeObject, co_name));
    P("ascii_length", offsetof(PyASCIIObject, length));
    P("ascii_state", offsetof(PyASCIIObject, state));
    P("ascii_data", sizeof(PyASCIIObject));
    P("compact_utf8", offsetof(PyCompactUnicodeObject, utf8));
    P("compact_data", sizeof(PyCompactUnicodeObject));
    P("bytes_size", offsetof(PyVarObject, ob_size));
    P("bytes_data", offsetof(PyBytesObject, ob_sval));
    P("runtime_interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
    P("interp_threads_head", OFF_THREADS_HEAD);
    P("tstate_next", offsetof(PyThreadState, next));
    P("tstate_interp", offsetof(PyThreadState, interp));
    return 0;
}
