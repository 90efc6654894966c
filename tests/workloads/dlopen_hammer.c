/*
 * tests/workloads/dlopen_hammer.c — two threads dlopen/dlclose libraries in a
 * loop while the main thread spins in spin(). Samples that interrupt a thread
 * inside dlopen (holding the loader lock) must not hang the workload: the
 * agent serves the unwinder's dl_iterate_phdr from a snapshot in its handler
 * (sampler/agent/agent_phdr.c). Before that fix, 3 of 5 runs at 5 kHz hung; before
 * the snapshot copied program headers, 1 run in 25 crashed reading the headers
 * of a library dlclose'd since the snapshot.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static volatile double sink;
__attribute__((noinline)) static void spin(long n) { double x = 0; for (long i = 0; i < n; i++) x += i * 0.5; sink = x; }
static void *loader(void *a) {
    (void)a;
    for (int i = 0; i < 3000; i++) {
        void *h = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
        void *z = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
        if (z) dlclose(z);
        if (h) dlclose(h);
        spin(2000);
    }
    return NULL;
}
int main(void) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, loader, NULL);
    spin(300000000);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    puts("done");
    return 0;
}
