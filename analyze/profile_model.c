/*
 * analyze/profile_model.c — the in-memory profile: building it, interning its
 * strings, freeing it. Used by the loader and directly by unit tests.
 *
 * Frames are deduplicated by (name, module, source_file, line) and stacks by
 * their frame sequence, so two processes running the same code share rows and
 * aggregation walks each distinct stack once.
 */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/profile_internal.h"

static uint64_t hash_bytes(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ---- a small open-addressing map from 64-bit hash to a uint32 value ------- */

static int table_grow(struct hash_index *t)
{
    size_t cap = t->cap ? t->cap * 2 : 1024;
    struct hash_slot *s = calloc(cap, sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->slots[i].used)
            continue;
        size_t j = t->slots[i].hash & (cap - 1);
        while (s[j].used)
            j = (j + 1) & (cap - 1);
        s[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = s;
    t->cap = cap;
    return 0;
}

/* Finds value for hash where eq(value, arg) holds; returns UINT32_MAX if none. */
uint32_t hash_index_find(const struct hash_index *t, uint64_t hash,
                         bool (*eq)(uint32_t value, const void *arg, const void *ctx),
                         const void *arg, const void *ctx)
{
    if (!t->cap)
        return UINT32_MAX;
    size_t j = hash & (t->cap - 1);
    while (t->slots[j].used) {
        if (t->slots[j].hash == hash && eq(t->slots[j].value, arg, ctx))
            return t->slots[j].value;
        j = (j + 1) & (t->cap - 1);
    }
    return UINT32_MAX;
}

int hash_index_insert(struct hash_index *t, uint64_t hash, uint32_t value)
{
    if ((t->count + 1) * 2 > t->cap && table_grow(t) != 0)
        return -1;
    size_t j = hash & (t->cap - 1);
    while (t->slots[j].used)
        j = (j + 1) & (t->cap - 1);
    t->slots[j] = (struct hash_slot){hash, value, 1};
    t->count++;
    return 0;
}

void hash_index_free(struct hash_index *t)
{
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* ---- interned strings ------------------------------------------------------ */

static bool string_eq(uint32_t value, const void *arg, const void *ctx)
{
    const struct profile_priv *pv = ctx;
    return strcmp(pv->strings[value], arg) == 0;
}

const char *profile_intern(struct profile *p, const char *s)
{
    if (s == NULL)
        return NULL;
    struct profile_priv *pv = p->priv;
    uint64_t h = hash_bytes(0xcbf29ce484222325ull, s, strlen(s));
    uint32_t v = hash_index_find(&pv->string_index, h, string_eq, s, pv);
    if (v != UINT32_MAX)
        return pv->strings[v];
    if (pv->nstrings == pv->strings_cap) {
        size_t cap = pv->strings_cap ? pv->strings_cap * 2 : 256;
        char **n = realloc(pv->strings, cap * sizeof *n);
        if (!n)
            abort();
        pv->strings = n;
        pv->strings_cap = cap;
    }
    char *copy = strdup(s);
    if (!copy)
        abort();
    pv->strings[pv->nstrings] = copy;
    hash_index_insert(&pv->string_index, h, (uint32_t)pv->nstrings);
    pv->nstrings++;
    return copy;
}

/* ---- growth helper ---------------------------------------------------------- */

void *profile_grow(void *array, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return array;
    size_t ncap = *cap ? *cap : 64;
    while (ncap < need)
        ncap *= 2;
    void *n = realloc(array, ncap * elem);
    if (!n)
        abort(); /* the report cannot go on without memory; say so loudly */
    *cap = ncap;
    return n;
}

/* ---- builders --------------------------------------------------------------- */

struct profile *profile_new_empty(void)
{
    struct profile *p = calloc(1, sizeof *p);
    struct profile_priv *pv = calloc(1, sizeof *pv);
    if (!p || !pv) {
        free(p);
        free(pv);
        return NULL;
    }
    p->priv = pv;
    p->period_ns = 1000000;
    p->frequency_hz = 1000;
    p->exit_status = -1;
    return p;
}

struct frame_key {
    const char *name, *module, *source_file;
    int line;
};

static bool frame_eq(uint32_t value, const void *arg, const void *ctx)
{
    const struct profile *p = ctx;
    const struct frame_key *k = arg;
    const struct prof_frame *f = &p->frames[value];
    /* Interned strings: pointer equality is string equality. */
    return f->name == k->name && f->module == k->module && f->source_file == k->source_file &&
           f->line == k->line;
}

uint32_t profile_add_frame(struct profile *p, const char *name, const char *module,
                           const char *source_file, int line, enum frame_kind kind)
{
    struct profile_priv *pv = p->priv;
    struct frame_key k = {profile_intern(p, name ? name : ""), profile_intern(p, module ? module : ""),
                          profile_intern(p, source_file), line};
    /* Hash the field values, not the struct (its padding is undefined). */
    uintptr_t parts[4] = {(uintptr_t)k.name, (uintptr_t)k.module, (uintptr_t)k.source_file, (uintptr_t)line};
    uint64_t h = hash_bytes(0xcbf29ce484222325ull, parts, sizeof parts);
    uint32_t v = hash_index_find(&pv->frame_index, h, frame_eq, &k, p);
    if (v != UINT32_MAX)
        return v;
    p->frames = profile_grow(p->frames, &pv->frames_cap, p->nframes + 1, sizeof *p->frames);
    p->frames[p->nframes] = (struct prof_frame){k.name, k.module, k.source_file, line, kind};
    hash_index_insert(&pv->frame_index, h, (uint32_t)p->nframes);
    return (uint32_t)p->nframes++;
}

struct stack_key {
    const uint32_t *frames;
    uint32_t n;
};

static bool stack_eq(uint32_t value, const void *arg, const void *ctx)
{
    const struct profile *p = ctx;
    const struct stack_key *k = arg;
    const struct prof_stack *s = &p->stacks[value];
    return s->nframes == k->n && memcmp(s->frames, k->frames, k->n * sizeof k->frames[0]) == 0;
}

uint32_t profile_add_stack(struct profile *p, const uint32_t *frames, uint32_t nframes)
{
    struct profile_priv *pv = p->priv;
    struct stack_key k = {frames, nframes};
    uint64_t h = hash_bytes(0xcbf29ce484222325ull ^ nframes, frames, nframes * sizeof frames[0]);
    uint32_t v = hash_index_find(&pv->stack_index, h, stack_eq, &k, p);
    if (v != UINT32_MAX)
        return v;
    p->stacks = profile_grow(p->stacks, &pv->stacks_cap, p->nstacks + 1, sizeof *p->stacks);
    uint32_t *copy = malloc((nframes ? nframes : 1) * sizeof *copy);
    if (!copy)
        abort();
    if (nframes)
        memcpy(copy, frames, nframes * sizeof *copy);
    p->stacks[p->nstacks] = (struct prof_stack){nframes, copy};
    hash_index_insert(&pv->stack_index, h, (uint32_t)p->nstacks);
    return (uint32_t)p->nstacks++;
}

struct thread_key {
    uint32_t pid, tid;
};

static bool thread_eq(uint32_t value, const void *arg, const void *ctx)
{
    const struct profile *p = ctx;
    const struct thread_key *k = arg;
    return p->threads[value].pid == k->pid && p->threads[value].tid == k->tid;
}

uint32_t profile_add_thread(struct profile *p, uint32_t pid, uint32_t tid, const char *name)
{
    struct profile_priv *pv = p->priv;
    struct thread_key k = {pid, tid};
    uint64_t h = hash_bytes(0xcbf29ce484222325ull, &k, sizeof k);
    uint32_t v = hash_index_find(&pv->thread_index, h, thread_eq, &k, p);
    if (v == UINT32_MAX) {
        p->threads = profile_grow(p->threads, &pv->threads_cap, p->nthreads + 1, sizeof *p->threads);
        memset(&p->threads[p->nthreads], 0, sizeof p->threads[0]);
        p->threads[p->nthreads].pid = pid;
        p->threads[p->nthreads].tid = tid;
        hash_index_insert(&pv->thread_index, h, (uint32_t)p->nthreads);
        v = (uint32_t)p->nthreads++;
    }
    if (name && name[0])
        snprintf(p->threads[v].name, sizeof p->threads[v].name, "%s", name);
    return v;
}

void profile_add_sample(struct profile *p, uint64_t time_ns, uint32_t thread, uint32_t stack, uint32_t weight)
{
    struct profile_priv *pv = p->priv;
    p->samples = profile_grow(p->samples, &pv->samples_cap, p->nsamples + 1, sizeof *p->samples);
    p->samples[p->nsamples++] = (struct prof_sample){.time_ns = time_ns, .thread = thread, .stack = stack, .weight = weight};
    p->total_weight += weight;
    struct prof_thread *t = &p->threads[thread];
    if (t->samples == 0 || time_ns < t->first_ns)
        t->first_ns = time_ns;
    if (time_ns > t->last_ns)
        t->last_ns = time_ns;
    t->samples++;
}

void profile_add_warning(struct profile *p, const char *fmt_text)
{
    struct profile_priv *pv = p->priv;
    p->warnings = profile_grow(p->warnings, &pv->warnings_cap, p->nwarnings + 1, sizeof *p->warnings);
    p->warnings[p->nwarnings++] = strdup(fmt_text);
}

void profile_free(struct profile *p)
{
    if (!p)
        return;
    struct profile_priv *pv = p->priv;
    for (size_t i = 0; i < p->nstacks; i++)
        free(p->stacks[i].frames);
    free(p->stacks);
    free(p->frames);
    free(p->threads);
    for (size_t i = 0; i < p->nprocesses; i++) {
        free(p->processes[i].exe);
        free(p->processes[i].cmdline);
        for (size_t j = 0; j < p->processes[i].nnotes; j++)
            free(p->processes[i].notes[j]);
        free(p->processes[i].notes);
    }
    free(p->processes);
    free(p->samples);
    for (size_t i = 0; i < p->nwarnings; i++)
        free(p->warnings[i]);
    free(p->warnings);
    threading_free(p->threading); /* threads and OpenMP (analyze/threading.c) */
    counters_free(p->counters);   /* per-sample counters (analyze/counters.c) */
    ranks_free(p->ranks); /* ranks (analyze/ranks.c) */
    free(p->dir);
    free(p->command);
    free(p->event);
    free(p->call_graph);
    if (pv) {
        for (size_t i = 0; i < pv->nstrings; i++)
            free(pv->strings[i]);
        free(pv->strings);
        hash_index_free(&pv->string_index);
        hash_index_free(&pv->frame_index);
        hash_index_free(&pv->stack_index);
        hash_index_free(&pv->thread_index);
        free(pv);
    }
    free(p);
}

int profile_find_newest(char *out, size_t outlen)
{
    DIR *d = opendir(".");
    if (!d)
        return -1;
    int best = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        int n;
        char tail;
        if (sscanf(e->d_name, "opprof.%d%c", &n, &tail) == 1 && strlen(e->d_name) >= 10 && n > best)
            best = n;
    }
    closedir(d);
    if (best < 0)
        return -1;
    snprintf(out, outlen, "opprof.%03d", best);
    return 0;
}
