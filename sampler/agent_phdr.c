/*
 * sampler/agent_phdr.c — dl_iterate_phdr without the loader lock, for the
 * unwinder running inside the SIGTRAP handler.
 *
 * SIGNAL-HANDLER CODE: dl_iterate_phdr() below, when called from the sample
 * handler, reads only a static snapshot: no locks, no malloc, no stdio.
 *
 * Why: libunwind finds a PC's unwind table through dl_iterate_phdr, and
 * glibc's dl_iterate_phdr takes the loader lock. A sample that interrupts a
 * thread inside dlopen (which holds that lock) would then wait for a lock
 * its own thread holds: the workload hangs. So the agent interposes
 * dl_iterate_phdr for the whole process: outside our handler every call goes
 * straight to glibc's; inside it, the callback is fed from a snapshot that the
 * writer thread takes with the real function (in ordinary context) at start
 * and whenever new code is mapped. A library loaded since the last snapshot is
 * simply not found: that sample's stack stops there, and the writer, seeing a
 * PC outside known mappings, takes a new snapshot.
 *
 * The snapshot is double-buffered like agent_memmap.c: readers count
 * themselves in and out, and the writer never fills the table being read.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "sampler/agent.h"

#define PHDR_MAX_OBJECTS 2048
#define PHDR_MAX_HEADERS 16384 /* program headers of all objects together */

/* The program headers are copied too: an object dlclose'd since the
 * snapshot has its own headers unmapped, and the unwinder reads them for
 * every object it is offered while looking for the one that holds a PC. With
 * our copies it only reads an object's memory (its .eh_frame_hdr) for the
 * object that holds the PC, which is mapped since code there is running. */
struct phdr_table {
    size_t count, nheaders;
    struct dl_phdr_info info[PHDR_MAX_OBJECTS];
    ElfW(Phdr) headers[PHDR_MAX_HEADERS];
};

typedef int (*iterate_fn)(int (*)(struct dl_phdr_info *, size_t, void *), void *);

static struct phdr_table tables[2];
static _Atomic int current = -1;
static _Atomic int readers[2];
static __thread int in_sample_handler;
static iterate_fn real_iterate;

void agent_phdr_enter_handler(void) { in_sample_handler = 1; }
void agent_phdr_leave_handler(void) { in_sample_handler = 0; }

static int copy_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct phdr_table *t = arg;
    if (t->count >= PHDR_MAX_OBJECTS || t->nheaders + info->dlpi_phnum > PHDR_MAX_HEADERS)
        return 1;
    struct dl_phdr_info *dst = &t->info[t->count++];
    memset(dst, 0, sizeof *dst);
    memcpy(dst, info, size < sizeof *dst ? size : sizeof *dst);
    memcpy(&t->headers[t->nheaders], info->dlpi_phdr, info->dlpi_phnum * sizeof(ElfW(Phdr)));
    dst->dlpi_phdr = &t->headers[t->nheaders];
    t->nheaders += info->dlpi_phnum;
    return 0;
}

/* Writer thread, constructor, or a dlclose caller (below): serialized. */
static pthread_mutex_t refresh_lock = PTHREAD_MUTEX_INITIALIZER;
static void refresh_locked(void);

void agent_phdr_refresh(void)
{
    pthread_mutex_lock(&refresh_lock);
    refresh_locked();
    pthread_mutex_unlock(&refresh_lock);
}

/* dlclose: an object unloaded since the snapshot may have its address range
 * reused by the next dlopen (Open MPI opens and closes dozens of mca_*
 * components in MPI_Init); the unwinder would then read the new object's
 * bytes as the old one's .eh_frame_hdr and crash (1 run in 6 under mpirun).
 * So the snapshot is retaken right after every dlclose, in the caller's
 * ordinary context. */
typedef int (*dlclose_fn)(void *);

__attribute__((visibility("default"))) int dlclose(void *handle)
{
    static dlclose_fn real_dlclose;
    if (!real_dlclose)
        real_dlclose = (dlclose_fn)dlsym(RTLD_NEXT, "dlclose");
    int rc = real_dlclose ? real_dlclose(handle) : -1;
    if (atomic_load(&current) >= 0)
        agent_phdr_refresh();
    return rc;
}

/* Takes a new snapshot with glibc's function. */
static void refresh_locked(void)
{
    if (!real_iterate)
        real_iterate = (iterate_fn)dlsym(RTLD_NEXT, "dl_iterate_phdr");
    if (!real_iterate)
        return;
    int cur = atomic_load(&current);
    int next = cur == 0 ? 1 : 0;
    for (int spins = 0; atomic_load(&readers[next]) != 0 && spins < 1000; spins++) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&readers[next]) != 0)
        return;
    tables[next].count = 0;
    tables[next].nheaders = 0;
    real_iterate(copy_one, &tables[next]);
    atomic_store_explicit(&current, next, memory_order_release);
}

void agent_phdr_atfork_child(void)
{
    pthread_mutex_init(&refresh_lock, NULL); /* fork may have copied it locked */
    atomic_store(&readers[0], 0);
    atomic_store(&readers[1], 0);
    in_sample_handler = 0;
}

__attribute__((visibility("default"))) int dl_iterate_phdr(int (*callback)(struct dl_phdr_info *, size_t, void *),
                                                          void *data)
{
    if (!in_sample_handler) {
        if (!real_iterate)
            real_iterate = (iterate_fn)dlsym(RTLD_NEXT, "dl_iterate_phdr");
        return real_iterate ? real_iterate(callback, data) : 0;
    }
    /* Inside the sample handler: the snapshot only. */
    int t = agent_snapshot_enter(&current, readers);
    if (t < 0)
        return 0;
    int ret = 0;
    for (size_t i = 0; i < tables[t].count && ret == 0; i++) {
        struct dl_phdr_info info = tables[t].info[i]; /* the callback may not modify ours */
        ret = callback(&info, sizeof info, data);
    }
    atomic_fetch_sub_explicit(&readers[t], 1, memory_order_release);
    return ret;
}
