/*
 * analyze/torch_shapes.c — FLOPs per operator from `opprof record
 * --torch-shapes`.
 *
 * The hook inside the workload (sampler/record/torch_shapes/) counts, per ATen
 * operator, its calls and each distinct input signature ("float32[64,32];
 * float32[32,16]"), and writes them to torch_shapes.<pid>.tsv. This file
 *   - reads those files defensively (they come from the workload, so they are
 *     untrusted: a malformed line is skipped and counted, never trusted);
 *   - turns each signature into FLOPs and bytes per call with the sweep's own
 *     formulas (sweep_op_counts, sweep_conv2d_counts in analyze/sweep.c), so a
 *     call of one shape counts the same here and in `opprof sweep`;
 *   - charges the samples: to the hook itself when the stack passes through
 *     the hook's Python file and no operator frame lies leafward of the
 *     innermost Python frame (the hook's code, or the Python dispatch it
 *     causes), else to the operators on the stack as any profile does (self:
 *     innermost; total: anywhere).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "analyze/hotspots_internal.h"
#include "util/util.h"

#define MAX_ARGS 12
#define MAX_FILE_BYTES (64u << 20) /* a hook file is a few KB: more is not one */

/* ------------------------------------------------------------------------- */
/* The hook's argument text                                                    */
/* ------------------------------------------------------------------------- */

enum arg_kind { ARG_OTHER = 0, ARG_TENSOR, ARG_INTS, ARG_INT, ARG_NONE };

struct arg {
    enum arg_kind kind;
    char dtype[16];
    long dims[SWEEP_MAX_DIMS]; /* tensor dims, or the int list */
    int ndims;
    long value;                /* ARG_INT */
};

/* "12,3" up to end into dims; true when every item is a non-negative integer. */
static bool parse_int_list(const char *s, const char *end, long *dims, int *n)
{
    *n = 0;
    if (s == end)
        return true;
    for (;;) {
        if (*n == SWEEP_MAX_DIMS || s == end || *s < '0' || *s > '9')
            return false;
        long v = 0;
        while (s < end && *s >= '0' && *s <= '9') {
            if (v > 100000000000L)
                return false; /* no real dimension is that large */
            v = v * 10 + (*s++ - '0');
        }
        dims[(*n)++] = v;
        if (s == end)
            return true;
        if (*s++ != ',')
            return false;
    }
}

/* One argument s[0..len): "float32[4,8]", "[1,1]", "3", "None", else other. */
static void parse_arg(const char *s, size_t len, struct arg *a)
{
    memset(a, 0, sizeof *a);
    const char *end = s + len;
    if (len == 4 && memcmp(s, "None", 4) == 0) {
        a->kind = ARG_NONE;
        return;
    }
    if ((len == 5 && memcmp(s, "False", 5) == 0) || (len == 4 && memcmp(s, "True", 4) == 0)) {
        a->kind = ARG_INT; /* a bool argument (convolution's transposed) */
        a->value = len == 4;
        return;
    }
    const char *br = memchr(s, '[', len);
    if (br && len >= 2 && end[-1] == ']') {
        size_t dl = (size_t)(br - s);
        if (dl >= sizeof a->dtype)
            return;
        for (size_t i = 0; i < dl; i++)
            if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
                return;
        if (!parse_int_list(br + 1, end - 1, a->dims, &a->ndims))
            return;
        memcpy(a->dtype, s, dl);
        a->kind = dl ? ARG_TENSOR : ARG_INTS;
        return;
    }
    const char *p = s;
    bool neg = p < end && *p == '-';
    p += neg;
    if (p == end || end - p > 15)
        return;
    long v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return;
        v = v * 10 + (*p - '0');
    }
    a->value = neg ? -v : v;
    a->kind = ARG_INT;
}

static int parse_args(const char *text, struct arg *args)
{
    int n = 0;
    const char *s = text;
    while (n < MAX_ARGS) {
        const char *semi = strchr(s, ';');
        size_t len = semi ? (size_t)(semi - s) : strlen(s);
        parse_arg(s, len, &args[n++]);
        if (!semi)
            break;
        s = semi + 1;
    }
    return n;
}

static bool is_tensor(const struct arg *args, int n, int i, int ndims)
{
    return i < n && args[i].kind == ARG_TENSOR && (ndims < 0 || args[i].ndims == ndims);
}

/* A pair from an int list of 1 or 2 items (conv's stride, padding, dilation). */
static bool pair(const struct arg *a, long *x, long *y)
{
    if (a->kind != ARG_INTS || a->ndims < 1 || a->ndims > 2)
        return false;
    *x = a->dims[0];
    *y = a->dims[a->ndims - 1];
    return true;
}

/* conv2d/convolution: input[N,C,H,W], weight[K,C/g,R,S], stride, padding,
 * dilation; groups at position gpos; transposed (convolution) at tpos. */
static int conv_counts(const struct arg *a, int n, int tpos, int gpos, size_t es, double *flops, double *bytes)
{
    if (!is_tensor(a, n, 0, 4) || !is_tensor(a, n, 1, 4))
        return -1;
    long sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
    if ((n > 3 && !pair(&a[3], &sh, &sw)) || (n > 4 && !pair(&a[4], &ph, &pw)) ||
        (n > 5 && !pair(&a[5], &dh, &dw)))
        return -1;
    if (tpos >= 0 && (tpos >= n || a[tpos].kind != ARG_INT || a[tpos].value != 0))
        return -1; /* transposed convolutions: no formula */
    if (gpos < n) {
        if (a[gpos].kind != ARG_INT)
            return -1;
        groups = a[gpos].value;
    }
    const long *in = a[0].dims, *wt = a[1].dims;
    if (sh <= 0 || sw <= 0 || groups <= 0 || wt[1] * groups != in[1])
        return -1;
    long ho = (in[2] + 2 * ph - dh * (wt[2] - 1) - 1) / sh + 1;
    long wo = (in[3] + 2 * pw - dw * (wt[3] - 1) - 1) / sw + 1;
    long krs[3] = {wt[0], wt[2], wt[3]};
    return sweep_conv2d_counts(in, krs, ho, wo, groups, es, flops, bytes);
}

int torch_shapes_counts(const char *op, const char *args_text, double *flops, double *bytes)
{
    if (!op || !args_text || strncmp(op, "aten::", 6) != 0)
        return -1;
    const char *name = op + 6;
    struct arg a[MAX_ARGS];
    int n = parse_args(args_text, a);
    if (n < 1 || a[0].kind != ARG_TENSOR)
        return -1;
    size_t es = sweep_dtype_size(a[0].dtype);
    if (!es)
        return -1;
    long d[SWEEP_MAX_DIMS];
    if (!strcmp(name, "mm")) {
        if (!is_tensor(a, n, 1, 2) || a[0].ndims != 2 || a[0].dims[1] != a[1].dims[0])
            return -1;
        d[0] = a[0].dims[0], d[1] = a[0].dims[1], d[2] = a[1].dims[1];
        return sweep_op_counts(SWEEP_OP_MM, d, 3, es, flops, bytes);
    }
    if (!strcmp(name, "bmm") || !strcmp(name, "baddbmm")) {
        bool add = name[0] == 'b' && name[1] == 'a';
        const struct arg *x = &a[add], *y = &a[add + 1];
        if (!is_tensor(a, n, add, 3) || !is_tensor(a, n, add + 1, 3) || x->dims[0] != y->dims[0] ||
            x->dims[2] != y->dims[1])
            return -1;
        d[0] = x->dims[0], d[1] = x->dims[1], d[2] = x->dims[2], d[3] = y->dims[2];
        return sweep_op_counts(add ? SWEEP_OP_BADDBMM : SWEEP_OP_BMM, d, 4, es, flops, bytes);
    }
    if (!strcmp(name, "addmm")) {
        if (!is_tensor(a, n, 1, 2) || !is_tensor(a, n, 2, 2) || a[1].dims[1] != a[2].dims[0])
            return -1;
        d[0] = a[1].dims[0], d[1] = a[1].dims[1], d[2] = a[2].dims[1];
        /* addmm(bias[N], x, w.t()) is how F.linear reaches the dispatcher: the
         * linear formula (same FLOPs, the bias vector read instead of a matrix) */
        bool bias = a[0].ndims == 1 && a[0].dims[0] == d[2];
        return sweep_op_counts(bias ? SWEEP_OP_LINEAR : SWEEP_OP_ADDMM, d, 3, es, flops, bytes);
    }
    if (!strcmp(name, "linear")) {
        if (!is_tensor(a, n, 1, 2) || a[0].ndims < 1 || a[0].dims[a[0].ndims - 1] != a[1].dims[1])
            return -1;
        double m = 1;
        for (int i = 0; i + 1 < a[0].ndims; i++)
            m *= (double)a[0].dims[i];
        if (m > 1e15)
            return -1;
        d[0] = (long)m, d[1] = a[1].dims[1], d[2] = a[1].dims[0];
        bool bias = is_tensor(a, n, 2, 1);
        return sweep_op_counts(bias ? SWEEP_OP_LINEAR : SWEEP_OP_MM, d, 3, es, flops, bytes);
    }
    if (!strcmp(name, "softmax") || !strcmp(name, "_softmax") || !strcmp(name, "layer_norm") ||
        !strcmp(name, "native_layer_norm")) {
        if (a[0].ndims < 1)
            return -1;
        enum sweep_op op_kind = strstr(name, "softmax") ? SWEEP_OP_SOFTMAX : SWEEP_OP_LAYER_NORM;
        return sweep_op_counts(op_kind, a[0].dims, a[0].ndims, es, flops, bytes);
    }
    if (!strcmp(name, "convolution") || !strcmp(name, "_convolution"))
        return conv_counts(a, n, 6, 8, es, flops, bytes);
    if (!strcmp(name, "conv2d"))
        return conv_counts(a, n, -1, 6, es, flops, bytes);
    return -1;
}

/* ------------------------------------------------------------------------- */
/* Reading the files                                                           */
/* ------------------------------------------------------------------------- */

/* Operators by name and signatures by argument text are found through hash
 * maps (byte keys: the strings the entries own): a hostile file of millions of
 * distinct names must not make the reader quadratic. */
static struct torch_shapes_op *find_op(struct torch_shapes *ts, const char *name, bool add)
{
    struct hashmap *m = ts->op_index;
    if (!m) {
        if (!add || !(m = calloc(1, sizeof *m)))
            return NULL;
        hashmap_init(m, NULL, NULL);
        ts->op_index = m;
    }
    uint64_t i;
    if (hashmap_find(m, name, strlen(name), &i))
        return &ts->ops[i];
    if (!add)
        return NULL;
    struct torch_shapes_op *g = realloc(ts->ops, (ts->nops + 1) * sizeof *g);
    if (!g)
        return NULL;
    ts->ops = g;
    struct torch_shapes_op *o = &ts->ops[ts->nops];
    memset(o, 0, sizeof *o);
    o->name = strdup(name);
    if (!o->name || hashmap_put(m, o->name, strlen(o->name), ts->nops) != 0) {
        free(o->name);
        return NULL;
    }
    ts->nops++;
    return o;
}

static void free_sig_index(struct torch_shapes_op *o)
{
    if (o->sig_index) {
        hashmap_free(o->sig_index);
        free(o->sig_index);
        o->sig_index = NULL;
    }
}

static int add_sig(struct torch_shapes_op *o, const char *args, uint64_t calls)
{
    struct hashmap *m = o->sig_index;
    if (!m) { /* (re)built after torch_shapes_compute reordered the signatures */
        if (!(m = calloc(1, sizeof *m)))
            return -1;
        hashmap_init(m, NULL, NULL);
        o->sig_index = m;
        for (size_t i = 0; i < o->nsigs; i++)
            if (hashmap_put(m, o->sigs[i].args, strlen(o->sigs[i].args), i) != 0)
                return -1;
    }
    uint64_t i;
    size_t len = strlen(args);
    if (hashmap_find(m, args, len, &i)) {
        o->sigs[i].calls += calls;
        return 0;
    }
    struct torch_shapes_sig *g = realloc(o->sigs, (o->nsigs + 1) * sizeof *g);
    if (!g)
        return -1;
    o->sigs = g;
    char *copy = strdup(args);
    if (!copy || hashmap_put(m, copy, len, o->nsigs) != 0) {
        free(copy);
        return -1;
    }
    o->sigs[o->nsigs++] = (struct torch_shapes_sig){copy, calls, -1, 0};
    return 0;
}

/* A decimal count field, whole. */
static bool parse_count(const char *s, uint64_t *out)
{
    if (!*s || *s < '0' || *s > '9' || strlen(s) > 19)
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* An operator name as the hook writes it: "ns::name", printable, no spaces. */
static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 255 || !strstr(s, "::"))
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
            return false;
    return true;
}

/* Splits line at tabs into at most max fields (the last keeps the rest). */
static int split_tabs(char *line, char **f, int max)
{
    int n = 0;
    f[n++] = line;
    for (char *s = line; *s && n < max; s++)
        if (*s == '\t') {
            *s = '\0';
            f[n++] = s + 1;
        }
    return n;
}

/* One line after the header; -1 on out of memory, 1 when malformed. */
static int parse_line(struct torch_shapes *ts, char *line)
{
    char *f[4];
    int n = split_tabs(line, f, 4);
    uint64_t a, b;
    if (!strcmp(f[0], "torch") && n >= 2) {
        snprintf(ts->torch_version, sizeof ts->torch_version, "%s", f[1]);
        if (n >= 3 && strcmp(f[2], "-") != 0) /* "-": no interception API */
            snprintf(ts->api, sizeof ts->api, "%s", f[2]);
        return 0;
    }
    if (!strcmp(f[0], "python"))
        return 0;
    if (!strcmp(f[0], "cost") && n == 3 && parse_count(f[1], &a) && parse_count(f[2], &b)) {
        ts->hook_ns += a;
        ts->hook_calls += b;
        return 0;
    }
    if (!strcmp(f[0], "unsupported") && n >= 2) {
        snprintf(ts->unsupported, sizeof ts->unsupported, "%s", f[1]);
        return 0;
    }
    if (!strcmp(f[0], "op") && n == 4 && valid_name(f[1]) && parse_count(f[2], &a) && parse_count(f[3], &b) &&
        b <= a) {
        struct torch_shapes_op *o = find_op(ts, f[1], true);
        if (!o)
            return -1;
        o->calls += a;
        o->unrecorded += b;
        return 0;
    }
    if (!strcmp(f[0], "sig") && n == 4 && valid_name(f[1]) && parse_count(f[2], &a)) {
        struct torch_shapes_op *o = find_op(ts, f[1], true);
        if (!o || add_sig(o, f[3], a) != 0)
            return -1;
        return 0;
    }
    return 1;
}

int torch_shapes_parse(struct torch_shapes *ts, const char *text, size_t len, char *err, size_t errlen)
{
    size_t hl = strlen(TORCH_SHAPES_HEADER);
    if (len < hl || memcmp(text, TORCH_SHAPES_HEADER, hl) != 0 || (len > hl && text[hl] != '\n')) {
        snprintf(err, errlen, "not an opprof --torch-shapes file (its first line is not \"%s\")",
                 TORCH_SHAPES_HEADER);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    for (size_t pos = hl + 1; pos < len;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - (text + pos)) : len - pos;
        if (ll + 1 > cap) {
            char *g = realloc(line, ll + 1);
            if (!g)
                goto oom;
            line = g;
            cap = ll + 1;
        }
        memcpy(line, text + pos, ll);
        line[ll] = '\0';
        pos += ll + 1;
        if (ll == 0)
            continue;
        /* a NUL inside the line, or no newline at the end (a file cut while
         * written): not trusted */
        int rc = strlen(line) != ll || !nl ? 1 : parse_line(ts, line);
        if (rc < 0)
            goto oom;
        ts->bad_lines += rc;
    }
    free(line);
    return 0;
oom:
    free(line);
    snprintf(err, errlen, "out of memory");
    errno = ENOMEM;
    return -1;
}

static int read_whole(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_FILE_BYTES) {
        snprintf(err, errlen, "cannot read %s: %s", path,
                 fd < 0 ? strerror(errno) : "not a regular file of at most 64 MB");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf) {
        snprintf(err, errlen, "out of memory");
        errno = ENOMEM;
        return -1;
    }
    *out = buf;
    *len = got;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int torch_shapes_load(const char *dir, struct torch_shapes *ts, char *err, size_t errlen)
{
    memset(ts, 0, sizeof *ts);
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "cannot open %s: %s", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "torch_shapes.", 13) != 0 || l < 17 || strcmp(e->d_name + l - 4, ".tsv") != 0)
            continue;
        char **g = realloc(names, (n + 1) * sizeof *g);
        char *copy = g ? strdup(e->d_name) : NULL;
        if (!copy) {
            if (g)
                names = g;
            snprintf(err, errlen, "out of memory");
            errno = ENOMEM;
            rc = -1;
            break;
        }
        names = g;
        names[n++] = copy;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, by_name); /* the same merge order every time */
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[4096], inner[512];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        char *text;
        size_t len;
        if (read_whole(path, &text, &len, err, errlen) != 0) {
            rc = -1;
            break;
        }
        if (torch_shapes_parse(ts, text, len, inner, sizeof inner) != 0) {
            snprintf(err, errlen, "%s: %s", path, inner);
            rc = -1;
        }
        free(text);
        ts->files++;
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (rc == 0)
        torch_shapes_compute(ts);
    else
        torch_shapes_free(ts);
    return rc;
}

static int sig_by_calls(const void *a, const void *b)
{
    const struct torch_shapes_sig *x = a, *y = b;
    if (x->calls != y->calls)
        return x->calls < y->calls ? 1 : -1;
    return strcmp(x->args, y->args);
}

void torch_shapes_compute(struct torch_shapes *ts)
{
    for (size_t i = 0; i < ts->nops; i++) {
        struct torch_shapes_op *o = &ts->ops[i];
        o->flops = o->bytes = 0;
        o->flops_calls = 0;
        uint64_t sig_calls = 0;
        for (size_t s = 0; s < o->nsigs; s++) {
            struct torch_shapes_sig *g = &o->sigs[s];
            sig_calls = sig_calls + g->calls < sig_calls ? UINT64_MAX : sig_calls + g->calls;
            if (torch_shapes_counts(o->name, g->args, &g->flops, &g->bytes) != 0) {
                g->flops = -1;
                g->bytes = 0;
                continue;
            }
            o->flops += g->flops * (double)g->calls;
            o->bytes += g->bytes * (double)g->calls;
            o->flops_calls += g->calls;
        }
        if (sig_calls > o->calls) { /* a file that contradicts itself: never fewer calls than FLOPs stand for */
            o->calls = sig_calls;
            ts->inconsistent_ops++;
        }
        free_sig_index(o); /* its indices are stale once sorted */
        if (o->nsigs)
            qsort(o->sigs, o->nsigs, sizeof *o->sigs, sig_by_calls);
    }
}

void torch_shapes_free(struct torch_shapes *ts)
{
    if (!ts)
        return;
    for (size_t i = 0; i < ts->nops; i++) {
        for (size_t s = 0; s < ts->ops[i].nsigs; s++)
            free(ts->ops[i].sigs[s].args);
        free(ts->ops[i].sigs);
        free(ts->ops[i].name);
        free_sig_index(&ts->ops[i]);
    }
    free(ts->ops);
    if (ts->op_index) {
        hashmap_free(ts->op_index);
        free(ts->op_index);
    }
    memset(ts, 0, sizeof *ts);
}

/* ------------------------------------------------------------------------- */
/* Samples: the operators' time and the hook's own                            */
/* ------------------------------------------------------------------------- */

static bool is_hook_frame(const struct prof_frame *f)
{
    if (f->kind != FRAME_PYTHON)
        return false;
    const char *file = f->source_file && f->source_file[0] ? f->source_file : f->module;
    const char *slash = strrchr(file, '/');
    return strcmp(slash ? slash + 1 : file, TORCH_SHAPES_HOOK_FILE) == 0;
}

/* Where torch's C++ dispatcher calls into Python's __torch_dispatch__. */
static bool is_python_dispatch_entry(const struct prof_frame *f)
{
    static const char entry[] = "torch::handle_torch_function_no_python_arg_parser";
    return f->kind != FRAME_PYTHON && strncmp(f->name, entry, sizeof entry - 1) == 0;
}

bool torch_shapes_profile_has_hook(const struct profile *p)
{
    for (size_t f = 0; f < p->nframes; f++)
        if (is_hook_frame(&p->frames[f]))
            return true;
    return false;
}

bool torch_shapes_stack_is_hook(const struct profile *p, const struct prof_stack *st)
{
    long entry = -1, leaf_python = -1;
    bool hook = false;
    for (uint32_t i = 0; i < st->nframes && !hook; i++) {
        uint32_t f = st->frames[i];
        if (f >= p->nframes)
            continue;
        const struct prof_frame *fr = &p->frames[f];
        if (fr->kind == FRAME_PYTHON && leaf_python < 0)
            leaf_python = (long)i;
        if (entry < 0 && is_python_dispatch_entry(fr))
            entry = (long)i;
        hook = is_hook_frame(fr);
    }
    if (!hook && entry < 0)
        return false;
    /* The hook forwards the call through torch/_ops.py's OpOverload.__call__
     * into the kernel (boxed: no at::_ops frame, but the kernel's at::native
     * frames or the at::_ops frames of the operators it calls). Leafward of
     * the innermost Python frame (or of the dispatcher's entry into Python,
     * for samples taken before it), an operator frame means the operator's
     * own work; none means the hook or the Python dispatch it causes
     * (torch's mode stack in _python_dispatch.py, argument boxing, OpOverload
     * lookup, the hook's Python code). */
    long limit = leaf_python >= 0 && (entry < 0 || leaf_python < entry) ? leaf_python : entry;
    char buf[512];
    for (long i = 0; i < limit; i++) {
        uint32_t f = st->frames[i];
        if (f < p->nframes && op_frame_classify(p->frames[f].name, buf, sizeof buf) != OP_FRAME_NONE)
            return false;
    }
    return true;
}

int torch_shapes_attach_samples(const struct profile *p, struct torch_shapes *ts)
{
    struct op_index ix;
    uint64_t *sw = NULL, *sc = NULL, *ww = NULL, *wc = NULL;
    if (op_index_build(p, &ix) != 0)
        return -1;
    /* op id -> 1 + index into ts->ops; gen: the last stack that counted an op */
    uint32_t *to_ts = calloc(ix.nnames + 1, sizeof *to_ts);
    uint32_t *gen = calloc(ts->nops + 1, sizeof *gen);
    if (!to_ts || !gen || hs_fold_by_stack(p, &sw, &sc) != 0 || hs_fold_runtime_wait(p, &ww, &wc) != 0) {
        free(to_ts);
        free(gen);
        free(sw);
        free(sc);
        op_index_free(&ix);
        return -1;
    }
    for (size_t i = 0; i < ix.nnames; i++) {
        struct torch_shapes_op *o = find_op(ts, ix.names[i], false);
        to_ts[i] = o ? (uint32_t)(o - ts->ops) + 1 : 0;
    }
    for (size_t i = 0; i < ts->nops; i++)
        ts->ops[i].self_weight = ts->ops[i].total_weight = 0;
    ts->hook_weight = 0;
    bool any_hook = torch_shapes_profile_has_hook(p);
    ts->all_weight = p->total_weight;
    for (size_t s = 0; s < p->nstacks; s++) {
        if (!sc[s])
            continue;
        const struct prof_stack *st = &p->stacks[s];
        if (any_hook && torch_shapes_stack_is_hook(p, st)) {
            ts->hook_weight += sw[s];
            continue;
        }
        long inner = op_stack_innermost(&ix, p, st);
        bool fallback = op_stack_fallback(&ix, p, st);
        for (uint32_t i = 0; i < st->nframes; i++) {
            uint32_t op = op_frame_at(&ix, p, st, i, fallback);
            uint32_t t = op ? to_ts[op - 1] : 0;
            if (!t || gen[t - 1] == s + 1)
                continue;
            gen[t - 1] = (uint32_t)s + 1;
            if ((long)i == inner) /* OpenMP runtime wait is no operator's self time (--group-by op) */
                ts->ops[t - 1].self_weight += sw[s] - ww[s];
            ts->ops[t - 1].total_weight += sw[s];
        }
    }
    free(to_ts);
    free(gen);
    free(sw);
    free(sc);
    free(ww);
    free(wc);
    op_index_free(&ix);
    return 0;
}
