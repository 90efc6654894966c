/*
 * sampler/common/python_code.c — what a captured frame's code object says:
 * file name, qualified name (co_name before 3.11), first line and the line of the sampled
 * instruction. Shared by the agent's writer thread and attach mode; both read
 * the target through their struct py_reader (process_vm_readv), so a code
 * object freed since the sample fails the read instead of crashing us.
 *
 * NOT HANDLER CODE: it mallocs the line table. The walk (python_walk.c) only
 * records addresses and a fingerprint; this runs later, and checks the
 * fingerprint so that an address reused by another code object is not given
 * the old one's names.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sampler/common/common.h"
#include "sampler/common/python_layout.h"

#define STR_MAX_CHARS 4096 /* longer names are not what a file or function name is: reused memory */
/* A str's or a line table's first bytes are read with its header, in the
 * same read: each read is a process_vm_readv, and in a recorded
 * torch_train.py the writer made ~4,200 of them a run, ~3.5 per code object
 * it named, mostly a header and then a short name or table. A read that
 * runs past the object's mapping fails as a whole, and is then made in two
 * as before. Where the reader has a vectored read, the three heads of a
 * code object named (file name, qualified name, line table) are one read:
 * two reads a code object, not four (the whole torch_train.py --steps 60
 * recording: 3,232 -> 2,406 process_vm_readv, strace -c). */
#define INLINE_BYTES 96
#define LINETABLE_INLINE_BYTES 512

static bool read_mem(const struct py_target *t, uint64_t addr, void *buf, size_t len)
{
    return len == 0 || t->mem.read(t->mem.ctx, addr, buf, len, 0);
}

/* ---- line tables kept per code object (struct py_line_cache) -------------
 * The writer meets a code object again at an instruction it has not seen
 * (the stream remembers lines per instruction): before, each such frame read
 * the code object's header, then its line table's head, then the rest of a
 * longer table, 2-3 process_vm_readv (~800 frames, ~12 us each, in a
 * torch_train.py run, most of them while torch is imported). A code
 * object's co_linetable never changes, and (address, fingerprint) is what
 * names one code object in the stream already (its PYCODE id), so a copy
 * answers for it. Bounded: emptied when LINE_CACHE_SLOTS * 3/4 objects or
 * LINE_CACHE_BYTES of tables are held. */
#define LINE_CACHE_SLOTS 4096 /* a power of two */
#define LINE_CACHE_BYTES (4u << 20)

struct line_entry {
    uint64_t code, fingerprint; /* code 0: empty */
    uint8_t *table;
    uint32_t size;
    int32_t first_line;
};

struct py_line_cache {
    size_t count, bytes;
    struct line_entry slot[LINE_CACHE_SLOTS];
};

struct py_line_cache *py_line_cache_new(void)
{
    return calloc(1, sizeof(struct py_line_cache));
}

static void line_cache_empty(struct py_line_cache *c)
{
    for (size_t i = 0; i < LINE_CACHE_SLOTS; i++)
        free(c->slot[i].table);
    memset(c, 0, sizeof *c);
}

void py_line_cache_free(struct py_line_cache *c)
{
    if (c)
        line_cache_empty(c);
    free(c);
}

/* The slot of (code, fingerprint): its entry, or the empty slot where it goes. */
static struct line_entry *line_slot(struct py_line_cache *c, uint64_t code, uint64_t fingerprint)
{
    uint64_t h = ((code >> 3) ^ fingerprint) * 0x9e3779b97f4a7c15ull;
    for (size_t j = (size_t)(h >> 40) & (LINE_CACHE_SLOTS - 1);; j = (j + 1) & (LINE_CACHE_SLOTS - 1)) {
        struct line_entry *e = &c->slot[j];
        if (e->code == 0 || (e->code == code && e->fingerprint == fingerprint))
            return e;
    }
}

static void line_cache_put(struct py_line_cache *c, const struct py_frame_ref *f, int first_line,
                           const uint8_t *table, size_t size)
{
    if (!c || f->code == 0 || size == 0 || size > LINE_CACHE_BYTES / 4)
        return;
    if ((c->count + 1) * 4 > LINE_CACHE_SLOTS * 3 || c->bytes + size > LINE_CACHE_BYTES)
        line_cache_empty(c);
    struct line_entry *e = line_slot(c, f->code, f->fingerprint);
    if (e->code != 0) /* kept already (a names call for an object known) */
        return;
    uint8_t *copy = malloc(size);
    if (!copy)
        return;
    memcpy(copy, table, size);
    *e = (struct line_entry){f->code, f->fingerprint, copy, (uint32_t)size, first_line};
    c->count++;
    c->bytes += size;
}

/* A non-ASCII compact str's code points (kind 1, 2 or 4 bytes each) as UTF-8,
 * read a chunk at a time so that the buffer stays small. */
static bool read_code_points(const struct py_target *t, uint64_t data, unsigned kind, uint64_t length, char *out,
                             size_t cap)
{
    uint8_t chunk[256];
    size_t per_chunk = sizeof chunk / kind, o = 0;
    for (uint64_t i = 0; i < length && o + 4 < cap; i += per_chunk) {
        size_t count = length - i < per_chunk ? (size_t)(length - i) : per_chunk;
        if (!read_mem(t, data + i * kind, chunk, count * kind))
            return false;
        for (size_t j = 0; j < count && o + 4 < cap; j++) {
            uint32_t cp = 0;
            memcpy(&cp, chunk + j * kind, kind); /* little-endian: the low bytes */
            o += python_utf8_put(cp, out + o);
        }
    }
    out[o] = '\0';
    return true;
}

/* The bytes read_str reads first at obj: the header and INLINE_BYTES more
 * (0: obj is no str pointer to read, or the layout's header is too big). */
static size_t str_head_bytes(const struct py_layout *L, uint64_t obj)
{
    size_t hbytes = (size_t)L->ascii_state + 4;
    if (obj == 0 || (obj & 7) || hbytes > 128 || hbytes < (size_t)L->ascii_length + 8 ||
        hbytes < (size_t)L->object_type + 8)
        return 0;
    return hbytes + INLINE_BYTES;
}

/* Reads a str object as UTF-8 into out (NUL-terminated, cut at cap). Only a
 * real compact str is accepted: a code object freed and reused between the
 * sample and now could point anywhere. pre: its first str_head_bytes bytes
 * when a vectored read brought them already, else NULL. */
static bool read_str(const struct py_target *t, uint64_t obj, const uint8_t *pre, char *out, size_t cap)
{
    const struct py_layout *L = t->layout;
    uint8_t buf[128 + INLINE_BYTES];
    size_t got = str_head_bytes(L, obj);
    if (got == 0)
        return false;
    size_t hbytes = got - INLINE_BYTES;
    const uint8_t *head = pre ? pre : buf;
    if (!pre && !read_mem(t, obj, buf, got)) {
        got = hbytes;
        if (!read_mem(t, obj, buf, hbytes))
            return false;
    }
    uint64_t type, length;
    uint32_t state;
    memcpy(&type, head + L->object_type, sizeof type);
    memcpy(&length, head + L->ascii_length, sizeof length);
    memcpy(&state, head + L->ascii_state, sizeof state);
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (type != t->unicode_type || !compact || length > STR_MAX_CHARS)
        return false;
    if (ascii) {
        size_t n = length < cap - 1 ? (size_t)length : cap - 1;
        if ((size_t)L->ascii_data + n <= got)
            memcpy(out, head + L->ascii_data, n);
        else if (!read_mem(t, obj + L->ascii_data, out, n))
            return false;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)out[i] >= 0x80 || out[i] == '\0')
                return false; /* not what an ASCII str holds: memory was reused */
        out[n] = '\0';
        return true;
    }
    if (kind != 1 && kind != 2 && kind != 4)
        return false;
    return read_code_points(t, obj + L->compact_data, kind, length, out, cap);
}

/* The bytes read_line reads first at linetable + bytes_size: ob_size, then
 * the table's first LINETABLE_INLINE_BYTES (0: not in one read). */
static size_t line_head_bytes(const struct py_layout *L, uint64_t linetable)
{
    if (linetable == 0 || (linetable & 7) || L->bytes_size < 0 || L->bytes_data < L->bytes_size + 8 ||
        L->bytes_data - L->bytes_size > 64)
        return 0;
    return (size_t)(L->bytes_data - L->bytes_size) + LINETABLE_INLINE_BYTES;
}

/* The line of f's instruction from co_linetable (a bytes object), or
 * first_line when the table cannot be read; the table is kept in t->lines.
 * pre: its first line_head_bytes bytes when a vectored read brought them
 * already, else NULL. */
static int read_line(const struct py_target *t, uint64_t linetable, const uint8_t *pre, int first_line,
                     const struct py_frame_ref *f)
{
    int32_t instr = f->instr;
    const struct py_layout *L = t->layout;
    uint64_t size = 0;
    /* ob_size and, after it, the table's first bytes */
    uint8_t buf[64 + LINETABLE_INLINE_BYTES];
    if (linetable == 0 || (linetable & 7))
        return first_line;
    size_t got = line_head_bytes(L, linetable);
    size_t skip = got ? got - LINETABLE_INLINE_BYTES : sizeof size;
    const uint8_t *head = pre ? pre : buf;
    if (!pre && (got == 0 || !read_mem(t, linetable + L->bytes_size, buf, got))) {
        got = sizeof size;
        if (!read_mem(t, linetable + L->bytes_size, buf, sizeof size))
            return first_line;
    }
    memcpy(&size, head, sizeof size);
    if (size == 0 || size >= (1u << 20))
        return first_line;
    if (got > sizeof size && skip + size <= got) {
        line_cache_put(t->lines, f, first_line, head + skip, size);
        return python_line_lookup(L->linetable_format, head + skip, size, first_line, instr);
    }
    int line = first_line;
    uint8_t *table = malloc(size);
    if (table && read_mem(t, linetable + L->bytes_data, table, size)) {
        line_cache_put(t->lines, f, first_line, table, size);
        line = python_line_lookup(L->linetable_format, table, size, first_line, instr);
    }
    free(table);
    return line;
}

unsigned py_readv_task(int task, const struct py_span *spans, unsigned n)
{
    struct iovec local[4], remote[4];
    if (n > 4)
        return 0;
    for (unsigned i = 0; i < n; i++) {
        local[i] = (struct iovec){spans[i].buf, spans[i].len};
        remote[i] = (struct iovec){(void *)(uintptr_t)spans[i].addr, spans[i].len};
    }
    long got = syscall(SYS_process_vm_readv, task, local, n, remote, n, 0);
    unsigned whole = 0;
    /* a partial read ends at an element: those before it are whole */
    for (size_t sum = 0; got > 0 && whole < n && sum + spans[whole].len <= (size_t)got; whole++)
        sum += spans[whole].len;
    return whole;
}

/* The heads read_str and read_line read first, for the file name, the
 * qualified name (names only) and the line table, in one vectored read
 * where the reader has one; a head not read whole there stays NULL and is
 * read as before (a head that runs past its object's mapping fails as a
 * whole, and is then read shorter). */
struct code_heads {
    uint8_t filename[128 + INLINE_BYTES], qualname[128 + INLINE_BYTES], linetable[64 + LINETABLE_INLINE_BYTES];
    const uint8_t *filename_pre, *qualname_pre, *linetable_pre;
};

static void read_heads(const struct py_target *t, bool names, uint64_t filename, uint64_t qualname, uint64_t linetable,
                       struct code_heads *h)
{
    h->filename_pre = h->qualname_pre = h->linetable_pre = NULL;
    if (!t->mem.readv)
        return;
    const struct py_layout *L = t->layout;
    struct py_span spans[3];
    const uint8_t **pre[3];
    unsigned n = 0;
    size_t len;
    if (names && (len = str_head_bytes(L, filename)) != 0) {
        spans[n] = (struct py_span){filename, h->filename, len};
        pre[n++] = &h->filename_pre;
    }
    if (names && (len = str_head_bytes(L, qualname)) != 0) {
        spans[n] = (struct py_span){qualname, h->qualname, len};
        pre[n++] = &h->qualname_pre;
    }
    if ((len = line_head_bytes(L, linetable)) != 0) {
        spans[n] = (struct py_span){linetable + (uint64_t)L->bytes_size, h->linetable, len};
        pre[n++] = &h->linetable_pre;
    }
    if (n < 2)
        return; /* one read either way */
    unsigned whole = t->mem.readv(t->mem.ctx, spans, n);
    for (unsigned i = 0; i < whole && i < n; i++)
        *pre[i] = spans[i].buf;
}

bool py_code_resolve(const struct py_target *t, const struct py_frame_ref *f, const struct py_code_names *names,
                     int *first_line_out, int *line_out)
{
    const struct py_layout *L = t->layout;
    uint8_t c[256];
    size_t cbytes = L ? py_code_header_bytes(L) : 0;
    if (!L || f->code == 0 || (f->code & 7) || cbytes > sizeof c)
        return false;
    if (!names && t->lines) {
        const struct line_entry *e = line_slot(t->lines, f->code, f->fingerprint);
        if (e->code != 0) {
            *first_line_out = e->first_line;
            *line_out = python_line_lookup(L->linetable_format, e->table, e->size, e->first_line, f->instr);
            return true;
        }
    }
    if (!read_mem(t, f->code, c, cbytes))
        return false;
    uint64_t type, name, filename, qualname, linetable;
    int32_t first_line;
    memcpy(&type, c + L->object_type, sizeof type);
    memcpy(&name, c + L->code_name, sizeof name);
    memcpy(&filename, c + L->code_filename, sizeof filename);
    /* Before 3.11 a code object has no co_qualname: its co_name is the best name there is. */
    memcpy(&qualname, c + (L->code_qualname != PY_ABSENT ? L->code_qualname : L->code_name), sizeof qualname);
    memcpy(&linetable, c + L->code_linetable, sizeof linetable);
    memcpy(&first_line, c + L->code_firstlineno, sizeof first_line);
    if (type != t->code_type || py_code_fingerprint(name, filename, first_line) != f->fingerprint)
        return false; /* the address now holds another code object (or none) */
    *first_line_out = first_line;
    struct code_heads h;
    read_heads(t, names != NULL, filename, qualname, linetable, &h);
    if (names && (!read_str(t, filename, h.filename_pre, names->filename, names->filename_cap) ||
                  !read_str(t, qualname, h.qualname_pre, names->qualname, names->qualname_cap)))
        return false;
    *line_out = read_line(t, linetable, h.linetable_pre, first_line, f);
    return true;
}
