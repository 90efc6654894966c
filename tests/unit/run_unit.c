/* tests/unit/run_unit.c — runs every CUnit suite; exit status 1 on any failure. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>
#include "tests/unit/unit.h"

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--id-table-faults") == 0)
        return id_table_faults_probe(); /* test_stream_writer.c */
    if (CU_initialize_registry() != CUE_SUCCESS) {
        fprintf(stderr, "run_unit: CUnit could not initialize its registry\n");
        return 2;
    }
    register_symbolize_tests();
    register_symbolize_cfi_tests();
    register_perf_map_tests();
    register_hotspots_tests();
    register_profile_load_tests();
    register_compact_records_tests(); /* STACK_TAIL, PYSTACK_TAIL, SAMPLE_RUN */
    register_stream_writer_tests(); /* format/'s stream writer */
    register_stream_process_tests(); /* format/stream_process.c */
    register_report_tests();
    register_pmu_tests();
    register_metrics_tests();
    register_operators_tests();
    register_export_tests();
    register_threading_tests();
    register_sweep_tests(); /* sweeps and diffs */
    register_torch_shapes_tests(); /* record --torch-shapes */
    register_counters_tests(); /* per-sample counters */
    register_python_walk_tests(); /* the CPython frame walker on fake memory */
    register_hashmap_tests(); /* util/hashmap.c */
    register_python_lines_tests(); /* CPython line tables against the real interpreters */
    register_memory_tests(); /* memory over time (analyze/memory.c) */

    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    if (run == 0) {
        fprintf(stderr, "run_unit: no test ran\n");
        return 1;
    }
    return failed ? 1 : 0;
}
