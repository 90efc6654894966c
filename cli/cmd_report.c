/*
 * cli/cmd_report.c — `opprof report`: parse options, load a result
 * directory, print the header and a hotspot (or callers/callees) table.
 *
 * Thin on purpose: loading is analyze/profile_load.c, numbers are
 * analyze/hotspots.c (hotspots_torch.c for op/line/python/kernel, phases.c,
 * findings.c), rendering is report/table.c and report/summary.c. What lives here is the
 * user-facing contract: option spelling (both --opt=value and --opt value),
 * defaults (newest opprof.NNN, top 20 rows in text), and exit statuses
 * (0 ok, 1 no such function for --callers/--callees, 2 usage or load error).
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
    OPT_RANKS,     /* ranks of a parallel job */
};

static const struct option report_long_options[] = {
    {"sort", required_argument, NULL, OPT_SORT},
    {"group-by", required_argument, NULL, OPT_GROUP_BY},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"callers", required_argument, NULL, OPT_CALLERS},
    {"callees", required_argument, NULL, OPT_CALLEES},
    {"threading", no_argument, NULL, OPT_THREADING},
    {"ranks", no_argument, NULL, OPT_RANKS},
    {"output", required_argument, NULL, 'o'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Whether any frame is named name (*exact), or an operator is (*op gets its
 * name), or else a frame contains it: the rule hotspots_neighbours applies.
 * Checked before anything is printed, so that "no such function" (exit 1) is
 * one line, not a header then an error. */
static bool function_matches(const struct profile *p, const char *name, bool *exact, char *op,
                             size_t oplen)
{
    bool partial = false;
    *exact = false;
    op[0] = '\0';
    for (size_t i = 0; i < p->nframes && !*exact; i++) {
        *exact = strcmp(p->frames[i].name, name) == 0;
        partial = partial || (name[0] && strstr(p->frames[i].name, name));
    }
    if (!*exact && hotspots_find_operator(p, name, op, oplen))
        return true;
    return *exact || partial;
}

/* Prints one callers/callees table. Returns 0, or 2 on out of memory or a
 * write error. */
static int print_neighbours(FILE *out, const struct profile *p, const char *name, bool callees,
                            const struct report_options *opts)
{
    bool exact;
    char op[256];
    (void)function_matches(p, name, &exact, op, sizeof op);
    struct hotspot_table t;
    if (hotspots_neighbours(p, name, callees, &t) != 0) {
        fputs("opprof report: out of memory while aggregating samples\n", stderr);
        return 2;
    }
    hotspots_sort(&t, opts->sort);
    char title[512];
    if (op[0])
        snprintf(title, sizeof title, callees ? "Kernels under %s (Share: of its self time)"
                                              : "Python callers of %s (Share: of its total time)",
                 op);
    else
        snprintf(title, sizeof title, "%s of %s%s%s", callees ? "Callees" : "Callers",
                 exact ? "" : "functions containing \"", name, exact ? "" : "\"");
    int rc = report_print_table(out, p, &t, opts, title);
    hotspots_free(&t);
    return rc == 0 ? 0 : 2;
}

/* ranks: frees the loaded results and the merged profile (p, when it is not
 * parts[0]). */
static void free_parts(struct profile **parts, size_t n, struct profile *p)
{
    if (p != parts[0])
        profile_free(p);
    for (size_t i = 0; i < n; i++)
        profile_free(parts[i]);
    free(parts);
}

/* ranks: loads every DIR (the first that fails is named, nothing is printed)
 * and merges them. 0, or the exit status. */
static int load_and_merge(char **dirs, size_t n, struct profile **parts, struct profile **merged)
{
    char err[1024] = "";
    for (size_t i = 0; i < n; i++) {
        if (profile_load(dirs[i], &parts[i], err, sizeof err) != 0) {
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

int cmd_report(int argc, char **argv)
{
    struct report_options opts = {
        .format = FORMAT_TEXT,
        .group_by = GROUP_FUNCTION,
        .sort = SORT_SELF,
        .limit = 0,
    };
    bool limit_given = false;
    bool threading_only = false; /* threads and OpenMP: --threading */
    bool ranks_only = false;     /* ranks: --ranks, --group-by rank */
    const char *output = NULL;

    /* getopt keeps state across calls; cmd_report may run after other parsers. */
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:h", report_long_options, NULL)) != -1) {
        switch (c) {
        case OPT_SORT:
            if (sort_key_parse(optarg, &opts.sort) != 0) {
                fprintf(stderr, "opprof report: unknown --sort value '%s'; accepted: self, total, samples, name\n",
                        optarg);
                return 2;
            }
            break;
        case OPT_GROUP_BY:
            if (strcmp(optarg, "rank") == 0) {
                ranks_only = true; /* the Ranks table is the per-rank grouping */
                break;
            }
            if (group_by_parse(optarg, &opts.group_by) != 0) {
                fprintf(stderr,
                        "opprof report: unknown --group-by value '%s'; accepted: function, module, thread, "
                        "process, op, line, python, kernel, rank\n",
                        optarg);
                return 2;
            }
            break;
        case OPT_LIMIT:
            if (parse_limit(optarg, &opts.limit) != 0) {
                fprintf(stderr, "opprof report: bad --limit value '%s'; give a number of rows (0: all)\n",
                        optarg);
                return 2;
            }
            limit_given = true;
            break;
        case OPT_FORMAT:
            if (report_format_parse(optarg, &opts.format) != 0) {
                fprintf(stderr, "opprof report: unknown --format value '%s'; accepted: text, csv, json\n",
                        optarg);
                return 2;
            }
            break;
        case OPT_THREADING:
            threading_only = true;
            break;
        case OPT_RANKS:
            ranks_only = true;
            break;
        case OPT_CALLERS:
        case OPT_CALLEES:
            if (!optarg[0]) {
                fprintf(stderr, "opprof report: %s needs a function name\n",
                        c == OPT_CALLERS ? "--callers" : "--callees");
                return 2;
            }
            if (c == OPT_CALLERS)
                opts.callers_of = optarg;
            else
                opts.callees_of = optarg;
            break;
        case 'o':
            output = optarg;
            break;
        case 'h':
            report_usage(stdout);
            return 0;
        case ':':
            fprintf(stderr, "opprof report: option '%s' needs a value (see opprof report --help)\n",
                    argv[optind - 1]);
            return 2;
        default: {
            /* optopt names a bad short option; a bad long one is only in argv. */
            char shortopt[3] = {'-', (char)optopt, '\0'};
            fprintf(stderr,
                    "opprof report: unknown option '%s'; accepted: --sort, --group-by, --limit, --format, "
                    "--callers, --callees, -o/--output, --help\n",
                    optopt ? shortopt : argv[optind - 1]);
            return 2;
        }
        }
    }
    size_t ndirs = argc > optind ? (size_t)(argc - optind) : 0;
    if (ndirs > 1 && (opts.callers_of || opts.callees_of || threading_only)) {
        fprintf(stderr, "opprof report: %s reads one result directory; give one DIR (got %zu)\n",
                threading_only ? "--threading" : (opts.callers_of ? "--callers" : "--callees"), ndirs);
        return 2;
    }
    if (opts.callers_of && opts.callees_of && opts.format != FORMAT_TEXT) {
        fputs("opprof report: --callers and --callees together work only with --format text; "
              "run the report twice\n",
              stderr);
        return 2;
    }
    if (!limit_given && opts.format == FORMAT_TEXT)
        opts.limit = DEFAULT_TEXT_LIMIT;

    char newest[PATH_MAX];
    const char *dir = optind < argc ? argv[optind] : NULL;
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

    /* ranks: several DIRs load one by one (an error names the bad one) and
     * merge into one profile for the tables; the Ranks section reads them apart. */
    struct profile **parts = calloc(ndirs ? ndirs : 1, sizeof *parts);
    if (!parts) {
        fputs("opprof report: out of memory\n", stderr);
        return 2;
    }
    struct profile *p = NULL;
    char err[1024] = "";
    if (ndirs <= 1) {
        if (profile_load(dir, &p, err, sizeof err) != 0) {
            fprintf(stderr, "opprof report: %s\n", err[0] ? err : "cannot load the result directory");
            free(parts);
            return 2;
        }
        parts[0] = p;
        ndirs = 1;
    } else {
        int lrc = load_and_merge(argv + optind, ndirs, parts, &p);
        if (lrc != 0) {
            free(parts);
            return lrc;
        }
    }
    struct rank_summary ranks = {0};
    if (ranks_analyze(parts, ndirs, &ranks) != 0) {
        fputs("opprof report: out of memory while aggregating samples\n", stderr);
        free_parts(parts, ndirs, p);
        return 2;
    }
    bool show_ranks = ranks.nrows >= 2 || ndirs > 1;
    /* record -c: the per-rank figures (CPU seconds, busy share, time in
     * communication, the slowest rank) need samples that are time. */
    if (p->sample_period && (show_ranks || ranks_only)) {
        if (ranks_only) {
            fprintf(stderr, "opprof report: --ranks: %s was sampled on %s (record -c): the per-rank times need "
                            "CPU-time samples; record the ranks without -c\n", p->dir, p->event);
            rank_summary_free(&ranks);
            free_parts(parts, ndirs, p);
            return 2;
        }
        fprintf(stderr, "opprof report: note: no Ranks section: the samples were taken on %s (record -c), "
                        "and the per-rank times need CPU-time samples\n", p->event);
        show_ranks = false;
    }
    if (ranks_only && ranks.nrows == 0) {
        fprintf(stderr, "opprof report: --ranks: %s holds no ranks (no RANK/OMPI_COMM_WORLD_RANK/PMI_RANK/"
                        "SLURM_PROCID in its processes); record each rank with `opprof record -o prof.%%r` "
                        "under the launcher, or pass several DIRs\n", p->dir);
        rank_summary_free(&ranks);
        free_parts(parts, ndirs, p);
        return 2;
    }
    if (show_ranks)
        opts.ranks = &ranks;

    const char *names[2] = {opts.callers_of, opts.callees_of};
    for (int i = 0; i < 2; i++) {
        bool exact;
        char op[256];
        if (names[i] && !function_matches(p, names[i], &exact, op, sizeof op)) {
            fprintf(stderr, "opprof report: no function or operator named %s in this profile\n", names[i]);
            rank_summary_free(&ranks);
            free_parts(parts, ndirs, p);
            return 1;
        }
    }

    FILE *out = stdout;
    if (output) {
        out = fopen(output, "w");
        if (!out) {
            fprintf(stderr, "opprof report: cannot write %s: %s\n", output, strerror(errno));
            rank_summary_free(&ranks);
            free_parts(parts, ndirs, p);
            return 2;
        }
    }

    /* Findings and phases head the hotspot view (not the callers/callees
     * drill-downs): text after the header, JSON as keys of the object. */
    struct phase_summary phases;
    struct findings findings = {0};
    bool summary = !opts.callers_of && !opts.callees_of && opts.format != FORMAT_CSV && !ranks_only;
    if (summary && (phases_compute(p, &phases) != 0 || findings_compute(p, &findings) != 0)) {
        fputs("opprof report: out of memory while aggregating samples\n", stderr);
        if (out != stdout)
            fclose(out);
        rank_summary_free(&ranks);
        free_parts(parts, ndirs, p);
        return 2;
    }
    if (summary) {
        opts.phases = &phases;
        opts.findings = &findings;
    }

    int rc = 0;
    if (opts.format == FORMAT_TEXT) {
        report_print_header(out, p);
        fputc('\n', out);
        if (summary)
            report_print_summary(out, &phases, &findings, p->period_ns);
    } else if (!p->complete) {
        /* csv/json carry no header: the caveat goes to stderr so it is not lost. */
        fputs("opprof report: warning: recording did not finish (opprof record was interrupted); "
              "figures cover what was written\n",
              stderr);
    }

    if (ranks_only) { /* ranks */
        report_print_ranks(out, &ranks, opts.format);
    } else if (threading_only) { /* threads and OpenMP */
        if (report_print_threading(out, p, opts.format) != 0)
            rc = 2;
    } else if (opts.callers_of || opts.callees_of) {
        if (opts.callers_of)
            rc = print_neighbours(out, p, opts.callers_of, false, &opts);
        if (rc == 0 && opts.callees_of) {
            if (opts.callers_of)
                fputc('\n', out);
            struct report_options o = opts;
            o.callers_of = NULL; /* the JSON names the table it holds */
            rc = print_neighbours(out, p, opts.callees_of, true, &o);
        }
    } else {
        struct hotspot_table t;
        if (hotspots_compute(p, opts.group_by, &t) != 0) {
            fputs("opprof report: out of memory while aggregating samples\n", stderr);
            rc = 2;
        } else {
            hotspots_sort(&t, opts.sort);
            if (report_print_table(out, p, &t, &opts, NULL) != 0)
                rc = 2;
            hotspots_free(&t);
        }
    }
    /* ranks: the Ranks section follows the merged table */
    if (rc == 0 && !ranks_only && show_ranks && opts.format == FORMAT_TEXT && !opts.callers_of &&
        !opts.callees_of) {
        fputc('\n', out);
        report_print_ranks(out, &ranks, FORMAT_TEXT);
    }
    /* threads and OpenMP: the Threading section closes the text report */
    if (rc == 0 && !threading_only && !ranks_only && opts.format == FORMAT_TEXT && !opts.callers_of && !opts.callees_of &&
        p->threading) {
        fputc('\n', out);
        report_print_threading(out, p, FORMAT_TEXT);
    }

    /* Write errors (full disk, closed pipe) surface here, once. */
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
    /* An empty profile is printed (its header and warnings say why) but is
     * not a success: scripts must not take it for a measurement. */
    if (rc == 0 && p->nsamples == 0) {
        fprintf(stderr, "opprof report: %s has no samples%s\n", p->dir,
                p->nwarnings ? " (see the warnings above)" : "");
        rc = 1;
    }
    findings_free(&findings);
    rank_summary_free(&ranks);
    free_parts(parts, ndirs, p);
    return rc;
}
