/*
 * format/stream_writer.c — the stream writer's framing and its id tables.
 *
 * Records are appended to one buffer and handed to ops.write when it is full
 * or the caller flushes, so a record is never split across two writes and a
 * stream cut short (disk full, a killed process) ends at a record boundary as
 * often as possible. Each distinct native chain, Python code object and
 * Python chain is written once (STACK, PYCODE, PYSTACK) and referred to by id
 * afterwards, and samples are packed into SAMPLE_RUN records: that is what
 * keeps a sample at ~10 bytes on disk.
 *
 * The records read from /proc (PROCESS, THREAD, MAP) are in stream_process.c.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format/writer_internal.h"

/* A gap this long since the last maps read lets an unknown PC trigger another:
 * new code (dlopen, JIT) is found quickly, but garbage PCs from a broken
 * unwind cannot make the writer re-read the maps constantly. */
#define MAPS_REREAD_NS 50000000ull

uint64_t writer_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void *writer_grow(void *array, size_t *cap, size_t index, size_t elem_size, size_t first_cap)
{
    if (index < *cap)
        return array;
    size_t grown = *cap ? *cap * 2 : first_cap;
    while (grown <= index)
        grown *= 2;
    void *p = realloc(array, grown * elem_size);
    if (p)
        *cap = grown;
    return p;
}

/* Copies s into out (cap bytes, NUL-terminated); "" for NULL. */
static void copy_text(char *out, size_t cap, const char *s)
{
    size_t n = s ? strnlen(s, cap - 1) : 0;
    memcpy(out, s ? s : "", n);
    out[n] = '\0';
}

struct opr_writer *opr_writer_new(const struct opr_writer_config *config)
{
    struct opr_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->buf = malloc(WRITER_BUFFER_SIZE);
    if (!w->buf) {
        free(w);
        return NULL;
    }
    w->ops = config->ops;
    copy_text(w->proc_dir, sizeof w->proc_dir, config->proc_dir);
    copy_text(w->result_dir, sizeof w->result_dir, config->result_dir);
    copy_text(w->unreadable_thread_name, sizeof w->unreadable_thread_name, config->unreadable_thread_name);
    w->name_unreadable_threads = config->unreadable_thread_name != NULL;
    w->classic_records = config->classic_records;
    return w;
}

static void free_ids(struct writer_ids *ids)
{
    chain_trie_clear(&ids->stack_trie); /* first: they hold the tables' copies */
    chain_trie_clear(&ids->py_stack_trie);
    id_table_clear(&ids->stacks);
    id_table_clear(&ids->py_codes);
    id_table_clear(&ids->py_lines);
    id_table_clear(&ids->py_stacks);
    id_table_clear(&ids->py_key_stacks);
}

static void clear_id_tables(struct opr_writer *w)
{
    free_ids(&w->ids);
    w->py_key_hits = w->py_key_misses = w->py_frames_reused = 0;
    w->py_prev_n = 0; /* py_chain's ids were the cleared tables' */
}

/* Freeing the tables entry by entry writes to nearly every page that holds
 * them, and in a fork child each such page is first copied from the
 * parent's: a PyTorch parent's tables cost each forked child (a DataLoader
 * worker) most of its ~25 ms of set-up. Let go of as they are, they stay
 * pages shared with the parent, and reachable (from w), so that a leak
 * checker does not report them. Out of memory: freed as before. */
static void let_go_of_id_tables(struct opr_writer *w)
{
    struct writer_forked_ids *f = malloc(sizeof *f);
    if (!f) {
        clear_id_tables(w);
        return;
    }
    *f = (struct writer_forked_ids){.older = w->forked_ids, .ids = w->ids};
    w->forked_ids = f;
    memset(&w->ids, 0, sizeof w->ids);
    clear_id_tables(w); /* now empty: the counts and the chain cache's state */
}

void opr_writer_reset(struct opr_writer *w)
{
    let_go_of_id_tables(w);
    writer_forget_process(w);
    w->len = 0;
    w->run_count = 0;
    w->run_len = 0;
    w->bytes = 0;
    w->records_at = 0;
    w->unwritten_samples = 0;
    w->write_failed = false;
    w->maps_full_reads = 0; /* the cost record counts this stream's reads */
    w->maps_queries = 0;
}

void opr_writer_free(struct opr_writer *w)
{
    if (!w)
        return;
    clear_id_tables(w);
    while (w->forked_ids) {
        struct writer_forked_ids *f = w->forked_ids;
        w->forked_ids = f->older;
        free_ids(&f->ids);
        free(f);
    }
    writer_free_process(w);
    free(w->py_line_values);
    free(w->py_key_stack_ids);
    free(w->buf);
    free(w);
}

/* ---- framing --------------------------------------------------------------- */

void opr_writer_begin(struct opr_writer *w, uint32_t pid, uint32_t ppid, uint64_t start_ns, uint64_t period_ns)
{
    w->pid = pid;
    w->ppid = ppid;
    struct opr_file_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, OPR_FILE_MAGIC, 8);
    h.version = OPR_FORMAT_VERSION;
    h.header_size = sizeof h;
    h.pid = pid;
    h.ppid = ppid;
    h.start_ns = start_ns;
    h.period_ns = period_ns;
    if (w->len + sizeof h > WRITER_BUFFER_SIZE)
        opr_writer_flush(w);
    memcpy(w->buf + w->len, &h, sizeof h);
    w->len += sizeof h;
    w->records_at = w->len;
}

/* SAMPLE records in buf that end past byte `written`: what a short write lost. */
static uint64_t samples_past(const struct opr_writer *w, size_t written)
{
    uint64_t n = 0;
    for (size_t at = w->records_at; at + sizeof(struct opr_record_header) <= w->len;) {
        struct opr_record_header h;
        memcpy(&h, w->buf + at, sizeof h);
        if (h.size < sizeof h)
            break; /* cannot happen: emit frames every record */
        if ((h.type == OPR_REC_SAMPLE || h.type == OPR_REC_SAMPLE_SHORT) && at + h.size > written)
            n++;
        if (h.type == OPR_REC_SAMPLE_RUN && at + h.size > written) {
            struct opr_sample_run run;
            memcpy(&run, w->buf + at + sizeof h, sizeof run);
            n += run.count;
        }
        at += h.size;
    }
    return n;
}

/* Hands buf to ops.write. */
static void writer_write_buf(struct opr_writer *w)
{
    if (w->len == 0)
        return;
    /* Once a write came up short the file ends inside a record; writing on
     * (when space comes back) would put records after a torn one. So the
     * rest is counted, not written. */
    size_t got = w->write_failed ? 0 : w->ops.write(w->ops.ctx, w->buf, w->len);
    w->bytes += got;
    if (got < w->len) {
        w->write_failed = true;
        w->unwritten_samples += samples_past(w, got);
    }
    w->len = 0;
    w->records_at = 0;
}

/* Appends one record to buf (writing buf out first when it would overflow). */
static void writer_put(struct opr_writer *w, uint32_t type, const void *body, size_t body_len, const void *tail,
                       size_t tail_len)
{
    size_t size = sizeof(struct opr_record_header) + body_len + tail_len;
    size_t padded = (size + 7) & ~(size_t)7;
    if (padded > WRITER_BUFFER_SIZE)
        return; /* cannot happen for opprof's record sizes; never split a record */
    if (w->len + padded > WRITER_BUFFER_SIZE)
        writer_write_buf(w);
    uint8_t *at = w->buf + w->len;
    struct opr_record_header h = {type, (uint32_t)padded};
    memcpy(at, &h, sizeof h);
    if (body_len)
        memcpy(at + sizeof h, body, body_len);
    if (tail_len)
        memcpy(at + sizeof h + body_len, tail, tail_len);
    memset(at + size, 0, padded - size);
    w->len += padded;
}

/* ---- SAMPLE_RUN -------------------------------------------------------------- */

static void writer_close_run(struct opr_writer *w)
{
    if (w->run_count == 0)
        return;
    struct opr_sample_run h = {w->run_base_ns, w->run_count, 0};
    writer_put(w, OPR_REC_SAMPLE_RUN, &h, sizeof h, w->run, w->run_len);
    w->run_count = 0;
    w->run_len = 0;
}

/* Records that only define what samples refer to by id: a SAMPLE_RUN may be
 * written after them although some of its samples were taken before. */
static bool is_definition(uint32_t type)
{
    return type == OPR_REC_STACK || type == OPR_REC_STACK_TAIL || type == OPR_REC_PYSTACK ||
           type == OPR_REC_PYSTACK_TAIL || type == OPR_REC_PYCODE || type == OPR_REC_MAP;
}

static unsigned put_uleb(unsigned char *out, uint64_t v)
{
    unsigned n = 0;
    do {
        out[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

static void writer_put_short(struct opr_writer *w, const struct opr_sample *s, uint32_t py_stack_id_plus1)
{
    struct opr_sample_short ss = {s->time_ns, s->tid, s->stack_id, py_stack_id_plus1, s->weight | s->flags << 24};
    writer_put(w, OPR_REC_SAMPLE_SHORT, &ss, sizeof ss, NULL, 0);
}

/* One more entry of the run (a SAMPLE_SHORT's fields, format.h). */
static void writer_run_add(struct opr_writer *w, const struct opr_sample *s, uint32_t py_stack_id_plus1)
{
    if (w->run_len + OPR_SAMPLE_RUN_ENTRY_MAX > sizeof w->run)
        writer_close_run(w);
    if (w->run_count == 0)
        w->run_base_ns = w->run_time_ns = s->time_ns, w->run_tid = 0;
    int64_t dt = (int64_t)(s->time_ns - w->run_time_ns);
    unsigned char *at = w->run + w->run_len;
    unsigned n = put_uleb(at, (uint64_t)dt << 1 ^ (uint64_t)(dt >> 63)); /* zigzag */
    n += put_uleb(at + n, s->tid == w->run_tid ? 0 : s->tid);
    n += put_uleb(at + n, s->stack_id);
    n += put_uleb(at + n, py_stack_id_plus1);
    n += put_uleb(at + n, s->weight | s->flags << 24);
    w->run_last_at = w->run_len;
    w->run_len += n;
    w->run_count++;
    w->run_time_ns = s->time_ns;
    w->run_tid = s->tid;
    w->run_last = *s;
    w->run_last_py = py_stack_id_plus1;
}

void opr_writer_flush(struct opr_writer *w)
{
    writer_close_run(w);
    writer_write_buf(w);
}

void opr_writer_emit(struct opr_writer *w, uint32_t type, const void *body, size_t body_len, const void *tail,
                     size_t tail_len)
{
    if (!is_definition(type)) {
        if (type == OPR_REC_COUNTER_SAMPLE && w->run_count) {
            /* Counters qualify the sample just before them: the run's last
             * entry is taken out and written alone, as a SAMPLE_SHORT. */
            w->run_count--;
            w->run_len = w->run_last_at;
            writer_close_run(w);
            writer_put_short(w, &w->run_last, w->run_last_py);
        } else {
            writer_close_run(w);
        }
    }
    writer_put(w, type, body, body_len, tail, tail_len);
}

void opr_writer_note(struct opr_writer *w, const char *text)
{
    struct opr_note n = {writer_now_ns(), (uint32_t)strlen(text), 0};
    opr_writer_emit(w, OPR_REC_NOTE, &n, sizeof n, text, n.text_len);
}

size_t opr_writer_pending(const struct opr_writer *w)
{
    return w->len + (w->run_count ? sizeof(struct opr_record_header) + sizeof(struct opr_sample_run) + w->run_len + 7 : 0);
}
uint64_t opr_writer_bytes(const struct opr_writer *w) { return w->bytes; }
uint64_t opr_writer_unwritten_samples(const struct opr_writer *w) { return w->unwritten_samples; }
size_t opr_writer_thread_count(const struct opr_writer *w) { return w->nthreads; }

/* ---- native stacks --------------------------------------------------------- */

/* Writes chain `id` (n elements of `size` bytes, leaf first) as a whole
 * record, or as a tail record when an earlier chain holds two or more of its
 * root-side elements (a tail's header is 8 bytes longer). */
static void writer_emit_chain(struct opr_writer *w, struct chain_trie *trie, uint32_t whole_type,
                              uint32_t tail_type, uint32_t id, const void *elems, unsigned n, size_t size)
{
    uint32_t parent, skip;
    unsigned shared = chain_trie_add(trie, id, elems, n, size, &parent, &skip);
    if (shared >= 2 && !w->classic_records) {
        struct opr_chain_tail t = {id, n - shared, parent, skip};
        opr_writer_emit(w, tail_type, &t, sizeof t, elems, (size_t)(n - shared) * size);
        return;
    }
    struct opr_stack whole = {id, n}; /* opr_pystack has the same layout */
    opr_writer_emit(w, whole_type, &whole, sizeof whole, elems, (size_t)n * size);
}

void opr_writer_sample(struct opr_writer *w, const struct opr_sample *s, uint32_t py_stack_id_plus1,
                       uint64_t omp_region)
{
    if (omp_region == 0 && s->weight <= OPR_SAMPLE_SHORT_MAX_WEIGHT && s->flags <= 0xff && !w->classic_records) {
        writer_run_add(w, s, py_stack_id_plus1);
        return;
    }
    struct {
        struct opr_sample_python py;
        struct opr_sample_openmp omp;
    } tails = {{py_stack_id_plus1, 0}, {omp_region}};
    opr_writer_emit(w, OPR_REC_SAMPLE, s, sizeof *s, &tails, omp_region ? sizeof tails : sizeof tails.py);
}

int64_t opr_writer_stack_id(struct opr_writer *w, const uint64_t *pcs, unsigned n)
{
    bool added;
    int64_t id = id_table_find_or_add(&w->ids.stacks, pcs, n * sizeof pcs[0], &added);
    if (id < 0 || !added)
        return id;
    const uint64_t *kept = id_table_last_added(&w->ids.stacks); /* the trie keeps this copy */
    /* New code appeared (dlopen, JIT): its MAP records go before this STACK.
     * Asked of the kernel for those PCs alone where it can; a full read
     * (rate-limited) where it cannot. */
    bool unmapped = false;
    for (unsigned i = 0; i < n && !unmapped && w->proc_dir[0]; i++)
        unmapped = !writer_pc_mapped(w, pcs[i]);
    int queried = unmapped ? writer_query_code(w, pcs, n) : 0;
    bool reread = queried < 0 && writer_now_ns() - w->last_maps_ns > MAPS_REREAD_NS;
    if (reread)
        opr_writer_read_maps(w);
    if ((queried > 0 || reread) && w->ops.late_code)
        w->ops.late_code(w->ops.ctx);
    writer_emit_chain(w, &w->ids.stack_trie, OPR_REC_STACK, OPR_REC_STACK_TAIL, (uint32_t)id, kept, n, sizeof pcs[0]);
    return id;
}

/* ---- Python ---------------------------------------------------------------- */

/* The PYCODE id of frame i (writing the record the first time the code object
 * is seen) and, in *line, the line it executes. A line is remembered per
 * (code object, instruction), so a frame is read from the process only when
 * it executes an instruction not seen before. */
static uint32_t python_code_id(struct opr_writer *w, const struct opr_pyframe_key *k, const void *frames,
                               unsigned i, int32_t *line)
{
    struct { uint64_t code, fingerprint; } ckey = {k->code, k->fingerprint};
    struct { uint64_t code, fingerprint; int64_t instr; } lkey = {k->code, k->fingerprint, k->instr};
    bool added_code, added_line;
    int64_t code_id = id_table_find_or_add(&w->ids.py_codes, &ckey, sizeof ckey, &added_code);
    int64_t line_id = code_id < 0 ? -1 : id_table_find_or_add(&w->ids.py_lines, &lkey, sizeof lkey, &added_line);
    *line = 0;
    if (line_id < 0) {
        w->py_chain_oom = true;
        return OPR_PYCODE_UNKNOWN;
    }
    if (!added_line) {
        if ((size_t)line_id >= w->py_line_cap) {
            w->py_chain_oom = true;
            return OPR_PYCODE_UNKNOWN; /* its line could not be stored (out of memory) */
        }
        /* An unreadable frame seen before keeps INT32_MIN as its line, as
         * both samplers always wrote it (readers ignore the line of an
         * unknown frame). */
        *line = w->py_line_values[line_id];
        return *line == INT32_MIN ? OPR_PYCODE_UNKNOWN : (uint32_t)code_id;
    }
    int32_t *lines = writer_grow(w->py_line_values, &w->py_line_cap, (size_t)line_id, sizeof *lines, 1024);
    if (!lines) {
        w->py_chain_oom = true;
        return OPR_PYCODE_UNKNOWN;
    }
    w->py_line_values = lines;
    struct opr_pycode_names *names = &w->py_names;
    if (!w->ops.resolve_pyframe(w->ops.ctx, frames, i, names, added_code)) {
        /* Freed or reused before we looked: an unknown Python frame (a code
         * id whose PYCODE is missing reads the same way in the report). */
        w->py_line_values[line_id] = INT32_MIN;
        return OPR_PYCODE_UNKNOWN;
    }
    w->py_line_values[line_id] = names->line;
    *line = names->line;
    if (added_code) {
        struct opr_pycode c = {(uint32_t)code_id, names->first_line,
                               (uint32_t)strnlen(names->filename, sizeof names->filename),
                               (uint32_t)strnlen(names->qualname, sizeof names->qualname)};
        char *tail = w->py_code_tail;
        memcpy(tail, names->filename, c.filename_len);
        memcpy(tail + c.filename_len, names->qualname, c.qualname_len);
        opr_writer_emit(w, OPR_REC_PYCODE, &c, sizeof c, tail, c.filename_len + c.qualname_len);
    }
    return (uint32_t)code_id;
}

static uint32_t python_stack_built(struct opr_writer *w, const struct opr_pyframe_key *keys, unsigned n,
                                   const void *frames);

uint32_t opr_writer_python_stack(struct opr_writer *w, const struct opr_pyframe_key *keys, unsigned n,
                                 const void *frames)
{
    if (n == 0)
        return 0;
    if (n > OPR_MAX_PYFRAMES)
        n = OPR_MAX_PYFRAMES;
    bool added;
    int64_t key_id = id_table_find_or_add(&w->ids.py_key_stacks, keys, n * sizeof keys[0], &added);
    if (key_id >= 0 && !added && (size_t)key_id < w->py_key_stack_cap && w->py_key_stack_ids[key_id]) {
        w->py_key_hits++;
        return w->py_key_stack_ids[key_id];
    }
    w->py_key_misses++;
    uint32_t id = python_stack_built(w, keys, n, frames);
    if (key_id < 0 || id == 0)
        return id; /* out of memory, or no chain: built again next time */
    size_t old_cap = w->py_key_stack_cap;
    uint32_t *ids = writer_grow(w->py_key_stack_ids, &w->py_key_stack_cap, (size_t)key_id, sizeof *ids, 1024);
    if (ids) {
        memset(ids + old_cap, 0, (w->py_key_stack_cap - old_cap) * sizeof *ids); /* fresh room: "none yet" */
        w->py_key_stack_ids = ids;
        ids[key_id] = id;
    }
    return id;
}

void opr_writer_python_cache_counts(const struct opr_writer *w, uint64_t *hits, uint64_t *misses)
{
    *hits = w->py_key_hits;
    *misses = w->py_key_misses;
}
uint64_t opr_writer_python_frames_reused(const struct opr_writer *w)
{
    return w->py_frames_reused;
}

/* A new PYSTACK: whole, or as a PYSTACK_TAIL of packed frames when an earlier
 * chain holds two or more of its root-side frames. */
static void writer_emit_pychain(struct opr_writer *w, uint32_t id, const struct opr_pyframe *chain, unsigned n)
{
    uint32_t parent, skip;
    unsigned shared = chain_trie_add(&w->ids.py_stack_trie, id, chain, n, sizeof chain[0], &parent, &skip);
    if (shared < 2 || w->classic_records) {
        struct opr_pystack ps = {id, n};
        opr_writer_emit(w, OPR_REC_PYSTACK, &ps, sizeof ps, chain, n * sizeof chain[0]);
        return;
    }
    struct opr_pyframe_packed *packed = w->py_packed;
    for (unsigned i = 0; i < n - shared; i++) {
        uint32_t code = chain[i].code_id > OPR_PYFRAME_PACKED_UNKNOWN ? OPR_PYFRAME_PACKED_UNKNOWN
                                                                       : chain[i].code_id;
        packed[i] = (struct opr_pyframe_packed){code | (chain[i].flags & OPR_PYFRAME_ENTRY ? 1u << 31 : 0),
                                                chain[i].line};
    }
    struct opr_chain_tail t = {id, n - shared, parent, skip};
    opr_writer_emit(w, OPR_REC_PYSTACK_TAIL, &t, sizeof t, packed, (n - shared) * sizeof *packed);
}

/* Builds the chain frame by frame (names and lines through the per-frame
 * tables) and returns its PYSTACK id + 1, 0 when out of memory. */
static uint32_t python_stack_built(struct opr_writer *w, const struct opr_pyframe_key *keys, unsigned n,
                                   const void *frames)
{
    struct opr_pyframe *chain = w->py_chain;
    /* Root-side frames whose keys match the last build's keep their entries
     * (moved to where this chain's root side is): the same answers the
     * per-frame tables would give, without two lookups a frame in tables the
     * workload has pushed out of the cache (a miss of torch_train.py's loop
     * differs from the last chain in its leaf frames only). */
    unsigned prev_n = w->py_prev_n, same = chain_root_shared(keys, n, w->py_prev_keys, prev_n, sizeof keys[0]);
    if (same && n != prev_n)
        memmove(&chain[n - same], &chain[prev_n - same], same * sizeof chain[0]);
    w->py_chain_oom = false;
    for (unsigned i = 0; i < n - same; i++) {
        int32_t line;
        chain[i].code_id = python_code_id(w, &keys[i], frames, i, &line);
        chain[i].line = line;
        chain[i].flags = keys[i].is_entry ? OPR_PYFRAME_ENTRY : 0;
        chain[i].pad = 0;
    }
    memcpy(w->py_prev_keys, keys, n * sizeof keys[0]);
    w->py_prev_n = w->py_chain_oom ? 0 : n;
    w->py_frames_reused += same;
    bool added;
    int64_t id = id_table_find_or_add(&w->ids.py_stacks, chain, n * sizeof chain[0], &added);
    if (id < 0)
        return 0;
    if (added) /* the trie keeps the table's copy */
        writer_emit_pychain(w, (uint32_t)id, id_table_last_added(&w->ids.py_stacks), n);
    return (uint32_t)id + 1;
}
