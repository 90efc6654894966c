/*
 * cli/cmd_sweep.c — `opprof sweep`: microbenchmark one PyTorch operator
 * across shapes, dtypes and thread counts (through the bundled runner
 * tools/op_bench.py), or run any command across --param values with {name}
 * substituted in its argv. This file parses the options; cli/sweep_run.c
 * records every combination into SWEEPDIR/NNN-<label>/, so every row has a
 * profile. The table (time per call, GFLOP/s, GB/s, hot kernel, threads,
 * CPI and bandwidth or why they are missing) goes to stdout and to
 * SWEEPDIR/sweep.json and sweep.csv, the plot of the metric against the
 * parameter to SWEEPDIR/sweep.svg, both together to SWEEPDIR/sweep.html.
 *
 * Exit status: 0 every row ok, 1 some row failed, 2 usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analyze/analyze.h"
#include "cli/cli.h"
#include "cli/sweep_internal.h"
#include "report/report.h"

#ifndef OPPROF_SRCDIR_TOOLS
#define OPPROF_SRCDIR_TOOLS "."
#endif
#ifndef OPPROF_PKGDATADIR
#define OPPROF_PKGDATADIR "/usr/local/share/opprof"
#endif

static void sweep_usage(FILE *out)
{
    fputs("usage: opprof sweep --op OP --shapes S1,S2,... [options]\n"
          "       opprof sweep --param NAME=V1,V2,... [--param ...] [options] -- CMD [ARGS...]\n"
          "\n"
          "Runs one combination after another under `opprof record` and prints one row\n"
          "per combination: time per call (median, spread), GFLOP/s and GB/s where the\n"
          "operator's counts are known, the hot kernel and the threads with samples.\n"
          "\n"
          "options:\n"
          "  --op OP             torch.bmm / torch.baddbmm (BxMxKxN), torch.mm / torch.addmm /\n"
          "                      torch.nn.functional.linear (MxKxN), torch.conv2d\n"
          "                      (NxCxHxWxKxRxS), torch.softmax / torch.layer_norm\n"
          "                      (any shape, dim -1)\n"
          "  --shapes LIST       comma-separated shapes, e.g. 8x64x64x64,8x64x13x64\n"
          "  --dtype LIST        float32 (default), float64, bfloat16, float16\n"
          "  --threads LIST      torch.set_num_threads values (default: PyTorch's)\n"
          "  --warmup N          untimed calls first (default 3)\n"
          "  --repeat N          timed calls, at least (default 20)\n"
          "  --min-time SECONDS  time calls for at least this long (default 0.2: about\n"
          "                      200 samples of the operator for opprof diff)\n"
          "  --param NAME=LIST   with -- CMD: one run per value, {NAME} in CMD's arguments\n"
          "                      replaced (several --param: every combination)\n"
          "  --python PATH       Python for the runner (default: $OPPROF_PYTHON or python3)\n"
          "  --timeout SECONDS   kill a combination's run after this long and retry it\n"
          "                      once (default 300; 0: no limit)\n"
          "  -e, --event EVENTS  passed to every combination's record (as record -e)\n"
          "  -M, --metrics SET   cpi | memory | cache: that preset's events, as -e\n"
          "  --plot-metric M     the plot's y axis: gflops (default when every row has a\n"
          "                      flop count), gbps or time\n"
          "  -o, --output DIR    sweep directory (default: the next free sweep.NNN)\n"
          "  --format FORMAT     text (default), csv or json\n"
          "  -h, --help          show this help\n",
          out);
}

enum { OPT_TIMEOUT = 200, OPT_OP = 256, OPT_SHAPES, OPT_DTYPE, OPT_THREADS, OPT_WARMUP, OPT_REPEAT, OPT_PARAM,
       OPT_PYTHON, OPT_FORMAT, OPT_MIN_TIME, OPT_PLOT_METRIC };

static const struct option sweep_long_options[] = {
    {"op", required_argument, NULL, OPT_OP},
    {"shapes", required_argument, NULL, OPT_SHAPES},
    {"shape", required_argument, NULL, OPT_SHAPES},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"min-time", required_argument, NULL, OPT_MIN_TIME},
    {"param", required_argument, NULL, OPT_PARAM},
    {"python", required_argument, NULL, OPT_PYTHON},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"event", required_argument, NULL, 'e'},
    {"metrics", required_argument, NULL, 'M'},
    {"plot-metric", required_argument, NULL, OPT_PLOT_METRIC},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"output", required_argument, NULL, 'o'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int parse_count(const char *text, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < 0 || v > 1000000)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_seconds(const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !(v >= 0) || v > 3600)
        return -1;
    *out = v;
    return 0;
}

static int make_sweepdir(const char *given, char *out, size_t outlen)
{
    if (given) {
        snprintf(out, outlen, "%s", given);
        if (mkdir(out, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "opprof sweep: cannot create %s: %s\n", out, strerror(errno));
            return -1;
        }
        return 0;
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(out, outlen, "sweep.%03d", i);
        if (mkdir(out, 0755) == 0)
            return 0;
        if (errno != EEXIST)
            break;
    }
    fprintf(stderr, "opprof sweep: cannot create a sweep.NNN directory here: %s\n", strerror(errno));
    return -1;
}


struct sweep_outputs {
    const struct sweep_ctx *c;
    const char *title, *what;
    enum sweep_plot_metric metric;
};
/* Writes one file of the sweep directory with fn; false (after a message)
 * when it cannot be written. */
static bool write_sweep_file(const struct sweep_outputs *o, const char *name,
                             void (*fn)(FILE *, const struct sweep_outputs *))
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/%s", o->c->sweepdir, name);
    FILE *f = fopen(path, "w");
    if (f)
        fn(f, o);
    if (!f || fclose(f) != 0) {
        fprintf(stderr, "opprof sweep: cannot write %s: %s\n", path, strerror(errno));
        return false;
    }
    return true;
}
static void put_svg(FILE *f, const struct sweep_outputs *o)
{
    report_sweep_svg(f, o->c->rows, o->c->nrows, o->what, o->metric, false);
}
static void put_html(FILE *f, const struct sweep_outputs *o)
{
    report_sweep_html(f, o->c->rows, o->c->nrows, o->title, o->what, o->metric);
}
static void put_json(FILE *f, const struct sweep_outputs *o)
{
    report_print_sweep(f, o->c->rows, o->c->nrows, FORMAT_JSON, NULL);
}
static void put_csv(FILE *f, const struct sweep_outputs *o)
{
    report_print_sweep(f, o->c->rows, o->c->nrows, FORMAT_CSV, NULL);
}

/* What the command line asked for. */
struct sweep_request {
    const char *op_text, *shapes_text, *dtype_text, *threads_text;
    const char *outdir, *python;
    const char *events_text, *metrics_text;
    int warmup, repeat, timeout_s;
    double min_time_s;
    enum report_format format;
    enum sweep_plot_metric plot_metric;
    struct sweep_param params[SWEEP_MAX_PARAMS];
    size_t nparams;
    char **cmd; /* -- CMD for a --param sweep */
    size_t ncmd;
};

/* --param NAME=V1,V2: one more parameter. 0, or -1 after a message. */
static int add_param(struct sweep_request *rq, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || rq->nparams == SWEEP_MAX_PARAMS) {
        fprintf(stderr, "opprof sweep: bad --param '%s'; give NAME=V1,V2 (at most %d)\n", arg, SWEEP_MAX_PARAMS);
        return -1;
    }
    struct sweep_param *p = &rq->params[rq->nparams];
    p->name = strndup(arg, (size_t)(eq - arg));
    if (!p->name || sweep_split_list(eq + 1, &p->values, &p->nvalues) != 0 || !p->nvalues) {
        fprintf(stderr, "opprof sweep: --param %s has no values\n", arg);
        free(p->name);
        return -1;
    }
    rq->nparams++;
    return 0;
}

/* Applies one parsed option ch (with optarg). -1 to go on, or the exit status. */
static int apply_sweep_option(int ch, char **argv, struct sweep_request *rq)
{
    switch (ch) {
    case OPT_OP: rq->op_text = optarg; return -1;
    case OPT_SHAPES: rq->shapes_text = optarg; return -1;
    case OPT_DTYPE: rq->dtype_text = optarg; return -1;
    case OPT_THREADS: rq->threads_text = optarg; return -1;
    case OPT_PYTHON: rq->python = optarg; return -1;
    case 'e': rq->events_text = optarg; return -1;
    case 'M': rq->metrics_text = optarg; return -1;
    case 'o': rq->outdir = optarg; return -1;
    case OPT_TIMEOUT:
        if (parse_count(optarg, &rq->timeout_s) != 0) {
            fprintf(stderr, "opprof sweep: bad --timeout value '%s'; give seconds (0: no limit)\n", optarg);
            return 2;
        }
        return -1;
    case OPT_MIN_TIME:
        if (parse_seconds(optarg, &rq->min_time_s) != 0) {
            fprintf(stderr, "opprof sweep: bad --min-time value '%s'; give seconds, e.g. 0.2\n", optarg);
            return 2;
        }
        return -1;
    case OPT_PLOT_METRIC:
        if (sweep_plot_metric_parse(optarg, &rq->plot_metric) != 0) {
            fprintf(stderr, "opprof sweep: unknown --plot-metric '%s'; accepted: gflops, gbps, time\n", optarg);
            return 2;
        }
        return -1;
    case OPT_WARMUP:
    case OPT_REPEAT:
        if (parse_count(optarg, ch == OPT_WARMUP ? &rq->warmup : &rq->repeat) != 0 ||
            (ch == OPT_REPEAT && !rq->repeat)) {
            fprintf(stderr, "opprof sweep: bad %s value '%s'\n", ch == OPT_WARMUP ? "--warmup" : "--repeat",
                    optarg);
            return 2;
        }
        return -1;
    case OPT_FORMAT:
        if (report_format_parse(optarg, &rq->format) != 0) {
            fprintf(stderr, "opprof sweep: unknown --format value '%s'; accepted: text, csv, json\n", optarg);
            return 2;
        }
        return -1;
    case OPT_PARAM:
        return add_param(rq, optarg) == 0 ? -1 : 2;
    case 'h':
        sweep_usage(stdout);
        return 0;
    case ':':
        fprintf(stderr, "opprof sweep: option '%s' needs a value (see opprof sweep --help)\n", argv[optind - 1]);
        return 2;
    default:
        fprintf(stderr, "opprof sweep: unknown option '%s' (see opprof sweep --help)\n", argv[optind - 1]);
        return 2;
    }
}

/* Parses the command line into rq and checks that it names one kind of
 * sweep. -1 to go on, or the exit status. */
static int parse_sweep_request(int argc, char **argv, struct sweep_request *rq)
{
    optind = 0;
    opterr = 0;
    int ch;
    /* "+": stop at the first non-option, so CMD's own options stay CMD's. */
    while ((ch = getopt_long(argc, argv, "+:o:e:M:h", sweep_long_options, NULL)) != -1) {
        int st = apply_sweep_option(ch, argv, rq);
        if (st >= 0)
            return st;
    }
    rq->cmd = argv + optind;
    rq->ncmd = (size_t)(argc - optind);
    if (rq->op_text && (rq->nparams || rq->ncmd)) {
        fputs("opprof sweep: give either --op with --shapes, or --param with -- CMD, not both\n", stderr);
        return 2;
    }
    if (!rq->op_text && !(rq->nparams && rq->ncmd)) {
        fputs("opprof sweep: nothing to sweep: give --op OP --shapes LIST, or --param NAME=V1,V2 -- CMD "
              "(see opprof sweep --help)\n",
              stderr);
        return 2;
    }
    return -1;
}

/* --op: checks --shapes and finds the runner op_bench.py. 0, or -1 after a
 * message. */
static int find_op_runner(const struct sweep_request *rq, char *runner, size_t len)
{
    if (!rq->shapes_text) {
        fputs("opprof sweep: --op needs --shapes (e.g. --shapes 8x64x64x64)\n", stderr);
        return -1;
    }
    if (sweep_find_runner(runner, len) != 0) {
        fprintf(stderr, "opprof sweep: the runner op_bench.py was not found (looked beside the opprof binary, "
                        "in %s and %s): reinstall opprof or set OPPROF_OP_BENCH=/path/to/op_bench.py\n",
                OPPROF_SRCDIR_TOOLS, OPPROF_PKGDATADIR);
        return -1;
    }
    return 0;
}

static void free_op_spec_lists(struct sweep_op_spec *spec)
{
    sweep_free_list(spec->shapes, spec->nshapes);
    sweep_free_list(spec->dtypes, spec->ndtypes);
    sweep_free_list(spec->threads, spec->nthreads);
}

/* --op: one row per shape x dtype x thread count, through the runner. 0, or
 * -1 after a message. */
static int run_op_sweep(struct sweep_ctx *c, const struct sweep_request *rq, const char *runner, char *title,
                        size_t tlen)
{
    /* An unknown op still runs: each row then fails with the runner's reason. */
    struct sweep_op_spec spec = {.op = sweep_op_parse(rq->op_text), .op_text = rq->op_text, .warmup = rq->warmup,
                                 .repeat = rq->repeat, .min_time_s = rq->min_time_s, .python = rq->python,
                                 .runner = runner};
    if (sweep_split_list(rq->shapes_text, &spec.shapes, &spec.nshapes) ||
        sweep_split_list(rq->dtype_text, &spec.dtypes, &spec.ndtypes) ||
        (rq->threads_text && sweep_split_list(rq->threads_text, &spec.threads, &spec.nthreads))) {
        fputs("opprof sweep: out of memory\n", stderr);
        return -1;
    }
    if (!spec.nshapes || !spec.ndtypes || (rq->threads_text && !spec.nthreads)) {
        fprintf(stderr, "opprof sweep: --shapes, --dtype and --threads each need at least one value\n");
        free_op_spec_lists(&spec);
        return -1;
    }
    snprintf(title, tlen,
             "Sweep of %.200s (%d warm-up calls, then at least %d timed calls and %g s per row) in %.200s",
             rq->op_text, rq->warmup, rq->repeat, rq->min_time_s, c->sweepdir);
    int run_rc = sweep_run_ops(c, &spec);
    free_op_spec_lists(&spec);
    if (run_rc != 0)
        fputs("opprof sweep: out of memory\n", stderr);
    return run_rc != 0 ? -1 : 0;
}

/* --param -- CMD: one row per combination of the values. 0, or -1 after a
 * message. */
static int run_param_sweep(struct sweep_ctx *c, struct sweep_request *rq, char *title, size_t tlen)
{
    snprintf(title, tlen, "Sweep of %.200s (time per call: the whole command) in %.200s", rq->cmd[0], c->sweepdir);
    if (sweep_run_params(c, rq->params, rq->nparams, rq->cmd, rq->ncmd) != 0) {
        fputs("opprof sweep: out of memory\n", stderr);
        return -1;
    }
    return 0;
}

int cmd_sweep(int argc, char **argv)
{
    struct sweep_request rq = {.dtype_text = "float32", .python = getenv("OPPROF_PYTHON"), .warmup = 3,
                               .repeat = 20, .timeout_s = 300, .min_time_s = 0.2, .format = FORMAT_TEXT,
                               .plot_metric = SWEEP_PLOT_AUTO};
    char *events = NULL;
    int rc = 2;
    if (!rq.python || !rq.python[0])
        rq.python = "python3";

    int st = parse_sweep_request(argc, argv, &rq);
    if (st >= 0) {
        rc = st;
        goto out;
    }
    char err[512];
    bool bad_events = false;
    events = sweep_events_string(rq.events_text, rq.metrics_text, err, sizeof err, &bad_events);
    if (bad_events) {
        fprintf(stderr, "opprof sweep: %s\n", err);
        goto out;
    }
    char runner[PATH_MAX];
    if (rq.op_text && find_op_runner(&rq, runner, sizeof runner) != 0)
        goto out;

    char sweepdir[PATH_MAX];
    if (make_sweepdir(rq.outdir, sweepdir, sizeof sweepdir) != 0)
        goto out;
    struct sweep_ctx c = {.sweepdir = sweepdir, .timeout_s = rq.timeout_s, .events = events};
    sweep_counters_note(events, c.counters, sizeof c.counters);
    char title[512];
    if ((rq.op_text ? run_op_sweep(&c, &rq, runner, title, sizeof title)
                    : run_param_sweep(&c, &rq, title, sizeof title)) != 0) {
        free(c.rows);
        goto out;
    }
    /* The names the table and the files below are written from. */
    const char *op_text = rq.op_text;
    char **cmd = rq.cmd;
    enum report_format format = rq.format;
    enum sweep_plot_metric plot_metric = rq.plot_metric;
    report_print_sweep(stdout, c.rows, c.nrows, format, title);
    struct sweep_outputs o = {.c = &c, .title = title, .what = op_text ? op_text : cmd[0], .metric = plot_metric};
    /* Every file is attempted even when an earlier one failed (hence no && chain). */
    bool written = write_sweep_file(&o, "sweep.json", put_json);
    written = write_sweep_file(&o, "sweep.csv", put_csv) && written;
    written = write_sweep_file(&o, "sweep.svg", put_svg) && written;
    written = write_sweep_file(&o, "sweep.html", put_html) && written;
    if (format == FORMAT_TEXT) {
        printf("\nResult directories, sweep.json, sweep.csv, sweep.svg (plot) and sweep.html are in %s/\n",
               sweepdir);
        if (c.nrows > 1)
            printf("Compare two rows' operators: opprof diff %s:0 %s:1\n", sweepdir, sweepdir);
    }
    fflush(stdout);
    rc = c.any_failed || !written ? 1 : 0;
    free(c.rows);
out:
    for (size_t i = 0; i < rq.nparams; i++) {
        free(rq.params[i].name);
        sweep_free_list(rq.params[i].values, rq.params[i].nvalues);
    }
    free(events);
    return rc;
}
