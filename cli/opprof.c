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
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("opprof %s\n", PACKAGE_VERSION);
        return 0;
    }
    fprintf(stderr, "opprof: unknown command '%s' (commands: record, report; see opprof --help)\n", cmd);
    return 2;
}
