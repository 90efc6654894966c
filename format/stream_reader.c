/*
 * format/stream_reader.c — the one reader of stream files (docs/format.md).
 *
 * A stream is untrusted input: the process may have been killed mid-write,
 * the result copied incompletely, or the file be something else entirely.
 * This file owns the checks every consumer needs (header, record sizes,
 * 8-byte alignment, truncation) so that a handler only ever sees a record
 * whose body lies inside the buffer and is at least as long as it asked for.
 * What a record means is the handler's business; the reader knows no record
 * body.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/format.h"

int opr_reader_on(struct opr_reader *r, uint32_t type, size_t min_body, opr_record_fn fn, void *arg)
{
    if (type >= OPR_REC_TYPE_LIMIT || !fn) {
        errno = EINVAL;
        return -1;
    }
    if (r->on[type].fn) {
        errno = EEXIST;
        return -1;
    }
    r->on[type] = (struct opr_record_handler){fn, arg, min_body};
    return 0;
}

int opr_open_regular(const char *path, struct stat *st)
{
    /* A result directory is untrusted: O_NONBLOCK so that a FIFO in it cannot
     * block open for ever, O_NOFOLLOW so that a planted link cannot make us
     * read another file, and only a regular file is read (a device would
     * never end). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        int e = errno;
        if (!S_ISREG(st->st_mode))
            e = S_ISDIR(st->st_mode) ? EISDIR : EINVAL;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int opr_stream_read_file(const char *path, char **buf, size_t *size)
{
    *buf = NULL;
    *size = 0;
    struct stat st;
    int fd = opr_open_regular(path, &st);
    if (fd < 0)
        return -1;
    size_t want = (size_t)st.st_size;
    char *b = malloc(want ? want : 1);
    if (!b) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    /* A file still being written (or shrunk) reads short: keep what came,
     * the record checks below then report the truncation. */
    size_t got = 0;
    while (got < want) {
        ssize_t n = read(fd, b + got, want - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    *buf = b;
    *size = got;
    return 0;
}

int opr_stream_check_header(const char *buf, size_t size, struct opr_file_header *h, char *why, size_t whylen)
{
    if (size < sizeof *h) {
        snprintf(why, whylen, "%zu bytes, shorter than a stream header (the process ended before writing)", size);
        return -1;
    }
    memcpy(h, buf, sizeof *h);
    if (memcmp(h->magic, OPR_FILE_MAGIC, 8) != 0 || h->header_size < sizeof *h || h->header_size > size) {
        snprintf(why, whylen, "not an opprof sample stream (bad magic)");
        return -1;
    }
    if (h->version != OPR_FORMAT_VERSION) {
        snprintf(why, whylen, "stream format version %u, expected %d", h->version, OPR_FORMAT_VERSION);
        return -1;
    }
    return 0;
}

static void tell(void (*fn)(void *, const char *), void *ctx, const char *what)
{
    if (fn)
        fn(ctx, what);
}

int opr_stream_read_records(const struct opr_reader *r, const char *buf, size_t size, size_t header_size)
{
    char what[160];
    uint32_t prev_type = 0;
    size_t off = header_size;
    while (off < size) {
        struct opr_record_header rh;
        if (size - off < sizeof rh) {
            snprintf(what, sizeof what, "truncated at byte %zu of %zu (inside a record header)", off, size);
            tell(r->stopped, r->ctx, what);
            return 1;
        }
        memcpy(&rh, buf + off, sizeof rh);
        /* size counts the header and the padding to 8 bytes: anything else
         * means we lost the framing, and every later byte is suspect. */
        if (rh.size < sizeof rh || (rh.size & 7) != 0 || rh.size > size - off) {
            snprintf(what, sizeof what, "%s at byte %zu of %zu", rh.size > size - off ? "truncated" : "corrupt record",
                     off, size);
            tell(r->stopped, r->ctx, what);
            return 1;
        }
        struct opr_record rec = {rh.type, prev_type, buf + off + sizeof rh, rh.size - sizeof rh, off};
        off += rh.size;
        const struct opr_record_handler *h = rh.type < OPR_REC_TYPE_LIMIT ? &r->on[rh.type] : NULL;
        if (!h || !h->fn) {
            prev_type = rh.type; /* a newer record type: skipped */
            continue;
        }
        if (rec.len < h->min_body) {
            /* Too short to hold its own struct: reading it would run past
             * its end. It does not count as the previous record either. */
            snprintf(what, sizeof what, "record of type %u too short at byte %zu", rh.type, rec.off);
            tell(r->skipped, r->ctx, what);
            continue;
        }
        prev_type = rh.type;
        if (h->fn(r->ctx, h->arg, &rec) != 0)
            return -1;
    }
    return 0;
}

/* ---- SAMPLE_RUN entries ------------------------------------------------------ */

/* One unsigned LEB128 number of at most max_bits; false when cut short or
 * longer. */
static bool read_uleb(struct opr_sample_run_cursor *c, unsigned max_bits, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; c->at < c->end && shift < max_bits; shift += 7) {
        unsigned char b = *c->at++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            if (max_bits < 64 && x >> max_bits)
                return false;
            *v = x;
            return true;
        }
    }
    return false;
}

void opr_sample_run_begin(struct opr_sample_run_cursor *c, const struct opr_record *rec)
{
    struct opr_sample_run h;
    memcpy(&h, rec->body, sizeof h);
    c->at = (const unsigned char *)rec->body + sizeof h;
    c->end = (const unsigned char *)rec->body + rec->len;
    c->left = h.count;
    c->time_ns = h.base_time_ns;
    c->tid = 0;
}

int opr_sample_run_next(struct opr_sample_run_cursor *c, struct opr_sample *s, uint32_t *py_plus1)
{
    if (c->left == 0)
        return 0;
    uint64_t dt, tid, stack, py, wf;
    if (!read_uleb(c, 64, &dt) || !read_uleb(c, 32, &tid) || !read_uleb(c, 32, &stack) || !read_uleb(c, 32, &py) ||
        !read_uleb(c, 32, &wf) || (tid == 0 && c->tid == 0)) {
        c->left = 0;
        return -1;
    }
    c->left--;
    /* zigzag: even = forward, odd = back; unsigned wrap-around is defined */
    c->time_ns += (dt & 1) ? ~(dt >> 1) : dt >> 1;
    if (tid)
        c->tid = (uint32_t)tid;
    *s = (struct opr_sample){c->time_ns, c->tid, (uint32_t)stack, (uint32_t)wf >> 24,
                             (uint32_t)wf & OPR_SAMPLE_SHORT_MAX_WEIGHT};
    *py_plus1 = (uint32_t)py;
    return 1;
}
