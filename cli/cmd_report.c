/*
 * cli/cmd_report.c — `opprof report`: parse options, load a result
 * directory, print the header and a hotspot (or callers/callees) table.
 *
 * Options -> plan -> sections. Thin on purpose: loading is
 * analyze/profile_load.c, numbers are analyze/hotspots.c (hotspots_torch.c
 * for op/line/python/kernel, phases.c, findings.c, ranks.c), and which
 * sections print, in which order, is the table in report/report_sections.c.
 * What lives here is the user-facing contract: option spelling (both
 * --opt=value and --opt value), defaults (newest opprof.NNN, top 20 rows in
 * text), the checks made before anything is printed, and exit statuses (0 ok,
 * 1 no such function for --callers/--callees or no samples, 2 usage or load
 * error).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "cli/cli.h"
#include "report/report.h"

/* Text is read by people: a screenful by default. Scripts get everything. */
#define DEFAULT_TEXT_LIMIT 20

static void report_usage(FILE *out)
{
    fputs("usage: opprof report [DIR...] [options]\n"
          "\n"
          "Prints where the time went in a result directory written by `opprof record`\n"
          "(DIR defaults to the newest opprof.NNN in the current directory). Several DIRs\n"
          "(one per rank: opprof record -o prof.%r under torchrun/mpirun) give one merged\n"
          "table and a Ranks section.\n"
          "\n"
          "options:\n"
          "  --sort KEY          self (default), total, samples or name\n"
          "  --group-by KEY      function (default), module, thread, process, or for\n"
          "                      PyTorch: op (operators), line (Python file:line),\n"
          "                      python (Python function), kernel (innermost native\n"
          "                      function per operator)\n"
          "  --limit N           rows to print (text default 20; csv/json: all; 0: all)\n"
          "  --format FORMAT     text (default), csv or json\n"
          "  --callers NAME      who calls function NAME (exact name, else operator, else\n"
          "                      substring); for an operator (bmm, aten::bmm): its\n"
          "                      Python lines, with their share of its total time\n"
          "  --callees NAME      what function NAME calls ([self]: time in NAME itself);\n"
          "                      for an operator: the kernels it runs\n"
          "  --ranks             only the Ranks section (also: --group-by rank): per rank\n"
          "                      CPU and wall time, communication, the slowest rank and why\n"
          "  --threading         only the Threading section (CPUs, runnable threads,\n"
          "                      runqueue wait, OpenMP regions; json: with its timeline)\n"
          "  --pid PID[,PID...]  only the samples of these processes (as perf report)\n"
          "  --tid TID[,TID...]  only the samples of these threads\n"
          "  --comm NAME[,...]   only the samples of threads of this name, or of processes\n"
          "                      running this executable; filters combine (all must pass)\n"
          "  --memory            only the Memory section: peak RSS per process and when,\n"
          "                      page faults, RSS growth by function, Python line and\n"
          "                      operator (csv: the growth rows; json: with the readings)\n"
          "  --torch-shapes      only the Operator FLOPs section of a record --torch-shapes\n"
          "                      result: calls, FLOPs, GFLOP/s, FLOP/byte, input shapes per\n"
          "                      operator and the hook's own cost (text, csv or json)\n"
          "  -o, --output FILE   write the report to FILE instead of standard output\n"
          "  -h, --help          show this help\n"
          "\n"
          "Self: samples whose innermost frame is the row; total: samples with the row\n"
          "anywhere on the stack (once per sample). Percentages are of all samples.\n"
          "For profiles with operator or Python frames, the text report starts with\n"
          "Findings (hints backed by figures) and Phases (forward, backward, ...).\n",
          out);
}

/* Parses a row limit: a non-negative decimal integer. */
static int parse_limit(const char *text, size_t *out)
{
    if (!text || !*text || *text == '-' || *text == '+')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end || v > SIZE_MAX)
        return -1;
    *out = (size_t)v;
    return 0;
}

enum {
    OPT_SORT = 256,
    OPT_GROUP_BY,
    OPT_LIMIT,
    OPT_FORMAT,
    OPT_CALLERS,
    OPT_CALLEES,
    OPT_THREADING, /* threads and OpenMP */
    OPT_MEMORY,    /* memory over time */
    OPT_RANKS,     /* ranks of a parallel job */
    OPT_PID,       /* sample filters */
    OPT_TID,
    OPT_COMM,
    OPT_TORCH_SHAPES, /* record --torch-shapes: operator FLOPs */
};

static const struct option report_long_options[] = {
    {"sort", required_argument, NULL, OPT_SORT},
    {"group-by", required_argument, NULL, OPT_GROUP_BY},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"callers", required_argument, NULL, OPT_CALLERS},
    {"callees", required_argument, NULL, OPT_CALLEES},
    {"threading", no_argument, NULL, OPT_THREADING},
    {"memory", no_argument, NULL, OPT_MEMORY},
    {"ranks", no_argument, NULL, OPT_RANKS},
    {"pid", required_argument, NULL, OPT_PID},
    {"tid", required_argument, NULL, OPT_TID},
    {"comm", required_argument, NULL, OPT_COMM},
    {"torch-shapes", no_argument, NULL, OPT_TORCH_SHAPES},
    {"output", required_argument, NULL, 'o'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* What the command line asked for. */
struct report_request {
    struct report_options opts;
    bool limit_given;
    bool threading_only; /* threads and OpenMP: --threading */
    bool memory_only;    /* memory over time: --memory */
    bool ranks_only;     /* ranks: --ranks, --group-by rank */
    bool torch_shapes_only; /* --torch-shapes: the Operator FLOPs section */
    const char *output;  /* -o FILE; NULL: standard output */
    char **dirs;         /* the DIR arguments (none: the newest opprof.NNN) */
    size_t ndirs;
    struct sample_filter filter; /* --pid, --tid, --comm */
};

/* Applies one parsed option c (with optarg). -1 to go on, or the exit status. */
static int apply_option(int c, char **argv, struct report_request *rq)
{
    switch (c) {
    case OPT_SORT:
        if (sort_key_parse(optarg, &rq->opts.sort) != 0) {
            fprintf(stderr, "opprof report: unknown --sort value '%s'; accepted: self, total, samples, name\n",
                    optarg);
            return 2;
        }
        return -1;
    case OPT_GROUP_BY:
        if (strcmp(optarg, "rank") == 0) {
            rq->ranks_only = true; /* the Ranks table is the per-rank grouping */
            return -1;
        }
        if (group_by_parse(optarg, &rq->opts.group_by) != 0) {
            fprintf(stderr,
                    "opprof report: unknown --group-by value '%s'; accepted: function, module, thread, "
                    "process, op, line, python, kernel, rank\n",
                    optarg);
            return 2;
        }
        return -1;
    case OPT_LIMIT:
        if (parse_limit(optarg, &rq->opts.limit) != 0) {
            fprintf(stderr, "opprof report: bad --limit value '%s'; give a number of rows (0: all)\n", optarg);
            return 2;
        }
        rq->limit_given = true;
        return -1;
    case OPT_FORMAT:
        if (report_format_parse(optarg, &rq->opts.format) != 0) {
            fprintf(stderr, "opprof report: unknown --format value '%s'; accepted: text, csv, json\n", optarg);
            return 2;
        }
        return -1;
    case OPT_THREADING:
        rq->threading_only = true;
        return -1;
    case OPT_MEMORY:
        rq->memory_only = true;
        return -1;
    case OPT_RANKS:
        rq->ranks_only = true;
        return -1;
    case OPT_TORCH_SHAPES:
        rq->torch_shapes_only = true;
        return -1;
    case OPT_CALLERS:
    case OPT_CALLEES:
        if (!optarg[0]) {
            fprintf(stderr, "opprof report: %s needs a function name\n",
                    c == OPT_CALLERS ? "--callers" : "--callees");
            return 2;
        }
        if (c == OPT_CALLERS)
            rq->opts.callers_of = optarg;
        else
            rq->opts.callees_of = optarg;
        return -1;
    case 'o':
        rq->output = optarg;
        return -1;
    case OPT_PID:
        rq->filter.pids = optarg;
        return -1;
    case OPT_TID:
        rq->filter.tids = optarg;
        return -1;
    case OPT_COMM:
        rq->filter.comms = optarg;
        return -1;
    case 'h':
        report_usage(stdout);
        return 0;
    case ':':
        fprintf(stderr, "opprof report: option '%s' needs a value (see opprof report --help)\n", argv[optind - 1]);
        return 2;
    default: {
        /* optopt names a bad short option; a bad long one is only in argv. */
        char shortopt[3] = {'-', (char)optopt, '\0'};
        fprintf(stderr,
                "opprof report: unknown option '%s'; accepted: --sort, --group-by, --limit, --format, "
                "--callers, --callees, --threading, --memory, --ranks, --torch-shapes, --pid, --tid, --comm, "
                "-o/--output, --help\n",
                optopt ? shortopt : argv[optind - 1]);
        return 2;
    }
    }
}

/* Parses the command line into rq and checks the options against each
 * other. -1 to go on, or the exit status. */
static int parse_request(int argc, char **argv, struct report_request *rq)
{
    /* getopt keeps state across calls; cmd_report may run after other parsers. */
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:h", report_long_options, NULL)) != -1) {
        int st = apply_option(c, argv, rq);
        if (st >= 0)
            return st;
    }
    rq->dirs = argv + optind;
    rq->ndirs = argc > optind ? (size_t)(argc - optind) : 0;
    const struct report_options *o = &rq->opts;
    if (rq->ndirs > 1 && rq->torch_shapes_only) {
        fprintf(stderr, "opprof report: --torch-shapes reads one result directory; give one DIR (got %zu)\n",
                rq->ndirs);
        return 2;
    }
    if (rq->ndirs > 1 && (o->callers_of || o->callees_of || rq->threading_only || rq->memory_only)) {
        fprintf(stderr, "opprof report: %s reads one result directory; give one DIR (got %zu)\n",
                rq->memory_only ? "--memory"
                : rq->threading_only ? "--threading" : (o->callers_of ? "--callers" : "--callees"),
                rq->ndirs);
        return 2;
    }
    if (o->callers_of && o->callees_of && o->format != FORMAT_TEXT) {
        fputs("opprof report: --callers and --callees together work only with --format text; "
              "run the report twice\n",
              stderr);
        return 2;
    }
    if (!rq->limit_given && o->format == FORMAT_TEXT)
        rq->opts.limit = DEFAULT_TEXT_LIMIT;
    if (o->format == FORMAT_TEXT) /* on a terminal the table fits its width */
        rq->opts.columns = report_terminal_columns(STDOUT_FILENO);
    return -1;
}

/* The loaded results: parts[i] per DIR and the profile the tables read
 * (parts[0] itself for one DIR, else the ranks merged). */
struct loaded_results {
    struct profile **parts;
    size_t n;
    struct profile *merged;
};

/* ranks: frees the loaded results and the merged profile (when it is not
 * parts[0]). */
static void free_results(struct loaded_results *r)
{
    if (r->merged != r->parts[0])
        profile_free(r->merged);
    for (size_t i = 0; i < r->n; i++)
        profile_free(r->parts[i]);
    free(r->parts);
}

/* ranks: loads every DIR (the first that fails is named, nothing is printed)
 * and merges them. 0, or the exit status. */
static int load_and_merge(char **dirs, size_t n, struct profile **parts, struct profile **merged)
{
    char err[1024] = "";
    for (size_t i = 0; i < n; i++) {
        if (profile_load_as(dirs[i], PROFILE_LOAD_AGGREGATED, &parts[i], err, sizeof err) != 0) {
            fprintf(stderr, "opprof report: %s (result %zu of %zu given)\n",
                    err[0] ? err : dirs[i], i + 1, n);
            for (size_t j = 0; j < i; j++)
                profile_free(parts[j]);
            return 2;
        }
    }
    if (profile_merge(parts, n, merged, err, sizeof err) != 0) {
        fprintf(stderr, "opprof report: %s\n", err);
        for (size_t j = 0; j < n; j++)
            profile_free(parts[j]);
        return 2;
    }
    return 0;
}

/* Loads the one DIR given (or the newest opprof.NNN here) or, for several
 * DIRs (ranks), loads them one by one, an error naming the bad one, and
 * merges them into one profile for the tables; the Ranks section reads them
 * apart. 0, or the exit status. */
static int load_results(const struct report_request *rq, struct loaded_results *r)
{
    char newest[PATH_MAX];
    const char *dir = rq->ndirs ? rq->dirs[0] : NULL;
    if (!dir) {
        if (profile_find_newest(newest, sizeof newest) != 0) {
            char cwd[PATH_MAX];
            if (!getcwd(cwd, sizeof cwd))
                strcpy(cwd, ".");
            fprintf(stderr,
                    "opprof report: no result directory given and no opprof.NNN in %s; "
                    "run `opprof record -- CMD` first or pass DIR\n",
                    cwd);
            return 2;
        }
        dir = newest;
    }
    r->n = rq->ndirs > 1 ? rq->ndirs : 1;
    r->parts = calloc(r->n, sizeof *r->parts);
    if (!r->parts) {
        fputs("opprof report: out of memory\n", stderr);
        return 2;
    }
    int st = 0;
    char err[1024] = "";
    if (r->n == 1) {
        /* Tables need sums per stack and thread, not each sample: memory
         * follows distinct stacks x threads (bench/report_scale.sh). */
        if (profile_load_as(dir, PROFILE_LOAD_AGGREGATED, &r->merged, err, sizeof err) != 0) {
            fprintf(stderr, "opprof report: %s\n", err[0] ? err : "cannot load the result directory");
            st = 2;
        }
        r->parts[0] = r->merged;
    } else {
        st = load_and_merge(rq->dirs, r->n, r->parts, &r->merged);
    }
    if (st != 0)
        free(r->parts);
    return st;
}

/* ranks: the per-rank figures, and whether the report shows them. -1 to go
 * on, or the exit status. */
static int plan_ranks(const struct report_request *rq, const struct loaded_results *r,
                      struct rank_summary *ranks, bool *show_ranks)
{
    const struct profile *p = r->merged;
    if (ranks_analyze(r->parts, r->n, ranks) != 0) {
        fputs("opprof report: out of memory while aggregating samples\n", stderr);
        return 2;
    }
    *show_ranks = ranks->nrows >= 2 || r->n > 1;
    /* record -c: the per-rank figures (CPU seconds, busy share, time in
     * communication, the slowest rank) need samples that are time. */
    if (p->sample_period && (*show_ranks || rq->ranks_only)) {
        if (rq->ranks_only) {
            fprintf(stderr, "opprof report: --ranks: %s was sampled on %s (record -c): the per-rank times need "
                            "CPU-time samples; record the ranks without -c\n", p->dir, p->event);
            return 2;
        }
        fprintf(stderr, "opprof report: note: no Ranks section: the samples were taken on %s (record -c), "
                        "and the per-rank times need CPU-time samples\n", p->event);
        *show_ranks = false;
    }
    if (rq->ranks_only && ranks->nrows == 0) {
        fprintf(stderr, "opprof report: --ranks: %s holds no ranks (no RANK/OMPI_COMM_WORLD_RANK/PMI_RANK/"
                        "SLURM_PROCID in its processes); record each rank with `opprof record -o prof.%%r` "
                        "under the launcher, or pass several DIRs\n", p->dir);
        return 2;
    }
    return -1;
}

/* --callers/--callees: "no such function" (exit 1) is one line, checked
 * before anything is printed, not a header then an error. */
static bool drill_down_names_found(const struct profile *p, const struct report_options *o)
{
    const char *names[2] = {o->callers_of, o->callees_of};
    for (int i = 0; i < 2; i++) {
        bool exact;
        char op[256];
        if (names[i] && !report_function_matches(p, names[i], &exact, op, sizeof op)) {
            fprintf(stderr, "opprof report: no function or operator named %s in this profile\n", names[i]);
            return false;
        }
    }
    return true;
}

/* Closes the report; write errors (full disk, closed pipe) surface here,
 * once. Returns rc, or 2 on a write error. */
static int close_output(FILE *out, const char *output, int rc)
{
    bool write_failed = ferror(out) != 0;
    if (out != stdout)
        write_failed = fclose(out) != 0 || write_failed;
    else
        write_failed = fflush(out) != 0 || write_failed;
    if (write_failed) {
        fprintf(stderr, "opprof report: cannot write %s: %s\n", output ? output : "the report",
                errno ? strerror(errno) : "write error");
        rc = 2;
    }
    return rc;
}

int cmd_report(int argc, char **argv)
{
    struct report_request rq = {
        .opts = {.format = FORMAT_TEXT, .group_by = GROUP_FUNCTION, .sort = SORT_SELF, .limit = 0},
    };
    int st = parse_request(argc, argv, &rq);
    if (st >= 0)
        return st;
    struct loaded_results res = {0};
    st = load_results(&rq, &res);
    if (st != 0)
        return st;
    char ferr[2048];
    int frc = profile_filter_samples(res.merged, &rq.filter, ferr, sizeof ferr);
    if (frc != 0) {
        if (frc == -2)
            fputs("opprof report: out of memory while filtering samples\n", stderr);
        else
            fprintf(stderr, "opprof report: %s\n", ferr);
        free_results(&res);
        return 2;
    }

    struct report_plan plan = {
        .profile = res.merged,
        .opts = rq.opts,
        .ranks_only = rq.ranks_only,
        .threading_only = rq.threading_only,
        .memory_only = rq.memory_only,
    };
    struct rank_summary ranks = {0};
    struct torch_shapes shapes = {0};
    struct phase_summary phases;
    struct findings findings = {0};
    FILE *out = stdout;
    st = plan_ranks(&rq, &res, &ranks, &plan.show_ranks);
    if (st >= 0)
        goto done;
    plan.ranks = &ranks;
    if (plan.show_ranks)
        plan.opts.ranks = &ranks;
    plan.torch_shapes_only = rq.torch_shapes_only;
    /* record --torch-shapes: the hook's files (untrusted), read only for the
     * sections that show them: --torch-shapes, or the end of a text report */
    if (res.n == 1 && (rq.torch_shapes_only || rq.opts.format == FORMAT_TEXT)) {
        char err[1024];
        if (torch_shapes_load(res.merged->dir, &shapes, err, sizeof err) != 0) {
            fprintf(stderr, "opprof report: %s\n", err);
            st = 2;
            goto done;
        }
        if (torch_shapes_attach_samples(res.merged, &shapes) != 0) {
            fputs("opprof report: out of memory while aggregating samples\n", stderr);
            st = 2;
            goto done;
        }
        plan.torch_shapes = &shapes;
    }
    if (!drill_down_names_found(res.merged, &rq.opts)) {
        st = 1;
        goto done;
    }
    if (rq.output && !(out = fopen(rq.output, "w"))) {
        fprintf(stderr, "opprof report: cannot write %s: %s\n", rq.output, strerror(errno));
        st = 2;
        goto done;
    }
    /* Findings and phases head the hotspot view (not the callers/callees
     * drill-downs): text after the header, JSON as keys of the object. */
    if (!rq.opts.callers_of && !rq.opts.callees_of && rq.opts.format != FORMAT_CSV && !rq.ranks_only) {
        if (phases_compute(res.merged, &phases) != 0 || findings_compute(res.merged, &findings) != 0) {
            fputs("opprof report: out of memory while aggregating samples\n", stderr);
            if (out != stdout)
                fclose(out);
            st = 2;
            goto done;
        }
        plan.phases = plan.opts.phases = &phases;
        plan.findings = plan.opts.findings = &findings;
    }

    if (out == stdout && rq.opts.columns) {
        /* A terminal: render, then wrap what is wider than it. */
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        int rrc = mem ? report_render(mem, &plan) : -1;
        if (mem && fclose(mem) == 0 && rrc >= 0) {
            report_write_fitted(out, text, len, rq.opts.columns);
            st = close_output(out, rq.output, rrc);
        } else {
            st = close_output(out, rq.output, report_render(out, &plan)); /* unwrapped */
        }
        free(text);
    } else {
        st = close_output(out, rq.output, report_render(out, &plan));
    }
    /* An empty profile is printed (its header and warnings say why) but is
     * not a success: scripts must not take it for a measurement. */
    if (st == 0 && res.merged->nsamples == 0) {
        fprintf(stderr, "opprof report: %s has no samples%s\n", res.merged->dir,
                res.merged->nwarnings ? " (see the warnings above)" : "");
        st = 1;
    }
done:
    findings_free(&findings);
    torch_shapes_free(&shapes);
    rank_summary_free(&ranks);
    free_results(&res);
    return st;
}
