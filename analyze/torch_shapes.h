/*
 * analyze/torch_shapes.h — FLOPs per operator from `opprof record
 * --torch-shapes` (analyze/torch_shapes.c).
 * Part of analyze/analyze.h, the folder's one interface: include that, not
 * this file, from outside analyze/.
 */
#ifndef OPPROF_ANALYZE_TORCH_SHAPES_H
#define OPPROF_ANALYZE_TORCH_SHAPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analyze/profile.h"

/* ------------------------------------------------------------------------- */
/* Operator shapes and FLOPs (analyze/torch_shapes.c; record --torch-shapes)   */
/* ------------------------------------------------------------------------- */
/* The hook (sampler/record/torch_shapes/opprof_torch_shapes.py) writes
 * torch_shapes.<pid>.tsv into the result dir (docs/format.md). Those files are
 * untrusted: a malformed line is skipped and counted, a file that does not
 * start with the header is an error. FLOPs and bytes come from the shapes
 * through the sweep's own formulas (sweep_op_counts), so `opprof sweep` and
 * the report count one call of one shape the same way. */

/* The hook's file: samples in its Python frames are the hook's own cost. */
#define TORCH_SHAPES_HOOK_FILE "opprof_torch_shapes.py"
#define TORCH_SHAPES_HOOK_ROW "[opprof --torch-shapes hook]"
#define TORCH_SHAPES_HEADER "# opprof torch-shapes 1"

struct torch_shapes_sig {
    char *args;            /* "float32[64,32];float32[32,16]" as the hook wrote it */
    uint64_t calls;
    double flops, bytes;   /* per call; flops < 0: no formula for this op/shape */
};

struct torch_shapes_op {
    char *name;            /* "aten::mm" */
    uint64_t calls;        /* every call the hook saw */
    uint64_t unrecorded;   /* calls whose signature the hook did not keep */
    uint64_t flops_calls;  /* calls whose FLOPs are counted */
    double flops, bytes;   /* summed over those calls */
    struct torch_shapes_sig *sigs; /* by calls, descending */
    size_t nsigs;
    /* From the samples (torch_shapes_attach_samples): weight where this op is
     * the innermost operator (self) and anywhere on the stack (total), the
     * hook's own samples left out. */
    uint64_t self_weight, total_weight;
    void *sig_index;       /* args -> signature, while files are read */
};

struct torch_shapes {
    struct torch_shapes_op *ops;
    size_t nops;
    size_t files;          /* torch_shapes.*.tsv read */
    uint64_t hook_ns;      /* the hook's own time, as it measured it */
    uint64_t hook_calls;   /* operator calls it intercepted */
    uint64_t bad_lines;    /* malformed lines skipped */
    uint64_t inconsistent_ops; /* ops whose signatures count more calls than the op: calls raised to match */
    char torch_version[64], api[64];
    char unsupported[512]; /* why a process recorded no shapes ("" when none said so) */
    uint64_t hook_weight;  /* sample weight in the hook's own frames */
    uint64_t all_weight;   /* the profile's total */
    void *op_index;        /* name -> operator */
};

/* Merges one file's text into ts. 0; -1 with one sentence in err when the text
 * is not a torch-shapes file (no header) or on out of memory (errno ENOMEM). */
int torch_shapes_parse(struct torch_shapes *ts, const char *text, size_t len, char *err, size_t errlen);
/* Reads every torch_shapes.*.tsv of dir (ts->files 0 when there is none) and
 * computes FLOPs and bytes. 0, or -1 with one sentence in err. */
int torch_shapes_load(const char *dir, struct torch_shapes *ts, char *err, size_t errlen);
/* FLOPs and bytes per call of op ("aten::mm") with the hook's argument text,
 * by the sweep's formulas. 0, or -1 when the op has no formula or the
 * arguments do not fit it. */
int torch_shapes_counts(const char *op, const char *args, double *flops, double *bytes);
/* Fills flops/bytes of every op from its signatures and sorts signatures. */
void torch_shapes_compute(struct torch_shapes *ts);
/* Whether any frame of p is the hook's: a --torch-shapes recording. */
bool torch_shapes_profile_has_hook(const struct profile *p);
/* In such a profile, whether a sample with stack st is the hook's own cost:
 * the stack passes through the hook's file or the dispatcher's call into
 * Python (__torch_dispatch__), and no operator frame lies leafward of its
 * innermost Python frame (the sample is in Python dispatch, not a kernel). */
bool torch_shapes_stack_is_hook(const struct profile *p, const struct prof_stack *st);
/* Charges the profile's samples to ts's operators and to the hook. 0 or -1 (ENOMEM). */
int torch_shapes_attach_samples(const struct profile *p, struct torch_shapes *ts);
void torch_shapes_free(struct torch_shapes *ts);

#endif
