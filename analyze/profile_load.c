/*
 * analyze/profile_load.c — reads a result directory (docs/format.md) into a
 * profile, symbolizing each distinct address once.
 *
 * A result directory is untrusted input: it may be truncated (the workload or
 * opprof was killed), copied incompletely, or corrupt. The rules:
 *   - no info file, unreadable dir, or no readable stream at all: an error
 *     sentence naming the problem and the fix;
 *   - a stream that ends inside a record: everything before that point is
 *     kept and a warning says where it stopped;
 *   - a stream with a bad magic/version: skipped with a warning;
 *   - records of unknown type: skipped (newer writers may add types).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "analyze/profile_internal.h"
#include "format/format.h"
#include "symbolize/symbolize.h"

static void warnf(struct profile *p, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    profile_add_warning(p, buf);
}


/* ---- streams --------------------------------------------------------------- */

struct raw_stack {
    uint32_t nframes;
    const uint64_t *pcs; /* points into the stream buffer */
    uint32_t global;     /* profile stack index once resolved, UINT32_MAX before */
};

struct raw_pycode {
    const char *qualname; /* interned; NULL until its PYCODE record is read */
    const char *filename;
    const char *basename;
};

struct raw_pystack {
    uint32_t nframes;
    const struct opr_pyframe *frames; /* points into the stream buffer */
};

struct stream {
    const char *name;
    uint32_t asid; /* address-space id handed to the symbolizer: one per image */
    uint32_t pid;
    struct raw_stack *stacks;
    size_t nstacks, stacks_cap;
    struct raw_pycode *pycodes;
    size_t npycodes, pycodes_cap;
    struct raw_pystack *pystacks;
    size_t npystacks, pystacks_cap;
    struct hash_index mixed;    /* (stack id, pystack id + 1) -> profile stack */
};

static struct prof_process *process_for(struct profile *p, uint32_t pid)
{
    for (size_t i = 0; i < p->nprocesses; i++)
        if (p->processes[i].pid == pid)
            return &p->processes[i];
    struct profile_priv *pv = p->priv;
    p->processes = profile_grow(p->processes, &pv->processes_cap, p->nprocesses + 1, sizeof *p->processes);
    struct prof_process *pr = &p->processes[p->nprocesses++];
    memset(pr, 0, sizeof *pr);
    pr->pid = pid;
    return pr;
}

static char *join_argv(const char *data, size_t len)
{
    char *s = malloc(len + 1);
    if (!s)
        return NULL;
    memcpy(s, data, len);
    s[len] = '\0';
    for (size_t i = 0; i + 1 < len; i++)
        if (s[i] == '\0')
            s[i] = ' ';
    return s;
}

/* Minimum body size per record type, so a record cannot make us read past
 * its own end. */
static size_t min_body(uint32_t type)
{
    switch (type) {
    case OPR_REC_PROCESS: return sizeof(struct opr_process);
    case OPR_REC_MAP: return sizeof(struct opr_map);
    case OPR_REC_THREAD: return sizeof(struct opr_thread);
    case OPR_REC_STACK: return sizeof(struct opr_stack);
    case OPR_REC_SAMPLE: return sizeof(struct opr_sample);
    case OPR_REC_LOST: return sizeof(struct opr_lost);
    case OPR_REC_END: return sizeof(struct opr_end);
    case OPR_REC_NOTE: return sizeof(struct opr_note);
    case OPR_REC_PYCODE: return sizeof(struct opr_pycode);
    case OPR_REC_PYSTACK: return sizeof(struct opr_pystack);
    case OPR_REC_AGENT_COST: return sizeof(struct opr_agent_cost);
    case OPR_REC_LIMITS: return sizeof(struct opr_limits);
    /* threads and OpenMP (analyze/threading.c) */
    case OPR_REC_OMP_REGION: return sizeof(struct opr_omp_region);
    case OPR_REC_OMP_TICK: return sizeof(struct opr_omp_tick);
    case OPR_REC_OMP_CONTEXT: return sizeof(struct opr_omp_context);
    case OPR_REC_OMP_INFO: return sizeof(struct opr_omp_info);
    case OPR_REC_SCHED_TICK: return sizeof(struct opr_sched_tick);
    /* per-sample counters (analyze/counters.c) */
    case OPR_REC_COUNTER_DESC: return sizeof(struct opr_counter_desc);
    case OPR_REC_COUNTER_SAMPLE: return sizeof(struct opr_counter_sample);
    default: return 0;
    }
}

struct pending_sample {
    struct opr_sample s;
    uint32_t thread;
    uint32_t py_stack_plus1;
    uint64_t omp_region; /* threads and OpenMP: the SAMPLE's optional second tail */
    uint32_t counters;   /* per-sample counters: 1 + row (0: none) */
};

/* Symbolizes one stream's native stack into frame ids (cached in rs->global
 * as the native-only profile stack). */
static uint32_t resolve_native(struct profile *p, struct symbolizer *sym, struct stream *st,
                               struct raw_stack *rs, uint32_t **scratch, size_t *scratch_cap)
{
    if (rs->global != UINT32_MAX)
        return rs->global;
    *scratch = profile_grow(*scratch, scratch_cap, rs->nframes + 1, sizeof **scratch);
    for (uint32_t i = 0; i < rs->nframes; i++) {
        uint64_t pc;
        memcpy(&pc, &rs->pcs[i], sizeof pc);
        bool is_ret = i > 0; /* all frames but the leaf are return addresses */
        struct sym_frame f; /* the symbolizer caches per (asid, pc) */
        int found = symbolizer_lookup(sym, st->asid, pc, is_ret, &f);
        char name[512];
        const char *module = f.module ? f.module : "[unknown]";
        enum frame_kind kind = FRAME_NATIVE;
        if (found != 0 || !f.function) {
            /* All PCs of one unnamed function share its start (from .eh_frame
             * when the symbol table does not cover it), so they merge into
             * one row; without a start, the PC's own offset. */
            if (f.module)
                snprintf(name, sizeof name, "%s+0x%" PRIx64, f.module,
                         f.function_start ? f.function_start : f.module_offset);
            else
                snprintf(name, sizeof name, "[unknown] 0x%" PRIx64, pc);
            kind = FRAME_UNKNOWN;
        } else {
            snprintf(name, sizeof name, "%s", f.function);
        }
        size_t before = p->nframes;
        (*scratch)[i] = profile_add_frame(p, name, module, f.source_file, f.line, kind);
        if (p->nframes > before && kind == FRAME_UNKNOWN)
            p->unknown_frames++;
    }
    rs->global = profile_add_stack(p, *scratch, rs->nframes);
    return rs->global;
}

/* The profile stack of a sample: its native stack, with its Python frames
 * spliced in when it has any. */
static uint32_t resolve_sample_stack(struct profile *p, struct symbolizer *sym, struct stream *st,
                                     uint32_t stack_id, uint32_t py_plus1, uint32_t **scratch,
                                     size_t *scratch_cap)
{
    uint32_t native = resolve_native(p, sym, st, &st->stacks[stack_id], scratch, scratch_cap);
    if (py_plus1 == 0 || py_plus1 > st->npystacks || st->pystacks[py_plus1 - 1].frames == NULL)
        return native;
    uint64_t key = ((uint64_t)stack_id << 32) | py_plus1;
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    for (size_t j = 0; st->mixed.cap; j++) {
        size_t slot = (h + j) & (st->mixed.cap - 1);
        if (!st->mixed.slots[slot].used)
            break;
        if (st->mixed.slots[slot].hash == key)
            return st->mixed.slots[slot].value;
    }
    const struct raw_pystack *ps = &st->pystacks[py_plus1 - 1];
    const struct prof_stack *ns = &p->stacks[native];
    size_t need = ns->nframes + ps->nframes * 2 + 2;
    *scratch = profile_grow(*scratch, scratch_cap, need, sizeof **scratch);
    uint32_t *pyframes = *scratch + ns->nframes + ps->nframes;
    bool entry[OPR_MAX_PYFRAMES];
    for (uint32_t i = 0; i < ps->nframes; i++) {
        struct opr_pyframe f;
        memcpy(&f, &ps->frames[i], sizeof f);
        const struct raw_pycode *c = f.code_id < st->npycodes ? &st->pycodes[f.code_id] : NULL;
        if (c && c->qualname)
            pyframes[i] = profile_add_frame(p, c->qualname, c->basename, c->filename, f.line, FRAME_PYTHON);
        else
            pyframes[i] = profile_add_frame(p, "[unknown Python frame]", "[python]", NULL, 0, FRAME_PYTHON);
        entry[i] = (f.flags & OPR_PYFRAME_ENTRY) != 0;
    }
    size_t n = splice_stacks(p->frames, ns->frames, ns->nframes, pyframes, entry, ps->nframes, *scratch);
    uint32_t merged = profile_add_stack(p, *scratch, (uint32_t)n);
    /* Open addressing keyed by the exact key (stored in .hash). */
    if ((st->mixed.count + 1) * 2 > st->mixed.cap) {
        size_t cap = st->mixed.cap ? st->mixed.cap * 2 : 256;
        struct hash_slot *slots = calloc(cap, sizeof *slots);
        if (!slots)
            return merged;
        for (size_t i = 0; i < st->mixed.cap; i++) {
            if (!st->mixed.slots[i].used)
                continue;
            size_t j = (st->mixed.slots[i].hash * 0x9e3779b97f4a7c15ull) & (cap - 1);
            while (slots[j].used)
                j = (j + 1) & (cap - 1);
            slots[j] = st->mixed.slots[i];
        }
        free(st->mixed.slots);
        st->mixed.slots = slots;
        st->mixed.cap = cap;
    }
    size_t j = h & (st->mixed.cap - 1);
    while (st->mixed.slots[j].used)
        j = (j + 1) & (st->mixed.cap - 1);
    st->mixed.slots[j] = (struct hash_slot){key, merged, 1};
    st->mixed.count++;
    return merged;
}

/* ranks: a profile stack of Python frames only (an OFFCPU record's stack), or
 * UINT32_MAX when the record has none. */
static uint32_t resolve_python_only(struct profile *p, struct stream *st, uint32_t py_plus1, uint32_t **scratch,
                                    size_t *scratch_cap)
{
    if (py_plus1 == 0 || py_plus1 > st->npystacks || st->pystacks[py_plus1 - 1].frames == NULL)
        return UINT32_MAX;
    const struct raw_pystack *ps = &st->pystacks[py_plus1 - 1];
    *scratch = profile_grow(*scratch, scratch_cap, ps->nframes + 1, sizeof **scratch);
    for (uint32_t i = 0; i < ps->nframes; i++) {
        struct opr_pyframe f;
        memcpy(&f, &ps->frames[i], sizeof f);
        const struct raw_pycode *c = f.code_id < st->npycodes ? &st->pycodes[f.code_id] : NULL;
        (*scratch)[i] = c && c->qualname
                            ? profile_add_frame(p, c->qualname, c->basename, c->filename, f.line, FRAME_PYTHON)
                            : profile_add_frame(p, "[unknown Python frame]", "[python]", NULL, 0, FRAME_PYTHON);
    }
    return profile_add_stack(p, *scratch, ps->nframes);
}

static const char *path_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int compare_samples(const void *a, const void *b)
{
    const struct prof_sample *x = a, *y = b;
    return x->time_ns < y->time_ns ? -1 : x->time_ns > y->time_ns;
}

/* Reads one stream file. Returns 0 when its header was valid (even if it was
 * truncated later), -1 when the file is not a usable stream. */
static int load_stream(struct profile *p, struct symbolizer *sym, const char *dir, const char *name,
                       uint32_t asid, uint32_t **scratch, size_t *scratch_cap)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        warnf(p, "%s: cannot open: %s; skipped", name, strerror(errno));
        return -1;
    }
    struct stat stbuf;
    if (fstat(fd, &stbuf) != 0) {
        close(fd);
        return -1;
    }
    size_t size = (size_t)stbuf.st_size;
    char *buf = malloc(size ? size : 1);
    size_t got = 0;
    while (buf && got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (!buf)
        return -1;
    size = got;

    struct opr_file_header h;
    if (size < sizeof h) {
        warnf(p, "%s: %zu bytes, shorter than a stream header (the process ended before writing); skipped",
              name, size);
        free(buf);
        return -1;
    }
    memcpy(&h, buf, sizeof h);
    if (memcmp(h.magic, OPR_FILE_MAGIC, 8) != 0 || h.header_size < sizeof h || h.header_size > size) {
        warnf(p, "%s: not an opprof sample stream (bad magic); skipped", name);
        free(buf);
        return -1;
    }
    if (h.version != OPR_FORMAT_VERSION) {
        warnf(p, "%s: stream format version %u, expected %d; skipped", name, h.version, OPR_FORMAT_VERSION);
        free(buf);
        return -1;
    }

    struct stream st;
    memset(&st, 0, sizeof st);
    st.name = name;
    st.asid = asid;
    st.pid = h.pid;
    struct prof_process *proc = process_for(p, h.pid);
    proc->ppid = h.ppid;
    ranks_note_stream(p, h.pid, h.start_ns); /* ranks */
    struct opr_offcpu *offcpu = NULL; /* ranks: resolved with the samples */
    size_t noffcpu = 0, offcpu_cap = 0;
    struct pending_sample *pend = NULL;
    size_t npend = 0, pend_cap = 0;
    uint64_t lost = 0, taken = 0, stream_samples = 0;
    struct opr_limits limits = {0}; /* the last LIMITS record: cumulative */
    bool ended = false;
    /* threads and OpenMP: this stream's regions start here; contexts wait
     * for the maps like samples do */
    size_t omp_first_region = p->threading ? p->threading->nregions : 0, omp_sorted = 0;
    struct opr_omp_context *omp_ctx = NULL;
    size_t omp_nctx = 0, omp_ctx_cap = 0;

    /* per-sample counters: this stream's counter index -> the profile's */
    size_t ctr_map[OPR_MAX_COUNTERS];
    size_t nctr_map = 0;
    bool last_was_sample = false;

    size_t off = h.header_size;
    while (off < size) {
        struct opr_record_header rh;
        if (size - off < sizeof rh) {
            warnf(p, "%s: truncated at byte %zu of %zu (inside a record header); %" PRIu64
                  " samples read before that point", name, off, size, stream_samples);
            proc->stream_truncated = true;
            break;
        }
        memcpy(&rh, buf + off, sizeof rh);
        if (rh.size < sizeof rh || (rh.size & 7) != 0 || rh.size > size - off) {
            warnf(p, "%s: %s at byte %zu of %zu; %" PRIu64 " samples read before that point", name,
                  rh.size > size - off ? "truncated" : "corrupt record", off, size, stream_samples);
            proc->stream_truncated = true;
            break;
        }
        const char *body = buf + off + sizeof rh;
        size_t body_len = rh.size - sizeof rh;
        off += rh.size;
        if (body_len < min_body(rh.type)) {
            warnf(p, "%s: record of type %u too short at byte %zu; skipped", name, rh.type, off - rh.size);
            continue;
        }
        /* per-sample counters: a COUNTER_SAMPLE belongs to the SAMPLE just before it */
        bool follows_sample = last_was_sample;
        last_was_sample = rh.type == OPR_REC_SAMPLE;
        switch (rh.type) {
        case OPR_REC_PROCESS: {
            struct opr_process pr;
            memcpy(&pr, body, sizeof pr);
            if ((size_t)pr.exe_len + pr.cmdline_len > body_len - sizeof pr)
                break;
            free(proc->exe);
            free(proc->cmdline);
            proc->exe = join_argv(body + sizeof pr, pr.exe_len);
            proc->cmdline = join_argv(body + sizeof pr + pr.exe_len, pr.cmdline_len);
            proc->ppid = pr.ppid;
            break;
        }
        case OPR_REC_MAP: {
            struct opr_map m;
            memcpy(&m, body, sizeof m);
            if (m.path_len > body_len - sizeof m || m.build_id_len > OPR_BUILD_ID_MAX)
                break;
            char mpath[PATH_MAX];
            size_t n = m.path_len < sizeof mpath - 1 ? m.path_len : sizeof mpath - 1;
            memcpy(mpath, body + sizeof m, n);
            mpath[n] = '\0';
            symbolizer_add_mapping(sym, asid, m.start, m.end, m.pgoff, mpath,
                                   m.build_id_len ? m.build_id : NULL, m.build_id_len);
            threading_note_module(p, mpath); /* threads and OpenMP: which runtime */
            break;
        }
        case OPR_REC_THREAD: {
            struct opr_thread t;
            memcpy(&t, body, sizeof t);
            t.name[sizeof t.name - 1] = '\0';
            profile_add_thread(p, h.pid, t.tid, t.name);
            break;
        }
        case OPR_REC_STACK: {
            struct opr_stack s;
            memcpy(&s, body, sizeof s);
            if (s.nframes == 0 || s.nframes > OPR_MAX_FRAMES ||
                (size_t)s.nframes * 8 > body_len - sizeof s) {
                warnf(p, "%s: malformed stack record at byte %zu; skipped", name, off - rh.size);
                break;
            }
            if (s.stack_id >= st.nstacks) {
                size_t need = (size_t)s.stack_id + 1;
                st.stacks = profile_grow(st.stacks, &st.stacks_cap, need, sizeof *st.stacks);
                for (size_t i = st.nstacks; i < need; i++)
                    st.stacks[i] = (struct raw_stack){0, NULL, UINT32_MAX};
                st.nstacks = need;
            }
            st.stacks[s.stack_id] = (struct raw_stack){s.nframes, (const uint64_t *)(body + sizeof s), UINT32_MAX};
            break;
        }
        case OPR_REC_PYCODE: {
            struct opr_pycode c;
            memcpy(&c, body, sizeof c);
            if ((size_t)c.filename_len + c.qualname_len > body_len - sizeof c || c.code_id > (1u << 24))
                break;
            if (c.code_id >= st.npycodes) {
                size_t need = (size_t)c.code_id + 1;
                st.pycodes = profile_grow(st.pycodes, &st.pycodes_cap, need, sizeof *st.pycodes);
                memset(st.pycodes + st.npycodes, 0, (need - st.npycodes) * sizeof *st.pycodes);
                st.npycodes = need;
            }
            char *fname = join_argv(body + sizeof c, c.filename_len);
            char *qname = join_argv(body + sizeof c + c.filename_len, c.qualname_len);
            if (fname && qname) {
                st.pycodes[c.code_id].filename = profile_intern(p, fname);
                st.pycodes[c.code_id].basename = profile_intern(p, path_basename(fname));
                st.pycodes[c.code_id].qualname = profile_intern(p, qname);
            }
            free(fname);
            free(qname);
            break;
        }
        case OPR_REC_PYSTACK: {
            struct opr_pystack ps;
            memcpy(&ps, body, sizeof ps);
            if (ps.nframes == 0 || ps.nframes > OPR_MAX_PYFRAMES || ps.py_stack_id > (1u << 26) ||
                (size_t)ps.nframes * sizeof(struct opr_pyframe) > body_len - sizeof ps)
                break;
            if (ps.py_stack_id >= st.npystacks) {
                size_t need = (size_t)ps.py_stack_id + 1;
                st.pystacks = profile_grow(st.pystacks, &st.pystacks_cap, need, sizeof *st.pystacks);
                memset(st.pystacks + st.npystacks, 0, (need - st.npystacks) * sizeof *st.pystacks);
                st.npystacks = need;
            }
            st.pystacks[ps.py_stack_id] =
                (struct raw_pystack){ps.nframes, (const struct opr_pyframe *)(body + sizeof ps)};
            break;
        }
        case OPR_REC_SAMPLE: {
            struct opr_sample s;
            memcpy(&s, body, sizeof s);
            struct opr_sample_python spy = {0, 0};
            if (body_len >= sizeof s + sizeof spy)
                memcpy(&spy, body + sizeof s, sizeof spy);
            if (s.stack_id >= st.nstacks || st.stacks[s.stack_id].pcs == NULL) {
                warnf(p, "%s: sample refers to unknown stack %u; skipped", name, s.stack_id);
                last_was_sample = false; /* its counter values go with it */
                break;
            }
            pend = profile_grow(pend, &pend_cap, npend + 1, sizeof *pend);
            pend[npend].s = s;
            pend[npend].thread = profile_add_thread(p, h.pid, s.tid, NULL);
            pend[npend].py_stack_plus1 = spy.py_stack_id_plus1;
            pend[npend].omp_region = 0; /* threads and OpenMP: optional second tail */
            pend[npend].counters = 0;   /* per-sample counters: set by a COUNTER_SAMPLE */
            if (body_len >= sizeof s + sizeof spy + sizeof(struct opr_sample_openmp))
                memcpy(&pend[npend].omp_region, body + sizeof s + sizeof spy, sizeof(uint64_t));
            npend++;
            stream_samples++;
            break;
        }
        case OPR_REC_LOST: {
            struct opr_lost l;
            memcpy(&l, body, sizeof l);
            if (l.lost_samples > lost)
                lost = l.lost_samples;
            if (l.total_samples > taken)
                taken = l.total_samples;
            break;
        }
        case OPR_REC_LIMITS:
            memcpy(&limits, body, sizeof limits);
            break;
        case OPR_REC_END: {
            struct opr_end e;
            memcpy(&e, body, sizeof e);
            if (e.lost_samples > lost)
                lost = e.lost_samples;
            ended = true;
            ranks_note_end(p, h.pid, e.time_ns); /* ranks: the process's wall time */
            break;
        }
        case OPR_REC_RANK: /* ranks */
            ranks_note_rank(p, h.pid, body, body_len);
            break;
        case OPR_REC_OFFCPU: /* ranks: Python stacks resolved below */
            if (body_len >= sizeof *offcpu) {
                offcpu = profile_grow(offcpu, &offcpu_cap, noffcpu + 1, sizeof *offcpu);
                memcpy(&offcpu[noffcpu++], body, sizeof *offcpu);
            }
            break;
        case OPR_REC_AGENT_COST: {
            struct opr_agent_cost c;
            memcpy(&c, body, sizeof c);
            p->agent_handler_ns += c.handler_ns;
            p->agent_handler_calls += c.handler_calls;
            p->agent_writer_cpu_ns += c.writer_cpu_ns;
            p->process_cpu_ns += c.process_cpu_ns;
            break;
        }
        case OPR_REC_NOTE: {
            struct opr_note n;
            memcpy(&n, body, sizeof n);
            if (n.text_len > body_len - sizeof n)
                break;
            proc->notes = realloc(proc->notes, (proc->nnotes + 1) * sizeof *proc->notes);
            proc->notes[proc->nnotes++] = join_argv(body + sizeof n, n.text_len);
            break;
        }
        case OPR_REC_COUNTER_DESC: { /* per-sample counters */
            struct opr_counter_desc d;
            memcpy(&d, body, sizeof d);
            if (d.name_len > body_len - sizeof d || d.index >= OPR_MAX_COUNTERS)
                break;
            char *cname = join_argv(body + sizeof d, d.name_len);
            size_t g = cname ? counters_add_event(p, cname, (enum pmu_role)d.role, d.type, d.config,
                                                  (d.flags & OPR_COUNTER_USER_ONLY) != 0)
                             : SIZE_MAX;
            free(cname);
            while (nctr_map <= d.index)
                ctr_map[nctr_map++] = SIZE_MAX;
            ctr_map[d.index] = g;
            break;
        }
        case OPR_REC_COUNTER_SAMPLE: {
            struct opr_counter_sample cs;
            memcpy(&cs, body, sizeof cs);
            if (!follows_sample || npend == 0 || cs.ncounters > nctr_map ||
                (size_t)cs.ncounters * sizeof(struct opr_counter_value) > body_len - sizeof cs) {
                warnf(p, "%s: counter values without their sample at byte %zu; skipped", name, off - rh.size);
                break;
            }
            uint32_t row = counters_new_row(p);
            for (uint32_t i = 0; row && i < cs.ncounters; i++) {
                struct opr_counter_value v;
                memcpy(&v, body + sizeof cs + i * sizeof v, sizeof v);
                counters_set(p, row, ctr_map[i], v.value, v.enabled, v.running);
            }
            pend[npend - 1].counters = row;
            break;
        }
        case OPR_REC_OMP_CONTEXT: /* threads and OpenMP: resolved below */
            omp_ctx = profile_grow(omp_ctx, &omp_ctx_cap, omp_nctx + 1, sizeof *omp_ctx);
            memcpy(&omp_ctx[omp_nctx++], body, sizeof *omp_ctx);
            break;
        case OPR_REC_OMP_REGION:
        case OPR_REC_OMP_TICK:
        case OPR_REC_OMP_INFO:
        case OPR_REC_SCHED_TICK:
            threading_load_record(p, h.pid, rh.type, body, body_len);
            break;
        default:
            break; /* a newer record type: skip */
        }
    }

    /* Maps are all known now: symbolize the stacks that samples use. */
    for (size_t i = 0; i < npend; i++) {
        struct opr_sample *s = &pend[i].s;
        uint32_t stack = resolve_sample_stack(p, sym, &st, s->stack_id, pend[i].py_stack_plus1, scratch,
                                              scratch_cap);
        profile_add_sample(p, s->time_ns, pend[i].thread, stack, s->weight ? s->weight : 1);
        p->samples[p->nsamples - 1].flags = s->flags;
        if (pend[i].omp_region) /* threads and OpenMP */
            p->samples[p->nsamples - 1].omp_region =
                threading_region_lookup(p, omp_first_region, &omp_sorted, h.pid, pend[i].omp_region);
        p->samples[p->nsamples - 1].counters = pend[i].counters; /* per-sample counters */
        if (s->flags & OPR_SAMPLE_TRUNCATED) {
            proc->truncated++;
            p->truncated_samples++;
        }
        if (s->flags & OPR_SAMPLE_UNWIND_FAILED)
            proc->unwind_failed++;
    }
    proc->samples += stream_samples;
    proc->lost += lost;
    p->lost_samples += lost;
    p->outside_window_samples += limits.outside_window;
    p->size_cap_dropped_samples += limits.dropped_size_cap;
    if (limits.first_drop_ns && (!p->first_size_cap_drop_ns || limits.first_drop_ns < p->first_size_cap_drop_ns))
        p->first_size_cap_drop_ns = limits.first_drop_ns;
    /* A generation that exec'ed has no END; only the last one speaks for the pid. */
    proc->ended_cleanly = ended;
    /* threads and OpenMP: the openers' stacks at region begin */
    for (size_t i = 0; i < omp_nctx; i++) {
        struct opr_omp_context *c = &omp_ctx[i];
        if (c->stack_id >= st.nstacks || st.stacks[c->stack_id].pcs == NULL)
            continue;
        uint32_t stack = resolve_sample_stack(p, sym, &st, c->stack_id, c->py_stack_id_plus1, scratch, scratch_cap);
        threading_add_context(p, h.pid, c->tid, c->region_id, c->time_ns, stack);
    }
    free(omp_ctx);
    for (size_t i = 0; i < noffcpu; i++) /* ranks: blocked Python threads */
        ranks_add_offcpu(p, offcpu[i].time_ns, offcpu[i].interval_ns, offcpu[i].offcpu_ns,
                         profile_add_thread(p, h.pid, offcpu[i].tid, NULL),
                         resolve_python_only(p, &st, offcpu[i].py_stack_id_plus1, scratch, scratch_cap));
    free(offcpu);
    free(pend);
    free(st.stacks);
    free(st.pycodes);
    free(st.pystacks);
    free(st.mixed.slots);
    free(buf);
    return 0;
}

struct stream_name {
    char name[256];
    unsigned pid, gen;
};

static int compare_stream_names(const void *a, const void *b)
{
    const struct stream_name *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return x->gen < y->gen ? -1 : x->gen > y->gen;
}

static void symbolizer_problem(const char *path, const char *problem, void *arg)
{
    warnf(arg, "%s: %s (its frames show as module+offset)", path, problem);
}

int profile_load(const char *dir, struct profile **out, char *err, size_t errlen)
{
    *out = NULL;
    struct stat stbuf;
    if (stat(dir, &stbuf) != 0) {
        snprintf(err, errlen, "%s: %s; pass a result directory written by `opprof record`", dir,
                 strerror(errno));
        return -1;
    }
    if (!S_ISDIR(stbuf.st_mode)) {
        snprintf(err, errlen, "%s is not a directory; pass a result directory written by `opprof record`", dir);
        return -1;
    }
    struct profile *p = profile_new_empty();
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    p->dir = strdup(dir);
    if (profile_load_info(p, dir, err, errlen) != 0) {
        profile_free(p);
        return -1;
    }

    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "cannot read %s: %s", dir, strerror(errno));
        profile_free(p);
        return -1;
    }
    struct stream_name *names = NULL;
    size_t nnames = 0, names_cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        unsigned pid, gen;
        char tail[8];
        if (sscanf(e->d_name, "proc-%u-%u.ra%1s", &pid, &gen, tail) == 3 && strcmp(tail, "w") == 0 &&
            strlen(e->d_name) < sizeof names[0].name) {
            names = profile_grow(names, &names_cap, nnames + 1, sizeof *names);
            snprintf(names[nnames].name, sizeof names[0].name, "%s", e->d_name);
            names[nnames].pid = pid;
            names[nnames].gen = gen;
            nnames++;
        }
    }
    closedir(d);
    if (nnames > 1)
        qsort(names, nnames, sizeof *names, compare_stream_names);

    struct symbolizer *sym = symbolizer_new(dir);
    uint32_t *scratch = NULL;
    size_t scratch_cap = 0;
    size_t usable = 0;
    for (size_t i = 0; i < nnames; i++)
        if (load_stream(p, sym, dir, names[i].name, (uint32_t)i, &scratch, &scratch_cap) == 0)
            usable++;
    symbolizer_for_each_problem(sym, symbolizer_problem, p);
    symbolizer_free(sym);
    free(scratch);
    free(names);

    if (nnames > 0 && usable == 0) {
        snprintf(err, errlen, "%s: none of its %zu sample stream(s) is readable (corrupt or not written by "
                 "opprof); record again", dir, nnames);
        profile_free(p);
        return -1;
    }
    if (nnames == 0)
        warnf(p, "no sample streams in %s: the agent did not start in the workload (static or setuid "
                 "binary?) or the directory was copied incompletely", dir);
    if (!p->complete)
        warnf(p, "the recording did not finish (opprof record was interrupted or is still running); "
                 "figures cover what was written");
    if (p->nsamples > 1)
        qsort(p->samples, p->nsamples, sizeof *p->samples, compare_samples);
    /* record -c: the leader's own count per sample is known exactly */
    if (p->sample_period && p->nsamples &&
        counters_add_leader(p, p->event ? p->event : "leader", (enum pmu_role)p->sample_role, p->user_only,
                            p->sample_period) != 0)
        warnf(p, "out of memory while adding the sampling event's counts");
    threading_attribute(p); /* threads and OpenMP: worker samples to their opener's context */
    *out = p;
    return 0;
}
