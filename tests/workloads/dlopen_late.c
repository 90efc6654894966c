/*
 * tests/workloads/dlopen_late.c — a library loaded while nothing is sampled,
 * then run: sleeps 0.3 s (no CPU, so no samples), dlopen()s the library given
 * as argv[1] (libsplit_stripped.so: no symbols but .dynsym, unwound by CFI
 * only), and calls its spin_c from run_plugin() for about 1 s of CPU time.
 *
 * Every sample in spin_c must unwind through run_plugin to main. The agent's
 * unwinder snapshot of loaded objects used to be refreshed only when the
 * writer saw a sample from unknown code; the first samples in spin_c were
 * then unwound without its unwind info, and libunwind kept each such PC as
 * an outermost frame for the rest of the thread (test_dlopen.sh).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

typedef uint64_t (*spin_fn)(uint64_t);
static volatile uint64_t sink;

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void run_plugin(spin_fn spin, double seconds)
{
    double end = cpu_seconds() + seconds;
    while (cpu_seconds() < end)
        sink += spin(20000);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: dlopen_late LIBRARY [SECONDS]\n");
        return 2;
    }
    usleep(300000);
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    spin_fn spin = h ? (spin_fn)dlsym(h, "spin_c") : NULL;
    if (!spin) {
        fprintf(stderr, "dlopen_late: %s\n", dlerror());
        return 1;
    }
    double seconds = 1.0;
    if (argc > 2)
        sscanf(argv[2], "%lf", &seconds);
    run_plugin(spin, seconds);
    puts("done");
    return 0;
}
