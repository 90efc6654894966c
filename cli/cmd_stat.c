/*
 * cli/cmd_stat.c — `opprof stat`: parse options, count with sampler/pmu/stat.c,
 * print with report/stat_table.c. The workload's exit status is opprof's.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "report/report.h"
#include "sampler/pmu/pmu.h"

static void stat_usage(FILE *out)
{
    fputs("usage: opprof stat [OPTIONS] -- CMD [ARGS...]\n"
          "\n"
          "Runs CMD and counts events over the whole run, for every thread and child\n"
          "process together (perf stat's way). Software events (task-clock, context\n"
          "switches, CPU migrations, page faults) are always counted; hardware events\n"
          "need a PMU, and when there is none one line says why.\n"
          "\n"
          "  -e, --event EVENTS      comma-separated events: cycles, instructions, cache-misses,\n"
          "                          vendor names (INST_RETIRED:ANY_P, skl::L2_RQSTS:MISS),\n"
          "                          rNNNN raw, software events (task-clock, cs, page-faults,\n"
          "                          minor-faults, major-faults, cpu-migrations); {a,b} is a group\n"
          "  -M, --metrics SET       cpi | memory | cache: the events for that question on this CPU\n"
          "  -o, --output FILE       write the table to FILE instead of stderr\n"
          "      --list              show the presets' events for this CPU and exit\n"
          "\n"
          "The exit status is the workload's (128+N when it was killed by signal N).\n",
          out);
}

static int list_presets(void)
{
    const char *core = pmu_core_pmu_name();
    printf("core PMU (libpfm4): %s\n", core ? core : "none found (generic perf names are used)");
    for (enum metric_set s = METRICS_CPI; s <= METRICS_CACHE; s++) {
        struct pmu_preset_event ev[16];
        size_t n = pmu_preset_events(s, core, ev, 16);
        printf("--metrics %s:\n", metric_set_name(s));
        for (size_t i = 0; i < n; i++)
            printf("  %s%s\n", ev[i].event, ev[i].grouped ? "   (grouped with the previous event)" : "");
        if (s == METRICS_MEMORY)
            puts("  + uncore memory-controller CAS counts where the PMU exposes them");
    }
    puts("software: task-clock cpu-clock context-switches (cs) cpu-migrations page-faults (faults) "
         "minor-faults major-faults");
    return 0;
}

int cmd_stat(int argc, char **argv)
{
    static const struct option options[] = {
        {"event", required_argument, NULL, 'e'},
        {"metrics", required_argument, NULL, 'M'},
        {"output", required_argument, NULL, 'o'},
        {"list", no_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct stat_options o = {0};
    const char *output = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+e:M:o:h", options, NULL)) != -1) {
        switch (c) {
        case 'e':
            o.events = optarg;
            break;
        case 'M':
            if (metric_set_parse(optarg, &o.metrics) != 0) {
                fprintf(stderr, "opprof stat: --metrics %s: use cpi, memory or cache\n", optarg);
                return 2;
            }
            break;
        case 'o':
            output = optarg;
            break;
        case 'l':
            return list_presets();
        case 'h':
            stat_usage(stdout);
            return 0;
        default:
            if (optopt)
                fprintf(stderr, "opprof stat: option -%c is unknown or lacks its value (see opprof stat --help)\n", optopt);
            else
                fprintf(stderr, "opprof stat: unknown option %s (see opprof stat --help)\n", argv[optind - 1]);
            return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "opprof stat: no command to run: opprof stat [OPTIONS] -- CMD [ARGS]\n");
        return 2;
    }
    o.argv = argv + optind;
    FILE *out = stderr;
    if (output && !(out = fopen(output, "w"))) {
        perror(output);
        return 2;
    }
    struct stat_result r;
    int rc = stat_run(&o, &r);
    if (r.no_pmu_reason[0] && r.ncounts > 0) /* not when the command never ran */
        fprintf(stderr, "opprof stat: hardware events not counted: %s; software events only\n", r.no_pmu_reason);
    if (r.note[0] && r.ncounts > 0)
        fprintf(stderr, "opprof stat: note: %s\n", r.note);
    if (r.ncounts > 0) {
        char cmd[512] = "";
        size_t used = 0;
        for (char *const *a = o.argv; *a && used + 2 < sizeof cmd; a++) {
            int n = snprintf(cmd + used, sizeof cmd - used, "%s%s", used ? " " : "", *a);
            if (n < 0)
                break;
            used += (size_t)n < sizeof cmd - used ? (size_t)n : sizeof cmd - used - 1;
        }
        report_print_stat(out, &r, cmd);
    }
    if (out != stderr)
        fclose(out);
    stat_result_free(&r);
    return rc;
}
