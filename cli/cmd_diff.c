/*
 * cli/cmd_diff.c — `opprof diff A B`: compares two result directories, or two
 * rows of a sweep (SWEEPDIR:ROW, ROW an index or a label), per operator
 * (GROUP_OP when either profile has operator frames, else per function):
 * self time and share in A and B, the change in share (percentage points)
 * and in time, sorted by the absolute change in share.
 *
 * When both profiles come from the sweep runner (samples under its timed
 * function, SWEEP_TIMED_FUNCTION), only those samples are compared: the
 * question is how the operator changed, and interpreter start-up and
 * `import torch` would otherwise be most of both profiles. --all-samples
 * compares everything. The output says which samples were compared.
 * --flamegraph FILE also writes a differential flame graph: B's call tree,
 * each box coloured by the change of its share from A (export_flamediff.c).
 * Exit status: 0 ok, 2 usage or load error.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "cli/cli.h"
#include "report/report.h"

static void diff_usage(FILE *out)
{
    fputs("usage: opprof diff A B [--format text|csv|json] [--limit N] [--group-by op|function]\n"
          "                          [--all-samples] [--flamegraph FILE.svg]\n"
          "       opprof diff --sweep SWEEPDIR ROW ROW [options]\n"
          "\n"
          "Self time and share of every operator (or function, when neither profile has\n"
          "PyTorch operator frames) in A and B, sorted by the change in share. A and B\n"
          "are result directories or sweep rows, SWEEPDIR:ROW with ROW the row's index\n"
          "(0, 1, ...) or its label (\"bmm 8x64x13x64 float32\", or a part naming one row).\n"
          "Rows of `opprof sweep --op` are compared on the samples of their timed calls\n"
          "only (not start-up, imports or warm-up); --all-samples compares all samples.\n"
          "Text shows 20 rows by default (--limit 0: all).\n"
          "--flamegraph FILE.svg: also a differential flame graph, B's call tree with each\n"
          "box red where its share of the samples grew from A, blue where it shrank.\n",
          out);
}

enum { OPT_FORMAT = 256, OPT_LIMIT, OPT_GROUP_BY, OPT_SWEEP, OPT_ALL_SAMPLES, OPT_FLAMEGRAPH };
static const struct option diff_long_options[] = {
    {"sweep", required_argument, NULL, OPT_SWEEP},
    {"all-samples", no_argument, NULL, OPT_ALL_SAMPLES},
    {"flamegraph", required_argument, NULL, OPT_FLAMEGRAPH},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"group-by", required_argument, NULL, OPT_GROUP_BY},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Whether some sample of p is inside an operator. */
static int has_operators(const struct profile *p, bool *out)
{
    struct hotspot_table t;
    if (hotspots_compute(p, GROUP_OP, &t) != 0)
        return -1;
    *out = false;
    for (size_t i = 0; i < t.nrows; i++)
        if (t.rows[i].self && strcmp(t.rows[i].name, NO_OPERATOR_NAME) != 0)
            *out = true;
    hotspots_free(&t);
    return 0;
}

static bool is_directory(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A row directory's name is NNN-<sanitized label>[-retry] (cli/sweep_run.c):
 * its index, and the label part in label. false for other names. */
static bool row_dir_name(const char *name, long *index, char *label, size_t len)
{
    if (!isdigit((unsigned char)name[0]) || !isdigit((unsigned char)name[1]) || !isdigit((unsigned char)name[2]) ||
        name[3] != '-')
        return false;
    *index = strtol(name, NULL, 10);
    snprintf(label, len, "%s", name + 4);
    size_t l = strlen(label);
    if (l > 6 && strcmp(label + l - 6, "-retry") == 0)
        label[l - 6] = '\0';
    return true;
}

/* A row that failed still has a result directory (the command ran, or
 * record did), but its profile is not of the operator: say so. sweep.json
 * writes one row per line. */
static void warn_if_failed(const char *sweepdir, const char *rowname)
{
    char path[PATH_MAX], line[8192], key[NAME_MAX + 8];
    snprintf(path, sizeof path, "%s/sweep.json", sweepdir);
    snprintf(key, sizeof key, "/%s\"", rowname);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, key) || !strstr(line, "\"ok\":false"))
            continue;
        const char *r = strstr(line, "\"reason\":\"");
        int len = 0;
        if (r) {
            r += 10;
            while (r[len] && !(r[len] == '"' && (len == 0 || r[len - 1] != '\\')))
                len++;
        }
        fprintf(stderr, "opprof diff: warning: row %s failed in the sweep (%.*s): its profile is not the "
                        "operator's\n", rowname, len, r ? r : "no reason recorded");
        break;
    }
    fclose(f);
}

/* SWEEPDIR and ROW -> the row's result directory in out. A row that was
 * retried after a hang has two directories: the retry is the one its row
 * reports. 0, or -1 with one sentence in err. */
static int resolve_row(const char *sweepdir, const char *row, char *out, size_t outlen, char *err, size_t errlen)
{
    DIR *d = opendir(sweepdir);
    if (!d) {
        snprintf(err, errlen, "cannot open the sweep directory %s: %s", sweepdir, strerror(errno));
        return -1;
    }
    bool by_index = row[0] && strspn(row, "0123456789") == strlen(row);
    long want = by_index ? strtol(row, NULL, 10) : -1;
    char want_label[256];
    sweep_sanitize_label(row, want_label, sizeof want_label);
    char exact[NAME_MAX + 1] = "", partial[NAME_MAX + 1] = "", names[512] = "";
    int npartial = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long index;
        char label[256], path[PATH_MAX];
        if (!row_dir_name(e->d_name, &index, label, sizeof label))
            continue;
        snprintf(path, sizeof path, "%s/%s", sweepdir, e->d_name);
        if (!is_directory(path))
            continue; /* NNN-label.out / .err */
        size_t nl = strlen(names);
        if (nl + strlen(e->d_name) + 3 < sizeof names)
            snprintf(names + nl, sizeof names - nl, "%s%s", nl ? ", " : "", e->d_name);
        bool retry = strstr(e->d_name, "-retry") != NULL;
        if ((by_index && index == want) || (!by_index && strcmp(label, want_label) == 0)) {
            if (!exact[0] || retry)
                snprintf(exact, sizeof exact, "%s", e->d_name);
        } else if (!by_index && strstr(label, want_label)) {
            if (!partial[0] || strncmp(partial, e->d_name, 4) != 0)
                npartial++; /* the same row's retry is not a second match */
            if (!partial[0] || retry)
                snprintf(partial, sizeof partial, "%s", e->d_name);
        }
    }
    closedir(d);
    const char *pick = exact[0] ? exact : npartial == 1 ? partial : NULL;
    if (!pick) {
        if (npartial > 1)
            snprintf(err, errlen, "row '%s' of %s matches %d rows: give the index or the whole label (rows: %s)",
                     row, sweepdir, npartial, names);
        else
            snprintf(err, errlen, "no row '%s' in %s (rows: %s)", row, sweepdir, names[0] ? names : "none");
        return -1;
    }
    snprintf(out, outlen, "%s/%s", sweepdir, pick);
    warn_if_failed(sweepdir, pick);
    return 0;
}

/* A diff operand: a result directory as it is, else SWEEPDIR:ROW (split at
 * the last ':'), with sweepdir given by --sweep: ROW alone. */
static int resolve_operand(const char *arg, const char *sweepdir, char *out, size_t outlen, char *err,
                           size_t errlen)
{
    if (sweepdir)
        return resolve_row(sweepdir, arg, out, outlen, err, errlen);
    if (is_directory(arg)) {
        snprintf(out, outlen, "%s", arg);
        return 0;
    }
    const char *colon = strrchr(arg, ':');
    if (colon && colon > arg) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%.*s", (int)(colon - arg), arg);
        if (is_directory(dir))
            return resolve_row(dir, colon + 1, out, outlen, err, errlen);
    }
    snprintf(err, errlen, "%s is neither a result directory nor SWEEPDIR:ROW of a sweep directory", arg);
    return -1;
}

/* Counts the samples of p under the runner's timed function. */
static size_t timed_samples(const struct profile *p, uint64_t *weight)
{
    size_t n = 0;
    *weight = 0;
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct prof_sample *s = &p->samples[i];
        if (s->stack >= p->nstacks)
            continue;
        const struct prof_stack *st = &p->stacks[s->stack];
        for (uint32_t f = 0; f < st->nframes; f++) {
            const struct prof_frame *fr = &p->frames[st->frames[f]];
            if (fr->kind == FRAME_PYTHON && strcmp(fr->name, SWEEP_TIMED_FUNCTION) == 0) {
                n += s->count;
                *weight += s->weight;
                break;
            }
        }
    }
    return n;
}

/* B's flame graph coloured by the change from A. Returns 0 or 2 (a sentence
 * on stderr; no half-written file is left). */
static int write_diff_flamegraph(const char *path, const struct profile *a, const struct profile *b,
                                 const char *name_a, const char *name_b)
{
    FILE *out = fopen(path, "w");
    if (!out) {
        fprintf(stderr, "opprof diff: cannot write %s: %s\n", path, strerror(errno));
        return 2;
    }
    char title[2 * PATH_MAX + 700];
    snprintf(title, sizeof title, "Differential flame graph: %s against %s", name_b, name_a);
    struct export_options o = {.title = title, .diff_base = a, .diff_base_name = name_a};
    int rc = export_flamegraph(out, b, &o, false);
    errno = 0;
    bool failed = ferror(out) != 0;
    failed = fclose(out) != 0 || failed;
    if (rc != 0 || failed) {
        fprintf(stderr, "opprof diff: cannot write %s: %s\n", path,
                rc != 0 ? "out of memory" : errno ? strerror(errno) : "write error");
        unlink(path); /* never leave a half file a viewer would choke on */
        return 2;
    }
    fprintf(stderr, "opprof diff: differential flame graph -> %s\n", path);
    return 0;
}

/* record -c: shares of an event, no time; only like with like. False (a
 * sentence on stderr) when A and B were sampled on different things. */
static bool same_event(const struct profile *a, const struct profile *b)
{
    if (!a->sample_period && !b->sample_period)
        return true;
    const char *e0 = a->sample_period ? a->event : "task-clock";
    const char *e1 = b->sample_period ? b->event : "task-clock";
    if (strcmp(e0 ? e0 : "", e1 ? e1 : "")) {
        fprintf(stderr, "opprof diff: A was sampled on %s, B on %s: their shares are of different things; "
                        "record both with the same -e/-c (or both on the timer)\n", e0, e1);
        return false;
    }
    fprintf(stderr, "opprof diff: note: both were sampled on %s (record -c): compare the shares; the "
                    "seconds columns are 0 (samples are not time)\n", e0);
    return true;
}

int cmd_diff(int argc, char **argv)
{
    enum report_format format = FORMAT_TEXT;
    size_t limit = 20;
    bool limit_given = false;
    int group = -1; /* -1: automatic */
    const char *sweepdir = NULL;
    bool all_samples = false;
    const char *flamegraph = NULL;
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", diff_long_options, NULL)) != -1) {
        switch (c) {
        case OPT_FORMAT:
            if (report_format_parse(optarg, &format) != 0) {
                fprintf(stderr, "opprof diff: unknown --format value '%s'; accepted: text, csv, json\n", optarg);
                return 2;
            }
            break;
        case OPT_LIMIT: {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-') {
                fprintf(stderr, "opprof diff: bad --limit value '%s'\n", optarg);
                return 2;
            }
            limit = v;
            limit_given = true;
            break;
        }
        case OPT_GROUP_BY:
            if (strcmp(optarg, "op") == 0)
                group = GROUP_OP;
            else if (strcmp(optarg, "function") == 0)
                group = GROUP_FUNCTION;
            else {
                fprintf(stderr, "opprof diff: unknown --group-by value '%s'; accepted: op, function\n", optarg);
                return 2;
            }
            break;
        case OPT_SWEEP:
            sweepdir = optarg;
            break;
        case OPT_ALL_SAMPLES:
            all_samples = true;
            break;
        case OPT_FLAMEGRAPH:
            flamegraph = optarg;
            break;
        case 'h':
            diff_usage(stdout);
            return 0;
        case ':':
            fprintf(stderr, "opprof diff: option '%s' needs a value\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "opprof diff: unknown option '%s' (see opprof diff --help)\n", argv[optind - 1]);
            return 2;
        }
    }
    if (argc - optind != 2) {
        fputs("opprof diff: give two result directories or sweep rows: opprof diff A B, "
              "opprof diff SWEEPDIR:0 SWEEPDIR:1\n", stderr);
        return 2;
    }
    if (!limit_given && format != FORMAT_TEXT)
        limit = 0;
    char dirs[2][PATH_MAX], names[2][PATH_MAX + 300];
    struct profile *p[2] = {NULL, NULL};
    int rc = 2;
    for (int i = 0; i < 2; i++) {
        char err[1024] = "";
        const char *arg = argv[optind + i];
        if (resolve_operand(arg, sweepdir, dirs[i], sizeof dirs[i], err, sizeof err) != 0) {
            fprintf(stderr, "opprof diff: %s\n", err);
            goto done;
        }
        if (strcmp(arg, dirs[i]) == 0)
            snprintf(names[i], sizeof names[i], "%s", arg);
        else
            snprintf(names[i], sizeof names[i], "%s%s%s (%s)", sweepdir ? sweepdir : "", sweepdir ? ":" : "", arg,
                     dirs[i]);
        if (profile_load(dirs[i], &p[i], err, sizeof err) != 0) {
            fprintf(stderr, "opprof diff: %s\n", err[0] ? err : "cannot load the result directory");
            goto done;
        }
    }
    if (!same_event(p[0], p[1]))
        goto done;
    /* Both from the op runner: compare the timed calls only. */
    char scope[512] = "";
    uint64_t all_w[2] = {p[0]->total_weight, p[1]->total_weight}, timed_w[2];
    size_t timed[2] = {timed_samples(p[0], &timed_w[0]), timed_samples(p[1], &timed_w[1])};
    if (!all_samples && timed[0] && timed[1]) {
        profile_keep_samples_under(p[0], SWEEP_TIMED_FUNCTION);
        profile_keep_samples_under(p[1], SWEEP_TIMED_FUNCTION);
        snprintf(scope, sizeof scope,
                 "the timed calls only (samples under %s): %zu samples, %.1f%% of A; %zu samples, %.1f%% of B "
                 "(--all-samples: everything)",
                 SWEEP_TIMED_FUNCTION, timed[0], all_w[0] ? 100.0 * (double)timed_w[0] / (double)all_w[0] : 0,
                 timed[1], all_w[1] ? 100.0 * (double)timed_w[1] / (double)all_w[1] : 0);
    } else if (!all_samples && (timed[0] || timed[1])) {
        snprintf(scope, sizeof scope, "all samples (only %s has the sweep runner's timed calls)",
                 timed[0] ? "A" : "B");
    }
    if (group < 0) {
        bool ops[2];
        if (has_operators(p[0], &ops[0]) != 0 || has_operators(p[1], &ops[1]) != 0)
            goto oom;
        group = ops[0] || ops[1] ? GROUP_OP : GROUP_FUNCTION;
    }
    struct hotspot_table t[2];
    if (hotspots_compute(p[0], (enum group_by)group, &t[0]) != 0)
        goto oom;
    if (hotspots_compute(p[1], (enum group_by)group, &t[1]) != 0) {
        hotspots_free(&t[0]);
        goto oom;
    }
    struct diff_table d;
    int drc = diff_compute(&t[0], &t[1], &d);
    hotspots_free(&t[0]);
    hotspots_free(&t[1]);
    if (drc != 0)
        goto oom;
    d.grouping = group == GROUP_OP ? "operator" : "function";
    d.scope = scope[0] ? scope : NULL;
    diff_sort(&d);
    if (format == FORMAT_CSV && d.scope) /* CSV has no place for a sentence */
        fprintf(stderr, "opprof diff: compared %s\n", d.scope);
    report_print_diff(stdout, &d, names[0], names[1], format, limit);
    diff_free(&d);
    rc = fflush(stdout) == 0 ? 0 : 2;
    if (rc == 0 && flamegraph)
        rc = write_diff_flamegraph(flamegraph, p[0], p[1], names[0], names[1]);
    goto done;
oom:
    fputs("opprof diff: out of memory while aggregating samples\n", stderr);
done:
    profile_free(p[0]);
    profile_free(p[1]);
    return rc;
}
