/*
 * tests/workloads/stat_probe.c — a workload whose software-event counts are
 * known, for tests/integration/test_stat.sh: it touches --pages fresh pages
 * (one minor fault each), sleeps --sleeps times 1 ms (one voluntary context
 * switch each), spins for --seconds of CPU time, then prints what the kernel
 * itself counted for it (/proc/self/stat faults, /proc/self/status context
 * switches, getrusage CPU time) on stderr:
 *   stat_probe[PID]: minflt=N majflt=N vcsw=N ivcsw=N cpu_ns=N wall_ns=N
 * (wall_ns: from the start of main to that line, so that a test can compare a
 * CPU utilization with the one the workload itself got, whatever the load)
 * and exits with --exit N (default 0).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long long monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static long status_field(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            v = atol(line + n + 1);
    if (f)
        fclose(f);
    return v;
}

int main(int argc, char **argv)
{
    long long wall_start_ns = monotonic_ns();
    long pages = 2000, sleeps = 50, code = 0;
    double seconds = 1.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--pages"))
            pages = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--sleeps"))
            sleeps = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds"))
            seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--exit"))
            code = atol(argv[i + 1]);
    }
    long pagesize = sysconf(_SC_PAGESIZE);
    /* mmap, not malloc: fresh anonymous pages, each first touch one fault. */
    volatile char *mem = pages > 0 ? mmap(NULL, (size_t)(pages * pagesize), PROT_READ | PROT_WRITE,
                                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                                   : NULL;
    if (mem == MAP_FAILED)
        return 2;
    for (long p = 0; p < pages; p++)
        mem[p * pagesize] = 1;
    for (long s = 0; s < sleeps; s++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    volatile unsigned long x = 0;
    double start = cpu_seconds();
    while (cpu_seconds() - start < seconds)
        for (int k = 0; k < 100000; k++)
            x += (unsigned long)k;
    unsigned long minflt = 0, majflt = 0;
    FILE *f = fopen("/proc/self/stat", "r");
    if (f) {
        /* Fields 10 and 12 (minflt, majflt); comm (field 2) has no spaces here. */
        if (fscanf(f, "%*d %*s %*c %*d %*d %*d %*d %*d %*u %lu %*u %lu", &minflt, &majflt) != 2)
            minflt = majflt = 0;
        fclose(f);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long long cpu_ns = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ll +
                       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ll;
    fprintf(stderr, "stat_probe[%d]: minflt=%lu majflt=%lu vcsw=%ld ivcsw=%ld cpu_ns=%lld wall_ns=%lld\n", (int)getpid(),
            minflt, majflt, status_field("voluntary_ctxt_switches"), status_field("nonvoluntary_ctxt_switches"),
            cpu_ns, monotonic_ns() - wall_start_ns);
    return (int)code;
}
