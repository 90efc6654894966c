/*
 * format/format.h — format/'s interface: the raw on-disk format (its records
 * in format/records.h, the twin of docs/format.md), the stream writer and the
 * stream reader.
 *
 * Both samplers (the injected agent, and attach mode in the launcher) write
 * these records through the one stream writer declared below ("Stream
 * writer"); analyze/ reads them. Nothing after the sampler reads anything
 * else. The environment variables the launcher passes to the agent are here
 * too: they are the other half of the contract between the two processes.
 *
 * All multi-byte integers in the raw format are little-endian (the host order on
 * x86-64, the only target so far); every record is 8-byte aligned.
 */
#ifndef OPPROF_FORMAT_H
#define OPPROF_FORMAT_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* The records themselves: format/records.h. */
#include "format/records.h"

/* ------------------------------------------------------------------------- */
/* Stream writer (format/stream_writer.c, format/stream_process.c)            */
/* ------------------------------------------------------------------------- */
/*
 * The one writer of proc-<pid>-<gen>.raw streams. The injected agent and
 * attach mode both write through it, and the unit tests build their streams
 * with it, so "the same format" holds by construction. It owns the framing
 * (record header, padding to 8 bytes, no record split across two flushes), the
 * id tables that write each distinct native stack, Python code object and
 * Python stack once, and the records read from /proc: PROCESS, THREAD, MAP
 * with build-ids, and the saved vDSO image.
 *
 * Built under the agent's rules (libc only, no sanitizers), but it is not
 * signal-handler code: it allocates. It runs on the agent's writer thread or
 * in the launcher. Where the bytes go is the caller's (ops.write): a stream
 * file in both samplers, memory in the tests. One writer per stream, used by
 * one thread at a time.
 */
struct opr_writer;

/* What a Python frame reader reports for one frame: its code object's names
 * (PYCODE) and the line the frame executes. */
struct opr_pycode_names {
    char filename[512]; /* NUL-terminated */
    char qualname[256]; /* NUL-terminated */
    int32_t first_line;
    int32_t line;
};

/* One captured Python frame as the writer keys it: a code object is known by
 * its address and a fingerprint (an address is reused once the object is
 * freed), a line by the instruction executing in the frame. */
struct opr_pyframe_key {
    uint64_t code;
    uint64_t fingerprint;
    int64_t instr;
    uint32_t is_entry; /* entered from C: OPR_PYFRAME_ENTRY */
    uint32_t pad;
};

struct opr_writer_ops {
    void *ctx; /* passed to every callback */
    /* Required. Moves len bytes to where the stream goes; returns how many got
     * there (fewer when the disk is full: the reader reports a truncated
     * stream). */
    size_t (*write)(void *ctx, const void *bytes, size_t len);
    /* Optional. New MAP records were written: the process mapped new code
     * (an unwinder's module list must learn it). */
    void (*maps_added)(void *ctx);
    /* Optional. A new stack held a PC outside every known mapping and the
     * writer wrote MAP records for it (its one mapping queried) or re-read
     * the maps (no PROCMAP_QUERY): code loaded late, maybe libpython, a
     * chance to look for Python again. Called before that STACK record is
     * written, so what it writes comes first. */
    void (*late_code)(void *ctx);
    /* Optional. The build-id of the object loaded at addr, read from its
     * image in memory (its length; 0: it has none), or -1 when the callee
     * does not know that object: the writer then reads the file the
     * mapping names. From memory it costs no system call (a PyTorch process
     * maps ~300 files, ~5 calls each), and it is the code that runs, not
     * whatever the path holds now. */
    int (*loaded_build_id)(void *ctx, uint64_t addr, uint8_t out[OPR_BUILD_ID_MAX]);
    /* Required by opr_writer_python_stack. Reads frame i of the caller's
     * frames (as passed there): its line, and its names when need_names.
     * false when the code object is gone (freed or reused): the frame is then
     * written as OPR_PYCODE_UNKNOWN. */
    bool (*resolve_pyframe)(void *ctx, const void *frames, unsigned i, struct opr_pycode_names *out,
                            bool need_names);
};

struct opr_writer_config {
    /* "/proc/self" (the agent) or "/proc/<pid>" (attach): where PROCESS, THREAD
     * and MAP records are read from. NULL: there is no process to read (the
     * tests); those calls then write nothing. */
    const char *proc_dir;
    /* The result dir, where the vDSO image is saved once as vdso.so (NULL: it
     * is not saved). */
    const char *result_dir;
    /* The THREAD name written for a thread whose comm cannot be read (it has
     * exited) and had none before. NULL: no THREAD record for it. */
    const char *unreadable_thread_name;
    /* true: the records readers before STACK_TAIL, PYSTACK_TAIL and
     * SAMPLE_SHORT and SAMPLE_RUN know: every chain whole, every sample a SAMPLE (to
     * compare the two, or for such a reader). */
    bool classic_records;
    struct opr_writer_ops ops;
};

/* NULL when out of memory. */
struct opr_writer *opr_writer_new(const struct opr_writer_config *config);
void opr_writer_free(struct opr_writer *w);
/* Forgets every id and thread written, and bytes not flushed yet, for a new
 * stream (a fork child's: the parent flushes its own bytes). The id tables
 * are let go of, not freed, until opr_writer_free: in a fork child they are
 * the parent's pages, shared until written. The mappings are kept: the next
 * opr_writer_read_maps writes their MAP records again without reading the
 * maps (the child's memory map is the parent's). */
void opr_writer_reset(struct opr_writer *w);

/* ---- framing (stream_writer.c) ---- */
/* The file header, the first bytes of a stream. pid also marks the main
 * thread in THREAD records and names PROCESS. period_ns 0: samples are not
 * time (record -c). */
void opr_writer_begin(struct opr_writer *w, uint32_t pid, uint32_t ppid, uint64_t start_ns, uint64_t period_ns);
/* Appends one record: header, body, tail, zero padding to 8 bytes. Flushes
 * first when the buffer would overflow; a record larger than the buffer
 * (none of opprof's) is not written. A record other than STACK, PYSTACK,
 * PYCODE, MAP and their tails writes out the SAMPLE_RUN being gathered
 * first, so samples keep their place among all other records. */
void opr_writer_emit(struct opr_writer *w, uint32_t type, const void *body, size_t body_len, const void *tail,
                     size_t tail_len);
void opr_writer_note(struct opr_writer *w, const char *text); /* NOTE record, now */
void opr_writer_flush(struct opr_writer *w);
size_t opr_writer_pending(const struct opr_writer *w); /* bytes emitted, not flushed yet (a run being gathered too) */
uint64_t opr_writer_bytes(const struct opr_writer *w);  /* bytes flushed that reached ops.write's target */
/* SAMPLE records emitted that did not reach ops.write's target in full (a
 * short write: disk full). After the first short write nothing more is
 * written, so the stream ends at the cut and is not corrupted further on. */
uint64_t opr_writer_unwritten_samples(const struct opr_writer *w);
size_t opr_writer_thread_count(const struct opr_writer *w); /* threads noted (opr_writer_note_thread) */

/* ---- stacks (stream_writer.c) ---- */
/* The STACK id of a native chain (leaf first), writing the record the first
 * time; -1 when out of memory. A chain with a PC outside the known mappings
 * re-reads the maps first (at most every 50 ms). */
int64_t opr_writer_stack_id(struct opr_writer *w, const uint64_t *pcs, unsigned n);
/* A sample: an entry of the SAMPLE_RUN being gathered when it fits (no
 * OpenMP region, weight and flags small; written out before the next record
 * that is not a definition, or at a flush; a COUNTER_SAMPLE emitted next
 * takes it out of the run as a SAMPLE_SHORT), else SAMPLE with its Python
 * tail and, when omp_region != 0, its OpenMP tail. */
void opr_writer_sample(struct opr_writer *w, const struct opr_sample *s, uint32_t py_stack_id_plus1,
                       uint64_t omp_region);
/* PYSTACK id + 1 of a Python chain (leaf first, n clamped to
 * OPR_MAX_PYFRAMES), 0 when n is 0 or out of memory; PYCODE and PYSTACK
 * records written as needed. keys[i] describes frames' entry i, which
 * ops.resolve_pyframe reads when a code object or line is new. */
uint32_t opr_writer_python_stack(struct opr_writer *w, const struct opr_pyframe_key *keys, unsigned n,
                                 const void *frames);
/* Chains found in the chain cache (hits) and built frame by frame (misses). */
void opr_writer_python_cache_counts(const struct opr_writer *w, uint64_t *hits, uint64_t *misses);
/* Frames of those misses taken from the chain built before (its root-side
 * frames with the same keys) instead of from the per-frame tables. */
uint64_t opr_writer_python_frames_reused(const struct opr_writer *w);

/* ---- the process, read from proc_dir (stream_process.c) ---- */
void opr_writer_process(struct opr_writer *w); /* PROCESS: exe path and argv */
/* First sight of a thread: remembers it and writes its THREAD record. true
 * when it was new. */
bool opr_writer_note_thread(struct opr_writer *w, uint32_t tid);
/* THREAD records again for every thread seen, with the names they have now
 * (names set after a thread's first sample). */
void opr_writer_thread_names_again(struct opr_writer *w);
/* A thread's name as seen elsewhere (the agent's status poll, ~250 ms): a
 * THREAD record with its comm now when it differs from the last one written,
 * so a thread named after its first sample that exits before the end is not
 * left with its first name. Threads without a sample yet are ignored. */
void opr_writer_thread_name_seen(struct opr_writer *w, uint32_t tid, const char *name);
/* MAP records for executable mappings not written before; the vDSO's image is
 * saved once per result dir. */
void opr_writer_read_maps(struct opr_writer *w);
/* Full reads of the maps file and single-mapping queries (PROCMAP_QUERY)
 * this writer made, for the agent's cost record. */
void opr_writer_maps_counts(const struct opr_writer *w, uint64_t *full_reads, uint64_t *queries);

/* ---- helpers for the samplers (stream_process.c) ---- */
/* One line of /proc/PID/maps: "start-end perms offset dev inode   path".
 * path points into the caller's buffer, path_len bytes, not NUL-terminated
 * (empty for anonymous memory). */
struct opr_maps_line {
    uint64_t start, end, pgoff;
    char perms[4]; /* "r-xp" */
    const char *path;
    size_t path_len;
};
/* Parses [p, eol) by hand; false when it is not such a line. Why not
 * fgets + sscanf: for the ~1,700 lines of a process that imported torch,
 * stdio's 1 KB reads and sscanf were half the CPU time of a read. */
bool opr_maps_parse_line(const char *p, const char *eol, struct opr_maps_line *out);
/* Reads a maps file from fd with read(2) into buf (cap bytes; a longer line
 * is skipped) and calls each() for every line that parses, until it
 * returns false. No malloc, no stdio: the agent's writer thread uses it
 * with a static buffer. The number of lines parsed, -1 when the first
 * read failed. */
long opr_maps_read(int fd, char *buf, size_t cap, bool (*each)(const struct opr_maps_line *line, void *ctx),
                   void *ctx);
/* The one mapping that holds addr, from the kernel's PROCMAP_QUERY ioctl
 * (Linux 6.11+) on an open /proc/PID/maps: what a full read would say of that
 * line, without the kernel printing the other ~1,700 lines of a process that
 * imported torch (2-3 ms of CPU a read on the VM of 2026-11-28). Only
 * mappings with all of OPR_MAPS_QUERY_* in flags. name (NULL: not wanted)
 * gets the line's path, "[vdso]" or "" (anonymous), NUL-terminated, at most
 * name_cap - 1 bytes. 1 found, 0 no such mapping (or a name that did not
 * fit), -1 the kernel has no PROCMAP_QUERY (then read the file). */
#define OPR_MAPS_QUERY_READABLE 0x01u
#define OPR_MAPS_QUERY_EXECUTABLE 0x04u
struct opr_maps_hit {
    uint64_t start, end, pgoff;
};
int opr_maps_query(int fd, uint64_t addr, unsigned flags, struct opr_maps_hit *hit, char *name, size_t name_cap);
/* Creates <dir>/proc-<pid>-<gen>.raw for the first generation not taken yet
 * (an exec'ed pid has one per earlier image). The fd, or -1 (errno). */
int opr_stream_create(const char *dir, uint32_t pid, int *generation);
/* write(2) until done, retrying EINTR; returns the bytes written (0 for fd < 0). */
size_t opr_write_all(int fd, const void *bytes, size_t len);
/* A small text file (/proc, /sys) into buf: up to cap - 1 bytes (reads
 * retried on EINTR and continued until the end or buf is full), then a NUL.
 * The bytes read, or -1 when it cannot be opened or its first read fails.
 * open/read/close only: the agent's writer thread uses it too. */
ssize_t opr_read_small_file(const char *path, char *buf, size_t cap);
/* NT_GNU_BUILD_ID of an ELF file, from its PT_NOTE segments (libc only: the
 * agent may not use libelf). Its length, 0 when there is none. */
int opr_read_build_id(const char *path, uint8_t out[OPR_BUILD_ID_MAX]);

/* ---- memory readings for both samplers (format/stream_memory.c) ---- */
/* The RSS, anonymous and file-backed resident bytes from <proc_dir>/statm
 * (fields of struct opr_mem_tick; the others are left alone). 0, or -1 when
 * the file cannot be read (the process is gone). */
int opr_memory_read_statm(const char *proc_dir, struct opr_mem_tick *t);
/* The same from statm's text already read (the agent keeps the file open
 * and re-reads it with pread). 0, or -1 when the text is not statm's. */
int opr_memory_parse_statm(const char *text, struct opr_mem_tick *t);
/* Minor and major faults from <proc_dir>/stat, and the peak RSS (VmHWM)
 * from <proc_dir>/status: what getrusage gives the process itself, read from
 * outside (attach mode). 0, or -1. */
int opr_memory_read_faults(const char *proc_dir, struct opr_mem_tick *t);
/* The cgroup memory limit of the process at proc_dir (see struct
 * opr_mem_limit); path gets its cgroup path. Pure file reads; a machine
 * without cgroups gives version 0. */
void opr_memory_read_limit(const char *proc_dir, struct opr_mem_limit *l, char *path, size_t pathlen);
/* Writes a MEM_LIMIT record for the process at proc_dir. */
void opr_writer_memory_limit(struct opr_writer *w, const char *proc_dir, uint64_t time_ns);

/* Environment variables the launcher passes to the agent. */
#define OPR_ENV_DIR "OPPROF_RESULT_DIR"
#define OPR_ENV_PERIOD "OPPROF_PERIOD_NS"
#define OPR_ENV_USER_ONLY "OPPROF_USER_ONLY" /* "1": sample user-mode CPU time only (kernel refused) */
#define OPR_ENV_CALLGRAPH "OPPROF_CALL_GRAPH"
/* The values of OPR_ENV_CALLGRAPH, as numbers. */
enum call_graph_mode {
    CALL_GRAPH_DWARF = 0, /* CFI unwinding (.eh_frame / .debug_frame) */
    CALL_GRAPH_FP = 1,    /* frame-pointer walk */
    CALL_GRAPH_NONE = 2,  /* leaf PC only */
};
#define OPR_ENV_WINDOW "OPPROF_WINDOW_NS"    /* "start_ns:end_ns", CLOCK_MONOTONIC; end 0 = open */
#define OPR_ENV_MAX_BYTES "OPPROF_MAX_BYTES" /* --max-size in bytes */
/* -c N: sample on an event instead of the CPU-time timer:
 * "type:config:config1:exclude_kernel:period" (record_counters.c -> agent.c) */
#define OPR_ENV_LEADER "OPPROF_LEADER"

/* ------------------------------------------------------------------------- */
/* Stream reader (format/stream_reader.c)                                     */
/* ------------------------------------------------------------------------- */
/* One reader for every consumer of a stream file, as perf's session hands
 * each record to a struct perf_tool callback: it checks the file header, each
 * record's size, alignment and truncation, and hands the record to the
 * handler registered for its type. Types without a handler are skipped (a
 * newer writer may add types). Adding a record type is a handler, not a case
 * in a loader's switch. Not async-signal-safe: the agent never reads. */

#define OPR_REC_TYPE_LIMIT 64 /* record types are < this (handler table size) */

/* One record as the reader hands it over. body is 8-byte aligned inside the
 * caller's buffer and holds at least the handler's min_body bytes; len counts
 * the body and its padding. */
struct opr_record {
    uint32_t type;
    uint32_t prev_type; /* type of the record before it (0: none): a record
                           that qualifies the previous one checks this */
    const char *body;
    size_t len;
    size_t off;         /* byte offset of the record's header in the file */
};

/* 0: go on; -1: stop reading (errno says why, ENOMEM for out of memory).
 * ctx is the reader's, arg the handler's own. */
typedef int (*opr_record_fn)(void *ctx, void *arg, const struct opr_record *rec);

struct opr_record_handler {
    opr_record_fn fn;
    void *arg;
    size_t min_body; /* shorter bodies are reported through skipped() and not handed over */
};

struct opr_reader {
    struct opr_record_handler on[OPR_REC_TYPE_LIMIT]; /* indexed by type; fn NULL: skipped */
    void *ctx;
    /* One sentence (no trailing period) about a record that was skipped
     * ("record of type 5 too short at byte 96") or about where reading
     * stopped ("truncated at byte 96 of 120"); may be NULL. */
    void (*skipped)(void *ctx, const char *what);
    void (*stopped)(void *ctx, const char *what);
};

/* Registers fn for type. 0, or -1 with errno EINVAL (type out of range) or
 * EEXIST (type taken: two handlers for one record would decode it twice). */
int opr_reader_on(struct opr_reader *r, uint32_t type, size_t min_body, opr_record_fn fn, void *arg);

/* Opens a file of a result directory (untrusted: it may be a FIFO, a device
 * or a link) for reading: a descriptor only for a regular file that is not a
 * symbolic link, with *st filled; else -1 with errno (EINVAL for a FIFO or
 * device, ELOOP for a link, EISDIR). Never blocks. */
struct stat;
int opr_open_regular(const char *path, struct stat *st);

/* Reads a whole stream file into *buf (malloc'd; free it after the records
 * are used: record bodies point into it). 0, or -1 with errno. */
int opr_stream_read_file(const char *path, char **buf, size_t *size);

/* Checks the file header of buf: magic, header size, version. 0 with *h
 * filled, or -1 with one sentence in why (no trailing period). */
int opr_stream_check_header(const char *buf, size_t size, struct opr_file_header *h, char *why, size_t whylen);

/* Hands every record after the header (h->header_size bytes) to its handler.
 * 0: read to the end; 1: stopped early at a truncated or corrupt record
 * (r->stopped was told where); -1: a handler returned -1 (errno kept). */
int opr_stream_read_records(const struct opr_reader *r, const char *buf, size_t size, size_t header_size);

/* Reads a SAMPLE_RUN's entries one at a time: begin with the record, then
 * next until it returns 0 (all count entries read) or -1 (the record is
 * damaged from there on: an entry cut short, a number past 32 bits, a first
 * entry without a tid, or more entries than the body can hold). */
struct opr_sample_run_cursor {
    const unsigned char *at, *end;
    uint32_t left;
    uint64_t time_ns;
    uint32_t tid;
};
void opr_sample_run_begin(struct opr_sample_run_cursor *c, const struct opr_record *rec);
/* 1 with *s (flags and weight split as for SAMPLE_SHORT) and *py_plus1 set. */
int opr_sample_run_next(struct opr_sample_run_cursor *c, struct opr_sample *s, uint32_t *py_plus1);
/* --- end of stream reader ---------------------------------------------------- */

#endif
