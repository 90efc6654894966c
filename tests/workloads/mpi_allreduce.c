/*
 * tests/workloads/mpi_allreduce.c — a bulk-synchronous MPI job with one slow
 * rank, for tests/integration/test_ranks_mpi.sh.
 *
 * Each step every rank runs spin_compute() for a fixed amount of its own CPU
 * time, then MPI_Allreduce. Rank 1 computes 3x longer than the others, so the
 * others wait in MPI_Allreduce (Open MPI busy-polls: that wait is CPU time in
 * MPI frames). Usage: mpi_allreduce [STEPS [MS_PER_STEP]] (default 60 x 10 ms).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The work: integer mixing until this thread has used ms of CPU time.
 * noinline so the report can name it. */
__attribute__((noinline)) static unsigned long spin_compute(double ms)
{
    volatile unsigned long x = 1;
    double end = thread_cpu_ms() + ms;
    while (thread_cpu_ms() < end)
        for (int i = 0; i < 2000; i++)
            x = x * 6364136223846793005ul + 1442695040888963407ul;
    return x;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int steps = argc > 1 ? atoi(argv[1]) : 60;
    double ms = argc > 2 ? atof(argv[2]) : 10.0;
    double mine = rank == 1 ? 3 * ms : ms;
    double sum = 0, t0 = MPI_Wtime();
    for (int s = 0; s < steps; s++) {
        double v = (double)(spin_compute(mine) & 0xff), total = 0;
        MPI_Allreduce(&v, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        sum += total;
    }
    printf("rank %d of %d: %d steps, %.1f ms compute each, %.2f s wall (checksum %.0f)\n", rank, size, steps, mine,
           MPI_Wtime() - t0, sum);
    MPI_Finalize();
    return 0;
}
