/*
 * tests/unit/test_torch_shapes.c — analyze/torch_shapes.c: FLOPs per call by
 * the sweep's formulas (hand-computed), the reader of the hook's files on
 * malformed input (skipped and counted, never trusted), and which samples are
 * the hook's own cost.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "tests/unit/unit.h"

static void test_counts(void)
{
    double f, b;
    /* mm 64x32 @ 32x16: 2*64*32*16 FLOPs, (64*32 + 32*16 + 64*16) * 4 bytes */
    CU_ASSERT_EQUAL(torch_shapes_counts("aten::mm", "float32[64,32];float32[32,16]", &f, &b), 0);
    CU_ASSERT_DOUBLE_EQUAL(f, 2.0 * 64 * 32 * 16, 0);
    CU_ASSERT_DOUBLE_EQUAL(b, 4.0 * (64 * 32 + 32 * 16 + 64 * 16), 0);
    /* the same through the sweep */
    long d[3] = {64, 32, 16};
    double sf, sb;
    sweep_op_counts(SWEEP_OP_MM, d, 3, 4, &sf, &sb);
    CU_ASSERT_DOUBLE_EQUAL(f, sf, 0);
    /* addmm with a full matrix vs addmm from F.linear (bias vector) */
    CU_ASSERT_EQUAL(torch_shapes_counts("aten::addmm", "float32[8,16];float32[8,4];float32[4,16]", &f, &b), 0);
    CU_ASSERT_DOUBLE_EQUAL(f, 2.0 * 8 * 4 * 16 + 8 * 16, 0);
    CU_ASSERT_DOUBLE_EQUAL(b, 4.0 * (8 * 4 + 4 * 16 + 8 * 16 + 8 * 16), 0);
    CU_ASSERT_EQUAL(torch_shapes_counts("aten::addmm", "float32[16];float32[8,4];float32[4,16]", &f, &b), 0);
    CU_ASSERT_DOUBLE_EQUAL(b, 4.0 * (8 * 4 + 4 * 16 + 8 * 16 + 16), 0);
    /* bmm, baddbmm (float64: 8 bytes) */
    CU_ASSERT_EQUAL(torch_shapes_counts("aten::bmm", "float64[3,5,7];float64[3,7,2]", &f, &b), 0);
    CU_ASSERT_DOUBLE_EQUAL(f, 2.0 * 3 * 5 * 7 * 2, 0);
    CU_ASSERT_EQUAL(torch_shapes_counts("aten::baddbmm", "float32[3,5,2];float32[3,5,7];float32[3,7,2];1;1", &f, &b),
                    0);
    CU_ASSERT_DOUBLE_EQUAL(f, 2.0 * 3 * 5 * 7 * 2 + 3 * 5 * 2, 0);
    /* the sweep knows baddbmm too, with the same count */
    CU_ASSERT_EQUAL(sweep_op_parse("torch.baddbmm"), SWEEP_OP_BADDBMM);
    long bd[4] = {3, 5, 7, 2};
    CU_ASSERT_EQUAL(sweep_op_counts(SWEEP_OP_BADDBMM, bd, 4, 4, &sf, &sb), 0);
    CU_ASSERT_DOUBLE_EQUAL(sf, f, 0);
    /* softmax: 5 per element; layer_norm: 8 per element */
    CU_ASSERT_EQUAL(torch_shapes_counts("aten::_softmax", "float32[4,10];-1;False", &f, &b), 0);
    CU_ASSERT_DOUBLE_EQUAL(f, 5.0 * 40, 0);
    CU_ASSERT_EQUAL(torch_shapes_counts("aten::native_layer_norm", "float32[4,10];[10];float32[10];float32[10];1e-05",
                                        &f, &b), 0);
    CU_ASSERT_DOUBLE_EQUAL(f, 8.0 * 40, 0);
    CU_ASSERT_DOUBLE_EQUAL(b, 2.0 * 4 * 40 + 2.0 * 4 * 10, 0);
    /* convolution, stride 1 padding 1: output 5x5; stride 2 no padding: 2x2 */
    CU_ASSERT_EQUAL(torch_shapes_counts("aten::convolution",
                                        "float32[1,2,5,5];float32[3,2,3,3];None;[1,1];[1,1];[1,1];False;[0,0];1",
                                        &f, &b), 0);
    CU_ASSERT_DOUBLE_EQUAL(f, 2.0 * 1 * 3 * 5 * 5 * 2 * 3 * 3, 0);
    CU_ASSERT_EQUAL(torch_shapes_counts("aten::convolution",
                                        "float32[1,2,5,5];float32[3,2,3,3];None;[2,2];[0,0];[1,1];False;[0,0];1",
                                        &f, &b), 0);
    CU_ASSERT_DOUBLE_EQUAL(f, 2.0 * 3 * 2 * 2 * 2 * 3 * 3, 0);
    /* the sweep's conv2d (stride 1, no padding) is the same formula */
    long c[7] = {1, 2, 5, 5, 3, 3, 3};
    sweep_op_counts(SWEEP_OP_CONV2D, c, 7, 4, &sf, &sb);
    CU_ASSERT_DOUBLE_EQUAL(sf, 2.0 * 3 * 3 * 3 * 2 * 3 * 3, 0);
    /* no formula, or shapes that do not fit */
    CU_ASSERT_EQUAL(torch_shapes_counts("aten::add", "float32[4];float32[4]", &f, &b), -1);
    CU_ASSERT_EQUAL(torch_shapes_counts("aten::mm", "float32[4,3];float32[4,3]", &f, &b), -1);
    CU_ASSERT_EQUAL(torch_shapes_counts("aten::mm", "int8[4,3];int8[3,4]", &f, &b), -1);
    CU_ASSERT_EQUAL(torch_shapes_counts("aten::convolution",
                                        "float32[1,2,5,5];float32[3,2,3,3];None;[1,1];[0,0];[1,1];True;[0,0];1",
                                        &f, &b), -1); /* transposed */
    CU_ASSERT_EQUAL(torch_shapes_counts("aten::mm", "", &f, &b), -1);
    CU_ASSERT_EQUAL(torch_shapes_counts("aten::mm", "float32[99999999999999999999,1];float32[1,1]", &f, &b), -1);
}

static void test_parse_malformed(void)
{
    static const char text[] =
        TORCH_SHAPES_HEADER "\n"
        "torch\t1.13.1\tTorchDispatchMode\n"
        "cost\t2000\t3\n"
        "op\taten::mm\t3\t0\n"
        "sig\taten::mm\t3\tfloat32[2,3];float32[3,4]\n"
        "op\taten::mm\tx\t0\n"             /* count not a number */
        "op\taten::mm\t1\t5\n"             /* more unrecorded than calls */
        "op\tno_namespace\t1\t0\n"          /* not an operator name */
        "sig\taten::mm\t-1\tfloat32[2,3]\n" /* negative count */
        "cost\t1\n"                         /* a field missing */
        "what\tever\n"                      /* unknown key */
        "op\taten::bmm\t99999999999999999999999\t0\n" /* too large */
        "\n"
        "sig\taten::bmm\t1\tfloat32[1,2,3];float32[1,3,4]"; /* no newline: cut while written */
    struct torch_shapes ts = {0};
    char err[256];
    CU_ASSERT_EQUAL(torch_shapes_parse(&ts, text, sizeof text - 1, err, sizeof err), 0);
    CU_ASSERT_EQUAL(ts.bad_lines, 8);
    CU_ASSERT_EQUAL(ts.nops, 1);
    CU_ASSERT_EQUAL(ts.hook_ns, 2000);
    CU_ASSERT_EQUAL(ts.hook_calls, 3);
    CU_ASSERT_STRING_EQUAL(ts.api, "TorchDispatchMode");
    torch_shapes_compute(&ts);
    CU_ASSERT_EQUAL(ts.ops[0].calls, 3);
    CU_ASSERT_EQUAL(ts.ops[0].flops_calls, 3);
    CU_ASSERT_DOUBLE_EQUAL(ts.ops[0].flops, 3 * 2.0 * 2 * 3 * 4, 0);
    torch_shapes_free(&ts);

    /* not a hook file at all: one error */
    static const char other[] = "# something else\nop\taten::mm\t1\t0\n";
    CU_ASSERT_EQUAL(torch_shapes_parse(&ts, other, sizeof other - 1, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "not an opprof --torch-shapes file"));
    torch_shapes_free(&ts);
    /* signatures counting more calls than their op: said, calls raised */
    static const char contra[] = TORCH_SHAPES_HEADER "\nop\taten::mm\t1\t0\nsig\taten::mm\t5\tfloat32[2,3];float32[3,4]\n";
    CU_ASSERT_EQUAL(torch_shapes_parse(&ts, contra, sizeof contra - 1, err, sizeof err), 0);
    torch_shapes_compute(&ts);
    CU_ASSERT_EQUAL(ts.inconsistent_ops, 1);
    CU_ASSERT_EQUAL(ts.ops[0].calls, 5);
    torch_shapes_free(&ts);
    /* a NUL inside a line */
    static const char nul[] = TORCH_SHAPES_HEADER "\nop\taten::mm\0\t1\t0\n";
    CU_ASSERT_EQUAL(torch_shapes_parse(&ts, nul, sizeof nul - 1, err, sizeof err), 0);
    CU_ASSERT_EQUAL(ts.bad_lines, 1);
    CU_ASSERT_EQUAL(ts.nops, 0);
    torch_shapes_free(&ts);
}

/* A sample in the hook's Python code (leafward of the op it intercepted) is
 * the hook's; a sample in the kernel the hook forwarded to is the op's. */
static void test_hook_samples(void)
{
    struct profile *p = profile_new_empty();
    uint32_t user = profile_add_frame(p, "main", "train.py", "/w/train.py", 3, FRAME_PYTHON);
    uint32_t outer = profile_add_frame(p, "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", "libtorch_cpu.so",
                                       NULL, 0, FRAME_NATIVE);
    uint32_t hook = profile_add_frame(p, "OpprofTorchShapes.__torch_dispatch__", TORCH_SHAPES_HOOK_FILE,
                                      "/x/share/opprof/torch_shapes/" TORCH_SHAPES_HOOK_FILE, 120, FRAME_PYTHON);
    /* the hook forwards through torch/_ops.py into the boxed kernel: no
     * at::_ops frame there, the kernel's at::native frame */
    uint32_t ops_py = profile_add_frame(p, "OpOverload.__call__", "_ops.py", "/t/torch/_ops.py", 257, FRAME_PYTHON);
    uint32_t inner = profile_add_frame(p, "at::native::structured_mm_out_cpu::impl(at::Tensor const&)",
                                       "libtorch_cpu.so", NULL, 0, FRAME_NATIVE);
    uint32_t boxing = profile_add_frame(p, "torch::jit::invokeOperatorFromPython()", "libtorch_python.so", NULL, 0,
                                        FRAME_NATIVE);
    uint32_t kernel = profile_add_frame(p, "sgemm_", "libblas.so.3", NULL, 0, FRAME_NATIVE);
    uint32_t in_hook[] = {hook, outer, user};
    uint32_t in_kernel[] = {kernel, inner, boxing, ops_py, hook, outer, user};
    uint32_t in_boxing[] = {boxing, ops_py, hook, outer, user};
    uint32_t s_hook = profile_add_stack(p, in_hook, 3);
    uint32_t s_kernel = profile_add_stack(p, in_kernel, 7);
    uint32_t s_boxing = profile_add_stack(p, in_boxing, 5);
    /* in the dispatcher's call into Python, before any Python frame */
    uint32_t entry = profile_add_frame(p, "torch::handle_torch_function_no_python_arg_parser(c10::ArrayRef<pybind11::handle>)",
                                       "libtorch_python.so", NULL, 0, FRAME_NATIVE);
    uint32_t in_entry[] = {entry, outer, user};
    uint32_t s_entry = profile_add_stack(p, in_entry, 3);
    uint32_t t = profile_add_thread(p, 1, 1, "python");
    profile_add_sample(p, 1, t, s_hook, 1);
    profile_add_sample(p, 2, t, s_boxing, 1);
    for (int i = 0; i < 9; i++)
        profile_add_sample(p, 3 + (uint64_t)i, t, s_kernel, 1);
    CU_ASSERT_TRUE(torch_shapes_stack_is_hook(p, &p->stacks[s_hook]));
    CU_ASSERT_TRUE(torch_shapes_stack_is_hook(p, &p->stacks[s_boxing]));
    CU_ASSERT_FALSE(torch_shapes_stack_is_hook(p, &p->stacks[s_kernel]));
    CU_ASSERT_TRUE(torch_shapes_stack_is_hook(p, &p->stacks[s_entry]));
    CU_ASSERT_TRUE(torch_shapes_profile_has_hook(p));

    struct torch_shapes ts = {0};
    char err[256];
    static const char text[] = TORCH_SHAPES_HEADER "\nop\taten::mm\t10\t0\nsig\taten::mm\t10\tfloat32[2,3];float32[3,4]\n";
    CU_ASSERT_EQUAL(torch_shapes_parse(&ts, text, sizeof text - 1, err, sizeof err), 0);
    torch_shapes_compute(&ts);
    CU_ASSERT_EQUAL(torch_shapes_attach_samples(p, &ts), 0);
    CU_ASSERT_EQUAL(ts.hook_weight, 2);
    CU_ASSERT_EQUAL(ts.ops[0].self_weight, 9);
    CU_ASSERT_EQUAL(ts.ops[0].total_weight, 9);
    /* the operator table: the hook has its own row */
    struct hotspot_table tab;
    CU_ASSERT_EQUAL(hotspots_compute(p, GROUP_OP, &tab), 0);
    bool hook_row = false;
    for (size_t i = 0; i < tab.nrows; i++) {
        if (!strcmp(tab.rows[i].name, TORCH_SHAPES_HOOK_ROW)) {
            hook_row = true;
            CU_ASSERT_EQUAL(tab.rows[i].self, 2);
        } else if (!strcmp(tab.rows[i].name, "aten::mm")) {
            CU_ASSERT_EQUAL(tab.rows[i].self, 9);
        }
    }
    CU_ASSERT_TRUE(hook_row);
    hotspots_free(&tab);
    torch_shapes_free(&ts);
    profile_free(p);
}

void register_torch_shapes_tests(void)
{
    CU_pSuite s = CU_add_suite("torch_shapes", NULL, NULL);
    CU_add_test(s, "FLOPs per call by the sweep's formulas", test_counts);
    CU_add_test(s, "hook files: malformed lines skipped and counted", test_parse_malformed);
    CU_add_test(s, "hook samples are the hook's, not the operator's", test_hook_samples);
}
