// The forward launcher launchSwishForward (swish_kernel.h): bias lookup modes, the forward kernel and its dispatch.
// No torch, no TensorRT: the torch extension and the TensorRT plugin both link this object.
#include "swish_forward_plan.h"
#include "swish_math.cuh"

namespace torchtrt_swish {
namespace {

using namespace detail;

using Mode = FwdMode;

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
            j = fwdLastVecBias(prm, p, kVEC);
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
        float const b = Cvt<T>::toF(__ldg(bias + fwdUniformBias(prm, p)));
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
        FwdSpan const sp = fwdSpan2Bias(prm, i);
        float const b0 = Cvt<T>::toF(__ldg(bias + sp.c));
        float const b1 = Cvt<T>::toF(__ldg(bias + sp.c1));
#pragma unroll
        for (int k = 0; k < kVEC; ++k)
        {
            out[k] = k < sp.split ? b0 : b1;
        }
    }
    else
    {
        FwdRun run = fwdPeriodicStart(prm, i);
#pragma unroll
        for (int k = 0; k < kVEC; ++k)
        {
            out[k] = Cvt<T>::toF(__ldg(bias + run.c));
            fwdPeriodicNext(prm, run);
        }
    }
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
        biasFor<T, kVEC, kMODE>(bias, scalarBias, fwdElement(prm, p, kVEC), p, prm, b);
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

// kPPT packs per thread, one pass over a grid that covers the tensor (no grid-stride loop: with one, the compiler
// hoisted the bias load ahead of the x loads). Every x load is requested before the bias and the math, so the bias
// lookup's latency overlaps them.
template <typename T, int kVEC, Mode kMODE, int kT, int kPPT>
__global__ void __launch_bounds__(kT) swishForwardKernel(T const* __restrict__ x, T const* __restrict__ bias,
    T* __restrict__ y, int64_t nPacks, FwdParams prm)
{
    using P = Pack<T, kVEC>;
    P in[kPPT];
#pragma unroll
    for (int u = 0; u < kPPT; ++u)
    {
        int64_t const p = fwdPack(blockIdx.x, threadIdx.x, u, kT, kPPT);
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
    // of two so is C / kVEC: the remainder is a mask, not a run-time remainder ahead of the x address.
    static_assert((kT & (kT - 1)) == 0, "kLAST_FIXED relies on a power-of-two block");
    float fixedBias[kVEC] = {};
    if constexpr (kMODE == Mode::kLAST_FIXED)
    {
        uint32_t const c = fwdFixedBiasPack(prm, threadIdx.x);
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
        int64_t const p = fwdPack(blockIdx.x, threadIdx.x, u, kT, kPPT);
        if (p < nPacks)
        {
            reinterpret_cast<P*>(y)[p] = swishPack<T, kVEC, kMODE>(in[u], bias, scalarBias, fixedBias, p, prm);
        }
    }
}

// The element-wise kernels (tail and misaligned launches): only the modes that have them (fwdHasScalarKernel).
template <typename T, Mode kMODE>
cudaError_t launchScalar(FwdLaunch const& l, T const* xs, T const* bias, T* ys, cudaStream_t stream)
{
    if constexpr (fwdHasScalarKernel(kMODE))
    {
        if (l.vec == 1 && l.ppt == 1)
        {
            swishForwardKernel<T, 1, kMODE, kTHREADS, 1><<<l.grid, kTHREADS, 0, stream>>>(xs, bias, ys, l.nPacks, l.prm);
            return cudaSuccess;
        }
        if (l.vec == 1 && l.ppt == 2)
        {
            swishForwardKernel<T, 1, kMODE, kTHREADS / 2, 2><<<l.grid, kTHREADS / 2, 0, stream>>>(xs, bias, ys,
                l.nPacks, l.prm);
            return cudaSuccess;
        }
    }
    return cudaErrorInvalidValue;
}

// One launch of the plan, its pack width and shape instantiated only where the plan can ask for them.
template <typename T, Mode kMODE>
cudaError_t launchMode(FwdLaunch const& l, T const* x, T const* bias, T* y, cudaStream_t stream)
{
    constexpr int kV = 16 / sizeof(T);
    T const* const xs = x + l.prm.offset;
    T* const ys = y + l.prm.offset;
    if (l.vec == kV && l.ppt == 1)
    {
        swishForwardKernel<T, kV, kMODE, kTHREADS, 1><<<l.grid, kTHREADS, 0, stream>>>(xs, bias, ys, l.nPacks, l.prm);
    }
    else if (l.vec == kV && l.ppt == 2)
    {
        swishForwardKernel<T, kV, kMODE, kTHREADS / 2, 2><<<l.grid, kTHREADS / 2, 0, stream>>>(xs, bias, ys, l.nPacks,
            l.prm);
    }
    else if constexpr (sizeof(T) == 2 && (kMODE == Mode::kSCALAR || kMODE == Mode::kLAST_FIXED))
    {
        if (l.vec != kV / 2 || l.ppt != 1)
        {
            return launchScalar<T, kMODE>(l, xs, bias, ys, stream);
        }
        swishForwardKernel<T, kV / 2, kMODE, kTHREADS, 1><<<l.grid, kTHREADS, 0, stream>>>(xs, bias, ys, l.nPacks,
            l.prm);
    }
    else
    {
        return launchScalar<T, kMODE>(l, xs, bias, ys, stream);
    }
    return cudaSuccess;
}

template <typename T>
cudaError_t launchOne(FwdLaunch const& l, T const* x, T const* bias, T* y, cudaStream_t stream)
{
    if (l.grid == 0)
    {
        return cudaErrorInvalidConfiguration;
    }
    switch (l.mode)
    {
    case Mode::kSCALAR: return launchMode<T, Mode::kSCALAR>(l, x, bias, y, stream);
    case Mode::kFULL: return launchMode<T, Mode::kFULL>(l, x, bias, y, stream);
    case Mode::kLAST_VEC: return launchMode<T, Mode::kLAST_VEC>(l, x, bias, y, stream);
    case Mode::kLAST_FIXED: return launchMode<T, Mode::kLAST_FIXED>(l, x, bias, y, stream);
    case Mode::kUNIFORM_VEC: return launchMode<T, Mode::kUNIFORM_VEC>(l, x, bias, y, stream);
    case Mode::kSPAN2: return launchMode<T, Mode::kSPAN2>(l, x, bias, y, stream);
    case Mode::kPERIODIC: return launchMode<T, Mode::kPERIODIC>(l, x, bias, y, stream);
    }
    return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t forward(DType dtype, void const* x, void const* bias, void* y, int64_t n, BiasSpec spec,
    cudaStream_t stream)
{
    FwdPlan const plan = planForward(dtype, n, spec, aligned16(x) && aligned16(y), aligned16(bias));
    for (int k = 0; k < plan.count; ++k)
    {
        cudaError_t const e = launchOne<T>(plan.launch[k], static_cast<T const*>(x), static_cast<T const*>(bias),
            static_cast<T*>(y), stream);
        if (e != cudaSuccess)
        {
            return e;
        }
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
    case DType::kFLOAT32: return forward<float>(dtype, x, bias, y, n, spec, stream);
    case DType::kFLOAT16: return forward<__half>(dtype, x, bias, y, n, spec, stream);
    case DType::kBFLOAT16: return forward<__nv_bfloat16>(dtype, x, bias, y, n, spec, stream);
    }
    return cudaErrorInvalidValue;
}

} // namespace torchtrt_swish
