/*
 * tests/unit/unwind_cache_files.c — part of the unwind_cfi program: the
 * unwind cache's files (sampler/agent/unwind_cache.c) as a load finds them.
 * A load sets a file's access time (the trimming's order) when it is an hour
 * old or more and leaves a more recent one; a file whose rule indexes and
 * buckets point far past their arrays is mapped (rows are not checked on
 * loading) and its lookups still stay inside the block (the walk finds no
 * rule); a file with a register the walk does not know, or cut short, is
 * refused and removed.
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sampler/agent/unwind_table.h"
#include "tests/unit/check.h"

int check_cache_files(int cd, const char *dir, struct unwind_table *t, uint64_t c, uint64_t s);

/* A cache file's bytes, changed by `damage`, written under `name`. */
static void write_damaged(const char *dir, const char *from, const char *name, void (*damage)(uint8_t *, size_t))
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, from);
    FILE *f = fopen(path, "rb");
    static uint8_t bytes[1 << 16];
    size_t n = f ? fread(bytes, 1, sizeof bytes, f) : 0;
    if (f)
        fclose(f);
    damage(bytes, n);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && n > 0 && write(fd, bytes, n) == (ssize_t)n, "cache: could not write %s", path);
    if (fd >= 0)
        close(fd);
}

static const struct unwind_table *damage_of; /* the table the damaged files came from */
static void rows_past_their_arrays(uint8_t *b, size_t n)
{
    size_t rules_at, buckets_at, rows_at = sizeof(struct unwind_table) + damage_of->nrows * sizeof(uint32_t);
    unwind_table_layout(damage_of->nrows, damage_of->nrules, damage_of->nbuckets, &rules_at, &buckets_at);
    memset(b + rows_at, 0xff, damage_of->nrows * sizeof(uint16_t)); /* every row: rule 65535 */
    memset(b + buckets_at, 0xff, n - buckets_at);                   /* row 2^32 - 1 */
}
static void unknown_register(uint8_t *b, size_t n)
{
    (void)n;
    size_t rules_at, buckets_at;
    unwind_table_layout(damage_of->nrows, damage_of->nrules, damage_of->nbuckets, &rules_at, &buckets_at);
    b[rules_at + sizeof(struct unwind_rule) + offsetof(struct unwind_rule, cfa_reg)] = 0xff; /* rules[1] */
}

/* Whether a load set path's times itself (futimens changes the inode's
 * change time; the kernel's own access-time update on a read does not),
 * after its access and modification times were set to `ago` seconds before
 * now; -1 when the load failed or a time could not be read or set. */
static int load_set_times(int cd, const char *dir, const char *name, uint64_t base, long ago)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct timespec now;
    struct stat before, after;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0)
        return -1;
    const struct timespec times[2] = {{now.tv_sec - ago, 0}, {now.tv_sec - ago, 0}};
    if (utimensat(AT_FDCWD, path, times, 0) != 0 || stat(path, &before) != 0)
        return -1;
    struct unwind_table *mapped = unwind_cache_load(cd, name, base);
    if (!mapped)
        return -1;
    unwind_table_free(mapped);
    if (stat(path, &after) != 0)
        return -1;
    return after.st_ctim.tv_sec != before.st_ctim.tv_sec || after.st_ctim.tv_nsec != before.st_ctim.tv_nsec;
}

/* cd is the open cache directory `dir`, holding t stored as "t.t3" (removed
 * here); the fixture's module maps t, its code at c, the "rbp frame" stack
 * at s. Returns the failures. */
int check_cache_files(int cd, const char *dir, struct unwind_table *t, uint64_t c, uint64_t s)
{
    struct unwind_module *m = &unwind_indexes[0].mod[0];
    CHECK(load_set_times(cd, dir, "t.t3", t->base, 2 * 3600) == 1,
          "cache: a load left a 2-hour-old access time as it was");
    CHECK(load_set_times(cd, dir, "t.t3", t->base, 600) == 0, "cache: a load set a 10-minute-old access time again");
    damage_of = t;
    write_damaged(dir, "t.t3", "rows.t3", rows_past_their_arrays);
    struct unwind_table *mapped = unwind_cache_load(cd, "rows.t3", t->base);
    CHECK(mapped != NULL, "cache: a file with bad rows is refused (only rules and sizes are checked on loading)");
    if (mapped) {
        atomic_store(&m->table, mapped);
        uint64_t pcs[16];
        unsigned n = 0;
        bool truncated;
        enum unwind_result r = unwind_table_walk(c + 0x10, s, s + 8 * 8, pcs, 16, &n, &truncated);
        CHECK(r == UNWIND_FAIL_RULE && n == 1 && pcs[0] == c + 0x10,
              "cache: rows past their arrays: result %d with %u frames, expected no rule after the first", r, n);
        unwind_table_free(mapped);
    }
    atomic_store(&m->table, t);
    write_damaged(dir, "t.t3", "reg.t3", unknown_register);
    char path[512];
    snprintf(path, sizeof path, "%s/reg.t3", dir);
    CHECK(unwind_cache_load(cd, "reg.t3", t->base) == NULL && access(path, F_OK) != 0,
          "cache: a rule with an unknown register was taken or its file kept");
    snprintf(path, sizeof path, "%s/t.t3", dir);
    CHECK(truncate(path, (off_t)t->map_bytes - 1) == 0 && unwind_cache_load(cd, "t.t3", t->base) == NULL &&
              access(path, F_OK) != 0,
          "cache: a file cut short was taken or kept");
    snprintf(path, sizeof path, "%s/rows.t3", dir);
    unlink(path);
    return failures;
}
