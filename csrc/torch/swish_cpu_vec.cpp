// The CPU op's elementwise kernels with ATen's at::vec: fp32 (and fp16/bf16, widened to fp32 and narrowed once) through
// the sigmoid of swish_cpu_math.h, fp64 through PyTorch's own silu formulas (x / (1 + exp(-x)), SLEEF's exp) for
// gradcheck; the loops over bias runs, and the bias gradient's tasks.
//
// CMakeLists.txt compiles this file once per instruction set, with -DCPU_CAPABILITY=<name> and that set's -m flags.
// Everything defined here is in a namespace of that name or has internal linkage, so the copies never collide
// (inline functions of the included headers are shared: CMakeLists.txt links the baseline objects first, so the kept
// copy runs on any CPU). Every copy is built with -ffp-contract=off: the formulas are evaluated as written (FMAs only
// where at::vec::fmadd asks for one), so a full vector and a tail give the same bits.
#include <ATen/Dispatch.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <array>
#include <type_traits>

#include "kernels/swish_cpu.h"
#include "swish_cpu_math.h"
#include "swish_cpu_vec.h"

#ifndef CPU_CAPABILITY
#error "swish_cpu_vec.cpp is built once per instruction set with -DCPU_CAPABILITY=<name> (see CMakeLists.txt)"
#endif

namespace torchtrt_swish {
namespace cpu_vec {
namespace CPU_CAPABILITY {
namespace {

// Prefetch distance of the streaming loops where they prefetch (pagePrefetch): the next 4 KB page of every input and
// of the output, which the hardware prefetchers, stopping at page boundaries, would reach late.
constexpr int64_t kPREFETCH_BYTES = 4096;

// Vectors of T an iteration of the streaming loops, all computed before any is stored (a store may alias the next
// loads). With CMakeLists.txt's pre-allocation scheduling the compiler interleaves their chains, so fewer operations
// wait in the FP scheduler on one vector's exp-divide chain (the AVX2 copy on Zen 4 was bound by that, not by its
// pipes). DEFAULT, whose at::vec math is called out of line, lost by it (performance notes).
template <typename T>
constexpr int kUNROLL =
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
    std::is_same_v<T, float> ? 4 : 2;
#else
    1;
#endif

//! kPREFETCH_BYTES in elements of T.
template <typename T>
constexpr int64_t kPREFETCH_AHEAD = kPREFETCH_BYTES / static_cast<int64_t>(sizeof(T));

//! One vector's prefetches in the streaming loops, if `on` (pagePrefetch(), read once per loop): element k + ahead of
//! p0, and of p1 and p2 where kP1 and kP2 (no fault past the end of an array). A function, not a lambda: DEFAULT's
//! loops, which call its math, ran 6-10 % slower with lambdas.
template <bool kP1, bool kP2, typename T>
C10_ALWAYS_INLINE void prefetchVec(bool on, int64_t k, int64_t ahead, T const* p0, T const* p1, T const* p2)
{
    if (on)
    {
        __builtin_prefetch(p0 + k + ahead);
        if constexpr (kP1)
        {
            __builtin_prefetch(p1 + k + ahead);
        }
        if constexpr (kP2)
        {
            __builtin_prefetch(p2 + k + ahead);
        }
    }
}

//! out[k] = op(a[k], b[k]) (or op(a[k], b[0]) when kBroadcastB) for k in [0, len), in the compute type (fp32 for
//! fp16/bf16, rounded once on the store). The tail goes through the same vector code as the body (partial loads
//! and stores), so an element's bits do not depend on where a thread's chunk or a bias run starts.
template <typename T, bool kBroadcastB, typename Op>
void map2(T const* a, T const* b, T* out, int64_t len, Op const& op)
{
    using V = Vectorized<T>;
    constexpr int64_t kW = V::size();
    bool const bf16Insn = avx512Bf16();
    auto body = [&](V const& av, V const& bv) -> V {
        if constexpr (std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>)
        {
            auto [a0, a1] = at::vec::convert_to_float<T>(av);
            if constexpr (kBroadcastB)
            {
                VF const bb(static_cast<float>(b[0]));
                return narrow<T>(op(a0, bb), op(a1, bb), bf16Insn);
            }
            else
            {
                auto [b0, b1] = at::vec::convert_to_float<T>(bv);
                return narrow<T>(op(a0, b0), op(a1, b1), bf16Insn);
            }
        }
        else
        {
            if constexpr (kBroadcastB)
            {
                return op(av, V(b[0]));
            }
            else
            {
                return op(av, bv);
            }
        }
    };
    bool const pf = pagePrefetch();
    int64_t k = 0;
    if constexpr (kUNROLL<T> > 1)
    {
        for (; k + kUNROLL<T> * kW <= len; k += kUNROLL<T> * kW)
        {
            V r[kUNROLL<T>];
            for (int u = 0; u < kUNROLL<T>; ++u) // the prefetches' branches first: the math is one block to schedule
            {
                prefetchVec<!kBroadcastB, true>(pf, k + u * kW, kPREFETCH_AHEAD<T>, a, b, out);
            }
            for (int u = 0; u < kUNROLL<T>; ++u)
            {
                r[u] = body(V::loadu(a + k + u * kW), kBroadcastB ? V() : V::loadu(b + k + u * kW));
            }
            for (int u = 0; u < kUNROLL<T>; ++u)
            {
                r[u].store(out + k + u * kW);
            }
        }
    }
    for (; k + kW <= len; k += kW)
    {
        prefetchVec<!kBroadcastB, true>(pf, k, kPREFETCH_AHEAD<T>, a, b, out);
        body(V::loadu(a + k), kBroadcastB ? V() : V::loadu(b + k)).store(out + k);
    }
    if (k < len)
    {
        int64_t const n = len - k;
        body(V::loadu(a + k, n), kBroadcastB ? V() : V::loadu(b + k, n)).store(out + k, static_cast<int>(n));
    }
}

template <typename T>
void forwardTyped(void const* xv, void const* bv, void* yv, int64_t begin, int64_t end, BiasSpec spec)
{
    auto const* x = static_cast<T const*>(xv);
    auto const* bias = static_cast<T const*>(bv);
    auto* y = static_cast<T*>(yv);
    auto const op = [](auto const& xs, auto const& bs) { return swishBias(xs, bs); };
    cpu::forEachBiasRun(begin, end, spec, [&](int64_t i, int64_t len, int64_t c, int64_t step) {
        if (step == 0)
        {
            map2<T, true>(x + i, bias + c, y + i, len, op);
        }
        else
        {
            map2<T, false>(x + i, bias + c, y + i, len, op);
        }
    });
}

//! dx[k] = swishGrad(g[k], x[k]) for k in [0, len).
template <typename T>
inline void gradRun(T const* g, T const* x, T* dx, int64_t len)
{
    map2<T, false>(g, x, dx, len, [](auto const& gs, auto const& xs) { return swishGrad(gs, xs); });
}

template <typename T>
void backwardTyped(void const* gv, void const* xv, void* dxv, int64_t begin, int64_t end)
{
    gradRun(static_cast<T const*>(gv) + begin, static_cast<T const*>(xv) + begin, static_cast<T*>(dxv) + begin,
        end - begin);
}

//! lane[k % 8] += p[k] for k in [0, len), in order: with the lanes combined pairwise (laneTotal), a fixed order
//! that vectorizes (in this file: each instruction set's copy gets its own, vectorized for it).
template <typename T, typename Acc>
inline void addLanes(Acc (&lane)[8], T const* p, int64_t len)
{
    int64_t i = 0;
    for (; i + 8 <= len; i += 8)
    {
        for (int j = 0; j < 8; ++j)
        {
            lane[j] += static_cast<Acc>(p[i + j]);
        }
    }
    for (int j = 0; i < len; ++i, ++j)
    {
        lane[j] += static_cast<Acc>(p[i]);
    }
}

template <typename Acc>
inline Acc laneTotal(Acc const (&lane)[8])
{
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

using VD = Vectorized<double>;
// Double lanes holding the eight position lanes of addLanes (one vector on AVX512, two of four elsewhere).
constexpr int kLANE_VECS = 8 / VD::size();
static_assert(VF::size() == 2 * VD::size() && 8 % VD::size() == 0, "a float vector widens to two lane vectors");

//! A float vector's two halves as double vectors.
using Halves = std::array<VD, 2>;

//! The two halves of a float vector, widened to double.
inline Halves widen(VF const& v)
{
#if defined(CPU_CAPABILITY_AVX512)
    return {_mm512_cvtps_pd(_mm512_castps512_ps256(v)),
        _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)))};
#elif defined(CPU_CAPABILITY_AVX2)
    return {_mm256_cvtps_pd(_mm256_castps256_ps128(v)), _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))};
#else
    Halves out;
    for (int i = 0; i < VD::size(); ++i)
    {
        out[0][i] = v[i];
        out[1][i] = v[i + VD::size()];
    }
    return out;
#endif
}

//! p[0, VF::size()) widened to double by converting loads: widening the loaded vector (widen) takes a shuffle more,
//! 2-4 % of the fp32 backward on Zen 4, 8 % in the AVX2 copy (performance notes).
inline Halves widenLoad(float const* p)
{
#if defined(CPU_CAPABILITY_AVX512)
    return {_mm512_cvtps_pd(_mm256_loadu_ps(p)), _mm512_cvtps_pd(_mm256_loadu_ps(p + VD::size()))};
#elif defined(CPU_CAPABILITY_AVX2)
    return {_mm256_cvtps_pd(_mm_loadu_ps(p)), _mm256_cvtps_pd(_mm_loadu_ps(p + VD::size()))};
#else
    return widen(VF::loadu(p));
#endif
}

//! gradRunSum's vector at k: g's elements handed to sumVec(k, halves) as doubles, a float vector's worth at a time, and
//! dx = swishGrad(g, x) returned if kDX, not stored (a store may alias the next vectors' loads). fp16/bf16 g is widened
//! once for both.
template <bool kDX, typename T, typename SumVec>
C10_ALWAYS_INLINE Vectorized<T> gradStep(T const* g, T const* x, int64_t k, SumVec& sumVec, bool bf16Insn)
{
    using V = Vectorized<T>;
    if constexpr (std::is_same_v<T, float>)
    {
        sumVec(k, widenLoad(g + k));
        if constexpr (kDX)
        {
            return swishGrad(V::loadu(g + k), V::loadu(x + k));
        }
    }
    else
    {
        auto const [g0, g1] = at::vec::convert_to_float<T>(V::loadu(g + k));
        V r;
        if constexpr (kDX)
        {
            auto const [x0, x1] = at::vec::convert_to_float<T>(V::loadu(x + k));
            r = narrow<T>(swishGrad(g0, x0), swishGrad(g1, x1), bf16Insn);
        }
        sumVec(k, widen(g0));
        sumVec(k + VF::size(), widen(g1));
        return r;
    }
    return V();
}

//! dx = swishGrad(g, x) over [0, len) (if kDX), g's elements [k, k + VF::size()) widened to double and handed to
//! sumVec(k, halves); returns where the whole vectors end (the caller sums the rest of g itself). Prefetches `ahead`
//! elements ahead of each vector.
template <typename T, bool kDX, typename SumVec>
int64_t gradRunSum(T const* g, T const* x, T* dx, int64_t len, int64_t ahead, SumVec&& sumVec)
{
    using V = Vectorized<T>;
    constexpr int64_t kW = V::size();
    bool const pf = pagePrefetch();
    bool const bf16Insn = avx512Bf16();
    int64_t k = 0;
    if constexpr (kUNROLL<T> > 1)
    {
        for (; k + kUNROLL<T> * kW <= len; k += kUNROLL<T> * kW)
        {
            V r[kUNROLL<T>];
            for (int u = 0; u < kUNROLL<T>; ++u) // as in map2
            {
                prefetchVec<kDX, kDX>(pf, k + u * kW, ahead, g, x, dx);
            }
            for (int u = 0; u < kUNROLL<T>; ++u)
            {
                r[u] = gradStep<kDX>(g, x, k + u * kW, sumVec, bf16Insn);
            }
            for (int u = 0; kDX && u < kUNROLL<T>; ++u)
            {
                r[u].store(dx + k + u * kW);
            }
        }
    }
    for (; k + kW <= len; k += kW)
    {
        prefetchVec<kDX, kDX>(pf, k, ahead, g, x, dx);
        V const r = gradStep<kDX>(g, x, k, sumVec, bf16Insn);
        if constexpr (kDX)
        {
            r.store(dx + k);
        }
    }
    if constexpr (kDX)
    {
        gradRun(g + k, x + k, dx + k, len - k);
    }
    return k;
}

//! dx over [0, len) (if kDX) and lane[k % 8] += g[k] in order (as addLanes(lane, g, len) does, the same bits).
template <typename T, bool kDX = true>
void gradRunLaneSum(T const* g, T const* x, T* dx, int64_t len, double (&lane)[8])
{
    if constexpr (std::is_same_v<T, double>)
    {
        if constexpr (kDX)
        {
            gradRun(g, x, dx, len);
        }
        addLanes(lane, g, len);
    }
    else
    {
        VD acc[kLANE_VECS];
        for (int v = 0; v < kLANE_VECS; ++v)
        {
            acc[v] = VD::loadu(lane + v * VD::size());
        }
        // The half starting at element k feeds the lanes k % 8 onwards: lane vector (k / VD::size()) % kLANE_VECS.
        auto const addHalves = [&](int64_t k, Halves const& halves) {
            auto const& [lo, hi] = halves;
            int64_t const v = (k / VD::size()) % kLANE_VECS;
            acc[v] = acc[v] + lo;
            acc[(v + 1) % kLANE_VECS] = acc[(v + 1) % kLANE_VECS] + hi;
        };
        int64_t const whole = gradRunSum<T, kDX>(g, x, dx, len, kPREFETCH_AHEAD<T>, addHalves);
        for (int v = 0; v < kLANE_VECS; ++v)
        {
            acc[v].store(lane + v * VD::size());
        }
        for (int64_t k = whole; k < len; ++k)
        {
            lane[k % 8] += static_cast<double>(g[k]);
        }
    }
}

//! dx over [0, len) (if kDX) and acc[k] += g[k] for each k, prefetching `ahead` elements ahead.
template <typename T, bool kDX = true>
void gradRunAccumulate(T const* g, T const* x, T* dx, int64_t len, int64_t ahead, double* acc)
{
    int64_t whole = 0;
    if constexpr (std::is_same_v<T, double>)
    {
        if constexpr (kDX)
        {
            gradRun(g, x, dx, len);
        }
    }
    else
    {
        whole = gradRunSum<T, kDX>(g, x, dx, len, ahead, [&](int64_t k, Halves const& halves) {
            auto const& [lo, hi] = halves;
            (VD::loadu(acc + k) + lo).store(acc + k);
            (VD::loadu(acc + k + VD::size()) + hi).store(acc + k + VD::size());
        });
    }
    for (int64_t k = whole; k < len; ++k)
    {
        acc[k] += static_cast<double>(g[k]);
    }
}

//! Task t of the plan: partial[row * channels + c] for the channels of its tile (cpu::biasGradTaskRange); with dx,
//! also dx = swishGrad(g, x) for the task's elements (the same elements, each once over the plan's tasks), g summed
//! from the vectors the gradient loaded: one pass over g. Without dx, x and dx may be null.
template <typename T, bool kWithDx>
void biasGradTask(T const* g, T const* x, T* dx, cpu::BiasGradPlan const& p, int64_t t, double* partial)
{
    cpu::BiasGradTaskRange const r = cpu::biasGradTaskRange(p, t);
    double* acc = partial + r.row * p.channels;
    // Last-dim rows cut into channel tiles: the task's next elements are the same tile of the next row, not the next
    // page (another task's tile; the hardware prefetchers stop at the page).
    int64_t const ahead = p.inner == 1 && p.chanTiles > 1 ? p.channels : kPREFETCH_AHEAD<T>;
    auto const xAt = [&](int64_t i) { return kWithDx ? x + i : nullptr; };
    auto const dxAt = [&](int64_t i) { return kWithDx ? dx + i : nullptr; };
    for (int64_t c = r.c0; c < r.c1; ++c)
    {
        acc[c] = 0.0;
    }
    for (int64_t o = r.o0; o < r.o1; ++o)
    {
        int64_t const row = o * p.channels * p.inner;
        if (p.inner == 1)
        {
            int64_t const at = row + r.c0;
            gradRunAccumulate<T, kWithDx>(g + at, xAt(at), dxAt(at), r.c1 - r.c0, ahead, acc + r.c0);
            continue;
        }
        for (int64_t c = r.c0; c < r.c1; ++c)
        {
            int64_t const at = row + c * p.inner + r.k0;
            double lane[8] = {};
            gradRunLaneSum<T, kWithDx>(g + at, xAt(at), dxAt(at), r.len, lane);
            acc[c] += laneTotal(lane);
        }
    }
}

// Runs of one bias value (planes) or of one row (a last-dim bias's channels) shorter than this take shortRunsTask in
// the fused backward; from 64 elements biasGradTask's loop per run is as fast or faster (performance notes).
constexpr int64_t kSHORT_RUN = 64;

//! biasGradTask with dx for runs shorter than kSHORT_RUN (a plane is then a whole segment of the plan: each task
//! holds whole planes): dx over a row's tile as one stretch, or over all the task's rows where its tile is the whole
//! row (a run alone ends in a partial vector, the whole math for a few elements); then the task's sums of g, from the
//! cache, as biasGradTask without dx adds them (the same bits).
template <typename T>
void shortRunsTask(T const* g, T const* x, T* dx, cpu::BiasGradPlan const& p, int64_t t, double* partial)
{
    cpu::BiasGradTaskRange const r = cpu::biasGradTaskRange(p, t);
    int64_t const width = (r.c1 - r.c0) * p.inner; // of a row
    if (r.c1 - r.c0 == p.channels) // whole rows: the task's rows are one stretch of g
    {
        int64_t const at = r.o0 * width;
        gradRun(g + at, x + at, dx + at, (r.o1 - r.o0) * width);
    }
    else
    {
        for (int64_t o = r.o0; o < r.o1; ++o)
        {
            int64_t const at = (o * p.channels + r.c0) * p.inner;
            gradRun(g + at, x + at, dx + at, width);
        }
    }
    biasGradTask<T, false>(g, nullptr, nullptr, p, t, partial);
}

template <typename T, bool kWithDx>
void biasGradTyped(
    void const* gv, void const* xv, void* dxv, cpu::BiasGradPlan const& plan, int64_t begin, int64_t end, double* partial)
{
    if constexpr (kWithDx)
    {
        if ((plan.inner > 1 ? plan.inner : plan.channels) < kSHORT_RUN)
        {
            for (int64_t t = begin; t < end; ++t)
            {
                shortRunsTask(static_cast<T const*>(gv), static_cast<T const*>(xv), static_cast<T*>(dxv), plan, t,
                    partial);
            }
            return;
        }
    }
    for (int64_t t = begin; t < end; ++t)
    {
        biasGradTask<T, kWithDx>(
            static_cast<T const*>(gv), static_cast<T const*>(xv), static_cast<T*>(dxv), plan, t, partial);
    }
}

// The op checks dtype before any kernel runs (prepare, checkBackward), so the dispatch's own error is a backstop.
void forward(c10::ScalarType dtype, void const* x, void const* bias, void* y, int64_t begin, int64_t end, BiasSpec spec)
{
    AT_DISPATCH_FLOATING_TYPES_AND2(c10::kHalf, c10::kBFloat16, dtype, "swish_cpu",
        [&] { forwardTyped<scalar_t>(x, bias, y, begin, end, spec); });
}

void backward(c10::ScalarType dtype, void const* g, void const* x, void* dx, int64_t begin, int64_t end)
{
    AT_DISPATCH_FLOATING_TYPES_AND2(
        c10::kHalf, c10::kBFloat16, dtype, "swish_backward_cpu", [&] { backwardTyped<scalar_t>(g, x, dx, begin, end); });
}

void biasGrad(
    c10::ScalarType dtype, void const* g, cpu::BiasGradPlan const& plan, int64_t begin, int64_t end, double* partial)
{
    AT_DISPATCH_FLOATING_TYPES_AND2(c10::kHalf, c10::kBFloat16, dtype, "swish_bias_grad_cpu",
        [&] { biasGradTyped<scalar_t, false>(g, nullptr, nullptr, plan, begin, end, partial); });
}

void backwardFused(c10::ScalarType dtype, void const* g, void const* x, void* dx, cpu::BiasGradPlan const& plan,
    int64_t begin, int64_t end, double* partial)
{
    AT_DISPATCH_FLOATING_TYPES_AND2(c10::kHalf, c10::kBFloat16, dtype, "swish_backward_fused_cpu",
        [&] { biasGradTyped<scalar_t, true>(g, x, dx, plan, begin, end, partial); });
}

void sigmoidFloat(float const* x, float* y, int64_t n)
{
    int64_t k = 0;
    for (; k + VF::size() <= n; k += VF::size())
    {
        sigmoid(VF::loadu(x + k)).store(y + k);
    }
    if (k < n)
    {
        sigmoid(VF::loadu(x + k, n - k)).store(y + k, static_cast<int>(n - k));
    }
}

} // namespace

#define TORCHTRT_SWISH_STR2(x) #x
#define TORCHTRT_SWISH_STR(x) TORCHTRT_SWISH_STR2(x)
Kernels const kKernels{
    TORCHTRT_SWISH_STR(CPU_CAPABILITY), &forward, &backward, &biasGrad, &backwardFused, &sigmoidFloat};

} // namespace CPU_CAPABILITY
} // namespace cpu_vec
} // namespace torchtrt_swish
