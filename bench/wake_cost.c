/*
 * bench/wake_cost.c — what one wake-up of a sleeping thread costs in CPU
 * time, the floor under the agent's writer thread (agent_writer.c), which
 * sleeps between drains: 10 ms, 20 ms in a steady process, up to 80 ms in a
 * quiet one.
 *
 * For each sleep length it sleeps N times in a futex wait with a timeout
 * (the writer's sleep: agent_unwind_wait) and prints the thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID, what the agent's overhead line and the bench's
 * outside ratios count) per wake-up, then the TSC-timed cost of the first
 * /proc read after such a sleep against the same read again at once (the
 * writer's first read of a drain is a thread's schedstat). On bare metal a
 * wake-up costs a few microseconds; on a VM whose idle vCPU the host takes
 * back, the thread comes back to cold caches and TLBs and pays for them in
 * its own CPU time, more after a longer sleep.
 *
 * Run: bench/wake_cost [N]   (built, not run, by `make check`)
 */
#include <fcntl.h>
#include <linux/futex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int futex_word; /* never woken: each wait ends at its timeout */

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
}

/* TSC ticks per microsecond, from a 50 ms stretch against CLOCK_MONOTONIC. */
static double tsc_per_us(void)
{
    uint64_t t0 = monotonic_ns(), c0 = __rdtsc();
    while (monotonic_ns() - t0 < 50000000ull)
        ;
    return (double)(__rdtsc() - c0) / ((double)(monotonic_ns() - t0) / 1000.0);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100;
    if (n < 1)
        n = 100;
    static const uint64_t sleeps_ms[] = {1, 10, 20, 40, 80};
    printf("CPU time per wake-up (futex wait to its timeout, %d each):\n", n);
    for (size_t i = 0; i < sizeof sleeps_ms / sizeof sleeps_ms[0]; i++) {
        uint64_t cpu0 = thread_cpu_ns();
        for (int k = 0; k < n; k++)
            sleep_ns(sleeps_ms[i] * 1000000ull);
        double us = (double)(thread_cpu_ns() - cpu0) / 1000.0 / n;
        printf("  %3llu ms asleep: %6.1f us CPU per wake-up, %5.2f ms CPU a second at that rate\n",
               (unsigned long long)sleeps_ms[i], us, us * 1000.0 / (double)sleeps_ms[i] / 1000.0);
    }
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", (long)syscall(SYS_gettid));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    double per_us = tsc_per_us(), first = 0, again = 0;
    for (int k = 0; k < n; k++) {
        sleep_ns(20000000ull);
        uint64_t a = __rdtsc();
        if (pread(fd, buf, sizeof buf, 0) <= 0)
            return 1;
        uint64_t b = __rdtsc();
        if (pread(fd, buf, sizeof buf, 0) <= 0)
            return 1;
        uint64_t c = __rdtsc();
        first += (double)(b - a), again += (double)(c - b);
    }
    close(fd);
    printf("schedstat pread after 20 ms asleep: first %.1f us, the same read again %.1f us (TSC, %d each)\n",
           first / per_us / n, again / per_us / n, n);
    return 0;
}
