/*
 * analyze/profile_stream.c — one stream file of a result directory into the
 * profile (docs/format.md), symbolizing each distinct address once.
 *
 * The checks on the file itself (header, record sizes, framing, truncation)
 * are format/stream_reader.c's: a stream that ends inside a record keeps
 * everything before that point and a warning says where it stopped; a bad
 * magic or version skips the stream with a warning; unknown record types are
 * skipped. This file handles the records every profile has; threading, ranks
 * and counters read their own records (struct stream_feature,
 * profile_internal.h), registered in features[] below. Turning the
 * stream's STACK and PYSTACK records into profile stacks is
 * profile_stream_stacks.c's.
 *
 * Out of memory: -2 with errno ENOMEM up to profile_load, whose caller says
 * "out of memory" and exits 2; nothing here aborts.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/profile_internal.h"
#include "analyze/profile_stream_internal.h"
#include "format/format.h"
#include "symbolize/symbolize.h"

/* The features that keep records of their own, in the order their end hooks
 * run (that order decides which stacks get which profile index). A new
 * feature is one line here. */
static const struct stream_feature *const features[] = {
    &threading_stream_feature,
    &ranks_stream_feature,
    &counters_stream_feature,
    &accounting_stream_feature,
    &memory_stream_feature,
};
#define NFEATURES (sizeof features / sizeof features[0])

/* ---- one stream (struct stream_load: profile_stream_internal.h) ----------- */

struct profile *stream_profile(struct stream_load *sl) { return sl->p; }
uint32_t stream_pid(const struct stream_load *sl) { return sl->pid; }

void stream_warn(struct stream_load *sl, const char *fmt, ...)
{
    char buf[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    profile_warnf(sl->p, "%s: %s", sl->name, buf);
}

struct stream_sample *stream_sample_before(struct stream_load *sl, const struct opr_record *rec)
{
    if ((rec->prev_type != OPR_REC_SAMPLE && rec->prev_type != OPR_REC_SAMPLE_SHORT) || !sl->last_sample_kept ||
        sl->nsamples == 0)
        return NULL;
    return &sl->samples[sl->nsamples - 1];
}

const struct stream_sample *stream_samples(const struct stream_load *sl, size_t *n)
{
    *n = sl->nsamples;
    return sl->samples;
}

bool stream_ended(const struct stream_load *sl, uint64_t *end_ns)
{
    *end_ns = sl->end_ns;
    return sl->ended;
}

/* The process pid of p, added when new; NULL with errno ENOMEM. */
static struct prof_process *process_for(struct profile *p, uint32_t pid)
{
    for (size_t i = 0; i < p->nprocesses; i++)
        if (p->processes[i].pid == pid)
            return &p->processes[i];
    struct profile_priv *pv = p->priv;
    if (profile_grow_to(&p->processes, &pv->processes_cap, p->nprocesses + 1, sizeof *p->processes) != 0)
        return NULL;
    struct prof_process *pr = &p->processes[p->nprocesses++];
    memset(pr, 0, sizeof *pr);
    pr->pid = pid;
    return pr;
}

/* The stream's process: looked up each time, as a later stream may move
 * p->processes. NULL with errno ENOMEM. */
static struct prof_process *stream_process(struct stream_load *sl) { return process_for(sl->p, sl->pid); }

/* len bytes of NUL-separated strings as one string joined by spaces. */
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

static const char *path_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Stream rows are keyed by these four ids; the map reads them back from the
 * row (callback keys, util/util.h). */
struct stream_row_key {
    uint32_t thread, stack_id, py_stack_plus1, flags;
};

static bool stream_row_eq(const void *key, size_t len, uint64_t value, const void *ctx)
{
    (void)len;
    const struct stream_load *sl = ctx;
    const struct stream_row_key *k = key;
    const struct stream_row *r = &sl->rows[value];
    return r->thread == k->thread && r->stack_id == k->stack_id && r->py_stack_plus1 == k->py_stack_plus1 &&
           r->flags == k->flags;
}

static const struct hashmap_type stream_row_type = {NULL, stream_row_eq};

/* Adds one SAMPLE to its stream row (PROFILE_LOAD_AGGREGATED). 0, or -1
 * with errno ENOMEM. */
static int fold_sample(struct stream_load *sl, const struct opr_sample *s, uint32_t thread, uint32_t py_plus1)
{
    struct stream_row_key k = {thread, s->stack_id, py_plus1, s->flags};
    uint64_t weight = s->weight ? s->weight : 1;
    uint64_t at = sl->last_row;
    /* The writer drains one thread's queue at a time and a hot loop repeats
     * its stack: most samples go to the previous sample's row, no hash. */
    bool same = at < sl->nrows && stream_row_eq(&k, sizeof k, at, sl);
    /* A row's sums fit the profile's 32-bit row: a full one is left as it
     * is and a new one started for its key. */
    if ((same || hashmap_find(&sl->row_index, &k, sizeof k, &at)) && sl->rows[at].weight + weight <= UINT32_MAX &&
        sl->rows[at].count < UINT32_MAX) {
        struct stream_row *r = &sl->rows[at];
        sl->last_row = at;
        r->weight += weight;
        r->count++;
        if (s->time_ns < r->first_ns)
            r->first_ns = s->time_ns;
        if (s->time_ns > r->last_ns)
            r->last_ns = s->time_ns;
        return 0;
    }
    if (profile_grow_to(&sl->rows, &sl->rows_cap, sl->nrows + 1, sizeof *sl->rows) != 0)
        return -1;
    sl->rows[sl->nrows] = (struct stream_row){thread, s->stack_id, py_plus1, s->flags, weight, 1, s->time_ns,
                                              s->time_ns};
    if (hashmap_put(&sl->row_index, &k, sizeof k, sl->nrows) != 0)
        return -1;
    sl->last_row = sl->nrows++;
    return 0;
}

/* ---- the records every profile has ----------------------------------------
 * One handler per record type, each the only place its body is decoded.
 * Malformed bodies are skipped, as a newer or damaged writer must not stop
 * the rest of the stream from being read. */

static int on_process(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct stream_load *sl = ctx;
    struct opr_process pr;
    memcpy(&pr, rec->body, sizeof pr);
    if ((size_t)pr.exe_len + pr.cmdline_len > rec->len - sizeof pr)
        return 0;
    struct prof_process *proc = stream_process(sl);
    if (!proc)
        return -1;
    free(proc->exe);
    free(proc->cmdline);
    proc->exe = join_argv(rec->body + sizeof pr, pr.exe_len);
    proc->cmdline = join_argv(rec->body + sizeof pr + pr.exe_len, pr.cmdline_len);
    proc->ppid = pr.ppid;
    if (!proc->exe || !proc->cmdline) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

static int on_map(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct stream_load *sl = ctx;
    struct opr_map m;
    memcpy(&m, rec->body, sizeof m);
    if (m.path_len > rec->len - sizeof m || m.build_id_len > OPR_BUILD_ID_MAX)
        return 0;
    char mpath[PATH_MAX];
    size_t n = m.path_len < sizeof mpath - 1 ? m.path_len : sizeof mpath - 1;
    memcpy(mpath, rec->body + sizeof m, n);
    mpath[n] = '\0';
    /* It fails for an empty range (skipped, like any malformed body) and
     * otherwise only when out of memory. */
    if (symbolizer_add_mapping(sl->sym, sl->asid, m.start, m.end, m.pgoff, mpath,
                               m.build_id_len ? m.build_id : NULL, m.build_id_len) != 0 &&
        m.end > m.start) {
        errno = ENOMEM;
        return -1;
    }
    /* Which OpenMP runtime the process loaded: threading's, but read off
     * the one MAP decoder rather than a second one. */
    return threading_note_module(sl->p, mpath);
}

static int on_thread(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct stream_load *sl = ctx;
    struct opr_thread t;
    memcpy(&t, rec->body, sizeof t);
    t.name[sizeof t.name - 1] = '\0';
    return profile_add_thread(sl->p, sl->pid, t.tid, t.name) == UINT32_MAX ? -1 : 0;
}

/*
 * Stack, Python code and Python stack ids size arrays here, and a result is
 * untrusted: one 32-byte record naming id 0x80000000 asked for 3 GB. Writers
 * number ids densely from 0, one record per id, so an id can never reach the
 * number of records of its type the file could hold: the file's size over
 * the smallest such record. That bounds memory by the input's size.
 */
bool stream_id_fits(const struct stream_load *sl, uint32_t id, size_t min_record)
{
    return (size_t)id < sl->stream_bytes / min_record;
}

int stream_room_for_stack(struct stream_load *sl, uint32_t id)
{
    if (id < sl->nstacks)
        return 0;
    size_t need = (size_t)id + 1;
    if (profile_grow_to(&sl->stacks, &sl->stacks_cap, need, sizeof *sl->stacks) != 0)
        return -1;
    for (size_t i = sl->nstacks; i < need; i++)
        sl->stacks[i] = (struct raw_stack){0, NULL, UINT32_MAX};
    sl->nstacks = need;
    return 0;
}

int stream_room_for_pystack(struct stream_load *sl, uint32_t id)
{
    if (id < sl->npystacks)
        return 0;
    size_t need = (size_t)id + 1;
    if (profile_grow_to(&sl->pystacks, &sl->pystacks_cap, need, sizeof *sl->pystacks) != 0)
        return -1;
    memset(sl->pystacks + sl->npystacks, 0, (need - sl->npystacks) * sizeof *sl->pystacks);
    sl->npystacks = need;
    return 0;
}

static int on_stack(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct stream_load *sl = ctx;
    struct opr_stack s;
    memcpy(&s, rec->body, sizeof s);
    if (s.nframes == 0 || s.nframes > OPR_MAX_FRAMES || (size_t)s.nframes * 8 > rec->len - sizeof s ||
        !stream_id_fits(sl, s.stack_id, sizeof(struct opr_record_header) + sizeof s + sizeof(uint64_t))) {
        stream_warn(sl, "malformed stack record at byte %zu; skipped", rec->off);
        return 0;
    }
    if (stream_room_for_stack(sl, s.stack_id) != 0)
        return -1;
    sl->stacks[s.stack_id] = (struct raw_stack){s.nframes, (const uint64_t *)(rec->body + sizeof s), UINT32_MAX};
    return 0;
}

static int on_pycode(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct stream_load *sl = ctx;
    struct opr_pycode c;
    memcpy(&c, rec->body, sizeof c);
    if ((size_t)c.filename_len + c.qualname_len > rec->len - sizeof c || c.code_id > (1u << 24) ||
        !stream_id_fits(sl, c.code_id, sizeof(struct opr_record_header) + sizeof c))
        return 0;
    if (c.code_id >= sl->npycodes) {
        size_t need = (size_t)c.code_id + 1;
        if (profile_grow_to(&sl->pycodes, &sl->pycodes_cap, need, sizeof *sl->pycodes) != 0)
            return -1;
        memset(sl->pycodes + sl->npycodes, 0, (need - sl->npycodes) * sizeof *sl->pycodes);
        sl->npycodes = need;
    }
    char *fname = join_argv(rec->body + sizeof c, c.filename_len);
    char *qname = join_argv(rec->body + sizeof c + c.filename_len, c.qualname_len);
    int rc = -1;
    if (fname && qname) {
        struct raw_pycode rc_code = {profile_intern(sl->p, qname), profile_intern(sl->p, fname),
                                     profile_intern(sl->p, path_basename(fname))};
        /* All three or none: a half-set code would show as a frame with no file. */
        if (rc_code.qualname && rc_code.filename && rc_code.basename) {
            sl->pycodes[c.code_id] = rc_code;
            rc = 0;
        }
    }
    free(fname);
    free(qname);
    if (rc != 0)
        errno = ENOMEM;
    return rc;
}

static int on_pystack(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct stream_load *sl = ctx;
    struct opr_pystack ps;
    memcpy(&ps, rec->body, sizeof ps);
    if (ps.nframes == 0 || ps.nframes > OPR_MAX_PYFRAMES || ps.py_stack_id > (1u << 26) ||
        !stream_id_fits(sl, ps.py_stack_id, sizeof(struct opr_record_header) + sizeof ps + sizeof(struct opr_pyframe)) ||
        (size_t)ps.nframes * sizeof(struct opr_pyframe) > rec->len - sizeof ps)
        return 0;
    if (stream_room_for_pystack(sl, ps.py_stack_id) != 0)
        return -1;
    sl->pystacks[ps.py_stack_id] =
        (struct raw_pystack){ps.nframes, (const struct opr_pyframe *)(rec->body + sizeof ps)};
    return 0;
}

/* A SAMPLE and its optional tails (Python stack, OpenMP region). Its stack
 * is symbolized once all maps are read (resolve_samples). */
static int take_sample(struct stream_load *sl, const struct opr_sample s, const struct opr_sample_python spy,
                       uint64_t omp_region);

static int on_sample(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct opr_sample s;
    memcpy(&s, rec->body, sizeof s);
    struct opr_sample_python spy = {0, 0};
    if (rec->len >= sizeof s + sizeof spy)
        memcpy(&spy, rec->body + sizeof s, sizeof spy);
    uint64_t omp_region = 0;
    if (rec->len >= sizeof s + sizeof spy + sizeof(struct opr_sample_openmp))
        memcpy(&omp_region, rec->body + sizeof s + sizeof spy, sizeof omp_region);
    return take_sample(ctx, s, spy, omp_region);
}

static int on_sample_short(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct opr_sample_short ss;
    memcpy(&ss, rec->body, sizeof ss);
    struct opr_sample s = {ss.time_ns, ss.tid, ss.stack_id, ss.weight_flags >> 24,
                           ss.weight_flags & OPR_SAMPLE_SHORT_MAX_WEIGHT};
    return take_sample(ctx, s, (struct opr_sample_python){ss.py_stack_id_plus1, 0}, 0);
}

static int on_sample_run(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct stream_load *sl = ctx;
    struct opr_sample_run_cursor c;
    opr_sample_run_begin(&c, rec);
    struct opr_sample s;
    uint32_t py, taken = 0;
    int got;
    while ((got = opr_sample_run_next(&c, &s, &py)) == 1) {
        if (take_sample(sl, s, (struct opr_sample_python){py, 0}, 0) != 0)
            return -1;
        taken++;
    }
    if (got < 0)
        stream_warn(sl, "sample run at byte %zu is damaged after %u of its samples; the rest of it skipped", rec->off,
                    taken);
    return 0;
}

static int take_sample(struct stream_load *sl, const struct opr_sample s, const struct opr_sample_python spy,
                       uint64_t omp_region)
{
    if (s.stack_id >= sl->nstacks || sl->stacks[s.stack_id].pcs == NULL) {
        stream_warn(sl, "sample refers to unknown stack %u; skipped", s.stack_id);
        sl->last_sample_kept = false; /* its counter values go with it */
        return 0;
    }
    uint32_t thread = sl->last_thread && sl->last_tid == s.tid ? sl->last_thread - 1
                                                                 : profile_add_thread(sl->p, sl->pid, s.tid, NULL);
    if (thread == UINT32_MAX)
        return -1;
    sl->last_tid = s.tid, sl->last_thread = thread + 1;
    sl->nread++;
    if (sl->aggregate) {
        sl->last_sample_kept = false; /* no record qualifies a folded sample (stream_wants_samples) */
        return fold_sample(sl, &s, thread, spy.py_stack_id_plus1);
    }
    if (profile_grow_to(&sl->samples, &sl->samples_cap, sl->nsamples + 1, sizeof *sl->samples) != 0)
        return -1;
    struct stream_sample *ss = &sl->samples[sl->nsamples++];
    *ss = (struct stream_sample){.s = s,
                                 .thread = thread,
                                 .py_stack_plus1 = spy.py_stack_id_plus1,
                                 .index = SIZE_MAX,
                                 .omp_region = omp_region};
    sl->last_sample_kept = true;
    return 0;
}

static int on_lost(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct stream_load *sl = ctx;
    struct opr_lost l;
    memcpy(&l, rec->body, sizeof l);
    if (l.lost_samples > sl->lost)
        sl->lost = l.lost_samples;
    return 0;
}

static int on_limits(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct stream_load *sl = ctx;
    memcpy(&sl->limits, rec->body, sizeof sl->limits);
    return 0;
}

static int on_end(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct stream_load *sl = ctx;
    struct opr_end e;
    memcpy(&e, rec->body, sizeof e);
    if (e.lost_samples > sl->lost)
        sl->lost = e.lost_samples;
    sl->ended = true;
    if (e.time_ns > sl->end_ns)
        sl->end_ns = e.time_ns;
    return 0;
}

static int on_agent_cost(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct stream_load *sl = ctx;
    struct opr_agent_cost c;
    memcpy(&c, rec->body, sizeof c);
    sl->p->agent_handler_ns += c.handler_ns;
    sl->p->agent_handler_calls += c.handler_calls;
    sl->p->agent_writer_cpu_ns += c.writer_cpu_ns;
    sl->p->process_cpu_ns += c.process_cpu_ns;
    return 0;
}

/* UNWIND is cumulative per stream: the profile gets what changed since the
 * stream's previous one. */
static int on_unwind(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct stream_load *sl = ctx;
    struct opr_unwind u;
    memset(&u, 0, sizeof u);
    memcpy(&u, rec->body, rec->len < sizeof u ? rec->len : sizeof u);
    if (u.table_samples < sl->unwind.table_samples || u.fallback_samples < sl->unwind.fallback_samples ||
        u.check_samples < sl->unwind.check_samples || u.check_disagree < sl->unwind.check_disagree)
        return 0; /* counts never go down in one stream: a damaged record, ignored */
    sl->p->unwind_table_samples += u.table_samples - sl->unwind.table_samples;
    sl->p->unwind_fallback_samples += u.fallback_samples - sl->unwind.fallback_samples;
    sl->p->unwind_check_samples += u.check_samples - sl->unwind.check_samples;
    sl->p->unwind_check_disagree += u.check_disagree - sl->unwind.check_disagree;
    if (u.context_checked >= sl->unwind.context_checked && u.context_disagree >= sl->unwind.context_disagree &&
        u.context_disagree <= u.context_checked) {
        sl->p->unwind_context_checked += u.context_checked - sl->unwind.context_checked;
        sl->p->unwind_context_disagree += u.context_disagree - sl->unwind.context_disagree;
    }
    if (u.replay_samples >= sl->unwind.replay_samples && u.replay_samples <= u.table_samples)
        sl->p->unwind_replay_samples += u.replay_samples - sl->unwind.replay_samples;
    if (u.rule_lookups >= sl->unwind.rule_lookups && u.rule_cache_hits >= sl->unwind.rule_cache_hits &&
        u.rule_cache_hits <= u.rule_lookups && u.rule_cache_hits - sl->unwind.rule_cache_hits <=
        u.rule_lookups - sl->unwind.rule_lookups) {
        sl->p->unwind_rule_lookups += u.rule_lookups - sl->unwind.rule_lookups;
        sl->p->unwind_rule_cache_hits += u.rule_cache_hits - sl->unwind.rule_cache_hits;
    }
    /* deferred walks: each finished or cut once; check mode's compared ones
     * are of those, and differ at most as often */
    if (u.deferred_samples >= sl->unwind.deferred_samples && u.deferred_finished >= sl->unwind.deferred_finished &&
        u.deferred_cut >= sl->unwind.deferred_cut && u.deferred_checked >= sl->unwind.deferred_checked &&
        u.deferred_disagree >= sl->unwind.deferred_disagree &&
        u.deferred_finished + u.deferred_cut <= u.deferred_samples && u.deferred_checked <= u.deferred_samples &&
        u.deferred_disagree <= u.deferred_checked) {
        sl->p->unwind_deferred_samples += u.deferred_samples - sl->unwind.deferred_samples;
        sl->p->unwind_deferred_finished += u.deferred_finished - sl->unwind.deferred_finished;
        sl->p->unwind_deferred_cut += u.deferred_cut - sl->unwind.deferred_cut;
        sl->p->unwind_deferred_checked += u.deferred_checked - sl->unwind.deferred_checked;
        sl->p->unwind_deferred_disagree += u.deferred_disagree - sl->unwind.deferred_disagree;
        /* of them, on stacks the agent did not know: checked on its own, so
         * that a damaged share does not drop the other counts */
        if (u.deferred_unknown_stack >= sl->unwind.deferred_unknown_stack && u.deferred_unknown_stack <= u.deferred_samples)
            sl->p->unwind_deferred_unknown_stack += u.deferred_unknown_stack - sl->unwind.deferred_unknown_stack;
    }
    if (u.check_at_entry >= sl->unwind.check_at_entry && u.deferred_checked >= sl->unwind.deferred_checked &&
        u.check_at_entry - sl->unwind.check_at_entry <=
            (u.check_samples - sl->unwind.check_samples) + (u.deferred_checked - sl->unwind.deferred_checked))
        sl->p->unwind_check_at_entry += u.check_at_entry - sl->unwind.check_at_entry;
    if (u.tables_built >= sl->unwind.tables_built && u.cache_loaded >= sl->unwind.cache_loaded &&
        u.build_cpu_ns >= sl->unwind.build_cpu_ns && u.cache_loaded <= u.tables_built) {
        sl->p->unwind_tables_built += u.tables_built - sl->unwind.tables_built;
        sl->p->unwind_tables_cached += u.cache_loaded - sl->unwind.cache_loaded;
        sl->p->unwind_build_cpu_ns += u.build_cpu_ns - sl->unwind.build_cpu_ns;
    }
    sl->unwind = u;
    return 0;
}

static int on_note(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    struct stream_load *sl = ctx;
    struct opr_note n;
    memcpy(&n, rec->body, sizeof n);
    if (n.text_len > rec->len - sizeof n)
        return 0;
    struct prof_process *proc = stream_process(sl);
    if (!proc)
        return -1;
    char *text = join_argv(rec->body + sizeof n, n.text_len);
    char **notes = text ? realloc(proc->notes, (proc->nnotes + 1) * sizeof *proc->notes) : NULL;
    if (!notes) {
        free(text);
        errno = ENOMEM;
        return -1;
    }
    proc->notes = notes;
    proc->notes[proc->nnotes++] = text;
    return 0;
}

static const struct {
    uint32_t type;
    size_t min_body;
    opr_record_fn fn;
} core_records[] = {
    {OPR_REC_PROCESS, sizeof(struct opr_process), on_process},
    {OPR_REC_MAP, sizeof(struct opr_map), on_map},
    {OPR_REC_THREAD, sizeof(struct opr_thread), on_thread},
    {OPR_REC_STACK, sizeof(struct opr_stack), on_stack},
    {OPR_REC_PYCODE, sizeof(struct opr_pycode), on_pycode},
    {OPR_REC_PYSTACK, sizeof(struct opr_pystack), on_pystack},
    {OPR_REC_STACK_TAIL, sizeof(struct opr_chain_tail), stream_on_stack_tail},
    {OPR_REC_PYSTACK_TAIL, sizeof(struct opr_chain_tail), stream_on_pystack_tail},
    {OPR_REC_SAMPLE, sizeof(struct opr_sample), on_sample},
    {OPR_REC_SAMPLE_SHORT, sizeof(struct opr_sample_short), on_sample_short},
    {OPR_REC_SAMPLE_RUN, sizeof(struct opr_sample_run), on_sample_run},
    {OPR_REC_LOST, sizeof(struct opr_lost), on_lost},
    {OPR_REC_LIMITS, sizeof(struct opr_limits), on_limits},
    {OPR_REC_END, sizeof(struct opr_end), on_end},
    {OPR_REC_AGENT_COST, sizeof(struct opr_agent_cost), on_agent_cost},
    {OPR_REC_NOTE, sizeof(struct opr_note), on_note},
    {OPR_REC_UNWIND, offsetof(struct opr_unwind, check_disagree_length), on_unwind},
};

/* Maps are all known now: symbolize the stacks that samples use, and add the
 * samples to the profile. 0, or -1 with errno ENOMEM. */
static int resolve_samples(struct stream_load *sl)
{
    struct profile *p = sl->p;
    struct prof_process *proc = stream_process(sl);
    if (!proc)
        return -1;
    /* Rows are in the order of their first sample, so stacks are resolved
     * (and get their profile index) in the same order as sample by sample. */
    for (size_t i = 0; i < sl->nrows; i++) {
        const struct stream_row *r = &sl->rows[i];
        uint32_t stack = stream_resolve_stack(sl, r->stack_id, r->py_stack_plus1);
        uint32_t flags = r->flags;
        if (stack != UINT32_MAX && !(flags & OPR_SAMPLE_TRUNCATED) && stream_ends_in_anonymous_code(sl, r->stack_id))
            flags |= OPR_SAMPLE_TRUNCATED;
        if (stack == UINT32_MAX ||
            profile_add_sample_row(p, r->first_ns, r->last_ns, r->thread, stack, flags, r->weight, r->count) != 0) {
            errno = ENOMEM;
            return -1;
        }
        if (flags & OPR_SAMPLE_TRUNCATED) {
            proc->truncated += r->count;
            p->truncated_samples += r->count;
        }
        if (flags & OPR_SAMPLE_UNWIND_FAILED)
            proc->unwind_failed += r->count;
    }
    for (size_t i = 0; i < sl->nsamples; i++) {
        struct stream_sample *ss = &sl->samples[i];
        /* on_sample kept only samples whose stack exists: UINT32_MAX here is
         * out of memory. */
        uint32_t stack = stream_resolve_stack(sl, ss->s.stack_id, ss->py_stack_plus1);
        uint32_t weight = ss->s.weight ? ss->s.weight : 1;
        if (stack != UINT32_MAX && !(ss->s.flags & OPR_SAMPLE_TRUNCATED) && stream_ends_in_anonymous_code(sl, ss->s.stack_id))
            ss->s.flags |= OPR_SAMPLE_TRUNCATED;
        if (sl->fold_late) { /* no OpenMP region, no counters (stream_wants_samples): index stays unset */
            if (stack == UINT32_MAX || profile_add_sample_row(p, ss->s.time_ns, ss->s.time_ns, ss->thread, stack,
                                                              ss->s.flags, weight, 1) != 0) {
                errno = ENOMEM;
                return -1;
            }
        } else {
            if (stack == UINT32_MAX || profile_add_sample(p, ss->s.time_ns, ss->thread, stack, weight) != 0) {
                errno = ENOMEM;
                return -1;
            }
            ss->index = p->nsamples - 1;
            p->samples[ss->index].flags = ss->s.flags;
            p->samples[ss->index].counters = ss->counters;
        }
        if (ss->s.flags & OPR_SAMPLE_TRUNCATED) {
            proc->truncated++;
            p->truncated_samples++;
        }
        if (ss->s.flags & OPR_SAMPLE_UNWIND_FAILED)
            proc->unwind_failed++;
    }
    proc->samples += sl->nread;
    proc->lost += sl->lost;
    p->lost_samples += sl->lost;
    p->outside_window_samples += sl->limits.outside_window;
    p->size_cap_dropped_samples += sl->limits.dropped_size_cap;
    if (sl->limits.first_drop_ns &&
        (!p->first_size_cap_drop_ns || sl->limits.first_drop_ns < p->first_size_cap_drop_ns))
        p->first_size_cap_drop_ns = sl->limits.first_drop_ns;
    /* A generation that exec'ed has no END; only the last one speaks for the pid. */
    proc->ended_cleanly = sl->ended;
    return 0;
}

static void on_skipped(void *ctx, const char *what) { stream_warn(ctx, "%s; skipped", what); }

static void on_stopped(void *ctx, const char *what)
{
    struct stream_load *sl = ctx;
    stream_warn(sl, "%s; %zu samples read before that point", what, sl->nread);
    /* No process only when out of memory: then the flag is lost, and the
     * next allocation that fails ends the load. */
    struct prof_process *proc = stream_process(sl);
    if (proc)
        proc->stream_truncated = true;
}

/* Registers the core handlers and lets each feature register its own and
 * start its per-stream state. 0, or -1 with errno. */
static int stream_begin(struct stream_load *sl, const struct opr_file_header *h, struct opr_reader *r,
                        void **state)
{
    for (size_t i = 0; i < sizeof core_records / sizeof core_records[0]; i++)
        if (opr_reader_on(r, core_records[i].type, core_records[i].min_body, core_records[i].fn, NULL) != 0)
            return -1;
    for (size_t i = 0; i < NFEATURES; i++) {
        state[i] = calloc(1, features[i]->state_size ? features[i]->state_size : 1);
        if (!state[i]) {
            errno = ENOMEM;
            return -1;
        }
        if (features[i]->begin && features[i]->begin(sl, state[i], h, r) != 0)
            return -1;
    }
    return 0;
}

int profile_load_stream(struct profile *p, struct symbolizer *sym, const char *dir, const char *name,
                        uint32_t asid, uint32_t **scratch, size_t *scratch_cap)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *buf;
    size_t size;
    if (opr_stream_read_file(path, &buf, &size) != 0) {
        if (errno == ENOMEM)
            return -2;
        profile_warnf(p, "%s: cannot open: %s; skipped", name, strerror(errno));
        return -1;
    }
    struct opr_file_header h;
    char why[256];
    if (opr_stream_check_header(buf, size, &h, why, sizeof why) != 0) {
        profile_warnf(p, "%s: %s; skipped", name, why);
        free(buf);
        return -1;
    }
    struct stream_load sl = {.p = p, .sym = sym, .name = name, .asid = asid, .pid = h.pid,
                             .scratch = scratch, .scratch_cap = scratch_cap, .stream_bytes = size};
    hashmap_init_u64(&sl.mixed);
    hashmap_init(&sl.row_index, &stream_row_type, &sl);
    bool memory = false;
    bool folds = ((struct profile_priv *)p->priv)->aggregate && !stream_wants_samples(buf, size, h.header_size, &memory);
    sl.aggregate = folds && !memory;
    sl.fold_late = folds && memory;
    struct prof_process *proc = stream_process(&sl);
    /* The OS pid names the perf map of JIT/trampoline code (-X perf). */
    if (!proc || symbolizer_set_os_pid(sym, asid, h.pid) != 0) {
        free(buf);
        return -2;
    }
    proc->ppid = h.ppid;
    struct opr_reader r = {.ctx = &sl, .skipped = on_skipped, .stopped = on_stopped};
    void *state[NFEATURES] = {NULL};
    int rc = stream_begin(&sl, &h, &r, state);
    if (rc == 0 && opr_stream_read_records(&r, buf, size, h.header_size) < 0)
        rc = -1;
    if (rc == 0)
        rc = resolve_samples(&sl);
    for (size_t i = 0; i < NFEATURES && rc == 0; i++)
        if (features[i]->end && features[i]->end(&sl, state[i]) != 0)
            rc = -1;
    int saved = errno;
    for (size_t i = 0; i < NFEATURES; i++) {
        if (state[i] && features[i]->release)
            features[i]->release(state[i]);
        free(state[i]);
    }
    free(sl.samples);
    free(sl.rows);
    hashmap_free(&sl.row_index);
    free(sl.stacks);
    stream_free_chain_copies(&sl);
    free(sl.pycodes);
    free(sl.pystacks);
    hashmap_free(&sl.mixed);
    free(buf);
    errno = saved;
    return rc == 0 ? 0 : -2;
}
