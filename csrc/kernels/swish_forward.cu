// The forward launcher launchSwishForward (swish_kernel.h): bias lookup modes, the forward kernel and its dispatch.
// No torch, no TensorRT: the torch extension and the TensorRT plugin both link this object.
#include "swish_math.cuh"

#include <type_traits>

namespace torchtrt_swish {
namespace {

using namespace detail;

// fp16/bf16 tensors of at most this many 16-byte packs (2^20 elements) go through the one-pack kernel with 8-byte
// packs instead: twice the threads, each with half the math ahead of its store, which shortens a launch that cannot
// fill the chip. fp32 has half the elements per byte and lost at every size with narrow packs.
constexpr int64_t kFWD_HALF_NARROW_PACKS = int64_t{1} << 17;

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

// Forward launch shapes: one pack per thread in 256-thread blocks up to onePackLimit packs (the most threads, hence
// the most loads in flight, for a tensor that cannot fill the chip), two packs per thread in 128-thread blocks above,
// which streamed faster at 2^28 elements than four packs in 256-thread blocks. The limit is 2^18 packs; moving it to
// 2^20 (x and y then within the H200's L2) cost 4-16 % on fp32 2^21-2^22, fp16 2^23 per-channel and [128,1152,7,7]
// fp16 (tools/ab_launch_shapes.sh). Only the bf16 kSPAN2 kernel gained from it: with two packs per thread it holds
// 48 registers (fp16: 39), and NCHW [64,256,14,14] ran 5.04 -> 4.50 us with one (neutral on [128,1152,7,7]).
template <typename T, Mode kMODE>
constexpr int64_t onePackLimit()
{
    return std::is_same<T, __nv_bfloat16>::value && kMODE == Mode::kSPAN2 ? int64_t{1} << 20 : int64_t{1} << 18;
}

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
    unsigned const grid = gridBlocks((nPacks + kTHREADS - 1) / kTHREADS); // both shapes: 256 packs per block
    if (grid == 0)
    {
        return cudaErrorInvalidConfiguration;
    }
    if (nPacks <= onePackLimit<T, kMODE>())
    {
        swishForwardKernel<T, kVEC, kMODE, kTHREADS, 1><<<grid, kTHREADS, 0, stream>>>(x, bias, y, nPacks, prm);
    }
    else
    {
        swishForwardKernel<T, kVEC, kMODE, kTHREADS / 2, 2><<<grid, kTHREADS / 2, 0, stream>>>(x, bias, y, nPacks, prm);
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
    else if (spec.inner >= kVEC && io)
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

} // namespace torchtrt_swish
