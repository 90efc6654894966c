/*
 * tests/workloads/unwind_deep.c — stacks that exercise a CFI unwinder
 * (tests/integration/test_unwind.sh, bench/unwind_callgrind.sh).
 *
 * Built with -O2 -fomit-frame-pointer: no frame pointers, so every frame
 * needs CFI. The shapes a table unwinder must get right:
 *   - recursion through three functions with different frame sizes
 *     (CFA = RSP + small, RSP + 4 KB, RSP + 70 KB: a large offset);
 *   - a function using alloca (GCC then keeps RBP as the CFA base even with
 *     -fomit-frame-pointer: CFA = RBP + 16, and the caller's RBP is saved);
 *   - a workload signal handler doing work (--signals): its stacks go through
 *     the kernel's signal frame (__restore_rt, whose CFI is DWARF
 *     expressions): the table unwinder hands those to libunwind, counted.
 *
 * usage: unwind_deep [--seconds S] [--threads N] [--signals]
 * Prints the work done per shape on stderr.
 */
#include <alloca.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static volatile unsigned long sink;
static double seconds = 2.0;
static int use_signals;

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) static unsigned long spin(unsigned long n)
{
    unsigned long x = n;
    for (unsigned long i = 0; i < 20000; i++)
        x = x * 6364136223846793005ul + 1442695040888963407ul;
    return x;
}

__attribute__((noinline)) static unsigned long level_small(int depth, unsigned long acc);
__attribute__((noinline)) static unsigned long level_page(int depth, unsigned long acc);
__attribute__((noinline)) static unsigned long level_huge(int depth, unsigned long acc);

/* alloca: a frame-pointer-based CFA in code built without frame pointers. */
__attribute__((noinline)) static unsigned long level_alloca(int depth, unsigned long acc)
{
    size_t n = 64 + (acc & 255);
    volatile char *buf = alloca(n);
    buf[0] = (char)acc;
    buf[n - 1] = (char)depth;
    unsigned long r = depth > 0 ? level_small(depth - 1, acc + buf[0]) : spin(acc);
    return r + (unsigned long)buf[n - 1];
}

__attribute__((noinline)) static unsigned long level_small(int depth, unsigned long acc)
{
    unsigned long r = depth > 0 ? level_page(depth - 1, acc + 1) : spin(acc);
    return r ^ (unsigned long)depth;
}

__attribute__((noinline)) static unsigned long level_page(int depth, unsigned long acc)
{
    volatile char page[4096];
    page[acc & 4095] = (char)depth;
    unsigned long r = depth > 0 ? level_huge(depth - 1, acc + 2) : spin(acc);
    return r + (unsigned long)page[acc & 4095];
}

__attribute__((noinline)) static unsigned long level_huge(int depth, unsigned long acc)
{
    volatile char big[70000];
    big[acc % sizeof big] = (char)depth;
    unsigned long r = depth > 0 ? level_alloca(depth - 1, acc + 3) : spin(acc);
    return r - (unsigned long)big[acc % sizeof big];
}

static void on_signal(int sig)
{
    (void)sig;
    sink += level_small(3, sink); /* work inside the handler: sampled there too */
}

static void *worker(void *arg)
{
    (void)arg;
    double end = cpu_now() + seconds;
    unsigned long rounds = 0;
    while (cpu_now() < end) {
        sink += level_small((int)(rounds % 12), rounds);
        rounds++;
    }
    return (void *)rounds;
}

int main(int argc, char **argv)
{
    int threads = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--signals") == 0)
            use_signals = 1;
        else {
            fprintf(stderr, "usage: unwind_deep [--seconds S] [--threads N] [--signals]\n");
            return 2;
        }
    }
    if (threads < 1 || threads > 64)
        threads = 1;
    if (use_signals) {
        /* SIGALRM every 2 ms of wall time, handled on whichever thread. */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGALRM, &sa, NULL);
        struct itimerval it = {{0, 2000}, {0, 2000}};
        setitimer(ITIMER_REAL, &it, NULL);
    }
    pthread_t tid[64];
    for (int i = 1; i < threads; i++)
        pthread_create(&tid[i], NULL, worker, NULL);
    unsigned long total = (unsigned long)worker(NULL);
    for (int i = 1; i < threads; i++) {
        void *r;
        pthread_join(tid[i], &r);
        total += (unsigned long)r;
    }
    if (use_signals) {
        struct itimerval off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_REAL, &off, NULL);
    }
    fprintf(stderr, "unwind_deep: %lu rounds on %d threads\n", total, threads);
    return 0;
}
