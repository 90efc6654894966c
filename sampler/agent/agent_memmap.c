/*
 * sampler/agent/agent_memmap.c — "may the handler read this address?"
 *
 * SIGNAL-HANDLER CODE: agent_memmap_listed() runs inside the SIGTRAP
 * handler: no malloc, no locks, no stdio, only atomics and reads of static
 * tables.
 *
 * Why: the Python frame walk follows pointers that are not always valid at
 * an arbitrary instruction. CPython 3.11's _PyEval_EvalFrameDefault stores
 * tstate->cframe = &cframe before it sets cframe.current_frame, so for a few
 * instructions the current frame is uninitialized stack data; a stale frame
 * can point into a data-stack chunk or arena that was unmapped since. Reading
 * such an address would crash the workload. Every pointer is therefore
 * checked against the process's readable mappings first.
 *
 * The writer thread reads /proc/self/maps into one of two static tables and
 * publishes it with an atomic index; before overwriting the table not in use
 * it waits until no handler is still reading it (handlers count themselves in
 * and out). A pointer outside every known range is reported as a miss, with
 * its address; the caller does not read it in place on the table's word (the
 * Python walk asks the kernel whether it is readable now first,
 * agent_python.c: the table lags new mappings by up to MISS_CHECK_NS plus a
 * drain, and refusing those reads cut chains short).
 *
 * When to re-read: a full read of the maps cost the writer ~1.5 ms of CPU in
 * a process that imported torch (1,691 lines; 0.4 ms hand-parsed on the VM
 * where fgets and sscanf took 0.8, parse_maps_line), and it re-read once a second
 * and after every miss (at most every 20 ms): 49 full reads in a 12 s
 * training run. Some misses are garbage pointers (the uninitialized frame
 * above), which no re-read would make readable (though on py_split.py and
 * torch_train.py every miss counted on 2026-11-24 was a new mapping). So the
 * writer re-reads only when the mappings have changed in a way that
 * matters: a library was unloaded (glibc's unload count,
 * agent_phdr_unload_count: its ranges must go), or a missed address is
 * mapped now (memory mapped since the last read: a new data-stack chunk,
 * arena, or library). On Linux 6.11+ PROCMAP_QUERY
 * names the one mapping that holds the address and only that range is added
 * (one ioctl, no text); elsewhere one process_vm_readv of the address says
 * whether it is readable, and then the maps are read in full. A garbage
 * address costs that one probe. Ranges unmapped since the last read stay in
 * the table until the next re-read, at the latest SAFETY_REREAD_NS later: the frames
 * the handler reads in place are its own thread's live frames, and the one
 * that may be on its way out is copied (agent_python.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sampler/agent/agent.h"

#define MEMMAP_MAX_RANGES 8192

struct memmap_table {
    size_t count;
    uint64_t start[MEMMAP_MAX_RANGES];
    uint64_t end[MEMMAP_MAX_RANGES];
};

static struct memmap_table tables[2];
static _Atomic int current = -1;          /* index of the published table, -1: none */
static _Atomic int readers[2];            /* handlers reading each table */
static _Atomic int miss_seen;             /* a lookup found no range */
static _Atomic int miss_woke;             /* a stack read's miss woke the writer since it last looked */
static _Atomic int stack_missed;          /* a stack read missed since the writer last looked */
static bool last_look_added = true;       /* writer: its last look at the misses found a mapping */
/* The addresses of the last misses, newest at miss_next - 1: during an
 * import a thread's walk misses in several new mappings (data-stack chunks,
 * arenas, the heap grown) between two looks of the writer, and when the
 * writer learnt of one a look (the last address only), each one's reads
 * were copied with a system call for 20 ms and more: ~1,000 copies in a
 * torch_train.py run, most of its handler calls over 10 us. */
#define MISS_SLOTS 8
static _Atomic uint64_t miss_addrs[MISS_SLOTS];
static _Atomic unsigned miss_next;
static uint64_t last_refresh_ns, last_miss_check_ns;
static unsigned long long unload_count_at_refresh; /* agent_phdr_unload_count() at the last read */
static int query_fd = -1;                 /* /proc/self/maps for PROCMAP_QUERY, -1: not open or not supported */
static bool query_unsupported;

/* After this long the table is re-read even without a sign of change, to drop
 * ranges unmapped since (see above). */
#define SAFETY_REREAD_NS 5000000000ull
/* Misses are looked at no more often than this. A handler that misses
 * wakes the writer (once until it has looked), so this also bounds those
 * wake-ups (garbage addresses, which no look makes readable, could ask for
 * one at every sample). */
#define MISS_CHECK_NS 5000000ull

/* Handler: counts in to the published table for one walk. Returns its
 * index, or -1 when there is none yet (then nothing may be read). */
int agent_memmap_begin(void)
{
    return agent_snapshot_enter(&current, readers);
}

void agent_memmap_end(int t)
{
    if (t >= 0)
        atomic_fetch_sub_explicit(&readers[t], 1, memory_order_release);
}

/* The kernel's page size, set by the writer's first refresh (sysconf is no
 * handler call); 0 until then, when agent_memmap_readable_now says no. */
static uint64_t page_bytes;

/* Handler: whether [addr, addr + len) is readable now, asked of the
 * kernel without copying it. FUTEX_CMP_REQUEUE with nothing to wake or
 * requeue reads one 32-bit word (get_user: EFAULT when the page is unmapped
 * or not readable) and compares it, then does nothing either way (EAGAIN on
 * a mismatch, 0 on a match: no waiter is woken or moved). One word per page
 * spanned. Why not process_vm_readv: in the handler that copy cost 10-15 us
 * (median ~9 us on torch_train.py), against ~1.3 us in a tight loop: the
 * task lookup, the access check and the page pinning run on caches the
 * workload has just cooled (a loop that touched 32 MB between calls
 * measured 17.6 us for it, 7.0 us for a futex word read plus a memcpy).
 * The pages stay readable until the caller's read only when nothing else
 * can unmap them meanwhile (agent_python.c: the innermost frame or its code
 * object, which only the sampled thread can free, and it is stopped in the
 * handler). */
bool agent_memmap_readable_now(uint64_t addr, size_t len)
{
    uint64_t page = page_bytes;
    if (page == 0 || len == 0 || addr + len < addr)
        return false;
    for (uint64_t at = addr & ~(uint64_t)3; at < addr + len; at = (at & ~(page - 1)) + page) {
        uint32_t *word = (uint32_t *)(uintptr_t)at;
        if (syscall(SYS_futex, word, FUTEX_CMP_REQUEUE_PRIVATE, 0, (void *)0, word, 0x9e3779b9u) < 0 && errno != EAGAIN)
            return false;
    }
    return true;
}

/* The index of the range of table m that holds addr, -1 when none does. */
static long range_index(const struct memmap_table *m, uint64_t addr)
{
    size_t lo = 0, hi = m->count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (addr < m->start[mid])
            hi = mid;
        else if (addr >= m->end[mid])
            lo = mid + 1;
        else
            return (long)mid;
    }
    return -1;
}

/* Handler: the lookup; a miss is noted for the writer, and wakes it when
 * wake is set (once until it has looked). */
static bool lookup(int t, uint64_t addr, size_t len, uint64_t *start, uint64_t *end, bool wake)
{
    if (t < 0)
        return false;
    const struct memmap_table *m = &tables[t];
    long i = range_index(m, addr);
    if (i >= 0 && addr + len <= m->end[i]) {
        *start = m->start[i];
        *end = m->end[i];
        return true;
    }
    /* A read that runs past a known range: the first byte past it is what
     * the writer must look up (a mapping grown since, the heap's brk). */
    uint64_t missed = i >= 0 ? m->end[i] : addr;
    unsigned slot = atomic_fetch_add_explicit(&miss_next, 1, memory_order_relaxed);
    atomic_store_explicit(&miss_addrs[slot % MISS_SLOTS], missed, memory_order_relaxed);
    atomic_store_explicit(&miss_seen, 1, memory_order_release);
    if (wake)
        atomic_store_explicit(&stack_missed, 1, memory_order_relaxed);
    /* its own flag: a Python read's miss just before must not hold it back */
    if (wake && atomic_exchange_explicit(&miss_woke, 1, memory_order_relaxed) == 0)
        agent_wake_writer();
    return false;
}

/* Handler: is [addr, addr+len) inside one readable mapping of table t?
 * [*start, *end) gets that mapping's range (unchanged on a miss), which the
 * caller's next reads may check first. A miss does not wake the writer: it
 * looks at its next drain (the Python walk, the one caller, reads what the
 * table misses after a one-word check, agent_memmap_readable_now, at ~1-3
 * us; the futex wake cost the handler 7-15 us on this VM, an interrupt
 * sent to the writer's idle CPU, and 1-2 % of a PyTorch run's handler
 * calls paid it: its p99). */
bool agent_memmap_listed(int t, uint64_t addr, size_t len, uint64_t *start, uint64_t *end)
{
    return lookup(t, addr, len, start, end, false);
}

/* Handler: the same, for a stack read. A miss here is a stack the table
 * does not know yet (a thread started since the last look), whose walk
 * copies it through the kernel (unwind_defer.c) until the writer has
 * looked: it is woken at once. */
bool agent_memmap_readable_range(int t, uint64_t addr, size_t len, uint64_t *start, uint64_t *end)
{
    return lookup(t, addr, len, start, end, true);
}

/* Writer thread: the index of the table not published, once no handler
 * reads it any more; -1 when handlers still do after 100 ms. */
static int unpublished_table(void)
{
    int cur = atomic_load(&current);
    int next = cur == 0 ? 1 : 0;
    for (int spins = 0; atomic_load(&readers[next]) != 0 && spins < 1000; spins++) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&readers[next]) != 0 ? -1 : next;
}

struct memmap_fill {
    struct memmap_table *m;
    size_t n;
};

/* One line of /proc/self/maps (opr_maps_read: read(2) and parsed by hand;
 * fgets and sscanf were half the cost of a full read, ~0.4 of ~0.8 ms for
 * the 1,687 lines of a process that imported torch, the kernel's
 * formatting the other half). */
static bool memmap_line(const struct opr_maps_line *line, void *ctx)
{
    struct memmap_fill *f = ctx;
    if (line->perms[0] != 'r')
        return true;
    if (f->n == MEMMAP_MAX_RANGES)
        return false;
    /* /proc/self/maps is sorted; merge adjacent readable ranges. */
    if (f->n > 0 && f->m->end[f->n - 1] == line->start) {
        f->m->end[f->n - 1] = line->end;
        return true;
    }
    f->m->start[f->n] = line->start;
    f->m->end[f->n] = line->end;
    f->n++;
    return true;
}

/* Writer thread only. Parses readable mappings into the unpublished table. */
void agent_memmap_refresh(void)
{
    if (page_bytes == 0) {
        long page = sysconf(_SC_PAGESIZE);
        page_bytes = page > 0 && (page & (page - 1)) == 0 ? (uint64_t)page : 0;
    }
    int next = unpublished_table();
    if (next < 0)
        return;
    unload_count_at_refresh = agent_phdr_unload_count();
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    static char buf[64 << 10]; /* lines are at most ~4.2 KB (a path is at most 4,096 bytes) */
    struct memmap_fill fill = {&tables[next], 0};
    opr_maps_read(fd, buf, sizeof buf, memmap_line, &fill);
    close(fd);
    agent_writer_counts.maps_rereads++;
    tables[next].count = fill.n;
    atomic_store_explicit(&current, next, memory_order_release);
    atomic_store(&miss_seen, 0);
    atomic_store(&stack_missed, 0);
    atomic_store(&miss_woke, 0);
    last_refresh_ns = agent_now_ns();
}

/* Writer thread: is one byte at addr readable now? */
static bool readable_now(uint64_t addr)
{
    char byte;
    struct iovec local = {&byte, 1};
    struct iovec remote = {(void *)(uintptr_t)addr, 1};
    return syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0) == 1;
}

/* The readable mapping that holds addr, through PROCMAP_QUERY (Linux 6.11+:
 * one ioctl on /proc/self/maps, no text; opr_maps_query). Older kernels
 * answer ENOTTY and the full read is used. */
static bool query_mapping(uint64_t addr, uint64_t *start, uint64_t *end)
{
    if (query_unsupported)
        return false;
    if (query_fd < 0 && (query_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC)) < 0) {
        query_unsupported = true;
        return false;
    }
    struct opr_maps_hit hit;
    int got = opr_maps_query(query_fd, addr, OPR_MAPS_QUERY_READABLE, &hit, NULL, 0);
    if (got < 0)
        query_unsupported = true;
    if (got != 1)
        return false;
    *start = hit.start;
    *end = hit.end;
    return true;
}

/* Publishes the current table plus [start, end) (merged with neighbours it
 * touches), instead of a full read. False when it could not. */
static bool insert_range(uint64_t start, uint64_t end)
{
    int cur = atomic_load(&current);
    int next = cur < 0 ? -1 : unpublished_table();
    if (next < 0)
        return false;
    const struct memmap_table *from = &tables[cur];
    struct memmap_table *to = &tables[next];
    if (from->count + 1 > MEMMAP_MAX_RANGES)
        return false;
    size_t n = 0, i = 0;
    while (i < from->count && from->end[i] < start) { /* wholly before */
        to->start[n] = from->start[i];
        to->end[n++] = from->end[i++];
    }
    uint64_t s = start, e = end;
    while (i < from->count && from->start[i] <= e) { /* touching or overlapping: merged */
        if (from->start[i] < s)
            s = from->start[i];
        if (from->end[i] > e)
            e = from->end[i];
        i++;
    }
    to->start[n] = s;
    to->end[n++] = e;
    while (i < from->count) {
        to->start[n] = from->start[i];
        to->end[n++] = from->end[i++];
    }
    to->count = n;
    atomic_store_explicit(&current, next, memory_order_release);
    return true;
}

/* Whether the published table holds addr (writer). */
static bool table_holds(uint64_t addr)
{
    int cur = atomic_load(&current);
    return cur >= 0 && range_index(&tables[cur], addr) >= 0;
}

/* Writer thread, every drain and when a handler missed: re-reads after a
 * library was unloaded (its ranges must go) and every SAFETY_REREAD_NS;
 * each missed address that is mapped now is added alone when the kernel can
 * say which mapping holds it, else makes a full read. See the top of the
 * file. */
void agent_memmap_maybe_refresh(void)
{
    uint64_t now = agent_now_ns();
    uint64_t age = now - last_refresh_ns;
    if (agent_phdr_unload_count() != unload_count_at_refresh || age > SAFETY_REREAD_NS) {
        agent_memmap_refresh();
        return;
    }
    /* A stack read's miss is looked at again at once while looks find
     * mappings: threads started together (an OpenMP team, known_split's
     * workers) miss one after another, and at one look per MISS_CHECK_NS a
     * thread's samples had their stacks copied through the kernel for up
     * to ~10 ms (4-7 walks a thread deferred so, each a system call of
     * 1.5-8 us in the handler). A look that found nothing (a garbage
     * address) brings the limit back. */
    bool at_once = last_look_added && atomic_load(&stack_missed);
    if (!atomic_load(&miss_seen) || (now - last_miss_check_ns < MISS_CHECK_NS && !at_once))
        return;
    last_miss_check_ns = now;
    atomic_store(&miss_seen, 0);
    atomic_store(&stack_missed, 0);
    atomic_store(&miss_woke, 0);
    last_look_added = false;
    for (unsigned i = 0; i < MISS_SLOTS; i++) {
        uint64_t addr = atomic_exchange(&miss_addrs[i], 0);
        if (addr == 0 || table_holds(addr)) /* taken, or in a range another slot's query added */
            continue;
        agent_writer_counts.maps_probes++;
        uint64_t start, end;
        if (query_mapping(addr, &start, &end)) {
            last_look_added = true;
            if (!insert_range(start, end)) {
                agent_memmap_refresh();
                return;
            }
        } else if (query_unsupported && readable_now(addr)) {
            last_look_added = true;
            agent_memmap_refresh(); /* the whole table: every slot's mapping is in it */
            return;
        }
    }
}

/* In a fork child: the parent's tables describe the same memory (fork copies
 * the address space), only the reader counts may be stale. */
void agent_memmap_atfork_child(void)
{
    if (query_fd >= 0)
        close(query_fd); /* /proc/self was the parent when it was opened */
    query_fd = -1;
    atomic_store(&readers[0], 0);
    atomic_store(&readers[1], 0);
    atomic_store(&miss_woke, 0); /* the child's writer is a new thread: the first stack miss wakes it */
}
