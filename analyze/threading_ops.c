/*
 * analyze/threading_ops.c — which operator (or function) each OpenMP region
 * sample belongs to, for the Threading section: samples per operator and
 * Python line, the share in oversubscribed time, and spin samples in the
 * runtime. Called by threading_analyze() (threading.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/profile_internal.h"

bool threading_is_runtime_or_agent(const struct prof_frame *f)
{
    return threading_is_omp_runtime(f->module) || strncmp(f->module, "libopprof_agent", 15) == 0;
}

bool threading_is_spin_name(const char *n)
{
    static const char *const words[] = {"wait", "barrier", "yield", "spin", "sleep", "futex", "flag", "suspend"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcasestr(n, words[i]))
            return true;
    return false;
}

bool threading_sample_is_runtime_wait(const struct profile *p, const struct prof_sample *sm)
{
    /* Known exactly where the agent marked the thread as outside a body
     * (libgomp path, OMPT); else judged by the runtime's symbols. */
    if (sm->omp_region == THREADING_OUTSIDE_BODY)
        return true;
    if (sm->stack >= p->nstacks || !p->stacks[sm->stack].nframes)
        return false;
    const struct prof_stack *st = &p->stacks[sm->stack];
    const struct prof_frame *leaf = &p->frames[st->frames[0]];
    if (threading_is_omp_runtime(leaf->module) && threading_is_spin_name(leaf->name))
        return true;
    return st->nframes > 1 && strstr(leaf->name, "sched_yield") &&
           threading_is_omp_runtime(p->frames[st->frames[1]].module);
}

static bool is_outlined(const char *n)
{
    return strstr(n, "._omp_fn.") || strstr(n, "omp_outlined");
}

/* A thread's first frames in libc (glibc's start_thread and clone3, musl's
 * start and __clone): under the runtime's thread entry on a team worker's
 * own stack, nothing of the program's. */
static bool is_thread_entry(const struct prof_frame *f)
{
    static const char *const names[] = {"start_thread", "clone3", "clone",       "__clone",
                                        "__clone3",     "start",  "thread_start"};
    if (!strstr(f->module, "libc") && !strstr(f->module, "ld-musl"))
        return false;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(f->name, names[i]) == 0)
            return true;
    return false;
}

/* Operator (or plain function) and Python line a region sample belongs to.
 * False when the stack names nothing better than its leaf (unwinding stopped
 * inside the runtime, e.g. a worker in sched_yield): the caller then uses
 * another sample of the same region. */
static bool op_of(const struct profile *p, const struct prof_stack *st, char *name, size_t nlen, char *py, size_t plen)
{
    name[0] = py[0] = '\0';
    char buf[160];
    const char *fallback = NULL;
    bool py_is_lib = false;
    for (uint32_t i = 0; i < st->nframes; i++) {
        const struct prof_frame *f = &p->frames[st->frames[i]];
        if (f->kind == FRAME_PYTHON) {
            /* The innermost line of the user's code: past torch's own
             * Python (functional.py) when there is such a frame. */
            bool lib = f->source_file && (strstr(f->source_file, "/torch/") ||
                                          strstr(f->source_file, TORCH_SHAPES_HOOK_FILE)); /* --torch-shapes */
            if (!py[0] || (py_is_lib && !lib)) {
                snprintf(py, plen, "%s:%d", f->module, f->line);
                py_is_lib = lib;
            }
            continue;
        }
        if (name[0])
            continue;
        enum op_frame_kind k = op_frame_classify(f->name, buf, sizeof buf);
        if (k == OP_FRAME_ATEN || k == OP_FRAME_AUTOGRAD)
            snprintf(name, nlen, "%s", buf);
        else if (k == OP_FRAME_FALLBACK && !fallback)
            fallback = f->name;
    }
    if (name[0])
        return true;
    if (fallback) {
        snprintf(name, nlen, "%s", op_name_from_frame(fallback, buf, sizeof buf) ? buf : fallback);
        return true;
    }
    /* No operator: the function containing the parallel construct. On the
     * opener, the caller of the runtime's fork entry (the frame after the
     * rootmost runtime or agent frame); on a grafted worker stack, the frame
     * after the outlined body; else the leaf. */
    size_t k = 0;
    for (uint32_t i = 0; i < st->nframes; i++)
        if (threading_is_runtime_or_agent(&p->frames[st->frames[i]]))
            k = i + 1;
    if (k > 0 && k < st->nframes && is_thread_entry(&p->frames[st->frames[k]])) {
        /* A team worker's own stack, not grafted on its opener's context
         * (the opener's was not known): under the runtime there is only the
         * thread's start, which named 12-26 % of omp_regions_gomp's region
         * samples "start_thread". GCC names the body after the function
         * that holds the construct (f._omp_fn.N): that name serves when no
         * other sample of the region names it (the caller looks first). */
        for (uint32_t i = 0; i < k; i++) {
            const char *n = p->frames[st->frames[i]].name, *cut = strstr(n, "._omp_fn.");
            if (cut) {
                snprintf(name, nlen, "%.*s", (int)(cut - n), n);
                return false;
            }
        }
        snprintf(name, nlen, "%s", st->nframes ? p->frames[st->frames[0]].name : "[no frame]");
        return false;
    }
    if (k > 0 && k < st->nframes && p->frames[st->frames[k]].kind != FRAME_PYTHON) {
        snprintf(name, nlen, "%s", p->frames[st->frames[k]].name);
        return true;
    }
    for (uint32_t i = 0; i + 1 < st->nframes; i++) {
        if (is_outlined(p->frames[st->frames[i]].name)) {
            snprintf(name, nlen, "%s", p->frames[st->frames[i + 1]].name);
            return true;
        }
    }
    snprintf(name, nlen, "%s", st->nframes ? p->frames[st->frames[0]].name : "[no frame]");
    return false;
}

/* Region id -> index of a sample of that region whose stack names its
 * operator or opener (the first such sample in sample order), in m (u64
 * keys). 0, or -1 with errno ENOMEM. */
static int region_namer_build(const struct profile *p, struct hashmap *m)
{
    char name[160], py[160];
    for (size_t i = 0; i < p->nsamples; i++) {
        uint64_t id = p->samples[i].omp_region;
        if (!id || id == THREADING_OUTSIDE_BODY || hashmap_find_u64(m, id, NULL))
            continue; /* no region, the runtime outside a body, or named already */
        if (op_of(p, &p->stacks[p->samples[i].stack], name, sizeof name, py, sizeof py) &&
            hashmap_find_or_add_u64(m, id, i, NULL) < 0)
            return -1;
    }
    return 0;
}

static int cmp_ops(const void *a, const void *b)
{
    const struct threading_op *x = a, *y = b;
    return x->samples < y->samples ? 1 : x->samples > y->samples ? -1 : strcmp(x->name, y->name);
}

int threading_samples_by_op(const struct profile *p, struct threading_summary *s, const struct threading_bucket *b,
                            size_t nb, uint64_t t0, uint64_t bns, double oversub_runnable)
{
    struct threading_op *ops = calloc(256, sizeof *ops);
    size_t nops = 0;
    struct hashmap namer;
    hashmap_init_u64(&namer);
    if (!ops || region_namer_build(p, &namer) != 0) {
        free(ops);
        hashmap_free(&namer);
        errno = ENOMEM;
        return -1;
    }
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct prof_sample *sm = &p->samples[i];
        const struct prof_stack *st = &p->stacks[sm->stack];
        if (threading_sample_is_runtime_wait(p, sm))
            s->spin_samples += sm->weight;
        if (!sm->omp_region || sm->omp_region == THREADING_OUTSIDE_BODY)
            continue;
        s->region_samples += sm->weight;
        char name[160], py[160];
        uint64_t named;
        /* No name of its own: the region's, from one of its samples that has it. */
        if (!op_of(p, st, name, sizeof name, py, sizeof py) && hashmap_find_u64(&namer, sm->omp_region, &named))
            op_of(p, &p->stacks[p->samples[named].stack], name, sizeof name, py, sizeof py);
        size_t k = 0;
        while (k < nops && (strcmp(ops[k].name, name) || strcmp(ops[k].python, py)))
            k++;
        if (k == nops) {
            if (nops == 256)
                continue;
            snprintf(ops[k].name, sizeof ops[k].name, "%s", name);
            snprintf(ops[k].python, sizeof ops[k].python, "%s", py);
            nops++;
        }
        ops[k].samples += sm->weight;
        if (sm->time_ns >= t0) {
            size_t bi = (size_t)((sm->time_ns - t0) / bns);
            if (bi < nb && oversub_runnable > 0 && b[bi].runnable > oversub_runnable)
                ops[k].oversub_samples += sm->weight;
        }
    }
    hashmap_free(&namer);
    qsort(ops, nops, sizeof *ops, cmp_ops);
    s->nops = nops < 8 ? nops : 8;
    memcpy(s->ops, ops, s->nops * sizeof *ops);
    free(ops);
    return 0;
}
