/*
 * analyze/phases.h — phases of a training step (analyze/phases.c)
 * and findings (analyze/findings.c).
 * Part of analyze/analyze.h, the folder's one interface: include that, not
 * this file, from outside analyze/.
 */
#ifndef OPPROF_ANALYZE_PHASES_H
#define OPPROF_ANALYZE_PHASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analyze/profile.h"

/* ------------------------------------------------------------------------- */
/* Phases (analyze/phases.c)                                                  */
/* ------------------------------------------------------------------------- */
/* Each sample gets one phase; the first rule that matches wins:
 *   1. optimizer    a Python frame whose qualname contains "Optimizer.step" or
 *                   whose file is under /torch/optim/
 *   2. backward     an autograd node (...::apply) or torch::autograd::Engine::
 *                   frame, or a Python frame backward() under /torch/autograd/
 *                   or in torch/_tensor.py
 *   3. data loading a Python frame under /torch/utils/data/ (DataLoader, its
 *                   workers and collate)
 *   (rules 1 and 3 ignore "<module>" frames: importing torch is not a phase)
 *   4. forward      an operator frame, or a Python frame named forward or
 *                   _call_impl (nn.Module.__call__)
 *   5. other        the rest (interpreter start-up, plain Python)
 * Before all of them, 0. import: a Python frame of importlib's bootstrap
 * (stack_is_import), i.e. a module being found, loaded or run by `import`;
 * "import torch" alone is 1-2 s of CPU, and ops run while a module is
 * imported are start-up too, not forward.
 * The optimizer runs ops and may sit under nothing else, so it goes first;
 * backward before data loading because the engine never runs under a
 * DataLoader; data loading before forward because collate runs ops. */
enum phase {
    PHASE_FORWARD = 0,
    PHASE_BACKWARD,
    PHASE_OPTIMIZER,
    PHASE_DATA_LOADING,
    PHASE_IMPORT,
    PHASE_OTHER,
    PHASE_COUNT
};
struct phase_summary {
    uint64_t weight[PHASE_COUNT];
    uint64_t samples[PHASE_COUNT];
    uint64_t total_weight;  /* sum of weight[] */
    bool pytorch;           /* the profile has operator or Python frames: the
                               phases mean something */
    bool operators;         /* some frame is a PyTorch operator's */
};
const char *phase_name(enum phase ph);
/* Whether a stack runs under `import` (rule 0 above): a Python frame whose
 * file is importlib's bootstrap ("<frozen importlib._bootstrap>",
 * "<frozen importlib._bootstrap_external>", or importlib/_bootstrap*.py
 * where the interpreter was built without frozen modules). */
bool stack_is_import(const struct profile *p, const struct prof_stack *st);
bool frame_is_importlib(const struct prof_frame *f); /* one such frame */
/* The phase of one stack (rules above). */
enum phase phase_of_stack(const struct profile *p, const struct prof_stack *st);
/* Returns 0, -1 on out of memory. */
int phases_compute(const struct profile *p, struct phase_summary *out);

/* ------------------------------------------------------------------------- */
/* Findings (analyze/findings.c)                                              */
/* ------------------------------------------------------------------------- */
/* One-line hints, each backed by the figures it quotes, emitted only when its
 * threshold is met (thresholds in findings.c). */
enum finding_kind {
    FINDING_REFERENCE_BLAS = 0, /* time in netlib BLAS routines of libblas.so* */
    FINDING_INTERPRETER,        /* time in the Python interpreter, not in ops */
    FINDING_DOMINANT_OP,        /* one operator takes most self time */
    FINDING_HIGH_CPI,           /* a hot operator/function has CPI > 1 (counters) */
    FINDING_IMPORT,             /* start-up: much of the time is `import` */
};
struct finding {
    enum finding_kind kind;
    const char *id;   /* "reference_blas", "interpreter_bound", "dominant_operator", "high_cpi", "import_startup" */
    double share;     /* the share (0..1) of CPU time the finding is about */
    char *text;       /* the sentence shown to the user */
};
struct findings {
    struct finding *items;
    size_t n;
};
/* Returns 0 (out->n may be 0), -1 on out of memory. */
int findings_compute(const struct profile *p, struct findings *out);
void findings_free(struct findings *f);

#endif
