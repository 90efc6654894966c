/*
 * cli/opprof.c — `opprof COMMAND ...`: dispatches to one cmd_*.c per subcommand.
 */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "cli/cli.h"

static void usage(FILE *out)
{
    fputs("usage: opprof COMMAND [OPTIONS]\n"
          "\n"
          "  record [-F HZ] [-o DIR] [--call-graph dwarf|fp|none] [-q] -- CMD [ARGS]\n"
          "         run CMD and sample every thread and child process (writes opprof.NNN/)\n"
          "  report [DIR] [--sort self|total|samples|name] [--group-by function|module|thread|process]\n"
          "         [--limit N] [--format text|csv|json] [--callers NAME] [--callees NAME]\n"
          "         hotspot tables from a result directory (the newest opprof.NNN by default)\n"
          "  export [DIR...] [--flamegraph F.svg] [--inverted] [--folded F] [--speedscope F.json]\n"
          "         [--chrome-trace F.json] [--pstats F.pstats] [--html F.html]\n"
          "         write a result directory for other viewers (several DIRs: one Chrome trace)\n"
          "  stat [-e EVENTS] [--metrics cpi|memory|cache] [-o FILE] -- CMD [ARGS]\n"
          "         count events over the whole run (software events always; PMU where present)\n"
          "  sweep --op OP --shapes S1,S2 [--dtype L] [--threads L] [-o DIR] | --param N=V1,V2 -- CMD\n"
          "         microbenchmark an operator (or a command) across shapes/values, one profile each\n"
          "  diff A B [--format text|csv|json]\n"
          "         per-operator self time and share of two result directories\n"
          "\n"
          "  opprof COMMAND --help   options of one command\n"
          "  opprof --version\n",
          out);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "record") == 0)
        return cmd_record(argc - 1, argv + 1);
    if (strcmp(cmd, "report") == 0)
        return cmd_report(argc - 1, argv + 1);
    if (strcmp(cmd, "stat") == 0)
        return cmd_stat(argc - 1, argv + 1);
    if (strcmp(cmd, "export") == 0)
        return cmd_export(argc - 1, argv + 1);
    if (strcmp(cmd, "sweep") == 0) /* sweeps and diffs */
        return cmd_sweep(argc - 1, argv + 1);
    if (strcmp(cmd, "diff") == 0)
        return cmd_diff(argc - 1, argv + 1);
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("opprof %s\n", PACKAGE_VERSION);
        return 0;
    }
    fprintf(stderr, "opprof: unknown command '%s' (commands: record, report, export, stat, sweep, diff; see opprof --help)\n", cmd);
    return 2;
}
