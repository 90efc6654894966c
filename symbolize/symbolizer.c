/*
 * symbolize/symbolizer.c — the symbolizer front end: processes and their
 * mappings, the module cache, the (pid, pc) result cache, problems and stats.
 * The ELF work itself is in elf_symbols.c (and eh_frame.c for the function
 * starts of PCs without a symbol).
 *
 * Module files are resolved lazily, at the first lookup that lands in one of
 * their mappings: a process maps hundreds of libraries and samples usually hit
 * a dozen, so stats and problems describe the modules lookups touched.
 *
 * Caching, from cheapest to most expensive:
 *   (pid, pc)           -> finished frame   (lookup cache)
 *   (path, recorded id) -> module           (one stat/open per library path)
 *   build-id, else path+size+mtime -> loaded module (one ELF read per file)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize/symbolize.h"
#include "symbolize/symbolize_internal.h"
#include "util/util.h"

/* ------------------------------------------------------------------------- */
/* Arena: the keys of the byte-keyed maps (util/hashmap keeps pointers)     */
/* ------------------------------------------------------------------------- */

struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    char data[];
};

static void *arena_alloc(struct arena_chunk **head, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    struct arena_chunk *c = *head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->next = *head;
        c->used = 0;
        c->cap = cap;
        *head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

static void arena_free(struct arena_chunk *c)
{
    while (c) {
        struct arena_chunk *n = c->next;
        free(c);
        c = n;
    }
}

/* ------------------------------------------------------------------------- */
/* Data model                                                                 */
/* ------------------------------------------------------------------------- */

/* MOD_UNREADABLE: root reading another user's result, and that user may not
 * read the file (file_access.c): it is not opened on their behalf. */
enum mod_status { MOD_OK, MOD_NO_SYMBOLS, MOD_MISSING, MOD_MISMATCH, MOD_UNREADABLE };

struct module {
    enum mod_status status;
    const char *path;        /* first recorded path that led here */
    struct elf_module *elf;  /* NULL for missing/mismatched */
    struct module *next_all; /* creation order, for stats/problems/free */
};

/* A recorded (path, build-id) pair; shared by every mapping of that file. */
struct modref {
    const char *path; /* as recorded */
    const char *base; /* what sym_frame.module shows */
    uint8_t bid[SYM_BUILD_ID_MAX];
    size_t bidlen;
    bool pseudo;      /* [heap], anonymous memory...: no file to read */
    bool resolved;
    struct module *mod;
};

struct mapping {
    uint64_t start, end, pgoff;
    uint64_t seq; /* insertion order: later mappings win on overlap */
    struct modref *ref;
};

struct proc {
    uint32_t pid;     /* the address-space id the caller gave */
    uint32_t os_pid;  /* the OS pid, for its perf map; 0: unknown */
    bool perf_map_tried;
    struct perf_map *perf_map;
    bool sorted;
    struct mapping *maps;
    size_t n, cap;
};

struct cache_ent {
    uint64_t addr;
    uint32_t pid;
    int8_t rc;
    struct sym_frame f;
};

struct symbolizer {
    char *result_dir;
    struct arena_chunk *arena;
    /* byte keys copied into the arena -> string, modref, module, proc */
    struct hashmap strings, refs, modules, procs;
    struct module *all, **all_tail;
    struct proc **proc_list;
    size_t nprocs, procs_cap;
    /* the lookup cache: results in an array, indexed by (pid, addr) */
    struct cache_ent *cache;
    size_t cache_cap, cache_n;
    struct hashmap cache_index;
    uint64_t seq;
    struct symbolizer_stats stats;
    struct file_reader reader; /* whose behalf files named by the result are read on */
};

/* (pid, addr) -> index into cache (defined with the lookup, below). */
static const struct hashmap_type cache_key_type;

/* ------------------------------------------------------------------------- */

static const char *intern(struct symbolizer *s, const char *str, size_t len)
{
    const char *v = hashmap_find_ptr(&s->strings, str, len);
    if (v)
        return v;
    char *p = arena_alloc(&s->arena, len + 1);
    if (!p)
        return NULL;
    memcpy(p, str, len);
    p[len] = '\0';
    if (hashmap_put_ptr(&s->strings, p, len, p) != 0)
        return NULL;
    return p;
}

/* Copies key into the arena and inserts it. */
static int put_key(struct symbolizer *s, struct hashmap *m, const void *key, size_t klen, void *val)
{
    void *k = arena_alloc(&s->arena, klen ? klen : 1);
    if (!k)
        return -1;
    memcpy(k, key, klen);
    return hashmap_put_ptr(m, k, klen, val);
}

struct symbolizer *symbolizer_new(const char *result_dir)
{
    struct symbolizer *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (result_dir && !(s->result_dir = strdup(result_dir))) {
        free(s);
        return NULL;
    }
    s->all_tail = &s->all;
    file_reader_init(&s->reader, result_dir);
    s->stats.reads_as_owner = s->reader.as_owner;
    s->stats.owner_uid = s->reader.uid;
    hashmap_init(&s->strings, NULL, NULL);
    hashmap_init(&s->refs, NULL, NULL);
    hashmap_init(&s->modules, NULL, NULL);
    hashmap_init(&s->procs, NULL, NULL);
    hashmap_init(&s->cache_index, &cache_key_type, s);
    return s;
}

void symbolizer_free(struct symbolizer *s)
{
    if (!s)
        return;
    for (struct module *m = s->all, *n; m; m = n) {
        n = m->next_all;
        elf_module_free(m->elf);
        free(m);
    }
    for (size_t i = 0; i < s->nprocs; i++) {
        free(s->proc_list[i]->maps);
        perf_map_free(s->proc_list[i]->perf_map);
        free(s->proc_list[i]);
    }
    free(s->proc_list);
    hashmap_free(&s->strings);
    hashmap_free(&s->refs);
    hashmap_free(&s->modules);
    hashmap_free(&s->procs);
    hashmap_free(&s->cache_index);
    free(s->cache);
    arena_free(s->arena);
    file_reader_free(&s->reader);
    free(s->result_dir);
    free(s);
}

/* ------------------------------------------------------------------------- */
/* Mappings                                                                   */
/* ------------------------------------------------------------------------- */

static bool is_pseudo_path(const char *path)
{
    return path[0] != '/' || strcmp(path, "//anon") == 0 || strncmp(path, "/memfd:", 7) == 0 ||
           strncmp(path, "/dev/zero", 9) == 0 || strncmp(path, "/SYSV", 5) == 0;
}

static struct modref *get_modref(struct symbolizer *s, const char *path, const uint8_t *bid,
                                 size_t bidlen)
{
    size_t plen = strlen(path);
    if (bidlen > sizeof ((struct modref *)0)->bid)
        bidlen = 0; /* not a build-id we can compare: treat as unrecorded */
    char stackkey[512];
    size_t klen = plen + 1 + bidlen;
    char *key = klen <= sizeof stackkey ? stackkey : malloc(klen);
    if (!key)
        return NULL;
    memcpy(key, path, plen + 1);
    if (bidlen)
        memcpy(key + plen + 1, bid, bidlen);
    struct modref *r = hashmap_find_ptr(&s->refs, key, klen);
    if (!r) {
        r = arena_alloc(&s->arena, sizeof *r);
        if (r) {
            memset(r, 0, sizeof *r);
            r->path = intern(s, path, plen);
            r->pseudo = is_pseudo_path(path) && strcmp(path, "[vdso]") != 0;
            if (!r->path || put_key(s, &s->refs, key, klen, r) != 0) {
                r = NULL;
            } else {
                const char *slash = strrchr(path, '/');
                if (plen == 0)
                    r->base = intern(s, "[anon]", 6);
                else if (path[0] == '/' && slash && slash[1] && !r->pseudo)
                    r->base = intern(s, slash + 1, strlen(slash + 1));
                else
                    r->base = r->path;
                if (!r->base)
                    r = NULL;
                else {
                    if (bidlen)
                        memcpy(r->bid, bid, bidlen);
                    r->bidlen = bidlen;
                }
            }
        }
    }
    if (key != stackkey)
        free(key);
    return r;
}

static struct proc *get_proc(struct symbolizer *s, uint32_t pid, bool create)
{
    struct proc *p = hashmap_find_ptr(&s->procs, &pid, sizeof pid);
    if (p || !create)
        return p;
    if (s->nprocs == s->procs_cap) {
        size_t cap = s->procs_cap ? s->procs_cap * 2 : 16;
        struct proc **l = realloc(s->proc_list, cap * sizeof *l);
        if (!l)
            return NULL;
        s->proc_list = l;
        s->procs_cap = cap;
    }
    p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->pid = pid;
    if (put_key(s, &s->procs, &pid, sizeof pid, p) != 0) {
        free(p);
        return NULL;
    }
    s->proc_list[s->nprocs++] = p;
    return p;
}

int symbolizer_add_mapping(struct symbolizer *s, uint32_t pid, uint64_t start, uint64_t end,
                           uint64_t pgoff, const char *path, const uint8_t *build_id,
                           size_t build_id_len)
{
    if (!s || end <= start)
        return -1;
    if (!path)
        path = "";
    struct modref *r = get_modref(s, path, build_id, build_id ? build_id_len : 0);
    struct proc *p = get_proc(s, pid, true);
    if (!r || !p)
        return -1;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 32;
        struct mapping *m = realloc(p->maps, cap * sizeof *m);
        if (!m)
            return -1;
        p->maps = m;
        p->cap = cap;
    }
    p->maps[p->n++] = (struct mapping){start, end, pgoff, s->seq++, r};
    p->sorted = false;
    /* Results cached before this mapping existed may now be wrong. Mappings
     * normally all arrive before the first lookup, so this is rare. */
    if (s->cache_n) {
        hashmap_clear(&s->cache_index);
        s->cache_n = 0;
    }
    return 0;
}

int symbolizer_set_os_pid(struct symbolizer *s, uint32_t asid, uint32_t os_pid)
{
    struct proc *p = s ? get_proc(s, asid, true) : NULL;
    if (!p)
        return -1;
    if (p->os_pid != os_pid) { /* a perf map read for another pid is not this one's */
        perf_map_free(p->perf_map);
        p->perf_map = NULL;
        p->perf_map_tried = false;
    }
    p->os_pid = os_pid;
    return 0;
}

static int cmp_mapping(const void *a, const void *b)
{
    const struct mapping *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static const struct mapping *find_mapping(struct proc *p, uint64_t addr)
{
    if (p->n == 0) /* a process known only by its os pid: maps is NULL */
        return NULL;
    if (!p->sorted) {
        qsort(p->maps, p->n, sizeof *p->maps, cmp_mapping);
        size_t w = 0; /* same start: keep the latest (a re-mmap replaced it) */
        for (size_t i = 0; i < p->n; i++) {
            if (w && p->maps[w - 1].start == p->maps[i].start)
                w--;
            p->maps[w++] = p->maps[i];
        }
        p->n = w;
        p->sorted = true;
    }
    size_t lo = sym_last_at_or_below(p->maps, p->n, sizeof *p->maps, offsetof(struct mapping, start), addr);
    if (lo == p->n)
        return NULL;
    /* Live mappings never overlap; stale ones from before a munmap might, so
     * look a few entries back before giving up. */
    for (size_t k = 0; k < 8; k++) {
        if (addr < p->maps[lo].end)
            return &p->maps[lo];
        if (lo == 0)
            break;
        lo--;
    }
    return NULL;
}

/* ------------------------------------------------------------------------- */
/* Module resolution                                                          */
/* ------------------------------------------------------------------------- */

static struct module *new_module(struct symbolizer *s, enum mod_status st, const char *path,
                                 struct elf_module *elf)
{
    struct module *m = calloc(1, sizeof *m);
    if (!m) {
        elf_module_free(elf);
        return NULL;
    }
    m->status = st;
    m->path = path;
    m->elf = elf;
    *s->all_tail = m;
    s->all_tail = &m->next_all;
    s->stats.modules++;
    if (st == MOD_NO_SYMBOLS)
        s->stats.modules_without_symbols++;
    else if (st == MOD_MISSING)
        s->stats.modules_missing++;
    else if (st == MOD_MISMATCH)
        s->stats.modules_mismatched++;
    else if (st == MOD_UNREADABLE)
        s->stats.modules_unreadable++;
    return m;
}

/* Missing and mismatched modules are keyed by path, so each is reported
 * once per path however many processes or build-ids refer to it. */
static struct module *problem_module(struct symbolizer *s, enum mod_status st, const char *path)
{
    size_t plen = strlen(path);
    char *key = malloc(plen + 1);
    if (!key)
        return NULL;
    key[0] = st == MOD_MISSING ? 'M' : st == MOD_UNREADABLE ? 'U' : 'X';
    memcpy(key + 1, path, plen);
    struct module *m = hashmap_find_ptr(&s->modules, key, plen + 1);
    if (!m && (m = new_module(s, st, path, NULL)) != NULL)
        put_key(s, &s->modules, key, plen + 1, m);
    free(key);
    return m;
}

static struct module *resolve(struct symbolizer *s, struct modref *r)
{
    if (r->resolved)
        return r->mod;
    r->resolved = true;
    if (r->pseudo)
        return NULL;
    uint8_t key[1 + SYM_BUILD_ID_MAX + 64];
    if (r->bidlen) { /* already loaded from another path with this build-id? */
        key[0] = 'B';
        memcpy(key + 1, r->bid, r->bidlen);
        if ((r->mod = hashmap_find_ptr(&s->modules, key, 1 + r->bidlen)) != NULL)
            return r->mod;
    }
    char vdso[4096];
    const char *open_path = r->path;
    if (strcmp(r->path, "[vdso]") == 0) {
        if (!s->result_dir)
            return r->mod = problem_module(s, MOD_MISSING, r->path);
        snprintf(vdso, sizeof vdso, "%s/vdso.so", s->result_dir);
        open_path = vdso;
    }
    struct elf_ident id;
    char undeleted[4096];
    if (elf_read_ident(open_path, &id) != 0) {
        if (errno == EACCES && s->reader.as_owner)
            return r->mod = problem_module(s, MOD_UNREADABLE, r->path);
        /* "/x/libfoo.so (deleted)": try the path itself, the build-id check
         * below says whether it is still the same file. */
        size_t len = strlen(open_path);
        bool retry = len > 10 && len < sizeof undeleted &&
                     strcmp(open_path + len - 10, " (deleted)") == 0;
        if (retry) {
            memcpy(undeleted, open_path, len - 10);
            undeleted[len - 10] = '\0';
            open_path = undeleted;
        }
        /* A result carried to another machine may bring its binaries along:
         * <result>/binaries/<basename> (the build-id check below still
         * decides whether it is the recorded file). */
        bool found = retry && elf_read_ident(open_path, &id) == 0;
        const char *base = strrchr(r->path, '/');
        if (!found && s->result_dir && base &&
            (size_t)snprintf(undeleted, sizeof undeleted, "%s/binaries/%s", s->result_dir, base + 1) <
                sizeof undeleted &&
            elf_read_ident(undeleted, &id) == 0) {
            open_path = undeleted;
            found = true;
        }
        if (!found && errno == EACCES && s->reader.as_owner)
            return r->mod = problem_module(s, MOD_UNREADABLE, r->path);
        if (!found)
            return r->mod = problem_module(s, MOD_MISSING, r->path);
    }
    if (r->bidlen && (id.build_id_len != r->bidlen || memcmp(id.build_id, r->bid, r->bidlen)))
        return r->mod = problem_module(s, MOD_MISMATCH, r->path);
    size_t klen;
    if (id.build_id_len) {
        key[0] = 'B';
        memcpy(key + 1, id.build_id, id.build_id_len);
        klen = 1 + id.build_id_len;
    } else {
        klen = (size_t)snprintf((char *)key, sizeof key, "P%llu:%lld.%ld:",
                                (unsigned long long)id.size, (long long)id.mtime_sec,
                                id.mtime_nsec);
    }
    size_t plen = id.build_id_len ? 0 : strlen(open_path);
    char *full = malloc(klen + plen);
    if (!full)
        return NULL;
    memcpy(full, key, klen);
    memcpy(full + klen, open_path, plen);
    r->mod = hashmap_find_ptr(&s->modules, full, klen + plen);
    if (!r->mod) {
        struct elf_module *em = elf_module_load(open_path, &id);
        if (em) {
            enum mod_status st = elf_module_symbol_count(em) ? MOD_OK : MOD_NO_SYMBOLS;
            r->mod = new_module(s, st, r->path, em);
            if (r->mod)
                put_key(s, &s->modules, full, klen + plen, r->mod);
        }
    }
    free(full);
    return r->mod;
}

/* ------------------------------------------------------------------------- */
/* Lookup                                                                     */
/* ------------------------------------------------------------------------- */

/* The cache's index reads (pid, addr) back from the entry it points to. */
struct cache_key {
    uint64_t addr;
    uint32_t pid;
};

static uint64_t cache_key_hash(const void *key, size_t len, const void *ctx)
{
    (void)len;
    (void)ctx;
    const struct cache_key *k = key;
    return hashmap_hash_u64(k->addr ^ ((uint64_t)k->pid * 0x9E3779B97F4A7C15ull));
}

static bool cache_key_equal(const void *key, size_t len, uint64_t value, const void *ctx)
{
    (void)len;
    const struct symbolizer *s = ctx;
    const struct cache_key *k = key;
    return s->cache[value].pid == k->pid && s->cache[value].addr == k->addr;
}

static const struct hashmap_type cache_key_type = {cache_key_hash, cache_key_equal};

static const struct cache_ent *cache_find(const struct symbolizer *s, uint32_t pid, uint64_t addr)
{
    struct cache_key k = {addr, pid};
    uint64_t v;
    return hashmap_find(&s->cache_index, &k, sizeof k, &v) ? &s->cache[v] : NULL;
}

/* Caching is an optimization: when memory runs out the result is simply not
 * cached, and lookups stay correct. */
static void cache_store(struct symbolizer *s, uint32_t pid, uint64_t addr,
                        const struct sym_frame *f, int rc)
{
    if (s->cache_n == s->cache_cap) {
        size_t cap = s->cache_cap ? s->cache_cap * 2 : 512;
        struct cache_ent *c = realloc(s->cache, cap * sizeof *c);
        if (!c)
            return;
        s->cache = c;
        s->cache_cap = cap;
    }
    struct cache_key k = {addr, pid};
    s->cache[s->cache_n] = (struct cache_ent){addr, pid, (int8_t)rc, *f};
    if (hashmap_put(&s->cache_index, &k, sizeof k, s->cache_n) == 0)
        s->cache_n++;
}

/* The process's perf map, read at the first lookup that needs it: the copy
 * in the result dir when there is one (a result moved off the machine),
 * else the one the process left in /tmp. */
static const struct perf_map *proc_perf_map(struct symbolizer *s, struct proc *p)
{
    if (p->perf_map_tried || p->os_pid == 0)
        return p->perf_map;
    p->perf_map_tried = true;
    char path[4096];
    file_access_enter(); /* perf maps too are read only if the result's owner may */
    if (s->result_dir &&
        (size_t)snprintf(path, sizeof path, "%s/perf-%u.map", s->result_dir, p->os_pid) < sizeof path)
        p->perf_map = perf_map_load(path);
    if (!p->perf_map) {
        snprintf(path, sizeof path, "/tmp/perf-%u.map", p->os_pid);
        p->perf_map = perf_map_load(path);
    }
    file_access_leave();
    if (p->perf_map)
        s->stats.perf_maps++;
    return p->perf_map;
}

/* Names addr from the perf map when no file-backed mapping covers it (mp is
 * NULL or anonymous memory): a perf map never overrides a library's own
 * symbols. 0 when named. */
static int resolve_from_perf_map(struct symbolizer *s, struct proc *p, const struct mapping *mp,
                                 uint64_t addr, struct sym_frame *f)
{
    if (!p || (mp && !mp->ref->pseudo))
        return -1;
    const struct perf_map *pm = proc_perf_map(s, p);
    uint64_t start;
    const char *name = pm ? perf_map_find(pm, addr, &start) : NULL;
    if (!name || !(f->function = intern(s, name, strlen(name))))
        return -1;
    f->module = f->module_path = intern(s, "[perf map]", 10);
    /* JIT code has no module base: offsets are the addresses themselves. */
    f->module_offset = addr;
    f->function_start = start;
    f->symbol_offset = addr - start;
    s->stats.perf_map_names++;
    return 0;
}

static int resolve_frame(struct symbolizer *s, uint32_t pid, uint64_t addr, struct sym_frame *f)
{
    struct proc *p = get_proc(s, pid, false);
    const struct mapping *mp = p ? find_mapping(p, addr) : NULL;
    if ((!mp || mp->ref->pseudo) && resolve_from_perf_map(s, p, mp, addr, f) == 0)
        return 0;
    if (!mp)
        return -1;
    struct modref *r = mp->ref;
    f->module = r->base;
    f->module_path = r->path;
    uint64_t off = addr - mp->start + mp->pgoff;
    f->module_offset = off; /* without usable program headers: the file offset */
    struct module *m = resolve(s, r);
    if (!m || !m->elf)
        return -1;
    struct elf_module *em = m->elf;
    uint64_t vaddr;
    bool translated = elf_module_translate(em, off, &vaddr);
    if (translated)
        f->module_offset = vaddr;
    elf_module_source_line(em, f->module_offset, &f->source_file, &f->line);
    long idx = elf_module_find_symbol(em, f->module_offset);
    if (idx < 0) {
        /* No symbol (stripped static function): its FDE still gives where the
         * function starts, so all its PCs can be shown as one. FDEs are in
         * ELF vaddrs, hence only for a translated offset. */
        uint64_t start;
        if (translated && elf_module_cfi_function(em, f->module_offset, &start)) {
            f->function_start = start;
            f->function_start_from_cfi = true;
        }
        return -1;
    }
    f->function = elf_module_symbol_name(em, (size_t)idx);
    f->function_start = elf_module_symbol(em, (size_t)idx)->addr;
    f->symbol_offset = f->module_offset - f->function_start;
    return f->function ? 0 : -1;
}

int symbolizer_lookup(struct symbolizer *s, uint32_t pid, uint64_t pc, bool is_return_address,
                      struct sym_frame *out)
{
    memset(out, 0, sizeof *out);
    if (!s)
        return -1;
    s->stats.lookups++;
    file_reader_use(&s->reader); /* the rule for files this lookup may open */
    /* A return address points after the call; the call itself is at pc-1. */
    uint64_t addr = is_return_address && pc > 0 ? pc - 1 : pc;
    const struct cache_ent *e = cache_find(s, pid, addr);
    int rc;
    if (e) {
        *out = e->f;
        rc = e->rc;
    } else {
        rc = resolve_frame(s, pid, addr, out);
        if (rc != 0) /* function_start (from CFI) may still be known */
            out->function = NULL, out->symbol_offset = 0;
        cache_store(s, pid, addr, out, rc);
    }
    if (rc != 0)
        s->stats.unknown++;
    return rc;
}

/* ------------------------------------------------------------------------- */
/* Reporting                                                                  */
/* ------------------------------------------------------------------------- */

void symbolizer_for_each_problem(struct symbolizer *s,
                                 void (*fn)(const char *path, const char *problem, void *arg),
                                 void *arg)
{
    if (!s || !fn)
        return;
    struct hashmap seen; /* paths reported (keys: the modules' own paths) */
    hashmap_init(&seen, NULL, NULL);
    for (struct module *m = s->all; m; m = m->next_all) {
        if (m->status == MOD_OK)
            continue;
        size_t len = strlen(m->path);
        if (hashmap_find(&seen, m->path, len, NULL))
            continue; /* once per path, even if it had two problems */
        /* Out of memory here only risks naming a path twice: go on. */
        (void)hashmap_put_ptr(&seen, m->path, len, m);
        const char *what = m->status == MOD_MISSING      ? "missing"
                           : m->status == MOD_MISMATCH   ? "build-id mismatch"
                           : m->status == MOD_UNREADABLE ? "not read: the result's owner may not read it"
                                                         : "no symbols";
        fn(m->path, what, arg);
    }
    hashmap_free(&seen);
}

void symbolizer_get_stats(const struct symbolizer *s, struct symbolizer_stats *out)
{
    if (!s) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = s->stats;
}
