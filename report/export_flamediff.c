/*
 * report/export_flamediff.c — the differential part of a differential flame
 * graph (`opprof diff A B --flamegraph FILE`): B's call tree is drawn, and
 * each box is coloured by how the share of all samples through the same call
 * path changed from A to B (red: grew, blue: shrank, white: unchanged), as
 * Brendan Gregg's difffolded.pl + flamegraph.pl do.
 *
 * Paths are matched by the display names of their functions (root to box),
 * not by addresses, so two builds or two machines compare. Shares rather
 * than sample counts: A and B rarely ran for the same time. What A had and B
 * has not cannot be drawn in B's shape; its share of A is counted and the
 * graph's header says it.
 */
#include <stdlib.h>
#include <string.h>

#include "report/export_internal.h"

/* The child of base node `parent` whose function is called `name`, or
 * UINT32_MAX. Children lists are short (a call site's callees). */
static uint32_t base_child(const struct export_tree *bt, const struct export_funcs *bfn, uint32_t parent,
                           const char *name)
{
    for (uint32_t c = bt->nodes[parent].first_child; c != UINT32_MAX; c = bt->nodes[c].next_sibling)
        if (strcmp(bfn->funcs[bt->nodes[c].func].name, name) == 0)
            return c;
    return UINT32_MAX;
}

int flamediff_compute(const struct profile *base, const struct export_funcs *fn, const struct export_tree *t,
                      struct flamediff *out)
{
    memset(out, 0, sizeof *out);
    struct export_funcs bfn;
    if (export_funcs_build(base, &bfn) != 0)
        return -1;
    bfn.fold_startup = fn->fold_startup; /* A's paths folded as B's */
    struct export_tree bt;
    if (export_tree_build(base, &bfn, &bt) != 0) {
        export_funcs_free(&bfn);
        return -1;
    }
    uint32_t *match = malloc((t->nnodes ? t->nnodes : 1) * sizeof *match);
    bool *matched = calloc(bt.nnodes ? bt.nnodes : 1, sizeof *matched);
    out->base_share = malloc((t->nnodes ? t->nnodes : 1) * sizeof *out->base_share);
    if (!match || !matched || !out->base_share) {
        free(match);
        free(matched);
        free(out->base_share);
        out->base_share = NULL;
        export_tree_free(&bt);
        export_funcs_free(&bfn);
        return -1;
    }
    uint64_t btotal = bt.nnodes ? bt.nodes[0].total : 0, total = t->nnodes ? t->nodes[0].total : 0;
    /* Parents come before their children in node order (export_tree_build),
     * so a node's parent is matched before the node is. */
    for (size_t i = 0; i < t->nnodes; i++) {
        uint32_t parent = t->nodes[i].parent;
        if (i == 0)
            match[i] = bt.nnodes ? 0 : UINT32_MAX;
        else if (match[parent] == UINT32_MAX)
            match[i] = UINT32_MAX;
        else
            match[i] = base_child(&bt, &bfn, match[parent], fn->funcs[t->nodes[i].func].name);
        if (match[i] != UINT32_MAX)
            matched[match[i]] = true;
        out->base_share[i] = match[i] != UINT32_MAX && btotal ? (double)bt.nodes[match[i]].total / (double)btotal : 0;
        double share = total ? (double)t->nodes[i].total / (double)total : 0;
        double change = share - out->base_share[i];
        if (i > 0 && (change > 0 ? change : -change) > out->max_change)
            out->max_change = change > 0 ? change : -change;
    }
    /* A's paths B lacks: count the top of each missing subtree once. */
    uint64_t missing = 0;
    for (size_t j = 1; j < bt.nnodes; j++)
        if (!matched[j] && matched[bt.nodes[j].parent])
            missing += bt.nodes[j].total;
    out->base_only_share = btotal ? (double)missing / (double)btotal : 0;
    out->base_total = btotal;
    free(match);
    free(matched);
    export_tree_free(&bt);
    export_funcs_free(&bfn);
    return 0;
}

void flamediff_free(struct flamediff *d)
{
    free(d->base_share);
    d->base_share = NULL;
}

void flamediff_colour(const struct flamediff *d, double base_share, double share, int rgb[3])
{
    double change = share - base_share;
    /* Scaled to the largest change in the graph, as difffolded graphs are:
     * the strongest red or blue is the biggest mover. */
    double r = d->max_change > 0 ? (change > 0 ? change : -change) / d->max_change : 0;
    int fade = (int)(210.0 * (r > 1 ? 1 : r) + 0.5);
    if (change > 0) { /* grew: red */
        rgb[0] = 255, rgb[1] = 255 - fade, rgb[2] = 255 - fade;
    } else if (change < 0) { /* shrank: blue */
        rgb[0] = 255 - fade, rgb[1] = 255 - fade, rgb[2] = 255;
    } else {
        rgb[0] = rgb[1] = rgb[2] = 250;
    }
}
