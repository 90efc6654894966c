/*
 * tests/integration/failing_malloc.c — an LD_PRELOAD shim for tests only:
 * with OPPROF_TEST_FAIL_ALLOC_AFTER=N, the first N calls of malloc, calloc,
 * realloc (and the few other allocators below) succeed and every later one
 * returns NULL with errno ENOMEM. Without the variable it only passes calls
 * through. With OPPROF_TEST_COUNT_ALLOC=FILE it writes the number of calls
 * made to FILE at exit, which is how test_out_of_memory.sh learns the range
 * of N to sweep.
 *
 * With OPPROF_TEST_FAIL_ALLOC_SCOPE=exe, only calls made by the main
 * executable's own code are counted and failed (strdup's and strndup's
 * count as their caller's). Why: libdw (elfutils), which opprof links for
 * line tables, does not return out of memory to its caller but exits
 * ("libdw: Cannot allocate memory") or aborts, so failing its allocations
 * tests elfutils, not opprof; and libc's own (stdio buffers, opendir) fail
 * as ordinary errors. opprof's code is all in the executable (static
 * libtool convenience libraries).
 *
 * Built by test_out_of_memory.sh with $CC (-shared -fPIC -ldl), so it is not
 * part of any installed binary.
 *
 * The real functions come from dlsym(RTLD_NEXT), not __libc_malloc: under
 * ASan that is ASan's allocator, and memory must be freed by the allocator
 * that gave it. dlsym itself may call calloc before it has answered, so
 * those early calls are served from a static arena that is never freed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);

static long fail_after = -1; /* -1: never fail */
static int exe_only;         /* OPPROF_TEST_FAIL_ALLOC_SCOPE=exe */
static atomic_long calls;
static int resolving;

/* The main executable's executable segments, for exe_only. */
static struct {
    uintptr_t lo, hi;
} exe_text[8];
static int nexe_text = -1; /* -1: not looked up yet */

static int find_exe(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    /* The first object dl_iterate_phdr reports is the main program. */
    for (int i = 0; i < info->dlpi_phnum && nexe_text < 8; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            exe_text[nexe_text].lo = info->dlpi_addr + ph->p_vaddr;
            exe_text[nexe_text].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
            nexe_text++;
        }
    }
    return 1; /* stop after the first */
}

/* Whether a call from caller is one this run counts. */
static int counted(const void *caller)
{
    if (!exe_only)
        return 1;
    if (nexe_text < 0) {
        nexe_text = 0;
        dl_iterate_phdr(find_exe, NULL);
    }
    for (int i = 0; i < nexe_text; i++)
        if ((uintptr_t)caller >= exe_text[i].lo && (uintptr_t)caller < exe_text[i].hi)
            return 1;
    return 0;
}

/* For dlsym's own allocations while the real functions are being looked up. */
static _Alignas(16) char boot_arena[16384];
static size_t boot_used;

static int in_boot(const void *p)
{
    return (const char *)p >= boot_arena && (const char *)p < boot_arena + sizeof boot_arena;
}

static void *boot_alloc(size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (boot_used + n > sizeof boot_arena)
        return NULL;
    void *p = boot_arena + boot_used;
    boot_used += n;
    return p; /* static storage: already zero */
}

static void resolve(void)
{
    if (real_malloc || resolving)
        return;
    resolving = 1;
    real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
    real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    resolving = 0;
}

/* The settings are read in a constructor, not at the first malloc: under
 * ASan the first one comes from ASan's own start-up, before getenv works.
 * Nothing is counted or failed before (armed): the executable's code has
 * not run yet then. */
static int armed;

__attribute__((constructor)) static void read_settings(void)
{
    const char *s = getenv("OPPROF_TEST_FAIL_ALLOC_AFTER");
    if (s && *s)
        fail_after = strtol(s, NULL, 10);
    s = getenv("OPPROF_TEST_FAIL_ALLOC_SCOPE");
    exe_only = s && strcmp(s, "exe") == 0;
    armed = 1;
}

/* Whether this call (made from caller) is to fail: counts every call that
 * counted() keeps once resolved. */
static int should_fail(const void *caller)
{
    if (!armed || !counted(caller))
        return 0;
    long n = atomic_fetch_add(&calls, 1);
    if (fail_after >= 0 && n >= fail_after) {
        errno = ENOMEM;
        return 1;
    }
    return 0;
}

static void *malloc_from(size_t n, const void *caller)
{
    resolve();
    if (!real_malloc)
        return boot_alloc(n);
    return should_fail(caller) ? NULL : real_malloc(n);
}

void *malloc(size_t n)
{
    return malloc_from(n, __builtin_return_address(0));
}

void *calloc(size_t a, size_t b)
{
    resolve();
    if (!real_calloc)
        return b && a > SIZE_MAX / b ? NULL : boot_alloc(a * b);
    return should_fail(__builtin_return_address(0)) ? NULL : real_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
    resolve();
    if (in_boot(p)) { /* never freed: copy out what may have been there */
        size_t avail = (size_t)(boot_arena + sizeof boot_arena - (char *)p);
        void *q = malloc(n);
        if (q)
            memcpy(q, p, n < avail ? n : avail);
        return q;
    }
    if (!real_realloc)
        return NULL;
    /* realloc(p, 0) frees: not an allocation that can fail. */
    if (p && n == 0)
        return real_realloc(p, n);
    return should_fail(__builtin_return_address(0)) ? NULL : real_realloc(p, n);
}

void free(void *p)
{
    if (!p || in_boot(p))
        return;
    resolve();
    if (real_free)
        real_free(p);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    resolve();
    if (!real_posix_memalign)
        return ENOMEM;
    return should_fail(__builtin_return_address(0)) ? ENOMEM : real_posix_memalign(out, align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    resolve();
    if (!real_aligned_alloc)
        return NULL;
    return should_fail(__builtin_return_address(0)) ? NULL : real_aligned_alloc(align, n);
}

/* strdup and strndup: glibc's call its own malloc internally (not through
 * the PLT), so they are counted here. */
char *strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc_from(n, __builtin_return_address(0));
    return d ? memcpy(d, s, n) : NULL;
}

char *strndup(const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    char *d = malloc_from(n + 1, __builtin_return_address(0));
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

__attribute__((destructor)) static void report_count(void)
{
    long n = (long)atomic_load(&calls); /* before fopen's own allocations */
    const char *path = getenv("OPPROF_TEST_COUNT_ALLOC");
    if (!path || !*path)
        return;
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "%ld\n", n);
    fclose(f);
}
