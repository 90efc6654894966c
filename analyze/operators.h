/*
 * analyze/operators.h — PyTorch operators (analyze/operators.c,
 * analyze/hotspots_torch.c).
 * Part of analyze/analyze.h, the folder's one interface: include that, not
 * this file, from outside analyze/.
 */
#ifndef OPPROF_ANALYZE_OPERATORS_H
#define OPPROF_ANALYZE_OPERATORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analyze/profile.h"
#include "analyze/hotspots.h"

/* ------------------------------------------------------------------------- */
/* Operators (analyze/operators.c, analyze/hotspots_torch.c)                 */
/* ------------------------------------------------------------------------- */
/* Operator attribution as design.md defines it. Op names are what
 * torch.profiler's key_averages shows: "aten::<op>" for ATen operators (the
 * overload dropped: at::_ops::add_Tensor::call -> "aten::add", in-place kept:
 * add__Tensor -> "aten::add_") and the node name for autograd nodes
 * (torch::autograd::generated::AddmmBackward0::apply -> "AddmmBackward0"). */
enum op_frame_kind {
    OP_FRAME_NONE = 0,
    OP_FRAME_ATEN,     /* at::_ops::<op>::call / ::redispatch */
    OP_FRAME_AUTOGRAD, /* torch::autograd::[generated::]<Node>::apply */
    OP_FRAME_FALLBACK, /* at::native::<op>(...), at::cpu::<op>(...): operator
                          frames only in samples without any at::_ops frame */
};
/* Classifies a frame name and writes the op name into buf (len bytes);
 * OP_FRAME_NONE (buf unspecified) when it is no operator frame. */
enum op_frame_kind op_frame_classify(const char *name, char *buf, size_t len);
/* buf holding the op name, or NULL when name is no operator frame. */
const char *op_name_from_frame(const char *name, char *buf, size_t len);
/* Whether a user's query names op: "bmm" and "aten::bmm" both name "aten::bmm". */
bool op_name_matches(const char *op, const char *query);

/* Rows for "[no operator]" / "[no Python frame]" / "[no native frame]".
 * Samples without an operator that run under `import` (stack_is_import) get
 * their own row in the operator table, so start-up is not read as a gap in
 * operator attribution. */
#define NO_OPERATOR_NAME "[no operator]"
#define NO_OPERATOR_IMPORT_NAME "[no operator: import]"
/* Samples of a thread waiting in the OpenMP runtime (a team thread outside a
 * region body: spin, barrier, fork/join; the Threading section's "runtime
 * spin/wait") are no operator's self time: the opener's join inside
 * aten::_softmax lasts as long as the machine keeps its workers off a CPU.
 * They get this row as self and still count in the total of every operator
 * on their stack. */
#define OMP_RUNTIME_WAIT_NAME "[OpenMP runtime wait]"
/* Whether an operator-table row is one of the two above, not an operator. */
bool is_no_operator_row(const char *name);
#define NO_PYTHON_FRAME_NAME "[no Python frame]"
#define NO_NATIVE_FRAME_NAME "[no native frame]"
/* --group-by kernel lists compute kernels only (at::native and vectorized
 * loops, BLAS, OpenMP region bodies, the program's own code); a sample whose
 * innermost native frame is elsewhere lands in one row per kind of elsewhere.
 * Returns that row's name, or NULL when the frame is a compute kernel. */
const char *kernel_elsewhere_row(const struct prof_frame *leaf);

/* The canonical op name in p matching query (see op_name_matches), copied into
 * buf; false when no operator of p matches. */
bool hotspots_find_operator(const struct profile *p, const char *query, char *buf, size_t len);
/* Callers (callees == false) of operator op: one row per Python line, the
 * innermost Python frame rootward of the op's innermost frame ("train.py:42",
 * detail = the Python function, source = full path:line); self = samples where
 * op is the innermost operator, total = samples with op anywhere; the share
 * column divides by op's total. Callees: the kernels (innermost native
 * function) of the samples whose innermost operator is op; share of op's self. */
int hotspots_op_neighbours(const struct profile *p, const char *op, bool callees,
                           struct hotspot_table *out);

#endif
