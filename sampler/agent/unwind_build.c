/*
 * sampler/agent/unwind_build.c — which unwind tables exist, and when they are
 * compiled (unwind_compile.c), for the handler (unwind_table.c). Writer
 * thread only: it mallocs, calls dl_iterate_phdr and dladdr, and may take
 * milliseconds per module (except unwind_check_differs, which handlers call:
 * atomics only).
 *
 * Modules are found with dl_iterate_phdr (PT_LOAD with PF_X: the text range;
 * PT_GNU_EH_FRAME: .eh_frame_hdr, which points at .eh_frame), in memory: no
 * file is opened. Tables are compiled lazily, when a sample first lands in a
 * module (the handler marks it wanted; the writer finishes that sample's
 * walk once the table is there, unwind_defer.c). The
 * module index is rescanned when glibc's counts of loaded and unloaded
 * objects change. The writer also reports the counters (UNWIND record).
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "sampler/agent/unwind_table.h"

/* ---- the module index ------------------------------------------------------ */

static struct unwind_module scanned[UNWIND_MAX_MODULES]; /* writer's scratch */
static bool old_kept[UNWIND_MAX_MODULES];                /* a rescan's: the old index's modules kept */
static size_t nscanned;
static unsigned long long seen_adds, seen_subs;
static bool scanned_once;
static uint64_t tables_built, table_bytes, build_cpu_ns;
static bool eager_wanted; /* a scan added modules: load_cached_new */

/* An object's text and unwind section, from its program headers: lo == hi
 * when it has no code; eh_frame_hdr 0 when it has no .eh_frame_hdr in a
 * loaded segment. */
struct object_text {
    uint64_t base;        /* dlpi_addr */
    const void *phdr;     /* dlpi_phdr: where its headers are (no two loaded objects share it) */
    uint64_t lo, hi, eh_frame_hdr, eh_limit;
};

static void read_object_text(const struct dl_phdr_info *info, struct object_text *o)
{
    uint64_t lo = UINT64_MAX, hi = 0, hdr = 0;
    *o = (struct object_text){.base = info->dlpi_addr, .phdr = info->dlpi_phdr};
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            uint64_t a = info->dlpi_addr + ph->p_vaddr;
            if (a < lo)
                lo = a;
            if (a + ph->p_memsz > hi)
                hi = a + ph->p_memsz;
        } else if (ph->p_type == PT_GNU_EH_FRAME) {
            hdr = info->dlpi_addr + ph->p_vaddr;
        }
    }
    if (hi <= lo)
        return; /* no code */
    o->lo = lo;
    o->hi = hi;
    for (int i = 0; hdr && i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uint64_t a = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && hdr >= a && hdr < a + ph->p_memsz) {
            o->eh_frame_hdr = hdr;
            o->eh_limit = a + ph->p_memsz;
        }
    }
}

/*
 * The objects in dl_iterate_phdr's order at the last scan. Reading an
 * object's program headers touches a page of its own that the workload
 * has long left: ~0.15 ms per scan of the ~300 objects of a process that
 * imports torch, which rescans at each of the ~18 bursts of dlopen during
 * the import and goes over them all again in each pass for new modules'
 * cached tables (~5 ms of the writer's CPU in all, 2026-12-03). glibc
 * appends what dlopen loads to the list dl_iterate_phdr goes through (the
 * caller's namespace), so while nothing has been unloaded since (the
 * loader's count of unloads, read with the pass's first object), the
 * object at a position is the one that was there at the last scan; its
 * load bias and program headers' address are compared as well. Its
 * headers are then not read again. From the first position that differs
 * on, every object is read (tests/unit/unwind_rescan.c).
 */
static struct object_text seen_order[UNWIND_MAX_MODULES];
static size_t nseen_order;

/* A pass of dl_iterate_phdr over the objects, in order. */
struct object_pass {
    size_t pos;       /* the next object's position */
    bool reuse;       /* seen_order holds every object before pos */
    bool counted;     /* adds, subs: the loader's counts, read at the first object */
    unsigned long long adds, subs;
};

/* The pass's next object's text. At the first object: whether seen_order
 * still holds, from the loader's counts that come with it (read under the
 * same lock as the objects): nothing unloaded since the scan that filled
 * it (*reuse is set by the caller when there was one). record: the scan,
 * which fills seen_order[pos]; else scratch gets what is read. */
static const struct object_text *next_object_text(const struct dl_phdr_info *info, size_t size,
                                                  struct object_pass *op, bool record, struct object_text *scratch)
{
    size_t pos = op->pos++;
    if (pos == 0) {
        op->counted = size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs;
        op->adds = op->counted ? info->dlpi_adds : 0;
        op->subs = op->counted ? info->dlpi_subs : 0;
        op->reuse = op->reuse && op->counted && op->subs == seen_subs;
    }
    if (pos < UNWIND_MAX_MODULES && op->reuse && pos < nseen_order && seen_order[pos].base == info->dlpi_addr &&
        seen_order[pos].phdr == info->dlpi_phdr)
        return &seen_order[pos];
    op->reuse = false;
    struct object_text *o = record && pos < UNWIND_MAX_MODULES ? &seen_order[pos] : scratch;
    read_object_text(info, o);
    return o;
}

static int scan_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct object_text scratch;
    const struct object_text *o = next_object_text(info, size, arg, true, &scratch);
    if (o->hi <= o->lo)
        return 0; /* no code */
    if (nscanned == UNWIND_MAX_MODULES)
        return 1;
    struct unwind_module *m = &scanned[nscanned++];
    memset(m, 0, sizeof *m);
    m->lo = o->lo;
    m->hi = o->hi;
    m->base = o->base;
    m->eh_frame_hdr = o->eh_frame_hdr;
    m->eh_limit = o->eh_limit;
    atomic_init(&m->state, m->eh_frame_hdr ? UNWIND_MOD_NEW : UNWIND_MOD_NONE);
    return 0;
}

static int module_order(const void *pa, const void *pb)
{
    const struct unwind_module *a = pa, *b = pb;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* The loader's counts of loaded and unloaded objects (glibc passes them in
 * every entry): a change means dlopen or dlclose since the last scan. */
static int read_counts(struct dl_phdr_info *info, size_t size, void *arg)
{
    unsigned long long *counts = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        counts[0] = info->dlpi_adds;
        counts[1] = info->dlpi_subs;
    }
    return 1;
}

static bool wait_no_readers(int t)
{
    for (int spins = 0; atomic_load(&unwind_index_readers[t]) != 0; spins++) {
        if (spins == 10000)
            return false;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    return true;
}

/* Compiles module m's table from bytes (a copy of its memory from the
 * .eh_frame_hdr on), or reads it from the cache directory (cache_dir,
 * unwind_cache_open) when `cached` (cache_name: its file; "" for none), and
 * publishes it to the handlers. A cached table
 * that cannot be read leaves the module wanted: the next poll copies and
 * compiles it (the file is gone then). */
static void build_module(struct unwind_module *m, const void *bytes, int cache_dir, const char *cache_name,
                         bool cached, const uint64_t *entries, unsigned nentries)
{
    uint64_t began = agent_thread_cpu_ns();
    struct unwind_table *t = NULL;
    if (cached) {
        t = unwind_cache_load(cache_dir, cache_name, m->lo);
        if (!t) {
            build_cpu_ns += agent_thread_cpu_ns() - began;
            atomic_store(&unwind_build_wanted, 1);
            return;
        }
    } else if (bytes) {
        t = unwind_build_table(bytes, m->eh_limit - m->eh_frame_hdr, m->eh_frame_hdr, m->lo, m->hi, entries, nentries);
        if (t && cache_name[0])
            unwind_cache_store(cache_name, t);
    }
    build_cpu_ns += agent_thread_cpu_ns() - began;
    if (t) {
        tables_built++;
        table_bytes += t->map_bytes;
        atomic_store_explicit(&m->table, t, memory_order_release);
        atomic_store(&m->state, UNWIND_MOD_BUILT);
    } else {
        atomic_store(&m->state, UNWIND_MOD_NONE);
    }
}

void unwind_rescan(bool build_all)
{
    int cur = atomic_load(&unwind_index_current);
    int next = cur == 0 ? 1 : 0;
    if (!wait_no_readers(next))
        return; /* a handler stuck in the index for a second: try at the next poll */
    struct object_pass scan = {.reuse = scanned_once};
    nscanned = 0;
    dl_iterate_phdr(scan_one, &scan);
    nseen_order = scan.pos < UNWIND_MAX_MODULES ? scan.pos : UNWIND_MAX_MODULES;
    qsort(scanned, nscanned, sizeof scanned[0], module_order);
    struct unwind_index *ix = &unwind_indexes[next];
    const struct unwind_index *old = cur >= 0 ? &unwind_indexes[cur] : NULL;
    size_t j = 0, same = 0;
    memset(old_kept, 0, old ? old->count * sizeof old_kept[0] : 0);
    for (size_t i = 0; i < nscanned; i++) {
        struct unwind_module *m = &ix->mod[i];
        *m = scanned[i];
        /* The same object as before keeps its table and its request. */
        while (old && j < old->count && old->mod[j].lo < m->lo)
            j++;
        if (old && j < old->count && old->mod[j].lo == m->lo && old->mod[j].hi == m->hi &&
            old->mod[j].eh_frame_hdr == m->eh_frame_hdr) {
            atomic_store(&m->table, atomic_load(&old->mod[j].table));
            atomic_store(&m->state, atomic_load(&old->mod[j].state));
            m->cache_looked = old->mod[j].cache_looked;
            old_kept[j] = true;
            same++;
        }
    }
    if (same < nscanned)
        eager_wanted = true; /* new modules: their cached tables (load_cached_new) */
    ix->count = nscanned;
    /* before the index is published: a handler that enters it reads its generation */
    if (old && same < old->count)
        atomic_fetch_add_explicit(&unwind_index_removals, 1, memory_order_release);
    ix->removals = atomic_load(&unwind_index_removals);
    ix->generation = atomic_load(&unwind_index_generation) + 1;
    atomic_fetch_add_explicit(&unwind_index_generation, 1, memory_order_release);
    atomic_store_explicit(&unwind_index_current, next, memory_order_release);
    seen_adds = scan.adds;
    seen_subs = scan.subs;
    scanned_once = true;
    /* Tables of objects gone since (the old modules no new one kept):
     * freed once no handler reads the old index. */
    if (old && wait_no_readers(cur)) {
        for (size_t k = 0; k < old->count; k++) {
            struct unwind_table *t = atomic_load(&old->mod[k].table);
            if (t && !old_kept[k])
                unwind_table_free(t);
        }
    }
    /* build_all (benchmarks): objects that stay loaded, read in place,
     * without entry rows (their stacks are recorded at FDE-covered PCs). */
    for (size_t i = 0; build_all && i < ix->count; i++)
        if (atomic_load(&ix->mod[i].state) != UNWIND_MOD_NONE && atomic_load(&ix->mod[i].table) == NULL)
            build_module(&ix->mod[i], (const void *)(uintptr_t)ix->mod[i].eh_frame_hdr, -1, "", false, NULL, 0);
}

/* Builds what samples asked for, at most ~20 ms of CPU per poll so that the
 * queue keeps draining (a big module, libtorch_cpu, is still built whole).
 * An object's bytes are copied inside dl_iterate_phdr's callback, for
 * objects it still lists: glibc holds the loader lock there, so no other
 * thread can dlclose (unmap) the object while we read it (test_dlopen's
 * hammer crashed the writer reading a library unloaded since the scan).
 * The parsing runs after, on the copies, so that the workload's dlopen
 * waits for a memcpy at most, not for a build (~150 ms for libtorch_cpu). */
#define BUILD_BATCH 8
#define BUILD_BASES 64
struct build_pass {
    struct unwind_index *ix;
    /* The load biases of the modules wanted, when at most BUILD_BASES are:
     * other objects are passed over without reading their program headers,
     * which in a fork child are ~300 pages not touched yet (a fault each). */
    uint64_t bases[BUILD_BASES];
    unsigned nbases;
    bool any_base;
    struct unwind_module *mod[BUILD_BATCH];
    void *copy[BUILD_BATCH];
    char cache_name[BUILD_BATCH][128]; /* "": not cached (no build-id, no cache) */
    bool cached[BUILD_BATCH];          /* its file is there: read it, no copy */
    uint64_t entries[BUILD_BATCH][2];  /* DT_INIT, DT_FINI (dynamic_entries) */
    unsigned nentries[BUILD_BATCH];
    unsigned n;
    size_t bytes;
    int cache_dir; /* unwind_cache_open, for the pass */
};

/* The absolute addresses of the object's DT_INIT and DT_FINI functions in
 * [lo, hi), which no FDE may cover (unwind_build_table). Read from its
 * dynamic section in memory, under the loader's lock (dl_iterate_phdr), and
 * only when that section lies in one of its PT_LOAD segments. glibc adds the
 * load bias to these two when it calls them, not in the section: an address
 * that is not in [lo, hi) with the bias is taken as it is (a loader that
 * relocated it in place). */
static unsigned dynamic_entries(const struct dl_phdr_info *info, uint64_t lo, uint64_t hi, uint64_t out[2])
{
    const ElfW(Phdr) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = &info->dlpi_phdr[i];
    bool loaded = false;
    for (int i = 0; dyn && i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && dyn->p_vaddr >= ph->p_vaddr && dyn->p_memsz <= ph->p_memsz &&
            dyn->p_vaddr - ph->p_vaddr <= ph->p_memsz - dyn->p_memsz)
            loaded = true;
    }
    if (!loaded)
        return 0;
    const ElfW(Dyn) *d = (const ElfW(Dyn) *)(uintptr_t)(info->dlpi_addr + dyn->p_vaddr);
    unsigned n = 0;
    for (size_t k = 0; k < dyn->p_memsz / sizeof *d && d[k].d_tag != DT_NULL && n < 2; k++) {
        if (d[k].d_tag != DT_INIT && d[k].d_tag != DT_FINI)
            continue;
        uint64_t v = d[k].d_un.d_ptr, biased = info->dlpi_addr + v;
        if (biased >= lo && biased < hi)
            out[n++] = biased;
        else if (v >= lo && v < hi)
            out[n++] = v;
    }
    return n;
}

/* The module of index ix that describes this object (its text o), or NULL:
 * only the object the index describes, not another one loaded at the same
 * address since the scan, which waits for the rescan its load triggers. */
static struct unwind_module *indexed_module(const struct object_text *o, struct unwind_index *ix)
{
    if (o->hi <= o->lo)
        return NULL;
    struct unwind_module key = {.lo = o->lo};
    struct unwind_module *m = bsearch(&key, ix->mod, ix->count, sizeof key, module_order);
    return m && m->hi == o->hi && m->eh_frame_hdr == o->eh_frame_hdr ? m : NULL;
}

static int copy_if_wanted(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct build_pass *bp = arg;
    bool wanted = bp->any_base;
    for (unsigned i = 0; i < bp->nbases && !wanted; i++)
        wanted = bp->bases[i] == info->dlpi_addr;
    if (!wanted)
        return 0;
    struct object_text o;
    read_object_text(info, &o);
    struct unwind_module *m = indexed_module(&o, bp->ix);
    if (m == NULL || atomic_load(&m->state) != UNWIND_MOD_WANTED)
        return 0;
    if (bp->n == BUILD_BATCH || bp->bytes > (64u << 20))
        return 1; /* the rest at the next poll */
    unsigned k = bp->n++;
    bp->mod[k] = m;
    bp->copy[k] = NULL;
    bp->nentries[k] = dynamic_entries(info, m->lo, m->hi, bp->entries[k]);
    if (!unwind_cache_name(bp->cache_dir, info, m->lo, m->hi, m->eh_frame_hdr, bp->cache_name[k],
                           sizeof bp->cache_name[k], &bp->cached[k]))
        bp->cache_name[k][0] = '\0';
    if (bp->cached[k])
        return 0; /* read from the cache after the lock: no bytes needed */
    size_t len = m->eh_limit - m->eh_frame_hdr;
    void *copy = malloc(len);
    if (copy)
        memcpy(copy, (const void *)(uintptr_t)m->eh_frame_hdr, len);
    bp->copy[k] = copy; /* NULL (out of memory): the module goes to libunwind */
    bp->bytes += len;
    return 0;
}

/* The tables' writer CPU (UNWIND's build_cpu_ns, the report's "tables: ...
 * ms writer CPU") is the whole pass, not only build_module's part: the
 * modules' names and cache lookups and the copies of their .eh_frame are
 * the tables' cost too. began, counted: the pass's start and build_cpu_ns
 * then. */
static void count_pass_cpu(uint64_t began, uint64_t counted)
{
    uint64_t spent = agent_thread_cpu_ns() - began, inside = build_cpu_ns - counted;
    if (began && spent > inside)
        build_cpu_ns += spent - inside;
}

static void build_wanted(void)
{
    if (!atomic_exchange(&unwind_build_wanted, 0))
        return;
    int cur = atomic_load(&unwind_index_current);
    if (cur < 0)
        return;
    uint64_t began = agent_thread_cpu_ns(), counted = build_cpu_ns;
    bool more;
    do {
        struct build_pass bp = {.ix = &unwind_indexes[cur], .cache_dir = unwind_cache_open()};
        for (size_t i = 0; i < bp.ix->count && !bp.any_base; i++) {
            if (atomic_load(&bp.ix->mod[i].state) != UNWIND_MOD_WANTED)
                continue;
            if (bp.nbases == BUILD_BASES)
                bp.any_base = true;
            else
                bp.bases[bp.nbases++] = bp.ix->mod[i].base;
        }
        dl_iterate_phdr(copy_if_wanted, &bp);
        for (unsigned i = 0; i < bp.n; i++) {
            build_module(bp.mod[i], bp.copy[i], bp.cache_dir, bp.cache_name[i], bp.cached[i], bp.entries[i],
                         bp.nentries[i]);
            free(bp.copy[i]);
        }
        if (bp.cache_dir >= 0)
            close(bp.cache_dir);
        more = bp.n == BUILD_BATCH || bp.bytes > (64u << 20); /* else nothing more is wanted */
    } while (more && agent_thread_cpu_ns() - began < 20000000ull);
    count_pass_cpu(began, counted);
    if (more)
        atomic_store(&unwind_build_wanted, 1); /* the rest at the next poll */
}

/*
 * Tables read from the cache before any sample asks for them. Why: a
 * sample that meets a module without a table asks the writer for it with a
 * futex wake, and its walk is copied and finished later (unwind_defer.c).
 * On this project's VM (2026-12-01, torch_train.py --steps 60, the
 * unwinding step timed per sample) that wake cost 13-17 us in the handler
 * (the writer sleeps on another CPU: the wake is an inter-processor
 * interrupt, a VM exit), the stack copy 1.5-8 us more: ~34 such samples a
 * run (one per module PyTorch runs in), ~1 % of them, were the handler's
 * 99th percentile (20 us against a median of 1). A module whose table is
 * in the cache needs no sample to ask: after each scan that adds modules,
 * the writer looks each new one up by build-id once and reads what is
 * there. A module no run sampled yet has no file and is still built on
 * demand. The cost: a name and an fstatat per new module, and reading
 * tables of modules this run may not sample (mapped, shared page cache),
 * once the process has run a sampling period.
 */
#define EAGER_BATCH 32
struct eager_pass {
    struct unwind_index *ix;
    struct unwind_module *mod[EAGER_BATCH];
    char cache_name[EAGER_BATCH][128];
    unsigned n;
    int cache_dir; /* unwind_cache_open, for the pass */
    bool more; /* the batch filled up: another pass */
    struct object_pass objects; /* seen_order: the objects the index was scanned from */
};

static int find_cached(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct eager_pass *ep = arg;
    struct object_text scratch;
    struct unwind_module *m = indexed_module(next_object_text(info, size, &ep->objects, false, &scratch), ep->ix);
    if (m == NULL || m->cache_looked || atomic_load(&m->state) == UNWIND_MOD_BUILT ||
        atomic_load(&m->state) == UNWIND_MOD_NONE)
        return 0;
    if (ep->n == EAGER_BATCH) {
        ep->more = true;
        return 1;
    }
    m->cache_looked = 1;
    bool present = false;
    if (unwind_cache_name(ep->cache_dir, info, m->lo, m->hi, m->eh_frame_hdr, ep->cache_name[ep->n],
                          sizeof ep->cache_name[0], &present) &&
        present)
        ep->mod[ep->n++] = m;
    return 0;
}

static void load_cached_new(void)
{
    int cur = atomic_load(&unwind_index_current);
    /* Not before the process has run a sampling period: an exec'd child
     * that ends before its first one (a shell loop's /bin/true) would read
     * its libraries' tables for nothing (300 such children: +0.1 ms each). */
    if (!eager_wanted || cur < 0 || atomic_load_explicit(&agent_periods_taken, memory_order_relaxed) == 0)
        return;
    eager_wanted = false;
    uint64_t began = agent_thread_cpu_ns(), counted = build_cpu_ns;
    struct eager_pass ep;
    do {
        ep = (struct eager_pass){.ix = &unwind_indexes[cur], .cache_dir = unwind_cache_open(), .objects.reuse = true};
        dl_iterate_phdr(find_cached, &ep);
        for (unsigned i = 0; i < ep.n; i++) /* one that fails to load stays as it was: built on demand */
            build_module(ep.mod[i], NULL, ep.cache_dir, ep.cache_name[i], true, NULL, 0);
        if (ep.cache_dir >= 0)
            close(ep.cache_dir);
    } while (ep.more && agent_thread_cpu_ns() - began < 20000000ull);
    eager_wanted = ep.more; /* the rest at the next poll */
    count_pass_cpu(began, counted);
}

/* ---- the tables' memory ----------------------------------------------------- */

/* Bytes of the tables mapped now (the writer builds and frees them): the
 * memory readings leave them out of the workload's RSS. */
static _Atomic uint64_t tables_mapped_bytes, tables_file_bytes;

void unwind_table_account(size_t bytes, bool from_file)
{
    atomic_fetch_add_explicit(&tables_mapped_bytes, bytes, memory_order_relaxed);
    if (from_file)
        atomic_fetch_add_explicit(&tables_file_bytes, bytes, memory_order_relaxed);
}

uint64_t unwind_tables_file_bytes(void)
{
    return atomic_load_explicit(&tables_file_bytes, memory_order_relaxed);
}

uint64_t unwind_tables_mapped_bytes(void)
{
    return atomic_load_explicit(&tables_mapped_bytes, memory_order_relaxed);
}

void unwind_table_free(struct unwind_table *t)
{
    if (t) {
        atomic_fetch_sub_explicit(&tables_mapped_bytes, t->map_bytes, memory_order_relaxed);
        if (t->from_file)
            atomic_fetch_sub_explicit(&tables_file_bytes, t->map_bytes, memory_order_relaxed);
        const void *block = unwind_table_block(t);
        munmap((void *)(uintptr_t)block, t->map_bytes);
        if (block != (const void *)t)
            free(t); /* a cached table's struct (unwind_cache_load) */
    }
}

/* ---- what the writer reports ----------------------------------------------- */

static struct opr_unwind last_emitted;
static uint64_t last_emit_ns, last_timed_total;

/* "module+0xoff(symbol)" of pc, for the check mode's NOTE. */
static int describe_pc(char *out, size_t cap, uint64_t pc)
{
    Dl_info info;
    if (dladdr((void *)(uintptr_t)pc, &info) && info.dli_fname) {
        const char *base = strrchr(info.dli_fname, '/');
        base = base ? base + 1 : info.dli_fname;
        return snprintf(out, cap, " %s+0x%llx(%s)", base,
                        (unsigned long long)(pc - (uint64_t)(uintptr_t)info.dli_fbase),
                        info.dli_sname ? info.dli_sname : "?");
    }
    return snprintf(out, cap, " 0x%llx", (unsigned long long)pc);
}

static void emit_note(agent_emit_fn emit, const char *text)
{
    struct opr_note n = {agent_now_ns(), (uint32_t)strlen(text), 0};
    emit(OPR_REC_NOTE, &n, sizeof n, text, n.text_len);
}

/* --unwind-check: a handler (or the writer, for a deferred walk) keeps the
 * first few disagreements for the NOTE below, from a few frames before the
 * first difference (at frame diff). Atomics only: handler-safe. */
static void keep_example(const uint64_t *a, unsigned na, const uint64_t *b, unsigned nb, unsigned diff)
{
    unsigned from = diff > 4 ? diff - 4 : 0;
    for (unsigned i = 0; i < UNWIND_MAX_EXAMPLES; i++) {
        struct unwind_check_example *e = &unwind_examples[i];
        int expected = 0;
        if (!atomic_compare_exchange_strong(&e->state, &expected, 1))
            continue;
        e->from = from;
        e->ntable_all = na;
        e->nlib_all = nb;
        e->ntable = na - from < UNWIND_EXAMPLE_FRAMES ? na - from : UNWIND_EXAMPLE_FRAMES;
        e->nlib = nb - from < UNWIND_EXAMPLE_FRAMES ? nb - from : UNWIND_EXAMPLE_FRAMES;
        memcpy(e->table, a + from, e->ntable * sizeof a[0]);
        memcpy(e->lib, b + from, e->nlib * sizeof b[0]);
        atomic_store_explicit(&e->state, 2, memory_order_release);
        return;
    }
}

enum unwind_check_verdict unwind_check_differs(const uint64_t *table, unsigned nt, bool table_cut, const uint64_t *lib,
                                               unsigned nl, bool lib_cut)
{
    unsigned common = nt < nl ? nt : nl, i = 0;
    while (i < common && table[i] == lib[i])
        i++;
    /* Both cut at the frame limit (a 256-frame import in PyTorch): only
     * the common part can be compared. */
    if (i == common && (nt == nl || (table_cut && lib_cut)))
        return UNWIND_CHECK_SAME;
    if (nt > 0 && unwind_pc_at_entry_row(table[0]))
        return UNWIND_CHECK_AT_ENTRY;
    keep_example(table, nt, lib, nl, i);
    return i == common ? UNWIND_CHECK_DIFFERS_LENGTH : UNWIND_CHECK_DIFFERS;
}

/* OPPROF_UNWIND_CHECK=1: each disagreement kept by a handler, as a NOTE. */
static void emit_examples(agent_emit_fn emit)
{
    for (unsigned i = 0; i < UNWIND_MAX_EXAMPLES; i++) {
        struct unwind_check_example *e = &unwind_examples[i];
        if (atomic_load_explicit(&e->state, memory_order_acquire) != 2)
            continue;
        char text[4096];
        size_t len = (size_t)snprintf(text, sizeof text,
                                      "unwind check: stacks differ (tables %u frames, libunwind %u), "
                                      "from frame %u; tables:",
                                      e->ntable_all, e->nlib_all, e->from);
        for (unsigned k = 0; k < e->ntable && len < sizeof text; k++)
            len += (size_t)describe_pc(text + len, sizeof text - len, e->table[k]);
        if (len < sizeof text)
            len += (size_t)snprintf(text + len, sizeof text - len, "; libunwind:");
        for (unsigned k = 0; k < e->nlib && len < sizeof text; k++)
            len += (size_t)describe_pc(text + len, sizeof text - len, e->lib[k]);
        emit_note(emit, text);
        atomic_store(&e->state, 3);
    }
}

/* The q-quantile (0..1) of histogram h in ns (the bucket's middle), 0 when
 * empty. TSC ticks are converted with the ratio of TSC to CLOCK_MONOTONIC
 * since the constructor. */
static uint64_t quantile_ns(_Atomic uint64_t *h, double q)
{
    uint64_t total = 0, seen = 0;
    for (unsigned k = 0; k < UNWIND_HIST_BUCKETS; k++)
        total += atomic_load_explicit(&h[k], memory_order_relaxed);
    uint64_t ns = agent_now_ns() - unwind_ns0, ticks = __rdtsc() - unwind_tsc0;
    if (total == 0 || ns == 0 || ticks == 0)
        return 0;
    uint64_t want = (uint64_t)(q * (double)total);
    for (unsigned k = 0; k < UNWIND_HIST_BUCKETS; k++) {
        seen += atomic_load_explicit(&h[k], memory_order_relaxed);
        if (seen > want) {
            double mid = k < 4 ? k + 0.5 : (double)(4 + (k & 3) + 0.5) * (double)(1ull << (k / 4 - 2));
            return (uint64_t)(mid * (double)ns / (double)ticks);
        }
    }
    return 0;
}

static void emit_counts(agent_emit_fn emit, bool final)
{
    /* A share before its whole: the handler adds to the whole first
     * (unwind_defer_keep), so the record never has more of the one than of
     * the other. (An initializer's loads come in no fixed order.) */
    uint64_t deferred_unknown_stack = atomic_load(&unwind_counts.deferred_unknown_stack);
    uint64_t deferred_samples = atomic_load(&unwind_counts.deferred_samples);
    struct opr_unwind u = {
        .table_samples = atomic_load(&unwind_counts.table_samples),
        .table_frames = atomic_load(&unwind_counts.table_frames),
        .fallback_samples = atomic_load(&unwind_counts.fallback_samples),
        .fallback_not_built = atomic_load(&unwind_counts.fallback_not_built),
        .fallback_no_module = atomic_load(&unwind_counts.fallback_no_module),
        .fallback_no_table = atomic_load(&unwind_counts.fallback_no_table),
        .fallback_rule = atomic_load(&unwind_counts.fallback_rule),
        .fallback_read = atomic_load(&unwind_counts.fallback_read),
        .check_samples = atomic_load(&unwind_counts.check_samples),
        .check_disagree = atomic_load(&unwind_counts.check_disagree),
        .check_disagree_length = atomic_load(&unwind_counts.check_disagree_length),
        .context_checked = atomic_load(&unwind_counts.context_checked),
        .context_disagree = atomic_load(&unwind_counts.context_disagree),
        .replay_samples = atomic_load(&unwind_counts.replay_samples),
        .replay_frames = atomic_load(&unwind_counts.replay_frames),
        .rule_lookups = atomic_load(&unwind_counts.rule_lookups),
        .rule_cache_hits = atomic_load(&unwind_counts.rule_cache_hits),
        .deferred_samples = deferred_samples,
        .deferred_finished = atomic_load(&unwind_counts.deferred_finished),
        .deferred_cut = atomic_load(&unwind_counts.deferred_cut),
        .deferred_pool_full = atomic_load(&unwind_counts.deferred_pool_full),
        .deferred_checked = atomic_load(&unwind_counts.deferred_checked),
        .deferred_disagree = atomic_load(&unwind_counts.deferred_disagree),
        .deferred_unknown_stack = deferred_unknown_stack,
        .check_at_entry = atomic_load(&unwind_counts.check_at_entry),
        .tables_built = tables_built,
        .table_bytes = table_bytes,
        .build_cpu_ns = build_cpu_ns,
    };
    unwind_cache_counts(&u.cache_loaded, &u.cache_stored, &u.cache_rejected, &u.cache_evicted);
    /* Not compared below: they move with the clock calibration. */
    struct opr_unwind timed = u;
    uint64_t now = agent_now_ns(), timed_total = 0;
    for (unsigned k = 0; k < UNWIND_HIST_BUCKETS; k++)
        timed_total += atomic_load(&unwind_hist[0][k]) + atomic_load(&unwind_hist[1][k]);
    if ((memcmp(&u, &last_emitted, sizeof u) == 0 && timed_total == last_timed_total) ||
        (!final && now - last_emit_ns < 1000000000ull))
        return;
    last_timed_total = timed_total;
    last_emitted = u;
    last_emit_ns = now;
    timed.time_ns = now;
    timed.table_p50_ns = quantile_ns(unwind_hist[0], 0.5);
    timed.table_p99_ns = quantile_ns(unwind_hist[0], 0.99);
    timed.libunwind_p50_ns = quantile_ns(unwind_hist[1], 0.5);
    timed.libunwind_p99_ns = quantile_ns(unwind_hist[1], 0.99);
    emit(OPR_REC_UNWIND, &timed, sizeof timed, NULL, 0);
}

/* Objects loaded or unloaded since the last scan (the loader's counts): a
 * new module index. */
static bool rescan_if_loader_changed(void)
{
    unsigned long long counts[2] = {0, 0};
    dl_iterate_phdr(read_counts, counts);
    if (scanned_once && counts[0] == seen_adds && counts[1] == seen_subs)
        return false;
    unwind_rescan(false);
    return true;
}

void agent_unwind_poll(agent_emit_fn emit)
{
    if (agent_config.call_graph != CALL_GRAPH_DWARF)
        return;
    if (!agent_unwind_tables_on()) { /* OPPROF_UNWIND=libunwind: only its timing */
        emit_counts(emit, !atomic_load(&agent_accepting));
        return;
    }
    rescan_if_loader_changed();
    atomic_store(&unwind_index_miss, 0);
    /* The handler checks every stack word against the readable mappings
     * (agent_memmap.c), which the writer otherwise keeps only for Python:
     * refreshed at start, after a miss (a new thread's stack) and as that
     * file decides. */
    agent_memmap_maybe_refresh();
    load_cached_new(); /* before a sample asks: no wake, no deferred walk */
    build_wanted();
    emit_examples(emit);
    /* Once a second or so: free the walk memos of threads that exited (a
     * tgkill probe per claimed memo), so that the pool serves new threads. */
    static unsigned polls_since_reap;
    if (++polls_since_reap >= 100) {
        polls_since_reap = 0;
        unwind_memo_reap();
    }
    /* The agent stops accepting samples before its final drain: then the
     * counts are final and written whatever the time. */
    emit_counts(emit, !atomic_load(&agent_accepting));
}

bool agent_unwind_wait(uint64_t deadline_ns)
{
    for (;;) {
        if (atomic_exchange(&unwind_writer_call, 0))
            return true;
        uint64_t now_ns = agent_now_ns();
        if (now_ns >= deadline_ns)
            return false;
        uint64_t left = deadline_ns - now_ns;
        struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
        /* returns at a wake, a timeout, or at once when a handler set the word already */
        syscall(SYS_futex, (void *)&unwind_writer_call, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
    }
}

void agent_unwind_serve(void)
{
    if (agent_config.call_graph != CALL_GRAPH_DWARF || !agent_unwind_tables_on())
        return;
    /* A PC in no module: an object dlopen'ed since the last scan, or code
     * outside any object (JIT). Only a rescan that found a change clears the
     * miss here, so JIT code calls the writer at most once per drain (whose
     * poll clears it), not once per sample. */
    if (atomic_load(&unwind_index_miss) && rescan_if_loader_changed())
        atomic_store(&unwind_index_miss, 0);
    load_cached_new(); /* before a sample asks: no wake, no deferred walk */
    build_wanted();
}

/* A fork child writes a stream of its own: its counts start again. The
 * parent's tables stay valid (the same mappings, copied). */
void unwind_build_atfork_child(void)
{
    memset(&last_emitted, 0, sizeof last_emitted);
    last_emit_ns = last_timed_total = 0;
    tables_built = table_bytes = build_cpu_ns = 0;
    unwind_cache_atfork_child();
}
