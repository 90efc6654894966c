/*
 * report/export_folded.c — Brendan Gregg's folded stacks ("collapsed"
 * format): one line per distinct call path, root first, frames joined by ';',
 * a space, then the path's weight as an integer. flamegraph.pl, inferno,
 * speedscope and many other tools read it.
 *
 * Lines come from a depth-first walk of the function call tree with children
 * in name order, so the output is deterministic and its counts add up to the
 * profile's total weight exactly.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/export_internal.h"
#include "report/report.h"

/* Longest frame name written; longer C++ names are cut (still valid UTF-8). */
#define FOLDED_NAME_MAX 1024

int export_folded(FILE *out, const struct profile *p)
{
    struct export_funcs fn;
    if (export_funcs_build(p, &fn) != 0)
        return -1;
    struct export_tree t;
    if (export_tree_build(p, &fn, &t) != 0) {
        export_funcs_free(&fn);
        return -1;
    }
    /* Sanitize each function's name once, not once per line it appears on. */
    char **names = calloc(fn.nfuncs, sizeof *names);
    uint32_t *path = malloc((t.max_depth + 1) * sizeof *path);
    int rc = names && path ? 0 : -1;
    char buf[FOLDED_NAME_MAX];
    for (size_t i = 0; rc == 0 && i < fn.nfuncs; i++) {
        export_folded_name(buf, sizeof buf, fn.funcs[i].name);
        names[i] = strdup(buf);
        if (!names[i])
            rc = -1;
    }
    /* Iterative pre-order walk: path[d] is the node at depth d. */
    uint32_t node = rc == 0 ? t.nodes[0].first_child : UINT32_MAX;
    while (node != UINT32_MAX) {
        struct export_node *n = &t.nodes[node];
        path[n->depth] = node;
        if (n->self) {
            for (uint32_t d = 1; d <= n->depth; d++) {
                if (d > 1)
                    fputc(';', out);
                fputs(names[t.nodes[path[d]].func], out);
            }
            fprintf(out, " %" PRIu64 "\n", n->self);
        }
        if (n->first_child != UINT32_MAX) {
            node = n->first_child;
            continue;
        }
        /* Up until a node with a next sibling. */
        while (node != UINT32_MAX && t.nodes[node].next_sibling == UINT32_MAX)
            node = t.nodes[node].parent == 0 ? UINT32_MAX : t.nodes[node].parent;
        if (node != UINT32_MAX)
            node = t.nodes[node].next_sibling;
    }
    if (names)
        for (size_t i = 0; i < fn.nfuncs; i++)
            free(names[i]);
    free(names);
    free(path);
    export_tree_free(&t);
    export_funcs_free(&fn);
    return rc;
}
