// CUDA kernels behind swish_kernel.h. No torch, no TensorRT: compiled once into an object that the torch
// extension and the TensorRT plugin library both link.
#include "swish_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <numeric>

namespace torchtrt_swish {
namespace {

constexpr int kTHREADS = 256;
// Independent 16-byte packs per thread per iteration of the backward kernels: enough bytes in flight to cover HBM
// latency.
constexpr int kUNROLL = 4;
// Forward launch shapes: up to kFWD_SMALL_PACKS packs one pack per thread in 256-thread blocks (the most threads,
// hence the most loads in flight, for a tensor that cannot fill the chip); above, two packs per thread in 128-thread
// blocks, which streamed faster at 2^28 elements on the H200 than four packs in 256-thread blocks
// (docs/performance-notes.md).
constexpr int64_t kFWD_SMALL_PACKS = int64_t{1} << 18;
// fp16/bf16 tensors of at most this many 16-byte packs (2^20 elements) go through the small kernel with 8-byte
// packs instead: twice the threads, each with half the math ahead of its store, which shortens a launch that cannot
// fill the chip. fp32 has half the elements per byte and lost at every size with narrow packs.
constexpr int64_t kFWD_HALF_NARROW_PACKS = int64_t{1} << 17;
// Backward kernels hold two input packs per unrolled step; without a cap bf16 reached 121 registers (two
// blocks per SM). Three resident blocks (<= 85 registers, no spills) keep more loads in flight.
constexpr int kMIN_BLOCKS = 3;

// TORCHTRT_SWISH_LEGACY_LAYOUTS=1 selects the layout paths that came before the planes backward and the two-channel
// forward packs (per-element bias lookup for planes that are not whole packs; the rows kernel for dim-1 planes of
// >= 512 elements and an unfused backward below), so that one build can be measured both ways. Read once.
bool legacyLayouts()
{
    static bool const kLEGACY = [] {
        char const* v = std::getenv("TORCHTRT_SWISH_LEGACY_LAYOUTS");
        return v != nullptr && v[0] == '1';
    }();
    return kLEGACY;
}

template <typename T>
struct Cvt;

template <>
struct Cvt<float>
{
    static __device__ __forceinline__ float toF(float v) { return v; }
    static __device__ __forceinline__ float fromF(float v) { return v; }
};

template <>
struct Cvt<__half>
{
    static __device__ __forceinline__ float toF(__half v) { return __half2float(v); }
    static __device__ __forceinline__ __half fromF(float v) { return __float2half_rn(v); }
};

template <>
struct Cvt<__nv_bfloat16>
{
    // bf16 is the top half of an fp32: a shift, written out so the compiler can schedule it freely (the header's
    // inline-asm conversion kept the bf16 kernels at up to 121 registers).
    static __device__ __forceinline__ float toF(__nv_bfloat16 v)
    {
        return __uint_as_float(static_cast<uint32_t>(__bfloat16_as_ushort(v)) << 16);
    }
    static __device__ __forceinline__ __nv_bfloat16 fromF(float v) { return __float2bfloat16_rn(v); }
};

// 1/v with a 1-ulp hardware approximation; subnormal results are kept (no .ftz), 1/inf = 0.
__device__ __forceinline__ float rcpApprox(float v)
{
    float r;
    asm("rcp.approx.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}

// 1/v from the hardware estimate (MUFU.RCP) alone; its result is only used where v is a normal number with a normal
// reciprocal.
__device__ __forceinline__ float rcpApproxFtz(float v)
{
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}

// q[k] = num[k] / den[k] rounded to nearest, bit-identical to __fdiv_rn, for the quotients swish divides: den =
// 1 + exp(-num) in the forward, num = 1 in the backward (den >= 1 or NaN in both). __fdiv_rn per element compiles
// to the hardware fast path (reciprocal estimate, one Newton step, one residual correction) behind a range check
// (FCHK) and a branch to a slow path; each branch is a convergence region, so a pack's divisions ran one after
// another, which made the fp32 kernels latency-bound at small sizes. Here the same fast path runs for the whole
// pack with no branch, and one range check per pack sends the pack to __fdiv_rn if any element is outside the
// range where the fast path is exact. That range needs two compares per element: den <= 2^32 (false for NaN, and
// in the forward for every x below -22, -inf included) and num <= 2^64 (false for +inf). Tiny |x| needs none:
// below 2^-32 the denominator is exactly 2, and halving is exact at any magnitude, subnormals included. The
// residual is taken as den * q0 - num and subtracted, not as num - den * q0 and added: the same rounding (negation
// is exact), and 0 / den keeps its sign without a select. tests/test_ops.py runs all 2^32 fp32 inputs of both the
// forward (with a zero and an inexact bias) and the backward against PyTorch's kernels on the GPU.
template <int kN>
__device__ __forceinline__ void divRnAll(float const (&num)[kN], float const (&den)[kN], float (&q)[kN])
{
    bool fast = true;
#pragma unroll
    for (int k = 0; k < kN; ++k)
    {
        float const r0 = rcpApproxFtz(den[k]);
        float const r1 = __fmaf_rn(r0, __fmaf_rn(-den[k], r0, 1.0f), r0);
        float const q0 = __fmul_rn(num[k], r1);
        q[k] = __fmaf_rn(-r1, __fmaf_rn(den[k], q0, -num[k]), q0);
        fast &= den[k] <= 0x1p32f && num[k] <= 0x1p64f;
    }
    if (!fast)
    {
#pragma unroll
        for (int k = 0; k < kN; ++k)
        {
            q[k] = __fdiv_rn(num[k], den[k]);
        }
    }
}

// r[k] = 1 / d[k] to rcp.approx.f32's 1 ulp, bit-identical to rcpApprox, for d >= 1 or NaN (the half types'
// swish denominators). rcp.approx.f32 keeps subnormal results, so the compiler wraps each MUFU.RCP in two range
// compares, two selects and two scalings. Only d > 2^126 has a subnormal reciprocal (x < -87.3, where a bf16 result
// can still be nonzero), so one compare per element sends such a pack to rcpApprox and every other pack uses the
// hardware estimate alone, which is the same value there.
template <int kN>
__device__ __forceinline__ void rcpAll(float const (&d)[kN], float (&r)[kN])
{
    bool normal = true;
#pragma unroll
    for (int k = 0; k < kN; ++k)
    {
        r[k] = rcpApproxFtz(d[k]);
        normal &= d[k] <= 0x1p126f; // false for NaN
    }
    if (!normal)
    {
#pragma unroll
        for (int k = 0; k < kN; ++k)
        {
            r[k] = rcpApprox(d[k]);
        }
    }
}

// In place: v[k] = swish(v[k]) + b[k] for kN elements of one pack.
// fp32 outputs: PyTorch's silu formula and operation order (x / (1 + exp(-x))), IEEE divide, so results match
// F.silu(x) + b; the _rn intrinsics keep the compiler from contracting the bias add into an FMA.
// fp16/bf16 outputs: the same exp, then x * rcp(1 + e) + b in one FMA. Its fp32 error (a few fp32 ulps) is far
// below half an fp16/bf16 ulp, special values are unchanged (1/inf = 0, -inf * 0 = NaN), and it drops the
// divide's slow-path check that made the half kernels compute-bound.
template <typename T, int kN>
__device__ __forceinline__ void swishBiasAll(float (&v)[kN], float const (&b)[kN])
{
    if constexpr (sizeof(T) == 4)
    {
        float d[kN];
#pragma unroll
        for (int k = 0; k < kN; ++k)
        {
            d[k] = __fadd_rn(1.0f, expf(-v[k]));
        }
        float q[kN];
        divRnAll(v, d, q);
#pragma unroll
        for (int k = 0; k < kN; ++k)
        {
            v[k] = __fadd_rn(q[k], b[k]);
        }
    }
    else
    {
        float d[kN];
#pragma unroll
        for (int k = 0; k < kN; ++k)
        {
            d[k] = 1.0f + expf(-v[k]);
        }
        float r[kN];
        rcpAll(d, r);
#pragma unroll
        for (int k = 0; k < kN; ++k)
        {
            v[k] = fmaf(v[k], r[k], b[k]);
        }
    }
}

// In place: x[k] becomes dx[k] = g[k] * s * (1 + x * (1 - s)), s = 1 / (1 + exp(-x)): PyTorch's silu_backward
// (exact reciprocal for fp32, the fast one for half types).
template <typename T, int kN>
__device__ __forceinline__ void swishGradAll(float const (&g)[kN], float (&x)[kN])
{
    float d[kN];
    float s[kN];
#pragma unroll
    for (int k = 0; k < kN; ++k)
    {
        d[k] = __fadd_rn(1.0f, expf(-x[k]));
    }
    if constexpr (sizeof(T) == 4)
    {
        float one[kN];
#pragma unroll
        for (int k = 0; k < kN; ++k)
        {
            one[k] = 1.0f;
        }
        divRnAll(one, d, s);
    }
    else
    {
        rcpAll(d, s);
    }
#pragma unroll
    for (int k = 0; k < kN; ++k)
    {
        x[k] = g[k] * s[k] * (1.0f + x[k] * (1.0f - s[k]));
    }
}

template <typename T, int kVEC>
struct alignas(sizeof(T) * kVEC) Pack
{
    T v[kVEC];
};

// Division by a run-time constant: multiply-high + shift for 32-bit dividends (Granlund-Montgomery), plain
// 64-bit division otherwise. Integer division per pack would otherwise cost more than the math it indexes.
struct FastDiv
{
    uint64_t d{1};
    uint32_t mul{1};
    uint32_t shift{0};

    static FastDiv make(int64_t divisor)
    {
        FastDiv f;
        f.d = static_cast<uint64_t>(divisor);
        if (f.d > 0xffffffffULL)
        {
            return f; // div() takes the 64-bit path for such divisors
        }
        while ((uint64_t{1} << f.shift) < f.d)
        {
            ++f.shift;
        }
        f.mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << f.shift) - f.d)) / f.d + 1);
        return f;
    }

    __device__ __forceinline__ uint64_t div(uint64_t n) const
    {
        if (n <= 0xffffffffULL && d <= 0xffffffffULL)
        {
            auto const n32 = static_cast<uint32_t>(n);
            return (static_cast<uint64_t>(__umulhi(n32, mul)) + n32) >> shift;
        }
        return n / d;
    }

    // n / d for callers that know n and d fit in 32 bits (block-local offsets).
    __device__ __forceinline__ uint32_t div32(uint32_t n) const
    {
        return static_cast<uint32_t>((static_cast<uint64_t>(__umulhi(n, mul)) + n) >> shift);
    }
};

enum class Mode : int
{
    kSCALAR,      // one bias value
    kFULL,        // bias[i]
    kLAST_VEC,    // bias[i % C], C a multiple of the pack width: one 16-byte bias load per pack
    kLAST_FIXED,  // as kLAST_VEC with C / width dividing the block size: bias loaded once per thread
    kUNIFORM_VEC, // bias[(i / inner) % C], inner a multiple of the pack width: one bias value per pack
    kSPAN2,       // bias[(i / inner) % C], inner >= the pack width: a pack spans at most two channels
    kPERIODIC     // bias[(i / inner) % C], anything else: per-element lookup
};

struct FwdParams
{
    BiasSpec spec;
    FastDiv byPacksPerRow; // kLAST_VEC: C / kVEC;  kUNIFORM_VEC: inner / kVEC;  kSPAN2: inner
    FastDiv byChannels;    // kUNIFORM_VEC, kSPAN2: C
    int64_t offset;        // flat index of element 0 (scalar tail launches)
};

// Bias for kVEC consecutive elements starting at flat index i (pack index p when vectorized).
template <typename T, int kVEC, Mode kMODE>
__device__ __forceinline__ void biasFor(T const* __restrict__ bias, float scalarBias, int64_t i, int64_t p,
    FwdParams const& prm, float (&out)[kVEC])
{
    if constexpr (kMODE == Mode::kSCALAR)
    {
#pragma unroll
        for (int k = 0; k < kVEC; ++k)
        {
            out[k] = scalarBias;
        }
    }
    else if constexpr (kMODE == Mode::kFULL || kMODE == Mode::kLAST_VEC)
    {
        int64_t j = i;
        if constexpr (kMODE == Mode::kLAST_VEC)
        {
            uint64_t const q = prm.byPacksPerRow.div(static_cast<uint64_t>(p));
            j = (p - static_cast<int64_t>(q * prm.byPacksPerRow.d)) * kVEC;
        }
        if constexpr (kVEC > 1)
        {
            static_assert(sizeof(Pack<T, kVEC>) == sizeof(uint4), "bias packs are 16 bytes");
            uint4 const raw = __ldg(reinterpret_cast<uint4 const*>(bias + j)); // read-only path, bias is reused
            Pack<T, kVEC> b;
            memcpy(&b, &raw, sizeof(raw));
#pragma unroll
            for (int k = 0; k < kVEC; ++k)
            {
                out[k] = Cvt<T>::toF(b.v[k]);
            }
        }
        else
        {
            out[0] = Cvt<T>::toF(bias[j]);
        }
    }
    else if constexpr (kMODE == Mode::kUNIFORM_VEC)
    {
        uint64_t const q = prm.byPacksPerRow.div(static_cast<uint64_t>(p));
        uint64_t const c = q - prm.byChannels.div(q) * prm.byChannels.d;
        float const b = Cvt<T>::toF(__ldg(bias + c));
#pragma unroll
        for (int k = 0; k < kVEC; ++k)
        {
            out[k] = b;
        }
    }
    else if constexpr (kMODE == Mode::kSPAN2)
    {
        // NCHW-like planes whose length is not a multiple of the pack (7x7, 14x14 in fp16): the pack's first
        // `split` elements take channel c, the rest the next one. Both loads hit L1 after the first pack of a
        // plane; the select costs less than the 64-bit divisions of the per-element lookup.
        uint64_t const q = prm.byPacksPerRow.div(static_cast<uint64_t>(i));
        int64_t const split = prm.spec.inner - (i - static_cast<int64_t>(q * prm.byPacksPerRow.d));
        uint64_t const c = q - prm.byChannels.div(q) * prm.byChannels.d;
        uint64_t const c1 = c + 1 == prm.byChannels.d ? 0 : c + 1;
        float const b0 = Cvt<T>::toF(__ldg(bias + c));
        float const b1 = Cvt<T>::toF(__ldg(bias + c1));
#pragma unroll
        for (int k = 0; k < kVEC; ++k)
        {
            out[k] = k < split ? b0 : b1;
        }
    }
    else
    {
        int64_t q = i / prm.spec.inner;
        int64_t r = i - q * prm.spec.inner;
        int64_t c = q % prm.spec.channels;
#pragma unroll
        for (int k = 0; k < kVEC; ++k)
        {
            out[k] = Cvt<T>::toF(__ldg(bias + c));
            if (++r == prm.spec.inner)
            {
                r = 0;
                if (++c == prm.spec.channels)
                {
                    c = 0;
                }
            }
        }
    }
}

// One pack of T from kVEC floats (round to nearest).
template <typename T, int kVEC>
__device__ __forceinline__ Pack<T, kVEC> packFrom(float const (&v)[kVEC])
{
    Pack<T, kVEC> out;
#pragma unroll
    for (int k = 0; k < kVEC; ++k)
    {
        out.v[k] = Cvt<T>::fromF(v[k]);
    }
    return out;
}

template <typename T, int kVEC, Mode kMODE>
__device__ __forceinline__ Pack<T, kVEC> swishPack(Pack<T, kVEC> const& in, T const* __restrict__ bias, float scalarBias,
    float const (&fixedBias)[kVEC], int64_t p, FwdParams const& prm)
{
    float b[kVEC];
    if constexpr (kMODE == Mode::kLAST_FIXED)
    {
#pragma unroll
        for (int k = 0; k < kVEC; ++k)
        {
            b[k] = fixedBias[k];
        }
    }
    else
    {
        biasFor<T, kVEC, kMODE>(bias, scalarBias, prm.offset + p * kVEC, p, prm, b);
    }
    float v[kVEC];
#pragma unroll
    for (int k = 0; k < kVEC; ++k)
    {
        v[k] = Cvt<T>::toF(in.v[k]);
    }
    swishBiasAll<T>(v, b);
    return packFrom<T>(v);
}

// dx for one (g, x) pack; gf receives g as floats, the bias gradient's summands.
template <typename T, int kVEC>
__device__ __forceinline__ Pack<T, kVEC> gradPack(Pack<T, kVEC> const& g, Pack<T, kVEC> const& x, float (&gf)[kVEC])
{
    float v[kVEC];
#pragma unroll
    for (int k = 0; k < kVEC; ++k)
    {
        gf[k] = Cvt<T>::toF(g.v[k]);
        v[k] = Cvt<T>::toF(x.v[k]);
    }
    swishGradAll<T>(gf, v);
    return packFrom<T>(v);
}

// kPPT packs per thread, one pass over a grid that covers the tensor (no grid-stride loop: with one, the compiler
// hoisted the bias load ahead of the x loads and per-channel fp16/bf16 streamed 4-7 % slower at 2^28). Every x load
// is requested before the bias and the math, so the bias lookup's latency overlaps them.
template <typename T, int kVEC, Mode kMODE, int kT, int kPPT>
__global__ void __launch_bounds__(kT) swishForwardKernel(T const* __restrict__ x, T const* __restrict__ bias,
    T* __restrict__ y, int64_t nPacks, FwdParams prm)
{
    using P = Pack<T, kVEC>;
    int64_t const base = static_cast<int64_t>(blockIdx.x) * (kT * kPPT) + threadIdx.x;
    P in[kPPT];
#pragma unroll
    for (int u = 0; u < kPPT; ++u)
    {
        int64_t const p = base + static_cast<int64_t>(u) * kT;
        if constexpr (kPPT == 1)
        {
            // Unguarded (a thread past the end reads the last pack and exits before its store), so that ptxas
            // issues the bias load right behind it; behind a guard the scalar bias load waited for the first x
            // value, a second round trip. With two packs per thread this form let ptxas sink the first pack's load
            // below the bias conversion, so those keep the guard.
            in[u] = reinterpret_cast<P const*>(x)[p < nPacks ? p : nPacks - 1];
        }
        else if (p < nPacks)
        {
            in[u] = reinterpret_cast<P const*>(x)[p];
        }
    }
    float const scalarBias = kMODE == Mode::kSCALAR ? Cvt<T>::toF(bias[0]) : 0.0f;
    // kLAST_FIXED: C / kVEC divides kT, so all of this thread's packs have the same channels, and as kT is a power
    // of two so is C / kVEC: the remainder is a mask (a run-time 32-bit remainder took ~15 instructions, a
    // reciprocal among them, ahead of the x address).
    static_assert((kT & (kT - 1)) == 0, "kLAST_FIXED relies on a power-of-two block");
    float fixedBias[kVEC] = {};
    if constexpr (kMODE == Mode::kLAST_FIXED)
    {
        uint32_t const c = threadIdx.x & static_cast<uint32_t>(prm.byPacksPerRow.d - 1);
        Pack<T, kVEC> b;
        if constexpr (sizeof(b) == sizeof(uint4))
        {
            uint4 const raw = __ldg(reinterpret_cast<uint4 const*>(bias) + c);
            memcpy(&b, &raw, sizeof(raw));
        }
        else
        {
            static_assert(sizeof(b) == sizeof(uint2), "fixed bias packs are 16 or 8 bytes");
            uint2 const raw = __ldg(reinterpret_cast<uint2 const*>(bias) + c);
            memcpy(&b, &raw, sizeof(raw));
        }
#pragma unroll
        for (int k = 0; k < kVEC; ++k)
        {
            fixedBias[k] = Cvt<T>::toF(b.v[k]);
        }
    }
#pragma unroll
    for (int u = 0; u < kPPT; ++u)
    {
        int64_t const p = base + static_cast<int64_t>(u) * kT;
        if (p < nPacks)
        {
            reinterpret_cast<P*>(y)[p] = swishPack<T, kVEC, kMODE>(in[u], bias, scalarBias, fixedBias, p, prm);
        }
    }
}

// One unrolled step of the backward: kUNROLL packs p = base + u * kTHREADS (all loads first, then math and
// stores); returns the sum of g over them for the fused kernels' bias gradient.
template <typename T, int kVEC>
__device__ __forceinline__ float backwardStep(Pack<T, kVEC> const* __restrict__ gp, Pack<T, kVEC> const* __restrict__ xp,
    Pack<T, kVEC>* __restrict__ dp, int64_t base, int64_t nPacks)
{
    using P = Pack<T, kVEC>;
    P gi[kUNROLL];
    P xi[kUNROLL];
#pragma unroll
    for (int u = 0; u < kUNROLL; ++u)
    {
        int64_t const p = base + static_cast<int64_t>(u) * kTHREADS;
        if (p < nPacks)
        {
            gi[u] = gp[p];
            xi[u] = xp[p];
        }
    }
    float acc = 0.0f;
#pragma unroll
    for (int u = 0; u < kUNROLL; ++u)
    {
        int64_t const p = base + static_cast<int64_t>(u) * kTHREADS;
        if (p < nPacks)
        {
            float gf[kVEC];
            dp[p] = gradPack<T, kVEC>(gi[u], xi[u], gf);
#pragma unroll
            for (int k = 0; k < kVEC; ++k)
            {
                acc += gf[k];
            }
        }
    }
    return acc;
}

template <typename T, int kVEC>
__global__ void __launch_bounds__(kTHREADS, kMIN_BLOCKS) swishBackwardKernel(T const* __restrict__ g,
    T const* __restrict__ x, T* __restrict__ dx, int64_t nPacks)
{
    using P = Pack<T, kVEC>;
    int64_t const stride = static_cast<int64_t>(gridDim.x) * kTHREADS * kUNROLL;
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * kTHREADS * kUNROLL + threadIdx.x; base < nPacks;
         base += stride)
    {
        // The unused sum is dead code after inlining.
        backwardStep<T, kVEC>(reinterpret_cast<P const*>(g), reinterpret_cast<P const*>(x), reinterpret_cast<P*>(dx),
            base, nPacks);
    }
}

bool aligned16(void const* p);

// ----------------------------------------------------------------------------- fused backward
//
// dx and dbias in one read of (g, x). Every block writes fp32 partial sums of g to a workspace laid out as a
// matrix partial[R][C] (C = bias elements), and dbias[c] is the sum of column c, added in a fixed order
// (deterministic, no floating-point atomics). Three shapes of the main work, all views of x as [outer, C, inner]:
// "rows" (a scalar bias: the tensor is one run), "planes" (inner > 1: per-channel on dim 1, blocks before the last
// dim) and "columns" (inner == 1: per-channel on the last dim, full, trailing blocks).
//

constexpr int kWARPS = kTHREADS / 32;
// Elements one block of the rows kernel reduces: enough work per block to amortize its partial write.
constexpr int64_t kROW_CHUNK_PACKS = static_cast<int64_t>(kTHREADS) * kUNROLL * 2;
// Legacy layouts only: dim-1 runs this long took the rows kernel (one block per run), shorter ones the unfused path.
constexpr int64_t kMIN_ROW_INNER = 512;
// Elements per block in the columns kernel.
constexpr int64_t kCOL_BLOCK_ELEMS = 65536; // amortizes the per-block reduction and partial write
constexpr int kFINAL_THREADS = 1024;

__device__ __forceinline__ float blockSum(float v, float* smem)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
    {
        v += __shfl_down_sync(0xffffffffU, v, o);
    }
    int const lane = threadIdx.x & 31;
    int const warp = threadIdx.x >> 5;
    if (lane == 0)
    {
        smem[warp] = v;
    }
    __syncthreads();
    float total = 0.0f;
    if (threadIdx.x == 0)
    {
#pragma unroll
        for (int w = 0; w < kWARPS; ++w)
        {
            total += smem[w];
        }
    }
    return total; // valid in thread 0 only
}

// out[y][c] = sum of column c of rows [y * sliceRows, (y + 1) * sliceRows) of partial[R][C], y = blockIdx.y (one
// slice: dbias itself; several: a first stage whose [slices][C] result a second launch sums). A block covers colsPer
// columns (a power of two <= 8: 8 floats are one 32-byte sector, and narrow blocks make more blocks) with
// blockDim.x / colsPer row lanes; loads are coalesced along a row, each thread adds its rows in order, then the
// lanes are added by a fixed tree (deterministic).
template <typename TOut>
__global__ void __launch_bounds__(kFINAL_THREADS) finalizeColumnsKernel(float const* __restrict__ partial, int64_t R,
    int64_t C, int colsPer, int64_t sliceRows, TOut* __restrict__ out)
{
    __shared__ float smem[kFINAL_THREADS];
    int const tx = static_cast<int>(threadIdx.x) & (colsPer - 1);
    int const ty = static_cast<int>(threadIdx.x) / colsPer;
    int const lanes = static_cast<int>(blockDim.x) / colsPer;
    int64_t const c = static_cast<int64_t>(blockIdx.x) * colsPer + tx;
    int64_t const r0 = static_cast<int64_t>(blockIdx.y) * sliceRows;
    int64_t const r1 = min(R, r0 + sliceRows);
    float s = 0.0f;
    if (c < C)
    {
#pragma unroll 4
        for (int64_t r = r0 + ty; r < r1; r += lanes)
        {
            s += partial[r * C + c];
        }
    }
    smem[threadIdx.x] = s;
    __syncthreads();
    for (int h = lanes / 2; h > 0; h /= 2)
    {
        if (ty < h)
        {
            smem[threadIdx.x] += smem[threadIdx.x + h * colsPer];
        }
        __syncthreads();
    }
    if (ty == 0 && c < C)
    {
        out[blockIdx.y * C + c] = Cvt<TOut>::fromF(smem[tx]);
    }
}

struct RowsPlan
{
    int64_t rows;   // outer * C
    int64_t len;    // elements per row (inner; n for a scalar bias)
    int64_t chunks; // chunks per row
    int64_t chunkElems;
    int64_t channels;
};

// One block reduces one chunk of one row (row = o * C + c) and writes dx; its sum goes to
// partial[o * chunks + chunk][c].
template <typename T, int kVEC>
__global__ void __launch_bounds__(kTHREADS, kMIN_BLOCKS) swishBackwardRowsKernel(T const* __restrict__ g, T const* __restrict__ x,
    T* __restrict__ dx, RowsPlan plan, float* __restrict__ partial)
{
    __shared__ float smem[kWARPS];
    using P = Pack<T, kVEC>;
    // 32-bit block decomposition (the launcher keeps blocks <= INT_MAX): a 64-bit division is a subroutine call
    // ahead of every block's first load.
    uint32_t const b = blockIdx.x;
    auto const chunks32 = static_cast<uint32_t>(plan.chunks);
    int64_t const row = b / chunks32;
    int64_t const chunk = b - static_cast<uint32_t>(row) * chunks32;
    int64_t const begin = row * plan.len + chunk * plan.chunkElems;
    int64_t const count = min(plan.chunkElems, plan.len - chunk * plan.chunkElems);
    int64_t const nPacks = count / kVEC; // begin is pack-aligned when kVEC > 1 (len % kVEC == 0)
    P const* gp = reinterpret_cast<P const*>(g + begin);
    P const* xp = reinterpret_cast<P const*>(x + begin);
    P* dp = reinterpret_cast<P*>(dx + begin);
    float acc = 0.0f;
    for (int64_t base = threadIdx.x; base < nPacks; base += static_cast<int64_t>(kTHREADS) * kUNROLL)
    {
        acc += backwardStep<T, kVEC>(gp, xp, dp, base, nPacks);
    }
    // Tail of a chunk whose length is not a multiple of kVEC (only the last chunk of a scalar-bias tensor).
    for (int64_t i = nPacks * kVEC + threadIdx.x; i < count; i += kTHREADS)
    {
        float gv[1] = {Cvt<T>::toF(g[begin + i])};
        float v[1] = {Cvt<T>::toF(x[begin + i])};
        swishGradAll<T>(gv, v);
        acc += gv[0];
        dx[begin + i] = Cvt<T>::fromF(v[0]);
    }
    float const total = blockSum(acc, smem);
    if (threadIdx.x == 0)
    {
        int64_t const o = row / plan.channels;
        int64_t const c = row - o * plan.channels;
        partial[(o * plan.chunks + chunk) * plan.channels + c] = total;
    }
}

struct ColsPlan
{
    int64_t rows;         // outer
    int64_t packsPerRow;  // C / kVEC
    int64_t tilePacks;    // packs of one column tile (<= kTHREADS)
    int64_t tiles;        // column tiles
    int64_t rowsPerStep;  // kTHREADS / tilePacks
    int64_t rowsPerBlock; // multiple of rowsPerStep
    int64_t rowChunks;
};

// Block (rowChunk, tile): rows [rowChunk * rowsPerBlock, +rowsPerBlock) x the tile's column packs.
// partial[rowChunk][column] = sum of g over those rows.
template <typename T, int kVEC>
__global__ void __launch_bounds__(kTHREADS, kMIN_BLOCKS) swishBackwardColsKernel(T const* __restrict__ g, T const* __restrict__ x,
    T* __restrict__ dx, ColsPlan plan, float* __restrict__ partial)
{
    __shared__ float smem[kTHREADS * kVEC];
    using P = Pack<T, kVEC>;
    // 32-bit decomposition of block and thread indices (blocks <= INT_MAX, tilePacks <= kTHREADS): 64-bit
    // divisions are subroutine calls ahead of every block's first load.
    uint32_t const b = blockIdx.x;
    auto const tiles32 = static_cast<uint32_t>(plan.tiles);
    auto const tilePacks32 = static_cast<uint32_t>(plan.tilePacks);
    uint32_t const rowChunk = b / tiles32;
    uint32_t const tile = b - rowChunk * tiles32;
    int const tr = static_cast<int>(threadIdx.x / tilePacks32);
    int const tp = static_cast<int>(threadIdx.x - static_cast<uint32_t>(tr) * tilePacks32);
    int64_t const col = tile * plan.tilePacks + tp; // column pack index
    bool const active = tr < plan.rowsPerStep && col < plan.packsPerRow;
    int64_t const r0 = rowChunk * plan.rowsPerBlock;
    int64_t const r1 = min(plan.rows, r0 + plan.rowsPerBlock);
    P const* gp = reinterpret_cast<P const*>(g);
    P const* xp = reinterpret_cast<P const*>(x);
    P* dp = reinterpret_cast<P*>(dx);
    float acc[kVEC];
#pragma unroll
    for (int k = 0; k < kVEC; ++k)
    {
        acc[k] = 0.0f;
    }
    if (active)
    {
        int64_t const step = plan.rowsPerStep;
        for (int64_t r = r0 + tr; r < r1; r += step * kUNROLL)
        {
            P gi[kUNROLL];
            P xi[kUNROLL];
#pragma unroll
            for (int u = 0; u < kUNROLL; ++u)
            {
                int64_t const rr = r + u * step;
                if (rr < r1)
                {
                    gi[u] = gp[rr * plan.packsPerRow + col];
                    xi[u] = xp[rr * plan.packsPerRow + col];
                }
            }
#pragma unroll
            for (int u = 0; u < kUNROLL; ++u)
            {
                int64_t const rr = r + u * step;
                if (rr < r1)
                {
                    float gf[kVEC];
                    dp[rr * plan.packsPerRow + col] = gradPack<T, kVEC>(gi[u], xi[u], gf);
#pragma unroll
                    for (int k = 0; k < kVEC; ++k)
                    {
                        acc[k] += gf[k];
                    }
                }
            }
        }
    }
    int const tilePacks = static_cast<int>(plan.tilePacks);
    int64_t const C = plan.packsPerRow * kVEC;
    if ((32 % tilePacks) == 0)
    {
        // A warp holds 32 / tilePacks whole rows of the tile: add them with shuffles (a fixed xor tree), then one
        // barrier and the warps' sums in warp order, so the result stays deterministic. The shared-memory tree
        // below needed a barrier per level (five for 32 rows), which cost the small per-channel backward
        // microseconds against the rows kernel's one.
#pragma unroll
        for (int k = 0; k < kVEC; ++k)
        {
            for (int o = tilePacks; o < 32; o *= 2)
            {
                acc[k] += __shfl_xor_sync(0xffffffffU, acc[k], o);
            }
        }
        int const lane = static_cast<int>(threadIdx.x & 31U);
        int const warp = static_cast<int>(threadIdx.x >> 5);
        int const width = tilePacks * kVEC; // one warp's sums: [tilePack][k], the order of the partial row
        if (lane < tilePacks)
        {
#pragma unroll
            for (int k = 0; k < kVEC; ++k)
            {
                smem[warp * width + lane * kVEC + k] = acc[k];
            }
        }
        __syncthreads();
        int const t = static_cast<int>(threadIdx.x);
        int64_t const out = tile * plan.tilePacks * kVEC + t; // column of this thread's sum
        if (t < width && out < C)
        {
            float sum = 0.0f;
#pragma unroll
            for (int w = 0; w < kWARPS; ++w)
            {
                sum += smem[w * width + t];
            }
            partial[rowChunk * C + out] = sum;
        }
        return;
    }
    // Other tile widths: combine the rowsPerStep threads that share a column element with a fixed tree over the
    // rows, in smem laid out [k][row][tilePack]: a warp's threads touch consecutive words at every step (a
    // [row][tilePack][k] layout had 4- to 8-way bank conflicts, which cost small tensors microseconds).
    int const rps = static_cast<int>(plan.rowsPerStep);
    auto at = [&](int k, int row) -> float& { return smem[(k * rps + row) * tilePacks + tp]; };
    if (tr < rps)
    {
#pragma unroll
        for (int k = 0; k < kVEC; ++k)
        {
            at(k, tr) = acc[k];
        }
    }
    __syncthreads();
    int top = 1;
    while (top < rps)
    {
        top *= 2;
    }
    for (int h = top / 2; h > 0; h /= 2)
    {
        if (tr < h && tr + h < rps)
        {
#pragma unroll
            for (int k = 0; k < kVEC; ++k)
            {
                at(k, tr) += at(k, tr + h);
            }
        }
        __syncthreads();
    }
    if (tr == 0 && col < plan.packsPerRow)
    {
#pragma unroll
        for (int k = 0; k < kVEC; ++k)
        {
            partial[rowChunk * C + col * kVEC + k] = at(k, 0);
        }
    }
}


// ----------------------------------------------------------------------------- planes backward
//
// Bias constant along "planes" of inner > 1 elements that are not the whole tensor: per-channel on dim 1 ([C,1,..]
// over NCHW-like x) and blocks ending before the last dim. Plane q = o * C + c holds elements [q * inner, +inner).
// A block streams one contiguous piece that starts on a plane boundary and on a pack boundary, so every access of
// x, g and dx is a whole aligned pack however `inner` relates to the pack width (7x7 and 14x14 planes included),
// with one round of loads per thread (kPLANE_PPT packs) as in the forward. g is reduced per plane in shared
// memory: each pack leaves the sum of its elements in its first plane (head) and in the next one (tail; inner >=
// the pack width, so a pack spans at most two planes); a plane's sum adds its packs' parts in pack order over a
// fixed number of lanes, then a fixed shuffle tree. The order depends on the shape only, so dbias is the same bits
// on every run. Block shapes (PlanesPlan::shape):
//   kSAMPLES: m whole samples ([C, inner] each): C sums per block, partial[block][c] (small planes: few partials);
//   kPLANES:  k whole planes: one sum per plane, at its plane index, i.e. partial[o][c];
//   kSPLIT:   planes longer than a block, split in `splits` pieces: partial[o * splits + s][c].

constexpr int kPLANE_PPT = 4;
constexpr int kPLANE_PACKS = kTHREADS * kPLANE_PPT; // packs per block at the most

enum class PlanesShape : int { kSAMPLES, kPLANES, kSPLIT };

struct PlanesPlan
{
    int64_t n;
    int64_t inner;
    int64_t channels;
    int64_t planes;      // n / inner
    int64_t blockElems;  // elements per block (the last one may have fewer)
    int64_t blockPlanes; // kSAMPLES, kPLANES: whole planes per block
    int64_t splits;      // kSPLIT: blocks per plane
    int32_t slots;       // kSAMPLES: C; kPLANES: blockPlanes
    int32_t lanes;       // threads per slot in the block's reduction (a power of two <= 32)
    PlanesShape shape;
    FastDiv byInner;     // block-local element -> block-local plane
};

template <typename T, int kVEC>
__global__ void __launch_bounds__(kTHREADS, kMIN_BLOCKS) swishBackwardPlanesKernel(T const* __restrict__ g,
    T const* __restrict__ x, T* __restrict__ dx, PlanesPlan plan, float* __restrict__ partial)
{
    __shared__ float head[kPLANE_PACKS];
    __shared__ float tail[kPLANE_PACKS];
    using P = Pack<T, kVEC>;
    uint32_t const b = blockIdx.x;
    int const t = static_cast<int>(threadIdx.x);
    bool const split = plan.shape == PlanesShape::kSPLIT;
    int64_t start;
    int64_t len;
    int64_t localPlanes = 1;
    if (split)
    {
        // 32-bit: blocks <= INT_MAX (a 64-bit division is a subroutine call ahead of the first load).
        auto const splits32 = static_cast<uint32_t>(plan.splits);
        uint32_t const q = b / splits32;
        uint32_t const piece = b - q * splits32;
        int64_t const off = static_cast<int64_t>(piece) * plan.blockElems;
        start = static_cast<int64_t>(q) * plan.inner + off;
        len = min(plan.blockElems, plan.inner - off);
    }
    else
    {
        start = static_cast<int64_t>(b) * plan.blockElems;
        len = min(plan.blockElems, plan.n - start);
        localPlanes = min(plan.blockPlanes, plan.planes - static_cast<int64_t>(b) * plan.blockPlanes);
    }
    int const nFull = static_cast<int>(len / kVEC); // start is pack-aligned (planner), so packs are whole
    int const rem = static_cast<int>(len - static_cast<int64_t>(nFull) * kVEC); // last block only, n % kVEC != 0
    P const* gp = reinterpret_cast<P const*>(g + start);
    P const* xp = reinterpret_cast<P const*>(x + start);
    P* dp = reinterpret_cast<P*>(dx + start);
    P gi[kPLANE_PPT];
    P xi[kPLANE_PPT];
#pragma unroll
    for (int u = 0; u < kPLANE_PPT; ++u)
    {
        int const p = t + u * kTHREADS;
        if (p < nFull)
        {
            gi[u] = gp[p];
            xi[u] = xp[p];
        }
    }
    float own = 0.0f; // kSPLIT: this thread's sum of g (one plane)
#pragma unroll
    for (int u = 0; u < kPLANE_PPT; ++u)
    {
        int const p = t + u * kTHREADS;
        if (p < nFull)
        {
            float gf[kVEC];
            dp[p] = gradPack<T, kVEC>(gi[u], xi[u], gf);
            if (split)
            {
#pragma unroll
                for (int k = 0; k < kVEC; ++k)
                {
                    own += gf[k];
                }
            }
            else
            {
                uint32_t const e0 = static_cast<uint32_t>(p) * kVEC;
                uint32_t const j = plan.byInner.div32(e0);
                int const nHead = static_cast<int>(min(static_cast<uint32_t>(kVEC),
                    static_cast<uint32_t>(plan.inner) * (j + 1) - e0));
                float h = 0.0f;
                float tl = 0.0f;
#pragma unroll
                for (int k = 0; k < kVEC; ++k)
                {
                    if (k < nHead)
                    {
                        h += gf[k];
                    }
                    else
                    {
                        tl += gf[k];
                    }
                }
                head[p] = h;
                tail[p] = tl;
            }
        }
    }
    if (rem > 0 && t == nFull % kTHREADS)
    {
        // The last pack of a tensor whose size is not a multiple of the pack width: element by element.
        uint32_t const e0 = static_cast<uint32_t>(nFull) * kVEC;
        uint32_t const j = split ? 0U : plan.byInner.div32(e0);
        int const nHead = split ? rem : static_cast<int>(min(static_cast<uint32_t>(rem),
            static_cast<uint32_t>(plan.inner) * (j + 1) - e0));
        float h = 0.0f;
        float tl = 0.0f;
        for (int k = 0; k < rem; ++k)
        {
            int64_t const i = start + e0 + k;
            float gv[1] = {Cvt<T>::toF(g[i])};
            float v[1] = {Cvt<T>::toF(x[i])};
            swishGradAll<T>(gv, v);
            dx[i] = Cvt<T>::fromF(v[0]);
            if (k < nHead)
            {
                h += gv[0];
            }
            else
            {
                tl += gv[0];
            }
        }
        if (split)
        {
            own += h;
        }
        else
        {
            head[nFull] = h;
            tail[nFull] = tl;
        }
    }
    if (split)
    {
        __shared__ float warpSums[kWARPS];
        float const total = blockSum(own, warpSums);
        if (t == 0)
        {
            auto const splits32 = static_cast<uint32_t>(plan.splits);
            uint32_t const q = b / splits32;
            uint32_t const piece = b - q * splits32;
            auto const c32 = static_cast<uint32_t>(plan.channels);
            uint32_t const o = q / c32;
            uint32_t const c = q - o * c32;
            partial[(static_cast<int64_t>(o) * plan.splits + piece) * plan.channels + c] = total;
        }
        return;
    }
    __syncthreads();
    // Slot w (a channel in kSAMPLES, a plane in kPLANES) gathers its planes j = w, w + slots, ... in order; inside a
    // plane, lane l adds packs l, l + lanes, ...; then the lanes are added by an xor tree. All threads run the same
    // number of rounds so that every shuffle has the whole warp.
    int const lanes = plan.lanes;
    int const lane = t & (lanes - 1);
    int const groups = kTHREADS / lanes;
    int const slots = plan.slots;
    int64_t const outBase = static_cast<int64_t>(b) * slots;
    for (int w0 = 0; w0 < slots; w0 += groups)
    {
        int const w = w0 + t / lanes;
        float acc = 0.0f;
        if (w < slots)
        {
            for (int64_t j = w; j < localPlanes; j += slots)
            {
                int64_t const e0 = j * plan.inner;
                int const pa = static_cast<int>(e0 / kVEC);
                int const pb = static_cast<int>((e0 + plan.inner - 1) / kVEC);
                for (int p = pa + lane; p <= pb; p += lanes)
                {
                    acc += static_cast<int64_t>(p) * kVEC >= e0 ? head[p] : tail[p];
                }
            }
        }
        for (int o = lanes / 2; o > 0; o >>= 1)
        {
            acc += __shfl_xor_sync(0xffffffffU, acc, o);
        }
        if (lane == 0 && w < slots && (plan.shape == PlanesShape::kSAMPLES || w < localPlanes))
        {
            partial[outBase + w] = acc;
        }
    }
}

enum class FusedKind : int { kNONE, kROWS, kCOLS, kPLANES };

struct FusedPlan
{
    FusedKind kind{FusedKind::kNONE};
    int vec{1};
    RowsPlan rows{};
    ColsPlan cols{};
    PlanesPlan planes{};
    int64_t channels{1};
    int64_t partialRows{0}; // R of the partial matrix [R][channels]
    int64_t sumSlices{1};   // > 1: the column sums run in two stages over this many row slices
    size_t workspace{0};
};

// Multiprocessors of the current device, cached: the fused backward sizes its blocks so small tensors still
// spread over the whole chip (cudaDeviceGetAttribute is cheap, but not free per launch).
int smCount()
{
    static std::atomic<int> cache[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64)
    {
        return 132;
    }
    int v = cache[dev].load(std::memory_order_relaxed);
    if (v == 0)
    {
        if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || v <= 0)
        {
            v = 132;
        }
        cache[dev].store(v, std::memory_order_relaxed);
    }
    return v;
}

int vecWidth(DType t)
{
    return t == DType::kFLOAT32 ? 4 : 8;
}

// Column tiles of the columns kernel: 8 packs (128 bytes of a row, whole sectors) when the row divides into them,
// so a block spans the most rows and writes the fewest partial sums (never slower than whole-row tiles on the H200);
// otherwise the whole row (up to a block) or 32-pack tiles.
int64_t colTilePacks(int64_t packsPerRow)
{
    if (packsPerRow % 8 == 0)
    {
        return 8;
    }
    return packsPerRow <= kTHREADS ? packsPerRow : 32;
}

void planCols(FusedPlan& plan, int64_t n, int64_t channels, bool aligned, int vw)
{
    ColsPlan& c = plan.cols;
    plan.vec = aligned && channels % vw == 0 ? vw : 1;
    c.packsPerRow = channels / plan.vec;
    // About two blocks per SM for small tensors, rounded up so the grid fits in one wave of the three resident
    // blocks per SM (a second, partial wave cost a quarter of the time at 2^20 elements), 64K elements per block at
    // the most.
    int64_t const blockElems = std::clamp<int64_t>(n / (2 * smCount()), kTHREADS * plan.vec, kCOL_BLOCK_ELEMS);
    c.tilePacks = colTilePacks(c.packsPerRow);
    c.tiles = (c.packsPerRow + c.tilePacks - 1) / c.tilePacks;
    c.rowsPerStep = kTHREADS / c.tilePacks;
    int64_t const perStep = c.rowsPerStep * c.tilePacks * plan.vec;
    int64_t const steps = std::max<int64_t>(1, (blockElems + perStep - 1) / perStep);
    c.rowsPerBlock = c.rowsPerStep * steps;
    c.rowChunks = (c.rows + c.rowsPerBlock - 1) / c.rowsPerBlock;
    plan.partialRows = c.rowChunks;
}

// Planes-kernel plan (swishBackwardPlanesKernel): the widest packs whose blocks can start on plane boundaries, and
// the block shape that writes the fewest partial sums.
void planPlanes(FusedPlan& plan, int64_t n, BiasSpec spec, bool aligned, int vw)
{
    PlanesPlan& p = plan.planes;
    int64_t const inner = spec.inner;
    int64_t const sample = spec.channels * inner;
    p.n = n;
    p.inner = inner;
    p.channels = spec.channels;
    p.planes = n / inner;
    p.splits = 1;
    for (int64_t vec = aligned && inner >= vw ? vw : 1;; vec = 1)
    {
        int64_t const most = int64_t{kPLANE_PACKS} * vec;
        // About two blocks per SM for small tensors, as the other fused kernels; whole packs; one block at the most.
        int64_t const want = std::clamp<int64_t>(n / (2 * smCount()) / vec * vec, int64_t{kTHREADS} * vec, most);
        int64_t const planeGroup = vec / std::gcd(inner, vec);   // planes that add up to whole packs
        int64_t const sampleGroup = vec / std::gcd(sample, vec); // samples that add up to whole packs
        if (sampleGroup * sample <= want)
        {
            int64_t const m = want / sample / sampleGroup * sampleGroup;
            p.shape = PlanesShape::kSAMPLES;
            p.blockPlanes = m * spec.channels;
            p.slots = static_cast<int32_t>(spec.channels);
        }
        else if (planeGroup * inner <= most)
        {
            p.shape = PlanesShape::kPLANES;
            p.blockPlanes = std::max(planeGroup, want / inner / planeGroup * planeGroup);
            p.slots = static_cast<int32_t>(p.blockPlanes);
        }
        else if (inner % vec == 0)
        {
            // Even pieces of whole packs; recounted so that no piece is empty.
            int64_t const splits = (inner + want - 1) / want;
            p.shape = PlanesShape::kSPLIT;
            p.blockPlanes = 0;
            p.blockElems = ((inner + splits - 1) / splits + vec - 1) / vec * vec;
            p.splits = (inner + p.blockElems - 1) / p.blockElems;
            p.slots = 1;
        }
        else
        {
            continue; // vec > 1 here: single elements always divide
        }
        if (p.shape != PlanesShape::kSPLIT)
        {
            p.blockElems = p.blockPlanes * inner;
        }
        plan.vec = static_cast<int>(vec);
        break;
    }
    int64_t const perPlane = inner / plan.vec + 1; // packs a plane touches at the most
    p.lanes = 1;
    while (p.lanes < 32 && p.lanes * 2 * p.slots <= kTHREADS && p.lanes < perPlane)
    {
        p.lanes *= 2;
    }
    p.byInner = FastDiv::make(inner);
    int64_t const outer = n / sample;
    plan.partialRows = p.shape == PlanesShape::kSAMPLES ? (p.planes + p.blockPlanes - 1) / p.blockPlanes
        : p.shape == PlanesShape::kPLANES               ? outer
                                                        : outer * p.splits;
}

// Blocks for a grid of `blocks`, or 0 when that exceeds INT_MAX (more than any GPU's memory could feed): the
// launchers report 0 as an invalid configuration.
unsigned gridBlocks(int64_t blocks)
{
    return blocks > INT_MAX ? 0U : static_cast<unsigned>(blocks);
}

// Column-sum launch: colsPer columns per block (a power of two <= 8) and enough row lanes for `rows` rows.
struct SumShape
{
    int colsPer;
    int threads;
    unsigned blocks;
};

SumShape sumShape(int64_t rows, int64_t channels)
{
    SumShape s{1, 0, 0};
    while (s.colsPer < 8 && s.colsPer < channels)
    {
        s.colsPer *= 2;
    }
    int lanes = 1;
    while (lanes < rows && lanes * s.colsPer < kFINAL_THREADS)
    {
        lanes *= 2;
    }
    s.threads = std::max(lanes * s.colsPer, 32);
    s.blocks = gridBlocks((channels + s.colsPer - 1) / s.colsPer);
    return s;
}

// A thread of the column sums adds its rows one after another (four loads in flight): past this many rows per
// thread a tall partial matrix (small planes in a large tensor) takes longer to add up than to write, so it is
// summed in two stages, the first over row slices of kSUM_SLICE_LANE_ROWS rows per thread in parallel blocks.
constexpr int64_t kSUM_MAX_LANE_ROWS = 8;
constexpr int64_t kSUM_SLICE_LANE_ROWS = 4;

void planSums(FusedPlan& plan)
{
    int64_t const R = plan.partialRows;
    SumShape const one = sumShape(R, plan.channels);
    int64_t const lanes = one.threads / one.colsPer;
    plan.sumSlices = 1;
    if (R > kSUM_MAX_LANE_ROWS * lanes)
    {
        int64_t const sliceRows = std::max<int64_t>(kSUM_SLICE_LANE_ROWS * lanes, (R + 65534) / 65535);
        plan.sumSlices = (R + sliceRows - 1) / sliceRows;
    }
    plan.workspace = static_cast<size_t>((R + (plan.sumSlices > 1 ? plan.sumSlices : 0)) * plan.channels)
        * sizeof(float);
}

FusedPlan planFused(DType dtype, int64_t n, BiasSpec spec, void const* g, void const* x, void const* dx)
{
    FusedPlan plan;
    if (n <= 0 || spec.channels < 1 || spec.inner < 1 || n % (spec.channels * spec.inner) != 0)
    {
        return plan;
    }
    bool const aligned = aligned16(g) && aligned16(x) && aligned16(dx);
    int const vw = vecWidth(dtype);
    int64_t const outer = n / (spec.channels * spec.inner);
    plan.channels = spec.channels;
    bool const legacy = legacyLayouts();
    if (spec.channels == 1 || (legacy && spec.inner >= kMIN_ROW_INNER))
    {
        RowsPlan& r = plan.rows;
        r.len = spec.channels == 1 ? n : spec.inner;
        r.rows = n / r.len;
        r.channels = spec.channels;
        plan.vec = (aligned && r.len % vw == 0) || (aligned && r.rows == 1) ? vw : 1;
        // Aim for at least two blocks per SM, one pack per thread at the least, kROW_CHUNK_PACKS at the most.
        int64_t const want = (n / plan.vec + 2 * smCount() - 1) / (2 * smCount());
        int64_t const chunkPacks = std::clamp<int64_t>((want + kTHREADS - 1) / kTHREADS * kTHREADS, kTHREADS,
            kROW_CHUNK_PACKS);
        r.chunkElems = chunkPacks * plan.vec;
        r.chunks = (r.len + r.chunkElems - 1) / r.chunkElems;
        plan.kind = FusedKind::kROWS;
        plan.partialRows = (spec.channels == 1 ? 1 : outer) * r.chunks;
    }
    else if (spec.inner == 1)
    {
        plan.cols.rows = outer;
        planCols(plan, n, spec.channels, aligned, vw);
        plan.kind = FusedKind::kCOLS;
    }
    else if (!legacy)
    {
        planPlanes(plan, n, spec, aligned, vw);
        plan.kind = FusedKind::kPLANES;
    }
    else
    {
        return plan;
    }
    planSums(plan);
    return plan;
}

template <typename T, int kVEC>
cudaError_t runFused(FusedPlan const& plan, void const* g, void const* x, void* dx, void* dbias, float* ws,
    cudaStream_t stream)
{
    auto const* gt = static_cast<T const*>(g);
    auto const* xt = static_cast<T const*>(x);
    auto* dt = static_cast<T*>(dx);
    auto* bt = static_cast<T*>(dbias);
    PlanesPlan const& pp = plan.planes;
    int64_t const blocks = plan.kind == FusedKind::kROWS ? plan.rows.rows * plan.rows.chunks
        : plan.kind == FusedKind::kCOLS                  ? plan.cols.rowChunks * plan.cols.tiles
        : pp.shape == PlanesShape::kSPLIT                ? pp.planes * pp.splits
                                                         : (pp.planes + pp.blockPlanes - 1) / pp.blockPlanes;
    unsigned const grid = gridBlocks(blocks);
    if (grid == 0)
    {
        return cudaErrorInvalidConfiguration;
    }
    switch (plan.kind)
    {
    case FusedKind::kROWS: swishBackwardRowsKernel<T, kVEC><<<grid, kTHREADS, 0, stream>>>(gt, xt, dt, plan.rows, ws); break;
    case FusedKind::kCOLS: swishBackwardColsKernel<T, kVEC><<<grid, kTHREADS, 0, stream>>>(gt, xt, dt, plan.cols, ws); break;
    default: swishBackwardPlanesKernel<T, kVEC><<<grid, kTHREADS, 0, stream>>>(gt, xt, dt, pp, ws); break;
    }
    int64_t const R = plan.partialRows;
    int64_t const C = plan.channels;
    if (plan.sumSlices > 1)
    {
        int64_t const sliceRows = (R + plan.sumSlices - 1) / plan.sumSlices;
        SumShape const first = sumShape(sliceRows, C);
        SumShape const second = sumShape(plan.sumSlices, C);
        if (first.blocks == 0)
        {
            return cudaErrorInvalidConfiguration;
        }
        float* const slices = ws + R * C;
        finalizeColumnsKernel<float><<<dim3(first.blocks, static_cast<unsigned>(plan.sumSlices)),
            static_cast<unsigned>(first.threads), 0, stream>>>(ws, R, C, first.colsPer, sliceRows, slices);
        finalizeColumnsKernel<T><<<second.blocks, static_cast<unsigned>(second.threads), 0, stream>>>(
            slices, plan.sumSlices, C, second.colsPer, plan.sumSlices, bt);
        return cudaGetLastError();
    }
    SumShape const one = sumShape(R, C);
    if (one.blocks == 0)
    {
        return cudaErrorInvalidConfiguration;
    }
    finalizeColumnsKernel<T><<<one.blocks, static_cast<unsigned>(one.threads), 0, stream>>>(ws, R, C, one.colsPer, R, bt);
    return cudaGetLastError();
}

template <typename T>
cudaError_t fused(FusedPlan const& plan, void const* g, void const* x, void* dx, void* dbias, float* ws,
    cudaStream_t stream)
{
    constexpr int kV = 16 / sizeof(T);
    return plan.vec == kV ? runFused<T, kV>(plan, g, x, dx, dbias, ws, stream)
                          : runFused<T, 1>(plan, g, x, dx, dbias, ws, stream);
}

// Grid of the unfused backward's grid-stride kernel: kUNROLL packs per thread, capped at INT_MAX blocks.
unsigned gridFor(int64_t nPacks)
{
    int64_t const perBlock = static_cast<int64_t>(kTHREADS) * kUNROLL;
    int64_t const blocks = (nPacks + perBlock - 1) / perBlock;
    // Grid-stride loops cover whatever a capped grid leaves over.
    return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(blocks, 1), INT_MAX));
}

bool aligned16(void const* p)
{
    return (reinterpret_cast<uintptr_t>(p) & 15U) == 0;
}

template <typename T, int kVEC, Mode kMODE>
cudaError_t launchFwd(T const* x, T const* bias, T* y, int64_t nPacks, FwdParams const& prm, cudaStream_t stream)
{
    if constexpr (sizeof(T) == 2 && kVEC == 8 && (kMODE == Mode::kSCALAR || kMODE == Mode::kLAST_FIXED))
    {
        if (nPacks <= kFWD_HALF_NARROW_PACKS)
        {
            // Same elements as 8-byte packs; for kLAST_FIXED a row then has twice the packs, which still divides
            // the 256-thread block (the caller checked that C / 8 divides 128).
            FwdParams narrow = prm;
            narrow.byPacksPerRow = FastDiv::make(2 * static_cast<int64_t>(prm.byPacksPerRow.d));
            swishForwardKernel<T, kVEC / 2, kMODE, kTHREADS, 1>
                <<<gridBlocks((2 * nPacks + kTHREADS - 1) / kTHREADS), kTHREADS, 0, stream>>>(
                    x, bias, y, 2 * nPacks, narrow);
            return cudaSuccess;
        }
    }
    bool const small = nPacks <= kFWD_SMALL_PACKS;
    int const threads = small ? kTHREADS : kTHREADS / 2;
    unsigned const grid = gridBlocks((nPacks + kTHREADS - 1) / kTHREADS); // both shapes: 256 packs per block
    if (grid == 0)
    {
        return cudaErrorInvalidConfiguration;
    }
    if (small)
    {
        swishForwardKernel<T, kVEC, kMODE, kTHREADS, 1><<<grid, threads, 0, stream>>>(x, bias, y, nPacks, prm);
    }
    else
    {
        swishForwardKernel<T, kVEC, kMODE, kTHREADS / 2, 2><<<grid, threads, 0, stream>>>(x, bias, y, nPacks, prm);
    }
    return cudaSuccess;
}

// Vector body over the 16-byte-aligned head, then a scalar launch for the tail (or for everything when a
// pointer is misaligned, e.g. an offset view).
template <typename T, Mode kVEC_MODE, Mode kTAIL_MODE>
cudaError_t forwardMode(T const* x, T const* bias, T* y, int64_t n, FwdParams prm, bool vecOk, cudaStream_t stream)
{
    constexpr int kVEC = 16 / sizeof(T);
    int64_t const head = vecOk ? (n / kVEC) * kVEC : 0;
    if (head > 0)
    {
        cudaError_t const e = launchFwd<T, kVEC, kVEC_MODE>(x, bias, y, head / kVEC, prm, stream);
        if (e != cudaSuccess)
        {
            return e;
        }
    }
    if (n > head)
    {
        prm.offset = head;
        // bias stays unshifted: biasFor indexes it with the absolute element index offset + p.
        return launchFwd<T, 1, kTAIL_MODE>(x + head, bias, y + head, n - head, prm, stream);
    }
    return cudaSuccess;
}

template <typename T>
cudaError_t forward(void const* x, void const* bias, void* y, int64_t n, BiasSpec spec, cudaStream_t stream)
{
    constexpr int kVEC = 16 / sizeof(T);
    auto const* xt = static_cast<T const*>(x);
    auto const* bt = static_cast<T const*>(bias);
    auto* yt = static_cast<T*>(y);
    FwdParams prm{spec, FastDiv{}, FastDiv{}, 0};
    bool const io = aligned16(x) && aligned16(y);
    cudaError_t e = cudaSuccess;
    if (spec.channels == 1)
    {
        e = forwardMode<T, Mode::kSCALAR, Mode::kSCALAR>(xt, bt, yt, n, prm, io, stream);
    }
    else if (spec.inner == 1 && spec.channels == n)
    {
        e = forwardMode<T, Mode::kFULL, Mode::kFULL>(xt, bt, yt, n, prm, io && aligned16(bias), stream);
    }
    else if (spec.inner == 1 && spec.channels % kVEC == 0 && io && aligned16(bias))
    {
        prm.byPacksPerRow = FastDiv::make(spec.channels / kVEC);
        if ((kTHREADS / 2) % (spec.channels / kVEC) == 0)
        {
            // Both forward block sizes (128, 256) are multiples of the channel-pack count: fixed bias per thread.
            e = forwardMode<T, Mode::kLAST_FIXED, Mode::kPERIODIC>(xt, bt, yt, n, prm, true, stream);
        }
        else
        {
            e = forwardMode<T, Mode::kLAST_VEC, Mode::kPERIODIC>(xt, bt, yt, n, prm, true, stream);
        }
    }
    else if (spec.inner % kVEC == 0 && io)
    {
        prm.byPacksPerRow = FastDiv::make(spec.inner / kVEC);
        prm.byChannels = FastDiv::make(spec.channels);
        e = forwardMode<T, Mode::kUNIFORM_VEC, Mode::kPERIODIC>(xt, bt, yt, n, prm, true, stream);
    }
    else if (spec.inner >= kVEC && io && !legacyLayouts())
    {
        prm.byPacksPerRow = FastDiv::make(spec.inner);
        prm.byChannels = FastDiv::make(spec.channels);
        e = forwardMode<T, Mode::kSPAN2, Mode::kPERIODIC>(xt, bt, yt, n, prm, true, stream);
    }
    else
    {
        e = forwardMode<T, Mode::kPERIODIC, Mode::kPERIODIC>(xt, bt, yt, n, prm, io, stream);
    }
    return e != cudaSuccess ? e : cudaGetLastError();
}

template <typename T>
cudaError_t backward(void const* g, void const* x, void* dx, int64_t n, cudaStream_t stream)
{
    constexpr int kVEC = 16 / sizeof(T);
    auto const* gt = static_cast<T const*>(g);
    auto const* xt = static_cast<T const*>(x);
    auto* dt = static_cast<T*>(dx);
    bool const vec = aligned16(g) && aligned16(x) && aligned16(dx);
    int64_t const head = vec ? (n / kVEC) * kVEC : 0;
    if (head > 0)
    {
        swishBackwardKernel<T, kVEC><<<gridFor(head / kVEC), kTHREADS, 0, stream>>>(gt, xt, dt, head / kVEC);
    }
    if (n > head)
    {
        swishBackwardKernel<T, 1><<<gridFor(n - head), kTHREADS, 0, stream>>>(gt + head, xt + head, dt + head, n - head);
    }
    return cudaGetLastError();
}

} // namespace

cudaError_t launchSwishForward(DType dtype, void const* x, void const* bias, void* y, int64_t n, BiasSpec spec,
    cudaStream_t stream) noexcept
{
    if (n == 0)
    {
        return cudaSuccess;
    }
    if (n < 0 || spec.channels < 1 || spec.inner < 1 || x == nullptr || y == nullptr || bias == nullptr)
    {
        return cudaErrorInvalidValue;
    }
    switch (dtype)
    {
    case DType::kFLOAT32: return forward<float>(x, bias, y, n, spec, stream);
    case DType::kFLOAT16: return forward<__half>(x, bias, y, n, spec, stream);
    case DType::kBFLOAT16: return forward<__nv_bfloat16>(x, bias, y, n, spec, stream);
    }
    return cudaErrorInvalidValue;
}

size_t swishBackwardFusedWorkspace(DType dtype, int64_t n, BiasSpec spec, void const* grad, void const* x,
    void const* dx) noexcept
{
    FusedPlan const plan = planFused(dtype, n, spec, grad, x, dx);
    return plan.kind == FusedKind::kNONE ? 0 : std::max<size_t>(plan.workspace, sizeof(float));
}

cudaError_t launchSwishBackwardFused(DType dtype, void const* grad, void const* x, void* dx, void* dbias, int64_t n,
    BiasSpec spec, void* workspace, size_t workspaceBytes, cudaStream_t stream) noexcept
{
    FusedPlan const plan = planFused(dtype, n, spec, grad, x, dx);
    if (plan.kind == FusedKind::kNONE || workspace == nullptr || workspaceBytes < plan.workspace || dbias == nullptr)
    {
        return cudaErrorInvalidValue;
    }
    auto* ws = static_cast<float*>(workspace);
    switch (dtype)
    {
    case DType::kFLOAT32: return fused<float>(plan, grad, x, dx, dbias, ws, stream);
    case DType::kFLOAT16: return fused<__half>(plan, grad, x, dx, dbias, ws, stream);
    case DType::kBFLOAT16: return fused<__nv_bfloat16>(plan, grad, x, dx, dbias, ws, stream);
    }
    return cudaErrorInvalidValue;
}

cudaError_t launchSwishBackward(DType dtype, void const* grad, void const* x, void* dx, int64_t n,
    cudaStream_t stream) noexcept
{
    if (n == 0)
    {
        return cudaSuccess;
    }
    if (n < 0 || grad == nullptr || x == nullptr || dx == nullptr)
    {
        return cudaErrorInvalidValue;
    }
    switch (dtype)
    {
    case DType::kFLOAT32: return backward<float>(grad, x, dx, n, stream);
    case DType::kFLOAT16: return backward<__half>(grad, x, dx, n, stream);
    case DType::kBFLOAT16: return backward<__nv_bfloat16>(grad, x, dx, n, stream);
    }
    return cudaErrorInvalidValue;
}

} // namespace torchtrt_swish
