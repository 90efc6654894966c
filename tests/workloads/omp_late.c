/*
 * tests/workloads/omp_late.c — a program with no OpenMP that dlopens an
 * OpenMP library after start-up, RTLD_LOCAL, as `import torch` does
 * (tests/integration/test_gomp.sh): libgomp then is not in the global scope,
 * so the agent must find the real GOMP_* among the loaded objects.
 *   omp_late LIB.so ARGS...   -> omp_imbalance_main(ARGS...) from LIB.so
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: omp_late LIB.so [omp_imbalance args]\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "omp_late: %s\n", dlerror());
        return 1;
    }
    int (*entry)(int, char **) = (int (*)(int, char **))dlsym(h, "omp_imbalance_main");
    if (!entry) {
        fprintf(stderr, "omp_late: %s\n", dlerror());
        return 1;
    }
    argv[1] = argv[0];
    return entry(argc - 1, argv + 1);
}
