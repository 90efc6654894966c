/*
 * sampler/attach/attach_stream.c — attach mode's writer: one raw stream per process
 * image, the same records the in-process agent writes (docs/format.md), so
 * that `opprof report` and `export` read an attached recording unchanged.
 *
 * Per sample it reads the Python frames first (the thread runs on while we
 * work: the sooner, the closer to the sampled instant), then unwinds the
 * native stack from the sample's stack copy, then writes STACK / PYCODE /
 * PYSTACK records the first time each distinct chain is seen and a SAMPLE
 * that refers to them. Executable mappings come from /proc/PID/maps (again
 * whenever a PC falls outside the known ones), with build-ids read by libelf.
 */
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sampler/attach/attach_internal.h"

#define OUTBUF_SIZE (256 * 1024)

struct thread_name {
    uint32_t tid;
    char name[16];
};

struct attach_stream {
    pid_t pid;
    int fd;
    char dir[PATH_MAX];
    enum call_graph_mode mode;
    uint8_t *buf;
    size_t len;
    uint64_t bytes;
    struct id_table stacks, py_codes, py_lines, py_stacks;
    int32_t *py_line_values;
    size_t py_line_cap;
    struct map_range *maps;
    size_t nmaps, maps_cap;
    uint64_t last_maps_ns, last_python_probe_ns;
    struct thread_name *threads;
    size_t nthreads, threads_cap;
    struct attach_unwinder *unw;
    struct attach_python *py;
    bool python_probed_note;
    struct attach_stream_totals t;
    uint64_t lost_reported;
    uint64_t dropped_size_cap, first_drop_ns; /* --max-size */
};

pid_t attach_stream_pid(const struct attach_stream *s) { return s->pid; }

/* --max-size: one cap for all streams of the run (the launcher is one thread). */
static uint64_t size_cap_bytes, all_streams_bytes;

void attach_stream_set_size_cap(uint64_t bytes) { size_cap_bytes = bytes; }

/* ---- records ------------------------------------------------------------- */

void attach_stream_flush(struct attach_stream *s)
{
    size_t off = 0;
    while (off < s->len && s->fd >= 0) {
        ssize_t n = write(s->fd, s->buf + off, s->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* disk full: the reader reports a truncated stream */
        off += (size_t)n;
    }
    s->bytes += off;
    all_streams_bytes += off;
    s->len = 0;
}

static void emit(struct attach_stream *s, uint32_t type, const void *body, size_t body_len, const void *tail,
                 size_t tail_len)
{
    size_t size = sizeof(struct opr_record_header) + body_len + tail_len;
    size_t padded = (size + 7) & ~(size_t)7;
    if (padded > OUTBUF_SIZE)
        return;
    if (s->len + padded > OUTBUF_SIZE)
        attach_stream_flush(s);
    struct opr_record_header h = {type, (uint32_t)padded};
    memcpy(s->buf + s->len, &h, sizeof h);
    memcpy(s->buf + s->len + sizeof h, body, body_len);
    if (tail_len)
        memcpy(s->buf + s->len + sizeof h + body_len, tail, tail_len);
    memset(s->buf + s->len + size, 0, padded - size);
    s->len += padded;
}

void attach_stream_note(struct attach_stream *s, const char *text)
{
    struct opr_note n = {attach_now_ns(), (uint32_t)strlen(text), 0};
    emit(s, OPR_REC_NOTE, &n, sizeof n, text, n.text_len);
}

static ssize_t read_file(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    ssize_t n;
    while (len < cap && ((n = read(fd, buf + len, cap - len)) > 0 || (n < 0 && errno == EINTR)))
        len += n > 0 ? (size_t)n : 0;
    close(fd);
    return (ssize_t)len;
}

static uint32_t parent_of(pid_t pid)
{
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    ssize_t n = read_file(path, stat, sizeof stat - 1);
    if (n <= 0)
        return 0;
    stat[n] = '\0';
    const char *p = strrchr(stat, ')'); /* comm may hold spaces and parentheses */
    unsigned ppid = 0;
    if (p)
        sscanf(p + 1, " %*c %u", &ppid);
    return ppid;
}

static void emit_process(struct attach_stream *s)
{
    char path[64], exe[PATH_MAX];
    static char cmdline[8192];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)s->pid);
    ssize_t exe_len = readlink(path, exe, sizeof exe);
    if (exe_len < 0)
        exe_len = 0;
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)s->pid);
    ssize_t cmd_len = read_file(path, cmdline, sizeof cmdline);
    if (cmd_len < 0)
        cmd_len = 0;
    char *tail = malloc((size_t)exe_len + (size_t)cmd_len + 1);
    if (!tail)
        return;
    memcpy(tail, exe, (size_t)exe_len);
    memcpy(tail + exe_len, cmdline, (size_t)cmd_len);
    struct opr_process p = {(uint32_t)s->pid, parent_of(s->pid), attach_now_ns(), (uint32_t)exe_len,
                            (uint32_t)cmd_len};
    emit(s, OPR_REC_PROCESS, &p, sizeof p, tail, (size_t)exe_len + (size_t)cmd_len);
    free(tail);
}

/* ---- threads ---------------------------------------------------------- */

static bool read_comm(pid_t pid, uint32_t tid, char name[16])
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%u/comm", (int)pid, tid);
    char buf[32];
    ssize_t n = read_file(path, buf, sizeof buf - 1);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    memset(name, 0, 16);
    memcpy(name, buf, strlen(buf) < 15 ? strlen(buf) : 15);
    return true;
}

static void emit_thread(struct attach_stream *s, const struct thread_name *t)
{
    struct opr_thread r;
    memset(&r, 0, sizeof r);
    r.tid = t->tid;
    r.flags = t->tid == (uint32_t)s->pid ? OPR_THREAD_MAIN : 0;
    r.time_ns = attach_now_ns();
    memcpy(r.name, t->name, sizeof r.name);
    r.name[15] = '\0';
    emit(s, OPR_REC_THREAD, &r, sizeof r, NULL, 0);
}

static void note_thread(struct attach_stream *s, uint32_t tid)
{
    for (size_t i = 0; i < s->nthreads; i++)
        if (s->threads[i].tid == tid)
            return;
    if (s->nthreads == s->threads_cap) {
        size_t cap = s->threads_cap ? s->threads_cap * 2 : 32;
        struct thread_name *t = realloc(s->threads, cap * sizeof *t);
        if (!t)
            return;
        s->threads = t;
        s->threads_cap = cap;
    }
    struct thread_name *t = &s->threads[s->nthreads++];
    memset(t, 0, sizeof *t);
    t->tid = tid;
    if (!read_comm(s->pid, tid, t->name))
        snprintf(t->name, sizeof t->name, "%s", "?");
    emit_thread(s, t);
    s->t.threads++;
}

/* ---- mappings -------------------------------------------------------------- */

static int read_build_id(const char *path, uint8_t *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    int len = 0;
    const void *id;
    ssize_t n = elf ? dwelf_elf_gnu_build_id(elf, &id) : -1;
    if (n > 0 && n <= OPR_BUILD_ID_MAX) {
        memcpy(out, id, (size_t)n);
        len = (int)n;
    }
    if (elf)
        elf_end(elf);
    close(fd);
    return len;
}

/* The vDSO has no file: save the target's image once (vdso.so). */
static void save_vdso(struct attach_stream *s, uint64_t start, uint64_t end)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/vdso.so", s->dir);
    int out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0)
        return;
    char mem[64];
    snprintf(mem, sizeof mem, "/proc/%d/mem", (int)s->pid);
    int in = open(mem, O_RDONLY | O_CLOEXEC);
    uint8_t *buf = malloc(end - start);
    ssize_t n = in >= 0 && buf ? pread(in, buf, end - start, (off_t)start) : -1;
    if (n > 0 && write(out, buf, (size_t)n) != n)
        n = -1;
    free(buf);
    if (in >= 0)
        close(in);
    close(out);
    if (n <= 0)
        unlink(path); /* let a later process try */
}

/* MAP records for executable mappings not written before. */
static void read_maps(struct attach_stream *s)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)s->pid);
    FILE *f = fopen(path, "re");
    s->last_maps_ns = attach_now_ns();
    if (!f)
        return;
    char line[PATH_MAX + 128];
    bool added = false;
    while (fgets(line, sizeof line, f)) {
        unsigned long long start, end, pgoff;
        char perms[8];
        int at = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &pgoff, &at) < 4 || perms[2] != 'x')
            continue;
        if (map_ranges_contain(s->maps, s->nmaps, start))
            continue;
        char *file = line + at;
        file[strcspn(file, "\n")] = '\0';
        struct opr_map m;
        memset(&m, 0, sizeof m);
        m.start = start;
        m.end = end;
        m.pgoff = pgoff;
        if (file[0] == '/')
            m.build_id_len = (uint8_t)read_build_id(file, m.build_id);
        else if (strcmp(file, "[vdso]") == 0)
            save_vdso(s, start, end);
        m.path_len = (uint16_t)strlen(file);
        emit(s, OPR_REC_MAP, &m, sizeof m, file, m.path_len);
        if (s->nmaps == s->maps_cap) {
            size_t cap = s->maps_cap ? s->maps_cap * 2 : 128;
            struct map_range *r = realloc(s->maps, cap * sizeof *r);
            if (!r)
                break;
            s->maps = r;
            s->maps_cap = cap;
        }
        s->maps[s->nmaps++] = (struct map_range){start, end};
        added = true;
    }
    fclose(f);
    if (added) {
        map_ranges_sort(s->maps, s->nmaps);
        attach_unwinder_maps_changed(s->unw);
    }
}

static void probe_python(struct attach_stream *s)
{
    char note[400];
    s->last_python_probe_ns = attach_now_ns();
    s->py = attach_python_probe(s->pid, note, sizeof note);
    if (!s->py && note[0] && !s->python_probed_note) {
        s->python_probed_note = true;
        attach_stream_note(s, note);
    }
}

/* ---- open ------------------------------------------------------------------ */

struct attach_stream *attach_stream_open(const char *dir, pid_t pid, uint64_t period_ns, enum call_graph_mode mode)
{
    struct attach_stream *s = calloc(1, sizeof *s);
    if (!s || !(s->buf = malloc(OUTBUF_SIZE))) {
        free(s);
        return NULL;
    }
    s->pid = pid;
    s->mode = mode;
    s->fd = -1;
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    char path[PATH_MAX + 64];
    for (int gen = 0; gen < 1000 && s->fd < 0; gen++) {
        snprintf(path, sizeof path, "%s/proc-%d-%d.raw", dir, (int)pid, gen);
        s->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (s->fd < 0 && errno != EEXIST)
            break;
    }
    if (s->fd < 0) {
        free(s->buf);
        free(s);
        return NULL;
    }
    struct opr_file_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, OPR_FILE_MAGIC, 8);
    h.version = OPR_FORMAT_VERSION;
    h.header_size = sizeof h;
    h.pid = (uint32_t)pid;
    h.ppid = parent_of(pid);
    h.start_ns = attach_now_ns();
    h.period_ns = period_ns;
    memcpy(s->buf, &h, sizeof h);
    s->len = sizeof h;
    emit_process(s);
    if (mode == CALL_GRAPH_DWARF) {
        s->unw = attach_unwinder_new(pid);
        if (!s->unw)
            attach_stream_note(s, "attach mode could not set up CFI unwinding for this process (libdwfl): "
                                  "leaf functions only");
    }
    read_maps(s);
    probe_python(s);
    attach_stream_flush(s);
    s->t.processes = 1;
    return s;
}

/* ---- samples --------------------------------------------------------------- */

static int64_t stack_id_for(struct attach_stream *s, const uint64_t *pcs, unsigned n)
{
    bool added;
    int64_t id = id_table_find_or_add(&s->stacks, pcs, n * sizeof pcs[0], &added);
    if (id < 0 || !added)
        return id;
    bool unmapped = false;
    for (unsigned i = 0; i < n && !unmapped; i++)
        unmapped = !map_ranges_contain(s->maps, s->nmaps, pcs[i]);
    if (unmapped && attach_now_ns() - s->last_maps_ns > 50000000ull) {
        read_maps(s); /* dlopen'ed code, or a libpython loaded late */
        if (!s->py && !s->python_probed_note)
            probe_python(s);
    }
    struct opr_stack st = {(uint32_t)id, n};
    emit(s, OPR_REC_STACK, &st, sizeof st, pcs, n * sizeof pcs[0]);
    return id;
}

static uint32_t python_code_id(struct attach_stream *s, const struct py_frame_ref *f, int32_t *line)
{
    struct { uint64_t code, fingerprint; } ckey = {f->code, f->fingerprint};
    struct { uint64_t code, fingerprint; int64_t instr; } lkey = {f->code, f->fingerprint, f->instr};
    bool added_code, added_line;
    int64_t code_id = id_table_find_or_add(&s->py_codes, &ckey, sizeof ckey, &added_code);
    int64_t line_id = code_id < 0 ? -1 : id_table_find_or_add(&s->py_lines, &lkey, sizeof lkey, &added_line);
    if (line_id < 0)
        return OPR_PYCODE_UNKNOWN;
    if (!added_line) {
        *line = s->py_line_values[line_id];
        return *line == INT32_MIN ? OPR_PYCODE_UNKNOWN : (uint32_t)code_id;
    }
    if ((size_t)line_id >= s->py_line_cap) {
        size_t cap = s->py_line_cap ? s->py_line_cap * 2 : 1024;
        while (cap <= (size_t)line_id)
            cap *= 2;
        int32_t *v = realloc(s->py_line_values, cap * sizeof *v);
        if (!v)
            return OPR_PYCODE_UNKNOWN;
        s->py_line_values = v;
        s->py_line_cap = cap;
    }
    static struct attach_pycode_info info;
    if (!attach_python_resolve(s->py, f, &info, added_code)) {
        s->py_line_values[line_id] = INT32_MIN; /* freed or reused since: an unknown Python frame */
        *line = 0;
        return OPR_PYCODE_UNKNOWN;
    }
    s->py_line_values[line_id] = info.line;
    *line = info.line;
    if (added_code) {
        struct opr_pycode c = {(uint32_t)code_id, info.first_line, (uint32_t)strlen(info.filename),
                               (uint32_t)strlen(info.qualname)};
        static char tail[sizeof info.filename + sizeof info.qualname];
        memcpy(tail, info.filename, c.filename_len);
        memcpy(tail + c.filename_len, info.qualname, c.qualname_len);
        emit(s, OPR_REC_PYCODE, &c, sizeof c, tail, c.filename_len + c.qualname_len);
    }
    return (uint32_t)code_id;
}

static uint32_t python_stack_for(struct attach_stream *s, const struct py_frame_ref *py, unsigned n)
{
    if (n == 0)
        return 0;
    static struct opr_pyframe frames[OPR_MAX_PYFRAMES];
    for (unsigned i = 0; i < n; i++) {
        int32_t line = 0;
        frames[i].code_id = python_code_id(s, &py[i], &line);
        frames[i].line = line;
        frames[i].flags = py[i].is_entry ? OPR_PYFRAME_ENTRY : 0;
        frames[i].pad = 0;
    }
    bool added;
    int64_t id = id_table_find_or_add(&s->py_stacks, frames, n * sizeof frames[0], &added);
    if (id < 0)
        return 0;
    if (added) {
        struct opr_pystack ps = {(uint32_t)id, n};
        emit(s, OPR_REC_PYSTACK, &ps, sizeof ps, frames, n * sizeof frames[0]);
    }
    return (uint32_t)id + 1;
}

/* The kernel's user callchain (fp mode) without its context markers. */
static unsigned callchain_pcs(const struct attach_event *e, uint64_t *pcs, unsigned max)
{
    unsigned n = 0;
    for (uint32_t i = 0; i < e->ncallchain && n < max; i++)
        if (e->callchain[i] < PERF_CONTEXT_MAX && e->callchain[i] != 0)
            pcs[n++] = e->callchain[i];
    if (n == 0)
        pcs[n++] = e->ip;
    return n;
}

void attach_stream_sample(struct attach_stream *s, const struct attach_event *e, uint64_t *python_lag_ns)
{
    static struct py_frame_ref py[OPR_MAX_PYFRAMES];
    static uint64_t pcs[OPR_MAX_FRAMES];
    unsigned npy = 0;
    *python_lag_ns = 0;
    if (size_cap_bytes && all_streams_bytes + s->len >= size_cap_bytes) {
        if (s->dropped_size_cap++ == 0)
            s->first_drop_ns = e->time_ns;
        s->t.dropped_size_cap++;
        return; /* counted in a LIMITS record at the end */
    }
    if (!s->py && !s->python_probed_note && attach_now_ns() - s->last_python_probe_ns > 1000000000ull)
        probe_python(s); /* a process that starts Python late (embedding, exec'ed interpreter) */
    if (s->py) {
        npy = attach_python_capture(s->py, e->tid, py, OPR_MAX_PYFRAMES);
        *python_lag_ns = attach_now_ns() - e->time_ns;
        const char *note = attach_python_take_note(s->py);
        if (note)
            attach_stream_note(s, note);
    }
    unsigned n;
    uint32_t flags = 0;
    if (s->mode == CALL_GRAPH_DWARF) {
        bool failed, truncated;
        n = attach_unwind(s->unw, e->tid, e->regs, e->stack, e->stack_len, pcs, OPR_MAX_FRAMES, &failed, &truncated);
        if (!e->regs)
            pcs[0] = e->ip;
        flags = (failed ? OPR_SAMPLE_UNWIND_FAILED : 0) | (truncated ? OPR_SAMPLE_TRUNCATED : 0);
    } else if (s->mode == CALL_GRAPH_FP) {
        n = callchain_pcs(e, pcs, OPR_MAX_FRAMES);
    } else {
        pcs[0] = e->ip;
        n = 1;
    }
    int64_t id = stack_id_for(s, pcs, n);
    if (id < 0) {
        s->t.lost++; /* out of memory: counted, not hidden */
        return;
    }
    note_thread(s, e->tid);
    struct opr_sample sample = {e->time_ns, e->tid, (uint32_t)id, flags, 1};
    struct opr_sample_python tail = {python_stack_for(s, py, npy), 0};
    emit(s, OPR_REC_SAMPLE, &sample, sizeof sample, &tail, sizeof tail);
    s->t.samples++;
    s->t.unwind_failed += (flags & OPR_SAMPLE_UNWIND_FAILED) != 0;
    s->t.truncated += (flags & OPR_SAMPLE_TRUNCATED) != 0;
    s->t.python_samples += npy > 0;
}

void attach_stream_lost(struct attach_stream *s, uint64_t time_ns, uint64_t lost, uint64_t total)
{
    struct opr_lost l = {time_ns, lost, total};
    emit(s, OPR_REC_LOST, &l, sizeof l, NULL, 0);
    s->lost_reported = lost;
}

void attach_stream_close(struct attach_stream *s, bool clean, struct attach_stream_totals *add_to)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nthreads; i++) {
        read_comm(s->pid, s->threads[i].tid, s->threads[i].name); /* the last name wins */
        emit_thread(s, &s->threads[i]);
    }
    if (size_cap_bytes) {
        struct opr_limits l = {attach_now_ns(), 0, s->dropped_size_cap, s->first_drop_ns};
        emit(s, OPR_REC_LIMITS, &l, sizeof l, NULL, 0);
    }
    if (clean) {
        struct opr_end e = {attach_now_ns(), s->t.samples + s->lost_reported, s->lost_reported};
        emit(s, OPR_REC_END, &e, sizeof e, NULL, 0);
    }
    attach_stream_flush(s);
    if (s->fd >= 0)
        close(s->fd);
    s->t.bytes = s->bytes;
    if (add_to) {
        add_to->samples += s->t.samples;
        add_to->unwind_failed += s->t.unwind_failed;
        add_to->truncated += s->t.truncated;
        add_to->python_samples += s->t.python_samples;
        add_to->lost += s->t.lost;
        add_to->dropped_size_cap += s->t.dropped_size_cap;
        add_to->threads += s->t.threads;
        add_to->processes += s->t.processes;
        add_to->bytes += s->t.bytes;
    }
    attach_unwinder_free(s->unw);
    attach_python_free(s->py);
    id_table_clear(&s->stacks);
    id_table_clear(&s->py_codes);
    id_table_clear(&s->py_lines);
    id_table_clear(&s->py_stacks);
    free(s->py_line_values);
    free(s->maps);
    free(s->threads);
    free(s->buf);
    free(s);
}
