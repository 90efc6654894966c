/*
 * cli/cmd_sweep.c — `opprof sweep`: microbenchmark one PyTorch operator
 * across shapes, dtypes and thread counts (through the bundled runner
 * tools/op_bench.py), or run any command across --param values with {name}
 * substituted in its argv. Every combination is recorded with record_run
 * into SWEEPDIR/NNN-<label>/, so every row has a profile; the table (time
 * per call, GFLOP/s, GB/s, hot kernel, threads) goes to stdout and
 * SWEEPDIR/sweep.json, a bar chart to SWEEPDIR/sweep.svg.
 *
 * No shell anywhere: argv is built here, element by element. Exit status:
 * 0 every row ok, 1 some row failed, 2 usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "cli/cli.h"
#include "report/report.h"
#include "sampler/sampler.h"

#ifndef OPPROF_SRCDIR_TOOLS
#define OPPROF_SRCDIR_TOOLS "."
#endif
#ifndef OPPROF_PKGDATADIR
#define OPPROF_PKGDATADIR "/usr/local/share/opprof"
#endif

#define MAX_PARAMS 4

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
          "  --op OP             torch.bmm (BxMxKxN), torch.mm / torch.addmm (MxKxN),\n"
          "                      torch.softmax / torch.layer_norm (any shape, dim -1)\n"
          "  --shapes LIST       comma-separated shapes, e.g. 8x64x64x64,8x64x13x64\n"
          "  --dtype LIST        float32 (default), float64, bfloat16, float16\n"
          "  --threads LIST      torch.set_num_threads values (default: PyTorch's)\n"
          "  --warmup N          untimed calls first (default 3)\n"
          "  --repeat N          timed calls (default 20)\n"
          "  --param NAME=LIST   with -- CMD: one run per value, {NAME} in CMD's arguments\n"
          "                      replaced (several --param: every combination)\n"
          "  --python PATH       Python for the runner (default: $OPPROF_PYTHON or python3)\n"
          "  --timeout SECONDS   kill a combination's run after this long and retry it\n"
          "                      once (default 300; 0: no limit)\n"
          "  -o DIR              sweep directory (default: the next free sweep.NNN)\n"
          "  --format FORMAT     text (default), csv or json\n"
          "  -h, --help          show this help\n",
          out);
}

enum { OPT_TIMEOUT = 200, OPT_OP = 256, OPT_SHAPES, OPT_DTYPE, OPT_THREADS, OPT_WARMUP, OPT_REPEAT, OPT_PARAM, OPT_PYTHON, OPT_FORMAT };

static const struct option sweep_long_options[] = {
    {"op", required_argument, NULL, OPT_OP},
    {"shapes", required_argument, NULL, OPT_SHAPES},
    {"shape", required_argument, NULL, OPT_SHAPES},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"param", required_argument, NULL, OPT_PARAM},
    {"python", required_argument, NULL, OPT_PYTHON},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"output", required_argument, NULL, 'o'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The runner: $OPPROF_OP_BENCH, then beside the binary (installed layout,
 * build tree), then the source tree and pkgdatadir baked in at build time. */
static int find_runner(char *out, size_t outlen)
{
    const char *env = getenv("OPPROF_OP_BENCH");
    if (env && env[0]) {
        snprintf(out, outlen, "%s", env);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
    /* libtool puts the real binary in .libs/ of the build tree */
    static const char *const beside[] = {"/../share/opprof/op_bench.py", "/tools/op_bench.py",
                                         "/../tools/op_bench.py"};
    if (path_beside_self(beside, sizeof beside / sizeof beside[0], out, outlen) == 0)
        return 0;
    snprintf(out, outlen, "%s/op_bench.py", OPPROF_SRCDIR_TOOLS);
    if (access(out, R_OK) == 0)
        return 0;
    snprintf(out, outlen, "%s/op_bench.py", OPPROF_PKGDATADIR);
    return access(out, R_OK) == 0 ? 0 : -1;
}

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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The last non-empty line of a file (trimmed), "" when none. */
static void last_line(const char *path, const char *want_prefix, char *out, size_t outlen)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
            line[--n] = '\0';
        if (n && (!want_prefix || strncmp(line, want_prefix, strlen(want_prefix)) == 0))
            snprintf(out, outlen, "%s", line);
    }
    fclose(f);
}

/* record_run with the workload's stdout and stderr (and record's own
 * messages) sent to files; returns the exit status. */
static int record_redirected(struct record_options *ro, const char *out_path, const char *err_path)
{
    fflush(stdout);
    fflush(stderr);
    int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int save_out = dup(1), save_err = dup(2);
    if (fo < 0 || fe < 0 || save_out < 0 || save_err < 0) {
        fprintf(stderr, "opprof sweep: cannot write %s: %s\n", out_path, strerror(errno));
        if (fo >= 0) close(fo);
        if (fe >= 0) close(fe);
        if (save_out >= 0) close(save_out);
        if (save_err >= 0) close(save_err);
        return 2;
    }
    dup2(fo, 1);
    dup2(fe, 2);
    int rc = record_run(ro);
    fflush(stdout);
    fflush(stderr);
    dup2(save_out, 1);
    dup2(save_err, 2);
    close(save_out);
    close(save_err);
    close(fo);
    close(fe);
    return rc;
}

/* record_redirected in a child process of its own process group (the
 * workload inherits it), so that a run that hangs past timeout_s (0: no
 * limit) is killed as a whole. Returns the exit status, or -1 on a timeout. */
static int record_limited(struct record_options *ro, const char *out_path, const char *err_path, double timeout_s)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return record_redirected(ro, out_path, err_path);
    if (pid == 0) {
        setpgid(0, 0);
        _exit(record_redirected(ro, out_path, err_path) & 0xff);
    }
    setpgid(pid, pid);
    double start = now_s();
    for (;;) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (w < 0 && errno != EINTR)
            return 2;
        if (timeout_s > 0 && now_s() - start > timeout_s) {
            kill(-pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Hot kernel and active threads of a row's profile. */
static void analyze_row(struct sweep_row *r, enum sweep_op op)
{
    struct profile *p = NULL;
    char err[512];
    if (profile_load(r->dir, &p, err, sizeof err) != 0)
        return;
    for (size_t i = 0; i < p->nthreads; i++)
        r->threads_active += p->threads[i].samples > 0;
    char opname[256];
    struct hotspot_table t;
    bool done = false;
    if (op != SWEEP_OP_UNKNOWN && hotspots_find_operator(p, sweep_op_name(op), opname, sizeof opname) &&
        hotspots_op_neighbours(p, opname, true, &t) == 0) {
        hotspots_sort(&t, SORT_TOTAL);
        if (t.nrows && t.share_denominator) {
            snprintf(r->kernel, sizeof r->kernel, "%s", t.rows[0].name);
            r->kernel_share = (double)t.rows[0].total / (double)t.share_denominator;
            done = true;
        }
        hotspots_free(&t);
    }
    if (!done && hotspots_compute(p, GROUP_FUNCTION, &t) == 0) {
        hotspots_sort(&t, SORT_SELF);
        if (t.nrows && t.total_weight) {
            snprintf(r->kernel, sizeof r->kernel, "%s", t.rows[0].name);
            r->kernel_share = (double)t.rows[0].self / (double)t.total_weight;
        }
        hotspots_free(&t);
    }
    profile_free(p);
}

struct sweep_ctx {
    const char *sweepdir;
    double timeout_s;
    struct sweep_row *rows;
    size_t nrows, cap;
    bool any_failed;
};

/* Records one combination (argv built by the caller) and fills its row. */
static int run_one(struct sweep_ctx *c, const char *label, char **argv, enum sweep_op op, double flops,
                   double bytes, int threads)
{
    if (c->nrows == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        struct sweep_row *g = realloc(c->rows, cap * sizeof *g);
        if (!g)
            return -1;
        c->rows = g;
        c->cap = cap;
    }
    struct sweep_row *r = &c->rows[c->nrows];
    memset(r, 0, sizeof *r);
    r->median_s = r->min_s = r->max_s = NAN;
    r->threads = threads;
    snprintf(r->label, sizeof r->label, "%s", label);
    char safe[160], outp[PATH_MAX + 8], errp[PATH_MAX + 8];
    sweep_sanitize_label(label, safe, sizeof safe);
    snprintf(r->dir, sizeof r->dir, "%s/%03zu-%s", c->sweepdir, c->nrows, safe);
    snprintf(outp, sizeof outp, "%s.out", r->dir);
    snprintf(errp, sizeof errp, "%s.err", r->dir);
    c->nrows++;
    fprintf(stderr, "opprof sweep: [%zu] %s\n", c->nrows, label);

    struct record_options ro = {.frequency_hz = 1000, .output_dir = r->dir, .call_graph = CALL_GRAPH_DWARF,
                                .argv = argv, .quiet = true};
    double t0 = now_s();
    int st = record_limited(&ro, outp, errp, c->timeout_s);
    if (st == -1) {
        /* A hung run (e.g. a sample taken inside the dynamic loader) is tried
         * once more, into a fresh directory. */
        fprintf(stderr, "opprof sweep: %s hung for %.0f s: killed, trying once more\n", label, c->timeout_s);
        strncat(r->dir, "-retry", sizeof r->dir - strlen(r->dir) - 1);
        snprintf(outp, sizeof outp, "%s.out", r->dir);
        snprintf(errp, sizeof errp, "%s.err", r->dir);
        ro.output_dir = r->dir;
        t0 = now_s();
        st = record_limited(&ro, outp, errp, c->timeout_s);
    }
    double wall = now_s() - t0;
    if (st == -1) {
        snprintf(r->reason, sizeof r->reason, "timed out twice after %.0f s (killed)", c->timeout_s);
    } else if (st != 0) {
        last_line(errp, NULL, r->reason, sizeof r->reason);
        if (!r->reason[0])
            snprintf(r->reason, sizeof r->reason, "exit status %d", st);
    } else if (op != SWEEP_OP_UNKNOWN) {
        char json[4096];
        last_line(outp, "{", json, sizeof json);
        if (sweep_json_number(json, "median_s", &r->median_s) && sweep_json_number(json, "min_s", &r->min_s) &&
            sweep_json_number(json, "max_s", &r->max_s))
            r->ok = true;
        else
            snprintf(r->reason, sizeof r->reason, "the runner printed no timing line (see %.400s)", outp);
    } else {
        r->median_s = wall; /* one call: the whole command, no spread */
        r->ok = true;
    }
    if (!r->ok)
        c->any_failed = true;
    sweep_row_derive(r, flops, bytes);
    analyze_row(r, op);
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

struct param { char *name; char **values; size_t nvalues; };

/* Cartesian product of the params (index idx[k] per param), recursively. */
static int run_params(struct sweep_ctx *c, struct param *ps, size_t np, size_t k, size_t *idx, char **cmd,
                      size_t ncmd)
{
    if (k < np) {
        for (size_t i = 0; i < ps[k].nvalues; i++) {
            idx[k] = i;
            if (run_params(c, ps, np, k + 1, idx, cmd, ncmd) != 0)
                return -1;
        }
        return 0;
    }
    char label[160] = "";
    char **argv = calloc(ncmd + 1, sizeof *argv);
    if (!argv)
        return -1;
    for (size_t j = 0; j < np; j++) {
        size_t l = strlen(label);
        snprintf(label + l, sizeof label - l, "%s%s=%s", j ? "," : "", ps[j].name, ps[j].values[idx[j]]);
    }
    int rc = 0;
    for (size_t a = 0; a < ncmd && rc == 0; a++) {
        char *cur = strdup(cmd[a]);
        for (size_t j = 0; j < np && cur; j++) {
            char *next = sweep_substitute(cur, ps[j].name, ps[j].values[idx[j]]);
            free(cur);
            cur = next;
        }
        if (!(argv[a] = cur))
            rc = -1;
    }
    if (rc == 0)
        rc = run_one(c, label, argv, SWEEP_OP_UNKNOWN, -1, 0, 0);
    for (size_t a = 0; a < ncmd; a++)
        free(argv[a]);
    free(argv);
    return rc;
}

static int run_op_sweep(struct sweep_ctx *c, enum sweep_op op, const char *opname, char **shapes, size_t nshapes,
                        char **dtypes, size_t ndtypes, char **threads, size_t nthreads, int warmup, int repeat,
                        const char *python, const char *runner)
{
    char w[16], rp[16];
    snprintf(w, sizeof w, "%d", warmup);
    snprintf(rp, sizeof rp, "%d", repeat);
    size_t nt = nthreads ? nthreads : 1;
    for (size_t s = 0; s < nshapes; s++)
        for (size_t d = 0; d < ndtypes; d++)
            for (size_t t = 0; t < nt; t++) {
                const char *th = nthreads ? threads[t] : "0";
                char label[160];
                snprintf(label, sizeof label, "%s %s %s%s%s", sweep_op_name(op), shapes[s], dtypes[d],
                         nthreads ? " t" : "", nthreads ? th : "");
                long dims[SWEEP_MAX_DIMS];
                int nd = 0;
                double flops = -1, bytes = 0;
                char err[256];
                size_t es = sweep_dtype_size(dtypes[d]);
                if (sweep_parse_shape(op, shapes[s], dims, &nd, err, sizeof err) == 0 && es)
                    sweep_op_counts(op, dims, nd, es, &flops, &bytes);
                /* The runner checks op, shape and dtype itself: its one-line
                 * reason becomes the row's. */
                char *argv[] = {(char *)python, (char *)runner, "--op", (char *)opname, "--shape", shapes[s],
                                "--dtype", dtypes[d], "--threads", (char *)th, "--warmup", w, "--repeat", rp, NULL};
                if (run_one(c, label, argv, op, flops, bytes, atoi(th)) != 0)
                    return -1;
            }
    return 0;
}

static void write_file_outputs(const struct sweep_ctx *c, const char *title)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/sweep.svg", c->sweepdir);
    FILE *f = fopen(path, "w");
    if (f) {
        report_sweep_svg(f, c->rows, c->nrows, title);
        fclose(f);
    } else {
        fprintf(stderr, "opprof sweep: cannot write %s: %s\n", path, strerror(errno));
    }
    snprintf(path, sizeof path, "%s/sweep.json", c->sweepdir);
    if ((f = fopen(path, "w"))) {
        report_print_sweep(f, c->rows, c->nrows, FORMAT_JSON, NULL);
        fclose(f);
    }
}

int cmd_sweep(int argc, char **argv)
{
    const char *op_text = NULL, *shapes_text = NULL, *dtype_text = "float32", *threads_text = NULL;
    const char *outdir = NULL, *python = getenv("OPPROF_PYTHON");
    int warmup = 3, repeat = 20, timeout_s = 300;
    enum report_format format = FORMAT_TEXT;
    struct param params[MAX_PARAMS];
    size_t nparams = 0;
    int rc = 2;
    if (!python || !python[0])
        python = "python3";

    optind = 0;
    opterr = 0;
    int ch;
    /* "+": stop at the first non-option, so CMD's own options stay CMD's. */
    while ((ch = getopt_long(argc, argv, "+:o:h", sweep_long_options, NULL)) != -1) {
        switch (ch) {
        case OPT_OP: op_text = optarg; break;
        case OPT_SHAPES: shapes_text = optarg; break;
        case OPT_DTYPE: dtype_text = optarg; break;
        case OPT_THREADS: threads_text = optarg; break;
        case OPT_PYTHON: python = optarg; break;
        case OPT_TIMEOUT:
            if (parse_count(optarg, &timeout_s) != 0) {
                fprintf(stderr, "opprof sweep: bad --timeout value '%s'; give seconds (0: no limit)\n", optarg);
                goto out;
            }
            break;
        case 'o': outdir = optarg; break;
        case OPT_WARMUP:
        case OPT_REPEAT:
            if (parse_count(optarg, ch == OPT_WARMUP ? &warmup : &repeat) != 0 || (ch == OPT_REPEAT && !repeat)) {
                fprintf(stderr, "opprof sweep: bad %s value '%s'\n", ch == OPT_WARMUP ? "--warmup" : "--repeat",
                        optarg);
                goto out;
            }
            break;
        case OPT_FORMAT:
            if (report_format_parse(optarg, &format) != 0) {
                fprintf(stderr, "opprof sweep: unknown --format value '%s'; accepted: text, csv, json\n", optarg);
                goto out;
            }
            break;
        case OPT_PARAM: {
            const char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg || nparams == MAX_PARAMS) {
                fprintf(stderr, "opprof sweep: bad --param '%s'; give NAME=V1,V2 (at most %d)\n", optarg,
                        MAX_PARAMS);
                goto out;
            }
            struct param *p = &params[nparams];
            p->name = strndup(optarg, (size_t)(eq - optarg));
            if (!p->name || sweep_split_list(eq + 1, &p->values, &p->nvalues) != 0 || !p->nvalues) {
                fprintf(stderr, "opprof sweep: --param %s has no values\n", optarg);
                free(p->name);
                goto out;
            }
            nparams++;
            break;
        }
        case 'h':
            sweep_usage(stdout);
            rc = 0;
            goto out;
        case ':':
            fprintf(stderr, "opprof sweep: option '%s' needs a value (see opprof sweep --help)\n", argv[optind - 1]);
            goto out;
        default:
            fprintf(stderr, "opprof sweep: unknown option '%s' (see opprof sweep --help)\n", argv[optind - 1]);
            goto out;
        }
    }
    char **cmd = argv + optind;
    size_t ncmd = (size_t)(argc - optind);
    if (op_text && (nparams || ncmd)) {
        fputs("opprof sweep: give either --op with --shapes, or --param with -- CMD, not both\n", stderr);
        goto out;
    }
    if (!op_text && !(nparams && ncmd)) {
        fputs("opprof sweep: nothing to sweep: give --op OP --shapes LIST, or --param NAME=V1,V2 -- CMD "
              "(see opprof sweep --help)\n",
              stderr);
        goto out;
    }
    enum sweep_op op = SWEEP_OP_UNKNOWN;
    char runner[PATH_MAX];
    if (op_text) {
        if (!shapes_text) {
            fputs("opprof sweep: --op needs --shapes (e.g. --shapes 8x64x64x64)\n", stderr);
            goto out;
        }
        if (find_runner(runner, sizeof runner) != 0) {
            fprintf(stderr, "opprof sweep: the runner op_bench.py was not found (looked beside the opprof binary, "
                            "in %s and %s): reinstall opprof or set OPPROF_OP_BENCH=/path/to/op_bench.py\n",
                    OPPROF_SRCDIR_TOOLS, OPPROF_PKGDATADIR);
            goto out;
        }
        /* An unknown op still runs: each row then fails with the runner's reason. */
        op = sweep_op_parse(op_text);
    }

    char sweepdir[PATH_MAX];
    if (make_sweepdir(outdir, sweepdir, sizeof sweepdir) != 0)
        goto out;
    struct sweep_ctx c = {.sweepdir = sweepdir, .timeout_s = timeout_s};
    int run_rc;
    char title[512];
    if (op_text) {
        char **shapes = NULL, **dtypes = NULL, **threads = NULL;
        size_t ns = 0, nd = 0, nt = 0;
        if (sweep_split_list(shapes_text, &shapes, &ns) || sweep_split_list(dtype_text, &dtypes, &nd) ||
            (threads_text && sweep_split_list(threads_text, &threads, &nt))) {
            fputs("opprof sweep: out of memory\n", stderr);
            goto out;
        }
        snprintf(title, sizeof title, "Sweep of %.200s (%d warm-up, %d timed calls per row) in %.200s", op_text, warmup,
                 repeat, sweepdir);
        run_rc = run_op_sweep(&c, op, op_text, shapes, ns, dtypes, nd, threads, nt, warmup, repeat, python, runner);
        sweep_free_list(shapes, ns);
        sweep_free_list(dtypes, nd);
        sweep_free_list(threads, nt);
    } else {
        size_t idx[MAX_PARAMS] = {0};
        snprintf(title, sizeof title, "Sweep of %.200s (time per call: the whole command) in %.200s", cmd[0], sweepdir);
        run_rc = run_params(&c, params, nparams, 0, idx, cmd, ncmd);
    }
    if (run_rc != 0) {
        fputs("opprof sweep: out of memory\n", stderr);
        free(c.rows);
        goto out;
    }
    report_print_sweep(stdout, c.rows, c.nrows, format, title);
    write_file_outputs(&c, op_text ? op_text : cmd[0]);
    if (format == FORMAT_TEXT)
        printf("\nResult directories, sweep.json and sweep.svg are in %s/\n", sweepdir);
    fflush(stdout);
    rc = c.any_failed ? 1 : 0;
    free(c.rows);
out:
    for (size_t i = 0; i < nparams; i++) {
        free(params[i].name);
        sweep_free_list(params[i].values, params[i].nvalues);
    }
    return rc;
}
