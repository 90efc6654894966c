/*
 * analyze/memory_tables.c — the Memory section's figures from the loaded
 * readings and charges (analyze/memory.c): peak RSS per process and when,
 * page faults, growth by function / Python line / operator, and findings
 * (major faults that cost time, RSS near the cgroup limit).
 * A pure function of the profile.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/hotspots_internal.h"
#include "analyze/profile_internal.h"
#include "util/util.h"

const char *memory_view_name(enum memory_view v)
{
    static const char *const names[] = {"function", "line", "op"};
    return v < MEMORY_VIEWS ? names[v] : "";
}

/* ---- per process ---------------------------------------------------------- */

static const char *command_of(const struct profile *p, uint32_t pid)
{
    for (size_t i = 0; i < p->nprocesses; i++)
        if (p->processes[i].pid == pid && p->processes[i].cmdline)
            return p->processes[i].cmdline;
    return "";
}

static void summarize_stream(const struct profile *p, const struct prof_memory_stream *ms, struct memory_process *mp)
{
    memset(mp, 0, sizeof *mp);
    mp->pid = ms->pid;
    mp->command = command_of(p, ms->pid);
    mp->nreadings = ms->nticks;
    mp->cgroup = ms->cgroup ? ms->cgroup : "";
    if (ms->has_limit) {
        mp->limit = ms->limit.limit_bytes;
        mp->limit_version = ms->limit.version;
    }
    if (!ms->nticks)
        return;
    const struct opr_mem_tick *first = &ms->ticks[0], *last = &ms->ticks[ms->nticks - 1];
    size_t peak = 0;
    for (size_t i = 0; i < ms->nticks; i++) {
        if (ms->ticks[i].rss_bytes > ms->ticks[peak].rss_bytes)
            peak = i;
        if (i) {
            double d = (double)ms->ticks[i].rss_bytes - (double)ms->ticks[i - 1].rss_bytes;
            if (d > 0)
                mp->grown += d;
            else
                mp->released -= d;
        }
    }
    const struct opr_mem_tick *pk = &ms->ticks[peak];
    uint64_t origin = p->start_ns && p->start_ns <= first->time_ns ? p->start_ns : first->time_ns;
    mp->peak_rss = pk->rss_bytes;
    mp->peak_s = (double)(pk->time_ns - origin) / 1e9;
    mp->anon_at_peak = pk->anon_bytes;
    mp->file_at_peak = pk->file_bytes;
    mp->agent_at_peak = pk->agent_bytes;
    mp->agent_last = last->agent_bytes;
    mp->hwm = last->hwm_bytes;
    mp->first_rss = first->rss_bytes;
    mp->last_rss = last->rss_bytes;
    mp->minflt = last->minflt - (first->minflt <= last->minflt ? first->minflt : last->minflt);
    mp->majflt = last->majflt - (first->majflt <= last->majflt ? first->majflt : last->majflt);
    mp->seconds = (double)(last->time_ns - first->time_ns) / 1e9;
    mp->unattributed_grown = ms->unattributed_grown;
    mp->unattributed_released = ms->unattributed_released;
}

/* ---- growth by key -------------------------------------------------------- */

/* Rows of one view, found by "name\x1fwhere" (the hashmap keeps pointers to
 * the key bytes: they live in keys[]). */
struct row_set {
    struct memory_row *rows;
    char **keys;
    size_t n, cap, keys_cap;
    uint32_t *gen; /* per row: 1 + charge index that last added to its total */
    size_t gen_cap;
    struct hashmap index;
};

static long row_for(struct row_set *rs, const char *name, const char *where)
{
    size_t len = strlen(name) + 1 + strlen(where);
    char *key = malloc(len + 1);
    if (!key)
        return -1;
    snprintf(key, len + 1, "%s\x1f%s", name, where);
    uint64_t v;
    if (hashmap_find(&rs->index, key, len, &v)) {
        free(key);
        return (long)v;
    }
    if (profile_grow_to(&rs->rows, &rs->cap, rs->n + 1, sizeof *rs->rows) != 0 ||
        profile_grow_to(&rs->keys, &rs->keys_cap, rs->n + 1, sizeof *rs->keys) != 0 ||
        profile_grow_to(&rs->gen, &rs->gen_cap, rs->n + 1, sizeof *rs->gen) != 0) {
        free(key);
        return -1;
    }
    struct memory_row *r = &rs->rows[rs->n];
    memset(r, 0, sizeof *r);
    r->name = strdup(name);
    r->where = strdup(where);
    if (!r->name || !r->where || hashmap_put(&rs->index, key, len, rs->n) != 0) {
        free(r->name);
        free(r->where);
        free(key);
        return -1;
    }
    rs->keys[rs->n] = key;
    rs->gen[rs->n] = 0;
    return (long)rs->n++;
}

/* Adds growth to a row: self when innermost, total once per charge. */
static int charge_row(struct row_set *rs, const char *name, const char *where, const struct prof_memory_charge *c,
                      uint32_t gen, bool innermost)
{
    long r = row_for(rs, name, where);
    if (r < 0)
        return -1;
    struct memory_row *row = &rs->rows[r];
    if (innermost) {
        row->self_grown += c->grown;
        row->released += c->released;
    }
    if (rs->gen[r] != gen) {
        rs->gen[r] = gen;
        row->total_grown += c->grown;
    }
    return 0;
}

static const char *base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : (path ? path : "");
}

static void line_key(char *buf, size_t len, const struct prof_frame *f)
{
    snprintf(buf, len, "%s:%d", f->source_file && f->source_file[0] ? f->source_file : f->module, f->line);
}

/* One charge into the three views. */
static int charge_views(const struct profile *p, const struct op_index *ix, struct row_set *rs,
                        const struct prof_memory_charge *c, uint32_t gen)
{
    const struct prof_stack *st = &p->stacks[c->stack];
    char key[4096];
    for (uint32_t i = 0; i < st->nframes; i++) { /* function: leaf is self */
        const struct prof_frame *f = &p->frames[st->frames[i]];
        if (f->kind != FRAME_PYTHON && charge_row(&rs[MEMORY_BY_FUNCTION], f->name, f->module, c, gen, i == 0) != 0)
            return -1;
    }
    long user = user_python_frame_from(p, st, 0);
    for (long i = python_frame_from(p, st, 0); i >= 0; i = python_frame_from(p, st, (size_t)i + 1)) {
        const struct prof_frame *f = &p->frames[st->frames[i]];
        line_key(key, sizeof key, f);
        if (charge_row(&rs[MEMORY_BY_LINE], key, f->name, c, gen, i == user) != 0)
            return -1;
    }
    long op = ix->any_op ? op_stack_innermost(ix, p, st) : -1;
    if (op >= 0) {
        bool fallback = op_stack_fallback(ix, p, st);
        uint32_t id = op_frame_at(ix, p, st, (size_t)op, fallback);
        long py = user_python_frame_from(p, st, (size_t)op);
        char where[4200] = "";
        if (py >= 0) {
            const struct prof_frame *f = &p->frames[st->frames[py]];
            snprintf(where, sizeof where, "%s:%d", base_name(f->source_file ? f->source_file : f->module), f->line);
        }
        if (id && charge_row(&rs[MEMORY_BY_OP], ix->names[id - 1], where, c, gen, true) != 0)
            return -1;
    }
    return 0;
}

static int cmp_rows(const void *a, const void *b)
{
    const struct memory_row *x = a, *y = b;
    double cx = x->self_grown + x->released, cy = y->self_grown + y->released; /* memory moved */
    if (cx != cy)
        return cx > cy ? -1 : 1;
    if (x->total_grown != y->total_grown)
        return x->total_grown > y->total_grown ? -1 : 1;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->where, y->where);
}

static void row_set_release(struct row_set *rs, bool keep_rows)
{
    for (size_t i = 0; i < rs->n; i++) {
        free(rs->keys[i]);
        if (!keep_rows) {
            free(rs->rows[i].name);
            free(rs->rows[i].where);
        }
    }
    if (!keep_rows)
        free(rs->rows);
    free(rs->keys);
    free(rs->gen);
    hashmap_free(&rs->index);
}

static int growth_tables(const struct profile *p, struct memory_summary *out)
{
    const struct prof_memory *m = p->memory;
    struct row_set rs[MEMORY_VIEWS];
    memset(rs, 0, sizeof rs);
    for (int v = 0; v < MEMORY_VIEWS; v++)
        hashmap_init(&rs[v].index, NULL, NULL);
    struct op_index ix;
    if (op_index_build(p, &ix) != 0) {
        for (int v = 0; v < MEMORY_VIEWS; v++)
            row_set_release(&rs[v], false);
        return -1;
    }
    int rc = 0;
    for (size_t c = 0; c < m->ncharges && rc == 0; c++) {
        if (m->charges[c].stack >= p->nstacks)
            continue;
        out->charged_total += m->charges[c].grown;
        out->charged_released += m->charges[c].released;
        rc = charge_views(p, &ix, rs, &m->charges[c], (uint32_t)c + 1);
    }
    op_index_free(&ix);
    for (int v = 0; v < MEMORY_VIEWS; v++) {
        if (rc == 0) {
            if (rs[v].n) /* an empty view has no array */
                qsort(rs[v].rows, rs[v].n, sizeof *rs[v].rows, cmp_rows);
            out->rows[v] = rs[v].rows;
            out->nrows[v] = rs[v].n;
        }
        row_set_release(&rs[v], rc == 0);
    }
    return rc;
}

/* ---- findings --------------------------------------------------------------- */

static int add_finding(struct memory_summary *s, size_t *cap, const char *text)
{
    if (profile_grow_to(&s->findings, cap, s->nfindings + 1, sizeof *s->findings) != 0)
        return -1;
    snprintf(s->findings[s->nfindings++].text, sizeof s->findings[0].text, "%s", text);
    return 0;
}

static int find_problems(struct memory_summary *s)
{
    size_t cap = 0;
    char text[512];
    for (size_t i = 0; i < s->nprocs; i++) {
        const struct memory_process *mp = &s->procs[i];
        double fault_s = (double)mp->majflt * MEMORY_MAJOR_FAULT_ASSUMED_US / 1e6;
        if (mp->majflt && mp->seconds > 0 && fault_s >= 0.05 * mp->seconds) {
            snprintf(text, sizeof text,
                     "pid %u: %llu major page faults (reads from disk or swap) cost about %.2f s at an assumed "
                     "%.0f us each, %.0f%% of its %.2f s: memory is short (swapping) or a large file is read "
                     "through a mapping; give it more memory, or read the data ahead",
                     mp->pid, (unsigned long long)mp->majflt, fault_s, MEMORY_MAJOR_FAULT_ASSUMED_US,
                     100 * fault_s / mp->seconds, mp->seconds);
            if (add_finding(s, &cap, text) != 0)
                return -1;
        }
        if (mp->limit && (double)mp->peak_rss >= 0.9 * (double)mp->limit) {
            snprintf(text, sizeof text,
                     "pid %u: peak RSS %.1f MiB is %.0f%% of its cgroup memory limit %.1f MiB (%s): near the "
                     "limit the kernel reclaims its page cache and then kills it (OOM); lower its memory use "
                     "or raise the limit",
                     mp->pid, mp->peak_rss / 1048576.0, 100.0 * mp->peak_rss / mp->limit, mp->limit / 1048576.0,
                     mp->cgroup[0] ? mp->cgroup : "/");
            if (add_finding(s, &cap, text) != 0)
                return -1;
        }
    }
    return 0;
}

void memory_summary_free(struct memory_summary *s)
{
    for (int v = 0; v < MEMORY_VIEWS; v++) {
        for (size_t i = 0; i < s->nrows[v]; i++) {
            free(s->rows[v][i].name);
            free(s->rows[v][i].where);
        }
        free(s->rows[v]);
    }
    free(s->procs);
    free(s->findings);
    memset(s, 0, sizeof *s);
}

int memory_analyze(const struct profile *p, struct memory_summary *out)
{
    memset(out, 0, sizeof *out);
    const struct prof_memory *m = p->memory;
    if (!m || !m->nstreams)
        return 0;
    if (!(out->procs = calloc(m->nstreams, sizeof *out->procs)))
        return -1;
    for (size_t i = 0; i < m->nstreams; i++) {
        if (!m->streams[i].nticks)
            continue;
        summarize_stream(p, &m->streams[i], &out->procs[out->nprocs]);
        out->procs[out->nprocs].stream = i;
        out->grown_total += out->procs[out->nprocs].grown;
        out->released_total += out->procs[out->nprocs].released;
        out->nprocs++;
    }
    if (growth_tables(p, out) != 0 || find_problems(out) != 0) {
        memory_summary_free(out);
        errno = ENOMEM;
        return -1;
    }
    return 0;
}
