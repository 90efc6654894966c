/*
 * analyze/phases.c — which part of a training step each sample belongs to:
 * forward, backward (autograd engine), optimizer step, data loading, import,
 * other.
 *
 * The rules and their order are documented with enum phase in analyze.h. They
 * read only frame names and Python file paths, so they hold on a stripped
 * libtorch (autograd nodes and at::_ops entries are exported symbols) and on
 * the autograd engine's worker thread, which has no Python frames at all: its
 * samples carry Engine::evaluate_function / XBackward0::apply frames.
 */
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/hotspots_internal.h"

static const char *const phase_names[PHASE_COUNT] = {
    [PHASE_FORWARD] = "forward",
    [PHASE_BACKWARD] = "backward",
    [PHASE_OPTIMIZER] = "optimizer step",
    [PHASE_DATA_LOADING] = "data loading",
    [PHASE_IMPORT] = "import",
    [PHASE_OTHER] = "other",
};

const char *phase_name(enum phase ph)
{
    return (unsigned)ph < PHASE_COUNT ? phase_names[ph] : "?";
}

/* The last component of a qualname ("Linear.forward" -> "forward"). */
static const char *last_component(const char *qualname)
{
    const char *dot = strrchr(qualname, '.');
    return dot ? dot + 1 : qualname;
}

static const char *file_of(const struct prof_frame *f)
{
    return f->source_file && f->source_file[0] ? f->source_file : f->module;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static bool file_is_importlib(const char *file)
{
    return strstr(file, "importlib._bootstrap") || strstr(file, "/importlib/_bootstrap");
}

bool frame_is_importlib(const struct prof_frame *f)
{
    return f->kind == FRAME_PYTHON && file_is_importlib(file_of(f));
}

bool stack_is_import(const struct profile *p, const struct prof_stack *st)
{
    for (uint32_t i = 0; i < st->nframes; i++)
        if (st->frames[i] < p->nframes && frame_is_importlib(&p->frames[st->frames[i]]))
            return true;
    return false;
}

/* What one frame says about the phase (bit per phase it is evidence of). */
static unsigned frame_evidence(const struct prof_frame *f, enum op_frame_kind op)
{
    if (f->kind == FRAME_PYTHON) {
        const char *file = file_of(f), *last = last_component(f->name);
        if (file_is_importlib(file))
            return 1u << PHASE_IMPORT;
        /* Module-level code of torch/optim or torch/utils/data runs at
         * "import torch": that is start-up, not an optimizer or a loader. */
        bool import = strcmp(f->name, "<module>") == 0;
        unsigned e = 0;
        if (strstr(f->name, "Optimizer.step") || (!import && strstr(file, "/torch/optim/")))
            e |= 1u << PHASE_OPTIMIZER;
        if (strcmp(last, "backward") == 0 &&
            (strstr(file, "/torch/autograd/") || ends_with(file, "torch/_tensor.py")))
            e |= 1u << PHASE_BACKWARD;
        if (!import && strstr(file, "/torch/utils/data/"))
            e |= 1u << PHASE_DATA_LOADING;
        if (strcmp(last, "forward") == 0 || strcmp(last, "_call_impl") == 0)
            e |= 1u << PHASE_FORWARD;
        return e;
    }
    if (op == OP_FRAME_AUTOGRAD || strncmp(f->name, "torch::autograd::Engine::", 25) == 0)
        return 1u << PHASE_BACKWARD;
    if (op == OP_FRAME_ATEN || op == OP_FRAME_FALLBACK)
        return 1u << PHASE_FORWARD;
    return 0;
}

/* The first phase in precedence order whose bit is set. */
static enum phase phase_from_evidence(unsigned e)
{
    static const enum phase order[] = {PHASE_IMPORT, PHASE_OPTIMIZER, PHASE_BACKWARD, PHASE_DATA_LOADING,
                                       PHASE_FORWARD};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (e & (1u << order[i]))
            return order[i];
    return PHASE_OTHER;
}

enum phase phase_of_stack(const struct profile *p, const struct prof_stack *st)
{
    unsigned e = 0;
    char buf[512];
    for (uint32_t i = 0; i < st->nframes; i++) {
        uint32_t f = st->frames[i];
        if (f >= p->nframes)
            continue;
        const struct prof_frame *fr = &p->frames[f];
        enum op_frame_kind k = fr->kind == FRAME_PYTHON ? OP_FRAME_NONE
                                                        : op_frame_classify(fr->name, buf, sizeof buf);
        e |= frame_evidence(fr, k);
    }
    return phase_from_evidence(e);
}

int phases_compute(const struct profile *p, struct phase_summary *out)
{
    memset(out, 0, sizeof *out);
    struct op_index ix;
    if (op_index_build(p, &ix) != 0)
        return -1;
    out->pytorch = ix.any_op || ix.any_python;
    out->operators = ix.any_op;
    /* Evidence per frame once, then per distinct stack once. */
    uint8_t *frame_e = calloc(p->nframes + 1, 1);
    uint64_t *sw = NULL, *sc = NULL;
    if (!frame_e || hs_fold_by_stack(p, &sw, &sc) != 0) {
        free(frame_e);
        op_index_free(&ix);
        return -1;
    }
    for (size_t f = 0; f < p->nframes; f++)
        frame_e[f] = (uint8_t)frame_evidence(&p->frames[f], (enum op_frame_kind)ix.frame_kind[f]);
    for (size_t s = 0; s <= p->nstacks; s++) {
        if (!sc[s])
            continue;
        unsigned e = 0;
        if (s < p->nstacks) {
            /* A fallback (at::native) frame means "forward" like the
             * at::_ops frame it would otherwise sit under: no need to apply
             * the fallback rule here. */
            const struct prof_stack *st = &p->stacks[s];
            for (uint32_t i = 0; i < st->nframes; i++)
                if (st->frames[i] < p->nframes)
                    e |= frame_e[st->frames[i]];
        }
        enum phase ph = phase_from_evidence(e);
        out->weight[ph] += sw[s];
        out->samples[ph] += sc[s];
        out->total_weight += sw[s];
    }
    free(frame_e);
    free(sw);
    free(sc);
    op_index_free(&ix);
    return 0;
}
