/*
 * sampler/agent/agent_writer.c — the agent's writer thread.
 *
 * Not signal-handler code: this runs on its own thread (all signals blocked
 * there, so the workload's handlers never run on it) and may allocate.
 *
 * Every ~10 ms it drains the handler queue into this process's stream file
 * (docs/format.md): each distinct call chain is written once as a STACK record
 * and samples refer to it by id, which is what keeps a sample at ~32 bytes on
 * disk instead of perf's kilobytes of stack copy. Python frames are resolved
 * here too (agent_python.c): each code object is written once as PYCODE, each
 * distinct Python chain once as PYSTACK. It also writes what the
 * report needs to symbolize later: executable mappings (re-read from
 * /proc/self/maps whenever a PC falls outside the known ones, so dlopen'ed
 * libraries are covered), their build-ids, thread names, the process's command
 * line, lost-sample counters, and an END record on a clean shutdown.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <elf.h>

#include "sampler/agent/agent.h"

#define OUTBUF_SIZE (256 * 1024)
#define DRAIN_INTERVAL_NS 10000000L

static pthread_mutex_t writer_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t writer_thread;
static _Atomic int writer_stop;
static bool writer_running; /* writer_thread is a live thread of this process */
static __thread int in_writer_thread;

static int stream_fd = -1;
static pid_t stream_pid;
static char *outbuf;
static size_t outlen;
static uint64_t bytes_written;

static struct id_table native_stacks; /* call chain -> STACK id */
static struct id_table py_codes;      /* (code, fingerprint) -> PYCODE id */
static struct id_table py_lines;      /* (code, fingerprint, instr) -> line */
static struct id_table py_stacks;     /* opr_pyframe[] -> PYSTACK id */
static int32_t *py_line_values;          /* indexed by py_lines id */
static size_t py_line_values_cap;
static bool python_on;

static struct map_range *maps;
static size_t maps_count, maps_cap;
static uint64_t last_maps_read_ns;

static uint32_t *tids;
static size_t tids_count, tids_cap;

static uint64_t samples_written, last_lost_reported, last_taken_reported;
/* collection limits (--delay/--duration/--max-size), see emit_limits_if_changed */
static uint64_t dropped_size_cap, first_drop_ns, last_outside_reported, last_dropped_reported;
static struct opr_live *live;

bool agent_is_writer_thread(void) { return in_writer_thread != 0; }
bool agent_writer_owns_process(void) { return stream_pid == getpid(); }

/* ---- output buffer ---------------------------------------------------- */

static void flush_outbuf(void)
{
    size_t off = 0;
    while (off < outlen && stream_fd >= 0) {
        ssize_t n = write(stream_fd, outbuf + off, outlen - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* disk full or closed: the reader reports a truncated stream */
        off += (size_t)n;
    }
    bytes_written += off;
    if (live)
        __atomic_fetch_add(&live->bytes, off, __ATOMIC_RELAXED);
    outlen = 0;
}

/* Appends one record: header + body + tail, padded to 8 bytes. */
static void emit(uint32_t type, const void *body, size_t body_len, const void *tail, size_t tail_len)
{
    size_t size = sizeof(struct opr_record_header) + body_len + tail_len;
    size_t padded = (size + 7) & ~(size_t)7;
    if (padded > OUTBUF_SIZE)
        return; /* cannot happen for our record sizes; never split a record */
    if (outlen + padded > OUTBUF_SIZE)
        flush_outbuf();
    struct opr_record_header h = {type, (uint32_t)padded};
    memcpy(outbuf + outlen, &h, sizeof h);
    memcpy(outbuf + outlen + sizeof h, body, body_len);
    if (tail_len)
        memcpy(outbuf + outlen + sizeof h + body_len, tail, tail_len);
    memset(outbuf + outlen + size, 0, padded - size);
    outlen += padded;
}

static void emit_note(const char *text)
{
    struct opr_note n = {agent_now_ns(), (uint32_t)strlen(text), 0};
    emit(OPR_REC_NOTE, &n, sizeof n, text, n.text_len);
}

/* ---- process, threads ---------------------------------------------------- */

static ssize_t read_small_file(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    while (len < cap) {
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    return (ssize_t)len;
}

static void emit_process(void)
{
    char exe[PATH_MAX];
    ssize_t exe_len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (exe_len < 0)
        exe_len = 0;
    static char cmdline[8192];
    ssize_t cmd_len = read_small_file("/proc/self/cmdline", cmdline, sizeof cmdline);
    if (cmd_len < 0)
        cmd_len = 0;
    char *tail = malloc((size_t)exe_len + (size_t)cmd_len + 1);
    if (!tail)
        return;
    memcpy(tail, exe, (size_t)exe_len);
    memcpy(tail + exe_len, cmdline, (size_t)cmd_len);
    struct opr_process p = {(uint32_t)getpid(), (uint32_t)getppid(), agent_now_ns(),
                            (uint32_t)exe_len, (uint32_t)cmd_len};
    emit(OPR_REC_PROCESS, &p, sizeof p, tail, (size_t)exe_len + (size_t)cmd_len);
    free(tail);
}

/* Emits the thread's current name; nothing when it has exited already
 * (its first record keeps the name it had then). */
static void emit_thread(uint32_t tid)
{
    struct opr_thread t;
    memset(&t, 0, sizeof t);
    t.tid = tid;
    t.flags = tid == (uint32_t)stream_pid ? OPR_THREAD_MAIN : 0;
    t.time_ns = agent_now_ns();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%u/comm", tid);
    ssize_t n = read_small_file(path, t.name, sizeof t.name - 1);
    if (n <= 0)
        return;
    if (t.name[n - 1] == '\n')
        t.name[n - 1] = '\0';
    emit(OPR_REC_THREAD, &t, sizeof t, NULL, 0);
}

static void note_thread(uint32_t tid)
{
    for (size_t i = 0; i < tids_count; i++)
        if (tids[i] == tid)
            return;
    if (tids_count == tids_cap) {
        size_t cap = tids_cap ? tids_cap * 2 : 64;
        uint32_t *t = realloc(tids, cap * sizeof *t);
        if (!t)
            return;
        tids = t;
        tids_cap = cap;
    }
    tids[tids_count++] = tid;
    emit_thread(tid);
    if (live)
        __atomic_fetch_add(&live->threads, 1, __ATOMIC_RELAXED);
}

/* ---- mappings ------------------------------------------------------------ */

/* Reads NT_GNU_BUILD_ID from an ELF file's PT_NOTE segments. */
static int read_build_id(const char *path, uint8_t *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int len = 0;
    Elf64_Ehdr eh;
    if (pread(fd, &eh, sizeof eh, 0) != sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 64)
        goto out;
    Elf64_Phdr ph[64];
    if (pread(fd, ph, eh.e_phnum * sizeof ph[0], (off_t)eh.e_phoff) != (ssize_t)(eh.e_phnum * sizeof ph[0]))
        goto out;
    for (int i = 0; i < eh.e_phnum && len == 0; i++) {
        if (ph[i].p_type != PT_NOTE || ph[i].p_filesz > 65536)
            continue;
        uint8_t notes[65536];
        ssize_t got = pread(fd, notes, ph[i].p_filesz, (off_t)ph[i].p_offset);
        for (size_t off = 0; got > 0 && off + sizeof(Elf64_Nhdr) <= (size_t)got;) {
            Elf64_Nhdr nh;
            memcpy(&nh, notes + off, sizeof nh);
            size_t name_off = off + sizeof nh;
            size_t desc_off = name_off + ((nh.n_namesz + 3) & ~3u);
            size_t next = desc_off + ((nh.n_descsz + 3) & ~3u);
            if (next > (size_t)got)
                break;
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                memcmp(notes + name_off, "GNU", 4) == 0 && nh.n_descsz <= OPR_BUILD_ID_MAX) {
                memcpy(out, notes + desc_off, nh.n_descsz);
                len = (int)nh.n_descsz;
                break;
            }
            off = next;
        }
    }
out:
    close(fd);
    return len;
}

/* The vDSO has no file: save its image once so the report can symbolize it. */
static void save_vdso(uint64_t start, uint64_t end)
{
    char path[sizeof agent_config.result_dir + 16];
    snprintf(path, sizeof path, "%s/vdso.so", agent_config.result_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return; /* another process saved it already */
    ssize_t n = write(fd, (const void *)start, end - start);
    (void)n;
    close(fd);
}

/* Emits a MAP record for each executable mapping not emitted before. */
static void read_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return;
    last_maps_read_ns = agent_now_ns();
    char line[PATH_MAX + 128];
    bool added = false;
    while (fgets(line, sizeof line, f)) {
        unsigned long long start, end, pgoff;
        char perms[8];
        int path_at = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &pgoff, &path_at) < 4)
            continue;
        if (perms[2] != 'x')
            continue;
        if (map_ranges_contain(maps, maps_count, start))
            continue;
        char *path = line + path_at;
        path[strcspn(path, "\n")] = '\0';
        struct opr_map m;
        memset(&m, 0, sizeof m);
        m.start = start;
        m.end = end;
        m.pgoff = pgoff;
        if (path[0] == '/')
            m.build_id_len = (uint8_t)read_build_id(path, m.build_id);
        else if (strcmp(path, "[vdso]") == 0)
            save_vdso(start, end);
        m.path_len = (uint16_t)strlen(path);
        emit(OPR_REC_MAP, &m, sizeof m, path, m.path_len);
        if (maps_count == maps_cap) {
            size_t cap = maps_cap ? maps_cap * 2 : 256;
            struct map_range *r = realloc(maps, cap * sizeof *r);
            if (!r)
                break;
            maps = r;
            maps_cap = cap;
        }
        maps[maps_count++] = (struct map_range){start, end};
        added = true;
    }
    fclose(f);
    if (added) {
        map_ranges_sort(maps, maps_count);
        agent_phdr_refresh(); /* new code: the unwinder's snapshot must know it */
    }
}

/* ---- stacks ---------------------------------------------------------- */

/* Returns the id of this call chain, writing a STACK record the first time. */
static int64_t stack_id_for(const uint64_t *pcs, unsigned n)
{
    bool added;
    int64_t id = id_table_find_or_add(&native_stacks, pcs, n * sizeof pcs[0], &added);
    if (id < 0 || !added)
        return id;
    bool unmapped = false;
    for (unsigned i = 0; i < n && !unmapped; i++)
        unmapped = !map_ranges_contain(maps, maps_count, pcs[i]);
    /* New code appeared (dlopen, JIT): re-read the maps, at most every 50 ms
     * so garbage PCs from a broken unwind cannot make us re-read constantly.
     * New code may also be a libpython loaded late: look for it again. */
    if (unmapped && agent_now_ns() - last_maps_read_ns > 50000000ull) {
        read_maps();
        if (!python_on && (python_on = agent_python_probe()))
            agent_memmap_refresh();
    }
    struct opr_stack s = {(uint32_t)id, n};
    emit(OPR_REC_STACK, &s, sizeof s, pcs, n * sizeof pcs[0]);
    return id;
}

/* The PYCODE id of a captured frame (writing the record the first time) and
 * the line it was executing. */
static uint32_t python_code_id(const struct py_frame_ref *f, int32_t *line)
{
    struct { uint64_t code, fingerprint; } ckey = {f->code, f->fingerprint};
    struct { uint64_t code, fingerprint; int64_t instr; } lkey = {f->code, f->fingerprint, f->instr};
    bool added_code, added_line;
    int64_t code_id = id_table_find_or_add(&py_codes, &ckey, sizeof ckey, &added_code);
    if (code_id < 0)
        return OPR_PYCODE_UNKNOWN;
    int64_t line_id = id_table_find_or_add(&py_lines, &lkey, sizeof lkey, &added_line);
    if (line_id < 0)
        return OPR_PYCODE_UNKNOWN;
    if (!added_line) {
        *line = py_line_values[line_id];
        return *line == INT32_MIN ? OPR_PYCODE_UNKNOWN : (uint32_t)code_id;
    }
    if ((size_t)line_id >= py_line_values_cap) {
        size_t cap = py_line_values_cap ? py_line_values_cap * 2 : 1024;
        while (cap <= (size_t)line_id)
            cap *= 2;
        int32_t *v = realloc(py_line_values, cap * sizeof *v);
        if (!v)
            return OPR_PYCODE_UNKNOWN;
        py_line_values = v;
        py_line_values_cap = cap;
    }
    struct agent_pycode_info info;
    if (!agent_python_resolve(f, &info, added_code)) {
        /* Freed or reused before we looked: the frame is reported as an
         * unknown Python frame (a code id whose PYCODE is missing reads the
         * same way in the report). */
        py_line_values[line_id] = INT32_MIN;
        *line = 0;
        return OPR_PYCODE_UNKNOWN;
    }
    py_line_values[line_id] = info.line;
    *line = info.line;
    if (added_code) {
        struct opr_pycode c = {(uint32_t)code_id, info.first_line, (uint32_t)strlen(info.filename),
                               (uint32_t)strlen(info.qualname)};
        char tail[sizeof info.filename + sizeof info.qualname];
        memcpy(tail, info.filename, c.filename_len);
        memcpy(tail + c.filename_len, info.qualname, c.qualname_len);
        emit(OPR_REC_PYCODE, &c, sizeof c, tail, c.filename_len + c.qualname_len);
    }
    return (uint32_t)code_id;
}

/* Returns PYSTACK id + 1 for the slot's Python frames, 0 when it has none. */
static uint32_t python_stack_for(const struct agent_slot *slot)
{
    return agent_writer_python_stack(slot->py, slot->npy);
}

/* Also used by the off-CPU poll (agent_ranks.c) for a blocked thread's frames. */
uint32_t agent_writer_python_stack(const struct py_frame_ref *py, unsigned npy)
{
    if (npy == 0)
        return 0;
    static struct opr_pyframe frames[OPR_MAX_PYFRAMES];
    unsigned n = npy < OPR_MAX_PYFRAMES ? npy : OPR_MAX_PYFRAMES;
    for (unsigned i = 0; i < n; i++) {
        int32_t line = 0;
        frames[i].code_id = python_code_id(&py[i], &line);
        frames[i].line = line;
        frames[i].flags = py[i].is_entry ? OPR_PYFRAME_ENTRY : 0;
        frames[i].pad = 0;
    }
    bool added;
    int64_t id = id_table_find_or_add(&py_stacks, frames, n * sizeof frames[0], &added);
    if (id < 0)
        return 0;
    if (added) {
        struct opr_pystack ps = {(uint32_t)id, n};
        emit(OPR_REC_PYSTACK, &ps, sizeof ps, frames, n * sizeof frames[0]);
    }
    return (uint32_t)id + 1;
}

static void clear_tables(void)
{
    id_table_clear(&native_stacks);
    id_table_clear(&py_codes);
    id_table_clear(&py_lines);
    id_table_clear(&py_stacks);
}

/* ---- draining ------------------------------------------------------------ */

static void emit_lost_if_changed(bool force)
{
    uint64_t lost = atomic_load(&agent_samples_lost);
    uint64_t taken = atomic_load(&agent_samples_taken);
    if (!force && lost == last_lost_reported)
        return;
    struct opr_lost l = {agent_now_ns(), lost, taken};
    emit(OPR_REC_LOST, &l, sizeof l, NULL, 0);
    if (live)
        __atomic_fetch_add(&live->lost, lost - last_lost_reported, __ATOMIC_RELAXED);
    last_lost_reported = lost;
    last_taken_reported = taken;
}

/* --max-size: true once the streams of the whole result dir (every process
 * adds to the shared live counter) reach the cap. Checked per sample by the
 * writer, so the dir overshoots by at most one drain's output per process. */
static bool size_cap_reached(void)
{
    if (agent_config.max_bytes == 0)
        return false;
    uint64_t total = live ? __atomic_load_n(&live->bytes, __ATOMIC_RELAXED) : bytes_written;
    return total + outlen >= agent_config.max_bytes;
}

static void note_size_cap_drop(uint64_t time_ns)
{
    if (dropped_size_cap++ == 0)
        first_drop_ns = time_ns;
}

/* One LIMITS record whenever the counts moved (forced at the end when any
 * limit was set), so the report can say what the window and the cap left out. */
static void emit_limits_if_changed(bool force)
{
    uint64_t outside = atomic_load(&agent_samples_outside_window);
    bool limited = agent_config.window_start_ns || agent_config.window_end_ns || agent_config.max_bytes;
    if (!limited || (!force && outside == last_outside_reported && dropped_size_cap == last_dropped_reported))
        return;
    struct opr_limits l = {agent_now_ns(), outside, dropped_size_cap, first_drop_ns};
    emit(OPR_REC_LIMITS, &l, sizeof l, NULL, 0);
    if (live) {
        __atomic_fetch_add(&live->outside_window, outside - last_outside_reported, __ATOMIC_RELAXED);
        __atomic_fetch_add(&live->dropped_size_cap, dropped_size_cap - last_dropped_reported, __ATOMIC_RELAXED);
    }
    last_outside_reported = outside;
    last_dropped_reported = dropped_size_cap;
}

/* COUNTER_SAMPLE for the SAMPLE just emitted, when the handler read counters. */
static void emit_counter_sample(const struct agent_slot *slot)
{
    if (slot->nctr == 0 || slot->nctr > OPR_MAX_COUNTERS)
        return;
    struct opr_counter_sample cs = {slot->nctr, 0};
    emit(OPR_REC_COUNTER_SAMPLE, &cs, sizeof cs, slot->ctr, slot->nctr * sizeof slot->ctr[0]);
}

/* Caller holds writer_lock. */
static void drain_locked(void)
{
    uint64_t drained = 0;
    struct agent_slot *slot;
    if (python_on)
        agent_memmap_maybe_refresh();
    while ((slot = agent_queue_peek()) != NULL) {
        if (size_cap_reached()) {
            note_size_cap_drop(slot->time_ns);
            agent_queue_release();
            continue;
        }
        unsigned n = slot->nframes ? slot->nframes : 1;
        if (n > OPR_MAX_FRAMES)
            n = OPR_MAX_FRAMES;
        int64_t id = stack_id_for(slot->pcs, n);
        if (id >= 0 && (slot->flags & AGENT_SLOT_OMP_CONTEXT)) {
            /* threading/OpenMP: an opener's stack at region begin, not a sample */
            struct opr_omp_context c = {slot->omp_region, slot->time_ns, slot->tid, (uint32_t)id,
                                        python_stack_for(slot), 0};
            emit(OPR_REC_OMP_CONTEXT, &c, sizeof c, NULL, 0);
        } else if (id >= 0) {
            note_thread(slot->tid);
            struct opr_sample s = {slot->time_ns, slot->tid, (uint32_t)id, slot->flags,
                                   slot->weight ? slot->weight : 1};
            struct opr_sample_python py = {python_stack_for(slot), 0};
            /* threading/OpenMP: the region tail only when the thread was in one */
            struct { struct opr_sample_python py; struct opr_sample_openmp omp; } tails = {py, {slot->omp_region}};
            if (slot->omp_region) {
                ompt_writer_note_sample_region(slot->omp_region, emit);
                emit(OPR_REC_SAMPLE, &s, sizeof s, &tails, sizeof tails);
            } else
                emit(OPR_REC_SAMPLE, &s, sizeof s, &py, sizeof py);
            emit_counter_sample(slot); /* per-sample counters: right after its SAMPLE */
            drained++;
        } else {
            atomic_fetch_add(&agent_samples_lost, 1); /* out of memory: counted, not hidden */
        }
        agent_queue_release();
    }
    const char *note = agent_python_take_note();
    if (note)
        emit_note(note);
    /* threading/OpenMP: schedstat poll and OMPT rings (ompt/ompt.h) */
    agent_threads_poll(emit, false);
    agent_ranks_poll(emit, false); /* ranks: variables set after start (os.environ["RANK"]) */
    ompt_writer_drain(emit, false);
    agent_counters_reap(emit, false); /* per-sample counters of exited threads */
    samples_written += drained;
    if (live && drained)
        __atomic_fetch_add(&live->samples, drained, __ATOMIC_RELAXED);
    emit_lost_if_changed(false);
    emit_limits_if_changed(false);
    flush_outbuf();
}

static void *writer_main(void *arg)
{
    (void)arg;
    in_writer_thread = 1;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    while (!atomic_load(&writer_stop)) {
        agent_queue_prefault(); /* before the producers reach fresh pages */
        agent_phdr_refresh_if_changed(); /* libraries dlopen'ed since the last drain */
        struct timespec ts = {0, DRAIN_INTERVAL_NS};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&writer_lock);
        if (!atomic_load(&writer_stop))
            drain_locked();
        pthread_mutex_unlock(&writer_lock);
    }
    return NULL;
}

/* CPU time the writer thread has used (read from another thread through its
 * clock id). */
static uint64_t writer_cpu_ns(void)
{
    clockid_t cid;
    struct timespec ts;
    if (!writer_running || pthread_getcpuclockid(writer_thread, &cid) != 0 || clock_gettime(cid, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- life cycle ---------------------------------------------------------- */

static void map_live_counters(void)
{
    char path[sizeof agent_config.result_dir + 16];
    snprintf(path, sizeof path, "%s/" OPR_LIVE_FILE, agent_config.result_dir);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return;
    void *m = mmap(NULL, sizeof(struct opr_live), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m != MAP_FAILED)
        live = m;
}

/* Opens proc-<pid>-<generation>.raw, the first generation not taken yet (a
 * pid that exec'ed already has one for each earlier image). */
static int stream_generation;

static int open_stream(void)
{
    stream_pid = getpid();
    char path[sizeof agent_config.result_dir + 64];
    for (int gen = 0; gen < 1000; gen++) {
        snprintf(path, sizeof path, "%s/proc-%d-%d.raw", agent_config.result_dir, (int)stream_pid, gen);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0) {
            stream_generation = gen;
            return fd;
        }
        if (errno != EEXIST)
            return -1;
    }
    return -1;
}

static int begin_stream(void)
{
    if (!outbuf && !(outbuf = malloc(OUTBUF_SIZE)))
        return -1;
    outlen = 0;
    stream_fd = open_stream();
    if (stream_fd < 0)
        return -1;
    struct opr_file_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, OPR_FILE_MAGIC, 8);
    h.version = OPR_FORMAT_VERSION;
    h.header_size = sizeof h;
    h.pid = (uint32_t)getpid();
    h.ppid = (uint32_t)getppid();
    h.start_ns = agent_now_ns();
    h.period_ns = agent_config.leader ? 0 : agent_config.period_ns; /* -c: samples are not time */
    memcpy(outbuf, &h, sizeof h);
    outlen = sizeof h;
    emit_process();
    agent_counters_write_desc(emit); /* per-sample counters (-e) */
    agent_ranks_poll(emit, true); /* ranks: which rank of a job this image is */
    last_maps_read_ns = 0;
    read_maps();
    python_on = agent_python_probe();
    if (python_on)
        agent_memmap_refresh();
    flush_outbuf();
    /* An exec'ed image is the same process: count each pid once. */
    if (live && stream_generation == 0)
        __atomic_fetch_add(&live->processes, 1, __ATOMIC_RELAXED);
    return 0;
}

int agent_writer_start(void)
{
    map_live_counters();
    if (begin_stream() != 0)
        return -1;
    atomic_store(&writer_stop, 0);
    if (pthread_create(&writer_thread, NULL, writer_main, NULL) != 0) {
        close(stream_fd);
        stream_fd = -1;
        return -1;
    }
    writer_running = true;
    return 0;
}

void agent_writer_flush(void)
{
    pthread_mutex_lock(&writer_lock);
    drain_locked();
    pthread_mutex_unlock(&writer_lock);
}

void agent_writer_stop(bool clean)
{
    /* Bounded wait: if the lock cannot be had (we were called from a signal
     * handler that interrupted the writer), give up rather than hang. */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += 200000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    if (pthread_mutex_timedlock(&writer_lock, &deadline) != 0)
        return;
    atomic_store(&writer_stop, 1);
    drain_locked();
    /* threading/OpenMP: last schedstat read (with context switches) and
     * regions still open that samples were taken in */
    agent_threads_poll(emit, true);
    ompt_writer_drain(emit, true);
    /* Names may have been set after a thread's first sample. */
    for (size_t i = 0; i < tids_count; i++)
        emit_thread(tids[i]);
    emit_lost_if_changed(true);
    emit_limits_if_changed(true);
    agent_counters_reap(emit, true); /* per-sample counters: threads without them */
    struct timespec pcpu;
    struct opr_agent_cost cost = {atomic_load(&agent_handler_ns), atomic_load(&agent_samples_taken),
                                  writer_cpu_ns(), 0};
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &pcpu) == 0)
        cost.process_cpu_ns = (uint64_t)pcpu.tv_sec * 1000000000ull + (uint64_t)pcpu.tv_nsec;
    emit(OPR_REC_AGENT_COST, &cost, sizeof cost, NULL, 0);
    if (clean) {
        struct opr_end e = {agent_now_ns(), atomic_load(&agent_samples_taken),
                            atomic_load(&agent_samples_lost)};
        emit(OPR_REC_END, &e, sizeof e, NULL, 0);
    }
    flush_outbuf();
    if (stream_fd >= 0)
        close(stream_fd);
    stream_fd = -1;
    pthread_mutex_unlock(&writer_lock);
}

void agent_writer_atfork_prepare(void) { pthread_mutex_lock(&writer_lock); }
void agent_writer_atfork_parent(void) { pthread_mutex_unlock(&writer_lock); }

/* The child has a copy of the parent's state and no writer thread. Start a
 * stream of its own; the inherited perf event keeps sampling its threads. */
void agent_writer_atfork_child(void)
{
    pthread_mutex_init(&writer_lock, NULL);
    writer_running = false; /* threads do not survive fork */
    agent_memmap_atfork_child();
    agent_phdr_atfork_child();
    atomic_store(&agent_handler_ns, 0);
    if (stream_fd >= 0)
        close(stream_fd); /* the parent's file: never write to it from here */
    stream_fd = -1;
    clear_tables();
    ompt_atfork_child();         /* threading/OpenMP: the parent's rings are not ours */
    agent_threads_atfork_child();
    maps_count = 0;
    tids_count = 0;
    samples_written = last_lost_reported = last_taken_reported = 0;
    dropped_size_cap = first_drop_ns = last_outside_reported = last_dropped_reported = 0;
    bytes_written = 0;
    if (begin_stream() != 0)
        return;
    atomic_store(&writer_stop, 0);
    writer_running = pthread_create(&writer_thread, NULL, writer_main, NULL) == 0;
    if (!writer_running) {
        emit_note("the writer thread could not start in this child: samples kept until exit only");
        flush_outbuf();
    }
}
