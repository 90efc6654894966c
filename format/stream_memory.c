/*
 * format/stream_memory.c — the memory readings both samplers write (MEM_TICK,
 * MEM_LIMIT; docs/format.md "Memory"): the resident set from statm, page
 * faults and the peak from stat/status when read from outside, and the cgroup
 * memory limit.
 *
 * Why statm: it is the cheapest file that gives the resident set and its
 * anonymous/file split (resident - shared is the kernel's RssAnon, shared is
 * RssFile + RssShmem): one short line, no per-mapping walk, a few
 * microseconds, against /proc/self/status's ~50 lines. Libc only (compiled
 * into the agent); not signal-handler code.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/writer_internal.h"

int opr_memory_parse_statm(const char *text, struct opr_mem_tick *t)
{
    /* "size resident shared text lib data dt", in pages; strtoull rather
     * than sscanf: the agent parses this line at every writer period. */
    unsigned long long v[3];
    const char *p = text;
    for (int i = 0; i < 3; i++) {
        char *end;
        while (*p == ' ')
            p++;
        if (*p < '0' || *p > '9')
            return -1;
        v[i] = strtoull(p, &end, 10);
        p = end;
    }
    unsigned long long resident = v[1], shared = v[2];
    long page = sysconf(_SC_PAGESIZE);
    uint64_t ps = page > 0 ? (uint64_t)page : 4096;
    t->rss_bytes = resident * ps;
    t->file_bytes = (shared <= resident ? shared : resident) * ps;
    t->anon_bytes = t->rss_bytes - t->file_bytes;
    return 0;
}

int opr_memory_read_statm(const char *proc_dir, struct opr_mem_tick *t)
{
    char path[256], text[256];
    snprintf(path, sizeof path, "%s/statm", proc_dir);
    if (opr_read_small_file(path, text, sizeof text) <= 0)
        return -1;
    return opr_memory_parse_statm(text, t);
}

int opr_memory_read_faults(const char *proc_dir, struct opr_mem_tick *t)
{
    char path[256], text[1024];
    snprintf(path, sizeof path, "%s/stat", proc_dir);
    if (opr_read_small_file(path, text, sizeof text) <= 0)
        return -1;
    /* the command name may hold spaces and ')': fields count from the last ')' */
    const char *p = strrchr(text, ')');
    unsigned long long minflt, cminflt, majflt;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %llu %llu %llu", &minflt, &cminflt, &majflt) != 3)
        return -1;
    t->minflt = minflt;
    t->majflt = majflt;
    char status[4096];
    snprintf(path, sizeof path, "%s/status", proc_dir);
    if (opr_read_small_file(path, status, sizeof status) > 0) {
        const char *hwm = strstr(status, "\nVmHWM:");
        unsigned long long kb;
        if (hwm && sscanf(hwm + 7, " %llu", &kb) == 1)
            t->hwm_bytes = kb * 1024;
    }
    return 0;
}

/* A limit file's value in bytes; 0 for "max", v1's "unlimited" (a page-rounded
 * 2^63) or an unreadable file. */
static uint64_t read_limit_file(const char *path)
{
    char text[64];
    if (opr_read_small_file(path, text, sizeof text) <= 0 || strncmp(text, "max", 3) == 0)
        return 0;
    unsigned long long v = strtoull(text, NULL, 10);
    return v >= (1ull << 62) ? 0 : v;
}

/* The smallest nonzero limit of file name in cgroup rel and its parents under
 * the mount root; *high likewise for high_name (NULL: not read). */
static uint64_t smallest_up_the_tree(const char *root, const char *rel_in, const char *name, const char *high_name,
                                     uint64_t *high)
{
    char rel[1024];
    snprintf(rel, sizeof rel, "%s", rel_in);
    uint64_t best = 0;
    for (;;) {
        char file[1400];
        snprintf(file, sizeof file, "%s%s/%s", root, strcmp(rel, "/") ? rel : "", name);
        uint64_t v = read_limit_file(file);
        if (v && (!best || v < best))
            best = v;
        if (high_name) {
            snprintf(file, sizeof file, "%s%s/%s", root, strcmp(rel, "/") ? rel : "", high_name);
            uint64_t h = read_limit_file(file);
            if (h && (!*high || h < *high))
                *high = h;
        }
        char *slash = strrchr(rel, '/');
        if (!slash || slash == rel)
            break;
        *slash = '\0';
    }
    if (strcmp(rel, "/") != 0 && rel[0] == '/') { /* the root itself */
        char file[1400];
        snprintf(file, sizeof file, "%s/%s", root, name);
        uint64_t v = read_limit_file(file);
        if (v && (!best || v < best))
            best = v;
    }
    return best;
}

void opr_memory_read_limit(const char *proc_dir, struct opr_mem_limit *l, char *path, size_t pathlen)
{
    char file[256], cg[4096];
    l->limit_bytes = l->high_bytes = 0;
    l->version = 0;
    if (pathlen)
        path[0] = '\0';
    snprintf(file, sizeof file, "%s/cgroup", proc_dir);
    if (opr_read_small_file(file, cg, sizeof cg) <= 0)
        return;
    char *save = NULL;
    for (char *line = strtok_r(cg, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        const char *ctrl = c1 + 1, *rel = c2 + 1;
        uint64_t limit = 0, high = 0;
        uint32_t version = 0;
        if (ctrl[0] == '\0') { /* v2: the unified hierarchy */
            limit = smallest_up_the_tree("/sys/fs/cgroup", rel, "memory.max", "memory.high", &high);
            version = 2;
        } else if (strstr(ctrl, "memory")) { /* v1 memory controller */
            limit = smallest_up_the_tree("/sys/fs/cgroup/memory", rel, "memory.limit_in_bytes", NULL, &high);
            version = 1;
        } else {
            continue;
        }
        /* the smallest limit found wins; with none, the v1 memory controller
         * is the one that would limit (a hybrid machine's v2 has no memory) */
        bool better = l->version == 0 || (limit && (!l->limit_bytes || limit < l->limit_bytes)) ||
                      (!limit && !l->limit_bytes && version == 1);
        if (better) {
            l->version = version;
            l->limit_bytes = limit;
            l->high_bytes = high;
            if (pathlen)
                snprintf(path, pathlen, "%s", rel);
        }
    }
}

void opr_writer_memory_limit(struct opr_writer *w, const char *proc_dir, uint64_t time_ns)
{
    struct opr_mem_limit l = {.time_ns = time_ns};
    char path[1024];
    opr_memory_read_limit(proc_dir, &l, path, sizeof path);
    l.path_len = (uint32_t)strlen(path);
    opr_writer_emit(w, OPR_REC_MEM_LIMIT, &l, sizeof l, path, l.path_len);
}
