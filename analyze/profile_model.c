/*
 * analyze/profile_model.c — the in-memory profile: building it, interning its
 * strings, freeing it. Used by the loader and directly by unit tests.
 *
 * Frames are deduplicated by (name, module, source_file, line) and stacks by
 * their frame sequence, so two processes running the same code share rows and
 * aggregation walks each distinct stack once.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/profile_internal.h"
#include "util/util.h"

/* ---- interned strings ------------------------------------------------------ */

/* The string index maps a string's bytes to its slot in pv->strings; the
 * text is read from there, so the map keeps no key of its own. */
static bool string_eq(const void *key, size_t len, uint64_t value, const void *ctx)
{
    const struct profile_priv *pv = ctx;
    const char *s = pv->strings[value];
    return strncmp(s, key, len) == 0 && s[len] == '\0';
}

static const struct hashmap_type string_type = {NULL, string_eq};

/* The profile's copy of s (equal strings share one copy, so pointer equality
 * is string equality). NULL for NULL, and NULL with errno ENOMEM when out of
 * memory. */
const char *profile_intern(struct profile *p, const char *s)
{
    if (s == NULL)
        return NULL;
    struct profile_priv *pv = p->priv;
    size_t len = strlen(s);
    uint64_t v;
    if (hashmap_find(&pv->string_index, s, len, &v))
        return pv->strings[v];
    char **strings = profile_grow(pv->strings, &pv->strings_cap, pv->nstrings + 1, sizeof *strings);
    if (!strings)
        return NULL;
    pv->strings = strings;
    char *copy = strdup(s);
    if (!copy)
        return NULL;
    pv->strings[pv->nstrings] = copy;
    if (hashmap_put(&pv->string_index, copy, len, pv->nstrings) != 0) {
        free(copy);
        return NULL;
    }
    pv->nstrings++;
    return copy;
}

/* ---- growth helper ---------------------------------------------------------- */

/* array with room for need elements (doubling from 64), like realloc: on out
 * of memory NULL with errno ENOMEM, and array and *cap are left as they were
 * (the caller still owns array). Never aborts: see util/util.h. */
void *profile_grow(void *array, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return array;
    size_t ncap = *cap ? *cap : 64;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2)
            goto nomem;
        ncap *= 2;
    }
    if (elem && ncap > SIZE_MAX / elem)
        goto nomem;
    void *n = realloc(array, ncap * elem);
    if (!n)
        goto nomem;
    *cap = ncap;
    return n;
nomem:
    errno = ENOMEM;
    return NULL;
}

int profile_grow_to(void *arrayp, size_t *cap, size_t need, size_t elem)
{
    /* memcpy, not a void ** cast: arrayp points at a T *, which C does not
     * let us access through a void * lvalue. */
    void *array;
    memcpy(&array, arrayp, sizeof array);
    void *n = profile_grow(array, cap, need, elem);
    if (!n)
        return -1;
    memcpy(arrayp, &n, sizeof n);
    return 0;
}

/* ---- builders --------------------------------------------------------------- */

struct frame_key {
    const char *name, *module, *source_file;
    int line;
};

/* Hash the field values, not the struct (its padding is undefined). */
static uint64_t frame_hash(const void *key, size_t len, const void *ctx)
{
    (void)len;
    (void)ctx;
    const struct frame_key *k = key;
    uintptr_t parts[4] = {(uintptr_t)k->name, (uintptr_t)k->module, (uintptr_t)k->source_file, (uintptr_t)k->line};
    return hashmap_hash_bytes(parts, sizeof parts, 0);
}

static bool frame_eq(const void *key, size_t len, uint64_t value, const void *ctx)
{
    (void)len;
    const struct profile *p = ctx;
    const struct frame_key *k = key;
    const struct prof_frame *f = &p->frames[value];
    /* Interned strings: pointer equality is string equality. */
    return f->name == k->name && f->module == k->module && f->source_file == k->source_file &&
           f->line == k->line;
}

/* Stacks are keyed by their frame ids as bytes (len = 4 x nframes). */
static bool stack_eq(const void *key, size_t len, uint64_t value, const void *ctx)
{
    const struct profile *p = ctx;
    const struct prof_stack *s = &p->stacks[value];
    return s->nframes * sizeof s->frames[0] == len && (len == 0 || memcmp(s->frames, key, len) == 0);
}

/* Aggregated sample rows are keyed by (thread, stack, flags); the map keeps
 * the row index and reads the key back from the row. */
struct row_key {
    uint32_t thread, stack, flags;
};

static bool row_eq(const void *key, size_t len, uint64_t value, const void *ctx)
{
    (void)len;
    const struct profile *p = ctx;
    const struct row_key *k = key;
    const struct prof_sample *s = &p->samples[value];
    return s->thread == k->thread && s->stack == k->stack && s->flags == k->flags;
}

static const struct hashmap_type frame_type = {frame_hash, frame_eq};
static const struct hashmap_type stack_type = {NULL, stack_eq};
static const struct hashmap_type row_type = {NULL, row_eq};

struct profile *profile_new_empty(void)
{
    struct profile *p = calloc(1, sizeof *p);
    struct profile_priv *pv = calloc(1, sizeof *pv);
    if (!p || !pv) {
        free(p);
        free(pv);
        errno = ENOMEM;
        return NULL;
    }
    p->priv = pv;
    p->period_ns = 1000000;
    p->frequency_hz = 1000;
    p->exit_status = -1;
    p->timeline = true; /* until a row stands for more than one sample */
    /* The indexes read keys back from the profile's arrays (ctx). */
    hashmap_init(&pv->string_index, &string_type, pv);
    hashmap_init(&pv->frame_index, &frame_type, p);
    hashmap_init(&pv->stack_index, &stack_type, p);
    hashmap_init_u64(&pv->thread_index); /* pid << 32 | tid */
    hashmap_init(&pv->row_index, &row_type, p);
    return p;
}

uint32_t profile_add_frame(struct profile *p, const char *name, const char *module,
                           const char *source_file, int line, enum frame_kind kind)
{
    struct profile_priv *pv = p->priv;
    struct frame_key k = {profile_intern(p, name ? name : ""), profile_intern(p, module ? module : ""),
                          profile_intern(p, source_file), line};
    if (!k.name || !k.module || (source_file && !k.source_file))
        return UINT32_MAX; /* out of memory (errno ENOMEM) */
    uint64_t v;
    if (hashmap_find(&pv->frame_index, &k, sizeof k, &v))
        return (uint32_t)v;
    struct prof_frame *frames = profile_grow(p->frames, &pv->frames_cap, p->nframes + 1, sizeof *frames);
    if (!frames)
        return UINT32_MAX;
    p->frames = frames;
    p->frames[p->nframes] = (struct prof_frame){k.name, k.module, k.source_file, line, kind};
    if (hashmap_put(&pv->frame_index, &k, sizeof k, p->nframes) != 0)
        return UINT32_MAX; /* the frame written above is not counted: harmless */
    return (uint32_t)p->nframes++;
}

uint32_t profile_add_stack(struct profile *p, const uint32_t *frames, uint32_t nframes)
{
    struct profile_priv *pv = p->priv;
    size_t len = nframes * sizeof frames[0];
    uint64_t v;
    if (hashmap_find(&pv->stack_index, frames, len, &v))
        return (uint32_t)v;
    struct prof_stack *stacks = profile_grow(p->stacks, &pv->stacks_cap, p->nstacks + 1, sizeof *stacks);
    if (!stacks)
        return UINT32_MAX;
    p->stacks = stacks;
    uint32_t *copy = malloc(nframes ? len : sizeof *copy);
    if (!copy)
        return UINT32_MAX;
    if (nframes)
        memcpy(copy, frames, len);
    p->stacks[p->nstacks] = (struct prof_stack){nframes, copy};
    if (hashmap_put(&pv->stack_index, copy, len, p->nstacks) != 0) {
        free(copy);
        return UINT32_MAX;
    }
    return (uint32_t)p->nstacks++;
}

uint32_t profile_add_thread(struct profile *p, uint32_t pid, uint32_t tid, const char *name)
{
    struct profile_priv *pv = p->priv;
    uint64_t key = (uint64_t)pid << 32 | tid;
    uint64_t v;
    if (!hashmap_find_u64(&pv->thread_index, key, &v)) {
        struct prof_thread *threads = profile_grow(p->threads, &pv->threads_cap, p->nthreads + 1, sizeof *threads);
        if (!threads)
            return UINT32_MAX;
        p->threads = threads;
        memset(&p->threads[p->nthreads], 0, sizeof p->threads[0]);
        p->threads[p->nthreads].pid = pid;
        p->threads[p->nthreads].tid = tid;
        if (hashmap_find_or_add_u64(&pv->thread_index, key, p->nthreads, NULL) < 0)
            return UINT32_MAX;
        v = p->nthreads++;
    }
    if (name && name[0])
        snprintf(p->threads[v].name, sizeof p->threads[v].name, "%s", name);
    return (uint32_t)v;
}

int profile_add_sample(struct profile *p, uint64_t time_ns, uint32_t thread, uint32_t stack, uint32_t weight)
{
    struct profile_priv *pv = p->priv;
    struct prof_sample *samples = profile_grow(p->samples, &pv->samples_cap, p->nsamples + 1, sizeof *samples);
    if (!samples)
        return -1;
    p->samples = samples;
    p->samples[p->nsamples++] =
        (struct prof_sample){.time_ns = time_ns, .thread = thread, .stack = stack, .weight = weight, .count = 1};
    p->total_weight += weight;
    p->sample_count++;
    struct prof_thread *t = &p->threads[thread];
    if (t->samples == 0 || time_ns < t->first_ns)
        t->first_ns = time_ns;
    if (time_ns > t->last_ns)
        t->last_ns = time_ns;
    t->samples++;
    return 0;
}

int profile_add_sample_row(struct profile *p, uint64_t first_ns, uint64_t last_ns, uint32_t thread,
                           uint32_t stack, uint32_t flags, uint64_t weight, uint64_t count)
{
    struct profile_priv *pv = p->priv;
    struct row_key k = {thread, stack, flags};
    uint64_t v;
    /* A row whose weight or count would overflow its 32 bits is left as it
     * is and a new one started (the map then names the new one). */
    if (hashmap_find(&pv->row_index, &k, sizeof k, &v) && p->samples[v].weight + weight <= UINT32_MAX &&
        p->samples[v].count + count <= UINT32_MAX) {
        struct prof_sample *s = &p->samples[v];
        s->weight += (uint32_t)weight;
        s->count += (uint32_t)count;
        if (first_ns < s->time_ns)
            s->time_ns = first_ns;
        p->timeline = false;
    } else {
        if (weight > UINT32_MAX || count > UINT32_MAX) { /* a caller's bug: rows are cut before this */
            errno = EINVAL;
            return -1;
        }
        struct prof_sample *samples = profile_grow(p->samples, &pv->samples_cap, p->nsamples + 1, sizeof *samples);
        if (!samples)
            return -1;
        p->samples = samples;
        p->samples[p->nsamples] = (struct prof_sample){.time_ns = first_ns, .thread = thread, .stack = stack,
                                                       .weight = (uint32_t)weight, .flags = flags,
                                                       .count = (uint32_t)count};
        if (hashmap_put(&pv->row_index, &k, sizeof k, p->nsamples) != 0)
            return -1;
        p->nsamples++;
        if (count > 1)
            p->timeline = false;
    }
    p->total_weight += weight;
    p->sample_count += count;
    struct prof_thread *t = &p->threads[thread];
    if (t->samples == 0 || first_ns < t->first_ns)
        t->first_ns = first_ns;
    if (last_ns > t->last_ns)
        t->last_ns = last_ns;
    t->samples += count;
    return 0;
}

static int compare_samples(const void *a, const void *b)
{
    const struct prof_sample *x = a, *y = b;
    return x->time_ns < y->time_ns ? -1 : x->time_ns > y->time_ns;
}

void profile_sort_samples(struct profile *p)
{
    struct profile_priv *pv = p->priv;
    if (p->nsamples > 1)
        qsort(p->samples, p->nsamples, sizeof *p->samples, compare_samples);
    /* The row index names rows by position: sorted, it is wrong, and the
     * profile is complete, so it goes. */
    hashmap_free(&pv->row_index);
    hashmap_init(&pv->row_index, &row_type, p);
}

int profile_add_warning(struct profile *p, const char *fmt_text)
{
    struct profile_priv *pv = p->priv;
    char **warnings = profile_grow(p->warnings, &pv->warnings_cap, p->nwarnings + 1, sizeof *warnings);
    if (!warnings)
        return -1;
    p->warnings = warnings;
    char *copy = strdup(fmt_text);
    if (!copy)
        return -1;
    p->warnings[p->nwarnings++] = copy;
    return 0;
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
    prof_memory_free(p->memory); /* memory over time (analyze/memory.c) */
    free(p->dir);
    free(p->command);
    free(p->event);
    free(p->call_graph);
    if (pv) {
        for (size_t i = 0; i < pv->nstrings; i++)
            free(pv->strings[i]);
        free(pv->strings);
        hashmap_free(&pv->string_index);
        hashmap_free(&pv->frame_index);
        hashmap_free(&pv->stack_index);
        hashmap_free(&pv->thread_index);
        hashmap_free(&pv->row_index);
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
