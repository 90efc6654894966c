/*
 * format/writer_internal.h — private to format/'s stream writer: the writer's
 * state, shared by stream_writer.c (framing, stacks, Python) and
 * stream_process.c (what is read from /proc), and the id table both use.
 * Nothing outside format/ includes it: format/format.h is the interface.
 */
#ifndef OPPROF_FORMAT_WRITER_INTERNAL_H
#define OPPROF_FORMAT_WRITER_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/format.h"

/* ---- id_table.c: byte string -> small id, "have I written this before?" ---- */
struct id_table_entry {
    uint64_t hash;
    uint32_t id;
    uint32_t len;
    void *key; /* NULL marks an empty slot */
};
struct id_table {
    struct id_table_entry *entries;
    size_t cap, count;
    const void *last_added; /* the table's own copy of the key added last */
};
/* Returns the key's id (ids count up from 0), -1 when out of memory. */
int64_t id_table_find_or_add(struct id_table *d, const void *key, size_t len, bool *added);
/* The table's copy of the key its last call added: valid, unchanged, until
 * id_table_clear (a chain_trie keeps it instead of a copy of its own). */
static inline const void *id_table_last_added(const struct id_table *d)
{
    return d->last_added;
}
void id_table_clear(struct id_table *d);

/* ---- chain_trie (id_table.c): prefix sharing of STACK and PYSTACK ---------
 * Every chain written is remembered with all its root-side runs, so a new
 * chain can be written as the elements toward its leaf that no earlier
 * chain has, plus "the rest is chain P from its element S on" (STACK_TAIL,
 * PYSTACK_TAIL in format.h). */
#define CHAIN_TRIE_MAX_LEN 256 /* elements of a chain: OPR_MAX_FRAMES */
struct chain_trie_slot {
    uint64_t hash; /* of a root-side run's elements */
    uint64_t node; /* chain id << 32 | the run's first element; UINT64_MAX: empty */
};
struct chain_trie {
    struct chain_trie_slot *slots; /* open addressing, at most half full */
    size_t cap, count;
    const unsigned char **chains; /* each chain's elements, by id (to check a hit); not owned */
    uint32_t *chain_len;
    size_t nchains, chains_cap;
    bool failed;                   /* out of memory once: learns nothing more */
};
/* Remembers chain `id` (n elements of `size` bytes, a multiple of 8, leaf
 * first; ids new and increasing; `elems` is kept, not copied, so it must
 * stay valid and unchanged while the trie lives: the writer passes its
 * id_table's copy, id_table_last_added) and returns
 * how many of its root-side elements an earlier chain has (0: none), with, in
 * *parent and *skip, that chain and the index its run starts at: elements
 * n-matched..n-1 equal the parent's elements skip..end. */
unsigned chain_trie_add(struct chain_trie *t, uint32_t id, const void *elems, unsigned n, size_t size,
                        uint32_t *parent, uint32_t *skip);
void chain_trie_clear(struct chain_trie *t);
/* How many root-side elements (the last ones) chain a of na elements and
 * chain b of nb have in common, elements of `size` bytes. */
unsigned chain_root_shared(const void *chain_a, unsigned na, const void *chain_b, unsigned nb, size_t size);

/* ---- the writer ------------------------------------------------------------ */
/* An executable mapping already written as a MAP record, and that record
 * with its path after it (NULL when out of memory), which a fork child's
 * stream writes again (writer_forget_process). */
struct writer_map_range {
    uint64_t start, end;
    struct opr_map *record;
};

struct writer_thread {
    uint32_t tid;
    char name[16]; /* the last name read, NUL-padded */
};

/* Entry bytes of one SAMPLE_RUN at most: ~400 samples. */
#define WRITER_RUN_SIZE 4096

/* A writer's id tables: what each definition written got as its id. One
 * struct so that opr_writer_reset can let go of them in one copy (see
 * there). */
struct writer_ids {
    struct id_table stacks;                      /* native chain -> STACK id */
    struct id_table py_codes;                    /* (code, fingerprint) -> PYCODE id */
    struct id_table py_lines;                    /* (code, fingerprint, instr) -> index in py_line_values */
    struct id_table py_stacks;                   /* opr_pyframe[] -> PYSTACK id */
    struct chain_trie stack_trie, py_stack_trie; /* what new chains can share */
    /* The chain cache: a Python chain seen again, as the sampler captured it
     * (opr_pyframe_key[]), costs one lookup instead of one per frame. Its
     * answer is the one the per-frame tables gave the first time, and those
     * never change an answer once given. The writer's py_key_stack_ids[i]:
     * what opr_writer_python_stack returned for key chain i (PYSTACK id + 1;
     * 0: none yet). */
    struct id_table py_key_stacks;
};

/* The id tables as fork copied them into a child, let go of by
 * opr_writer_reset without a free; older: the same from an earlier fork. */
struct writer_forked_ids {
    struct writer_forked_ids *older;
    struct writer_ids ids;
};

struct opr_writer {
    struct opr_writer_ops ops;
    char proc_dir[32];          /* "" when there is no process to read */
    char result_dir[PATH_MAX];  /* "" when the vDSO is not saved */
    char unreadable_thread_name[16];
    bool name_unreadable_threads;
    bool classic_records;          /* opr_writer_config's */

    uint32_t pid, ppid;         /* of opr_writer_begin */
    uint8_t *buf;               /* WRITER_BUFFER_SIZE bytes */
    size_t len;                 /* bytes in buf, not flushed yet */
    uint64_t bytes;             /* bytes flushed that got there */
    size_t records_at;          /* where records start in buf (after a file header) */
    uint64_t unwritten_samples; /* SAMPLE records that never reached the target */
    bool write_failed;          /* a short write happened: the stream ends there */

    struct writer_ids ids;
    struct writer_forked_ids *forked_ids; /* the parents' tables (opr_writer_reset) */
    uint32_t *py_key_stack_ids;
    size_t py_key_stack_cap;
    uint64_t py_key_hits, py_key_misses;
    uint64_t py_frames_reused;  /* frames a miss took from the last chain built (py_prev_keys) */
    int32_t *py_line_values;    /* line of each py_lines entry; INT32_MIN: unreadable */
    size_t py_line_cap;
    /* Scratch of opr_writer_python_stack, here rather than on the agent's
     * writer thread stack or in statics shared between writers. */
    struct opr_pycode_names py_names;
    char py_code_tail[sizeof(((struct opr_pycode_names *)0)->filename) +
                      sizeof(((struct opr_pycode_names *)0)->qualname)];
    struct opr_pyframe py_chain[OPR_MAX_PYFRAMES];
    /* The keys py_chain was last built from (py_prev_n of them; 0: none, or
     * the build ran out of memory): a chain the cache misses is most often
     * the last one with another instruction in its leaf frames, so its
     * root-side frames that match are taken from py_chain as they are. */
    struct opr_pyframe_key py_prev_keys[OPR_MAX_PYFRAMES];
    unsigned py_prev_n;
    /* a frame of the chain being built could not be stored (out of memory) */
    bool py_chain_oom;
    struct opr_pyframe_packed py_packed[OPR_MAX_PYFRAMES]; /* a PYSTACK_TAIL's frames */

    struct writer_map_range *maps; /* sorted by start */
    size_t nmaps, maps_cap;
    uint64_t last_maps_ns;      /* CLOCK_MONOTONIC of the last maps read (0: never) */
    uint64_t maps_full_reads;   /* reads of the whole maps file */
    uint64_t maps_queries;      /* PROCMAP_QUERY calls for one PC's mapping */
    bool maps_query_unsupported; /* the kernel answered ENOTTY: full reads only */
    bool maps_replay;            /* the next maps read writes the table's records instead */

    struct writer_thread *threads;
    size_t nthreads, threads_cap;

    /* The SAMPLE_RUN being gathered (opr_writer_sample): its entries wait
     * here while definitions (STACK, PYSTACK, PYCODE, MAP and their tails)
     * go to buf, and become one record before any other record or a flush,
     * so samples keep their order with everything but definitions. */
    unsigned char run[WRITER_RUN_SIZE];
    size_t run_len;           /* entry bytes in run */
    size_t run_last_at;       /* where the last entry starts */
    uint32_t run_count;       /* entries */
    uint32_t run_tid;         /* the last entry's tid */
    uint64_t run_base_ns;     /* the first entry's time */
    uint64_t run_time_ns;     /* the last entry's time */
    struct opr_sample run_last; /* the last entry, to write it alone when counters follow it */
    uint32_t run_last_py;
};

/* 256 KB: one drain of the agent's queue at 1 kHz and many threads fits. */
#define WRITER_BUFFER_SIZE (256 * 1024)

uint64_t writer_now_ns(void); /* CLOCK_MONOTONIC, the clock of every record */
/* array with room for entry `index` (capacity doubling from first_cap), or
 * NULL when out of memory (array and *cap then unchanged). */
void *writer_grow(void *array, size_t *cap, size_t index, size_t elem_size, size_t first_cap);
/* Whether pc lies in a mapping written before (stream_process.c). */
bool writer_pc_mapped(const struct opr_writer *w, uint64_t pc);
/* MAP records for the executable mappings holding those of pcs[] outside
 * every mapping written, one PROCMAP_QUERY each instead of a full read of
 * the maps (stream_process.c). 1 some were added, 0 none (nothing is mapped
 * there: a walk's garbage, or code unmapped since), -1 no PROCMAP_QUERY here
 * (then read the maps in full). */
int writer_query_code(struct opr_writer *w, const uint64_t *pcs, unsigned n);
/* Forgets the threads written; keeps the mappings, whose MAP records the
 * next opr_writer_read_maps writes again from memory (a fork child's stream:
 * the same memory map) (stream_process.c). */
void writer_forget_process(struct opr_writer *w);
void writer_free_process(struct opr_writer *w);

#endif
