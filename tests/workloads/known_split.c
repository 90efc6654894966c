/*
 * tests/workloads/known_split.c — a workload whose CPU-time split is known.
 *
 * Call chains (all noinline/noipa, no tail calls):
 *   main -> run_work -> phase_a -> spin_a     50 % of the work (5 units per round)
 *   main -> run_work -> phase_b -> spin_b     30 %             (3 units per round)
 *   main -> run_work -> phase_c -> spin_c     20 %             (2 units per round)
 * spin_c lives in the stripped shared library libsplit_stripped.so (see
 * libsplit.c). All three run SPLIT_KERNEL (split_kernel.c), the same loop
 * body, and the rounds interleave a/b/c in small chunks, so the 50/30/20 split
 * holds by construction whatever the clock frequency does. Threads run
 * worker_main -> run_work -> ... instead of main -> run_work.
 *
 * Usage: known_split [--threads N] [--fork | --exec] [--seconds S]
 *                    [--iterations N] [--crash-after S] [--sigkill-self-after S]
 *                    [--weights A:B:C] [--name-after S]
 *   --seconds S       about S seconds of CPU time per working thread (default 3);
 *                     calibrated by timing whole rounds at start, so the 5:3:2
 *                     ratio of iteration counts stays exact
 *   --iterations N    fixed work instead: N inner-loop iterations per working
 *                     thread (rounded down to whole rounds of 10 units)
 *   --threads N       run the work in N worker threads ("split-w0"...); the main
 *                     thread only calibrates and waits
 *   --fork            fork; the child does the work, the parent only waits
 *   --exec            fork and exec this program again (without --exec); the
 *                     exec'd child does the work, the parent only waits
 *   --crash-after S   do S seconds of work, then write to NULL (SIGSEGV)
 *   --sigkill-self-after S  do S seconds of work, then kill(getpid(), SIGKILL)
 *   --weights A:B:C   units of spin_a, spin_b, spin_c per round instead of
 *                     5:3:2 (whole numbers summing to 10): a second known split,
 *                     for comparing two profiles (opprof diff)
 *   --name-after S    with --threads: each worker spins S seconds of CPU time in
 *                     unnamed_spin before it names itself, so its first samples
 *                     come while it still has the process's name
 * The iteration counts are printed to stderr at the end. Exit status: 0, or
 * the child's status (128+signal when it died of a signal) in --fork/--exec.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "split_kernel.c"

#define NOINLINE __attribute__((noipa, noinline))

/* Mean inner-loop iterations per unit; a round is 10 units (5 a + 3 b + 2 c).
 * Volatile so no call site sees a constant (no constant-propagated clones). */
static volatile uint64_t unit_iterations = 20000;
#define UNITS_PER_ROUND 10
/* Units of spin_a, spin_b, spin_c per round (--weights); volatile for the
 * same reason as unit_iterations. */
static volatile uint64_t weight[3] = {5, 3, 2};

extern uint64_t spin_c(uint64_t n); /* libsplit_stripped.so */

uint64_t spin_a(uint64_t n);
uint64_t spin_b(uint64_t n);
uint64_t phase_a(uint64_t n);
uint64_t phase_b(uint64_t n);
uint64_t phase_c(uint64_t n);
uint64_t run_work(uint64_t rounds, uint64_t counts[3]);

static volatile uint64_t sink;

NOINLINE uint64_t spin_a(uint64_t n)
{
    uint64_t r;
    SPLIT_KERNEL(n, 0xc0ffee01u, r);
    return r;
}

NOINLINE uint64_t spin_b(uint64_t n)
{
    uint64_t r;
    SPLIT_KERNEL(n, 0xc0ffee02u, r);
    return r;
}

/* The phases do a little after the call so the call is never a tail call
 * (phase_X must be on the stack while spin_X runs). */
NOINLINE uint64_t phase_a(uint64_t n)
{
    uint64_t r = spin_a(n);
    sink += r;
    return r;
}

NOINLINE uint64_t phase_b(uint64_t n)
{
    uint64_t r = spin_b(n);
    sink += r;
    return r;
}

NOINLINE uint64_t phase_c(uint64_t n)
{
    uint64_t r = spin_c(n);
    sink += r;
    return r;
}

NOINLINE uint64_t run_work(uint64_t rounds, uint64_t counts[3])
{
    /* Each round is 5:3:2 exactly, but its length varies pseudo-randomly
     * (unit in [u0/2, 3*u0/2), mean u0, the same xorshift sequence in every
     * run and thread: fixed work stays fixed). A constant round period phase-
     * locks with a timer sampler (1 ms period vs ~0.3 ms rounds, sched-in
     * aligned to ticks on a busy machine) and perf itself then misread the
     * split by up to 3 pp; with varying rounds the error is only statistical. */
    uint64_t u0 = unit_iterations, acc = 0, x = 0x9e3779b97f4a7c15ull;
    for (uint64_t r = 0; r < rounds; r++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t u = u0 / 2 + x % u0;
        uint64_t na = weight[0] * u, nb = weight[1] * u, nc = weight[2] * u;
        acc += phase_a(na);
        acc += phase_b(nb);
        acc += phase_c(nc);
        counts[0] += na;
        counts[1] += nb;
        counts[2] += nc;
    }
    sink += acc;
    return acc;
}

/* ------------------------------------------------------------------------- */

static int opt_threads;
static int opt_fork, opt_exec;
static double opt_seconds = 3.0;
static uint64_t opt_iterations;
static double opt_crash_after = -1, opt_kill_after = -1;
static double opt_name_after;

static uint64_t total_counts[3];
static pthread_mutex_t counts_lock = PTHREAD_MUTEX_INITIALIZER;

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void add_counts(const uint64_t c[3])
{
    pthread_mutex_lock(&counts_lock);
    for (int i = 0; i < 3; i++)
        total_counts[i] += c[i];
    pthread_mutex_unlock(&counts_lock);
}

/* Rounds for `seconds` of CPU time per thread: time whole rounds (so the
 * calibration itself keeps the 5:3:2 split) for ~20 ms. */
static uint64_t calibrate_rounds(double seconds, int same_thread)
{
    uint64_t c[3] = {0, 0, 0}, done = 0, batch = 4;
    double t0 = thread_cpu_s(), t;
    for (;;) {
        run_work(batch, c);
        done += batch;
        t = thread_cpu_s() - t0;
        if (t >= 0.02)
            break;
        batch *= 2;
    }
    add_counts(c);
    double per_round = t / done;
    /* When this thread goes on to do the work, calibration counts as part of it. */
    double want = seconds / per_round - (same_thread ? done : 0);
    if (want < 1)
        want = 1;
    fprintf(stderr, "known_split: calibration %" PRIu64 " rounds in %.1f ms (%.1f us/round)\n",
            done, t * 1e3, per_round * 1e6);
    return (uint64_t)want;
}

struct worker {
    pthread_t th;
    int index;
    uint64_t rounds;
    uint64_t counts[3];
    double cpu;
};

/* --name-after: CPU time before the worker names itself. */
static __attribute__((noinline)) void unnamed_spin(double seconds)
{
    double t0 = thread_cpu_s();
    while (thread_cpu_s() - t0 < seconds)
        for (int i = 0; i < 10000; i++)
            sink += (uint64_t)i;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char name[16];
    snprintf(name, sizeof name, "split-w%d", w->index);
    if (opt_name_after > 0)
        unnamed_spin(opt_name_after);
    pthread_setname_np(pthread_self(), name);
    double t0 = thread_cpu_s();
    sink += run_work(w->rounds, w->counts);
    w->cpu = thread_cpu_s() - t0;
    add_counts(w->counts);
    return NULL;
}

static void print_counts(const char *what, const uint64_t c[3], double cpu, double wall)
{
    fprintf(stderr,
            "known_split[%d]: %s spin_a=%" PRIu64 " spin_b=%" PRIu64 " spin_c=%" PRIu64
            " iterations (%d:%d:%d) cpu=%.3fs wall=%.3fs\n",
            (int)getpid(), what, c[0], c[1], c[2], (int)weight[0], (int)weight[1], (int)weight[2], cpu, wall);
}

/* The process that does the work: calibrate (unless fixed work), run in this
 * thread or in workers, then crash/kill itself if asked. */
static int do_work(void)
{
    double w0 = wall_s(), c0 = thread_cpu_s();
    double seconds = opt_seconds;
    if (opt_crash_after >= 0)
        seconds = opt_crash_after;
    else if (opt_kill_after >= 0)
        seconds = opt_kill_after;

    uint64_t rounds;
    uint64_t round_iters = unit_iterations * UNITS_PER_ROUND;
    if (opt_iterations) {
        rounds = opt_iterations / round_iters;
        if (rounds == 0)
            rounds = 1;
    } else {
        rounds = calibrate_rounds(seconds, opt_threads == 0);
    }

    if (opt_threads > 0) {
        struct worker *ws = calloc(opt_threads, sizeof *ws);
        if (!ws) {
            perror("known_split: calloc");
            return 2;
        }
        for (int i = 0; i < opt_threads; i++) {
            ws[i].index = i;
            ws[i].rounds = rounds;
            int e = pthread_create(&ws[i].th, NULL, worker_main, &ws[i]);
            if (e) {
                fprintf(stderr, "known_split: pthread_create: %s\n", strerror(e));
                return 2;
            }
        }
        for (int i = 0; i < opt_threads; i++) {
            pthread_join(ws[i].th, NULL);
            char what[32];
            snprintf(what, sizeof what, "thread %d", i);
            print_counts(what, ws[i].counts, ws[i].cpu, wall_s() - w0);
        }
        free(ws);
    } else {
        uint64_t c[3] = {0, 0, 0};
        sink += run_work(rounds, c);
        add_counts(c);
    }

    if (opt_crash_after >= 0) {
        print_counts("before SIGSEGV, total", total_counts, thread_cpu_s() - c0, wall_s() - w0);
        int *volatile null_ptr = NULL; /* opaque to the compiler: a real store, SIGSEGV */
        fflush(NULL);
        *null_ptr = 1;
    }
    if (opt_kill_after >= 0) {
        print_counts("before SIGKILL, total", total_counts, thread_cpu_s() - c0, wall_s() - w0);
        fflush(NULL);
        kill(getpid(), SIGKILL);
        pause();
    }
    print_counts("total", total_counts, thread_cpu_s() - c0, wall_s() - w0);
    return 0;
}

static int status_to_exit(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: known_split [--threads N] [--fork | --exec] [--seconds S] [--iterations N]\n"
               "                   [--crash-after S] [--sigkill-self-after S] [--weights A:B:C] [--name-after S]\n");
}

static double parse_double(const char *opt, const char *v)
{
    char *end;
    if (!v) {
        fprintf(stderr, "known_split: %s needs a value\n", opt);
        exit(2);
    }
    errno = 0;
    double d = strtod(v, &end);
    if (errno || *end || d < 0) {
        fprintf(stderr, "known_split: bad value for %s: %s\n", opt, v);
        exit(2);
    }
    return d;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--threads")) {
            opt_threads = (int)parse_double(a, v), i++;
        } else if (!strcmp(a, "--fork")) {
            opt_fork = 1;
        } else if (!strcmp(a, "--exec")) {
            opt_exec = 1;
        } else if (!strcmp(a, "--seconds")) {
            opt_seconds = parse_double(a, v), i++;
        } else if (!strcmp(a, "--iterations")) {
            opt_iterations = (uint64_t)parse_double(a, v), i++;
        } else if (!strcmp(a, "--crash-after")) {
            opt_crash_after = parse_double(a, v), i++;
        } else if (!strcmp(a, "--sigkill-self-after")) {
            opt_kill_after = parse_double(a, v), i++;
        } else if (!strcmp(a, "--name-after")) {
            opt_name_after = parse_double(a, v), i++;
        } else if (!strcmp(a, "--weights")) {
            unsigned wa, wb, wc;
            char end;
            if (!v || sscanf(v, "%u:%u:%u%c", &wa, &wb, &wc, &end) != 3 || wa + wb + wc != UNITS_PER_ROUND) {
                fprintf(stderr, "known_split: --weights needs A:B:C, whole numbers summing to %d\n",
                        UNITS_PER_ROUND);
                return 2;
            }
            weight[0] = wa, weight[1] = wb, weight[2] = wc, i++;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "known_split: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }

    if (!opt_fork && !opt_exec)
        return do_work();

    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("known_split: fork");
        return 2;
    }
    if (pid == 0) {
        if (opt_fork)
            exit(do_work());
        /* --exec: run this program again without --exec. */
        char **nargv = calloc(argc + 1, sizeof *nargv);
        int n = 0;
        for (int i = 0; i < argc; i++)
            if (i == 0 || strcmp(argv[i], "--exec"))
                nargv[n++] = argv[i];
        nargv[n] = NULL;
        execv("/proc/self/exe", nargv);
        perror("known_split: execv /proc/self/exe");
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("known_split: waitpid");
            return 2;
        }
    }
    fprintf(stderr, "known_split[%d]: parent: child %d finished, status %d\n", (int)getpid(),
            (int)pid, status_to_exit(status));
    return status_to_exit(status);
}
