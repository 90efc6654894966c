/*
 * report/export_common.c — helpers shared by the export formats: escaping
 * (JSON, XML, folded names), the colour class of a frame, the function view
 * of a profile and a call tree by function.
 *
 * Why a function view: the profile keeps one frame per (function, line), which
 * is right for `report --group-by line` but splits a flame graph box into one
 * box per executing line. Every visual export merges frames to functions.
 */
#include <stdlib.h>
#include <string.h>

#include "report/export_internal.h"
#include "report/report_internal.h"
#include "util/util.h"

/* ---- classes ---------------------------------------------------------------- */

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

enum export_class export_classify(const struct prof_frame *f)
{
    if (f->kind == FRAME_PYTHON)
        return EXPORT_CLASS_PYTHON;
    const char *m = f->module ? f->module : "";
    const char *n = f->name ? f->name : "";
    if (starts_with(m, "[kernel") || starts_with(m, "vmlinux") || starts_with(n, "[k]"))
        return EXPORT_CLASS_KERNEL;
    /* The OpenMP runtime, whatever the frame's symbol: its spin-waits and
     * barriers are exactly what a user looking for threading trouble wants
     * to see apart. */
    if (starts_with(m, "libgomp") || starts_with(m, "libomp") || starts_with(m, "libiomp") ||
        starts_with(n, "GOMP_") || starts_with(n, "__kmp") || starts_with(n, "__kmpc_"))
        return EXPORT_CLASS_OPENMP;
    if (f->kind == FRAME_UNKNOWN)
        return EXPORT_CLASS_UNKNOWN;
    if (starts_with(n, "at::") || starts_with(n, "aten::") || starts_with(n, "c10::") ||
        starts_with(n, "torch::autograd::"))
        return EXPORT_CLASS_OPERATOR;
    return EXPORT_CLASS_NATIVE;
}

const char *export_class_name(enum export_class c)
{
    static const char *const names[EXPORT_CLASS_COUNT] = {"python", "operator", "openmp",
                                                           "kernel", "native", "unknown"};
    return (unsigned)c < EXPORT_CLASS_COUNT ? names[c] : "unknown";
}

const char *export_base_name(const char *path)
{
    if (!path)
        return "?";
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ---- escaping ----------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at u, or 0 when it is not one (overlong
 * forms and surrogates count as invalid: JSON and XML parsers reject them). */
size_t export_utf8_len(const unsigned char *u)
{
    if (u[0] < 0x80)
        return 1;
    size_t n;
    uint32_t cp;
    if ((u[0] & 0xe0) == 0xc0) {
        n = 2;
        cp = u[0] & 0x1f;
    } else if ((u[0] & 0xf0) == 0xe0) {
        n = 3;
        cp = u[0] & 0x0f;
    } else if ((u[0] & 0xf8) == 0xf0) {
        n = 4;
        cp = u[0] & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((u[i] & 0xc0) != 0x80)
            return 0; /* also stops at the terminating NUL */
        cp = (cp << 6) | (u[i] & 0x3f);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* One JSON string writer for every renderer: the table's (report_json_string). */
void export_json_string(FILE *out, const char *s)
{
    report_json_string(out, s);
}

void export_xml_text(FILE *out, const char *s)
{
    if (!s)
        return;
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        switch (*u) {
        case '&': fputs("&amp;", out); u++; continue;
        case '<': fputs("&lt;", out); u++; continue;
        case '>': fputs("&gt;", out); u++; continue;
        case '"': fputs("&quot;", out); u++; continue;
        case '\'': fputs("&#39;", out); u++; continue;
        default: break;
        }
        if (*u < 0x20 || *u == 0x7f) {
            fputc(' ', out);
            u++;
            continue;
        }
        size_t n = export_utf8_len(u);
        if (n == 0) {
            fputs("\xef\xbf\xbd", out); /* U+FFFD */
            u++;
        } else {
            fwrite(u, 1, n, out);
            u += n;
        }
    }
}

void export_folded_name(char *buf, size_t len, const char *s)
{
    if (len == 0)
        return;
    size_t o = 0;
    for (const unsigned char *u = (const unsigned char *)(s ? s : ""); *u && o + 1 < len; u++) {
        unsigned char c = *u;
        if (c == ';')
            c = ':';
        else if (c < 0x20 || c == 0x7f)
            c = ' ';
        buf[o++] = (char)c;
    }
    /* Truncation may have cut a UTF-8 sequence: drop its head bytes. The
     * terminator goes in first: export_utf8_len reads up to the sequence's
     * length and must stop at it, not at whatever the buffer held (valgrind
     * saw it read an unwritten byte; a stale continuation byte there kept
     * half a character). */
    buf[o] = '\0';
    if (s && o + 1 >= len) {
        size_t k = o;
        while (k > 0 && ((unsigned char)buf[k - 1] & 0xc0) == 0x80)
            k--;
        if (k > 0 && ((unsigned char)buf[k - 1] & 0xc0) == 0xc0 &&
            export_utf8_len((const unsigned char *)buf + k - 1) == 0)
            o = k - 1;
    }
    while (o > 0 && buf[o - 1] == ' ')
        o--;
    buf[o] = '\0';
    if (o == 0) {
        snprintf(buf, len, "[unknown]");
        return;
    }
    size_t d = o;
    while (d > 0 && buf[d - 1] >= '0' && buf[d - 1] <= '9')
        d--;
    if (d < o && d > 0 && buf[d - 1] == ' ')
        buf[d - 1] = '_';
}

/* ---- functions ------------------------------------------------------------------ */

/* Identity of a function: interned profile strings, so comparing and
 * hashing the pointers is comparing and hashing the strings. */
struct func_key {
    const char *symbol, *module, *file;
};

static uint64_t mix_ptr(uint64_t h, const void *ptr)
{
    h ^= (uint64_t)(uintptr_t)ptr;
    h *= 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

static uint64_t func_key_hash(const void *key, size_t len, const void *ctx)
{
    (void)len;
    (void)ctx;
    const struct func_key *k = key;
    return mix_ptr(mix_ptr(mix_ptr(0x1234567, k->symbol), k->module), k->file);
}

static bool func_key_equal(const void *key, size_t len, uint64_t value, const void *ctx)
{
    (void)len;
    const struct export_funcs *fn = ctx;
    const struct func_key *k = key;
    const struct export_func *g = &fn->funcs[value];
    return g->symbol == k->symbol && g->module == k->module && g->key_file == k->file;
}

static const struct hashmap_type func_key_type = {func_key_hash, func_key_equal};

#define STARTUP_NAME "[start-up: imports, library init]"

/* Whether frame f starts start-up work: Python's import machinery, or the
 * loader running library constructors (at start or from dlopen). */
static bool starts_startup(const struct prof_frame *f)
{
    if (f->kind == FRAME_PYTHON)
        return frame_is_importlib(f);
    return f->name && (strcmp(f->name, "_dl_init") == 0 || strcmp(f->name, "call_init") == 0);
}

int export_funcs_build(const struct profile *p, struct export_funcs *out)
{
    memset(out, 0, sizeof *out);
    size_t cap = p->nframes + 2;
    out->funcs = calloc(cap, sizeof *out->funcs);
    out->of_frame = calloc(p->nframes ? p->nframes : 1, sizeof *out->of_frame);
    /* Display names: "name (file.py)" needs name + module + 4 bytes. */
    size_t bytes = sizeof "[no frames]" + sizeof STARTUP_NAME;
    for (size_t i = 0; i < p->nframes; i++)
        bytes += strlen(p->frames[i].name) + strlen(p->frames[i].module) + 4;
    out->names = malloc(bytes);
    struct hashmap index; /* function identity -> index into out->funcs */
    hashmap_init(&index, &func_key_type, out);
    if (!out->funcs || !out->of_frame || !out->names || hashmap_reserve(&index, cap) != 0) {
        hashmap_free(&index);
        export_funcs_free(out);
        return -1;
    }
    char *w = out->names;
    for (size_t i = 0; i < p->nframes; i++) {
        const struct prof_frame *f = &p->frames[i];
        /* Interned strings: pointer identity is string identity. */
        const char *file = f->kind == FRAME_PYTHON ? f->source_file : NULL;
        struct func_key k = {f->name, f->module, file};
        uint64_t found;
        int rc = hashmap_find_or_add(&index, &k, sizeof k, out->nfuncs, &found);
        if (rc < 0) { /* not expected: room for every frame was reserved */
            hashmap_free(&index);
            export_funcs_free(out);
            return -1;
        }
        uint32_t id = (uint32_t)found;
        if (rc == 0) {
            out->nfuncs++;
            struct export_func *g = &out->funcs[id];
            g->name = w;
            if (f->kind == FRAME_PYTHON && f->module[0])
                w += sprintf(w, "%s (%s)", f->name, f->module) + 1;
            else
                w += sprintf(w, "%s", f->name) + 1;
            g->symbol = f->name;
            g->module = f->module;
            g->key_file = file;
            g->source_file = file ? file : (f->source_file ? f->source_file : NULL);
            g->min_line = 0;
            g->cls = export_classify(f);
        }
        struct export_func *g = &out->funcs[id];
        if (f->line > 0 && (g->min_line == 0 || f->line < g->min_line)) {
            g->min_line = f->line;
            if (f->source_file)
                g->source_file = f->source_file;
        }
        out->of_frame[i] = id;
    }
    hashmap_free(&index);
    out->none = (uint32_t)out->nfuncs++;
    struct export_func *none = &out->funcs[out->none];
    none->name = w;
    strcpy(w, "[no frames]");
    none->symbol = none->name;
    none->module = "";
    none->cls = EXPORT_CLASS_UNKNOWN;
    w += sizeof "[no frames]";
    out->startup = (uint32_t)out->nfuncs++;
    struct export_func *su = &out->funcs[out->startup];
    strcpy(w, STARTUP_NAME);
    su->name = su->symbol = w;
    su->module = "";
    su->cls = EXPORT_CLASS_UNKNOWN;
    return 0;
}

void export_funcs_free(struct export_funcs *f)
{
    free(f->funcs);
    free(f->of_frame);
    free(f->names);
    memset(f, 0, sizeof *f);
}

int export_stack_weights(const struct profile *p, uint64_t **weight, uint64_t **count)
{
    *weight = calloc(p->nstacks ? p->nstacks : 1, sizeof **weight);
    *count = calloc(p->nstacks ? p->nstacks : 1, sizeof **count);
    if (!*weight || !*count) {
        free(*weight);
        free(*count);
        *weight = *count = NULL;
        return -1;
    }
    for (size_t i = 0; i < p->nsamples; i++) {
        uint32_t s = p->samples[i].stack;
        if (s >= p->nstacks)
            continue;
        (*weight)[s] += p->samples[i].weight;
        (*count)[s] += p->samples[i].count;
    }
    return 0;
}

/* ---- call tree ------------------------------------------------------------------- */

/* The tree's index maps (parent << 32 | func) to the child node; it lives
 * only while the tree is built. */
/* The child of parent for func, created when missing; UINT32_MAX on OOM.
 * Most lookups of a big profile are misses (new paths), so the node array
 * gets its room first and one find_or_add both looks up and inserts. */
static uint32_t tree_child(struct export_tree *t, struct hashmap *index, uint32_t parent, uint32_t func)
{
    if (t->nnodes == t->cap) {
        size_t cap = t->cap * 2;
        struct export_node *nodes = realloc(t->nodes, cap * sizeof *nodes);
        if (!nodes)
            return UINT32_MAX;
        t->nodes = nodes;
        t->cap = cap;
    }
    uint64_t found;
    int rc = hashmap_find_or_add_u64(index, (uint64_t)parent << 32 | func, t->nnodes, &found);
    if (rc != 0)
        return rc > 0 ? (uint32_t)found : UINT32_MAX;
    uint32_t id = (uint32_t)t->nnodes++;
    t->nodes[id] = (struct export_node){func, parent, UINT32_MAX, UINT32_MAX,
                                        t->nodes[parent].depth + 1, 0, 0};
    if (t->nodes[id].depth > t->max_depth)
        t->max_depth = t->nodes[id].depth;
    return id;
}

static int cmp_child(const void *a, const void *b, void *ctx)
{
    const struct export_tree *t = ((const void **)ctx)[0];
    const struct export_funcs *fn = ((const void **)ctx)[1];
    const struct export_node *x = &t->nodes[*(const uint32_t *)a];
    const struct export_node *y = &t->nodes[*(const uint32_t *)b];
    if (x->parent != y->parent)
        return x->parent < y->parent ? -1 : 1;
    int c = strcmp(fn->funcs[x->func].name, fn->funcs[y->func].name);
    if (c)
        return c;
    return x->func < y->func ? -1 : x->func > y->func;
}

int export_tree_build(const struct profile *p, const struct export_funcs *fn, struct export_tree *t)
{
    memset(t, 0, sizeof *t);
    t->cap = 256;
    t->nodes = malloc(t->cap * sizeof *t->nodes);
    struct hashmap index;
    hashmap_init_u64(&index);
    if (!t->nodes || hashmap_reserve(&index, 256) != 0) {
        hashmap_free(&index);
        export_tree_free(t);
        return -1;
    }
    t->nodes[0] = (struct export_node){UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, 0, 0, 0};
    t->nnodes = 1;
    uint64_t *weight, *count;
    if (export_stack_weights(p, &weight, &count) != 0) {
        hashmap_free(&index);
        export_tree_free(t);
        return -1;
    }
    int rc = 0;
    for (size_t s = 0; s < p->nstacks && rc == 0; s++) {
        if (!count[s])
            continue;
        const struct prof_stack *st = &p->stacks[s];
        uint32_t node = 0;
        t->nodes[0].total += weight[s];
        if (st->nframes == 0) {
            node = tree_child(t, &index, 0, fn->none);
            if (node == UINT32_MAX) {
                rc = -1;
                break;
            }
            t->nodes[node].total += weight[s];
        }
        for (uint32_t k = export_stack_len(p, st); k-- > 0;) {
            bool fold = fn->fold_startup && starts_startup(&p->frames[st->frames[k]]);
            node = tree_child(t, &index, node, fold ? fn->startup : fn->of_frame[st->frames[k]]);
            if (node == UINT32_MAX) {
                rc = -1;
                break;
            }
            t->nodes[node].total += weight[s];
            if (fold)
                break; /* the rest of the stack is start-up: one box */
        }
        if (rc == 0)
            t->nodes[node].self += weight[s];
    }
    free(weight);
    free(count);
    hashmap_free(&index);
    if (rc != 0) {
        export_tree_free(t);
        return -1;
    }
    /* Link children in name order: sort all non-root nodes by (parent, name),
     * then thread each run of siblings. */
    size_t n = t->nnodes - 1;
    uint32_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!order) {
        export_tree_free(t);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)(i + 1);
    const void *ctx[2] = {t, fn};
    qsort_r(order, n, sizeof *order, cmp_child, ctx);
    for (size_t i = n; i-- > 0;) {
        struct export_node *c = &t->nodes[order[i]];
        c->next_sibling = t->nodes[c->parent].first_child;
        t->nodes[c->parent].first_child = order[i];
    }
    free(order);
    return 0;
}

void export_tree_free(struct export_tree *t)
{
    free(t->nodes);
    memset(t, 0, sizeof *t);
}

void export_order_by_thread(const struct profile *p, size_t *start, size_t *fill, size_t *order)
{
    for (size_t i = 0; i < p->nsamples; i++)
        if (p->samples[i].thread < p->nthreads)
            start[p->samples[i].thread + 1]++;
    for (size_t t = 0; t < p->nthreads; t++)
        start[t + 1] += start[t];
    for (size_t i = 0; i < p->nsamples; i++) {
        uint32_t t = p->samples[i].thread;
        if (t < p->nthreads)
            order[start[t] + fill[t]++] = i;
    }
}

static bool is_process_entry(const struct prof_frame *f)
{
    static const char *const entry[] = {"_start", "__libc_start_main", "__libc_start_call_main",
                                        "__libc_start_main_impl"};
    if (f->kind == FRAME_PYTHON || !f->name)
        return false;
    for (size_t i = 0; i < sizeof entry / sizeof entry[0]; i++)
        if (strcmp(f->name, entry[i]) == 0)
            return true;
    return false;
}

uint32_t export_stack_len(const struct profile *p, const struct prof_stack *st)
{
    uint32_t n = st->nframes;
    while (n > 1 && is_process_entry(&p->frames[st->frames[n - 1]]))
        n--;
    return n;
}
