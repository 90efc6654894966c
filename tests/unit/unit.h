/*
 * tests/unit/unit.h — each test_*.c file defines one register_*_tests()
 * function that adds its CUnit suite(s); run_unit.c calls them all.
 */
#ifndef OPPROF_UNIT_H
#define OPPROF_UNIT_H

#include <CUnit/CUnit.h>

void register_symbolize_tests(void);
void register_symbolize_cfi_tests(void);
void register_perf_map_tests(void); /* symbolize/perf_map.c */
void register_hotspots_tests(void);
void register_profile_load_tests(void);
void register_stream_writer_tests(void); /* format/'s stream writer */
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

/* Absolute paths of the build and source trees (set by Makefile.am). */
#ifndef OPPROF_TEST_BUILDDIR
#define OPPROF_TEST_BUILDDIR "."
#endif
#ifndef OPPROF_TEST_SRCDIR
#define OPPROF_TEST_SRCDIR "."
#endif

#endif
