/*
 * tests/unit/phdr_snapshot.c — agent_phdr.c's snapshot of the loaded
 * objects, which the unwinder walks inside the handler instead of glibc's
 * list, after dlopen and dlclose of real libraries. Each snapshot must hold
 * what glibc's list holds then, in its order: every object's load bias,
 * program headers (byte for byte, from the copy) and build-id. A snapshot
 * copies an object's headers and build-id from the snapshot before when the
 * object is the one that was at its position and nothing was unloaded
 * since: after a dlopen only the new object is read from its image (the
 * build-id stand-in below counts the reads), after a dlclose all are.
 *
 * Standalone (no CUnit): agent_phdr.c linked directly, its two
 * dependencies stood in for here. The build-id stand-in returns the
 * object's load bias as its id, so a copied id can be told from another
 * object's.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "sampler/agent/agent.h"
#include "tests/unit/check.h"

struct agent_writer_counts agent_writer_counts;
static unsigned build_id_reads;

unsigned agent_object_build_id(const struct dl_phdr_info *info, uint8_t out[OPR_BUILD_ID_MAX])
{
    build_id_reads++;
    memcpy(out, &info->dlpi_addr, sizeof info->dlpi_addr);
    return sizeof info->dlpi_addr;
}

#define MAX_OBJECTS 512
struct object {
    uint64_t addr;
    const ElfW(Phdr) *phdr;
    int phnum;
};
struct list {
    uint64_t zero; /* first: the handler's dl_iterate_phdr reads a PC from the data's first word (none) */
    struct object o[MAX_OBJECTS];
    size_t n;
};

static int note(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct list *l = arg;
    if (l->n < MAX_OBJECTS)
        l->o[l->n++] = (struct object){info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum};
    return 0;
}

/* A snapshot now (as the writer takes one after a dlopen; dlclose takes its
 * own), then the snapshot against glibc's list. reads_want: build-ids read
 * from the images by that snapshot, -1: any. */
static void compare(const char *step, bool refresh, int reads_want)
{
    build_id_reads = 0;
    if (refresh)
        agent_phdr_refresh();
    unsigned reads = build_id_reads;
    static struct list glibc, snap;
    glibc = (struct list){.n = 0};
    snap = (struct list){.n = 0};
    dl_iterate_phdr(note, &glibc); /* outside the handler: glibc's */
    agent_phdr_enter_handler();
    dl_iterate_phdr(note, &snap); /* inside: the snapshot */
    agent_phdr_leave_handler();
    CHECK(snap.n == glibc.n, "%s: %zu objects in the snapshot, %zu in glibc's list", step, snap.n, glibc.n);
    for (size_t i = 0; i < snap.n && i < glibc.n; i++) {
        const struct object *s = &snap.o[i], *g = &glibc.o[i];
        CHECK(s->addr == g->addr && s->phnum == g->phnum &&
                  memcmp(s->phdr, g->phdr, (size_t)g->phnum * sizeof *g->phdr) == 0,
              "%s: object %zu is %#llx (%d headers) in the snapshot, %#llx (%d) in glibc's list, or its headers differ",
              step, i, (unsigned long long)s->addr, s->phnum, (unsigned long long)g->addr, g->phnum);
        for (int j = 0; j < g->phnum; j++) { /* its build-id, asked by an address of its first segment */
            if (g->phdr[j].p_type != PT_LOAD)
                continue;
            uint8_t id[OPR_BUILD_ID_MAX];
            uint64_t want = g->addr;
            int len = agent_phdr_build_id(g->addr + g->phdr[j].p_vaddr, id);
            CHECK(len == (int)sizeof want && memcmp(id, &want, sizeof want) == 0,
                  "%s: object %zu (%#llx): the snapshot's build-id is another object's", step, i,
                  (unsigned long long)g->addr);
            break;
        }
    }
    CHECK(reads_want < 0 || reads == (unsigned)reads_want, "%s: %u build-ids read from the images, want %d", step,
          reads, reads_want);
}

static void *load(const char *name)
{
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, "dlopen %s: %s", name, dlerror());
    return h;
}

int main(void)
{
    compare("first snapshot", true, -1);
    size_t at_start = 0;
    {
        struct list l = {.n = 0};
        dl_iterate_phdr(note, &l);
        at_start = l.n;
    }
    compare("nothing changed", true, 0);
    void *z = load("libz.so.1");
    compare("after dlopen libz", true, 1);
    void *uuid = load("libuuid.so.1");
    compare("after dlopen libuuid", true, 1);
    if (z)
        dlclose(z); /* its own snapshot, from the images: not the last object, the ones after it move up */
    compare("after dlclose libz", false, -1);
    compare("after dlclose libz, again", true, 0);
    z = load("libz.so.1");
    compare("after dlopen libz again", true, 1);
    if (uuid)
        dlclose(uuid);
    if (z)
        dlclose(z);
    compare("after dlclose of both", true, 0);
    struct list l = {.n = 0};
    dl_iterate_phdr(note, &l);
    CHECK(l.n == at_start, "%zu objects at the end, %zu at the start", l.n, at_start);
    printf("phdr_snapshot: %s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
