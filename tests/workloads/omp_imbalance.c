/*
 * tests/workloads/omp_imbalance.c — GNU libgomp regions with a known split
 * (tests/integration/test_gomp.sh). Run with OMP_NUM_THREADS=2.
 *
 *   omp_imbalance imbalance SECONDS  back-to-back regions; thread 0 does 3x
 *                                    the work of thread 1, which then waits at
 *                                    the closing barrier. With
 *                                    OMP_WAIT_POLICY=active both CPUs stay
 *                                    busy: bodies 4/6 = 67 %, runtime 33 %.
 *   omp_imbalance gaps SECONDS       balanced regions (W each) separated by a
 *                                    serial gap of W on the opener, while the
 *                                    worker waits in libgomp: bodies 50 %,
 *                                    serial 25 %, runtime 25 %.
 *
 *
 * Also built as omp_hashed (linked against libgomp copied under a pip-wheel
 * style name, libgomp-3c8a9d1e.so.1) and libimbalance_omp.so (dlopen'ed late
 * by omp_late.c): see tests/workloads/Makefile.inc.
 *
 * Work is measured in CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID)
 * so the split holds on a loaded machine. Before exiting it prints its own
 * /proc/self/maps lines naming an OpenMP runtime to stderr, so a test can
 * check the program ran with the same runtime with and without opprof.
 */
#ifdef OMP_AS_LIBRARY
/* Built as a library that omp_late dlopens after start-up (RTLD_LOCAL, as
 * Python imports torch): the same program, entered by name. */
#define main omp_imbalance_main
int omp_imbalance_main(int argc, char **argv);
#endif
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNIT_NS 2000000ull /* 2 ms of CPU time: long enough to be sampled */

static double sink;
static unsigned long long body_cpu_ns, serial_cpu_ns; /* measured truth */
static unsigned long long region_wall_ns; /* the wall time of the regions after the first, measured around them */
/* The first regions' CLOCK_MONOTONIC times around the call that opens each:
 * the profiler's times for region k (opprof's region ids count from 1 in a
 * process) must lie inside. */
#define TIMED_REGIONS 64
static unsigned long long region_from_ns[TIMED_REGIONS], region_to_ns[TIMED_REGIONS];

static unsigned long long thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* Burns ns of this thread's CPU time; noinline so samples name it. */
static unsigned long long burn_cpu(unsigned long long ns)
{
    unsigned long long start = thread_cpu_ns(), now;
    double x = 1.0;
    while ((now = thread_cpu_ns()) < start + ns)
        for (int i = 0; i < 2000; i++)
            x = x * 1.0000001 + 1e-9;
    sink += x; /* racy between threads, but only keeps the loop alive */
    return now - start;
}

__attribute__((noinline)) static void body_work(unsigned long long ns)
{
    unsigned long long used = burn_cpu(ns);
    __atomic_fetch_add(&body_cpu_ns, used, __ATOMIC_RELAXED);
}

__attribute__((noinline)) static void serial_work(unsigned long long ns) { serial_cpu_ns += burn_cpu(ns); }

static void print_runtime_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *path = strchr(line, '/');
        const char *base = path ? strrchr(path, '/') + 1 : "";
        /* libgomp*, libomp.so*, libiomp*: the runtimes, by file name */
        if (path && (!strncmp(base, "libgomp", 7) || !strncmp(base, "libomp.", 7) || !strncmp(base, "libiomp", 7)) &&
            strstr(line, " r-xp ")) /* one line per runtime: its code */
            fprintf(stderr, "omp-runtime-map: %s", path);
    }
    if (f)
        fclose(f);
}

/* The region opener: named so the report can charge worker samples to it. */
__attribute__((noinline)) static void imbalanced_region(void)
{
#pragma omp parallel
    body_work(omp_get_thread_num() == 0 ? 3 * UNIT_NS : UNIT_NS);
}

__attribute__((noinline)) static void balanced_region(void)
{
#pragma omp parallel
    body_work(UNIT_NS);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "imbalance";
    double secs = argc > 2 ? atof(argv[2]) : 2.0;
    struct timespec t0, t, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    long regions = 0;
    do {
        struct timespec r0, r1;
        clock_gettime(CLOCK_MONOTONIC, &r0);
        if (strcmp(mode, "gaps") == 0)
            balanced_region();
        else
            imbalanced_region();
        clock_gettime(CLOCK_MONOTONIC, &r1);
        if (regions > 0) /* the first call also pays a profiler's one-time set-up, outside its region */
            region_wall_ns += (unsigned long long)((r1.tv_sec - r0.tv_sec) * 1000000000ll + (r1.tv_nsec - r0.tv_nsec));
        if (regions < TIMED_REGIONS) {
            region_from_ns[regions] = (unsigned long long)r0.tv_sec * 1000000000ull + (unsigned long long)r0.tv_nsec;
            region_to_ns[regions] = (unsigned long long)r1.tv_sec * 1000000000ull + (unsigned long long)r1.tv_nsec;
        }
        if (strcmp(mode, "gaps") == 0)
            serial_work(UNIT_NS);
        regions++;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) < secs);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    /* The split as this run really had it (a loaded machine makes the waiting
     * thread spin longer than the nominal 33 %): CPU in bodies, serial code,
     * and the rest, which is the runtime's (spin, barrier, fork/join). */
    double cpu = (double)(c1.tv_sec - c0.tv_sec) * 1e9 + (double)(c1.tv_nsec - c0.tv_nsec);
    fprintf(stderr, "omp-truth: body %.4f serial %.4f runtime %.4f\n", body_cpu_ns / cpu, serial_cpu_ns / cpu,
            1 - (body_cpu_ns + serial_cpu_ns) / cpu);
    /* A region's wall time from the call to the return of its opener, the
     * first region left out: what the report's average region duration
     * should come to, less the us or so of the call outside GOMP_parallel's
     * begin and end. */
    fprintf(stderr, "omp-region-wall: %.1f us over %ld regions after the first\n",
            regions > 1 ? region_wall_ns / 1e3 / (double)(regions - 1) : 0.0, regions > 1 ? regions - 1 : 0);
    for (long k = 0; k < regions && k < TIMED_REGIONS; k++)
        fprintf(stderr, "omp-region-time: %ld %llu %llu\n", k + 1, region_from_ns[k], region_to_ns[k]);
    print_runtime_maps();
    printf("omp_imbalance %s: %ld regions, %d threads (%g)\n", mode, regions, omp_get_max_threads(), sink);
    return 0;
}
