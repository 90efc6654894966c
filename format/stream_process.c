/*
 * format/stream_process.c — the records the stream writer reads from the
 * process's /proc directory (/proc/self in the agent, /proc/<pid> in attach
 * mode): PROCESS (exe path and argv), THREAD (names), MAP (executable
 * mappings with their build-ids) and the vDSO image saved beside the streams,
 * plus the stream file's creation.
 *
 * Libc only: this is compiled into the agent, which may not use libelf, so
 * build-ids are read from the ELF program headers by hand.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "format/writer_internal.h"

size_t opr_write_all(int fd, const void *bytes, size_t len)
{
    size_t off = 0;
    while (off < len && fd >= 0) {
        ssize_t n = write(fd, (const char *)bytes + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* disk full or closed: the reader reports a truncated stream */
        off += (size_t)n;
    }
    return off;
}

int opr_stream_create(const char *dir, uint32_t pid, int *generation)
{
    char path[PATH_MAX + 64];
    for (int gen = 0; gen < 1000; gen++) {
        snprintf(path, sizeof path, "%s/proc-%u-%d.raw", dir, pid, gen);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
            if (generation)
                *generation = gen;
            return fd;
        }
        if (errno != EEXIST)
            return -1;
    }
    return -1;
}

ssize_t opr_read_small_file(const char *path, char *buf, size_t cap)
{
    if (cap == 0)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    while (len < cap - 1) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && len == 0) { /* unreadable (a thread gone since open): as if not there */
            close(fd);
            return -1;
        }
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    return (ssize_t)len;
}

/* ---- PROCESS --------------------------------------------------------------- */

/* Longest argv kept: /proc's cmdline can be longer, the report needs less. */
#define CMDLINE_MAX 8192

void opr_writer_process(struct opr_writer *w)
{
    if (!w->proc_dir[0])
        return;
    /* The tail is the exe path, then the NUL-separated argv. */
    char *tail = malloc(PATH_MAX + CMDLINE_MAX);
    if (!tail)
        return;
    char path[sizeof w->proc_dir + 16];
    snprintf(path, sizeof path, "%s/exe", w->proc_dir);
    ssize_t exe_len = readlink(path, tail, PATH_MAX - 1);
    if (exe_len < 0)
        exe_len = 0;
    snprintf(path, sizeof path, "%s/cmdline", w->proc_dir);
    /* up to CMDLINE_MAX bytes; the NUL after them still falls inside tail */
    ssize_t cmd_len = opr_read_small_file(path, tail + exe_len, CMDLINE_MAX + 1);
    if (cmd_len < 0)
        cmd_len = 0;
    struct opr_process p = {w->pid, w->ppid, writer_now_ns(), (uint32_t)exe_len, (uint32_t)cmd_len};
    opr_writer_emit(w, OPR_REC_PROCESS, &p, sizeof p, tail, (size_t)exe_len + (size_t)cmd_len);
    free(tail);
}

/* ---- THREAD ---------------------------------------------------------------- */

/* The thread's comm now into name (NUL-padded); false when it cannot be read
 * (the thread has exited). A name may hold any byte but NUL: only the newline
 * /proc adds is cut. */
static bool read_thread_name(const struct opr_writer *w, uint32_t tid, char name[16])
{
    if (!w->proc_dir[0])
        return false;
    char path[sizeof w->proc_dir + 32], buf[16];
    snprintf(path, sizeof path, "%s/task/%u/comm", w->proc_dir, tid);
    ssize_t n = opr_read_small_file(path, buf, sizeof buf); /* comm is at most 15 bytes */
    if (n <= 0)
        return false;
    if (buf[n - 1] == '\n')
        n--;
    memset(name, 0, 16);
    memcpy(name, buf, (size_t)n);
    return true;
}

/* A THREAD record with the thread's name now; the last name known (or the
 * configured one) when it cannot be read, or nothing when names of
 * unreadable threads are not written. */
static void emit_thread(struct opr_writer *w, struct writer_thread *t)
{
    struct opr_thread r;
    memset(&r, 0, sizeof r);
    r.tid = t->tid;
    r.flags = t->tid == w->pid ? OPR_THREAD_MAIN : 0;
    r.time_ns = writer_now_ns();
    if (!read_thread_name(w, t->tid, t->name) && !w->name_unreadable_threads)
        return;
    memcpy(r.name, t->name, sizeof r.name);
    r.name[sizeof r.name - 1] = '\0';
    opr_writer_emit(w, OPR_REC_THREAD, &r, sizeof r, NULL, 0);
}

bool opr_writer_note_thread(struct opr_writer *w, uint32_t tid)
{
    /* Linear: a stream has tens of threads, and a new one is rare. */
    for (size_t i = 0; i < w->nthreads; i++)
        if (w->threads[i].tid == tid)
            return false;
    struct writer_thread *grown = writer_grow(w->threads, &w->threads_cap, w->nthreads, sizeof *grown, 64);
    if (!grown)
        return false;
    w->threads = grown;
    struct writer_thread *t = &w->threads[w->nthreads++];
    memset(t, 0, sizeof *t);
    t->tid = tid;
    memcpy(t->name, w->unreadable_thread_name, sizeof t->name);
    emit_thread(w, t);
    return true;
}

void opr_writer_thread_names_again(struct opr_writer *w)
{
    for (size_t i = 0; i < w->nthreads; i++)
        emit_thread(w, &w->threads[i]);
}

void opr_writer_thread_name_seen(struct opr_writer *w, uint32_t tid, const char *name)
{
    char seen[16] = {0};
    size_t len = strnlen(name, sizeof seen - 1);
    if (memchr(name, '\\', len))
        return; /* status escapes a backslash (and a newline): comm's raw form is not known from it */
    memcpy(seen, name, len);
    for (size_t i = 0; i < w->nthreads; i++)
        if (w->threads[i].tid == tid) {
            if (memcmp(seen, w->threads[i].name, sizeof seen) != 0)
                emit_thread(w, &w->threads[i]); /* reads comm itself */
            return;
        }
}

/* ---- build-ids ------------------------------------------------------------- */

/* The GNU build-id note in one PT_NOTE segment's bytes, 0 when it has none. */
static int build_id_in_notes(const uint8_t *notes, size_t size, uint8_t *out)
{
    for (size_t off = 0; off + sizeof(Elf64_Nhdr) <= size;) {
        Elf64_Nhdr nh;
        memcpy(&nh, notes + off, sizeof nh);
        size_t name_off = off + sizeof nh;
        size_t desc_off = name_off + ((nh.n_namesz + 3) & ~3u);
        size_t next = desc_off + ((nh.n_descsz + 3) & ~3u);
        if (next > size)
            break;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(notes + name_off, "GNU", 4) == 0 &&
            nh.n_descsz <= OPR_BUILD_ID_MAX) {
            memcpy(out, notes + desc_off, nh.n_descsz);
            return (int)nh.n_descsz;
        }
        off = next;
    }
    return 0;
}

/* Bounds that no real library exceeds; past them the file is not read
 * further rather than trusted. */
#define MAX_PHDRS 64
#define MAX_NOTE_SEGMENT 65536

int opr_read_build_id(const char *path, uint8_t out[OPR_BUILD_ID_MAX])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int len = 0;
    uint8_t *notes = NULL;
    Elf64_Ehdr eh;
    Elf64_Phdr ph[MAX_PHDRS];
    if (pread(fd, &eh, sizeof eh, 0) != sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > MAX_PHDRS)
        goto out;
    size_t ph_bytes = eh.e_phnum * sizeof ph[0];
    if (pread(fd, ph, ph_bytes, (off_t)eh.e_phoff) != (ssize_t)ph_bytes || !(notes = malloc(MAX_NOTE_SEGMENT)))
        goto out;
    for (int i = 0; i < eh.e_phnum && len == 0; i++) {
        if (ph[i].p_type != PT_NOTE || ph[i].p_filesz > MAX_NOTE_SEGMENT)
            continue;
        ssize_t got = pread(fd, notes, ph[i].p_filesz, (off_t)ph[i].p_offset);
        if (got > 0)
            len = build_id_in_notes(notes, (size_t)got, out);
    }
out:
    free(notes);
    close(fd);
    return len;
}

/* ---- MAP ------------------------------------------------------------------- */

bool writer_pc_mapped(const struct opr_writer *w, uint64_t pc)
{
    size_t lo = 0, hi = w->nmaps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (pc < w->maps[mid].start)
            hi = mid;
        else if (pc >= w->maps[mid].end)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

static int compare_ranges(const void *a, const void *b)
{
    const struct writer_map_range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The vDSO has no file: its image is saved once per result dir (the first
 * process to get there wins) so the report can symbolize and unwind it. */
static void save_vdso(const struct opr_writer *w, uint64_t start, uint64_t end)
{
    if (!w->result_dir[0])
        return;
    char path[sizeof w->result_dir + 16];
    snprintf(path, sizeof path, "%s/vdso.so", w->result_dir);
    int out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (out < 0)
        return; /* another process saved it already */
    /* Through /proc/<pid>/mem: the same code for the agent (its own memory)
     * and attach mode (another process's). */
    char mem[sizeof w->proc_dir + 16];
    snprintf(mem, sizeof mem, "%s/mem", w->proc_dir);
    int in = open(mem, O_RDONLY | O_CLOEXEC);
    uint8_t *buf = malloc(end - start);
    ssize_t n = in >= 0 && buf ? pread(in, buf, end - start, (off_t)start) : -1;
    if (n > 0 && opr_write_all(out, buf, (size_t)n) != (size_t)n)
        n = -1;
    free(buf);
    if (in >= 0)
        close(in);
    close(out);
    if (n <= 0)
        unlink(path); /* let a later process try */
}

/* Remembers [start, end) as written, with its record m and path; false
 * when out of memory (a record that cannot be kept is not: a fork child
 * then finds that mapping again by itself). */
static bool add_map_range(struct opr_writer *w, uint64_t start, uint64_t end, const struct opr_map *m, const char *path)
{
    struct writer_map_range *grown = writer_grow(w->maps, &w->maps_cap, w->nmaps, sizeof *grown, 256);
    if (!grown)
        return false;
    w->maps = grown;
    struct opr_map *kept = malloc(sizeof *kept + m->path_len + 1);
    if (kept) {
        *kept = *m;
        memcpy(kept + 1, path, m->path_len);
        ((char *)(kept + 1))[m->path_len] = '\0';
    }
    w->maps[w->nmaps++] = (struct writer_map_range){start, end, kept};
    return true;
}

/* A hex or decimal number at *p, up to 16 hex digits (20 decimal); false
 * when there is none or it is longer. */
static bool parse_number(const char **p, const char *eol, unsigned base, uint64_t *out)
{
    const char *q = *p;
    uint64_t v = 0;
    unsigned digits = 0;
    for (; q < eol; q++, digits++) {
        char c = *q;
        int d = c >= '0' && c <= '9' ? c - '0' : base == 16 && c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            break;
        if (digits == (base == 16 ? 16u : 20u)) /* an inode past 2^64 wraps: it is not used */
            return false;
        v = v * base + (uint64_t)d;
    }
    if (digits == 0)
        return false;
    *out = v;
    *p = q;
    return true;
}

static bool expect(const char **p, const char *eol, char c)
{
    if (*p >= eol || **p != c)
        return false;
    (*p)++;
    return true;
}

bool opr_maps_parse_line(const char *p, const char *eol, struct opr_maps_line *out)
{
    uint64_t major, minor, inode;
    if (!parse_number(&p, eol, 16, &out->start) || !expect(&p, eol, '-') ||
        !parse_number(&p, eol, 16, &out->end) || !expect(&p, eol, ' ') || eol - p < 5)
        return false;
    memcpy(out->perms, p, 4);
    p += 4;
    if (!expect(&p, eol, ' ') || !parse_number(&p, eol, 16, &out->pgoff) || !expect(&p, eol, ' ') ||
        !parse_number(&p, eol, 16, &major) || !expect(&p, eol, ':') || !parse_number(&p, eol, 16, &minor) ||
        !expect(&p, eol, ' ') || !parse_number(&p, eol, 10, &inode))
        return false;
    if (p < eol && *p != ' ')
        return false;
    while (p < eol && *p == ' ')
        p++;
    out->path = p;
    out->path_len = (size_t)(eol - p);
    return true;
}

long opr_maps_read(int fd, char *buf, size_t cap, bool (*each)(const struct opr_maps_line *line, void *ctx),
                   void *ctx)
{
    long lines = 0;
    size_t have = 0;
    bool skipping = false, first = true; /* skipping: inside a line longer than buf */
    for (;;) {
        ssize_t r = read(fd, buf + have, cap - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && first)
            return -1;
        first = false;
        if (r <= 0)
            break;
        char *p = buf, *limit = buf + have + (size_t)r, *eol;
        for (; (eol = memchr(p, '\n', (size_t)(limit - p))) != NULL; p = eol + 1) {
            struct opr_maps_line line;
            bool ok = !skipping && opr_maps_parse_line(p, eol, &line);
            skipping = false;
            if (!ok)
                continue;
            lines++;
            if (!each(&line, ctx))
                return lines;
        }
        have = (size_t)(limit - p);
        if (have == cap) {
            have = 0, skipping = true;
        } else {
            memmove(buf, p, have);
        }
    }
    return lines;
}

/* include/uapi/linux/fs.h's struct procmap_query, declared here since libc
 * headers may predate it; older kernels answer ENOTTY (or EINVAL). */
struct maps_query {
    uint64_t size, query_flags, query_addr;
    uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
    uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
    uint64_t vma_name_addr, build_id_addr;
};
_Static_assert(sizeof(struct maps_query) == 104, "struct procmap_query of Linux 6.11");
#define MAPS_QUERY_IOCTL _IOWR('f', 17, struct maps_query)

int opr_maps_query(int fd, uint64_t addr, unsigned flags, struct opr_maps_hit *hit, char *name, size_t name_cap)
{
    struct maps_query q = {.size = sizeof q, .query_flags = flags, .query_addr = addr};
    if (name && name_cap) {
        name[0] = '\0';
        q.vma_name_addr = (uint64_t)(uintptr_t)name;
        q.vma_name_size = name_cap > UINT32_MAX ? UINT32_MAX : (uint32_t)name_cap;
    }
    if (ioctl(fd, MAPS_QUERY_IOCTL, &q) != 0)
        return errno == ENOTTY || errno == EINVAL || errno == ENAMETOOLONG ? -1 : 0; /* ENOENT: nothing there */
    if (q.vma_start > addr || q.vma_end <= addr)
        return 0;
    hit->start = q.vma_start;
    hit->end = q.vma_end;
    hit->pgoff = q.vma_offset;
    return 1;
}

struct maps_reading {
    struct opr_writer *w;
    bool added;
};

/* A MAP record for an executable mapping (its path, "[vdso]" or "": len
 * bytes of file, NUL-terminated) and its range in the writer's table. */
static bool emit_map(struct opr_writer *w, uint64_t start, uint64_t end, uint64_t pgoff, const char *file, size_t len)
{
    struct opr_map m;
    memset(&m, 0, sizeof m);
    m.start = start;
    m.end = end;
    m.pgoff = pgoff;
    if (file[0] == '/') {
        int len = w->ops.loaded_build_id ? w->ops.loaded_build_id(w->ops.ctx, start, m.build_id) : -1;
        m.build_id_len = (uint8_t)(len >= 0 ? len : opr_read_build_id(file, m.build_id));
    } else if (strcmp(file, "[vdso]") == 0)
        save_vdso(w, start, end);
    m.path_len = (uint16_t)len;
    opr_writer_emit(w, OPR_REC_MAP, &m, sizeof m, file, m.path_len);
    return add_map_range(w, start, end, &m, file);
}

/* One line of opr_writer_read_maps: a MAP record for executable code not
 * written before. */
static bool map_line(const struct opr_maps_line *line, void *ctx)
{
    struct maps_reading *rd = ctx;
    struct opr_writer *w = rd->w;
    if (line->perms[2] != 'x' || writer_pc_mapped(w, line->start))
        return true;
    char file[PATH_MAX];
    size_t len = line->path_len < sizeof file - 1 ? line->path_len : sizeof file - 1;
    memcpy(file, line->path, len);
    file[len] = '\0';
    if (!emit_map(w, line->start, line->end, line->pgoff, file, len))
        return false;
    rd->added = true;
    return true;
}

int writer_query_code(struct opr_writer *w, const uint64_t *pcs, unsigned n)
{
    if (!w->proc_dir[0] || w->maps_query_unsupported)
        return -1;
    char path[sizeof w->proc_dir + 16];
    snprintf(path, sizeof path, "%s/maps", w->proc_dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1; /* the full read fails the same way, at its own rate */
    bool added = false;
    int got = 0;
    for (unsigned i = 0; i < n && got >= 0; i++) {
        if (writer_pc_mapped(w, pcs[i]))
            continue;
        char file[PATH_MAX];
        struct opr_maps_hit hit;
        w->maps_queries++;
        got = opr_maps_query(fd, pcs[i], OPR_MAPS_QUERY_EXECUTABLE, &hit, file, sizeof file);
        if (got == 1) {
            file[sizeof file - 1] = '\0';
            if (!emit_map(w, hit.start, hit.end, hit.pgoff, file, strlen(file)))
                break;
            added = true;
            /* add_map_range appends: keep the table sorted for the next lookup */
            qsort(w->maps, w->nmaps, sizeof w->maps[0], compare_ranges);
        }
    }
    close(fd);
    if (got < 0)
        w->maps_query_unsupported = true;
    if (added && w->ops.maps_added)
        w->ops.maps_added(w->ops.ctx);
    return got < 0 ? -1 : added;
}

/* 64 KB: a line is at most ~4.2 KB (a path is at most 4,096 bytes), and
 * procfs hands out what fits, so a PyTorch process's ~170 KB of maps take
 * a few reads instead of stdio's ~170 of 1 KB. */
#define MAPS_BUFFER_SIZE (64u << 10)

/* A fork child's first maps read: its memory map is the parent's at the
 * fork, so the parent's MAP records are written again from memory, not
 * read from /proc (a PyTorch process's ~1,700 lines: 2.4-3.4 ms of each
 * DataLoader worker's start). Code mapped later is found as in the parent:
 * a PC outside every known range asks for its mapping. */
static void replay_maps(struct opr_writer *w)
{
    size_t kept = 0;
    for (size_t i = 0; i < w->nmaps; i++) {
        const struct opr_map *m = w->maps[i].record;
        if (!m)
            continue; /* not kept: dropped from the table, found again */
        opr_writer_emit(w, OPR_REC_MAP, m, sizeof *m, m + 1, m->path_len);
        w->maps[kept++] = w->maps[i];
    }
    w->nmaps = kept;
    w->maps_replay = false;
    w->last_maps_ns = writer_now_ns();
}

void opr_writer_read_maps(struct opr_writer *w)
{
    if (!w->proc_dir[0])
        return;
    if (w->maps_replay) {
        replay_maps(w);
        return;
    }
    char path[sizeof w->proc_dir + 16];
    snprintf(path, sizeof path, "%s/maps", w->proc_dir);
    w->last_maps_ns = writer_now_ns(); /* also when unreadable: retried at the rate of success */
    w->maps_full_reads++;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char *buf = malloc(MAPS_BUFFER_SIZE);
    struct maps_reading rd = {w, false};
    if (buf)
        opr_maps_read(fd, buf, MAPS_BUFFER_SIZE, map_line, &rd);
    free(buf);
    close(fd);
    if (!rd.added)
        return;
    qsort(w->maps, w->nmaps, sizeof w->maps[0], compare_ranges);
    if (w->ops.maps_added)
        w->ops.maps_added(w->ops.ctx);
}

void opr_writer_maps_counts(const struct opr_writer *w, uint64_t *full_reads, uint64_t *queries)
{
    *full_reads = w->maps_full_reads;
    *queries = w->maps_queries;
}

/* ---- life cycle ------------------------------------------------------------ */

void writer_forget_process(struct opr_writer *w)
{
    /* A fork child: the maps stay, to be written again (replay_maps). */
    w->maps_replay = w->nmaps > 0;
    w->nthreads = 0;
    w->last_maps_ns = 0;
}

void writer_free_process(struct opr_writer *w)
{
    for (size_t i = 0; i < w->nmaps; i++)
        free(w->maps[i].record);
    free(w->maps);
    free(w->threads);
}
