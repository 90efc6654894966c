/*
 * report/export_internal.h — what the export_*.c renderers share: escaping
 * for JSON / XML / folded names, the colour class of a frame, the
 * "function" view of a profile (frames that differ only by line merged), and
 * a call tree keyed by function (flame graph, folded stacks, HTML).
 *
 * Not part of report.h: other folders use only the export_* entry points.
 */
#ifndef OPPROF_EXPORT_INTERNAL_H
#define OPPROF_EXPORT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "analyze/analyze.h"

/* What a frame is, for colouring and for the Chrome trace's categories.
 * Derived from what the frame tells (kind, name, module) only. */
enum export_class {
    EXPORT_CLASS_PYTHON = 0, /* FRAME_PYTHON */
    EXPORT_CLASS_OPERATOR,   /* ATen / autograd entry points (at::, aten::, c10::, torch::autograd) */
    EXPORT_CLASS_OPENMP,     /* libgomp / libomp / libiomp5 and their entry points */
    EXPORT_CLASS_KERNEL,     /* kernel frames ([kernel.kallsyms], vmlinux) */
    EXPORT_CLASS_NATIVE,     /* any other symbolized native function */
    EXPORT_CLASS_UNKNOWN,    /* FRAME_UNKNOWN, and the "[no frames]" pseudo frame */
    EXPORT_CLASS_COUNT
};

enum export_class export_classify(const struct prof_frame *f);
const char *export_class_name(enum export_class c);

/* ---- escaping ------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at u (1-4), 0 when invalid. */
size_t export_utf8_len(const unsigned char *u);

/* s as a JSON string literal (quotes included); invalid UTF-8 becomes U+FFFD
 * so the file always parses; NULL is written as null. */
void export_json_string(FILE *out, const char *s);
/* s as XML character data / attribute text (&<>"' escaped, control
 * characters and invalid UTF-8 dropped: XML 1.0 forbids them). */
void export_xml_text(FILE *out, const char *s);
/* Copies s into buf (size len) as a valid folded-stack frame name: no ';'
 * (becomes ':'), no control characters (become ' '), no trailing blanks, and
 * not ending with a blank followed by digits (the blank becomes '_'), because
 * flamegraph.pl would read the digits as a second count. Empty -> "[unknown]". */
void export_folded_name(char *buf, size_t len, const char *s);

/* ---- functions ------------------------------------------------------------ */

/* One function of the profile: frames with the same name and module (and for
 * Python, source file) are one function whatever their line. */
struct export_func {
    const char *name;        /* display name, owned by the func map */
    const char *symbol;      /* the frame's own name (profile string): qualname or symbol */
    const char *module;      /* profile string */
    const char *source_file; /* profile string or NULL */
    const char *key_file;    /* Python: source file (part of the identity); else NULL */
    int min_line;            /* smallest line seen, 0 when none */
    enum export_class cls;
};

struct export_funcs {
    struct export_func *funcs;
    size_t nfuncs;
    uint32_t *of_frame; /* per profile frame: its function */
    uint32_t none;      /* the "[no frames]" function (for empty stacks) */
    uint32_t startup;   /* the "[start-up: imports, library init]" function */
    bool fold_startup;  /* export_tree_build: a stack entering import or the
                           loader's library init ends there, in `startup`
                           (set by the caller after export_funcs_build) */
    char *names;        /* storage of the display names */
};

/* Python functions are shown as "qualname (file.py)" so that two functions
 * named run in two files stay apart; native ones by their name. Returns 0,
 * -1 on out of memory. */
int export_funcs_build(const struct profile *p, struct export_funcs *out);
void export_funcs_free(struct export_funcs *f);

/* Sample indices grouped by thread, in time order within each thread:
 * thread t's samples are order[start[t] .. start[t+1]). start and fill hold
 * nthreads + 1 zeroed entries, order nsamples. */
void export_order_by_thread(const struct profile *p, size_t *start, size_t *fill, size_t *order);

/* ---- call tree by function ------------------------------------------------ */

struct export_node {
    uint32_t func;
    uint32_t parent;       /* UINT32_MAX for the root */
    uint32_t first_child;  /* UINT32_MAX when none; children sorted by name after _finish */
    uint32_t next_sibling;
    uint32_t depth;        /* root 0 */
    uint64_t total;        /* weight of samples through this node */
    uint64_t self;         /* weight of samples ending here */
};

struct export_tree {
    struct export_node *nodes; /* nodes[0] is the root (no function) */
    size_t nnodes, cap;
    uint32_t max_depth;
};

/* Builds the tree of every sample (root first), weighted by sample weight,
 * children sorted by display name (deterministic output). */
int export_tree_build(const struct profile *p, const struct export_funcs *fn, struct export_tree *t);
void export_tree_free(struct export_tree *t);

/* Weight and sample count per stack index (arrays of p->nstacks, caller frees). */
int export_stack_weights(const struct profile *p, uint64_t **weight, uint64_t **count);

/* How many frames of st (leaf first) the exports show: the process-entry
 * frames at the root (_start, __libc_start_main, __libc_start_call_main) are
 * dropped. Python processes are sampled with a stack rooted at
 * __libc_start_main and native ones at _start; dropping both everywhere gives
 * one root tower per program in every viewer, and the frames say nothing
 * about the program. A stack made only of such frames keeps its leaf. */
uint32_t export_stack_len(const struct profile *p, const struct prof_stack *st);

/* ---- differential flame graph (export_flamediff.c) ----------------------- */

struct flamediff {
    double *base_share;     /* per node of B's tree: share of A's samples through the same path */
    double max_change;      /* largest |share in B - share in A| of any box */
    double base_only_share; /* share of A on paths B lacks (not drawn) */
    uint64_t base_total;    /* A's samples */
};

/* Matches every node of t (B's tree, functions fn) to the same path of
 * function names in base (A). Returns 0, -1 on out of memory. */
int flamediff_compute(const struct profile *base, const struct export_funcs *fn, const struct export_tree *t,
                      struct flamediff *out);
void flamediff_free(struct flamediff *d);
/* Red when the share grew, blue when it shrank, by how much of the largest change. */
void flamediff_colour(const struct flamediff *d, double base_share, double share, int rgb[3]);

/* Basename of a path ("?" for NULL). */
const char *export_base_name(const char *path);

#endif
