/*
 * analyze/profile_stream_stacks.c — a stream's recorded stacks into profile
 * stacks, once the stream's maps are all read: the native PCs of a STACK
 * record symbolized into frames, the Python frames of a PYSTACK record (its
 * code ids named by PYCODE records) spliced in, each distinct pair resolved
 * once per stream (profile_stream_internal.h's stream_load.mixed).
 *
 * Out of memory: UINT32_MAX with errno ENOMEM up to the loader; nothing here
 * aborts.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/profile_internal.h"
#include "analyze/profile_stream_internal.h"
#include "format/format.h"
#include "symbolize/symbolize.h"

/* Symbolizes one stream's native stack into frame ids (cached in rs->global
 * as the native-only profile stack). UINT32_MAX with errno ENOMEM when out
 * of memory (rs->global then stays unresolved). */
static uint32_t resolve_native(struct profile *p, struct symbolizer *sym, struct stream_load *st,
                               struct raw_stack *rs, uint32_t **scratch, size_t *scratch_cap)
{
    if (rs->global != UINT32_MAX)
        return rs->global;
    if (profile_grow_to(scratch, scratch_cap, rs->nframes + 1, sizeof **scratch) != 0)
        return UINT32_MAX;
    for (uint32_t i = 0; i < rs->nframes; i++) {
        uint64_t pc;
        memcpy(&pc, &rs->pcs[i], sizeof pc);
        bool is_ret = i > 0; /* all frames but the leaf are return addresses */
        struct sym_frame f; /* the symbolizer caches per (asid, pc) */
        int found = symbolizer_lookup(sym, st->asid, pc, is_ret, &f);
        char name[512];
        const char *module = f.module ? f.module : "[unknown]";
        enum frame_kind kind = FRAME_NATIVE;
        if (found != 0 || !f.function) {
            /* All PCs of one unnamed function share its start (from .eh_frame
             * when the symbol table does not cover it), so they merge into
             * one row; without a start, the PC's own offset. */
            if (f.module)
                snprintf(name, sizeof name, "%s+0x%" PRIx64, f.module,
                         f.function_start ? f.function_start : f.module_offset);
            else
                snprintf(name, sizeof name, "[unknown] 0x%" PRIx64, pc);
            kind = FRAME_UNKNOWN;
        } else {
            snprintf(name, sizeof name, "%s", f.function);
        }
        size_t before = p->nframes;
        (*scratch)[i] = profile_add_frame(p, name, module, f.source_file, f.line, kind);
        if ((*scratch)[i] == UINT32_MAX)
            return UINT32_MAX;
        if (p->nframes > before && kind == FRAME_UNKNOWN)
            p->unknown_frames++;
    }
    rs->global = profile_add_stack(p, *scratch, rs->nframes);
    return rs->global;
}

/* The profile stack of a sample: its native stack, with its Python frames
 * spliced in when it has any. */
static uint32_t resolve_sample_stack(struct profile *p, struct symbolizer *sym, struct stream_load *st,
                                     uint32_t stack_id, uint32_t py_plus1, uint32_t **scratch,
                                     size_t *scratch_cap)
{
    uint32_t native = resolve_native(p, sym, st, &st->stacks[stack_id], scratch, scratch_cap);
    if (native == UINT32_MAX)
        return UINT32_MAX;
    if (py_plus1 == 0 || py_plus1 > st->npystacks || st->pystacks[py_plus1 - 1].frames == NULL)
        return native;
    uint64_t key = ((uint64_t)stack_id << 32) | py_plus1;
    uint64_t found;
    if (hashmap_find_u64(&st->mixed, key, &found))
        return (uint32_t)found;
    const struct raw_pystack *ps = &st->pystacks[py_plus1 - 1];
    const struct prof_stack *ns = &p->stacks[native];
    size_t need = ns->nframes + ps->nframes * 2 + 2;
    if (profile_grow_to(scratch, scratch_cap, need, sizeof **scratch) != 0)
        return UINT32_MAX;
    uint32_t *pyframes = *scratch + ns->nframes + ps->nframes;
    bool entry[OPR_MAX_PYFRAMES];
    for (uint32_t i = 0; i < ps->nframes; i++) {
        struct opr_pyframe f;
        memcpy(&f, &ps->frames[i], sizeof f);
        const struct raw_pycode *c = f.code_id < st->npycodes ? &st->pycodes[f.code_id] : NULL;
        if (c && c->qualname)
            pyframes[i] = profile_add_frame(p, c->qualname, c->basename, c->filename, f.line, FRAME_PYTHON);
        else
            pyframes[i] = profile_add_frame(p, "[unknown Python frame]", "[python]", NULL, 0, FRAME_PYTHON);
        if (pyframes[i] == UINT32_MAX)
            return UINT32_MAX;
        entry[i] = (f.flags & OPR_PYFRAME_ENTRY) != 0;
    }
    size_t n = splice_stacks(p->frames, ns->frames, ns->nframes, pyframes, entry, ps->nframes, *scratch);
    uint32_t merged = profile_add_stack(p, *scratch, (uint32_t)n);
    if (merged == UINT32_MAX || hashmap_find_or_add_u64(&st->mixed, key, merged, NULL) < 0)
        return UINT32_MAX;
    return merged;
}

/* ranks: a profile stack of Python frames only (an OFFCPU record's stack), or
 * UINT32_MAX when the record has none. */
static uint32_t resolve_python_only(struct profile *p, struct stream_load *st, uint32_t py_plus1, uint32_t **scratch,
                                    size_t *scratch_cap)
{
    if (py_plus1 == 0 || py_plus1 > st->npystacks || st->pystacks[py_plus1 - 1].frames == NULL)
        return UINT32_MAX;
    const struct raw_pystack *ps = &st->pystacks[py_plus1 - 1];
    if (profile_grow_to(scratch, scratch_cap, ps->nframes + 1, sizeof **scratch) != 0)
        return UINT32_MAX;
    for (uint32_t i = 0; i < ps->nframes; i++) {
        struct opr_pyframe f;
        memcpy(&f, &ps->frames[i], sizeof f);
        const struct raw_pycode *c = f.code_id < st->npycodes ? &st->pycodes[f.code_id] : NULL;
        (*scratch)[i] = c && c->qualname
                            ? profile_add_frame(p, c->qualname, c->basename, c->filename, f.line, FRAME_PYTHON)
                            : profile_add_frame(p, "[unknown Python frame]", "[python]", NULL, 0, FRAME_PYTHON);
        if ((*scratch)[i] == UINT32_MAX)
            return UINT32_MAX;
    }
    return profile_add_stack(p, *scratch, ps->nframes);
}

uint32_t stream_resolve_stack(struct stream_load *sl, uint32_t stack_id, uint32_t py_plus1)
{
    errno = 0; /* UINT32_MAX then says "no such stack", not out of memory */
    if (stack_id >= sl->nstacks || sl->stacks[stack_id].pcs == NULL)
        return UINT32_MAX;
    return resolve_sample_stack(sl->p, sl->sym, sl, stack_id, py_plus1, sl->scratch, sl->scratch_cap);
}

uint32_t stream_resolve_python(struct stream_load *sl, uint32_t py_plus1)
{
    errno = 0; /* as in stream_resolve_stack */
    return resolve_python_only(sl->p, sl, py_plus1, sl->scratch, sl->scratch_cap);
}

/* True when the native stack of stack_id (resolved already) ends in unnamed
 * code in anonymous memory: a JIT or trampoline without a perf map, which
 * the unwinder had no CFI to step through. Such a stack is cut short as
 * surely as one the agent flagged, so it is counted as truncated. */
bool stream_ends_in_anonymous_code(const struct stream_load *sl, uint32_t stack_id)
{
    const struct profile *p = sl->p;
    if (stack_id >= sl->nstacks || sl->stacks[stack_id].global >= p->nstacks)
        return false;
    const struct prof_stack *ns = &p->stacks[sl->stacks[stack_id].global];
    if (ns->nframes == 0 || ns->frames[ns->nframes - 1] >= p->nframes)
        return false;
    const struct prof_frame *f = &p->frames[ns->frames[ns->nframes - 1]];
    return f->kind == FRAME_UNKNOWN && f->module &&
           (strcmp(f->module, "[anon]") == 0 || strncmp(f->module, "[anon:", 6) == 0 ||
            strcmp(f->module, "//anon") == 0 || strncmp(f->module, "/memfd:", 7) == 0);
}

/* ---- STACK_TAIL / PYSTACK_TAIL: chains written as new leaf-side elements
 * plus the root side of an earlier chain --------------------------------- */

/* A tail record's whole chain, copied out (the stream holds only its new
 * elements): `own` then parent[skip..parent_n). NULL when the record is
 * malformed (with a warning) or out of memory (errno ENOMEM). The copies
 * stay until the stream is done; together they may take at most
 * CHAIN_COPY_FACTOR times the stream's size (plus a floor), so a hostile
 * stream of empty tails on deep parents cannot turn a few bytes into a
 * copy of 256 frames each without bound. */
#define CHAIN_COPY_FACTOR 16
#define CHAIN_COPY_FLOOR (64u << 20)
static void *copy_tail(struct stream_load *sl, const struct opr_record *rec, const struct opr_chain_tail *t,
                       const void *parent, uint32_t parent_n, size_t elem, size_t packed_elem, uint32_t max,
                       uint32_t *n)
{
    errno = 0;
    if ((size_t)t->nframes * packed_elem > rec->len - sizeof *t || parent == NULL || t->parent_skip >= parent_n ||
        (uint64_t)t->nframes + parent_n - t->parent_skip > max) {
        stream_warn(sl, "malformed stack record at byte %zu (its parent is unknown, or it is too deep); skipped",
                    rec->off);
        return NULL;
    }
    *n = t->nframes + parent_n - t->parent_skip;
    size_t bytes = (size_t)*n * elem;
    if (sl->chain_copy_bytes + bytes > CHAIN_COPY_FLOOR + CHAIN_COPY_FACTOR * sl->stream_bytes) {
        if (!sl->chain_copy_capped)
            stream_warn(sl, "stack records at byte %zu on expand beyond %d times the stream's size; skipped",
                        rec->off, CHAIN_COPY_FACTOR);
        sl->chain_copy_capped = true;
        return NULL;
    }
    unsigned char *copy = malloc(bytes ? bytes : 1);
    if (!copy || profile_grow_to(&sl->chain_copies, &sl->chain_copies_cap, sl->nchain_copies + 1,
                                 sizeof *sl->chain_copies) != 0) {
        free(copy);
        errno = ENOMEM;
        return NULL;
    }
    sl->chain_copies[sl->nchain_copies++] = copy;
    sl->chain_copy_bytes += bytes;
    const unsigned char *own = (const unsigned char *)rec->body + sizeof *t;
    if (packed_elem == elem) {
        memcpy(copy, own, (size_t)t->nframes * elem);
    } else { /* PYSTACK_TAIL: opr_pyframe_packed -> opr_pyframe */
        for (uint32_t i = 0; i < t->nframes; i++) {
            struct opr_pyframe_packed pk;
            memcpy(&pk, own + (size_t)i * sizeof pk, sizeof pk);
            uint32_t code = pk.code_entry & OPR_PYFRAME_PACKED_UNKNOWN;
            struct opr_pyframe f = {code == OPR_PYFRAME_PACKED_UNKNOWN ? OPR_PYCODE_UNKNOWN : code, pk.line,
                                    pk.code_entry >> 31 ? OPR_PYFRAME_ENTRY : 0, 0};
            memcpy(copy + (size_t)i * sizeof f, &f, sizeof f);
        }
    }
    memcpy(copy + (size_t)t->nframes * elem, (const unsigned char *)parent + (size_t)t->parent_skip * elem,
           (size_t)(parent_n - t->parent_skip) * elem);
    return copy;
}

int stream_on_stack_tail(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct stream_load *sl = ctx;
    struct opr_chain_tail t;
    memcpy(&t, rec->body, sizeof t);
    if (!stream_id_fits(sl, t.id, sizeof(struct opr_record_header) + sizeof t)) {
        stream_warn(sl, "malformed stack record at byte %zu; skipped", rec->off);
        return 0;
    }
    const struct raw_stack *parent = t.parent_id < sl->nstacks ? &sl->stacks[t.parent_id] : NULL;
    uint32_t n;
    const uint64_t *pcs = copy_tail(sl, rec, &t, parent ? parent->pcs : NULL, parent ? parent->nframes : 0,
                                    sizeof(uint64_t), sizeof(uint64_t), OPR_MAX_FRAMES, &n);
    if (!pcs)
        return errno == ENOMEM ? -1 : 0;
    if (stream_room_for_stack(sl, t.id) != 0)
        return -1;
    sl->stacks[t.id] = (struct raw_stack){n, pcs, UINT32_MAX};
    return 0;
}

int stream_on_pystack_tail(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct stream_load *sl = ctx;
    struct opr_chain_tail t;
    memcpy(&t, rec->body, sizeof t);
    if (t.id > (1u << 26) || !stream_id_fits(sl, t.id, sizeof(struct opr_record_header) + sizeof t))
        return 0;
    const struct raw_pystack *parent = t.parent_id < sl->npystacks ? &sl->pystacks[t.parent_id] : NULL;
    uint32_t n;
    const struct opr_pyframe *frames =
        copy_tail(sl, rec, &t, parent ? parent->frames : NULL, parent ? parent->nframes : 0,
                  sizeof(struct opr_pyframe), sizeof(struct opr_pyframe_packed), OPR_MAX_PYFRAMES, &n);
    if (!frames)
        return errno == ENOMEM ? -1 : 0;
    if (stream_room_for_pystack(sl, t.id) != 0)
        return -1;
    sl->pystacks[t.id] = (struct raw_pystack){n, frames};
    return 0;
}

void stream_free_chain_copies(struct stream_load *sl)
{
    for (size_t i = 0; i < sl->nchain_copies; i++)
        free(sl->chain_copies[i]);
    free(sl->chain_copies);
    sl->chain_copies = NULL;
    sl->nchain_copies = sl->chain_copies_cap = 0;
}
