/*
 * analyze/splice.c — mixed native + Python stacks, the way py-spy --native
 * reads them.
 *
 * Walking native frames leaf to root, each CPython eval-loop frame
 * (_PyEval_EvalFrameDefault, and its .cold clone) stands for a run of Python
 * frames: it is replaced by the Python frames up to and including the next one
 * marked "entry" (entered from C). Native frames of the interpreter itself are
 * dropped as noise where they are call machinery: rootward of the innermost
 * Python frame (Py_RunMain, _start, PyObject_Vectorcall) and between it and a
 * foreign native frame (_PyObject_MakeTpCall under a torch binding). When the
 * leaf itself is interpreter code (pure Python: PyObject_Free, long_add) those
 * frames are the work and stay.
 * Python frames left over when the native chain ends (a truncated unwind) go
 * at the root end so that no Python frame is lost.
 */
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/profile_internal.h"

bool splice_is_eval_frame(const char *name)
{
    return strncmp(name, "_PyEval_EvalFrameDefault", 24) == 0;
}

size_t splice_stacks(const struct prof_frame *frames, const uint32_t *native, size_t nnative,
                     const uint32_t *python, const bool *python_entry, size_t npython,
                     uint32_t *out)
{
    size_t n = 0, py = 0;
    const char *interp_module = NULL;
    size_t innermost_python = SIZE_MAX; /* position in out */
    for (size_t i = 0; i < nnative; i++) {
        const struct prof_frame *f = &frames[native[i]];
        if (splice_is_eval_frame(f->name) && py < npython) {
            interp_module = f->module;
            while (py < npython) {
                if (innermost_python == SIZE_MAX)
                    innermost_python = n;
                bool entry = python_entry[py];
                out[n++] = python[py++];
                if (entry)
                    break;
            }
            continue;
        }
        out[n++] = native[i];
    }
    if (py < npython && innermost_python == SIZE_MAX)
        innermost_python = n;
    while (py < npython)
        out[n++] = python[py++];
    if (interp_module == NULL || innermost_python == SIZE_MAX)
        return n;
    /* Drop the interpreter's own frames rootward of the innermost Python
     * frame, and those between it and the nearest foreign native frame
     * leafward of it (the call machinery between a Python line and the C++
     * operator it calls). With no foreign frame leafward (pure Python), the
     * interpreter frames there are the work itself and stay. */
    size_t foreign = SIZE_MAX;
    for (size_t i = 0; i < innermost_python; i++) {
        const struct prof_frame *f = &frames[out[i]];
        if (f->kind != FRAME_PYTHON && f->module != interp_module)
            foreign = i;
    }
    size_t drop_from = foreign == SIZE_MAX ? innermost_python : foreign + 1;
    size_t kept = drop_from;
    for (size_t i = drop_from; i < n; i++) {
        const struct prof_frame *f = &frames[out[i]];
        if (f->kind != FRAME_PYTHON && f->module == interp_module)
            continue;
        out[kept++] = out[i];
    }
    return kept;
}
