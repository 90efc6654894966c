/*
 * tests/unit/test_operators.c — PyTorch operator attribution: op-name
 * normalization on real libtorch 1.13.1 symbol names (nm -D -C), the op /
 * line / python / kernel views and an operator's callers on hand-built
 * spliced stacks, phases, findings at their thresholds, and the summary
 * sections of the report.
 */
#ifndef _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "analyze/analyze.h"
#include "report/report.h"
#include "tests/unit/unit.h"

/* ------------------------------------------------------------------------- */
/* Normalization                                                              */
/* ------------------------------------------------------------------------- */

static const struct {
    const char *frame;
    enum op_frame_kind kind;
    const char *op;
} names[] = {
    /* ATen entry points, as Debian's libtorch_cpu.so exports them. */
    {"at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)", OP_FRAME_ATEN, "aten::add"},
    {"at::_ops::_softmax::call(at::Tensor const&, long, bool)", OP_FRAME_ATEN, "aten::_softmax"},
    {"at::_ops::native_layer_norm_backward::call(at::Tensor const&, at::Tensor const&)", OP_FRAME_ATEN,
     "aten::native_layer_norm_backward"},
    {"at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", OP_FRAME_ATEN, "aten::mm"},
    {"at::_ops::bmm::redispatch(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&)", OP_FRAME_ATEN, "aten::bmm"},
    {"at::_ops::copy_::call(at::Tensor&, at::Tensor const&, bool)", OP_FRAME_ATEN, "aten::copy_"},
    {"at::_ops::div_Tensor::call(at::Tensor const&, at::Tensor const&)", OP_FRAME_ATEN, "aten::div"},
    {"at::_ops::sum_dim_IntList::call(at::Tensor const&, c10::OptionalArrayRef<long>, bool)", OP_FRAME_ATEN, "aten::sum"},
    {"at::_ops::mean_dim::call(at::Tensor const&, c10::OptionalArrayRef<long>, bool)", OP_FRAME_ATEN, "aten::mean"},
    {"at::_ops::add__Tensor::call(at::Tensor&, at::Tensor const&, c10::Scalar const&)", OP_FRAME_ATEN, "aten::add_"},
    {"at::_ops::addmm_out::call(at::Tensor const&, at::Tensor const&, at::Tensor&)", OP_FRAME_ATEN, "aten::addmm"},
    {"at::_ops::addmm::call(at::Tensor const&, at::Tensor const&, at::Tensor const&)", OP_FRAME_ATEN, "aten::addmm"},
    {"at::_ops::_softmax_backward_data::call(at::Tensor const&, at::Tensor const&, long)", OP_FRAME_ATEN,
     "aten::_softmax_backward_data"},
    {"at::_ops::_log_softmax_backward_data::call(at::Tensor const&, at::Tensor const&)", OP_FRAME_ATEN,
     "aten::_log_softmax_backward_data"},
    {"at::_ops::native_layer_norm::call(at::Tensor const&, c10::ArrayRef<c10::SymInt>)", OP_FRAME_ATEN,
     "aten::native_layer_norm"},
    {"at::_ops::linear::call(at::Tensor const&, at::Tensor const&)", OP_FRAME_ATEN, "aten::linear"},
    {"at::_ops::mul_Tensor::call(at::Tensor const&, at::Tensor const&)", OP_FRAME_ATEN, "aten::mul"},
    {"at::_ops::mul__Scalar::call(at::Tensor&, c10::Scalar const&)", OP_FRAME_ATEN, "aten::mul_"},
    {"at::_ops::gelu_backward::call(at::Tensor const&, at::Tensor const&)", OP_FRAME_ATEN, "aten::gelu_backward"},
    {"at::_ops::threshold_backward::call(at::Tensor const&, at::Tensor const&)", OP_FRAME_ATEN,
     "aten::threshold_backward"},
    {"at::_ops::embedding_dense_backward::call(at::Tensor const&, at::Tensor const&)", OP_FRAME_ATEN,
     "aten::embedding_dense_backward"},
    {"at::_ops::index_select::call(at::Tensor const&, long, at::Tensor const&)", OP_FRAME_ATEN, "aten::index_select"},
    {"at::_ops::cat::call(c10::ArrayRef<at::Tensor> const&, long)", OP_FRAME_ATEN, "aten::cat"},
    {"at::_ops::var_mean_correction::call(at::Tensor const&, c10::OptionalArrayRef<long>)", OP_FRAME_ATEN,
     "aten::var_mean"},
    {"at::_ops::flatten_using_ints::call(at::Tensor const&, long, long)", OP_FRAME_ATEN, "aten::flatten"},
    {"at::_ops::to_dtype_layout::call(at::Tensor const&, c10::optional<c10::ScalarType>)", OP_FRAME_ATEN, "aten::to"},
    {"at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>)", OP_FRAME_ATEN, "aten::empty"},
    {"at::_ops::unique_dim::call(at::Tensor const&, long, bool, bool, bool)", OP_FRAME_ATEN, "aten::unique_dim"},
    {"at::_ops::take_along_dim_out::call(at::Tensor const&, at::Tensor const&)", OP_FRAME_ATEN,
     "aten::take_along_dim"},
    {"at::_ops::clamp_min_Tensor::call(at::Tensor const&, at::Tensor const&)", OP_FRAME_ATEN, "aten::clamp_min"},
    {"at::_ops::all_dim::call(at::Tensor const&, long, bool)", OP_FRAME_ATEN, "aten::all"},
    {"at::_ops::bitwise_or_Tensor::call(at::Tensor const&, at::Tensor const&)", OP_FRAME_ATEN, "aten::bitwise_or"},
    {"at::_ops::split_with_sizes::call(at::Tensor const&, c10::ArrayRef<long>, long)", OP_FRAME_ATEN,
     "aten::split_with_sizes"},
    {"at::_ops::max_pool2d_with_indices::call(at::Tensor const&, c10::ArrayRef<long>)", OP_FRAME_ATEN,
     "aten::max_pool2d_with_indices"},
    {"at::_ops::_foreach_add__List::call(c10::ArrayRef<at::Tensor>, c10::ArrayRef<at::Tensor>)", OP_FRAME_ATEN,
     "aten::_foreach_add_"},
    /* Autograd nodes. */
    {"torch::autograd::generated::AddmmBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
     OP_FRAME_AUTOGRAD, "AddmmBackward0"},
    {"torch::autograd::generated::NativeLayerNormBackward0::apply(std::vector<at::Tensor, "
     "std::allocator<at::Tensor> >&&)",
     OP_FRAME_AUTOGRAD, "NativeLayerNormBackward0"},
    {"torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
     OP_FRAME_AUTOGRAD, "AccumulateGrad"},
    /* Kernels named after ops: operator frames only without at::_ops. */
    {"at::native::structured_mm_out_cpu::impl(at::Tensor const&, at::Tensor const&, at::Tensor const&)",
     OP_FRAME_FALLBACK, "aten::mm"},
    {"at::native::add(at::Tensor const&, c10::Scalar const&, c10::Scalar const&)", OP_FRAME_FALLBACK, "aten::add"},
    {"at::native::copy_(at::Tensor&, at::Tensor const&, bool)", OP_FRAME_FALLBACK, "aten::copy_"},
    {"at::cpu::add_out(at::Tensor&, at::Tensor const&, at::Tensor const&, c10::Scalar const&)", OP_FRAME_FALLBACK,
     "aten::add"},
    {"at::cpu::_softmax(at::Tensor const&, long, bool)", OP_FRAME_FALLBACK, "aten::_softmax"},
    /* Torch 1.7 (Debian bullseye): no at::_ops; ATen's free functions and
     * Tensor methods are the entries, kernels carry _cpu before _out. */
    {"at::mm(at::Tensor const&, at::Tensor const&)", OP_FRAME_ATEN, "aten::mm"},
    {"at::Tensor::mm(at::Tensor const&) const", OP_FRAME_ATEN, "aten::mm"},
    {"at::addmm(at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar, c10::Scalar)", OP_FRAME_ATEN,
     "aten::addmm"},
    {"at::empty(c10::ArrayRef<long>, c10::TensorOptions const&, c10::optional<c10::MemoryFormat>)", OP_FRAME_ATEN,
     "aten::empty"},
    {"at::native::addmm_cpu_out(at::Tensor&, at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar, "
     "c10::Scalar)",
     OP_FRAME_FALLBACK, "aten::addmm"},
    {"at::native::mm_cpu(at::Tensor const&, at::Tensor const&)", OP_FRAME_FALLBACK, "aten::mm"},
    {"at::native::mean_cpu_gpu(at::Tensor const&, c10::optional<c10::ScalarType>)", OP_FRAME_FALLBACK, "aten::mean"},
    {"at::native::mean_out_cpu_gpu(at::Tensor&, at::Tensor const&, c10::ArrayRef<long>, bool)", OP_FRAME_FALLBACK,
     "aten::mean"},
    {"torch::autograd::generated::MmBackward::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
     OP_FRAME_AUTOGRAD, "MmBackward"},
    {"at::globalContext()", OP_FRAME_NONE, NULL},
    {"at::get_num_threads()", OP_FRAME_NONE, NULL},
    {"at::parallel_for<at::native::(anonymous namespace)::f>(long, long, long, f const&)", OP_FRAME_NONE, NULL},
    {"at::internal::invoke_parallel(long, long, long, std::function<void (long, long)> const&)", OP_FRAME_NONE,
     NULL},
    {"at::TensorIterator::for_each(c10::function_ref<void (char**, long const*, long)>)", OP_FRAME_NONE, NULL},
    /* Not operator frames. */
    {"at::native::(anonymous namespace)::addmm_impl_cpu_(at::Tensor&, at::Tensor const&)", OP_FRAME_NONE, NULL},
    {"at::native::DEFAULT::(anonymous namespace)::add_kernel(at::TensorIteratorBase&, c10::Scalar const&)",
     OP_FRAME_NONE, NULL},
    {"at::native::cpublas::gemm(at::native::TransposeType, long, long, long)", OP_FRAME_NONE, NULL},
    {"torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&)", OP_FRAME_NONE, NULL},
    {"torch::autograd::VariableType::(anonymous namespace)::addmm(c10::DispatchKeySet, at::Tensor const&)",
     OP_FRAME_NONE, NULL},
    {"torch::autograd::THPVariable_linear(_object*, _object*, _object*)", OP_FRAME_NONE, NULL},
    {"at::_ops::mm::name", OP_FRAME_NONE, NULL},
    {"sgemm_", OP_FRAME_NONE, NULL},
    {"libtorch_cpu.so+0x1a2b3c", OP_FRAME_NONE, NULL},
    {"", OP_FRAME_NONE, NULL},
};

static void test_normalization_table(void)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char buf[256] = "";
        enum op_frame_kind k = op_frame_classify(names[i].frame, buf, sizeof buf);
        if (k != names[i].kind || (names[i].op && strcmp(buf, names[i].op) != 0))
            fprintf(stderr, "\n  %s -> kind %d '%s' (want %d '%s')", names[i].frame, (int)k, buf,
                    (int)names[i].kind, names[i].op ? names[i].op : "");
        CU_ASSERT_EQUAL(k, names[i].kind);
        if (names[i].op)
            CU_ASSERT_STRING_EQUAL(buf, names[i].op);
        const char *n = op_name_from_frame(names[i].frame, buf, sizeof buf);
        CU_ASSERT((n != NULL) == (names[i].op != NULL));
    }
}

static void test_normalization_edges(void)
{
    char small[8];
    /* Does not fit: no operator rather than a cut name. */
    CU_ASSERT_EQUAL(op_frame_classify("at::_ops::native_layer_norm::call()", small, sizeof small), OP_FRAME_NONE);
    CU_ASSERT_PTR_NULL(op_name_from_frame(NULL, small, sizeof small));
    CU_ASSERT(op_name_matches("aten::bmm", "bmm"));
    CU_ASSERT(op_name_matches("aten::bmm", "aten::bmm"));
    CU_ASSERT(op_name_matches("AddmmBackward0", "AddmmBackward0"));
    CU_ASSERT_FALSE(op_name_matches("aten::bmm", "mm"));
    CU_ASSERT_FALSE(op_name_matches("aten::bmm", ""));
}

/* ------------------------------------------------------------------------- */
/* A spliced PyTorch profile                                                  */
/* ------------------------------------------------------------------------- */

#define TORCH_PY "/usr/lib/python3/dist-packages/torch/"

/*
 * Stacks, leaf first (weights in brackets), total weight 20:
 *  S1 [5] sgemm_ < addmm_impl_cpu_ < mm::call < addmm::redispatch < VariableType::addmm
 *         < addmm::call < linear::call < THPVariable_linear < Linear.forward@linear.py:114
 *         < Module._call_impl@module.py:1194 < step@train.py:42 < <module>@train.py:60 < main
 *  S2 [2] addmm_impl_cpu_ < at::native::copy_ (fallback: ignored) < addmm::call < linear::call
 *         < THPVariable_linear < forward@114 < _call_impl < step@42 < <module>@60
 *  S3 [1] linear::call < THPVariable_linear < forward@114 < _call_impl < step@43 < <module>@60
 *  S4 [3] sgemm_ < mm::call < AddmmBackward0::apply < Engine::evaluate_function < start_thread
 *  S5 [1] libtorch_cpu.so+0x1234 < AddmmBackward0::apply < Engine::evaluate_function
 *  S6 [4] long_add (python3.11) < step@train.py:50 < <module>@60 < main
 *  S7 [1] add__Tensor::call < SGD.step@torch/optim/sgd.py:150 < step@45 < <module>@60
 *  S8 [1] stack::call < default_collate@torch/utils/data/_utils/collate.py:141 < <module>@60
 *  S9 [1] at::cpu::add_out (fallback, no at::_ops: counts as aten::add)
 *  S10 [1] (no frames)
 */
static struct profile *make_torch(void)
{
    struct profile *p = profile_new_empty();
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const char *cpu = "libtorch_cpu.so", *pyl = "libtorch_python.so";
    uint32_t sgemm = profile_add_frame(p, "sgemm_", "libblas.so.3", NULL, 0, FRAME_NATIVE);
    uint32_t sgemm2 = profile_add_frame(p, "sgemm_", "libblas.so.3", NULL, 0, FRAME_NATIVE); /* another PC */
    uint32_t impl = profile_add_frame(p, "at::native::(anonymous namespace)::addmm_impl_cpu_(at::Tensor&)", cpu,
                                      NULL, 0, FRAME_NATIVE);
    uint32_t mm = profile_add_frame(p, "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", cpu, NULL, 0,
                                    FRAME_NATIVE);
    uint32_t addmm_r = profile_add_frame(p, "at::_ops::addmm::redispatch(c10::DispatchKeySet)", cpu, NULL, 0,
                                         FRAME_NATIVE);
    uint32_t vt = profile_add_frame(p, "torch::autograd::VariableType::(anonymous namespace)::addmm(c10::DispatchKeySet)",
                                    cpu, NULL, 0, FRAME_NATIVE);
    uint32_t addmm = profile_add_frame(p, "at::_ops::addmm::call(at::Tensor const&)", cpu, NULL, 0, FRAME_NATIVE);
    uint32_t linear = profile_add_frame(p, "at::_ops::linear::call(at::Tensor const&)", cpu, NULL, 0, FRAME_NATIVE);
    uint32_t thp = profile_add_frame(p, "torch::autograd::THPVariable_linear(_object*, _object*, _object*)", pyl,
                                     NULL, 0, FRAME_NATIVE);
    uint32_t copy = profile_add_frame(p, "at::native::copy_(at::Tensor&, at::Tensor const&, bool)", cpu, NULL, 0,
                                      FRAME_NATIVE);
    uint32_t fwd = profile_add_frame(p, "Linear.forward", "linear.py", TORCH_PY "nn/modules/linear.py", 114,
                                     FRAME_PYTHON);
    uint32_t call = profile_add_frame(p, "Module._call_impl", "module.py", TORCH_PY "nn/modules/module.py", 1194,
                                      FRAME_PYTHON);
    uint32_t step42 = profile_add_frame(p, "step", "train.py", "/home/u/train.py", 42, FRAME_PYTHON);
    uint32_t step43 = profile_add_frame(p, "step", "train.py", "/home/u/train.py", 43, FRAME_PYTHON);
    uint32_t step45 = profile_add_frame(p, "step", "train.py", "/home/u/train.py", 45, FRAME_PYTHON);
    uint32_t step50 = profile_add_frame(p, "step", "train.py", "/home/u/train.py", 50, FRAME_PYTHON);
    uint32_t top = profile_add_frame(p, "<module>", "train.py", "/home/u/train.py", 60, FRAME_PYTHON);
    uint32_t main_ = profile_add_frame(p, "main", "python3.11", NULL, 0, FRAME_NATIVE);
    uint32_t node = profile_add_frame(p, "torch::autograd::generated::AddmmBackward0::apply(std::vector<at::Tensor>&&)",
                                      cpu, NULL, 0, FRAME_NATIVE);
    uint32_t eval = profile_add_frame(p, "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&)",
                                      cpu, NULL, 0, FRAME_NATIVE);
    uint32_t start = profile_add_frame(p, "start_thread", "libc.so.6", NULL, 0, FRAME_NATIVE);
    uint32_t unk = profile_add_frame(p, "libtorch_cpu.so+0x1234", cpu, NULL, 0, FRAME_UNKNOWN);
    uint32_t ladd = profile_add_frame(p, "long_add", "python3.11", NULL, 0, FRAME_NATIVE);
    uint32_t add_ = profile_add_frame(p, "at::_ops::add__Tensor::call(at::Tensor&)", cpu, NULL, 0, FRAME_NATIVE);
    uint32_t sgd = profile_add_frame(p, "SGD.step", "sgd.py", TORCH_PY "optim/sgd.py", 150, FRAME_PYTHON);
    uint32_t stack = profile_add_frame(p, "at::_ops::stack::call(c10::ArrayRef<at::Tensor>, long)", cpu, NULL, 0,
                                       FRAME_NATIVE);
    uint32_t collate = profile_add_frame(p, "default_collate", "collate.py", TORCH_PY "utils/data/_utils/collate.py",
                                         141, FRAME_PYTHON);
    uint32_t cpuadd = profile_add_frame(p, "at::cpu::add_out(at::Tensor&, at::Tensor const&)", cpu, NULL, 0,
                                        FRAME_NATIVE);

    uint32_t s1[] = {sgemm, impl, mm, addmm_r, vt, addmm, linear, thp, fwd, call, step42, top, main_};
    uint32_t s2[] = {impl, copy, addmm, linear, thp, fwd, call, step42, top};
    uint32_t s3[] = {linear, thp, fwd, call, step43, top};
    uint32_t s4[] = {sgemm2, mm, node, eval, start};
    uint32_t s5[] = {unk, node, eval};
    uint32_t s6[] = {ladd, step50, top, main_};
    uint32_t s7[] = {add_, sgd, step45, top};
    uint32_t s8[] = {stack, collate, top};
    uint32_t s9[] = {cpuadd};
    uint32_t t0 = profile_add_thread(p, 10, 10, "python3");
    uint32_t t1 = profile_add_thread(p, 10, 11, "pt_autograd_0");
    struct {
        const uint32_t *f;
        uint32_t n, thread, weight;
    } st[] = {
        {s1, 13, t0, 5}, {s2, 9, t0, 2}, {s3, 6, t0, 1}, {s4, 5, t1, 3}, {s5, 3, t1, 1},
        {s6, 4, t0, 4},  {s7, 4, t0, 1}, {s8, 3, t0, 1}, {s9, 1, t0, 1}, {NULL, 0, t0, 1},
    };
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++)
        profile_add_sample(p, i + 1, st[i].thread, profile_add_stack(p, st[i].f, st[i].n), st[i].weight);
    p->period_ns = 1000000;
    return p;
}

static const struct hotspot_row *find(const struct hotspot_table *t, const char *name, const char *detail)
{
    for (size_t i = 0; i < t->nrows; i++)
        if (strcmp(t->rows[i].name, name) == 0 &&
            (!detail || (t->rows[i].detail && strcmp(t->rows[i].detail, detail) == 0)))
            return &t->rows[i];
    return NULL;
}

#define ROW(t, name, detail, s, tot)                          \
    do {                                                      \
        const struct hotspot_row *r_ = find((t), (name), (detail)); \
        CU_ASSERT_PTR_NOT_NULL_FATAL(r_);                     \
        CU_ASSERT_EQUAL(r_->self, (s));                       \
        CU_ASSERT_EQUAL(r_->total, (tot));                    \
    } while (0)

static uint64_t sum_self(const struct hotspot_table *t)
{
    uint64_t s = 0;
    for (size_t i = 0; i < t->nrows; i++)
        s += t->rows[i].self;
    return s;
}

static void test_group_by_op(void)
{
    struct profile *p = make_torch();
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_OP, &t), 0);
    CU_ASSERT_EQUAL(t.total_weight, 20);
    ROW(&t, "aten::mm", NULL, 8, 8);       /* S1 + S4: innermost wins */
    ROW(&t, "aten::addmm", NULL, 2, 7);    /* call + redispatch in S1 counted once */
    ROW(&t, "aten::linear", NULL, 1, 8);
    ROW(&t, "AddmmBackward0", NULL, 1, 4); /* node without an ATen op under it */
    ROW(&t, "aten::add_", NULL, 1, 1);
    ROW(&t, "aten::stack", NULL, 1, 1);
    ROW(&t, "aten::add", NULL, 1, 1);      /* at::cpu::add_out alone */
    ROW(&t, NO_OPERATOR_NAME, NULL, 5, 5);
    CU_ASSERT_PTR_NULL(find(&t, "aten::copy_", NULL)); /* at::native under at::_ops */
    CU_ASSERT_EQUAL(t.nrows, 8);
    CU_ASSERT_EQUAL(sum_self(&t), 20);
    /* Top caller: 5 of mm's 8 from train.py:42 (the caller is the innermost
     * Python frame outside the torch package: Linear.forward and _call_impl
     * live in torch/nn and are skipped). */
    const struct hotspot_row *mm = find(&t, "aten::mm", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mm->detail);
    CU_ASSERT(strncmp(mm->detail, "train.py:42 step (6", 19) == 0);
    CU_ASSERT_STRING_EQUAL(find(&t, "AddmmBackward0", NULL)->detail, "[no Python frame] (100 %)");
    CU_ASSERT_PTR_NULL(find(&t, NO_OPERATOR_NAME, NULL)->detail);
    hotspots_sort(&t, SORT_SELF);
    CU_ASSERT_STRING_EQUAL(t.rows[0].name, "aten::mm");
    hotspots_free(&t);
    profile_free(p);
}

static void test_group_by_line_and_python(void)
{
    struct profile *p = make_torch();
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_LINE, &t), 0);
    ROW(&t, "linear.py:114", "Linear.forward", 8, 8);
    ROW(&t, "module.py:1194", "Module._call_impl", 0, 8);
    ROW(&t, "train.py:42", "step", 0, 7);
    ROW(&t, "train.py:43", "step", 0, 1);
    ROW(&t, "train.py:50", "step", 4, 4);
    ROW(&t, "train.py:60", "<module>", 0, 14);
    ROW(&t, "sgd.py:150", "SGD.step", 1, 1);
    ROW(&t, "collate.py:141", "default_collate", 1, 1);
    ROW(&t, NO_PYTHON_FRAME_NAME, NULL, 6, 6);
    CU_ASSERT_STRING_EQUAL(find(&t, "train.py:42", NULL)->source, "/home/u/train.py:42");
    CU_ASSERT_PTR_NULL(find(&t, "train.py:42", NULL)->module);
    CU_ASSERT_STRING_EQUAL(t.detail_title, "Function");
    CU_ASSERT_EQUAL(sum_self(&t), 20);
    hotspots_free(&t);

    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_PYTHON, &t), 0);
    ROW(&t, "step", NULL, 4, 13); /* lines 42, 43, 45, 50 are one function */
    ROW(&t, "Linear.forward", NULL, 8, 8);
    const struct hotspot_row *step = find(&t, "step", NULL);
    CU_ASSERT_STRING_EQUAL(step->module, "train.py");
    CU_ASSERT_STRING_EQUAL(step->source, "/home/u/train.py:42");
    CU_ASSERT_EQUAL(sum_self(&t), 20);
    hotspots_free(&t);
    profile_free(p);
}

static void test_group_by_kernel(void)
{
    struct profile *p = make_torch();
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_KERNEL, &t), 0);
    ROW(&t, "sgemm_", "aten::mm", 8, 8); /* two PCs, forward and backward: one row */
    CU_ASSERT_STRING_EQUAL(find(&t, "sgemm_", NULL)->module, "libblas.so.3");
    ROW(&t, "at::native::(anonymous namespace)::addmm_impl_cpu_(at::Tensor&)", "aten::addmm", 2, 2);
    ROW(&t, "libtorch_cpu.so+0x1234", "AddmmBackward0", 1, 1);
    /* CPython's long_add is the interpreter, not a kernel */
    ROW(&t, "[not a kernel: Python interpreter]", NULL, 4, 4);
    CU_ASSERT_PTR_NULL(find(&t, "long_add", NULL));
    ROW(&t, NO_NATIVE_FRAME_NAME, NULL, 1, 1);
    CU_ASSERT_STRING_EQUAL(t.detail_title, "Operator");
    CU_ASSERT_EQUAL(sum_self(&t), 20);
    hotspots_free(&t);
    profile_free(p);
}

/* A native program: --group-by kernel keeps its own code, puts libc, system
 * calls and library constructors in their rows; --group-by line shows its
 * source lines (no Python frame anywhere). */
static void test_native_kernel_and_line_views(void)
{
    struct profile *p = profile_new_empty();
    uint32_t th = profile_add_thread(p, 1, 1, "app");
    uint32_t spin = profile_add_frame(p, "spin", "app", "/src/app.c", 12, FRAME_NATIVE);
    uint32_t work = profile_add_frame(p, "work", "app", "/src/app.c", 30, FRAME_NATIVE);
    uint32_t main_ = profile_add_frame(p, "main", "app", "/src/app.c", 50, FRAME_NATIVE);
    uint32_t strip = profile_add_frame(p, "spin_c", "libstripped.so", NULL, 0, FRAME_NATIVE);
    uint32_t brk = profile_add_frame(p, "brk", "/lib/x86_64-linux-gnu/libc.so.6", NULL, 0, FRAME_NATIVE);
    uint32_t kern = profile_add_frame(p, "[k] clear_page_erms", "[kernel.kallsyms]", NULL, 0, FRAME_NATIVE);
    uint32_t ctor = profile_add_frame(p, "table_init", "libcodec.so", NULL, 0, FRAME_NATIVE);
    uint32_t init = profile_add_frame(p, "_dl_init", "ld-linux-x86-64.so.2", NULL, 0, FRAME_NATIVE);
    uint32_t a[] = {spin, work, main_}, b[] = {strip, work, main_}, c[] = {brk, work, main_},
             d[] = {kern, brk, work, main_}, e[] = {ctor, init};
    struct {
        uint32_t *f, n, w;
    } st[] = {{a, 3, 6}, {b, 3, 3}, {c, 3, 2}, {d, 4, 1}, {e, 2, 4}};
    uint64_t ts = 1;
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
        uint32_t id = profile_add_stack(p, st[i].f, st[i].n);
        for (uint32_t k = 0; k < st[i].w; k++)
            profile_add_sample(p, ts++, th, id, 1);
    }
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_KERNEL, &t), 0);
    ROW(&t, "spin", NULL, 6, 6);
    ROW(&t, "spin_c", NULL, 3, 3);
    ROW(&t, "[not a kernel: libc, loader, C++ runtime]", NULL, 2, 2);
    ROW(&t, "[not a kernel: system calls and the OS]", NULL, 1, 1);
    ROW(&t, "[not a kernel: start-up, imports, exit]", NULL, 4, 4);
    CU_ASSERT_PTR_NULL(find(&t, "brk", NULL));
    CU_ASSERT_PTR_NULL(find(&t, "table_init", NULL));
    CU_ASSERT_EQUAL(sum_self(&t), 16);
    hotspots_free(&t);

    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_LINE, &t), 0);
    ROW(&t, "app.c:12", "spin", 6, 6);
    ROW(&t, "[no line info]", "spin_c", 3, 3); /* not moved to work's line */
    ROW(&t, "[no line info]", "brk", 2, 2); /* frames without lines count at the leaf only */
    ROW(&t, "[no line info]", "[k] clear_page_erms", 1, 1);
    ROW(&t, "app.c:30", "work", 0, 12);
    ROW(&t, "app.c:50", "main", 0, 12);
    ROW(&t, "[no line info]", "table_init", 4, 4);
    CU_ASSERT_PTR_NULL(find(&t, NO_PYTHON_FRAME_NAME, NULL));
    CU_ASSERT_STRING_EQUAL(find(&t, "app.c:12", NULL)->source, "/src/app.c:12");
    CU_ASSERT_EQUAL(sum_self(&t), 16);
    hotspots_free(&t);
    profile_free(p);
}

static void test_callers_of_operator(void)
{
    struct profile *p = make_torch();
    char op[64];
    CU_ASSERT(hotspots_find_operator(p, "mm", op, sizeof op));
    CU_ASSERT_STRING_EQUAL(op, "aten::mm");
    CU_ASSERT(hotspots_find_operator(p, "aten::addmm", op, sizeof op));
    CU_ASSERT_FALSE(hotspots_find_operator(p, "bmm", op, sizeof op));

    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_neighbours(p, "mm", false, &t), 0);
    CU_ASSERT_EQUAL(t.share_denominator, 8);
    CU_ASSERT_EQUAL(t.nrows, 2);
    ROW(&t, "train.py:42", "step", 5, 5);
    ROW(&t, NO_PYTHON_FRAME_NAME, NULL, 3, 3);
    hotspots_free(&t);

    /* addmm: innermost in S2 only; S1's caller is found rootward of its
     * innermost addmm frame (the redispatch). */
    CU_ASSERT_EQUAL_FATAL(hotspots_neighbours(p, "aten::addmm", false, &t), 0);
    CU_ASSERT_EQUAL(t.share_denominator, 7);
    ROW(&t, "train.py:42", "step", 2, 7);
    CU_ASSERT_EQUAL(t.nrows, 1);
    hotspots_free(&t);

    /* Callees of an operator: its kernels. */
    CU_ASSERT_EQUAL_FATAL(hotspots_neighbours(p, "mm", true, &t), 0);
    CU_ASSERT_EQUAL(t.share_denominator, 8);
    CU_ASSERT_EQUAL(t.nrows, 1);
    ROW(&t, "sgemm_", NULL, 8, 8);
    hotspots_free(&t);

    /* A function name keeps the function behaviour. */
    CU_ASSERT_EQUAL_FATAL(hotspots_neighbours(p, "sgemm_", false, &t), 0);
    CU_ASSERT_EQUAL(t.share_denominator, 0);
    CU_ASSERT_PTR_NOT_NULL(find(&t, "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", NULL));
    hotspots_free(&t);
    profile_free(p);
}

static void test_group_names(void)
{
    const char *words[] = {"op", "line", "python", "kernel"};
    enum group_by want[] = {GROUP_OP, GROUP_LINE, GROUP_PYTHON, GROUP_KERNEL};
    for (size_t i = 0; i < 4; i++) {
        enum group_by by;
        CU_ASSERT_EQUAL(group_by_parse(words[i], &by), 0);
        CU_ASSERT_EQUAL(by, want[i]);
        CU_ASSERT_STRING_EQUAL(group_by_name(want[i]), words[i]);
    }
}

/* ------------------------------------------------------------------------- */
/* Phases                                                                     */
/* ------------------------------------------------------------------------- */

static void test_phases(void)
{
    struct profile *p = make_torch();
    struct phase_summary ph;
    CU_ASSERT_EQUAL_FATAL(phases_compute(p, &ph), 0);
    CU_ASSERT(ph.pytorch);
    CU_ASSERT_EQUAL(ph.weight[PHASE_FORWARD], 9);   /* S1 S2 S3 S9 */
    CU_ASSERT_EQUAL(ph.weight[PHASE_BACKWARD], 4);  /* S4 S5: engine thread, no Python */
    CU_ASSERT_EQUAL(ph.weight[PHASE_OPTIMIZER], 1); /* S7: an op, but under SGD.step */
    CU_ASSERT_EQUAL(ph.weight[PHASE_DATA_LOADING], 1);
    CU_ASSERT_EQUAL(ph.weight[PHASE_OTHER], 5);     /* S6 pure Python, S10 empty */
    CU_ASSERT_EQUAL(ph.samples[PHASE_FORWARD], 4);
    CU_ASSERT_EQUAL(ph.total_weight, 20);
    /* phase_of_stack agrees stack by stack. */
    enum phase want[] = {PHASE_FORWARD, PHASE_FORWARD, PHASE_FORWARD, PHASE_BACKWARD, PHASE_BACKWARD,
                         PHASE_OTHER, PHASE_OPTIMIZER, PHASE_DATA_LOADING, PHASE_FORWARD, PHASE_OTHER};
    for (size_t i = 0; i < p->nsamples && i < 10; i++)
        CU_ASSERT_EQUAL(phase_of_stack(p, &p->stacks[p->samples[i].stack]), want[i]);
    CU_ASSERT_STRING_EQUAL(phase_name(PHASE_OPTIMIZER), "optimizer step");
    profile_free(p);

    /* Python-only evidence: backward() on the main thread, Optimizer.step
     * outside torch/optim, a forward method with no op under it. */
    p = profile_new_empty();
    uint32_t bw = profile_add_frame(p, "backward", "_tensor.py", TORCH_PY "_tensor.py", 487, FRAME_PYTHON);
    uint32_t os = profile_add_frame(p, "Optimizer.step", "opt.py", "/home/u/opt.py", 9, FRAME_PYTHON);
    uint32_t fw = profile_add_frame(p, "Net.forward", "net.py", "/home/u/net.py", 5, FRAME_PYTHON);
    uint32_t a[] = {bw}, b[] = {os, bw}, c[] = {fw};
    uint32_t sa = profile_add_stack(p, a, 1), sb = profile_add_stack(p, b, 2), sc = profile_add_stack(p, c, 1);
    CU_ASSERT_EQUAL(phase_of_stack(p, &p->stacks[sa]), PHASE_BACKWARD);
    CU_ASSERT_EQUAL(phase_of_stack(p, &p->stacks[sb]), PHASE_OPTIMIZER);
    CU_ASSERT_EQUAL(phase_of_stack(p, &p->stacks[sc]), PHASE_FORWARD);
    profile_free(p);

    /* A native program has no phases worth showing. */
    p = profile_new_empty();
    uint32_t m = profile_add_frame(p, "main", "app", NULL, 0, FRAME_NATIVE);
    uint32_t t = profile_add_thread(p, 1, 1, "app");
    profile_add_sample(p, 1, t, profile_add_stack(p, &m, 1), 1);
    CU_ASSERT_EQUAL_FATAL(phases_compute(p, &ph), 0);
    CU_ASSERT_FALSE(ph.pytorch);
    CU_ASSERT_EQUAL(ph.weight[PHASE_OTHER], 1);
    profile_free(p);
}

/* ------------------------------------------------------------------------- */
/* Findings                                                                   */
/* ------------------------------------------------------------------------- */

/* A profile of two stacks: [leaf (module) < rest...] with weight hit, and a
 * filler [main (app)] with weight rest_w. */
static struct profile *two_stacks(const char *leaf, const char *module, const char *op_frame, uint32_t hit,
                                  uint32_t rest_w)
{
    struct profile *p = profile_new_empty();
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    uint32_t f[3], n = 0;
    f[n++] = profile_add_frame(p, leaf, module, NULL, 0, FRAME_NATIVE);
    if (op_frame)
        f[n++] = profile_add_frame(p, op_frame, "libtorch_cpu.so", NULL, 0, FRAME_NATIVE);
    f[n++] = profile_add_frame(p, "work", "train.py", "/home/u/train.py", 7, FRAME_PYTHON);
    uint32_t filler = profile_add_frame(p, "main", "app", NULL, 0, FRAME_NATIVE);
    uint32_t t = profile_add_thread(p, 1, 1, "main");
    if (hit)
        profile_add_sample(p, 1, t, profile_add_stack(p, f, n), hit);
    if (rest_w)
        profile_add_sample(p, 2, t, profile_add_stack(p, &filler, 1), rest_w);
    p->total_weight = hit + rest_w;
    return p;
}

static const struct finding *find_finding(const struct findings *f, enum finding_kind k)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->items[i].kind == k)
            return &f->items[i];
    return NULL;
}

static void check_finding(struct profile *p, enum finding_kind k, bool fires, const char *text_part)
{
    struct findings f;
    CU_ASSERT_EQUAL_FATAL(findings_compute(p, &f), 0);
    const struct finding *x = find_finding(&f, k);
    CU_ASSERT_EQUAL(x != NULL, fires);
    if (x && text_part) {
        if (!strstr(x->text, text_part))
            fprintf(stderr, "\n  finding text: %s", x->text);
        CU_ASSERT_PTR_NOT_NULL(strstr(x->text, text_part));
    }
    findings_free(&f);
    profile_free(p);
}

static void test_finding_reference_blas(void)
{
    /* 10 % of 100 fires, 9 % does not. */
    check_finding(two_stacks("sgemm_", "libblas.so.3", "at::_ops::mm::call()", 10, 90), FINDING_REFERENCE_BLAS, true,
                  "Reference BLAS in use: 10.0 % of CPU time is in libblas.so.3 (sgemm_ 10.0 %)");
    check_finding(two_stacks("sgemm_", "libblas.so.3", "at::_ops::mm::call()", 9, 91), FINDING_REFERENCE_BLAS, false,
                  NULL);
    /* A native program gets it too. */
    check_finding(two_stacks("dgemm_", "libblas.so.3", NULL, 50, 50), FINDING_REFERENCE_BLAS, true, "dgemm_ 50.0 %");
    /* OpenBLAS installed as libblas.so.3: its kernels are not netlib names. */
    check_finding(two_stacks("sgemm_kernel_HASWELL", "libblas.so.3", NULL, 80, 20), FINDING_REFERENCE_BLAS, false,
                  NULL);
    check_finding(two_stacks("libblas.so.3+0x4f00", "libblas.so.3", NULL, 80, 20), FINDING_REFERENCE_BLAS, false,
                  NULL);
    check_finding(two_stacks("sgemm_", "libopenblas.so.0", NULL, 80, 20), FINDING_REFERENCE_BLAS, false, NULL);
}

static void test_finding_interpreter(void)
{
    /* 50 % fires, 49 % does not. A plain Python program (no operator
     * anywhere) gets the general remedy... */
    check_finding(two_stacks("long_add", "python3.11", NULL, 50, 50), FINDING_INTERPRETER, true,
                  "Most CPU time (50.0 %) is in the Python interpreter; the busiest line is "
                  "train.py:7 in work (50.0 %): move the loop into a vectorized library call");
    /* ...and a program that runs operators the tensor advice. */
    struct profile *with_ops = two_stacks("long_add", "python3.11", NULL, 50, 40);
    uint32_t op_stack[2] = {profile_add_frame(with_ops, "at::_ops::mm::call()", "libtorch_cpu.so", NULL, 0, FRAME_NATIVE),
                            profile_add_frame(with_ops, "main", "app", NULL, 0, FRAME_NATIVE)};
    profile_add_sample(with_ops, 3, 0, profile_add_stack(with_ops, op_stack, 2), 10);
    with_ops->total_weight = 100;
    check_finding(with_ops, FINDING_INTERPRETER, true,
                  "Most CPU time (50.0 %) is in the Python interpreter, not in operators; the busiest line is "
                  "train.py:7 in work (50.0 %): replace per-element Python work with fewer, larger tensor operations");
    check_finding(two_stacks("PyObject_Free", "libpython3.11.so.1.0", NULL, 49, 51), FINDING_INTERPRETER, false,
                  NULL);
    /* Interpreter code under an operator (a Python hook inside an op) is operator time. */
    check_finding(two_stacks("long_add", "python3.11", "at::_ops::mm::call()", 80, 20), FINDING_INTERPRETER, false,
                  NULL);
}

static void test_finding_dominant_op(void)
{
    check_finding(two_stacks("kernel", "libtorch_cpu.so", "at::_ops::bmm::call()", 40, 60), FINDING_DOMINANT_OP,
                  true, "aten::bmm takes 40.0 % of CPU time (self): start there; its top Python caller is train.py:7");
    check_finding(two_stacks("kernel", "libtorch_cpu.so", "at::_ops::bmm::call()", 39, 61), FINDING_DOMINANT_OP,
                  false, NULL);
    /* "[no operator]" is not an operator. */
    check_finding(two_stacks("kernel", "app", NULL, 90, 10), FINDING_DOMINANT_OP, false, NULL);

    /* The spliced profile: sgemm_ 40 % and aten::mm 40 % (8 of 20). */
    struct profile *p = make_torch();
    struct findings f;
    CU_ASSERT_EQUAL_FATAL(findings_compute(p, &f), 0);
    CU_ASSERT_PTR_NOT_NULL(find_finding(&f, FINDING_REFERENCE_BLAS));
    CU_ASSERT_PTR_NOT_NULL(find_finding(&f, FINDING_DOMINANT_OP));
    CU_ASSERT_PTR_NULL(find_finding(&f, FINDING_INTERPRETER)); /* 4 of 20 */
    findings_free(&f);
    profile_free(p);
}

/* ------------------------------------------------------------------------- */
/* Report sections                                                            */
/* ------------------------------------------------------------------------- */

static char *render(const struct profile *p, enum report_format format, bool summary)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    struct phase_summary ph;
    struct findings f;
    CU_ASSERT_EQUAL(phases_compute(p, &ph), 0);
    CU_ASSERT_EQUAL(findings_compute(p, &f), 0);
    struct report_options o = {.format = format, .group_by = GROUP_OP, .sort = SORT_SELF};
    if (summary) {
        o.phases = &ph;
        o.findings = &f;
    }
    struct hotspot_table t;
    CU_ASSERT_EQUAL(hotspots_compute(p, GROUP_OP, &t), 0);
    hotspots_sort(&t, SORT_SELF);
    if (format == FORMAT_TEXT && summary)
        report_print_summary(out, &ph, &f, p->period_ns);
    CU_ASSERT_EQUAL(report_print_table(out, p, &t, &o, NULL), 0);
    hotspots_free(&t);
    findings_free(&f);
    fclose(out);
    return buf;
}

/* Start-up under `import`: its own phase and operator-table row, a finding
 * naming the import line, and no interpreter-bound advice from it. */
static struct profile *import_profile(uint32_t import_w, uint32_t op_in_import_w, uint32_t rest_w)
{
    struct profile *p = profile_new_empty();
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    uint32_t eval = profile_add_frame(p, "_PyEval_EvalFrameDefault", "python3.11", NULL, 0, FRAME_NATIVE);
    uint32_t mod = profile_add_frame(p, "<module>", "__init__.py", TORCH_PY "__init__.py", 800, FRAME_PYTHON);
    uint32_t boot = profile_add_frame(p, "_call_with_frames_removed", "<frozen importlib._bootstrap>",
                                      "<frozen importlib._bootstrap>", 241, FRAME_PYTHON);
    uint32_t load = profile_add_frame(p, "_find_and_load", "<frozen importlib._bootstrap>",
                                      "<frozen importlib._bootstrap>", 1176, FRAME_PYTHON);
    uint32_t user = profile_add_frame(p, "<module>", "train.py", "/home/u/train.py", 3, FRAME_PYTHON);
    uint32_t mm = profile_add_frame(p, "at::_ops::mm::call()", "libtorch_cpu.so", NULL, 0, FRAME_NATIVE);
    uint32_t step = profile_add_frame(p, "step", "train.py", "/home/u/train.py", 42, FRAME_PYTHON);
    uint32_t t = profile_add_thread(p, 1, 1, "main");
    uint32_t in_import[] = {eval, mod, boot, load, user};        /* leaf first */
    uint32_t op_in_import[] = {mm, mod, boot, load, user};
    uint32_t plain[] = {eval, step, user};
    if (import_w)
        profile_add_sample(p, 1, t, profile_add_stack(p, in_import, 5), import_w);
    if (op_in_import_w)
        profile_add_sample(p, 2, t, profile_add_stack(p, op_in_import, 5), op_in_import_w);
    if (rest_w)
        profile_add_sample(p, 3, t, profile_add_stack(p, plain, 3), rest_w);
    p->total_weight = import_w + op_in_import_w + rest_w;
    p->period_ns = 1000000;
    return p;
}

static void test_import_startup(void)
{
    struct profile *p = import_profile(30, 5, 65);
    struct phase_summary ph;
    CU_ASSERT_EQUAL_FATAL(phases_compute(p, &ph), 0);
    CU_ASSERT_EQUAL(ph.weight[PHASE_IMPORT], 35); /* an op run while importing is start-up too */
    CU_ASSERT_EQUAL(ph.weight[PHASE_OTHER], 65);
    CU_ASSERT_EQUAL(ph.weight[PHASE_FORWARD], 0);
    CU_ASSERT_STRING_EQUAL(phase_name(PHASE_IMPORT), "import");
    CU_ASSERT(stack_is_import(p, &p->stacks[p->samples[0].stack]));
    CU_ASSERT_FALSE(stack_is_import(p, &p->stacks[p->samples[2].stack]));

    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_OP, &t), 0);
    ROW(&t, NO_OPERATOR_IMPORT_NAME, NULL, 30, 30);
    ROW(&t, NO_OPERATOR_NAME, NULL, 65, 65);
    ROW(&t, "aten::mm", NULL, 5, 5);
    CU_ASSERT(is_no_operator_row(NO_OPERATOR_IMPORT_NAME));
    CU_ASSERT(is_no_operator_row(NO_OPERATOR_NAME));
    CU_ASSERT_FALSE(is_no_operator_row("aten::mm"));
    hotspots_free(&t);
    profile_free(p);

    /* 35 % under import fires and names the user's import line; the 65 %
     * of plain interpreter time is interpreter-bound, the import is not. */
    check_finding(import_profile(30, 5, 65), FINDING_IMPORT, true,
                  "Start-up: 35.0 % of CPU time (0.04 s) is modules being imported, 35.0 % under the import at "
                  "train.py:3");
    check_finding(import_profile(30, 5, 65), FINDING_INTERPRETER, true, "Most CPU time (65.0 %)");
    /* 19 % does not fire; 60 % import + 40 % other is not interpreter-bound. */
    check_finding(import_profile(19, 0, 81), FINDING_IMPORT, false, NULL);
    check_finding(import_profile(60, 0, 40), FINDING_INTERPRETER, false, NULL);
}

static void test_report_sections(void)
{
    struct profile *p = make_torch();
    char *text = render(p, FORMAT_TEXT, true);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "Findings\n  * Reference BLAS in use: 40.0 %"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "Phases (share of CPU time)\n  forward"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "  backward          20.0 %         4 ms  2 samples"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "Operators by self time\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "Top Python caller (share of total)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "aten::mm"));
    CU_ASSERT(strstr(text, "Findings") < strstr(text, "Phases") && strstr(text, "Phases") < strstr(text, "Operators"));
    free(text);

    char *json = render(p, FORMAT_JSON, true);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"phases\":{\"forward\":{\"pct\":45.000,\"weight\":9,\"samples\":4}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"findings\":[{\"id\":\"reference_blas\",\"share_pct\":40.000,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"top_caller\":\"train.py:42 step"));
    free(json);

    char *csv = render(p, FORMAT_CSV, false);
    const char *head = "name,module,self_pct,self_ns,total_pct,total_ns,samples,top_caller\n";
    CU_ASSERT(strncmp(csv, head, strlen(head)) == 0);
    free(csv);
    profile_free(p);

    /* A native program without BLAS: no sections at all. */
    struct phase_summary ph;
    struct findings f;
    char *buf = NULL;
    size_t len = 0;
    p = profile_new_empty();
    uint32_t m = profile_add_frame(p, "main", "app", NULL, 0, FRAME_NATIVE);
    uint32_t th = profile_add_thread(p, 1, 1, "app");
    profile_add_sample(p, 1, th, profile_add_stack(p, &m, 1), 1);
    FILE *out = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_EQUAL(phases_compute(p, &ph), 0);
    CU_ASSERT_EQUAL(findings_compute(p, &f), 0);
    report_print_summary(out, &ph, &f, 1000000);
    fclose(out);
    CU_ASSERT_STRING_EQUAL(buf, "");
    free(buf);
    findings_free(&f);
    profile_free(p);
}

void register_operators_tests(void)
{
    CU_pSuite s = CU_add_suite("operators", NULL, NULL);
    CU_add_test(s, "normalization of real libtorch names", test_normalization_table);
    CU_add_test(s, "normalization edge cases", test_normalization_edges);
    CU_add_test(s, "group by op: innermost self, total once", test_group_by_op);
    CU_add_test(s, "group by Python line and function", test_group_by_line_and_python);
    CU_add_test(s, "group by kernel per operator", test_group_by_kernel);
    CU_add_test(s, "native program: kernel and line views", test_native_kernel_and_line_views);
    CU_add_test(s, "callers of an operator are Python lines", test_callers_of_operator);
    CU_add_test(s, "group-by names", test_group_names);
    CU_add_test(s, "phases", test_phases);
    CU_add_test(s, "finding: reference BLAS threshold", test_finding_reference_blas);
    CU_add_test(s, "finding: interpreter-bound threshold", test_finding_interpreter);
    CU_add_test(s, "finding: dominant operator threshold", test_finding_dominant_op);
    CU_add_test(s, "import: phase, operator row, finding", test_import_startup);
    CU_add_test(s, "report: findings and phases sections", test_report_sections);
}
