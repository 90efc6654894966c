/*
 * sampler/record/record_internal.h — between the parts of the launcher (opprof
 * record). Not part of sampler/'s interface (sampler/sampler.h).
 */
#ifndef OPPROF_LAUNCH_INTERNAL_H
#define OPPROF_LAUNCH_INTERNAL_H

#include <stdio.h>

#include "sampler/record/record.h"

/* launch_openmp.c: the OpenMP runtime the workload gets. Choose once before
 * the info file is first written; write_info adds the openmp_* keys; the
 * child calls setup_env before exec (OMP_TOOL_LIBRARIES, opt-in libomp preload). */
void launch_openmp_choose(const struct record_options *o);
void launch_openmp_write_info(FILE *f);
/* record's closing summary: one line when a runtime was swapped in */
void launch_openmp_print_summary(FILE *f);
void launch_openmp_setup_env(const char *agent);

/* launch_torch_shapes.c: record --torch-shapes. find: the hook's directory
 * (0, or -1 after a message); setup_env in the child puts it first on
 * PYTHONPATH; print_summary: the closing line that says the program ran with
 * a hook, and what the hook cost (cpu_ns: the workload's CPU time, 0: unknown). */
int launch_torch_shapes_find(char *out, size_t outlen);
void launch_torch_shapes_setup_env(const char *dir);
void launch_torch_shapes_print_summary(FILE *f, const char *absdir, uint64_t cpu_ns);

/* launch_signals.c: signals meant to stop the workload reach it once. start
 * after the fork (installs the handlers, starts a sentinel process in the
 * process group, and blocks those signals but inside sleep); poll from the
 * wait loop (passes on, after the sentinel's word, a signal that was sent to
 * record alone); sleep between two polls, until pidfd (the workload's, -1:
 * none) is readable, such a signal arrives or max_ns pass (UINT64_MAX: no
 * limit); stop once the workload ended. received: the last such signal
 * record got (0: none); route: how it reached the workload. */
enum launch_signal_route {
    LAUNCH_SIGNAL_NONE,
    LAUNCH_SIGNAL_TERMINAL,  /* from the terminal: the workload got it directly */
    LAUNCH_SIGNAL_GROUP,     /* kill() to the process group: the workload got it directly */
    LAUNCH_SIGNAL_FORWARDED, /* kill() to record alone: record passed it on */
};
#include <sys/types.h>
void launch_signals_start(pid_t child);
void launch_signals_poll(void);
void launch_signals_sleep(int pidfd, uint64_t max_ns);
void launch_signals_stop(void);
int launch_signals_received(void);
enum launch_signal_route launch_signals_route(void);

#endif
