/*
 * tests/workloads/mem_grow.c — known memory growth in one function, released
 * in another (test_memory.sh: RSS growth charged to what ran).
 *
 *   main -> spin_before             ~S s of arithmetic, no new memory
 *   main -> grow_here               ~50 ms of arithmetic first, then maps MB
 *                                   MiB of anonymous memory and writes every
 *                                   page, one MiB at a time with ~D ms of
 *                                   arithmetic after each, then holds it while
 *                                   spinning ~S s: the RSS grows by MB MiB,
 *                                   all of it while grow_here runs
 *   main -> release_here            unmaps it (the RSS falls by MB MiB)
 *   main -> spin_after              ~S s of arithmetic again
 * Transparent huge pages are refused for the mapping (MADV_NOHUGEPAGE) so
 * the RSS grows page by page, as the writes go. Spinning is measured in the
 * thread's CPU time, so a busy machine stretches the run but not the work.
 *
 * Usage: mem_grow [--mb N] [--spin-seconds S] [--ms-per-mb D]
 *        (defaults 256 MiB, 0.3 s, 3 ms)
 * Prints to stderr "mem_grow: mb=N grown_bytes=B maxrss_kb=K", where K is
 * the process's own getrusage ru_maxrss at exit (the kernel's peak RSS).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static volatile double sink;

/* Global, so the report names them as written here. */
void spin_before(double s);
void spin_after(double s);
char *grow_here(size_t mb, double ms_per_mb, double hold_s);
void release_here(char *p, size_t mb);

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Arithmetic until the thread has used `seconds` more CPU time. Inlined into
 * each caller, so the caller is the sampled function. */
static inline __attribute__((always_inline)) void spin_for(double seconds)
{
    double until = thread_cpu_s() + seconds, x = 1.0;
    while (thread_cpu_s() < until)
        for (int i = 0; i < 20000; i++)
            x = x * 1.0000001 + 1e-9;
    sink = x;
}

__attribute__((noinline)) void spin_before(double s) { spin_for(s); }
__attribute__((noinline)) void spin_after(double s) { spin_for(s); }

__attribute__((noinline)) char *grow_here(size_t mb, double ms_per_mb, double hold_s)
{
    size_t len = mb << 20;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mem_grow: mmap");
        exit(2);
    }
    (void)madvise(p, len, MADV_NOHUGEPAGE);
    /* Growth is charged per reading interval (~10 ms) to the samples in it.
     * Without this lead-in, the interval where spin_before ends and the
     * writes start shared its growth (up to 3 MiB a 10 ms, more when a busy
     * machine delays a reading) with spin_before, which allocates nothing
     * (test_memory.sh: 1.0-2.0 MiB). With it, that interval has no growth. */
    spin_for(0.05);
    long page = sysconf(_SC_PAGESIZE);
    for (size_t m = 0; m < mb; m++) {
        for (size_t off = 0; off < (1u << 20); off += (size_t)page)
            ((volatile char *)p)[(m << 20) + off] = 1;
        spin_for(ms_per_mb / 1000.0);
    }
    spin_for(hold_s); /* hold it: the peak lasts long enough to be read */
    return p;
}

__attribute__((noinline)) void release_here(char *p, size_t mb)
{
    munmap(p, mb << 20);
}

int main(int argc, char **argv)
{
    size_t mb = 256;
    double spin_s = 0.3, ms_per_mb = 3.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--mb") == 0)
            mb = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--spin-seconds") == 0)
            spin_s = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--ms-per-mb") == 0)
            ms_per_mb = atof(argv[i + 1]);
    }
    spin_before(spin_s);
    char *p = grow_here(mb, ms_per_mb, spin_s);
    release_here(p, mb);
    spin_after(spin_s);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr, "mem_grow: mb=%zu grown_bytes=%zu maxrss_kb=%ld\n", mb, mb << 20, ru.ru_maxrss);
    return 0;
}
