/*
 * tests/workloads/fault_split.c — known page faults in one function, none in
 * another (test_counters.sh: per-sample counter attribution).
 *
 *   main -> spin_first  -> spin_kernel   ~S/2 s of arithmetic, no memory
 *   main -> touch_pages                  maps PAGES fresh anonymous pages and
 *                                        writes one byte in each: PAGES minor
 *                                        faults, with WORK xorshift steps per
 *                                        page so the function also has user time
 *   main -> spin_last   -> spin_kernel   ~S/2 s of arithmetic again
 * Transparent huge pages are refused for the mapping (MADV_NOHUGEPAGE) so each
 * 4 KiB page is one fault. The spinning functions touch no new memory.
 *
 * Usage: fault_split [--pages N] [--work K] [--seconds S]
 *        (defaults 40000 pages, 3000 steps a page, 1 s). More pages with less
 *        work a page give the function a larger kernel share at the same CPU
 *        time (test_kernel_time.sh).
 * Prints "fault_split: pages=N page_size=B" to stderr, and the CPU time of
 * touch_pages and of the whole run, user and kernel mode (getrusage of the
 * thread): "fault_split: touch_pages user U sys S; run user U sys S" (seconds).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noipa, noinline))

uint64_t spin_kernel(uint64_t n);
void spin_first(double seconds);
void spin_last(double seconds);
void touch_pages(long pages, long page_size, long work);

static volatile uint64_t sink;

static double tv_s(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

NOINLINE uint64_t spin_kernel(uint64_t n)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

/* Spins for about `seconds` of CPU time in chunks (no allocation). */
static void spin_for(double seconds)
{
    double t0 = thread_cpu_s();
    while (thread_cpu_s() - t0 < seconds)
        sink += spin_kernel(200000);
}

NOINLINE void spin_first(double seconds)
{
    spin_for(seconds);
    sink++;
}

NOINLINE void spin_last(double seconds)
{
    spin_for(seconds);
    sink++;
}

/* One write per page: exactly one minor fault per page. The arithmetic per
 * page gives the function user-mode time, which is what the user-mode timer
 * samples (fault handling itself runs in the kernel). */
NOINLINE void touch_pages(long pages, long page_size, long work)
{
    size_t len = (size_t)pages * (size_t)page_size;
    char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        perror("fault_split: mmap");
        exit(1);
    }
    madvise(mem, len, MADV_NOHUGEPAGE);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (long i = 0; i < pages; i++) {
        mem[(size_t)i * (size_t)page_size] = (char)i;
        for (long k = 0; k < work; k++) { /* inline: this function's own time */
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
    }
    sink += x;
    munmap(mem, len);
    /* Under user-mode-only sampling each sample weighs the thread's CPU time
     * since the previous one, so a kernel stretch is charged to the thread's
     * next user-mode sample. Without this tail, munmap's kernel time (tens of
     * ms for 40,000 pages, more on a loaded host) would go to spin_last by
     * design of that mode, and the check would measure the host's load. 3 ms
     * of user time here (3 periods at 1 kHz) puts that next sample in this
     * function; the ground truth counts the tail too. */
    double t0 = thread_cpu_s();
    while (thread_cpu_s() - t0 < 0.003) {
        for (int k = 0; k < 20000; k++) { /* inline, as above: self time */
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        sink += x;
    }
}

int main(int argc, char **argv)
{
    long pages = 40000;
    long work = 3000;
    double seconds = 1.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--pages") == 0 && i + 1 < argc)
            pages = atol(argv[++i]);
        else if (strcmp(argv[i], "--work") == 0 && i + 1 < argc)
            work = atol(argv[++i]);
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: fault_split [--pages N] [--work K] [--seconds S]\n");
            return 2;
        }
    }
    long page_size = sysconf(_SC_PAGESIZE);
    struct rusage r0, r1, r2;
    getrusage(RUSAGE_THREAD, &r0);
    spin_first(seconds / 2);
    getrusage(RUSAGE_THREAD, &r1);
    touch_pages(pages, page_size, work);
    getrusage(RUSAGE_THREAD, &r2);
    spin_last(seconds / 2);
    struct rusage r3;
    getrusage(RUSAGE_THREAD, &r3);
    fprintf(stderr, "fault_split: pages=%ld page_size=%ld\n", pages, page_size);
    fprintf(stderr, "fault_split: touch_pages user %.6f sys %.6f; run user %.6f sys %.6f\n",
            tv_s(r2.ru_utime) - tv_s(r1.ru_utime), tv_s(r2.ru_stime) - tv_s(r1.ru_stime),
            tv_s(r3.ru_utime) - tv_s(r0.ru_utime), tv_s(r3.ru_stime) - tv_s(r0.ru_stime));
    return 0;
}
