/*
 * sampler/agent/unwind_cache.c — compiled unwind tables kept across runs, by
 * build-id, and the layout of a table's block (the compiler packs into it,
 * the cache reads into it). Writer thread only.
 *
 * Why: compiling the tables was most of the writer's CPU on PyTorch (~240 ms
 * of ~370 ms in a 3.5 s training loop: libtorch_cpu's .eh_frame alone takes
 * ~150 ms), paid again by every run of the same program. A table depends on
 * the object's bytes only (rows are offsets from its lowest text address),
 * so the build-id names it. Until a module's table exists its samples take
 * libunwind's slow path, so a table read in ~1 ms also shortens that.
 *
 * Where: $OPPROF_UNWIND_CACHE (a directory; "off" or "0": no cache), else
 * $XDG_CACHE_HOME/opprof/unwind, else $HOME/.cache/opprof/unwind, read in the
 * constructor (getenv is not safe beside the workload's setenv later).
 * The directory must be the process's own (owner = euid, no group or other
 * write); files are opened without following links, written to a unique
 * temporary name and renamed (never rewritten in place).
 *
 * Reading maps the file (private, read-only, populated) instead of copying
 * it: on PyTorch the copy into fresh anonymous pages, their page faults and
 * a pass checking every row were ~10 ms of the writer's ~45 ms a run, and
 * mapped pages are the page cache's, shared by every process of the run (a
 * DataLoader's workers) instead of a private copy each. Only the first page
 * is written (the struct's pointers: copy-on-write) and then made read-only.
 * What is checked on loading: sizes agreeing with the file's, the rules'
 * registers and the bucket count (O(rules), a few hundred); rows and buckets
 * are not read: the handler's lookup clamps every index it reads from the
 * table (find_rule), so a damaged or changed file gives wrong stacks at
 * worst, never a read outside the block. A file that fails is removed and
 * the module compiled as if there were none. The one thing a mapping adds:
 * someone with the directory owner's rights truncating a file in place while
 * it is mapped (the agent never does: it renames) would fault the handler.
 *
 * File: struct cache_header, zeros up to sizeof(struct unwind_table), then
 * the block after its struct, so that file offsets are block offsets.
 *
 * Size: one file per object any run sampled, so the directory only grows
 * (77 MB on this project's VM after a few hundred test runs, PyTorch's
 * tables ~30 MB of it). After each store the writer trims it to
 * $OPPROF_UNWIND_CACHE_MAX (bytes, K/M/G suffixes; default 512M; 0: no
 * limit), least recently used first: a load sets the file's access time
 * (futimens, so noatime mounts keep the order too), and the files with the
 * oldest one go. The file just stored stays, and a file another process
 * has mapped stays valid for it (removing unlinks a name, not the pages).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sampler/agent/unwind_table.h"

/* ---- the block's layout ------------------------------------------------------ */

size_t unwind_table_layout(uint32_t nrows, uint32_t nrules, uint32_t nbuckets, size_t *rules_at, size_t *buckets_at)
{
    size_t bytes = sizeof(struct unwind_table) + (size_t)nrows * sizeof(uint32_t) + (size_t)nrows * sizeof(uint16_t);
    bytes = (bytes + 7) & ~(size_t)7;
    *rules_at = bytes;
    bytes += (size_t)nrules * sizeof(struct unwind_rule);
    bytes = (bytes + 7) & ~(size_t)7;
    *buckets_at = bytes;
    return bytes + (size_t)nbuckets * sizeof(uint32_t);
}

void unwind_table_point(struct unwind_table *t, const void *block, size_t map_bytes, uint64_t base, uint32_t nrows,
                        uint32_t nrules, uint32_t nbuckets)
{
    size_t rules_at, buckets_at;
    unwind_table_layout(nrows, nrules, nbuckets, &rules_at, &buckets_at);
    t->map_bytes = map_bytes;
    t->base = base;
    t->nrows = nrows;
    t->nrules = nrules;
    t->nbuckets = nbuckets;
    t->pc_off = (const uint32_t *)((const char *)block + sizeof *t);
    t->rule_of = (const uint16_t *)(t->pc_off + nrows);
    t->rules = (const struct unwind_rule *)((const char *)block + rules_at);
    t->bucket = (const uint32_t *)((const char *)block + buckets_at);
}

/* ---- where ------------------------------------------------------------------ */

static char cache_dir[512]; /* "": no cache */
static uint64_t cache_loaded, cache_stored, cache_rejected, cache_evicted;
#define CACHE_DEFAULT_LIMIT (512ull << 20)
static uint64_t cache_limit = CACHE_DEFAULT_LIMIT; /* bytes the directory's tables may take, 0: no limit */
/* The directory's table bytes as this process last counted them, plus
 * what it stored since: the directory is listed again only when that
 * passes the limit, not at every store (a first PyTorch run stores ~27
 * tables into a directory of hundreds). Other processes' stores are not in
 * it; their own trims count them. */
static uint64_t listed_total;
static bool listed;

/* "N", "NK", "NM" or "NG" (powers of 1024); false when it is not one. */
static bool parse_limit(const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || errno != 0 || text[0] == '-')
        return false;
    unsigned shift = 0;
    switch (*end) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    default: break;
    }
    if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

void unwind_cache_init(void)
{
    cache_dir[0] = '\0';
    const char *env = getenv("OPPROF_UNWIND_CACHE");
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n = -1;
    if (env && (strcmp(env, "off") == 0 || strcmp(env, "0") == 0))
        return;
    if (env && env[0] == '/')
        n = snprintf(cache_dir, sizeof cache_dir, "%s", env);
    else if (xdg && xdg[0] == '/')
        n = snprintf(cache_dir, sizeof cache_dir, "%s/opprof/unwind", xdg);
    else if (home && home[0] == '/')
        n = snprintf(cache_dir, sizeof cache_dir, "%s/.cache/opprof/unwind", home);
    if (n < 0 || (size_t)n >= sizeof cache_dir)
        cache_dir[0] = '\0';
    const char *max = getenv("OPPROF_UNWIND_CACHE_MAX");
    if (!max || !parse_limit(max, &cache_limit))
        cache_limit = CACHE_DEFAULT_LIMIT; /* unset or unreadable: the default, not "no limit" */
}

void unwind_cache_atfork_child(void)
{
    cache_loaded = cache_stored = cache_rejected = cache_evicted = 0; /* the child's stream counts its own */
    listed = false;
}

void unwind_cache_counts(uint64_t *loaded, uint64_t *stored, uint64_t *rejected, uint64_t *evicted)
{
    *loaded = cache_loaded;
    *stored = cache_stored;
    *rejected = cache_rejected;
    *evicted = cache_evicted;
}

/* The cache directory, opened; -1 when there is none or it is not safe to
 * use (someone else's, or writable by others). create: make it (and its
 * parents, 0700) when missing. */
static int open_cache_dir(bool create)
{
    if (!cache_dir[0])
        return -1;
    if (create) {
        char path[sizeof cache_dir];
        memcpy(path, cache_dir, sizeof path);
        for (char *s = path + 1; *s; s++) {
            if (*s != '/')
                continue;
            *s = '\0';
            (void)mkdir(path, 0700); /* EEXIST for the ones there */
            *s = '/';
        }
        (void)mkdir(path, 0700);
    }
    int fd = open(cache_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022))) {
        close(fd);
        cache_dir[0] = '\0'; /* not ours to trust: no cache for this process */
        return -1;
    }
    return fd;
}

int unwind_cache_open(void)
{
    return open_cache_dir(false);
}

/* ---- naming a module ---------------------------------------------------------- */

/* Notes larger than this are not scanned: no real object's are. */
#define MAX_NOTE_BYTES 65536

/* The GNU build-id among one PT_NOTE segment's bytes in memory, 0: none. */
static unsigned build_id_in_notes(const uint8_t *p, size_t left, uint8_t out[OPR_BUILD_ID_MAX])
{
    while (left >= sizeof(ElfW(Nhdr))) {
        ElfW(Nhdr) nh;
        memcpy(&nh, p, sizeof nh);
        size_t name = ((size_t)nh.n_namesz + 3) & ~(size_t)3, desc = ((size_t)nh.n_descsz + 3) & ~(size_t)3;
        if (name > left - sizeof nh || desc > left - sizeof nh - name)
            break;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(p + sizeof nh, "GNU", 4) == 0 &&
            nh.n_descsz > 0 && nh.n_descsz <= OPR_BUILD_ID_MAX) {
            memcpy(out, p + sizeof nh + name, nh.n_descsz);
            return nh.n_descsz;
        }
        p += sizeof nh + name + desc;
        left -= sizeof nh + name + desc;
    }
    return 0;
}

/* Used for the cache's file names and, through agent_phdr.c's snapshot, the
 * writer's MAP records. */
unsigned agent_object_build_id(const struct dl_phdr_info *info, uint8_t out[OPR_BUILD_ID_MAX])
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *note = &info->dlpi_phdr[i];
        if (note->p_type != PT_NOTE || note->p_memsz > MAX_NOTE_BYTES)
            continue;
        /* Only notes inside a loaded segment's file bytes are in memory: the
         * headers come from the file and may say otherwise. */
        bool loaded = false;
        for (int j = 0; j < info->dlpi_phnum && !loaded; j++) {
            const ElfW(Phdr) *load = &info->dlpi_phdr[j];
            loaded = load->p_type == PT_LOAD && note->p_vaddr >= load->p_vaddr &&
                     note->p_vaddr - load->p_vaddr <= load->p_filesz &&
                     note->p_memsz <= load->p_filesz - (note->p_vaddr - load->p_vaddr);
        }
        unsigned len = loaded ? build_id_in_notes((const uint8_t *)(uintptr_t)(info->dlpi_addr + note->p_vaddr),
                                                  note->p_memsz, out)
                              : 0;
        if (len > 0)
            return len;
    }
    return 0;
}

bool unwind_cache_name(int dir, const struct dl_phdr_info *info, uint64_t lo, uint64_t hi, uint64_t eh_frame_hdr,
                       char *name, size_t cap, bool *present)
{
    uint8_t id[OPR_BUILD_ID_MAX];
    unsigned n = cache_dir[0] ? agent_object_build_id(info, id) : 0;
    *present = false;
    if (n < 8 || cap < 2 * n + 48) /* a short id could name two builds */
        return false;
    for (unsigned i = 0; i < n; i++)
        snprintf(name + 2 * i, 3, "%02x", id[i]);
    /* The layout too: the same build-id laid out otherwise is another table. */
    snprintf(name + 2 * n, cap - 2 * n, "-%llx-%llx.t3", (unsigned long long)(hi - lo),
             (unsigned long long)(eh_frame_hdr - lo));
    struct stat st;
    *present = dir >= 0 && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
    return true;
}

/* ---- the file ------------------------------------------------------------------ */

#define CACHE_MAGIC \
    "OPRUNWT4" /* T2: rules may be UNWIND_REG_SP_PLT; T3: padded to the struct, mapped; T4: entry rows */
struct cache_header {
    char magic[8];
    uint32_t header_size, rule_size;
    uint32_t nrows, nrules, nbuckets, bucket_shift;
    uint64_t payload_bytes; /* the block after its struct unwind_table */
};
/* The header sits where the struct will: the file maps as the block. */
_Static_assert(sizeof(struct cache_header) <= sizeof(struct unwind_table), "cache header larger than the table's struct");

/* Whether a block mapped from a file is one the handler can walk: what
 * the lookup does not clamp (find_rule clamps row, bucket and rule indexes). */
static bool table_sane(const struct unwind_table *t)
{
    if (t->nrules < 1 || (t->nrows == 0) != (t->nbuckets == 0))
        return false;
    for (uint32_t i = 0; i < t->nrules; i++) /* a register the walk does not know would be read as FP */
        if (t->rules[i].cfa_reg > UNWIND_REG_SP_PLT || t->rules[i].ra_where > UNWIND_UNDEFINED ||
            t->rules[i].fp_where > UNWIND_UNDEFINED)
            return false;
    return t->nrows == 0 || t->nbuckets == (t->pc_off[t->nrows - 1] >> UNWIND_BUCKET_SHIFT) + 1;
}

/* Whether the file's access time is within the last USED_RESOLUTION_S: its
 * place in the trimming order (least recently used first) is then right to
 * within that, and the load does not set it again. A PyTorch process loads
 * ~100 tables at start, each run; one futimens each was ~100 system calls
 * that told the trimming nothing new. */
#define USED_RESOLUTION_S 3600
static bool recently_used(const struct stat *st)
{
    struct timespec now;
    return clock_gettime(CLOCK_REALTIME, &now) == 0 && st->st_atim.tv_sec <= now.tv_sec &&
           now.tv_sec - st->st_atim.tv_sec < USED_RESOLUTION_S;
}

static bool read_all(int fd, void *buf, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t r = read(fd, (char *)buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    return true;
}

struct unwind_table *unwind_cache_load(int dir, const char *name, uint64_t base)
{
    if (dir < 0)
        return NULL;
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    struct cache_header h;
    struct unwind_table *t = NULL;
    size_t rules_at, buckets_at, bytes = 0;
    bool ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
              (size_t)st.st_size >= sizeof(struct unwind_table) && read_all(fd, &h, sizeof h) &&
              memcmp(h.magic, CACHE_MAGIC, 8) == 0 && h.header_size == sizeof h &&
              h.rule_size == sizeof(struct unwind_rule) && h.bucket_shift == UNWIND_BUCKET_SHIFT &&
              h.nrows < (1u << 28) && h.nrules <= UINT16_MAX + 1u && h.nbuckets < (1u << 28);
    if (ok) {
        bytes = unwind_table_layout(h.nrows, h.nrules, h.nbuckets, &rules_at, &buckets_at);
        ok = h.payload_bytes == bytes - sizeof *t && (uint64_t)st.st_size == bytes;
    }
    if (ok) {
        /* Read faults only: populating a writable private mapping would copy every page. */
        void *block = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        /* The struct apart from the block, so that the block stays read-only
         * as mapped: filling the struct in place took two mprotects (each a
         * TLB flush sent to every CPU the workload runs on) and a
         * copy-on-write fault, ~4 % of the writer's CPU in a PyTorch run's
         * start (37 tables loaded; perf, 784 writer samples). */
        t = block == MAP_FAILED ? NULL : malloc(sizeof *t);
        ok = t != NULL;
        if (ok) {
            memset(t, 0, sizeof *t);
            unwind_table_point(t, block, bytes, base, h.nrows, h.nrules, h.nbuckets);
            t->from_file = 1;
            ok = table_sane(t);
        }
        if (!ok) {
            if (block != MAP_FAILED)
                munmap(block, bytes);
            free(t);
            t = NULL;
        }
    }
    if (ok && !recently_used(&st)) {
        /* last use, for the trimming below: the access time, set explicitly */
        const struct timespec times[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
        (void)futimens(fd, times);
    }
    if (fd >= 0)
        close(fd); /* the mapping keeps the file */
    if (!ok && fd >= 0) {
        /* Damaged or from another layout: gone, so that the module is
         * compiled at the next poll; one we cannot remove ends the cache. */
        cache_rejected++;
        if (unlinkat(dir, name, 0) != 0)
            cache_dir[0] = '\0';
    }
    if (!t)
        return NULL;
    unwind_table_account(bytes, true);
    cache_loaded++;
    return t;
}

/* ---- keeping the directory bounded (see the top of the file) ------------------ */

struct cache_file {
    char name[128];
    uint64_t bytes;
    struct timespec used; /* the access time: the last load, or the store */
};

static int least_recently_used(const void *pa, const void *pb)
{
    const struct cache_file *a = pa, *b = pb;
    if (a->used.tv_sec != b->used.tv_sec)
        return a->used.tv_sec < b->used.tv_sec ? -1 : 1;
    return (a->used.tv_nsec > b->used.tv_nsec) - (a->used.tv_nsec < b->used.tv_nsec);
}

/* Removes the least recently used tables until the directory's tables
 * take at most cache_limit bytes; never `keep` (the one just stored, of
 * kept_bytes). Only table files (*.t3, regular, ours) are counted or
 * removed: another process's temporary file and anything else in the
 * directory are left. */
static void trim_cache(int dir, const char *keep, uint64_t kept_bytes)
{
    if (cache_limit == 0)
        return;
    if (listed && listed_total + kept_bytes <= cache_limit) {
        listed_total += kept_bytes;
        return;
    }
    int listing = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = listing >= 0 ? fdopendir(listing) : NULL;
    if (!d) {
        if (listing >= 0)
            close(listing);
        return;
    }
    struct cache_file *files = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        struct stat st;
        if (e->d_name[0] == '.' || len < 4 || len >= sizeof files[0].name || strcmp(e->d_name + len - 3, ".t3") != 0 ||
            fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
            continue;
        total += (uint64_t)st.st_size;
        if (strcmp(e->d_name, keep) == 0)
            continue;
        if (n == cap) {
            size_t more = cap ? 2 * cap : 256;
            struct cache_file *grown = realloc(files, more * sizeof *files);
            if (!grown)
                break; /* out of memory: trim what is listed */
            files = grown;
            cap = more;
        }
        memcpy(files[n].name, e->d_name, len + 1);
        files[n].bytes = (uint64_t)st.st_size;
        files[n].used = st.st_atim;
        n++;
    }
    closedir(d);
    if (total > cache_limit && n > 0) {
        qsort(files, n, sizeof *files, least_recently_used);
        for (size_t i = 0; i < n && total > cache_limit; i++) {
            if (unlinkat(dir, files[i].name, 0) == 0) {
                total -= files[i].bytes;
                cache_evicted++;
            }
        }
    }
    free(files);
    listed_total = total;
    listed = true;
}

void unwind_cache_store(const char *name, const struct unwind_table *t)
{
    int dir = open_cache_dir(true);
    if (dir < 0)
        return;
    char tmp[160];
    snprintf(tmp, sizeof tmp, ".%d.%s.tmp", (int)getpid(), name);
    int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        close(dir);
        return;
    }
    struct cache_header h = {.header_size = sizeof h,
                             .rule_size = sizeof(struct unwind_rule),
                             .nrows = t->nrows,
                             .nrules = t->nrules,
                             .nbuckets = t->nbuckets,
                             .bucket_shift = UNWIND_BUCKET_SHIFT,
                             .payload_bytes = t->map_bytes - sizeof *t};
    memcpy(h.magic, CACHE_MAGIC, 8);
    char head[sizeof(struct unwind_table)] = {0}; /* the header, padded to where the block's payload starts */
    memcpy(head, &h, sizeof h);
    bool ok = write(fd, head, sizeof head) == (ssize_t)sizeof head;
    for (size_t done = 0; ok && done < h.payload_bytes;) {
        ssize_t w = write(fd, (const char *)unwind_table_block(t) + sizeof *t + done, h.payload_bytes - done);
        if (w < 0 && errno == EINTR)
            continue;
        ok = w > 0;
        done += ok ? (size_t)w : 0;
    }
    ok = close(fd) == 0 && ok;
    /* Two processes storing the same table: the last rename wins, both whole. */
    if (ok && renameat(dir, tmp, dir, name) == 0) {
        cache_stored++;
        trim_cache(dir, name, sizeof head + h.payload_bytes);
    } else {
        unlinkat(dir, tmp, 0);
    }
    close(dir);
}
