/*
 * cli/opprof.c — `opprof COMMAND ...`: dispatches to one cmd_*.c per subcommand.
 *
 * `opprof --help` shows every command with all its options in brief;
 * `opprof help CMD` is `opprof CMD --help` (the command's own, full help).
 * The man page (docs/opprof.1) says the same at length: keep the three in step
 * (tests/integration/test_help.sh checks that every option of cli/cmd_*.c is in
 * all of them).
 */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "cli/cli.h"

static void usage(FILE *out)
{
    fputs("usage: opprof COMMAND [OPTIONS]\n"
          "\n"
          "  record [-F HZ] [-e EVENTS [-c N]] [-o DIR] [-g|--call-graph dwarf|fp|none] [-q]\n"
          "         [--delay S] [--duration S] [--max-size SIZE] [--timer perf|tick]\n"
          "         [--openmp-runtime auto|keep|PATH] [--no-omp-swap] [--no-openmp-regions] [--torch-shapes]\n"
          "         -- CMD [ARGS]\n"
          "  record -p PID [-F HZ] [-o DIR] [--delay S] [--duration S] [--max-size SIZE] [-q]\n"
          "         run CMD (or attach to process PID) and sample every thread and child\n"
          "         process (writes opprof.NNN/; -o prof.%r: one result per rank)\n"
          "  report [DIR...] [--sort self|total|samples|name] [--limit N] [--format text|csv|json]\n"
          "         [--group-by function|module|thread|process|op|line|python|kernel|rank]\n"
          "         [--callers NAME] [--callees NAME] [--threading] [--memory] [--ranks] [--torch-shapes] [-o FILE]\n"
          "         [--pid PID,...] [--tid TID,...] [--comm NAME,...]\n"
          "         hotspot tables from result directories (the newest opprof.NNN by default)\n"
          "  export [DIR...] [--flamegraph F.svg] [--inverted] [--title TEXT] [--width PX] [--minwidth PX|N%]\n"
          "         [--colors PALETTE] [--countname NAME] [--fold-startup] [--folded F] [--speedscope F.json]\n"
          "         [--chrome-trace F.json] [--pstats F.pstats] [--html F.html] [--pprof F.pb.gz] [--callgrind F]\n"
          "         write result directories for other viewers (several DIRs: one Chrome trace)\n"
          "  stat [-e EVENTS] [-M|--metrics cpi|memory|cache] [-o FILE] [--list] -- CMD [ARGS]\n"
          "         count events over the whole run (software events always; PMU where present)\n"
          "  sweep --op OP --shapes S1,S2 [--dtype L] [--threads L] [--warmup N] [--repeat N]\n"
          "        [--min-time S] [--python PATH] [--timeout S] [-e EVENTS] [-M SET]\n"
          "        [--plot-metric gflops|gbps|time] [-o DIR] [--format text|csv|json]\n"
          "  sweep --param NAME=V1,V2 [--param ...] [options] -- CMD {NAME} [ARGS]\n"
          "         microbenchmark an operator (or a command) across shapes/values, one profile each\n"
          "  diff A B [--format text|csv|json] [--limit N] [--group-by op|function] [--all-samples]\n"
          "         [--flamegraph F.svg]\n"
          "  diff --sweep SWEEPDIR ROW ROW [options]\n"
          "         per-operator self time and share of two result directories or sweep rows\n"
          "\n"
          "  opprof help COMMAND      every option of COMMAND, explained (= opprof COMMAND --help)\n"
          "  opprof --version\n"
          "  man opprof               the manual\n",
          out);
}

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
};

static const struct command commands[] = {
    {"record", cmd_record}, {"report", cmd_report}, {"export", cmd_export},
    {"stat", cmd_stat},     {"sweep", cmd_sweep},   {"diff", cmd_diff},
};

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* `opprof help [COMMAND]`: the command's own help, exactly as `opprof COMMAND
 * --help` prints it (the command's parser is handed that argv). */
static int help(int argc, char **argv)
{
    if (argc < 2) {
        usage(stdout);
        return 0;
    }
    const struct command *c = find_command(argv[1]);
    if (c == NULL) {
        fprintf(stderr, "opprof help: unknown command '%s' (commands: record, report, export, stat, sweep, diff)\n",
                argv[1]);
        return 2;
    }
    char *sub_argv[] = {argv[1], "--help", NULL};
    return c->run(2, sub_argv);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    const struct command *c = find_command(cmd);
    if (c != NULL)
        return c->run(argc - 1, argv + 1);
    if (strcmp(cmd, "help") == 0)
        return help(argc - 1, argv + 1);
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("opprof %s\n", PACKAGE_VERSION);
        return 0;
    }
    fprintf(stderr,
            "opprof: unknown command '%s' (commands: record, report, export, stat, sweep, diff; see opprof --help)\n",
            cmd);
    return 2;
}
