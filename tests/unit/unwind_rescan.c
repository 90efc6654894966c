/*
 * tests/unit/unwind_rescan.c — part of the unwind_cfi program: the module
 * index the writer rescans after dlopen and dlclose (unwind_build.c), which
 * reuses what an object's program headers said at the last scan while the
 * loader has unloaded nothing. After each step of loading and unloading
 * real libraries the published index must hold exactly the objects a fresh
 * read of every object's headers gives (text range and .eh_frame_hdr),
 * including a library loaded at the place in the loader's list (and
 * perhaps the address) of one unloaded since the last scan, which the
 * reuse must not take for the old object.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/agent/unwind_table.h"
#include "tests/unit/check.h"

int check_rescan(void);

struct text {
    uint64_t lo, hi, hdr;
};

/* Every object's text from its headers, read here independently of the
 * agent's scan. */
static int add_text(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct {
        struct text t[UNWIND_MAX_MODULES];
        size_t n;
    } *all = arg;
    uint64_t lo = UINT64_MAX, hi = 0, hdr = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uint64_t a = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            lo = a < lo ? a : lo;
            hi = a + ph->p_memsz > hi ? a + ph->p_memsz : hi;
        }
    }
    for (int i = 0; i < info->dlpi_phnum; i++) { /* .eh_frame_hdr, when a loaded segment holds it */
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_GNU_EH_FRAME)
            continue;
        uint64_t at = info->dlpi_addr + ph->p_vaddr;
        for (int j = 0; j < info->dlpi_phnum; j++) {
            const ElfW(Phdr) *l = &info->dlpi_phdr[j];
            uint64_t a = info->dlpi_addr + l->p_vaddr;
            if (l->p_type == PT_LOAD && at >= a && at < a + l->p_memsz)
                hdr = at;
        }
    }
    if (hi > lo && all->n < UNWIND_MAX_MODULES)
        all->t[all->n++] = (struct text){lo, hi, hdr};
    return 0;
}

static int by_lo(const void *pa, const void *pb)
{
    const struct text *a = pa, *b = pb;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Rescans and compares the published index with a fresh read. */
static void rescan_and_compare(const char *step)
{
    static struct {
        struct text t[UNWIND_MAX_MODULES];
        size_t n;
    } want;
    unwind_rescan(false);
    want.n = 0;
    dl_iterate_phdr(add_text, &want);
    qsort(want.t, want.n, sizeof want.t[0], by_lo);
    int cur = atomic_load(&unwind_index_current);
    CHECK(cur >= 0, "rescan %s: no index published", step);
    if (cur < 0)
        return;
    const struct unwind_index *ix = &unwind_indexes[cur];
    CHECK(ix->count == want.n, "rescan %s: %zu modules in the index, %zu objects with code", step, ix->count, want.n);
    for (size_t i = 0; i < ix->count && i < want.n; i++) {
        const struct unwind_module *m = &ix->mod[i];
        CHECK(m->lo == want.t[i].lo && m->hi == want.t[i].hi && m->eh_frame_hdr == want.t[i].hdr,
              "rescan %s: module %zu is [%#llx, %#llx) hdr %#llx, its object [%#llx, %#llx) hdr %#llx", step, i,
              (unsigned long long)m->lo, (unsigned long long)m->hi, (unsigned long long)m->eh_frame_hdr,
              (unsigned long long)want.t[i].lo, (unsigned long long)want.t[i].hi, (unsigned long long)want.t[i].hdr);
    }
}

/* dlopen, with the library's name in the failure */
static void *load(const char *name)
{
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, "rescan: dlopen %s: %s", name, dlerror());
    return h;
}

int check_rescan(void)
{
    rescan_and_compare("at start");
    rescan_and_compare("with nothing changed");
    void *z = load("libz.so.1");
    rescan_and_compare("after dlopen libz");
    void *uuid = load("libuuid.so.1");
    rescan_and_compare("after dlopen libuuid");
    if (z)
        dlclose(z); /* not the last: the objects after it move up */
    rescan_and_compare("after dlclose libz");
    z = load("libz.so.1");
    rescan_and_compare("after dlopen libz again");
    /* unloaded, and another loaded at its place in the loader's list,
     * between two scans: that position is another object now */
    if (z)
        dlclose(z);
    void *m = load("libm.so.6");
    rescan_and_compare("after dlclose libz and dlopen libm, one scan");
    for (void **h = (void *[]){m, uuid}, **end = h + 2; h < end; h++)
        if (*h)
            dlclose(*h);
    rescan_and_compare("after dlclose of both");
    return failures;
}
