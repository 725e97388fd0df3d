// The forward launcher launchSwishForward (swish_kernel.h): bias lookup modes, the forward kernel and its dispatch.
// No torch, no TensorRT: the torch extension and the TensorRT plugin both link this object.
#include "swish_forward_plan.h"
#include "swish_math.cuh"

namespace torchtrt_swish {
namespace {

using namespace detail;

using Mode = FwdMode;

// Whether a mode loads bias for every pack (the others load theirs once per thread).
__host__ __device__ constexpr bool fwdBiasPerPack(Mode m)
{
    return m == Mode::kFULL || m == Mode::kLAST_VEC || m == Mode::kUNIFORM_VEC || m == Mode::kSPAN2
        || m == Mode::kPERIODIC;
}

// The bias of one pack as loaded, not yet converted (kSPAN2: two channels and where the second starts).
template <typename T, int kVEC, Mode kMODE>
struct BiasRaw
{
    static constexpr int kN = kMODE == Mode::kUNIFORM_VEC ? 1 : kMODE == Mode::kSPAN2 ? 2 : kVEC;
    alignas(16) T v[kN];
    int64_t split;
};

// Loads the bias of the kVEC elements of pack p (first element i) for the per-pack modes.
template <typename T, int kVEC, Mode kMODE, bool kNARROW>
__device__ __forceinline__ BiasRaw<T, kVEC, kMODE> biasLoad(T const* __restrict__ bias, int64_t i, int64_t p,
    FwdParams const& prm)
{
    BiasRaw<T, kVEC, kMODE> raw{};
    if constexpr (kMODE == Mode::kFULL || kMODE == Mode::kLAST_VEC)
    {
        int64_t j = i;
        if constexpr (kMODE == Mode::kLAST_VEC)
        {
            j = fwdLastVecBias<kNARROW>(prm, p, kVEC);
        }
        if constexpr (kVEC > 1)
        {
            static_assert(sizeof(Pack<T, kVEC>) == sizeof(uint4), "bias packs are 16 bytes");
            uint4 const r = __ldg(reinterpret_cast<uint4 const*>(bias + j)); // read-only path, bias is reused
            memcpy(raw.v, &r, sizeof(r));
        }
        else
        {
            raw.v[0] = bias[j];
        }
    }
    else if constexpr (kMODE == Mode::kUNIFORM_VEC)
    {
        raw.v[0] = __ldg(bias + fwdUniformBias<kNARROW>(prm, p));
    }
    else if constexpr (kMODE == Mode::kSPAN2)
    {
        // NCHW-like planes whose length is not a multiple of the pack (7x7, 14x14 in fp16): the pack's first
        // `split` elements take channel c, the rest the next one. Both loads hit L1 after the first pack of a
        // plane; the select costs less than the 64-bit divisions of the per-element lookup.
        FwdSpan const sp = fwdSpan2Bias<kNARROW>(prm, i);
        raw.v[0] = __ldg(bias + sp.c);
        raw.v[1] = __ldg(bias + sp.c1);
        raw.split = sp.split;
    }
    else if constexpr (kMODE == Mode::kPERIODIC)
    {
        FwdRun run = fwdPeriodicStart(prm, i);
#pragma unroll
        for (int k = 0; k < kVEC; ++k)
        {
            raw.v[k] = __ldg(bias + run.c);
            fwdPeriodicNext(prm, run);
        }
    }
    return raw;
}

// The bias of each of this thread's packs (a pack past the end takes the last pack's); kIDX32: pack indices in 32
// bits, kNARROW: lookups in 32 bits.
template <typename T, int kVEC, Mode kMODE, int kT, int kPPT, bool kIDX32, bool kNARROW>
__device__ __forceinline__ void biasLoads(T const* __restrict__ bias, int64_t nPacks, FwdParams const& prm,
    BiasRaw<T, kVEC, kMODE> (&raw)[kPPT])
{
#pragma unroll
    for (int u = 0; u < kPPT; ++u)
    {
        int64_t const p = fwdLoadPack<kIDX32>(fwdPack<kIDX32>(blockIdx.x, threadIdx.x, u, kT, kPPT), nPacks);
        raw[u] = biasLoad<T, kVEC, kMODE, kNARROW>(bias, fwdElement(prm, p, kVEC), p, prm);
    }
}

// A pack of x, read once. kSKIP_L1: past L1 (fwdSkipsL1 says when that is faster).
template <bool kSKIP_L1, typename P>
__device__ __forceinline__ P loadX(P const* p)
{
    static_assert(!kSKIP_L1 || sizeof(P) == sizeof(uint4), "only 16-byte packs skip L1");
    // L1 eviction priorities need sm_70 (ptxas rejects them for older targets): there the copy reads as its twin does.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700
    if constexpr (kSKIP_L1)
    {
        uint4 r;
        asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
            : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
            : "l"(p));
        P out;
        memcpy(&out, &r, sizeof(r));
        return out;
    }
#endif
    return *p;
}

// The fp32 bias of each element of a pack.
template <typename T, int kVEC, Mode kMODE>
__device__ __forceinline__ void biasOf(BiasRaw<T, kVEC, kMODE> const& raw, float scalarBias,
    float const (&fixedBias)[kVEC], float (&out)[kVEC])
{
#pragma unroll
    for (int k = 0; k < kVEC; ++k)
    {
        if constexpr (kMODE == Mode::kSCALAR)
        {
            out[k] = scalarBias;
        }
        else if constexpr (kMODE == Mode::kLAST_FIXED)
        {
            out[k] = fixedBias[k];
        }
        else if constexpr (kMODE == Mode::kUNIFORM_VEC)
        {
            out[k] = Cvt<T>::toF(raw.v[0]);
        }
        else if constexpr (kMODE == Mode::kSPAN2)
        {
            out[k] = Cvt<T>::toF(k < raw.split ? raw.v[0] : raw.v[1]);
        }
        else
        {
            out[k] = Cvt<T>::toF(raw.v[k]);
        }
    }
}

// kPPT packs per thread, one pass over a grid that covers the tensor (no grid-stride loop: with one, the compiler
// hoisted the bias load ahead of the x loads). A thread requests all its x packs, then all its bias, before it uses
// any, so that it waits for memory once rather than once more for each pack's bias.
// kWIDE: 64-bit bias lookups (a launch past fwdNarrow, in the modes that divide per pack); kSKIP_L1: FwdLaunch::skipL1.
template <typename T, int kVEC, Mode kMODE, int kT, int kPPT, bool kWIDE = false, bool kSKIP_L1 = false>
__global__ void __launch_bounds__(kT) swishForwardKernel(T const* __restrict__ x, T const* __restrict__ bias,
    T* __restrict__ y, int64_t nPacks, FwdParams prm)
{
    using P = Pack<T, kVEC>;
    // A narrow launch of a dividing mode divides in 32 bits. With two packs a thread the lookups that divide packs
    // (not kSPAN2's, which divides elements) also take 32-bit pack indices (less index math ahead of the bias loads;
    // with one pack a thread that cost time: performance notes).
    constexpr bool kNARROW = fwdDividesPerPack(kMODE) && !kWIDE;
    constexpr bool kPACK_LOOKUP = kMODE == Mode::kLAST_VEC || kMODE == Mode::kUNIFORM_VEC;
    constexpr bool kN32 = kNARROW && kPACK_LOOKUP && kPPT == 2;
    // Packs computed even past the end and packs computed only within it: one pack a thread, and two in the modes
    // that look up packs or hold a fixed bias, measured faster unguarded; the other two-pack kernels guarded (kSPAN2's
    // and kSCALAR's did not gain unguarded: performance notes). Only the store checks the bound.
    constexpr bool kLOADS_GUARDED = kPPT > 1 && !fwdBiasPerPack(kMODE);
    constexpr bool kMATH_UNGUARDED = kPPT == 1 || kPACK_LOOKUP || kMODE == Mode::kLAST_FIXED;
    P in[kPPT];
    if constexpr (kLOADS_GUARDED && kMATH_UNGUARDED)
    {
#pragma unroll
        for (int u = 0; u < kPPT; ++u)
        {
            in[u] = P{}; // a pack past the end is computed on zeros and not stored
        }
    }
#pragma unroll
    for (int u = 0; u < kPPT; ++u)
    {
        int64_t const p = fwdPack<kN32>(blockIdx.x, threadIdx.x, u, kT, kPPT);
        if constexpr (!kLOADS_GUARDED)
        {
            // Unguarded (a thread past the end reads the last pack and skips its store), so that ptxas issues the
            // bias loads right behind it; behind a guard it converted x first, waiting for it. With two packs per
            // thread and a bias loaded once per thread, this form lets ptxas sink the first pack's load below the
            // bias conversion, so those keep the guard.
            in[u] = loadX<kSKIP_L1>(reinterpret_cast<P const*>(x) + fwdLoadPack<kN32>(p, nPacks));
        }
        else if (p < nPacks)
        {
            in[u] = loadX<kSKIP_L1>(reinterpret_cast<P const*>(x) + p);
        }
    }
    BiasRaw<T, kVEC, kMODE> raw[kPPT];
    if constexpr (fwdBiasPerPack(kMODE))
    {
        biasLoads<T, kVEC, kMODE, kT, kPPT, kN32, kNARROW>(bias, nPacks, prm, raw);
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
            uint4 const r = __ldg(reinterpret_cast<uint4 const*>(bias) + c);
            memcpy(&b, &r, sizeof(r));
        }
        else
        {
            static_assert(sizeof(b) == sizeof(uint2), "fixed bias packs are 16 or 8 bytes");
            uint2 const r = __ldg(reinterpret_cast<uint2 const*>(bias) + c);
            memcpy(&b, &r, sizeof(r));
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
        int64_t const p = fwdPack<kN32>(blockIdx.x, threadIdx.x, u, kT, kPPT);
        if (kMATH_UNGUARDED || p < nPacks)
        {
            float v[kVEC];
            float b[kVEC];
            biasOf<T, kVEC, kMODE>(raw[u], scalarBias, fixedBias, b);
#pragma unroll
            for (int k = 0; k < kVEC; ++k)
            {
                v[k] = Cvt<T>::toF(in[u].v[k]);
            }
            swishBiasAll<T>(v, b);
            if (p < nPacks)
            {
                reinterpret_cast<P*>(y)[p] = packFrom<T>(v);
            }
        }
    }
}

// Launches the kernel of pack width kW in the launch's shape (one pack a thread in kTHREADS-thread blocks, two in
// half as many, or, for vector packs of an x that streams from DRAM and so keeps L1, one in half as many); false when
// the launch asks for another width or shape.
template <typename T, int kW, Mode kMODE, bool kWIDE = false, bool kSKIP_L1 = false>
bool launchShape(FwdLaunch const& l, T const* xs, T const* bias, T* ys, cudaStream_t stream)
{
    if (l.vec != kW || l.skipL1 != kSKIP_L1)
    {
        return false;
    }
    if (l.threads == kTHREADS && l.ppt == 1)
    {
        swishForwardKernel<T, kW, kMODE, kTHREADS, 1, kWIDE, kSKIP_L1><<<l.grid, kTHREADS, 0, stream>>>(xs, bias, ys,
            l.nPacks, l.prm);
        return true;
    }
    if (l.threads == kTHREADS / 2 && l.ppt == 2)
    {
        swishForwardKernel<T, kW, kMODE, kTHREADS / 2, 2, kWIDE, kSKIP_L1><<<l.grid, kTHREADS / 2, 0, stream>>>(xs,
            bias, ys, l.nPacks, l.prm);
        return true;
    }
    if constexpr (!kSKIP_L1 && kW > 1)
    {
        if (l.threads == kTHREADS / 2 && l.ppt == 1)
        {
            swishForwardKernel<T, kW, kMODE, kTHREADS / 2, 1, kWIDE><<<l.grid, kTHREADS / 2, 0, stream>>>(xs, bias,
                ys, l.nPacks, l.prm);
            return true;
        }
    }
    return false;
}

// The element-wise kernels (tail and misaligned launches): only the modes that have them (fwdHasScalarKernel).
template <typename T, Mode kMODE>
cudaError_t launchScalar(FwdLaunch const& l, T const* xs, T const* bias, T* ys, cudaStream_t stream)
{
    if constexpr (fwdHasScalarKernel(kMODE))
    {
        if (launchShape<T, 1, kMODE>(l, xs, bias, ys, stream))
        {
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
    if constexpr (fwdDividesPerPack(kMODE))
    {
        if (!fwd32BitLaunch(l))
        {
            return launchShape<T, kV, kMODE, true>(l, xs, bias, ys, stream) ? cudaSuccess : cudaErrorInvalidValue;
        }
    }
    if (launchShape<T, kV, kMODE>(l, xs, bias, ys, stream) || launchShape<T, kV, kMODE, false, true>(l, xs, bias, ys,
        stream))
    {
        return cudaSuccess;
    }
    if constexpr (sizeof(T) == 2 && fwdHasHalfNarrowKernel(kMODE))
    {
        if (l.vec == kV / 2 && l.ppt == 1)
        {
            swishForwardKernel<T, kV / 2, kMODE, kTHREADS, 1><<<l.grid, kTHREADS, 0, stream>>>(xs, bias, ys, l.nPacks,
                l.prm);
            return cudaSuccess;
        }
    }
    return launchScalar<T, kMODE>(l, xs, bias, ys, stream);
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

// L2 bytes of the current device (fwdSkipsL1).
cudaError_t l2Bytes(int& bytes)
{
    static std::atomic<int> cache[64];
    return perDevice(cache, bytes, [](int dev, int& v) {
        return cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, dev);
    });
}

template <typename T>
cudaError_t forward(DType dtype, void const* x, void const* bias, void* y, int64_t n, BiasSpec spec,
    cudaStream_t stream)
{
    int l2 = 0;
    cudaError_t const le = l2Bytes(l2);
    if (le != cudaSuccess)
    {
        return le;
    }
    FwdPlan const plan = planForward(dtype, n, spec, aligned16(x) && aligned16(y), aligned16(bias), l2);
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
