// The torchtrt_swish::swish schema (the only place it is defined) and its CPU implementation.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <ATen/ops/empty.h>
#include <Python.h>
#include <torch/library.h>

#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/swish_backward_plan.h"
#include "kernels/swish_cpu.h"
#include "swish_common.h"
#include "swish_cpu_vec.h"

namespace torchtrt_swish {
namespace {

// Below this many elements per task, threading costs more than it saves (ATen's grain size for elementwise ops).
constexpr int64_t kGRAIN = 32768;
// A forward run shorter than this (a last-dim bias of few channels, planes of few elements) is mostly partial-vector
// tail.
constexpr int64_t kMIN_RUN = 256;
// The most bias values the forward spells out for short planes (2^17: 512 KB of fp32, within an L2 of 1 MB).
constexpr int64_t kMAX_PATTERN = int64_t{1} << 17;

#ifdef __linux__
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 // Linux 5.14; older kernels answer EINVAL and the stores fault as before
#endif

// Smaller outputs are not asked about: their page faults cost little next to the mincore call.
constexpr int64_t kPREFAULT_MIN_BYTES = int64_t{4} << 20;
// Pages (2 MB) below which a thread does not take a share of the faulting: a madvise call has its own cost.
constexpr int64_t kPREFAULT_GRAIN_PAGES = 512;

//! Whether an output of `bytes` at p is fresh memory (a block glibc mapped from the kernel for this call): its last
//! page was never written. The first page is not asked: glibc writes a mapped block's header there.
bool freshOutput(void const* p, int64_t bytes, uintptr_t page)
{
    uintptr_t const last = (reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(bytes) - 1) & ~(page - 1);
    unsigned char resident = 1;
    return bytes >= kPREFAULT_MIN_BYTES && mincore(reinterpret_cast<void*>(last), page, &resident) == 0
        && (resident & 1) == 0;
}

//! A fresh output's whole pages faulted in by the op's threads, one madvise each, before the kernel writes them: its
//! stores otherwise stop at every page for the kernel to map and zero it, and the math stalls between those faults.
//! Returns whether the output was fresh; memory already written is left as it is. A failed madvise leaves the pages
//! to fault at the stores.
bool prefaultFresh(void* p, int64_t bytes)
{
    auto const page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    if (!freshOutput(p, bytes, page))
    {
        return false;
    }
    auto const base = reinterpret_cast<uintptr_t>(p);
    uintptr_t const firstPage = (base + page - 1) / page; // whole pages only: madvise takes page-aligned ranges
    auto const pages = static_cast<int64_t>((base + static_cast<uintptr_t>(bytes)) / page - firstPage);
    at::parallel_for(0, pages, kPREFAULT_GRAIN_PAGES, [&](int64_t begin, int64_t end) {
        uintptr_t const first = (firstPage + static_cast<uintptr_t>(begin)) * page;
        (void)madvise(reinterpret_cast<void*>(first), static_cast<size_t>(end - begin) * page, MADV_POPULATE_WRITE);
    });
    return true;
}
#else
bool prefaultFresh(void*, int64_t)
{
    return false;
}
#endif

//! The elementwise kernels for the instruction set ATen itself uses on this machine (ATEN_CPU_CAPABILITY
//! included), chosen once. ATen names its baseline "DEFAULT" or, in some releases, "NO AVX"; a name this build has no
//! copy for (a newer instruction set) gets the baseline copy and a warning that names it.
cpu_vec::Kernels const& cpuKernels()
{
    static cpu_vec::Kernels const& kernels = []() -> cpu_vec::Kernels const& {
        std::string const cap = at::get_cpu_capability();
#ifdef TORCHTRT_SWISH_CPU_X86
        if (cap == "AVX512")
        {
            return cpu_vec::AVX512::kKernels;
        }
        if (cap == "AVX2")
        {
            return cpu_vec::AVX2::kKernels;
        }
        if (cap != "DEFAULT" && cap != "NO AVX")
        {
            TORCH_WARN_ONCE("torchtrt_swish: no CPU kernels built for ATen's instruction set '", cap,
                "': using the baseline (DEFAULT) copy");
        }
#endif
        return cpu_vec::DEFAULT::kKernels;
    }();
    return kernels;
}

at::Tensor swishCpu(at::Tensor const& x, at::Tensor const& bias)
{
    TORCH_CHECK(x.device().is_cpu(), "swish: CPU kernel called with x on ", x.device().str());
    Prepared const p = prepare(x, bias, /*allowDouble=*/true);
    at::Tensor y = p.emptyLikeX();
    int64_t const n = p.x.numel();
    at::Tensor b = p.bias;
    BiasSpec spec = p.spec;
    int64_t const period = spec.channels * spec.inner;
    if (spec.channels > 1 && spec.inner > 1 && spec.inner < kMIN_RUN && period <= kMAX_PATTERN && n >= 16 * period)
    {
        // Planes shorter than kMIN_RUN end in a partial vector each: the bias as the last-dim pattern it makes over
        // one period of x (bias[(i / inner) % C] is pattern[i % (C * inner)]), in runs of the whole period; x holds
        // 16 periods or more, so spelling it out costs a sixteenth of the call at most.
        b = p.bias.reshape({-1}).repeat_interleave(spec.inner);
        spec = BiasSpec{period, 1};
    }
    if (spec.inner == 1 && spec.channels > 1 && spec.channels < kMIN_RUN && n >= 16 * kMIN_RUN)
    {
        // A short last-dim bias cuts x into runs of a partial vector or two: repeat it to >= kMIN_RUN values, the
        // same bias per element (bias[i % (C * k)] is bias[i % C]), in runs long enough to be vector work.
        int64_t const reps = (kMIN_RUN + spec.channels - 1) / spec.channels;
        b = b.reshape({-1}).repeat({reps});
        spec.channels *= reps;
    }
    void const* xp = p.x.const_data_ptr();
    void const* bp = b.const_data_ptr();
    void* yp = y.mutable_data_ptr();
    (void)prefaultFresh(yp, static_cast<int64_t>(y.nbytes()));
    auto const forward = cpuKernels().forward;
    at::ScalarType const dtype = p.x.scalar_type();
    at::parallel_for(0, n, kGRAIN, [&](int64_t begin, int64_t end) { forward(dtype, xp, bp, yp, begin, end, spec); });
    return y;
}

//! db = g summed by cpu::planBiasGrad's tasks over [n / (channels * inner), channels, inner] (runTasks(begin, end,
//! partial) runs tasks [begin, end) into the partial sums), then combined in a fixed order: the same bits whatever
//! the thread count. The partials are left uninitialized: each cell is written by its task before the combine reads
//! it (the CPU proof walks that), so zeroing them first (one thread, pages faulted one by one) would be wasted.
template <typename RunTasks>
void sumBiasGrad(int64_t n, BiasSpec spec, at::Tensor& db, RunTasks const& runTasks)
{
    int64_t const block = spec.channels * spec.inner;
    cpu::BiasGradPlan const plan = cpu::planBiasGrad(block > 0 ? n / block : 0, spec.channels, spec.inner);
    std::unique_ptr<double[]> const partial(new double[static_cast<size_t>(plan.partials())]);
    at::parallel_for(0, plan.tasks(), 1, [&](int64_t begin, int64_t end) { runTasks(plan, begin, end, partial.get()); });
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, db.scalar_type(), "swish_bias_grad_cpu", [&] {
        scalar_t* dp = db.mutable_data_ptr<scalar_t>();
        // About kGRAIN partials a task: many rows (last-dim biases) spread the channels over the threads.
        int64_t const rows = std::max<int64_t>(1, plan.rowBlocks * plan.segs);
        at::parallel_for(0, plan.channels, std::max<int64_t>(1, kGRAIN / rows), [&](int64_t begin, int64_t end) {
            cpu::biasGradCombine<scalar_t, double>(plan, partial.get(), dp, begin, end);
        });
    });
}

//! Whether kernelView(bias) is x's own shape (nothing to sum: dbias is g).
bool fullShape(int64_t n, BiasSpec spec, int64_t biasNumel)
{
    return n > 0 && spec.channels * spec.inner == n && biasNumel == n;
}

//! dbias = g summed to bias's shape, with the thread-count-independent blocking of cpu::planBiasGrad, in fp64; g
//! contiguous (a kernelView), dbias in bias's shape; cls is classify(g, bias). For the layouts the fused backward
//! does not take: a full-shape bias and biases that are not one periodic block.
at::Tensor biasGradCpu(at::Tensor const& g, at::Tensor const& bias, BiasClass const& cls)
{
    int64_t const n = g.numel();
    at::Tensor src = g; // contiguous, viewed as [outer, channels, inner]
    BiasSpec spec{1, 1};
    if (cls.periodic)
    {
        spec = cls.spec;
    }
    else
    {
        // Bias dims that are not 1 go last, in order; the rest is summed: g becomes [rows, bias.numel()].
        std::vector<int64_t> reduced;
        std::vector<int64_t> kept;
        int64_t const off = g.dim() - bias.dim();
        for (int64_t d = 0; d < g.dim(); ++d)
        {
            (d >= off && bias.size(d - off) != 1 ? kept : reduced).push_back(d);
        }
        reduced.insert(reduced.end(), kept.begin(), kept.end());
        src = g.permute(reduced).contiguous();
        spec = BiasSpec{bias.numel(), 1};
    }
    at::Tensor db = at::empty(bias.sizes(), bias.options());
    if (fullShape(n, spec, bias.numel()))
    {
        db.copy_(g.view(bias.sizes()));
        return db;
    }
    void const* gp = src.const_data_ptr();
    auto const tasks = cpuKernels().biasGrad;
    sumBiasGrad(n, spec, db, [&](cpu::BiasGradPlan const& plan, int64_t begin, int64_t end, double* partial) {
        tasks(src.scalar_type(), gp, plan, begin, end, partial);
    });
    return db;
}

std::tuple<at::Tensor, at::Tensor> swishBackwardCpu(at::Tensor const& grad, at::Tensor const& x, at::Tensor const& bias)
{
    BiasClass const checked = checkBackward(grad, x, bias, /*allowDouble=*/true);
    at::MemoryFormat const fmt = keptFormat(x);
    at::Tensor const g = grad.contiguous(fmt);
    at::Tensor const xc = x.contiguous(fmt);
    at::Tensor dx = at::empty(xc.sizes(), xc.options().memory_format(fmt));
    void const* gp = g.const_data_ptr();
    void const* xp = xc.const_data_ptr();
    void* dp = dx.mutable_data_ptr();
    (void)prefaultFresh(dp, static_cast<int64_t>(dx.nbytes()));
    at::ScalarType const dtype = xc.scalar_type();
    int64_t const n = xc.numel();
    int64_t const rank = x.dim();
    at::Tensor const gk = kernelView(g, rank, fmt);
    at::Tensor const bk = kernelView(bias, rank, fmt);
    BiasClass const cls = kernelClass(checked, fmt, gk.sizes(), bk.sizes());
    if (cls.periodic && !fullShape(n, cls.spec, bias.numel()))
    {
        // dx and the bias sums in one pass over g: the bias-gradient plan's tasks also write dx for their elements.
        auto const tasks = cpuKernels().backwardFused;
        at::Tensor db = at::empty(bk.sizes(), bk.options());
        sumBiasGrad(n, cls.spec, db, [&](cpu::BiasGradPlan const& plan, int64_t begin, int64_t end, double* partial) {
            tasks(dtype, gp, xp, dp, plan, begin, end, partial);
        });
        return {dx, fromKernelView(db, bias, fmt)};
    }
    auto const backward = cpuKernels().backward;
    at::parallel_for(0, n, kGRAIN, [&](int64_t begin, int64_t end) { backward(dtype, gp, xp, dp, begin, end); });
    return {dx, fromKernelView(biasGradCpu(gk, bk, cls), bias, fmt)};
}

} // namespace

TORCH_LIBRARY(torchtrt_swish, m)
{
    // pt2_compliant: safe under torch.compile / torch.export (fake kernels and autograd live in ops.py).
    m.def("swish(Tensor x, Tensor bias) -> Tensor", {at::Tag::pt2_compliant_tag});
    m.def("swish_backward(Tensor grad, Tensor x, Tensor bias) -> (Tensor, Tensor)", {at::Tag::pt2_compliant_tag});
}

TORCH_LIBRARY_IMPL(torchtrt_swish, CPU, m)
{
    m.impl("swish", &swishCpu);
    m.impl("swish_backward", &swishBackwardCpu);
}

} // namespace torchtrt_swish

// A real Python module so `import torchtrt_swish._C` loads the library and runs the registrations above; its one
// function says which CPU copy the op runs (tests ask it under each ATEN_CPU_CAPABILITY).
namespace {
PyObject* cpuKernelsName(PyObject*, PyObject*)
{
    try
    {
        return PyUnicode_FromString(torchtrt_swish::cpuKernels().name);
    }
    catch (std::exception const& e)
    {
        PyErr_SetString(PyExc_RuntimeError, e.what());
        return nullptr;
    }
}

// The CPU kernels' fp32 sigmoid over a float32 buffer into another of the same length (tests check its error bound
// on every instruction-set copy).
PyObject* cpuSigmoid(PyObject*, PyObject* args)
{
    PyObject* xo = nullptr;
    PyObject* yo = nullptr;
    if (!PyArg_ParseTuple(args, "OO", &xo, &yo))
    {
        return nullptr;
    }
    Py_buffer xb{};
    Py_buffer yb{};
    if (PyObject_GetBuffer(xo, &xb, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0)
    {
        return nullptr;
    }
    if (PyObject_GetBuffer(yo, &yb, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) != 0)
    {
        PyBuffer_Release(&xb);
        return nullptr;
    }
    auto const isFloat = [](Py_buffer const& b) { return b.itemsize == 4 && b.format && std::string(b.format) == "f"; };
    bool const ok = isFloat(xb) && isFloat(yb) && xb.len == yb.len;
    if (ok)
    {
        torchtrt_swish::cpuKernels().sigmoid(
            static_cast<float const*>(xb.buf), static_cast<float*>(yb.buf), static_cast<int64_t>(xb.len / 4));
    }
    PyBuffer_Release(&xb);
    PyBuffer_Release(&yb);
    if (!ok)
    {
        PyErr_SetString(PyExc_ValueError, "cpu_sigmoid: expected two C-contiguous float32 buffers of one length");
        return nullptr;
    }
    Py_RETURN_NONE;
}

// Whether the CPU kernels prefetch a page ahead on this CPU (cpu_vec::pagePrefetch).
PyObject* cpuPagePrefetch(PyObject*, PyObject*)
{
    return PyBool_FromLong(torchtrt_swish::cpu_vec::pagePrefetch() ? 1 : 0);
}

// Whether the CPU kernels the op runs round fp32 to bf16 with AVX512_BF16's instruction (cpu_vec::avx512Bf16).
PyObject* cpuBf16Instruction(PyObject*, PyObject*)
{
    try
    {
        return PyBool_FromLong(
            std::string(torchtrt_swish::cpuKernels().name) == "AVX512" && torchtrt_swish::cpu_vec::avx512Bf16() ? 1 : 0);
    }
    catch (std::exception const& e)
    {
        PyErr_SetString(PyExc_RuntimeError, e.what());
        return nullptr;
    }
}

// The op's treatment of a writable buffer as an output: whether it took it for fresh memory and faulted it in (tests
// check the decision and the pages against /proc/self/smaps).
PyObject* prefaultOutput(PyObject*, PyObject* arg)
{
    Py_buffer b{};
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE | PyBUF_WRITABLE) != 0)
    {
        return nullptr;
    }
    bool const fresh = torchtrt_swish::prefaultFresh(b.buf, static_cast<int64_t>(b.len));
    PyBuffer_Release(&b);
    return PyBool_FromLong(fresh ? 1 : 0);
}

// The fused backward's plan family for a layout on a GPU of `sms` multiprocessors (kernels/swish_backward_plan.h):
// (family, column-sum stages). The doctor and the GPU tests derive the planner's switch points from it for the GPU
// they run on.
PyObject* fusedBackwardPlan(PyObject*, PyObject* args)
{
    char const* dtype = nullptr;
    long long n = 0;
    long long channels = 0;
    long long inner = 0;
    int aligned = 1;
    int sms = 0;
    if (!PyArg_ParseTuple(args, "sLLLpi", &dtype, &n, &channels, &inner, &aligned, &sms))
    {
        return nullptr;
    }
    torchtrt_swish::DType dt = torchtrt_swish::DType::kFLOAT32;
    if (!torchtrt_swish::dtypeFromName(dtype, dt))
    {
        PyErr_Format(PyExc_ValueError, "fused_backward_plan: dtype must be float32, float16 or bfloat16, got '%s'",
            dtype);
        return nullptr;
    }
    if (sms < 1)
    {
        PyErr_Format(PyExc_ValueError, "fused_backward_plan: sms must be >= 1, got %d", sms);
        return nullptr;
    }
    using namespace torchtrt_swish::detail;
    FusedPlan const plan = planFused(dt, n, torchtrt_swish::BiasSpec{channels, inner}, aligned != 0, sms);
    return Py_BuildValue("(sL)", planFamily(plan), static_cast<long long>(plan.sumSlices > 1 ? 2 : plan.sumSlices));
}

PyMethodDef kMETHODS[] = {
    {"cpu_kernels", cpuKernelsName, METH_NOARGS, "The instruction set of the CPU kernels the op runs (DEFAULT, AVX2, AVX512)."},
    {"cpu_page_prefetch", cpuPagePrefetch, METH_NOARGS,
        "Whether the CPU kernels prefetch a page ahead of each stream here (off on AMD CPUs)."},
    {"cpu_bf16_instruction", cpuBf16Instruction, METH_NOARGS,
        "Whether the CPU kernels round fp32 to bf16 with AVX512_BF16's instruction here (the AVX512 copy, where the "
        "CPU has it)."},
    {"cpu_sigmoid", cpuSigmoid, METH_VARARGS, "(x, y): y = the CPU kernels' fp32 sigmoid of x (float32 buffers)."},
    {"prefault_output", prefaultOutput, METH_O,
        "(writable buffer) -> whether the CPU op would take it for a fresh output and fault it in (it does so)."},
    {"fused_backward_plan", fusedBackwardPlan, METH_VARARGS,
        "(dtype, n, channels, inner, aligned, sms) -> (plan family, column-sum stages) of the fused CUDA backward."},
    {nullptr, nullptr, 0, nullptr},
};
} // namespace

extern "C" PyObject* PyInit__C(void)
{
    static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "_C", "torchtrt_swish compiled ops", -1, kMETHODS};
    return PyModule_Create(&def);
}
