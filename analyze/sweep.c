/*
 * analyze/sweep.c — pure helpers of `opprof sweep` and `opprof diff`: op
 * names and shapes, flop/byte counts per call, {name} substitution in argv
 * elements, the sweep row model, and the per-operator diff of two profiles.
 * No I/O: the unit tests (tests/unit/test_sweep.c) exercise all of it.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"

static const char *const op_names[] = {"", "bmm", "mm", "addmm", "softmax", "layer_norm", "linear", "conv2d", "baddbmm"};

enum sweep_op sweep_op_parse(const char *name)
{
    static const char *const prefixes[] = {"torch.nn.functional.", "torch.", "F.", "aten::"};
    if (!name)
        return SWEEP_OP_UNKNOWN;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        size_t n = strlen(prefixes[i]);
        if (strncmp(name, prefixes[i], n) == 0) {
            name += n;
            break;
        }
    }
    for (int i = 1; i < (int)(sizeof op_names / sizeof op_names[0]); i++)
        if (strcmp(name, op_names[i]) == 0)
            return (enum sweep_op)i;
    return SWEEP_OP_UNKNOWN;
}

const char *sweep_op_name(enum sweep_op op)
{
    return op > SWEEP_OP_UNKNOWN && op <= SWEEP_OP_BADDBMM ? op_names[op] : "unknown";
}

int sweep_parse_shape(enum sweep_op op, const char *text, long *dims, int *ndims, char *err, size_t errlen)
{
    int n = 0;
    const char *s = text ? text : "";
    if (!*s) {
        snprintf(err, errlen, "empty shape");
        return -1;
    }
    for (;;) {
        if (!isdigit((unsigned char)*s)) {
            snprintf(err, errlen, "malformed shape '%s': expected positive integers separated by 'x'", text);
            return -1;
        }
        errno = 0;
        char *end;
        long v = strtol(s, &end, 10);
        if (errno || v <= 0 || n == SWEEP_MAX_DIMS) {
            snprintf(err, errlen, "malformed shape '%s': %s", text,
                     n == SWEEP_MAX_DIMS ? "too many dimensions" : "dimensions must be positive");
            return -1;
        }
        dims[n++] = v;
        s = end;
        if (!*s)
            break;
        if (*s != 'x') {
            snprintf(err, errlen, "malformed shape '%s': expected positive integers separated by 'x'", text);
            return -1;
        }
        s++;
    }
    int want = (op == SWEEP_OP_BMM || op == SWEEP_OP_BADDBMM) ? 4 : op == SWEEP_OP_CONV2D ? 7
             : (op == SWEEP_OP_MM || op == SWEEP_OP_ADDMM || op == SWEEP_OP_LINEAR) ? 3 : 0;
    if (want && n != want) {
        snprintf(err, errlen, "malformed shape '%s' for %s: expected %s", text, sweep_op_name(op),
                 want == 4 ? "BxMxKxN" : want == 7 ? "NxCxHxWxKxRxS" : "MxKxN");
        return -1;
    }
    if (op == SWEEP_OP_CONV2D && (dims[5] > dims[2] || dims[6] > dims[3])) {
        snprintf(err, errlen, "malformed shape '%s' for conv2d: the kernel RxS is larger than the image HxW", text);
        return -1;
    }
    *ndims = n;
    return 0;
}

size_t sweep_dtype_size(const char *dtype)
{
    if (!dtype)
        return 0;
    if (!strcmp(dtype, "float32") || !strcmp(dtype, "float") || !strcmp(dtype, "int32"))
        return 4;
    if (!strcmp(dtype, "float64") || !strcmp(dtype, "double") || !strcmp(dtype, "int64"))
        return 8;
    if (!strcmp(dtype, "bfloat16") || !strcmp(dtype, "float16") || !strcmp(dtype, "half"))
        return 2;
    return 0;
}

int sweep_op_counts(enum sweep_op op, const long *dims, int ndims, size_t elem_size, double *flops,
                    double *bytes)
{
    double e = (double)elem_size;
    switch (op) {
    case SWEEP_OP_BMM:
    case SWEEP_OP_BADDBMM:
    case SWEEP_OP_MM:
    case SWEEP_OP_ADDMM:
    case SWEEP_OP_LINEAR: {
        bool batched = op == SWEEP_OP_BMM || op == SWEEP_OP_BADDBMM;
        if (ndims != (batched ? 4 : 3))
            return -1;
        double b = batched ? (double)dims[0] : 1.0;
        const long *d = batched ? dims + 1 : dims;
        double m = (double)d[0], k = (double)d[1], n = (double)d[2];
        *flops = 2.0 * b * m * k * n;
        *bytes = e * (b * m * k + b * k * n + b * m * n);
        if (op == SWEEP_OP_ADDMM || op == SWEEP_OP_BADDBMM) {
            *flops += b * m * n;      /* the addition */
            *bytes += e * b * m * n;  /* reading the added matrix */
        } else if (op == SWEEP_OP_LINEAR) {
            *flops += m * n;      /* the bias, added to every row */
            *bytes += e * n;      /* reading the bias vector */
        }
        return 0;
    }
    case SWEEP_OP_CONV2D:
        /* input[N,C,H,W] * weight[K,C,R,S], stride 1, no padding: output
         * [N,K,H-R+1,W-S+1]. */
        if (ndims != 7 || dims[5] > dims[2] || dims[6] > dims[3])
            return -1;
        return sweep_conv2d_counts(dims, dims + 4, dims[2] - dims[5] + 1, dims[3] - dims[6] + 1, 1, elem_size,
                                   flops, bytes);
    case SWEEP_OP_SOFTMAX:
    case SWEEP_OP_LAYER_NORM: {
        if (ndims < 1)
            return -1;
        double numel = 1;
        for (int i = 0; i < ndims; i++)
            numel *= (double)dims[i];
        /* softmax: max, subtract, exp, sum, divide; layer_norm: mean,
         * variance (subtract, square, add), normalize (subtract, multiply),
         * weight and bias (multiply, add). Both read and write the tensor
         * once; layer_norm also reads its weight and bias of the last dim. */
        *flops = (op == SWEEP_OP_SOFTMAX ? 5.0 : 8.0) * numel;
        *bytes = 2.0 * e * numel;
        if (op == SWEEP_OP_LAYER_NORM)
            *bytes += 2.0 * e * (double)dims[ndims - 1];
        return 0;
    }
    default:
        return -1;
    }
}

int sweep_conv2d_counts(const long *nchw, const long *krs, long ho, long wo, long groups, size_t elem_size,
                        double *flops, double *bytes)
{
    for (int i = 0; i < 4; i++)
        if (nchw[i] <= 0 || (i < 3 && krs[i] <= 0))
            return -1;
    if (ho <= 0 || wo <= 0 || groups <= 0 || nchw[1] % groups != 0)
        return -1;
    double e = (double)elem_size;
    double n = (double)nchw[0], c = (double)nchw[1], h = (double)nchw[2], w = (double)nchw[3];
    double k = (double)krs[0], r = (double)krs[1], s = (double)krs[2];
    double cg = c / (double)groups; /* input channels each output channel sees */
    /* each output element is a (C/groups)*R*S multiply-add; the tensors are
     * read (input, weight) and written (output) once */
    *flops = 2.0 * n * k * (double)ho * (double)wo * cg * r * s;
    *bytes = e * (n * c * h * w + k * cg * r * s + n * k * (double)ho * (double)wo);
    return 0;
}

char *sweep_substitute(const char *arg, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value), al = strlen(arg);
    size_t count = 0;
    for (const char *s = arg; (s = strchr(s, '{')); s++)
        if (strncmp(s + 1, name, nl) == 0 && s[1 + nl] == '}')
            count++;
    char *out = malloc(al + count * vl + 1);
    if (!out)
        return NULL;
    char *o = out;
    for (const char *s = arg; *s;) {
        if (*s == '{' && strncmp(s + 1, name, nl) == 0 && s[1 + nl] == '}') {
            memcpy(o, value, vl);
            o += vl;
            s += nl + 2;
        } else {
            *o++ = *s++;
        }
    }
    *o = '\0';
    return out;
}

int sweep_split_list(const char *text, char ***items, size_t *n)
{
    *items = NULL;
    *n = 0;
    const char *s = text;
    while (s && *s) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (len) {
            char **grown = realloc(*items, (*n + 1) * sizeof **items);
            if (!grown)
                goto oom;
            *items = grown;
            if (!((*items)[*n] = strndup(s, len)))
                goto oom;
            (*n)++;
        }
        s = comma ? comma + 1 : NULL;
    }
    return 0;
oom:
    sweep_free_list(*items, *n);
    *items = NULL;
    *n = 0;
    return -1;
}

void sweep_free_list(char **items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(items[i]);
    free(items);
}

void sweep_sanitize_label(const char *in, char *out, size_t outlen)
{
    size_t o = 0;
    for (; *in && o + 1 < outlen; in++)
        out[o++] = (isalnum((unsigned char)*in) || strchr("._=+-", *in)) ? *in : '_';
    if (outlen)
        out[o] = '\0';
}

bool sweep_json_number(const char *json, const char *key, double *out)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *s = strstr(json, pat);
    if (!s)
        return false;
    s += strlen(pat);
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s++ != ':')
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno)
        return false;
    *out = v;
    return true;
}

void sweep_row_derive(struct sweep_row *r, double flops, double bytes)
{
    r->spread = NAN;
    r->gflops = r->gbps = NAN;
    if (!(r->median_s > 0))
        return;
    /* The interquartile range when the runner gave quartiles: one call hit
     * by a page fault or a preemption must not make a steady op look noisy.
     * A plain command has one time: no spread. */
    if (r->p75_s >= r->p25_s && r->p25_s > 0)
        r->spread = (r->p75_s - r->p25_s) / r->median_s;
    else if (!isnan(r->min_s) && !isnan(r->max_s) && r->max_s > r->min_s)
        r->spread = (r->max_s - r->min_s) / r->median_s;
    if (flops >= 0) {
        r->gflops = flops / r->median_s / 1e9;
        r->gbps = bytes / r->median_s / 1e9;
    }
}

/* --- diff ------------------------------------------------------------------ */

size_t profile_keep_samples_under(struct profile *p, const char *python_function)
{
    size_t kept = 0, kept_samples = 0;
    uint64_t weight = 0;
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct prof_sample *s = &p->samples[i];
        bool under = false;
        if (s->stack < p->nstacks) {
            const struct prof_stack *st = &p->stacks[s->stack];
            for (uint32_t f = 0; f < st->nframes && !under; f++) {
                const struct prof_frame *fr = &p->frames[st->frames[f]];
                under = fr->kind == FRAME_PYTHON && strcmp(fr->name, python_function) == 0;
            }
        }
        if (under) {
            p->samples[kept++] = *s;
            weight += s->weight;
            kept_samples += s->count;
        }
    }
    if (kept == 0)
        return 0; /* nothing under it: the profile is left as it was */
    p->nsamples = kept;
    p->sample_count = kept_samples;
    p->total_weight = weight;
    return kept_samples;
}

static long find_row(const struct diff_table *t, const char *name)
{
    for (size_t i = 0; i < t->nrows; i++)
        if (strcmp(t->rows[i].name, name) == 0)
            return (long)i;
    return -1;
}

static int add_side(struct diff_table *t, const struct hotspot_table *h, bool b)
{
    for (size_t i = 0; i < h->nrows; i++) {
        const struct hotspot_row *hr = &h->rows[i];
        if (hr->self == 0)
            continue;
        long r = find_row(t, hr->name);
        if (r < 0) {
            struct diff_row *grown = realloc(t->rows, (t->nrows + 1) * sizeof *grown);
            if (!grown)
                return -1;
            t->rows = grown;
            memset(&t->rows[t->nrows], 0, sizeof t->rows[0]);
            if (!(t->rows[t->nrows].name = strdup(hr->name)))
                return -1;
            r = (long)t->nrows++;
        }
        double s = (double)hr->self * (double)h->period_ns / 1e9;
        double share = h->total_weight ? (double)hr->self / (double)h->total_weight : 0;
        if (b) {
            t->rows[r].b_s += s;
            t->rows[r].b_share += share;
        } else {
            t->rows[r].a_s += s;
            t->rows[r].a_share += share;
        }
    }
    return 0;
}

int diff_compute(const struct hotspot_table *a, const struct hotspot_table *b, struct diff_table *out)
{
    memset(out, 0, sizeof *out);
    if (add_side(out, a, false) != 0 || add_side(out, b, true) != 0) {
        diff_free(out);
        return -1;
    }
    /* The coarser period: a figure is no finer than either side's. */
    out->period_ns = a->period_ns > b->period_ns ? a->period_ns : b->period_ns;
    return 0;
}

static int diff_cmp(const void *x, const void *y)
{
    const struct diff_row *a = x, *b = y;
    double da = fabs(a->b_share - a->a_share), db = fabs(b->b_share - b->a_share);
    if (da != db)
        return da < db ? 1 : -1;
    double ta = fabs(a->b_s - a->a_s), tb = fabs(b->b_s - b->a_s);
    if (ta != tb)
        return ta < tb ? 1 : -1;
    return strcmp(a->name, b->name);
}

void diff_sort(struct diff_table *t)
{
    if (t->nrows > 1)
        qsort(t->rows, t->nrows, sizeof t->rows[0], diff_cmp);
}

void diff_free(struct diff_table *t)
{
    for (size_t i = 0; i < t->nrows; i++)
        free(t->rows[i].name);
    free(t->rows);
    t->rows = NULL;
    t->nrows = 0;
}
