/*
 * cli/cmd_diff.c — `opprof diff A B`: compares two result directories per
 * operator (GROUP_OP when either profile has operator frames, else per
 * function): self time and share in A and B, the change in share (percentage
 * points) and in time, sorted by the absolute change in share.
 * Exit status: 0 ok, 2 usage or load error.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "cli/cli.h"
#include "report/report.h"

static void diff_usage(FILE *out)
{
    fputs("usage: opprof diff A B [--format text|csv|json] [--limit N] [--group-by op|function]\n"
          "\n"
          "Self time and share of every operator (or function, when neither profile has\n"
          "PyTorch operator frames) in result directories A and B, sorted by the change\n"
          "in share. Text shows 20 rows by default (--limit 0: all).\n",
          out);
}

enum { OPT_FORMAT = 256, OPT_LIMIT, OPT_GROUP_BY };
static const struct option diff_long_options[] = {
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

int cmd_diff(int argc, char **argv)
{
    enum report_format format = FORMAT_TEXT;
    size_t limit = 20;
    bool limit_given = false;
    int group = -1; /* -1: automatic */
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
        fputs("opprof diff: give two result directories: opprof diff A B\n", stderr);
        return 2;
    }
    if (!limit_given && format != FORMAT_TEXT)
        limit = 0;
    const char *dirs[2] = {argv[optind], argv[optind + 1]};
    struct profile *p[2] = {NULL, NULL};
    int rc = 2;
    for (int i = 0; i < 2; i++) {
        char err[1024] = "";
        if (profile_load(dirs[i], &p[i], err, sizeof err) != 0) {
            fprintf(stderr, "opprof diff: %s\n", err[0] ? err : "cannot load the result directory");
            goto done;
        }
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
    diff_sort(&d);
    report_print_diff(stdout, &d, dirs[0], dirs[1], format, limit);
    diff_free(&d);
    rc = fflush(stdout) == 0 ? 0 : 2;
    goto done;
oom:
    fputs("opprof diff: out of memory while aggregating samples\n", stderr);
done:
    profile_free(p[0]);
    profile_free(p[1]);
    return rc;
}
