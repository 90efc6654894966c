/*
 * tests/workloads/acct_probe.c — CPU time opprof cannot sample, on purpose
 * (test_accounting.sh, issue 18 items 5 and 7):
 *   acct_probe blocked SECONDS   two threads (main + one) each spin SECONDS of
 *                                their own CPU time with SIGTRAP blocked;
 *   acct_probe short N           N threads one after another, each spinning
 *                                ~50 us of CPU time (shorter than a 1 ms period);
 *   acct_probe sigint SECONDS    ignores SIGINT and spins SECONDS of CPU time;
 *   acct_probe forks N           N children one after another, each exiting at once.
 * Prints the process's own CPU time (CLOCK_PROCESS_CPUTIME_ID) at the end, so
 * the test compares opprof's accounting with the process's, not wall time.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double cpu_now(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static volatile unsigned long sink;

/* Spins until this thread has used `seconds` of CPU time. */
static void spin_cpu(double seconds)
{
    double until = cpu_now(CLOCK_THREAD_CPUTIME_ID) + seconds;
    while (cpu_now(CLOCK_THREAD_CPUTIME_ID) < until)
        for (int i = 0; i < 1000; i++)
            sink += (unsigned long)i;
}

static void *spinner(void *arg)
{
    spin_cpu(*(double *)arg);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: acct_probe blocked|short|sigint N\n");
        return 2;
    }
    double arg = atof(argv[2]);
    if (strcmp(argv[1], "blocked") == 0) {
        sigset_t trap;
        sigemptyset(&trap);
        sigaddset(&trap, SIGTRAP);
        pthread_sigmask(SIG_BLOCK, &trap, NULL); /* the new thread inherits the mask */
        pthread_t t;
        pthread_create(&t, NULL, spinner, &arg);
        spin_cpu(arg);
        pthread_join(t, NULL);
    } else if (strcmp(argv[1], "short") == 0) {
        double each = 50e-6;
        for (long i = 0; i < (long)arg; i++) {
            pthread_t t;
            if (pthread_create(&t, NULL, spinner, &each) != 0)
                return 1;
            pthread_join(t, NULL);
        }
    } else if (strcmp(argv[1], "sigint") == 0) {
        signal(SIGINT, SIG_IGN);
        /* the test sends SIGINT after this line, not after a fixed sleep */
        fprintf(stderr, "acct_probe: ignoring SIGINT\n");
        spin_cpu(arg);
    } else if (strcmp(argv[1], "forks") == 0) {
        for (long i = 0; i < (long)arg; i++) {
            pid_t c = fork();
            if (c == 0)
                exit(0);
            if (c < 0)
                return 1;
            waitpid(c, NULL, 0);
        }
    } else {
        return 2;
    }
    printf("process_cpu_s=%.6f\n", cpu_now(CLOCK_PROCESS_CPUTIME_ID));
    return 0;
}
