/*
 * bench/null_sampler.c — the floor under any in-process sampler: the same
 * timer as opprof's agent (one task-clock perf event per process, inherited
 * by its threads, a synchronous SIGTRAP to the sampled thread at each
 * overflow) with a handler that only counts. bench/run.sh preloads it into
 * the workload (OPPROF_NULL_PERIOD_NS, default 1 ms) and prints opprof's CPU
 * beside it: what is left is what opprof's handler and writer add.
 *
 * On a virtual machine the timer interrupt, the signal frame and sigreturn
 * are most of the cost of sampling, and perf record's own timer column pays
 * its ring buffer and its perf process on top. This column pays neither.
 *
 * Built by bench/run.sh (not installed). At exit it prints its count to
 * stderr, so the bench can check that it sampled at all.
 */
#include "config.h" /* _GNU_SOURCE; HAVE_STRUCT_PERF_EVENT_ATTR_SIG_DATA for perf_attr.h */

#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sampler/common/perf_attr.h"

static volatile unsigned long samples; /* approximate with threads: a floor needs no more */

static void on_sigtrap(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    samples = samples + 1;
}

__attribute__((constructor)) static void null_sampler_start(void)
{
    const char *p = getenv("OPPROF_NULL_PERIOD_NS");
    struct opr_perf_attr full;
    opr_perf_attr_init(&full);
    full.attr.type = PERF_TYPE_SOFTWARE;
    full.attr.config = PERF_COUNT_SW_TASK_CLOCK;
    full.attr.sample_period = p && *p ? strtoull(p, NULL, 10) : 1000000;
    full.attr.inherit = 1;
    opr_perf_attr_sigtrap(&full, 0);
    full.attr.exclude_hv = 1;
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_sigaction = on_sigtrap;
    act.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&act.sa_mask);
    if (sigaction(SIGTRAP, &act, NULL) != 0 || syscall(SYS_perf_event_open, &full, 0, -1, -1, PERF_FLAG_FD_CLOEXEC) < 0)
        fprintf(stderr, "null_sampler: not sampling (%m)\n");
}

__attribute__((destructor)) static void null_sampler_stop(void)
{
    fprintf(stderr, "null_sampler: %lu samples\n", samples);
}
