/*
 * tests/unit/snapshot_stress.c — the double-buffered snapshot protocol that
 * agent_phdr.c (dl_iterate_phdr for the unwinder) and agent_memmap.c use,
 * built with ThreadSanitizer (see Makefile.am). One writer republishes a
 * table as fast as it can, as agent_phdr.c does after every dlclose of a
 * program that loads and unloads libraries in a loop; three readers enter
 * the published table as the SIGTRAP handler does.
 *
 * Checked: a reader never sees "no snapshot" once one is published (a
 * spurious miss makes libunwind cache that PC as the outermost frame for the
 * rest of the thread's life), and never sees a table being rewritten (every
 * entry of a table carries the same generation). TSan checks the ordering.
 */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sampler/agent/agent.h"

#define READERS 3
#define PER_READER 200000
#define ENTRIES 32
/* The protocol is only exercised if the writer republishes while readers are
 * inside: readers go on past PER_READER until it has, for at most
 * MAX_SECONDS (on a loaded 2-CPU machine the writer, a fourth thread, can be
 * kept off a CPU for most of PER_READER: a CI run beside other jobs saw 703). */
#define MIN_PUBLISHES 1000
#define MAX_SECONDS 60

static uint64_t tables[2][ENTRIES];
static _Atomic int current = -1;
static _Atomic int readers[2];
static _Atomic int readers_done;
static _Atomic uint64_t publishes;

static void publish(uint64_t generation)
{
    int cur = atomic_load(&current);
    int next = cur == 0 ? 1 : 0;
    while (atomic_load(&readers[next]) != 0)
        sched_yield();
    for (int i = 0; i < ENTRIES; i++)
        tables[next][i] = generation;
    atomic_store_explicit(&current, next, memory_order_release);
    atomic_fetch_add(&publishes, 1);
}

static void *writer(void *arg)
{
    (void)arg;
    for (uint64_t g = 2; atomic_load(&readers_done) < READERS; g++)
        publish(g);
    return NULL;
}

struct reader_result {
    uint64_t misses, torn, entered;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool keep_reading(long i, double until)
{
    if (i < PER_READER)
        return true;
    if (atomic_load(&publishes) >= MIN_PUBLISHES)
        return false;
    return (i % 4096) != 0 || now_s() < until;
}

static void *reader(void *arg)
{
    struct reader_result *r = arg;
    double until = now_s() + MAX_SECONDS;
    for (long i = 0; keep_reading(i, until); i++) {
        int t = agent_snapshot_enter(&current, readers);
        if (t < 0) {
            r->misses++;
            continue;
        }
        r->entered++;
        uint64_t first = tables[t][0];
        for (int k = 1; k < ENTRIES; k++)
            if (tables[t][k] != first) {
                r->torn++;
                break;
            }
        atomic_fetch_sub_explicit(&readers[t], 1, memory_order_release);
    }
    atomic_fetch_add(&readers_done, 1);
    return NULL;
}

int main(void)
{
    int failed = 0;
    /* Before anything is published there is no table: -1, not a crash. */
    if (agent_snapshot_enter(&current, readers) != -1) {
        fprintf(stderr, "snapshot_stress: FAIL: entered a table before one was published\n");
        failed = 1;
    }
    publish(1);

    pthread_t w, rd[READERS];
    struct reader_result res[READERS] = {{0}};
    pthread_create(&w, NULL, writer, NULL);
    for (int i = 0; i < READERS; i++)
        pthread_create(&rd[i], NULL, reader, &res[i]);
    for (int i = 0; i < READERS; i++)
        pthread_join(rd[i], NULL);
    pthread_join(w, NULL);

    uint64_t misses = 0, torn = 0, entered = 0;
    for (int i = 0; i < READERS; i++) {
        misses += res[i].misses;
        torn += res[i].torn;
        entered += res[i].entered;
    }
    printf("snapshot_stress: %llu entries by %d readers during %llu publishes: %llu misses, %llu torn tables\n",
           (unsigned long long)entered, READERS, (unsigned long long)atomic_load(&publishes),
           (unsigned long long)misses, (unsigned long long)torn);
    if (misses) {
        fprintf(stderr, "snapshot_stress: FAIL: a published snapshot was reported missing %llu times\n",
                (unsigned long long)misses);
        failed = 1;
    }
    if (torn) {
        fprintf(stderr, "snapshot_stress: FAIL: %llu reads saw a table being rewritten\n", (unsigned long long)torn);
        failed = 1;
    }
    if (atomic_load(&publishes) < MIN_PUBLISHES) {
        fprintf(stderr, "snapshot_stress: FAIL: only %llu publishes overlapped the readers in %d s\n",
                (unsigned long long)atomic_load(&publishes), MAX_SECONDS);
        failed = 1;
    }
    return failed;
}
