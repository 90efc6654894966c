/*
 * cli/cli.h — one thin cmd_*.c per subcommand; each parses its own options and
 * calls into the stage folders.
 */
#ifndef OPPROF_CLI_H
#define OPPROF_CLI_H

int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_stat(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_sweep(int argc, char **argv); /* sweeps and diffs */
int cmd_diff(int argc, char **argv);

#endif
