/*
 * sampler/agent/agent_phdr.c — dl_iterate_phdr without the loader lock, for the
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
 * and whenever glibc's count of loaded and unloaded objects has changed
 * (checked every drain) or a sample shows code outside the known mappings.
 * A library loaded since the last snapshot is simply not found: that
 * sample's stack stops there.
 *
 * The snapshot is double-buffered like agent_memmap.c: readers count
 * themselves in and out, and the writer never fills the table being read.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "sampler/agent/agent.h"

#define PHDR_MAX_OBJECTS 2048
#define PHDR_MAX_HEADERS 16384 /* program headers of all objects together */

/* The program headers are copied too: an object dlclose'd since the
 * snapshot has its own headers unmapped, and the unwinder reads them for
 * every object it is offered while looking for the one that holds a PC. With
 * our copies it only reads an object's memory (its .eh_frame_hdr) for the
 * object that holds the PC, which is mapped since code there is running. */
struct phdr_table {
    size_t count, nheaders;
    unsigned long long adds, subs; /* glibc's load/unload counts at the copy */
    struct dl_phdr_info info[PHDR_MAX_OBJECTS];
    ElfW(Phdr) headers[PHDR_MAX_HEADERS];
    /* Each object's GNU build-id, read from its image while the loader lock
     * is held (the writer's MAP records: agent_phdr_build_id). */
    uint8_t build_id_len[PHDR_MAX_OBJECTS];
    uint8_t build_id[PHDR_MAX_OBJECTS][OPR_BUILD_ID_MAX];
    const void *image_phdr[PHDR_MAX_OBJECTS]; /* where each object's own headers are (dlpi_phdr as glibc gave it) */
    /* Each object's span, lowest PT_LOAD to the end of the highest, sorted:
     * a PyTorch process asks for ~300 objects' ids, each by an address. */
    struct phdr_span {
        uint64_t lo, hi;
        uint32_t object;
    } spans[PHDR_MAX_OBJECTS];
};

typedef int (*iterate_fn)(int (*)(struct dl_phdr_info *, size_t, void *), void *);

static struct phdr_table tables[2];
static _Atomic int current = -1;
static _Atomic int readers[2];
static __thread int in_sample_handler;
static iterate_fn real_iterate;

/* glibc's dl_iterate_phdr (ours interposes it), resolved on first use. */
static iterate_fn glibc_iterate(void)
{
    if (!real_iterate)
        real_iterate = (iterate_fn)dlsym(RTLD_NEXT, "dl_iterate_phdr");
    return real_iterate;
}

void agent_phdr_enter_handler(void) { in_sample_handler = 1; }
void agent_phdr_leave_handler(void) { in_sample_handler = 0; }

/* glibc counts every object it loads and unloads (dlpi_adds, dlpi_subs, the
 * same in every entry); older loaders pass a shorter struct without them. */
static bool entry_load_counts(const struct dl_phdr_info *info, size_t size, unsigned long long *adds,
                              unsigned long long *subs)
{
    if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        return false;
    *adds = info->dlpi_adds;
    *subs = info->dlpi_subs;
    return true;
}

/*
 * A snapshot being taken. Copying an object's headers and build-id reads
 * two pages of its image that the workload has long left: ~0.13 ms a
 * snapshot for the ~300 objects of a process that imports torch, taken
 * again after each of the ~15-18 bursts of dlopen during the import (~2 ms
 * of the writer's CPU). glibc appends what dlopen loads to the list it
 * walks, so while it has unloaded nothing since the last snapshot (its
 * count of unloads, which comes with the walk's first object), the object
 * at a position with the same load bias and header address as there is
 * the same object, and its headers and build-id are copied from the last
 * snapshot instead (as unwind_build.c's scan does; from the first position
 * that differs on, from the image).
 */
struct snapshot_fill {
    struct phdr_table *t;
    const struct phdr_table *last; /* the snapshot before, NULL: none */
    bool reuse;                    /* every object so far was last's at the same position */
};

static int copy_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct snapshot_fill *f = arg;
    struct phdr_table *t = f->t;
    if (t->count >= PHDR_MAX_OBJECTS || t->nheaders + info->dlpi_phnum > PHDR_MAX_HEADERS)
        return 1;
    if (t->count == 0) { /* the loader lock is held for the whole walk: they match the copy */
        bool counted = entry_load_counts(info, size, &t->adds, &t->subs);
        f->reuse = f->last && counted && f->last->subs == t->subs;
    }
    size_t i = t->count++;
    const struct phdr_table *last = f->last;
    f->reuse = f->reuse && i < last->count && last->info[i].dlpi_addr == info->dlpi_addr &&
               last->image_phdr[i] == info->dlpi_phdr && last->info[i].dlpi_phnum == info->dlpi_phnum;
    struct dl_phdr_info *dst = &t->info[i];
    memset(dst, 0, sizeof *dst);
    memcpy(dst, info, size < sizeof *dst ? size : sizeof *dst);
    t->image_phdr[i] = info->dlpi_phdr;
    memcpy(&t->headers[t->nheaders], f->reuse ? last->info[i].dlpi_phdr : info->dlpi_phdr,
           info->dlpi_phnum * sizeof(ElfW(Phdr)));
    dst->dlpi_phdr = &t->headers[t->nheaders];
    t->nheaders += info->dlpi_phnum;
    if (f->reuse) {
        t->build_id_len[i] = last->build_id_len[i];
        memcpy(t->build_id[i], last->build_id[i], sizeof t->build_id[i]);
    } else {
        t->build_id_len[i] = (uint8_t)agent_object_build_id(info, t->build_id[i]);
    }
    return 0;
}

/* The load counts alone: the first entry is enough. */
struct load_counts {
    unsigned long long adds, subs;
    bool valid;
};

static int first_entry_counts(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct load_counts *c = arg;
    c->valid = entry_load_counts(info, size, &c->adds, &c->subs);
    return 1;
}

static bool read_load_counts(struct load_counts *c)
{
    *c = (struct load_counts){0, 0, false};
    if (glibc_iterate())
        real_iterate(first_entry_counts, c);
    return c->valid;
}

static void resolve_find_object(void);

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

static int compare_spans(const void *a, const void *b)
{
    const struct phdr_span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void sort_spans(struct phdr_table *t)
{
    for (size_t i = 0; i < t->count; i++) {
        const struct dl_phdr_info *info = &t->info[i];
        struct phdr_span sp = {UINT64_MAX, 0, (uint32_t)i};
        for (int j = 0; j < info->dlpi_phnum; j++) {
            const ElfW(Phdr) *ph = &info->dlpi_phdr[j];
            if (ph->p_type != PT_LOAD)
                continue;
            uint64_t lo = info->dlpi_addr + ph->p_vaddr;
            sp.lo = lo < sp.lo ? lo : sp.lo;
            sp.hi = lo + ph->p_memsz > sp.hi ? lo + ph->p_memsz : sp.hi;
        }
        t->spans[i] = sp.hi > sp.lo ? sp : (struct phdr_span){0, 0, (uint32_t)i};
    }
    qsort(t->spans, t->count, sizeof t->spans[0], compare_spans);
}

/* Takes a new snapshot with glibc's function. */
static void refresh_locked(void)
{
    resolve_find_object();
    if (!glibc_iterate())
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
    tables[next].adds = tables[next].subs = 0;
    struct snapshot_fill fill = {&tables[next], cur >= 0 ? &tables[cur] : NULL, false};
    real_iterate(copy_one, &fill);
    sort_spans(&tables[next]);
    agent_writer_counts.phdr_refreshes++;
    atomic_store_explicit(&current, next, memory_order_release);
}

/* Writer thread, every drain (outside the writer lock: glibc's
 * dl_iterate_phdr waits for a dlopen in progress). A library dlopen'ed since
 * the snapshot has no unwind info for the handler, and libunwind caches each
 * PC it found none for as an outermost frame for the rest of the thread's
 * life: sgemm_, first run after the snapshot, stayed a root frame for good
 * in a recording that started after `import torch` (--delay), since no
 * sample from the import had made the writer see new code. So the snapshot
 * follows glibc's load count, at most one drain interval behind. */
void agent_phdr_refresh_if_changed(void)
{
    if (atomic_load(&current) < 0)
        return;
    struct load_counts now;
    if (!read_load_counts(&now)) /* outside refresh_lock: it may wait for a dlopen */
        return;
    pthread_mutex_lock(&refresh_lock); /* a dlclose caller may be refreshing */
    const struct phdr_table *t = &tables[atomic_load(&current)];
    if (now.adds != t->adds || now.subs != t->subs)
        refresh_locked();
    pthread_mutex_unlock(&refresh_lock);
}

int agent_phdr_build_id(uint64_t addr, uint8_t out[OPR_BUILD_ID_MAX])
{
    int t = agent_snapshot_enter(&current, readers);
    if (t < 0)
        return -1;
    const struct phdr_table *tab = &tables[t];
    size_t lo = 0, hi = tab->count; /* the last span starting at or below addr */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tab->spans[mid].lo <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    int len = -1;
    if (lo > 0 && addr < tab->spans[lo - 1].hi) {
        /* in the span: in one of its segments too, not in a hole between */
        uint32_t i = tab->spans[lo - 1].object;
        const struct dl_phdr_info *info = &tab->info[i];
        for (int j = 0; j < info->dlpi_phnum && len < 0; j++) {
            const ElfW(Phdr) *ph = &info->dlpi_phdr[j];
            uint64_t seg = info->dlpi_addr + ph->p_vaddr;
            if (ph->p_type == PT_LOAD && addr >= seg && addr - seg < ph->p_memsz) {
                len = tab->build_id_len[i];
                memcpy(out, tab->build_id[i], (size_t)len);
            }
        }
    }
    atomic_fetch_sub_explicit(&readers[t], 1, memory_order_release);
    return len;
}

/* Writer thread: glibc's count of unloaded objects at the current snapshot,
 * which follows it one drain behind, or at once after our dlclose (0 before
 * the first snapshot). Tells agent_memmap.c that ranges went away. */
unsigned long long agent_phdr_unload_count(void)
{
    int t = atomic_load(&current);
    return t < 0 ? 0 : tables[t].subs;
}

void agent_phdr_atfork_child(void)
{
    pthread_mutex_init(&refresh_lock, NULL); /* fork may have copied it locked */
    atomic_store(&readers[0], 0);
    atomic_store(&readers[1], 0);
    in_sample_handler = 0;
}

/*
 * A PC in an object loaded since the snapshot. Not finding its unwind info
 * would be more than one short stack: libunwind keeps each PC it found none
 * for as an outermost frame for the rest of the thread's life (a library
 * dlopen'ed and run at once: 65 % of its samples cut at its leaf for good,
 * with the snapshot at most one drain interval old). glibc 2.35 and later
 * answer "which object holds this address" without a lock and
 * async-signal-safely (_dl_find_object, made for unwinders); its program
 * headers are read from the object's ELF header, at the start of its first
 * mapping. The address looked up is the first member of the data libunwind
 * passes (struct dwarf_callback_data, src/dwarf/Gfind_proc_info-lsb.c); should
 * that ever differ, the lookup finds no object, or one the callback rejects,
 * and the stack stops there as it did before.
 */
struct found_object { /* glibc's struct dl_find_object, with room to spare */
    unsigned long long flags;
    void *map_start, *map_end;
    struct link_map *link_map;
    void *eh_frame;
    unsigned long long reserved[16];
};
typedef int (*find_object_fn)(void *, struct found_object *);
static find_object_fn find_object;  /* NULL before glibc 2.35 */
static _Atomic int find_object_resolved;

static void resolve_find_object(void) /* ordinary context */
{
    if (!atomic_load(&find_object_resolved)) {
        find_object = (find_object_fn)dlsym(RTLD_DEFAULT, "_dl_find_object");
        atomic_store(&find_object_resolved, 1);
    }
}

static int offer_live_object(int (*callback)(struct dl_phdr_info *, size_t, void *), void *data)
{
    if (!find_object || !data)
        return 0;
    uint64_t ip;
    memcpy(&ip, data, sizeof ip);
    struct found_object fo;
    if (find_object((void *)(uintptr_t)ip, &fo) != 0 || !fo.link_map || !fo.map_start)
        return 0;
    const ElfW(Ehdr) *eh = fo.map_start;
    size_t page = 4096;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_phentsize != sizeof(ElfW(Phdr)) || eh->e_phnum == 0 ||
        eh->e_phoff + (size_t)eh->e_phnum * sizeof(ElfW(Phdr)) > page ||
        (char *)fo.map_end - (char *)fo.map_start < (ptrdiff_t)page)
        return 0; /* headers not in the first page: not read */
    struct dl_phdr_info info;
    memset(&info, 0, sizeof info);
    info.dlpi_addr = fo.link_map->l_addr;
    info.dlpi_name = fo.link_map->l_name;
    info.dlpi_phdr = (const ElfW(Phdr) *)((const char *)fo.map_start + eh->e_phoff);
    info.dlpi_phnum = eh->e_phnum;
    return callback(&info, sizeof info, data);
}

__attribute__((visibility("default"))) int dl_iterate_phdr(int (*callback)(struct dl_phdr_info *, size_t, void *),
                                                          void *data)
{
    if (!in_sample_handler) {
        return glibc_iterate() ? real_iterate(callback, data) : 0;
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
    if (ret == 0)
        ret = offer_live_object(callback, data);
    return ret;
}
