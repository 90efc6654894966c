/*
 * cli/cmd_export.c — `opprof export`: load one result directory (several for
 * --chrome-trace) and write it in the formats of the viewers users already
 * trust: flame graph SVG, folded stacks, speedscope, Chrome trace, pstats,
 * one HTML page. Several outputs may be given in one command; the profile is
 * loaded once.
 *
 * Thin on purpose: the formats are report/export_*.c. What lives here is the
 * contract: option spelling, "-" for standard output, a file is either written
 * whole or removed, exit status 0 ok, 1 empty profile (nothing measured: pstats
 * refuses it, other files are written but scripts must not take them for a
 * measurement), 2 usage, load or write error.
 */
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

static void export_usage(FILE *out)
{
    fputs("usage: opprof export [DIR...] OUTPUT... [options]\n"
          "\n"
          "Writes a result directory (default: the newest opprof.NNN in the current\n"
          "directory) in formats other tools read. Give one or more outputs; FILE may be\n"
          "- for standard output.\n"
          "\n"
          "outputs:\n"
          "  --flamegraph FILE    interactive flame graph, one self-contained SVG\n"
          "                       (click to zoom, Search / Ctrl-F, tooltips); with two DIRs A B,\n"
          "                       a differential one: B's, red where a share grew from A, blue\n"
          "                       where it shrank (as opprof diff A B --flamegraph FILE)\n"
          "  --folded FILE        folded stacks (flamegraph.pl, inferno, speedscope)\n"
          "  --speedscope FILE    speedscope JSON, one profile per thread\n"
          "  --chrome-trace FILE  Chrome Trace Event JSON (chrome://tracing, Perfetto):\n"
          "                       call stacks over time per thread, active threads; with several\n"
          "                       DIRs, one trace with a lane per process on one clock\n"
          "  --pstats FILE        cProfile-compatible stats (python -m pstats, gprof2dot)\n"
          "  --html FILE          one self-contained page: summary, the text report, every\n"
          "                       hotspot (sortable), flame graph, threads over time\n"
          "  --pprof FILE         pprof profile.proto, gzipped (go tool pprof, pprof.me)\n"
          "  --callgrind FILE     callgrind format (callgrind_annotate, KCachegrind)\n"
          "options:\n"
          "  --inverted           draw the flame graph as an icicle (root at the top)\n"
          "  --fold-startup       flame graph: a stack that enters Python's import machinery\n"
          "                       or the loader's library init ends there, in one box\n"
          "                       \"[start-up: imports, library init]\" (no importlib towers)\n"
          "  --title TEXT         flame graph title\n"
          "  --width PX           flame graph width (default 1200; the height follows the depth)\n"
          "  --minwidth PX|N%     leave out boxes narrower than PX pixels or N % (default 0.1 px)\n"
          "  --colors PALETTE     opprof (by frame kind, default), or flamegraph.pl's hot, mem,\n"
          "                       io, red, green, blue, aqua, yellow, purple, orange\n"
          "  --countname NAME     what the flame graph calls a sample (default: samples)\n"
          "  -h, --help           show this help\n",
          out);
}

enum output_kind {
    OUT_FLAMEGRAPH, OUT_FOLDED, OUT_SPEEDSCOPE, OUT_CHROME, OUT_PSTATS, OUT_HTML, OUT_PPROF, OUT_CALLGRIND, OUT_KINDS
};

static const char *const kind_option[OUT_KINDS] = {"--flamegraph", "--folded", "--speedscope",
                                                   "--chrome-trace", "--pstats", "--html",
                                                   "--pprof", "--callgrind"};

enum { OPT_INVERTED = 256, OPT_TITLE, OPT_WIDTH, OPT_MINWIDTH, OPT_COLORS, OPT_COUNTNAME, OPT_FOLD_STARTUP };

static const struct option export_long_options[] = {
    {"flamegraph", required_argument, NULL, OUT_FLAMEGRAPH + 300},
    {"folded", required_argument, NULL, OUT_FOLDED + 300},
    {"speedscope", required_argument, NULL, OUT_SPEEDSCOPE + 300},
    {"chrome-trace", required_argument, NULL, OUT_CHROME + 300},
    {"pstats", required_argument, NULL, OUT_PSTATS + 300},
    {"html", required_argument, NULL, OUT_HTML + 300},
    {"pprof", required_argument, NULL, OUT_PPROF + 300},
    {"callgrind", required_argument, NULL, OUT_CALLGRIND + 300},
    {"inverted", no_argument, NULL, OPT_INVERTED},
    {"fold-startup", no_argument, NULL, OPT_FOLD_STARTUP},
    {"title", required_argument, NULL, OPT_TITLE},
    {"width", required_argument, NULL, OPT_WIDTH},
    {"minwidth", required_argument, NULL, OPT_MINWIDTH},
    {"colors", required_argument, NULL, OPT_COLORS},
    {"countname", required_argument, NULL, OPT_COUNTNAME},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Writes one output. Returns 0, 1 (pstats of an empty profile), 2 (error). */
static int write_output(enum output_kind kind, const char *path, struct profile *const *profiles,
                        const struct export_options *opts, size_t nprofiles)
{
    bool to_stdout = strcmp(path, "-") == 0;
    FILE *out = to_stdout ? stdout : fopen(path, "w");
    if (!out) {
        fprintf(stderr, "opprof export: cannot write %s: %s\n", path, strerror(errno));
        return 2;
    }
    const struct profile *p = profiles[0];
    char err[512] = "";
    int rc;
    switch (kind) {
    case OUT_FLAMEGRAPH: /* two DIRs: the second, coloured by the change from the first */
        rc = export_flamegraph(out, profiles[nprofiles - 1], &opts[nprofiles - 1], false);
        break;
    case OUT_FOLDED: rc = export_folded(out, p); break;
    case OUT_SPEEDSCOPE: rc = export_speedscope(out, p); break;
    case OUT_CHROME: rc = export_chrome_trace(out, (const struct profile *const *)profiles, opts, nprofiles); break;
    case OUT_PSTATS: rc = export_pstats(out, p, err, sizeof err); break;
    case OUT_HTML: rc = export_html(out, p, &opts[0]); break;
    case OUT_PPROF: rc = export_pprof(out, p); break;
    case OUT_CALLGRIND: rc = export_callgrind(out, p); break;
    default: rc = -1; break;
    }
    errno = 0;
    bool write_failed = ferror(out) != 0;
    write_failed = (to_stdout ? fflush(out) != 0 : fclose(out) != 0) || write_failed;
    int status = 0;
    if (rc == -2) {
        fprintf(stderr, "opprof export: %s %s: %s\n", kind_option[kind], path, err);
        status = 1;
    } else if (rc != 0) {
        fprintf(stderr, "opprof export: out of memory while writing %s\n", path);
        status = 2;
    } else if (write_failed) {
        fprintf(stderr, "opprof export: cannot write %s: %s\n", path, errno ? strerror(errno) : "write error");
        status = 2;
    }
    if (status != 0) {
        if (!to_stdout)
            unlink(path); /* never leave a half file a viewer would choke on */
        return status;
    }
    if (!to_stdout) {
        struct stat st;
        double kb = stat(path, &st) == 0 ? (double)st.st_size / 1024.0 : 0;
        fprintf(stderr, "opprof export: wrote %s (%s, %.1f KB)\n", path, kind_option[kind] + 2, kb);
    }
    return 0;
}

/* --width PX, --minwidth PX or N%: positive numbers, as flamegraph.pl takes
 * them. 0, or -1 with a message. */
static int parse_size_option(int opt, const char *arg, struct export_options *o)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    bool pct = opt == OPT_MINWIDTH && *end == '%';
    if (pct)
        end++;
    if (errno || end == arg || *end || !(v > 0) || v > 1e6 || (opt == OPT_WIDTH && v < 100)) {
        fprintf(stderr, "opprof export: %s %s: expected %s\n", opt == OPT_WIDTH ? "--width" : "--minwidth", arg,
                opt == OPT_WIDTH ? "a width of at least 100 pixels" : "a positive number of pixels, or N%");
        return -1;
    }
    if (opt == OPT_WIDTH)
        o->width = v;
    else if (pct)
        o->minwidth_pct = v;
    else
        o->minwidth = v;
    return 0;
}

int cmd_export(int argc, char **argv)
{
    const char *outputs[OUT_KINDS] = {NULL};
    struct export_options base = {0};

    optind = 0; /* getopt keeps state across calls */
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", export_long_options, NULL)) != -1) {
        if (c >= 300 && c < 300 + OUT_KINDS) {
            if (!optarg[0]) {
                fprintf(stderr, "opprof export: %s needs a file name\n", kind_option[c - 300]);
                return 2;
            }
            outputs[c - 300] = optarg;
            continue;
        }
        switch (c) {
        case OPT_INVERTED: base.inverted = true; break;
        case OPT_FOLD_STARTUP: base.fold_startup = true; break;
        case OPT_TITLE: base.title = optarg; break;
        case OPT_WIDTH:
        case OPT_MINWIDTH:
            if (parse_size_option(c, optarg, &base) != 0)
                return 2;
            break;
        case OPT_COLORS:
            if (!export_colors_valid(optarg)) {
                fprintf(stderr, "opprof export: --colors %s: unknown palette (opprof, hot, mem, io, red, green, "
                                "blue, aqua, yellow, purple, orange)\n", optarg);
                return 2;
            }
            base.colors = optarg;
            break;
        case OPT_COUNTNAME: base.countname = optarg; break;
        case 'h': export_usage(stdout); return 0;
        case ':':
            fprintf(stderr, "opprof export: option '%s' needs a value (see opprof export --help)\n",
                    argv[optind - 1]);
            return 2;
        default: {
            char shortopt[3] = {'-', (char)optopt, '\0'};
            fprintf(stderr,
                    "opprof export: unknown option '%s'; accepted: --flamegraph, --folded, --speedscope, "
                    "--chrome-trace, --pstats, --html, --pprof, --callgrind, --inverted, --title, --width, "
                    "--minwidth, --colors, --countname, --help\n",
                    optopt ? shortopt : argv[optind - 1]);
            return 2;
        }
        }
    }
    size_t noutputs = 0, nstdout = 0;
    for (int k = 0; k < OUT_KINDS; k++) {
        noutputs += outputs[k] != NULL;
        nstdout += outputs[k] && strcmp(outputs[k], "-") == 0;
    }
    if (noutputs == 0) {
        fputs("opprof export: no output given; add one or more of --flamegraph F.svg, --folded F, "
              "--speedscope F.json, --chrome-trace F.json, --pstats F.pstats, --html F.html, "
              "--pprof F.pb.gz, --callgrind F\n",
              stderr);
        return 2;
    }
    if (nstdout > 1) {
        fputs("opprof export: only one output can go to standard output (-)\n", stderr);
        return 2;
    }
    size_t ndirs = (size_t)(argc - optind);
    if (ndirs > 1)
        for (int k = 0; k < OUT_KINDS; k++)
            if (outputs[k] && k != OUT_CHROME && !(k == OUT_FLAMEGRAPH && ndirs == 2)) {
                fprintf(stderr, "opprof export: %s takes one result directory; only --chrome-trace merges "
                                "several and --flamegraph compares two (got %zu)\n", kind_option[k], ndirs);
                return 2;
            }

    char newest[PATH_MAX];
    const char *default_dir[1] = {newest};
    const char *const *dirs = (const char *const *)argv + optind;
    if (ndirs == 0) {
        if (profile_find_newest(newest, sizeof newest) != 0) {
            char cwd[PATH_MAX];
            if (!getcwd(cwd, sizeof cwd))
                strcpy(cwd, ".");
            fprintf(stderr, "opprof export: no result directory given and no opprof.NNN in %s; "
                            "run `opprof record -- CMD` first or pass DIR\n", cwd);
            return 2;
        }
        dirs = default_dir;
        ndirs = 1;
    }

    struct profile **profiles = calloc(ndirs, sizeof *profiles);
    struct export_options *opts = calloc(ndirs, sizeof *opts);
    if (!profiles || !opts) {
        free(profiles);
        free(opts);
        fputs("opprof export: out of memory\n", stderr);
        return 2;
    }
    int status = 0;
    bool empty = false;
    /* Timelines need every sample with its time; the other formats sums per
     * stack and thread, which keeps memory to distinct stacks x threads. */
    enum profile_load_mode mode = outputs[OUT_CHROME] || outputs[OUT_HTML] || outputs[OUT_SPEEDSCOPE]
                                      ? PROFILE_LOAD_SAMPLES
                                      : PROFILE_LOAD_AGGREGATED;
    for (size_t i = 0; i < ndirs && status == 0; i++) {
        char err[1024] = "";
        if (profile_load_as(dirs[i], mode, &profiles[i], err, sizeof err) != 0) {
            fprintf(stderr, "opprof export: %s\n", err[0] ? err : "cannot load the result directory");
            status = 2;
            break;
        }
        opts[i] = base;
        opts[i].online_cpus = profiles[i]->online_cpus; /* the info file, read by profile_load */
        if (i == 1 && ndirs == 2) { /* A B --flamegraph: differential, B against A */
            opts[i].diff_base = profiles[0];
            opts[i].diff_base_name = dirs[0];
        }
        if (!profiles[i]->complete)
            fprintf(stderr, "opprof export: warning: %s: recording did not finish (opprof record was "
                            "interrupted); exporting what was written\n", dirs[i]);
        if (profiles[i]->sample_period) /* record -c: the formats below speak time */
            fprintf(stderr, "opprof export: note: %s was sampled on %s (one sample per %llu events): "
                            "where a format needs durations (Chrome trace, speedscope, pstats), they are samples x "
                            "1 ms, not time\n", dirs[i],
                    profiles[i]->event ? profiles[i]->event : "an event",
                    (unsigned long long)profiles[i]->sample_period);
        if (profiles[i]->nsamples == 0) {
            fprintf(stderr, "opprof export: %s has no samples\n", dirs[i]);
            empty = true;
        }
    }
    for (int k = 0; k < OUT_KINDS && status != 2; k++) {
        if (!outputs[k])
            continue;
        int rc = write_output((enum output_kind)k, outputs[k], profiles, opts, ndirs);
        if (rc > status)
            status = rc;
    }
    if (status == 0 && empty)
        status = 1;
    for (size_t i = 0; i < ndirs; i++)
        profile_free(profiles[i]);
    free(profiles);
    free(opts);
    return status;
}
