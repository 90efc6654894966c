/*
 * tests/workloads/omp_regions.c — many short OpenMP parallel regions with a
 * fixed amount of work, for the threading tests (test_openmp.sh): with
 * OMP_NUM_THREADS above the CPU count the same work takes longer and threads
 * wait on the runqueue. Built twice: gcc -fopenmp (GNU libgomp) and clang
 * -fopenmp (LLVM libomp).
 *
 * usage: omp_regions [--regions N] [--size N] [--seconds S]
 * --seconds: open no more regions once S seconds have passed (test_gomp's
 * fast regions: a team spinning beside other busy processes may take a
 * scheduler slice per region).
 * Prints one line: regions run, elements per region, threads, runtime, seconds.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The function that opens the regions: worker samples are charged to it. */
__attribute__((noinline)) static double scale_step(double *a, int n, int iter)
{
    double sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (int i = 0; i < n; i++) {
        a[i] = a[i] * 0.999 + sqrt((double)i + iter);
        sum += a[i];
    }
    return sum;
}

int main(int argc, char **argv)
{
    int regions = 20000, size = 20000;
    double limit = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--regions") == 0)
            regions = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--size") == 0)
            size = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--seconds") == 0)
            limit = atof(argv[i + 1]);
    }
    double *a = calloc((size_t)size, sizeof *a);
    if (!a)
        return 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double total = 0;
    int r = 0;
    for (; r < regions; r++) {
        if (limit > 0 && (r & 255) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            if ((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9 >= limit)
                break;
        }
        total += scale_step(a, size, r);
    }
    regions = r;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("omp_regions: %d regions of %d elements, %d threads, %.3f s (checksum %.3g)\n", regions, size,
           omp_get_max_threads(), secs, total);
    free(a);
    return 0;
}
