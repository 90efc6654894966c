/*
 * symbolize/perf_map.c — names of JIT and trampoline code from a process's
 * perf map (/tmp/perf-PID.map), the text file CPython 3.12+ writes under
 * `-X perf` (PYTHONPERFSUPPORT=1) and many JITs write too. One entry a line:
 *
 *     START SIZE NAME        (START and SIZE in hex, NAME the rest of the line)
 *     7fc4a34c37bc b py::spin_a:/work/tests/workloads/py_split.py
 *
 * The file is untrusted: anyone can write to /tmp, and a stale file of an
 * earlier process with the same PID may lie there. So it is only opened as a
 * regular file (no FIFO to hang on, no symlink followed), read up to a size
 * limit, every line is parsed strictly (a bad line is skipped, never guessed
 * at), names are cut to a length and made printable UTF-8, and the
 * symbolizer asks it only about addresses that no file-backed mapping
 * covers: a wrong file can at worst name anonymous code wrongly, never hide
 * a library function.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolize/symbolize_internal.h"

/* A perf map of a big PyTorch program holds ~100 k trampolines (~8 MB);
 * larger files are read up to this size, the rest ignored. */
#define PERF_MAP_MAX_BYTES (256u << 20)
/* Longer names are cut (the report's frame names hold 511 bytes). */
#define PERF_MAP_MAX_NAME 400

struct perf_map_entry {
    uint64_t start, end;
    const char *name; /* into the map's buffer */
    size_t seq;       /* line order: a later line wins over an earlier one at the same start */
};

struct perf_map {
    char *buf;
    struct perf_map_entry *entries;
    size_t n;
};

/* Reads the whole regular file at path (at most PERF_MAP_MAX_BYTES) into a
 * NUL-terminated buffer. NULL with errno set otherwise. */
static char *read_regular_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    size_t cap = st.st_size > PERF_MAP_MAX_BYTES ? PERF_MAP_MAX_BYTES : (size_t)st.st_size;
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return NULL;
    }
    size_t got = 0;
    while (got < cap) { /* the writer may still be appending: read what is there */
        ssize_t r = read(fd, buf + got, cap - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    *len = got;
    return buf;
}

/* Parses a hex number (optional 0x) at *p; false when there is none or it
 * does not fit in 64 bits. Leaves *p after it. */
static bool parse_hex(char **p, uint64_t *out)
{
    char *s = *p;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2;
    uint64_t v = 0;
    int digits = 0;
    for (;; s++, digits++) {
        int d;
        if (*s >= '0' && *s <= '9')
            d = *s - '0';
        else if (*s >= 'a' && *s <= 'f')
            d = *s - 'a' + 10;
        else if (*s >= 'A' && *s <= 'F')
            d = *s - 'A' + 10;
        else
            break;
        if (digits >= 16)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    if (digits == 0)
        return false;
    *p = s;
    *out = v;
    return true;
}

/* Length of the valid UTF-8 sequence at s (1-4), 0 when it is not one. */
static size_t utf8_sequence(const unsigned char *s)
{
    size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
                                : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || (n == 2 && s[0] < 0xC2) || (n == 4 && s[0] > 0xF4))
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return n;
}

/* Cuts name to PERF_MAP_MAX_NAME bytes (on a character boundary) and
 * replaces control characters and bytes that are not UTF-8 with '?', so the
 * name is safe in every output format. */
static void clean_name(char *name)
{
    unsigned char *s = (unsigned char *)name;
    size_t i = 0;
    while (s[i]) {
        size_t n = utf8_sequence(s + i);
        if (n == 0 || (n == 1 && (s[i] < 0x20 || s[i] == 0x7F))) {
            s[i] = '?';
            n = 1;
        }
        if (i + n > PERF_MAP_MAX_NAME)
            break;
        i += n;
    }
    s[i] = '\0';
}

/* One line "START SIZE NAME" into *e; false for a malformed line. */
static bool parse_line(char *line, struct perf_map_entry *e)
{
    char *p = line;
    uint64_t start, size;
    if (!parse_hex(&p, &start) || (*p != ' ' && *p != '\t'))
        return false;
    while (*p == ' ' || *p == '\t')
        p++;
    if (!parse_hex(&p, &size) || (*p != ' ' && *p != '\t'))
        return false;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t len = strlen(p);
    while (len && (p[len - 1] == '\r' || p[len - 1] == ' ' || p[len - 1] == '\t'))
        p[--len] = '\0';
    if (size == 0 || start + size < start || len == 0)
        return false;
    clean_name(p);
    e->start = start;
    e->end = start + size;
    e->name = p;
    return true;
}

static int cmp_entry(const void *a, const void *b)
{
    const struct perf_map_entry *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

struct perf_map *perf_map_load(const char *path)
{
    size_t len;
    char *buf = read_regular_file(path, &len);
    if (!buf)
        return NULL;
    /* At most one entry per 6 bytes ("1 1 x\n"): a bound for the array. */
    size_t cap = len / 6 + 1, n = 0;
    struct perf_map_entry *entries = malloc(cap * sizeof *entries);
    struct perf_map *m = malloc(sizeof *m);
    if (!entries || !m) {
        free(entries);
        free(m);
        free(buf);
        return NULL;
    }
    char *line = buf;
    while (*line && n < cap) {
        char *nl = strchr(line, '\n');
        if (!nl) /* a last line without its newline may be half written */
            break;
        *nl = '\0';
        if (parse_line(line, &entries[n])) {
            entries[n].seq = n;
            n++;
        }
        line = nl + 1;
    }
    qsort(entries, n, sizeof *entries, cmp_entry);
    size_t w = 0; /* same start: the later line re-used the address */
    for (size_t i = 0; i < n; i++) {
        if (w && entries[w - 1].start == entries[i].start)
            w--;
        entries[w++] = entries[i];
    }
    m->buf = buf;
    m->entries = entries;
    m->n = w;
    return m;
}

void perf_map_free(struct perf_map *m)
{
    if (!m)
        return;
    free(m->entries);
    free(m->buf);
    free(m);
}

size_t perf_map_size(const struct perf_map *m) { return m ? m->n : 0; }

const char *perf_map_find(const struct perf_map *m, uint64_t addr, uint64_t *start)
{
    if (!m)
        return NULL;
    size_t lo = sym_last_at_or_below(m->entries, m->n, sizeof *m->entries, offsetof(struct perf_map_entry, start), addr);
    if (lo == m->n)
        return NULL;
    /* Entries do not overlap in a well-formed map; in a damaged one an
     * earlier, longer entry may still cover addr: look a few back. */
    for (size_t k = 0; k < 4; k++) {
        if (addr < m->entries[lo].end) {
            if (start)
                *start = m->entries[lo].start;
            return m->entries[lo].name;
        }
        if (lo == 0)
            break;
        lo--;
    }
    return NULL;
}
