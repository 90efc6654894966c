/*
 * tests/unit/unit.h — each test_*.c file defines one register_*_tests()
 * function that adds its CUnit suite(s); run_unit.c calls them all.
 */
#ifndef OPPROF_UNIT_H
#define OPPROF_UNIT_H

#include <CUnit/CUnit.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void register_symbolize_tests(void);
void register_symbolize_cfi_tests(void);
void register_perf_map_tests(void); /* symbolize/perf_map.c */
void register_hotspots_tests(void);
void register_profile_load_tests(void);
void register_compact_records_tests(void); /* the loader on STACK_TAIL, PYSTACK_TAIL, SAMPLE_RUN */
void register_stream_writer_tests(void); /* format/'s stream writer */
int id_table_faults_probe(void);         /* run_unit --id-table-faults: in a fresh process */
void register_stream_process_tests(void); /* format/stream_process.c: PROCESS, THREAD, MAP */
void register_report_tests(void);
void register_pmu_tests(void);
void register_metrics_tests(void);
void register_operators_tests(void);
void register_export_tests(void);
void register_threading_tests(void);
void register_sweep_tests(void); /* sweeps and diffs */
void register_torch_shapes_tests(void); /* record --torch-shapes: FLOPs per operator */
void register_counters_tests(void); /* per-sample counters */
void register_python_walk_tests(void); /* sampler/common: the CPython frame walker */
void register_hashmap_tests(void); /* util/hashmap.c */
void register_python_lines_tests(void); /* sampler/common: CPython 3.9-3.13 line tables */
void register_memory_tests(void); /* memory over time: charging and tables */

/* ---- a writer's bytes in memory, walked record by record (test_stream_writer.c) ---- */

struct opr_writer;

/* A memory sink that remembers where each write() of the writer ended. */
struct sink {
    unsigned char *data;
    size_t len, cap;
    size_t write_ends[64];
    unsigned nwrites;
};
/* The writer's write op into a struct sink (ctx). */
size_t sink_write(void *ctx, const void *bytes, size_t len);
/* A writer into k (cleared first) reading proc_dir (NULL: none), saving the
 * vDSO in result_dir (NULL: not saved); fails the test when out of memory. */
struct opr_writer *new_writer(struct sink *k, const char *proc_dir, const char *result_dir,
                              const char *unreadable_name);
/* Walks the records after the file header; counts those of `type` (all when
 * 0) and checks that each is 8-byte sized and inside the stream. */
unsigned count_records(const struct sink *k, uint32_t type);
/* count_records after flushing what w holds. */
unsigned count_records_pending(struct opr_writer *w, const struct sink *k, uint32_t type);
/* The nth record of `type`'s body (NULL when there is none). */
const unsigned char *find_record(const struct sink *k, uint32_t type, unsigned nth);

/* ---- hand-built streams and result directories (test_stream.c) ---- */

/* Bytes in memory, grown by realloc; the owner frees data. */
struct test_buf {
    unsigned char *data;
    size_t len, cap;
};

/* A Python frame of a test stream; filename NULL: its code object is gone
 * (the writer then writes OPR_PYCODE_UNKNOWN). */
struct test_pyframe {
    const char *filename, *qualname;
    int32_t first_line, line;
};

/* A stream being built in memory through format/'s writer (no process
 * behind it: no PROCESS, MAP or THREAD records unless a test writes them). */
struct test_stream {
    struct opr_writer *w;
    struct test_buf out;
};

/* Starts a stream of pid: the file header (ppid 1, 1 ms period);
 * classic_records: every chain written whole (no STACK_TAIL, SAMPLE_RUN). */
void test_stream_begin(struct test_stream *s, uint32_t pid, bool classic_records);
/* Flushes and frees the writer; the stream's bytes (the caller frees data). */
struct test_buf test_stream_finish(struct test_stream *s);
void test_stream_record(struct test_stream *s, uint32_t type, const void *body, size_t body_len, const void *tail,
                        size_t tail_len);
/* A SAMPLE of weight 1 on stack, Python stack py_plus1 - 1 (0: none). */
void test_stream_sample(struct test_stream *s, uint64_t t, uint32_t tid, uint32_t stack, uint32_t py_plus1);
/* A STACK record through the writer's id table; id is the one the test's
 * samples refer to, so the writer must give the same. */
void test_stream_stack(struct test_stream *s, uint32_t id, const uint64_t *pcs, uint32_t n);

/* One result directory at a time: unit_dir_new() makes a fresh one under
 * /tmp (its path in unit_dir), unit_dir_write() puts a file in it,
 * unit_dir_write_info() an info file (a complete 5 ms task-clock run, plus
 * the extra lines), unit_dir_remove() deletes it. */
extern char unit_dir[256];
void unit_dir_new(void);
void unit_dir_write(const char *name, const void *data, size_t len);
void unit_dir_write_info(const char *extra);
void unit_dir_remove(void);

/* Absolute paths of the build and source trees (set by Makefile.am). */
#ifndef OPPROF_TEST_BUILDDIR
#define OPPROF_TEST_BUILDDIR "."
#endif
#ifndef OPPROF_TEST_SRCDIR
#define OPPROF_TEST_SRCDIR "."
#endif

#endif
