/*
 * bench/unwind_replay.c — the handler's stack walk on recorded stacks: the
 * samples of a real run (PyTorch, CPython, OpenMP) as `perf record
 * --call-graph dwarf` keeps them (each sample's user registers and the top
 * of its stack), walked again here by the agent's table unwinder, in the
 * order they were taken, each thread with its own memo and rule cache as in
 * the handler. Run under valgrind --tool=callgrind by
 * bench/unwind_replay.sh, which divides the walks' instructions by the walks:
 * a per-sample figure that does not move with the machine's load, on the
 * stacks a profile of that program really meets (bench/unwind_bench.c has
 * synthetic ones).
 *
 *   unwind_replay PERF_DATA    # recorded with --call-graph dwarf[,SIZE]
 *   unwind_replay --cold MB PERF_DATA
 *
 * --cold: each handler walk timed (TSC) after a write per 64-byte line of MB
 * of other memory, which leaves the tables, memo, rule cache and stack out
 * of the caches as a workload does between samples: what instruction counts
 * cannot see. Prints the walks' quantiles, a least-squares split of a walk's
 * time and one cold read's latency (bench/README.md, "Cold walks").
 *
 * Each sample's stack bytes go back to the addresses they were read from
 * (one private mapping per thread, MAP_FIXED_NOREPLACE: a thread whose
 * stack would land on this process's own mappings is left out and
 * counted), so the walk reads them as the handler reads the live stack;
 * memory outside a sample's copy is unreadable to it. The tables are
 * compiled from the files the run's MMAP2 records name, at the addresses
 * they were mapped at: the files must not have changed since the recording
 * (the vDSO's from this process's own: the same kernel's).
 *
 * Two walks per sample, each in its own function for callgrind:
 *   walk_handler()  unwind_table_walk_resumable with the thread's memo and
 *                   rule cache: what the handler runs
 *   walk_plain()    unwind_table_walk: every frame from the tables
 * and the two must give the same frames (counted, and the exit status).
 *
 * Only the process with the most samples is replayed (a launcher's or a
 * child's samples have other modules), from its last exec on. perf.data is this bench's input, a
 * file the user made: it is checked as it is read (sizes against the
 * record and the file), and anything it does not expect ends the run with
 * a message.
 */
#include <elf.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "bench/unwind_standins.h"

#define MAX_FRAMES 256
#define MAX_THREADS 256
#define MAX_PIDS 64

/* perf's x86-64 register numbers (arch/x86/include/uapi/asm/perf_regs.h) */
#define PERF_REG_X86_BP 6
#define PERF_REG_X86_SP 7
#define PERF_REG_X86_IP 8

static void die(const char *what)
{
    fprintf(stderr, "unwind_replay: %s\n", what);
    exit(2);
}

/* ---- perf.data -------------------------------------------------------------- */

struct sample {
    uint32_t pid, tid;
    uint64_t ip, sp, bp;
    const uint8_t *stack; /* dyn_size bytes read at sp */
    uint64_t stack_len;
};

static const uint8_t *data; /* the file, mapped */
static size_t data_size;
static uint64_t sample_type, regs_mask;

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void open_perf_data(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 104)
        die("cannot read the perf.data given (or it is too short to be one)");
    data_size = (size_t)st.st_size;
    data = mmap(NULL, data_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (data == MAP_FAILED)
        die("cannot map the perf.data given");
    if (memcmp(data, "PERFILE2", 8) != 0)
        die("not a perf.data file (no PERFILE2 magic; a piped recording is not supported)");
    uint64_t attr_size = rd64(data + 16), attrs_at = rd64(data + 24), attrs_len = rd64(data + 32);
    if (attr_size < 96 || attrs_len < attr_size || attrs_at > data_size || attrs_len > data_size - attrs_at)
        die("perf.data: bad attribute section");
    const uint8_t *attr = data + attrs_at;
    sample_type = rd64(attr + 24);
    regs_mask = rd64(attr + 80);
    if (attrs_len / (attr_size + 16) > 1)
        die("perf.data holds more than one event: record one (e.g. -e task-clock)");
    const uint64_t need = PERF_SAMPLE_TID | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    if ((sample_type & need) != need)
        die("perf.data has no user registers and stack: record with --call-graph dwarf");
    if (sample_type & (PERF_SAMPLE_READ | PERF_SAMPLE_BRANCH_STACK))
        die("perf.data samples carry read values or branch stacks: record without them");
    const uint64_t regs = (1ull << PERF_REG_X86_BP) | (1ull << PERF_REG_X86_SP) | (1ull << PERF_REG_X86_IP);
    if ((regs_mask & regs) != regs)
        die("perf.data's user registers lack IP, SP or BP (not an x86-64 recording?)");
}

/* Register r of a sample's REGS_USER block (regs_mask's order). */
static uint64_t sample_reg(const uint8_t *regs, int r)
{
    return rd64(regs + 8 * (size_t)__builtin_popcountll(regs_mask & ((1ull << r) - 1)));
}

/* A SAMPLE record's fields up to its stack; false when it has no usable one. */
static bool parse_sample(const uint8_t *p, const uint8_t *end, struct sample *s)
{
    static const uint64_t u64_fields_before_tid = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP;
    static const uint64_t u64_fields_after_tid[] = {PERF_SAMPLE_TIME,      PERF_SAMPLE_ADDR, PERF_SAMPLE_ID,
                                                    PERF_SAMPLE_STREAM_ID, PERF_SAMPLE_CPU,  PERF_SAMPLE_PERIOD};
#define NEED(n)                                                        \
    do {                                                               \
        if ((size_t)(end - p) < (size_t)(n))                           \
            die("perf.data: a sample record shorter than its fields"); \
    } while (0)
    NEED(8 * (size_t)__builtin_popcountll(sample_type & u64_fields_before_tid) + 8);
    p += 8 * (size_t)__builtin_popcountll(sample_type & u64_fields_before_tid);
    s->pid = rd32(p);
    s->tid = rd32(p + 4);
    p += 8;
    for (size_t i = 0; i < sizeof u64_fields_after_tid / sizeof u64_fields_after_tid[0]; i++)
        if (sample_type & u64_fields_after_tid[i]) {
            NEED(8);
            p += 8;
        }
    if (sample_type & PERF_SAMPLE_CALLCHAIN) {
        NEED(8);
        uint64_t nr = rd64(p);
        if (nr > (uint64_t)(end - p) / 8)
            die("perf.data: a callchain longer than its record");
        p += 8 + 8 * nr;
    }
    if (sample_type & PERF_SAMPLE_RAW) {
        NEED(4);
        uint32_t size = rd32(p);
        NEED(4 + (size_t)size);
        p += 4 + size;
    }
    NEED(8);
    uint64_t abi = rd64(p);
    p += 8;
    if (abi == 0)
        return false; /* no user registers: a sample in a kernel thread */
    size_t nregs = (size_t)__builtin_popcountll(regs_mask);
    NEED(8 * nregs);
    const uint8_t *regs = p;
    p += 8 * nregs;
    NEED(8);
    uint64_t size = rd64(p);
    p += 8;
    if (size == 0)
        return false;
    if (size > (uint64_t)(end - p) || (uint64_t)(end - p) - size < 8)
        die("perf.data: a user stack longer than its record");
    s->stack = p;
    s->stack_len = rd64(p + size);
    if (s->stack_len > size)
        die("perf.data: a user stack's dyn_size beyond its size");
    s->ip = sample_reg(regs, PERF_REG_X86_IP);
    s->sp = sample_reg(regs, PERF_REG_X86_SP);
    s->bp = sample_reg(regs, PERF_REG_X86_BP);
    return s->stack_len >= 8;
#undef NEED
}

/* Calls fn for each record of the data section. */
static void each_record(void (*fn)(const struct perf_event_header *h, const uint8_t *body, const uint8_t *end))
{
    uint64_t at = rd64(data + 40), len = rd64(data + 48);
    if (at > data_size || len > data_size - at)
        die("perf.data: bad data section");
    const uint8_t *p = data + at, *end = data + at + len;
    while ((size_t)(end - p) >= sizeof(struct perf_event_header)) {
        struct perf_event_header h;
        memcpy(&h, p, sizeof h);
        if (h.size < sizeof h || h.size > (size_t)(end - p))
            die("perf.data: a record's size is wrong (a truncated file?)");
        if (h.type == 81 /* PERF_RECORD_COMPRESSED */)
            die("perf.data is compressed: record without -z");
        fn(&h, p + sizeof h, p + h.size);
        p += h.size;
    }
}

/* ---- the process's modules, from its MMAP2 records ---------------------------- */

static uint32_t pids[MAX_PIDS], pid_samples[MAX_PIDS];
static unsigned npids;
static uint32_t replay_pid;
static struct unwind_module mods[UNWIND_MAX_MODULES];
static const char *mod_paths[UNWIND_MAX_MODULES]; /* into the mapped perf.data */
static size_t nmods;
static unsigned files_unreadable;

/* Where each pid last exec'd (a COMM record with the exec flag): perf's
 * child runs perf's own code until its exec, at other addresses. */
static const uint8_t *pid_exec_at[MAX_PIDS];

static unsigned pid_index(uint32_t pid)
{
    for (unsigned i = 0; i < npids; i++)
        if (pids[i] == pid)
            return i;
    if (npids == MAX_PIDS)
        return MAX_PIDS;
    pids[npids] = pid;
    pid_samples[npids] = 0;
    pid_exec_at[npids] = NULL;
    return npids++;
}

/* Whether a record of the replayed pid comes after its last exec. */
static const uint8_t *replay_from;
static bool after_exec(const uint8_t *body)
{
    return body >= replay_from;
}

static void count_pid_samples(const struct perf_event_header *h, const uint8_t *body, const uint8_t *end)
{
    if (h->type == PERF_RECORD_COMM && (h->misc & PERF_RECORD_MISC_COMM_EXEC) && end - body >= 8) {
        unsigned i = pid_index(rd32(body));
        if (i < MAX_PIDS) {
            pid_exec_at[i] = body;
            pid_samples[i] = 0; /* the samples before were another program's */
        }
        return;
    }
    struct sample s;
    if (h->type != PERF_RECORD_SAMPLE || !parse_sample(body, end, &s))
        return;
    unsigned i = pid_index(s.pid);
    if (i < MAX_PIDS)
        pid_samples[i]++;
}

/* The file's DT_INIT and DT_FINI, absolute: functions no FDE may cover,
 * which the writer gives entry rows (unwind_build_table's entries). */
static unsigned dynamic_entries(int fd, const Elf64_Phdr *ph, unsigned nph, uint64_t bias, uint64_t out[2])
{
    unsigned n = 0;
    for (unsigned i = 0; i < nph; i++) {
        if (ph[i].p_type != PT_DYNAMIC)
            continue;
        Elf64_Dyn d[512];
        size_t len = ph[i].p_filesz < sizeof d ? (size_t)ph[i].p_filesz : sizeof d;
        ssize_t got = pread(fd, d, len, (off_t)ph[i].p_offset);
        for (size_t k = 0; got > 0 && k < (size_t)got / sizeof d[0] && d[k].d_tag != DT_NULL; k++)
            if ((d[k].d_tag == DT_INIT || d[k].d_tag == DT_FINI) && n < 2)
                out[n++] = bias + d[k].d_un.d_ptr;
    }
    return n;
}

/* The module of an executable mapping of `path` at addr (file offset pgoff):
 * its text range and .eh_frame_hdr from the file's program headers, and its
 * table compiled from the file's bytes. */
static bool add_module(const char *path, uint64_t addr, uint64_t pgoff)
{
    if (nmods == UNWIND_MAX_MODULES)
        return false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    Elf64_Ehdr eh;
    if (fd < 0 || pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 ||
        eh.e_phnum > 256) {
        files_unreadable++;
        if (fd >= 0)
            close(fd);
        return false;
    }
    Elf64_Phdr ph[256];
    if (pread(fd, ph, eh.e_phnum * sizeof ph[0], (off_t)eh.e_phoff) != (ssize_t)(eh.e_phnum * sizeof ph[0])) {
        files_unreadable++;
        close(fd);
        return false;
    }
    /* the load bias: the executable segment that holds file offset pgoff */
    bool found = false;
    uint64_t bias = 0;
    for (unsigned i = 0; i < eh.e_phnum && !found; i++)
        if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X) && pgoff >= ph[i].p_offset &&
            pgoff < ph[i].p_offset + ph[i].p_filesz) {
            bias = addr - (ph[i].p_vaddr + (pgoff - ph[i].p_offset));
            found = true;
        }
    struct unwind_module m = {.lo = UINT64_MAX, .base = bias};
    const Elf64_Phdr *hdr = NULL;
    for (unsigned i = 0; found && i < eh.e_phnum; i++) {
        if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X)) {
            if (bias + ph[i].p_vaddr < m.lo)
                m.lo = bias + ph[i].p_vaddr;
            if (bias + ph[i].p_vaddr + ph[i].p_memsz > m.hi)
                m.hi = bias + ph[i].p_vaddr + ph[i].p_memsz;
        } else if (ph[i].p_type == PT_GNU_EH_FRAME) {
            hdr = &ph[i];
        }
    }
    for (size_t i = 0; found && i < nmods; i++)
        if (mods[i].lo == m.lo)
            found = false; /* a second mapping of the same text */
    const Elf64_Phdr *seg = NULL;
    for (unsigned i = 0; found && hdr && i < eh.e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && hdr->p_vaddr >= ph[i].p_vaddr && hdr->p_vaddr < ph[i].p_vaddr + ph[i].p_memsz)
            seg = &ph[i];
    if (found && seg) {
        m.eh_frame_hdr = bias + hdr->p_vaddr;
        m.eh_limit = bias + seg->p_vaddr + seg->p_memsz;
        /* the segment's memory from the header on, as the writer copies it:
         * file bytes, then zeros past the file's part */
        size_t len = (size_t)(m.eh_limit - m.eh_frame_hdr);
        uint64_t off = seg->p_offset + (hdr->p_vaddr - seg->p_vaddr);
        size_t in_file =
            hdr->p_vaddr - seg->p_vaddr < seg->p_filesz ? (size_t)(seg->p_filesz - (hdr->p_vaddr - seg->p_vaddr)) : 0;
        if (in_file > len)
            in_file = len;
        uint8_t *bytes = calloc(1, len ? len : 1);
        if (bytes && pread(fd, bytes, in_file, (off_t)off) == (ssize_t)in_file) {
            uint64_t entries[2];
            unsigned nentries = dynamic_entries(fd, ph, eh.e_phnum, bias, entries);
            struct unwind_table *t = unwind_build_table(bytes, len, m.eh_frame_hdr, m.lo, m.hi, entries, nentries);
            atomic_init(&m.table, t);
            atomic_init(&m.state, t ? UNWIND_MOD_BUILT : UNWIND_MOD_NONE);
        } else {
            files_unreadable++;
            atomic_init(&m.state, UNWIND_MOD_NONE);
        }
        free(bytes);
    } else {
        atomic_init(&m.state, UNWIND_MOD_NONE);
    }
    close(fd);
    if (found)
        mods[nmods++] = m;
    return found;
}

/* The vDSO has no file: this process's own, the same kernel's image (the
 * recording must come from this kernel), as a file to read like the others. */
static char vdso_file[64];

static void save_own_vdso(void)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)(uintptr_t)getauxval(AT_SYSINFO_EHDR);
    if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64)
        return;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)((const uint8_t *)eh + eh->e_phoff);
    size_t size = 0;
    for (unsigned i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && ph[i].p_offset + ph[i].p_filesz > size)
            size = ph[i].p_offset + ph[i].p_filesz;
    int fd = memfd_create("vdso", MFD_CLOEXEC);
    if (fd < 0)
        return;
    if (size && write(fd, eh, size) == (ssize_t)size)
        snprintf(vdso_file, sizeof vdso_file, "/proc/self/fd/%d", fd); /* kept open */
    else
        close(fd);
}

static void take_mmap(const struct perf_event_header *h, const uint8_t *body, const uint8_t *end)
{
    /* pid, tid, addr, len, pgoff, 24 bytes of inode or build-id, prot, flags, filename */
    if (h->type != PERF_RECORD_MMAP2 || end - body < 64 || rd32(body) != replay_pid || !after_exec(body))
        return;
    uint64_t addr = rd64(body + 8), pgoff = rd64(body + 24);
    uint32_t prot = rd32(body + 56);
    const char *name = (const char *)body + 64;
    size_t room = (size_t)(end - (const uint8_t *)name);
    if (!(prot & PROT_EXEC) || room == 0 || memchr(name, 0, room) == NULL)
        return; /* data */
    if (strcmp(name, "[vdso]") == 0 && vdso_file[0] && add_module(vdso_file, addr, pgoff))
        mod_paths[nmods - 1] = "[vdso]";
    else if (name[0] == '/' && add_module(name, addr, pgoff)) /* not anonymous code (JIT) */
        mod_paths[nmods - 1] = name;
}

/* The index the handler's walk reads, as the writer would publish it:
 * sorted by address (an insertion sort keeps mod_paths beside mods). */
static void publish_modules(void)
{
    for (size_t i = 1; i < nmods; i++)
        for (size_t j = i; j > 0 && mods[j - 1].lo > mods[j].lo; j--) {
            struct unwind_module m = mods[j];
            const char *p = mod_paths[j];
            mods[j] = mods[j - 1];
            mod_paths[j] = mod_paths[j - 1];
            mods[j - 1] = m;
            mod_paths[j - 1] = p;
        }
    struct unwind_index *ix = &unwind_indexes[0];
    for (size_t i = 0; i < nmods; i++) {
        ix->mod[i] = mods[i];
        atomic_init(&ix->mod[i].table, atomic_load(&mods[i].table));
        atomic_init(&ix->mod[i].state, atomic_load(&mods[i].state));
    }
    ix->count = nmods;
    ix->generation = 1;
    atomic_store(&unwind_index_generation, 1);
    atomic_store(&unwind_index_current, 0);
}

/* ---- the threads' stacks ------------------------------------------------------- */

struct thread {
    uint32_t tid;
    uint64_t lo, hi; /* the stack bytes its samples hold, page-aligned */
    bool mapped, refused;
    struct unwind_memo_slot *memo;
};
static struct thread threads[MAX_THREADS];
static unsigned nthreads;

static struct thread *thread_of(uint32_t tid)
{
    for (unsigned i = 0; i < nthreads; i++)
        if (threads[i].tid == tid)
            return &threads[i];
    if (nthreads == MAX_THREADS)
        return NULL;
    threads[nthreads] = (struct thread){.tid = tid, .lo = UINT64_MAX};
    return &threads[nthreads++];
}

static void take_stack_range(const struct perf_event_header *h, const uint8_t *body, const uint8_t *end)
{
    struct sample s;
    if (h->type != PERF_RECORD_SAMPLE || !after_exec(body) || !parse_sample(body, end, &s) || s.pid != replay_pid)
        return;
    struct thread *t = thread_of(s.tid);
    if (!t)
        return;
    uint64_t lo = s.sp & ~(uint64_t)4095, hi = (s.sp + s.stack_len + 4095) & ~(uint64_t)4095;
    if (lo < t->lo)
        t->lo = lo;
    if (hi > t->hi)
        t->hi = hi;
}

static void map_stacks(void)
{
    for (unsigned i = 0; i < nthreads; i++) {
        struct thread *t = &threads[i];
        if (t->hi <= t->lo || t->hi - t->lo > (64u << 20)) {
            t->refused = true; /* a stack that moved far (a fiber, sigaltstack): left out */
            continue;
        }
        void *at = mmap((void *)(uintptr_t)t->lo, t->hi - t->lo, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (at != (void *)(uintptr_t)t->lo) {
            if (at != MAP_FAILED)
                munmap(at, t->hi - t->lo); /* a kernel without MAP_FIXED_NOREPLACE put it elsewhere */
            t->refused = true;
            continue;
        }
        t->mapped = true;
        t->memo = calloc(1, sizeof *t->memo);
        if (!t->memo)
            die("out of memory");
    }
}

/* ---- the walks ------------------------------------------------------------------ */

struct result_counts {
    uint64_t samples, walks, frames, replayed, differ, left_out;
    uint64_t by_result[UNWIND_FAIL_READ + 1];
};
static struct result_counts counts;

/* Where walks stopped short of the stack's end, by PC (the most frequent
 * are printed: code the tables cannot walk through). */
#define MAX_STOPS 64
struct stop {
    uint64_t pc, walks;
    enum unwind_result res;
};
static struct stop stops[MAX_STOPS];
static unsigned nstops;

static void note_stop(enum unwind_result res, uint64_t pc)
{
    if (res == UNWIND_FAIL_READ)
        return; /* the recorded stack's end, not the tables' */
    for (unsigned i = 0; i < nstops; i++)
        if (stops[i].pc == pc && stops[i].res == res) {
            stops[i].walks++;
            return;
        }
    if (nstops < MAX_STOPS)
        stops[nstops++] = (struct stop){pc, 1, res};
}

static int stop_order(const void *pa, const void *pb)
{
    const struct stop *a = pa, *b = pb;
    return a->walks > b->walks ? -1 : a->walks < b->walks;
}

static void print_stops(void)
{
    static const char *const why[] = {"ok", "no module", "not built", "no table", "rule", "read"};
    qsort(stops, nstops, sizeof stops[0], stop_order);
    for (unsigned i = 0; i < nstops && i < 8; i++) {
        const char *path = "?";
        uint64_t off = stops[i].pc;
        for (size_t k = 0; k < nmods; k++)
            if (stops[i].pc >= mods[k].lo && stops[i].pc < mods[k].hi) {
                path = mod_paths[k];
                off = stops[i].pc - mods[k].base;
            }
        printf("  stopped at %s+0x%llx (%s): %llu walks\n", path, (unsigned long long)off,
               why[stops[i].res <= UNWIND_FAIL_READ ? stops[i].res : 0], (unsigned long long)stops[i].walks);
    }
}

__attribute__((noinline)) static enum unwind_result walk_handler(const struct sample *s, struct thread *t,
                                                                 uint64_t *pcs, unsigned *n)
{
    unsigned replayed = 0;
    bool truncated;
    struct unwind_resume rs;
    enum unwind_result res =
        unwind_table_walk_resumable(s->ip, s->sp, s->bp, pcs, MAX_FRAMES, n, &truncated, t->memo, &replayed, &rs);
    counts.replayed += replayed;
    if (res != UNWIND_OK)
        note_stop(res, rs.pc);
    return res;
}

__attribute__((noinline)) static enum unwind_result walk_plain(const struct sample *s, uint64_t *pcs, unsigned *n)
{
    bool truncated;
    return unwind_table_walk(s->ip, s->sp, s->bp, pcs, MAX_FRAMES, n, &truncated);
}

/* --cold: the memory passed over before each timed walk; per walk its TSC
 * ticks and what it did (frames from the memo, rules from the cache, rules
 * from the tables) */
struct cold_walk {
    uint64_t ticks;
    double replayed, hits, misses;
};
static uint8_t *cold_buf;
static size_t cold_bytes;
static struct cold_walk *cold;
static size_t cold_n, cold_cap;

/* The handler's walk of s, timed after passing over cold_bytes of other
 * memory, and what it did, into cold[]. */
static enum unwind_result walk_cold(const struct sample *s, struct thread *t, uint64_t *pcs, unsigned *n)
{
    for (size_t i = 0; i < cold_bytes; i += 64)
        cold_buf[i]++;
    uint64_t lookups = atomic_load(&unwind_counts.rule_lookups), hits = atomic_load(&unwind_counts.rule_cache_hits);
    uint64_t replayed = counts.replayed;
    _mm_lfence();
    uint64_t t0 = __rdtsc();
    _mm_lfence();
    enum unwind_result res = walk_handler(s, t, pcs, n);
    _mm_lfence();
    uint64_t t1 = __rdtsc();
    if (cold_n == cold_cap) {
        cold_cap = cold_cap ? 2 * cold_cap : 4096;
        cold = realloc(cold, cold_cap * sizeof *cold);
        if (!cold)
            die("out of memory");
    }
    lookups = atomic_load(&unwind_counts.rule_lookups) - lookups;
    hits = atomic_load(&unwind_counts.rule_cache_hits) - hits;
    cold[cold_n++] =
        (struct cold_walk){t1 - t0, (double)(counts.replayed - replayed), (double)hits, (double)(lookups - hits)};
    return res;
}

static void replay_sample(const struct perf_event_header *h, const uint8_t *body, const uint8_t *end)
{
    struct sample s;
    if (h->type != PERF_RECORD_SAMPLE || !after_exec(body) || !parse_sample(body, end, &s) || s.pid != replay_pid)
        return;
    counts.samples++;
    struct thread *t = thread_of(s.tid);
    if (!t || !t->mapped) {
        counts.left_out++;
        return;
    }
    memcpy((void *)(uintptr_t)s.sp, s.stack, s.stack_len);
    readable_lo = s.sp;
    readable_hi = s.sp + s.stack_len;
    uint64_t a[MAX_FRAMES], b[MAX_FRAMES];
    unsigned na = 0, nb = 0;
    enum unwind_result ra = cold_buf ? walk_cold(&s, t, a, &na) : walk_handler(&s, t, a, &na);
    enum unwind_result rb = walk_plain(&s, b, &nb);
    counts.walks++;
    counts.frames += na;
    counts.by_result[ra <= UNWIND_FAIL_READ ? ra : UNWIND_FAIL_READ]++;
    if (ra != rb || na != nb || memcmp(a, b, na * sizeof a[0]) != 0)
        counts.differ++;
}

static int tick_order(const void *pa, const void *pb)
{
    uint64_t a = ((const struct cold_walk *)pa)->ticks, b = ((const struct cold_walk *)pb)->ticks;
    return a < b ? -1 : a > b;
}

/* TSC ticks per ns, against CLOCK_MONOTONIC over 50 ms */
static double tsc_per_ns(void)
{
    struct timespec a, b, pause = {0, 50000000};
    clock_gettime(CLOCK_MONOTONIC, &a);
    uint64_t ta = __rdtsc();
    nanosleep(&pause, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    uint64_t tb = __rdtsc();
    return (double)(tb - ta) / ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec));
}

/* ns = c[0] + c[1] * replayed + c[2] * hits + c[3] * misses, least squares
 * over walks [0, n) (normal equations, Gaussian elimination). False when
 * they do not determine it (no walk had a miss, say). */
static bool fit_walks(const struct cold_walk *w, size_t n, double per_ns, double c[4])
{
    double m[4][5] = {{0}};
    for (size_t i = 0; i < n; i++) {
        double x[4] = {1, w[i].replayed, w[i].hits, w[i].misses}, y = (double)w[i].ticks / per_ns;
        for (int r = 0; r < 4; r++) {
            for (int k = 0; k < 4; k++)
                m[r][k] += x[r] * x[k];
            m[r][4] += x[r] * y;
        }
    }
    for (int col = 0; col < 4; col++) {
        int piv = col;
        for (int r = col + 1; r < 4; r++)
            if (fabs(m[r][col]) > fabs(m[piv][col]))
                piv = r;
        if (fabs(m[piv][col]) < 1e-9)
            return false;
        for (int k = 0; k < 5; k++) {
            double tmp = m[col][k];
            m[col][k] = m[piv][k];
            m[piv][k] = tmp;
        }
        for (int r = 0; r < 4; r++) {
            double f = r == col ? 0 : m[r][col] / m[col][col];
            for (int k = col; k < 5; k++)
                m[r][k] -= f * m[col][k];
        }
    }
    for (int r = 0; r < 4; r++)
        c[r] = m[r][4] / m[r][r];
    return true;
}

/* ns per dependent read of a cold line: a pointer chase through a random
 * cycle of the lines of 64 MB (more than the caches hold). */
static double cold_line_ns(double per_ns)
{
    size_t lines = (64u << 20) / 64;
    uint64_t *buf = malloc(lines * 64), *order = malloc(lines * sizeof *order);
    if (!buf || !order)
        die("out of memory");
    for (size_t i = 0; i < lines; i++)
        order[i] = i;
    uint64_t x = 88172645463325252ull; /* xorshift: any order the prefetchers cannot follow */
    for (size_t i = lines - 1; i > 0; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t j = x % (i + 1);
        uint64_t tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    for (size_t i = 0; i < lines; i++)
        buf[order[i] * 8] = order[(i + 1) % lines] * 8;
    size_t steps = 200000, at = order[0] * 8;
    _mm_lfence();
    uint64_t t0 = __rdtsc();
    for (size_t i = 0; i < steps; i++)
        at = buf[at];
    _mm_lfence();
    uint64_t t1 = __rdtsc();
    free(order);
    free(buf);
    return at == (size_t)-1 ? 0 : (double)(t1 - t0) / per_ns / (double)steps;
}

static void print_cold(void)
{
    if (cold_n == 0)
        return;
    qsort(cold, cold_n, sizeof cold[0], tick_order);
    double per_ns = tsc_per_ns(), sum = 0, c[4];
    for (size_t i = 0; i < cold_n; i++)
        sum += (double)cold[i].ticks;
    printf("unwind_replay: cold walks (%zu MB passed over before each), ns per walk: mean %.0f, median %.0f, p90 %.0f, "
           "p99 %.0f\n",
           cold_bytes >> 20, sum / (double)cold_n / per_ns, (double)cold[cold_n / 2].ticks / per_ns,
           (double)cold[cold_n * 9 / 10].ticks / per_ns, (double)cold[cold_n * 99 / 100].ticks / per_ns);
    /* the slowest 0.5 % left out: a walk an interrupt or a preemption lengthened */
    if (fit_walks(cold, cold_n - cold_n / 200, per_ns, c))
        printf("unwind_replay: a cold walk's ns ~ %.0f + %.1f per frame from the memo + %.1f per frame from the rule "
               "cache + %.0f per rule from the tables; one cold line read %.0f ns\n",
               c[0], c[1], c[2], c[3], cold_line_ns(per_ns));
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--cold") == 0) {
        char *endp;
        unsigned long mb = strtoul(argv[2], &endp, 10);
        if (*endp || mb == 0 || mb > 4096)
            die("--cold MB: megabytes of memory to pass over before each walk, 1 to 4096");
        cold_bytes = (size_t)mb << 20;
        cold_buf = malloc(cold_bytes);
        if (!cold_buf)
            die("out of memory");
        memset(cold_buf, 1, cold_bytes);
        argv += 2;
        argc -= 2;
    }
    if (argc != 2)
        die("usage: unwind_replay [--cold MB] PERF_DATA (recorded with perf record --call-graph dwarf)");
    open_perf_data(argv[1]);
    each_record(count_pid_samples);
    unsigned most = 0;
    for (unsigned i = 1; i < npids; i++)
        if (pid_samples[i] > pid_samples[most])
            most = i;
    if (npids == 0 || pid_samples[most] == 0)
        die("perf.data holds no sample with user registers and stack");
    replay_pid = pids[most];
    replay_from = pid_exec_at[most] ? pid_exec_at[most] : data;
    save_own_vdso();
    each_record(take_mmap);
    publish_modules();
    each_record(take_stack_range);
    map_stacks();
    unsigned built = 0;
    for (size_t i = 0; i < nmods; i++)
        built += atomic_load(&mods[i].table) != NULL;
    each_record(replay_sample);
    printf("unwind_replay: pid %u, %llu samples, %llu walked (%llu left out: a stack this process could not map "
           "back), %zu modules (%u with a table, %u files unreadable), %u threads\n",
           replay_pid, (unsigned long long)counts.samples, (unsigned long long)counts.walks,
           (unsigned long long)counts.left_out, nmods, built, files_unreadable, nthreads);
    double w = counts.walks ? (double)counts.walks : 1;
    printf("unwind_replay: %.1f frames per walk, %.1f of them from the thread's memo; rule cache %.1f %% of %llu "
           "lookups; walks ok %llu, stopped: no module %llu, not built %llu, no table %llu, rule %llu, read %llu "
           "(the recorded stack ends there); %llu walks where the handler's and the plain walk differ\n",
           (double)counts.frames / w, (double)counts.replayed / w,
           100.0 * (double)atomic_load(&unwind_counts.rule_cache_hits) /
               (double)(atomic_load(&unwind_counts.rule_lookups) ? atomic_load(&unwind_counts.rule_lookups) : 1),
           (unsigned long long)atomic_load(&unwind_counts.rule_lookups),
           (unsigned long long)counts.by_result[UNWIND_OK], (unsigned long long)counts.by_result[UNWIND_FAIL_NO_MODULE],
           (unsigned long long)counts.by_result[UNWIND_FAIL_NOT_BUILT],
           (unsigned long long)counts.by_result[UNWIND_FAIL_NO_TABLE],
           (unsigned long long)counts.by_result[UNWIND_FAIL_RULE],
           (unsigned long long)counts.by_result[UNWIND_FAIL_READ], (unsigned long long)counts.differ);
    print_stops();
    print_cold();
    printf("unwind_replay: %llu walks\n", (unsigned long long)counts.walks);
    return counts.differ ? 1 : 0;
}
