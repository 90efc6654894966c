/*
 * cli/cmd_record.c — `opprof record`: parse options, hand over to sampler/.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sampler/attach/attach.h"
#include "sampler/pmu/pmu.h"
#include "sampler/record/record.h"

static void record_usage(FILE *out)
{
    fputs("usage: opprof record [OPTIONS] -- CMD [ARGS...]\n"
          "       opprof record [OPTIONS] -p PID [--duration S] [--delay S]\n"
          "\n"
          "Runs CMD and samples the CPU time (user and kernel mode) of every thread\n"
          "of every process it starts (fork and fork+exec included); kernel time\n"
          "(page faults, system calls) is charged to the code that entered the\n"
          "kernel. Where kernel.perf_event_paranoid allows user-mode samples only,\n"
          "each sample is weighted by its thread's CPU time since the previous one,\n"
          "so totals still include kernel time (said in one line). With -p, samples\n"
          "a running process from outside without restarting or stopping it (user\n"
          "mode only).\n"
          "\n"
          "  -F, --freq HZ              samples per second of CPU time per thread (default 1000)\n"
          "  -o, --output DIR           result directory (default: next free opprof.NNN)\n"
          "  -g, --call-graph MODE      dwarf (CFI, default; works without frame pointers),\n"
          "                             fp (frame pointers), none (leaf function only)\n"
          "  --timer MODE               perf (default): a perf_event task-clock timer, any -F;\n"
          "                             tick: a POSIX CPU-time timer per thread, checked by the\n"
          "                             kernel at its scheduler tick, so at most CONFIG_HZ samples\n"
          "                             a second per thread (100-1000 by kernel build; record's\n"
          "                             summary gives the rate reached), each weighted by its\n"
          "                             thread's CPU time; no cost at context switches (the perf\n"
          "                             timer's hrtimer is re-armed at each one, dear on a VM),\n"
          "                             and no perf_event_open needed\n"
          "  -q, --quiet                no live status line and no summary\n"
          "  -e, --event EVENTS         events counted per sample (as opprof stat -e: CPI, misses\n"
          "                             per function); one that needs a missing PMU: one line\n"
          "  -c, --count N              sample every N events of the first -e event (the sampling\n"
          "                             leader: -e cycles,instructions -c 1000000, -e page-faults\n"
          "                             -c 64) instead of the CPU-time timer; shares are then\n"
          "                             shares of that event. Without a PMU for it: one line,\n"
          "                             then the timer\n"
          "  --openmp-runtime MODE      keep (default): the program's own OpenMP runtime (GNU\n"
          "                             libgomp is seen through its GOMP_parallel* calls);\n"
          "                             PATH: preload that LLVM libomp in place of libgomp\n"
          "                             (changes the program; the summary says so); auto:\n"
          "                             the same with a libomp found on this machine\n"
          "  --no-omp-swap              same as --openmp-runtime keep (the default)\n"
          "  --no-openmp-regions        do not record OpenMP regions (no time spent around each\n"
          "                             region; the threading view is the OS-level one)\n"
          "  --torch-shapes             record each PyTorch operator's calls and input shapes\n"
          "                             (FLOPs, GFLOP/s, FLOP/byte in the report): a dispatch\n"
          "                             hook runs in the workload once it imports torch (changes\n"
          "                             the program; the summary says so and what it cost)\n"
          "  -p, --pid PID              attach to running process PID: all its threads and the\n"
          "                             processes it starts meanwhile; Ctrl-C detaches and\n"
          "                             leaves the process running\n"
          "  --delay S                  record samples only from S seconds after the start\n"
          "                             (with -p: after attaching)\n"
          "  --duration S               ... and for S seconds (a launched workload keeps running\n"
          "                             after; with -p: then detach)\n"
          "  --max-size SIZE            stop recording samples once the result dir holds SIZE\n"
          "                             (bytes, or with K, M, G); dropped samples are counted\n"
          "\n"
          "The exit status is the workload's (128+N when it was killed by signal N);\n"
          "with -p it is 0 when the recording worked.\n",
          out);
}

/* "2", "0.5": seconds > 0, at most a day. */
static int parse_seconds(const char *text, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v > 0) || v > 86400)
        return -1;
    *out = v;
    return 0;
}

/* "65536", "500K", "20M", "2G" (powers of 1024); at least 64 KiB so the
 * stream headers and the process's maps always fit. */
static int parse_size(const char *text, uint64_t *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || !(v > 0))
        return -1;
    double unit = 1;
    if (*end == 'K' || *end == 'k')
        unit = 1024.0, end++;
    else if (*end == 'M' || *end == 'm')
        unit = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g')
        unit = 1024.0 * 1024 * 1024, end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || v * unit < 65536 || v * unit > 1e15)
        return -1;
    *out = (uint64_t)(v * unit);
    return 0;
}

/* Options that contradict each other: one sentence on stderr, false. */
static bool options_agree(const struct record_options *o, bool freq_given, bool has_command)
{
    if (o->sample_count && !o->events) {
        fprintf(stderr, "opprof record: -c %llu needs the event to sample on: -e EVENT -c N (e.g. -e cycles "
                        "-c 1000000, -e page-faults -c 64)\n", (unsigned long long)o->sample_count);
        return false;
    }
    if (o->sample_count && o->tick_timer) {
        fprintf(stderr, "opprof record: --timer tick samples on CPU time, -c on an event: give one of them\n");
        return false;
    }
    if (o->sample_count && freq_given) {
        fprintf(stderr, "opprof record: -F sets the CPU-time timer, -c samples on an event instead: give one "
                        "of them\n");
        return false;
    }
    if (o->attach_pid) {
        if (o->torch_shapes) {
            fprintf(stderr, "opprof record: --torch-shapes installs its hook when the program starts; it cannot "
                            "be added to a running process (-p): record a launched command instead\n");
            return false;
        }
        if (o->no_openmp_regions) {
            fprintf(stderr, "opprof record: -p records no OpenMP region anyway (regions come from the agent in "
                            "a launched program): leave --no-openmp-regions out with -p\n");
            return false;
        }
        if (o->tick_timer) {
            fprintf(stderr, "opprof record: --timer tick arms a timer in each thread of a launched program; "
                            "-p samples from outside: leave --timer out with -p\n");
            return false;
        }
        if (o->sample_count) {
            fprintf(stderr, "opprof record: -p samples on CPU time only; -c (sampling on an event) needs a "
                            "launched command: opprof record -e EVENT -c N -- CMD\n");
            return false;
        }
        if (has_command) {
            fprintf(stderr, "opprof record: -p %d attaches to a running process: give either -p PID or a "
                            "command to run, not both\n", (int)o->attach_pid);
            return false;
        }
    }
    return true;
}

int cmd_record(int argc, char **argv)
{
    static const struct option options[] = {
        {"freq", required_argument, NULL, 'F'},
        {"output", required_argument, NULL, 'o'},
        {"call-graph", required_argument, NULL, 'g'},
        {"quiet", no_argument, NULL, 'q'},
        {"event", required_argument, NULL, 'e'},
        {"count", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {"openmp-runtime", required_argument, NULL, 256}, /* threading/OpenMP */
        {"no-omp-swap", no_argument, NULL, 257},
        {"delay", required_argument, NULL, 258},
        {"duration", required_argument, NULL, 259},
        {"max-size", required_argument, NULL, 260},
        {"torch-shapes", no_argument, NULL, 261}, /* FLOPs per operator */
        {"pid", required_argument, NULL, 'p'},    /* attach mode */
        {"timer", required_argument, NULL, 262},
        {"no-openmp-regions", no_argument, NULL, 263}, /* threading/OpenMP */
        {NULL, 0, NULL, 0},
    };
    struct record_options o = {.frequency_hz = 1000, .call_graph = CALL_GRAPH_DWARF};
    int c;
    optind = 1;
    opterr = 0;
    /* '+': stop at the first non-option, which is the workload's command. */
    bool freq_given = false;
    while ((c = getopt_long(argc, argv, "+F:o:g:qe:c:hp:", options, NULL)) != -1) {
        switch (c) {
        case 'F': {
            char *end;
            long hz = strtol(optarg, &end, 10);
            if (*end || hz < 1 || hz > 20000) {
                fprintf(stderr, "opprof record: -F %s: give a sampling rate between 1 and 20000 Hz\n", optarg);
                return 2;
            }
            o.frequency_hz = (unsigned)hz;
            freq_given = true;
            break;
        }
        case 'c': { /* -c N: sample every N events of the first -e event */
            char *end;
            errno = 0;
            unsigned long long n = strtoull(optarg, &end, 10);
            if (errno || *end || end == optarg || optarg[0] == '-' || n < 1 || n > (1ull << 40)) {
                fprintf(stderr, "opprof record: -c %s: give the number of events per sample (1 or more, e.g. "
                                "-e cycles -c 1000000)\n", optarg);
                return 2;
            }
            o.sample_count = n;
            break;
        }
        case 'o':
            o.output_dir = optarg;
            break;
        case 'g':
            if (strcmp(optarg, "dwarf") == 0)
                o.call_graph = CALL_GRAPH_DWARF;
            else if (strcmp(optarg, "fp") == 0)
                o.call_graph = CALL_GRAPH_FP;
            else if (strcmp(optarg, "none") == 0)
                o.call_graph = CALL_GRAPH_NONE;
            else {
                fprintf(stderr, "opprof record: --call-graph %s: use dwarf, fp or none\n", optarg);
                return 2;
            }
            break;
        case 'q':
            o.quiet = true;
            break;
        case 'e':
            o.events = optarg;
            break;
        case 256: /* threading/OpenMP: --openmp-runtime auto|keep|PATH */
            if (strcmp(optarg, "auto") && strcmp(optarg, "keep") && optarg[0] != '/') {
                fprintf(stderr, "opprof record: --openmp-runtime %s: use auto, keep or an absolute path to libomp.so\n",
                        optarg);
                return 2;
            }
            o.openmp_runtime = optarg;
            break;
        case 257:
            o.openmp_runtime = "keep";
            break;
        case 258: /* --delay S */
        case 259: { /* --duration S */
            double *target = c == 258 ? &o.delay_s : &o.duration_s;
            if (parse_seconds(optarg, target) != 0) {
                fprintf(stderr, "opprof record: --%s %s: give a number of seconds > 0 (e.g. 2 or 0.5)\n",
                        c == 258 ? "delay" : "duration", optarg);
                return 2;
            }
            break;
        }
        case 260:
            if (parse_size(optarg, &o.max_size_bytes) != 0) {
                fprintf(stderr, "opprof record: --max-size %s: give a size such as 500M, 2G or 65536 "
                                "(at least 64K)\n", optarg);
                return 2;
            }
            break;
        case 261:
            o.torch_shapes = true;
            break;
        case 262: /* --timer perf|tick */
            if (strcmp(optarg, "perf") && strcmp(optarg, "tick")) {
                fprintf(stderr, "opprof record: --timer %s: use perf (the default) or tick\n", optarg);
                return 2;
            }
            o.tick_timer = strcmp(optarg, "tick") == 0;
            break;
        case 263: /* --no-openmp-regions */
            o.no_openmp_regions = true;
            break;
        case 'p': { /* attach mode */
            char *end;
            long pid = strtol(optarg, &end, 10);
            if (*end || end == optarg || pid < 1 || pid > 0x3fffffff) {
                fprintf(stderr, "opprof record: -p %s: give the process id of a running process\n", optarg);
                return 2;
            }
            o.attach_pid = (pid_t)pid;
            break;
        }
        case 'h':
            record_usage(stdout);
            return 0;
        default:
            if (optopt)
                fprintf(stderr, "opprof record: option -%c is unknown or lacks its value (see opprof record --help)\n", optopt);
            else
                fprintf(stderr, "opprof record: unknown option %s (see opprof record --help)\n", argv[optind - 1]);
            return 2;
        }
    }
    if (!options_agree(&o, freq_given, optind < argc))
        return 2;
    if (o.attach_pid)
        return record_attach(&o);
    if (optind >= argc) {
        fprintf(stderr, "opprof record: no command to run: opprof record [OPTIONS] -- CMD [ARGS]\n");
        return 2;
    }
    o.argv = argv + optind;
    return record_run(&o);
}
