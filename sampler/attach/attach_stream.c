/*
 * sampler/attach/attach_stream.c — attach mode's side of the stream: one raw
 * stream per process image, written through format/'s stream writer (the one
 * the in-process agent writes through), so that `opprof report` and `export`
 * read an attached recording unchanged.
 *
 * Per sample it reads the Python frames first (the thread runs on while we
 * work: the sooner, the closer to the sampled instant), then unwinds the
 * native stack from the sample's stack copy (attach_stream_capture); once
 * attach_pending.c has judged the Python frames, the writer gets both
 * (attach_stream_emit), writes STACK / PYCODE / PYSTACK records the first
 * time each distinct chain is seen, and writes a SAMPLE that refers to them. The writer reads
 * the executable mappings from /proc/PID/maps (again whenever a PC falls
 * outside the known ones); this file has the unwinder re-read its modules
 * and looks for Python again when it does.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sampler/attach/attach_internal.h"

struct attach_stream {
    pid_t pid;
    int fd;
    enum call_graph_mode mode;
    struct opr_writer *w;
    uint64_t last_python_probe_ns;
    struct attach_unwinder *unw;
    struct attach_python *py;
    bool python_probed_note;
    struct attach_stream_totals t;
    uint64_t lost_reported;
    uint64_t dropped_size_cap, first_drop_ns; /* --max-size */
    /* memory over time: the last MEM_TICK written, the last reading */
    bool mem_have;
    struct opr_mem_tick mem_last;
    uint64_t mem_last_poll_ns;
};

pid_t attach_stream_pid(const struct attach_stream *s) { return s->pid; }

/* --max-size: one cap for all streams of the run (the launcher is one thread).
 * all_unemitted_bytes: what the samples captured but not yet written may
 * still write (attach_captured's emit_bound): they wait for the switch
 * records, and a loaded run captured enough of them past the last check to
 * end a 64 KiB capped stream 136 bytes over the cap (test_limits, CI beside
 * two busy loops). */
static uint64_t size_cap_bytes, all_streams_bytes, all_unemitted_bytes;

void attach_stream_set_size_cap(uint64_t bytes) { size_cap_bytes = bytes; }

/* ---- the writer's callbacks ------------------------------------------------ */

/* Where a stream's bytes go: its file, counted for --max-size. */
static size_t write_stream_file(void *ctx, const void *bytes, size_t len)
{
    struct attach_stream *s = ctx;
    size_t n = opr_write_all(s->fd, bytes, len);
    all_streams_bytes += n;
    return n;
}

/* New code was mapped: the unwinder re-reads its modules at the next unwind. */
static void maps_added(void *ctx)
{
    struct attach_stream *s = ctx;
    attach_unwinder_maps_changed(s->unw);
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

/* A PC outside the known code made the writer re-read the maps: the new code
 * may be a libpython loaded late (embedding, an exec'ed interpreter). */
static void late_code(void *ctx)
{
    struct attach_stream *s = ctx;
    if (!s->py && !s->python_probed_note)
        probe_python(s);
}

/* The writer's view of frame i of a captured Python chain. */
static bool resolve_pyframe(void *ctx, const void *frames, unsigned i, struct opr_pycode_names *out,
                            bool need_names)
{
    struct attach_stream *s = ctx;
    static struct attach_pycode_info info; /* 776 bytes; the launcher is one thread */
    if (!attach_python_resolve(s->py, (const struct py_frame_ref *)frames + i, &info, need_names))
        return false;
    out->line = info.line;
    if (need_names)
        py_code_names_copy(out, info.filename, info.qualname, info.first_line);
    return true;
}

/* ---- records ------------------------------------------------------------- */

void attach_stream_flush(struct attach_stream *s) { opr_writer_flush(s->w); }

void attach_stream_note(struct attach_stream *s, const char *text) { opr_writer_note(s->w, text); }

/* The target's parent, from /proc/PID/stat (0 when it cannot be read). */
static uint32_t parent_of(pid_t pid)
{
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    const char *p = strrchr(stat, ')'); /* comm may hold spaces and parentheses */
    unsigned ppid = 0;
    if (p)
        sscanf(p + 1, " %*c %u", &ppid);
    return ppid;
}

/* ---- open and close ---------------------------------------------------------- */

static void free_stream(struct attach_stream *s)
{
    if (s->fd >= 0)
        close(s->fd);
    attach_unwinder_free(s->unw);
    attach_python_free(s->py);
    opr_writer_free(s->w);
    free(s);
}

struct attach_stream *attach_stream_open(const char *dir, pid_t pid, uint64_t period_ns, enum call_graph_mode mode)
{
    struct attach_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->pid = pid;
    s->mode = mode;
    s->fd = -1;
    char proc_dir[32];
    snprintf(proc_dir, sizeof proc_dir, "/proc/%d", (int)pid);
    struct opr_writer_config config = {
        .proc_dir = proc_dir,
        .result_dir = dir,
        .unreadable_thread_name = "?", /* a thread gone before its name was read */
        .ops = {.ctx = s, .write = write_stream_file, .maps_added = maps_added, .late_code = late_code,
                .resolve_pyframe = resolve_pyframe},
    };
    s->w = opr_writer_new(&config);
    if (s->w)
        s->fd = opr_stream_create(dir, (uint32_t)pid, NULL);
    if (s->fd < 0) {
        int saved = errno;
        free_stream(s);
        errno = saved;
        return NULL;
    }
    opr_writer_begin(s->w, (uint32_t)pid, parent_of(pid), attach_now_ns(), period_ns);
    opr_writer_process(s->w);
    if (mode == CALL_GRAPH_DWARF) {
        s->unw = attach_unwinder_new(pid);
        if (!s->unw)
            attach_stream_note(s, "attach mode could not set up CFI unwinding for this process (libdwfl): "
                                  "leaf functions only");
    }
    opr_writer_read_maps(s->w);
    probe_python(s);
    opr_writer_memory_limit(s->w, proc_dir, attach_now_ns()); /* memory over time */
    attach_stream_memory(s, false);
    attach_stream_flush(s);
    s->t.processes = 1;
    return s;
}

/* ---- samples --------------------------------------------------------------- */

/* PYSTACK id + 1 of the sample's Python frames, 0 when it has none. */
static uint32_t python_stack_for(struct attach_stream *s, const struct py_frame_ref *py, unsigned n)
{
    struct opr_pyframe_key keys[OPR_MAX_PYFRAMES];
    n = py_frame_keys(py, n, keys);
    return opr_writer_python_stack(s->w, keys, n, py);
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

bool attach_stream_capture(struct attach_stream *s, const struct attach_event *e, struct attach_captured *c)
{
    static struct py_frame_ref py[OPR_MAX_PYFRAMES];
    static uint64_t pcs[OPR_MAX_FRAMES];
    memset(c, 0, sizeof *c);
    /* --max-size: this sample at its largest (SAMPLE, a new STACK, a new
     * PYSTACK with its PYCODEs) and the stream's closing records (memory,
     * thread names, LIMITS, END) must still fit, so a stream keeps the cap. */
    uint64_t bound = 96 + 8ull * e->ncallchain + (s->py ? 2048 : 0); /* Python: a typical new chain */
    uint64_t closing = 512 + 48 * s->t.threads;
    if (size_cap_bytes &&
        all_streams_bytes + opr_writer_pending(s->w) + all_unemitted_bytes + bound + closing >= size_cap_bytes) {
        if (s->dropped_size_cap++ == 0)
            s->first_drop_ns = e->time_ns;
        s->t.dropped_size_cap++;
        return false; /* counted in a LIMITS record at the end */
    }
    c->time_ns = e->time_ns, c->pid = e->pid, c->tid = e->tid, c->newer_in_batch = e->newer_in_batch;
    if (!s->py && !s->python_probed_note && attach_now_ns() - s->last_python_probe_ns > 1000000000ull)
        probe_python(s); /* a process that starts Python late (embedding, exec'ed interpreter) */
    if (s->py) {
        struct attach_sample_stack st = {e->regs ? e->stack : NULL, e->stack_len,
                                         e->regs ? e->regs[ATTACH_REG_SP] : 0};
        c->read_from = attach_now_ns();
        c->npy = attach_python_capture(s->py, e->tid, &st, py, OPR_MAX_PYFRAMES, &c->frame_moved);
        c->read_to = attach_now_ns();
        if (c->npy && !(c->py = malloc(c->npy * sizeof *c->py)))
            c->npy = 0; /* out of memory: native stack only */
        if (c->npy)
            memcpy(c->py, py, c->npy * sizeof *py);
        const char *note = attach_python_take_note(s->py);
        if (note)
            attach_stream_note(s, note);
    }
    unsigned n;
    if (s->mode == CALL_GRAPH_DWARF) {
        bool failed, truncated;
        n = attach_unwind(s->unw, e->tid, e->regs, e->stack, e->stack_len, pcs, OPR_MAX_FRAMES, &failed, &truncated);
        if (!e->regs)
            pcs[0] = e->ip;
        c->flags = (failed ? OPR_SAMPLE_UNWIND_FAILED : 0) | (truncated ? OPR_SAMPLE_TRUNCATED : 0);
    } else if (s->mode == CALL_GRAPH_FP) {
        n = callchain_pcs(e, pcs, OPR_MAX_FRAMES);
    } else {
        pcs[0] = e->ip;
        n = 1;
    }
    c->stack_id = opr_writer_stack_id(s->w, pcs, n);
    if (c->stack_id < 0) {
        s->t.lost++; /* out of memory: counted, not hidden */
        free(c->py);
        c->py = NULL;
        return false;
    }
    /* its SAMPLE with tails, and a new PYSTACK with its PYCODEs (the STACK
     * is written already) */
    c->emit_bound = 64 + (c->npy ? 2048 : 0);
    all_unemitted_bytes += c->emit_bound;
    return true;
}

void attach_stream_captured_gone(const struct attach_captured *c)
{
    all_unemitted_bytes -= c->emit_bound <= all_unemitted_bytes ? c->emit_bound : all_unemitted_bytes;
}

void attach_stream_emit(struct attach_stream *s, const struct attach_captured *c, bool with_python)
{
    attach_stream_captured_gone(c);
    s->t.threads += opr_writer_note_thread(s->w, c->tid);
    struct opr_sample sample = {c->time_ns, c->tid, (uint32_t)c->stack_id, c->flags, 1};
    unsigned npy = with_python ? c->npy : 0;
    opr_writer_sample(s->w, &sample, npy ? python_stack_for(s, c->py, npy) : 0, 0);
    s->t.samples++;
    s->t.unwind_failed += (c->flags & OPR_SAMPLE_UNWIND_FAILED) != 0;
    s->t.truncated += (c->flags & OPR_SAMPLE_TRUNCATED) != 0;
    s->t.python_samples += npy > 0;
    s->t.python_moved_on += c->npy && !with_python;
}

/* Past --max-size the periodic LOST and MEM_TICK records stop (they grow
 * with time, not samples: a loaded run wrote 248 bytes of them past a 64 KiB
 * cap); their counts are cumulative, so the final ones, inside the closing
 * records' reserve, still say everything. */
void attach_stream_lost(struct attach_stream *s, uint64_t time_ns, uint64_t lost, uint64_t total, bool final)
{
    if (s->dropped_size_cap && !final)
        return;
    struct opr_lost l = {time_ns, lost, total};
    opr_writer_emit(s->w, OPR_REC_LOST, &l, sizeof l, NULL, 0);
    s->lost_reported = lost;
}

/* Memory over time from outside: the agent's reading (agent_memory.c) made
 * from /proc/PID/statm, stat (faults) and status (VmHWM), at most every
 * 10 ms (the agent's writer period) and written when it moved. */
void attach_stream_memory(struct attach_stream *s, bool final)
{
    uint64_t now = attach_now_ns();
    if (!final && ((s->mem_have && now - s->mem_last_poll_ns < 10000000ull) || s->dropped_size_cap))
        return;
    char proc_dir[32];
    snprintf(proc_dir, sizeof proc_dir, "/proc/%d", (int)s->pid);
    struct opr_mem_tick t = {.time_ns = now, .hwm_bytes = s->mem_last.hwm_bytes};
    if (opr_memory_read_statm(proc_dir, &t) != 0 || t.rss_bytes == 0)
        return; /* gone (a zombie has no resident set) */
    (void)opr_memory_read_faults(proc_dir, &t);
    t.since_ns = s->mem_last_poll_ns;
    s->mem_last_poll_ns = now;
    if (s->mem_have && !final && t.rss_bytes == s->mem_last.rss_bytes && t.hwm_bytes == s->mem_last.hwm_bytes &&
        t.majflt == s->mem_last.majflt)
        return;
    opr_writer_emit(s->w, OPR_REC_MEM_TICK, &t, sizeof t, NULL, 0);
    s->mem_last = t;
    s->mem_have = true;
}

void attach_stream_close(struct attach_stream *s, bool clean, struct attach_stream_totals *add_to)
{
    if (!s)
        return;
    attach_stream_memory(s, true);
    opr_writer_thread_names_again(s->w); /* the last name wins */
    if (size_cap_bytes) {
        struct opr_limits l = {attach_now_ns(), 0, s->dropped_size_cap, s->first_drop_ns};
        opr_writer_emit(s->w, OPR_REC_LIMITS, &l, sizeof l, NULL, 0);
    }
    if (clean) {
        struct opr_end e = {attach_now_ns(), s->t.samples + s->lost_reported, s->lost_reported};
        opr_writer_emit(s->w, OPR_REC_END, &e, sizeof e, NULL, 0);
    }
    attach_stream_flush(s);
    s->t.bytes = opr_writer_bytes(s->w);
    if (add_to) {
        add_to->samples += s->t.samples;
        add_to->unwind_failed += s->t.unwind_failed;
        add_to->truncated += s->t.truncated;
        add_to->python_samples += s->t.python_samples;
        add_to->python_moved_on += s->t.python_moved_on;
        add_to->lost += s->t.lost;
        add_to->dropped_size_cap += s->t.dropped_size_cap;
        add_to->threads += s->t.threads;
        add_to->processes += s->t.processes;
        add_to->bytes += s->t.bytes;
    }
    free_stream(s);
}
