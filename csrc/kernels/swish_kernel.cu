// CUDA kernels behind swish_kernel.h. No torch, no TensorRT: compiled once into an object that the torch
// extension and the TensorRT plugin library both link.
#include "swish_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>

namespace torchtrt_swish {
namespace {

constexpr int kTHREADS = 256;
// Independent 16-byte packs per thread per iteration: enough bytes in flight to cover HBM latency.
constexpr int kUNROLL = 4;

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
    static __device__ __forceinline__ float toF(__nv_bfloat16 v) { return __bfloat162float(v); }
    static __device__ __forceinline__ __nv_bfloat16 fromF(float v) { return __float2bfloat16_rn(v); }
};

// Same formula and operation order as PyTorch's silu (x / (1 + exp(-x))) so special values match it exactly;
// the _rn intrinsics keep the compiler from contracting the bias add into an FMA.
__device__ __forceinline__ float swishBias(float x, float b)
{
    return __fadd_rn(__fdiv_rn(x, __fadd_rn(1.0f, expf(-x))), b);
}

// PyTorch's silu_backward: g * s * (1 + x * (1 - s)), s = 1 / (1 + exp(-x)).
__device__ __forceinline__ float swishGrad(float g, float x)
{
    float const s = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x)));
    return g * s * (1.0f + x * (1.0f - s));
}

template <typename T, int kVEC>
struct alignas(sizeof(T) * kVEC) Pack
{
    T v[kVEC];
};

enum class Mode : int { kSCALAR, kFULL, kPERIODIC };

// Bias lookup for kVEC consecutive elements starting at flat index i: one division per pack, then increments.
template <typename T, int kVEC, Mode kMODE>
__device__ __forceinline__ void biasFor(T const* __restrict__ bias, float scalarBias, int64_t i, BiasSpec spec,
    float (&out)[kVEC])
{
    if constexpr (kMODE == Mode::kSCALAR)
    {
#pragma unroll
        for (int k = 0; k < kVEC; ++k)
        {
            out[k] = scalarBias;
        }
    }
    else if constexpr (kMODE == Mode::kFULL)
    {
        if constexpr (kVEC > 1)
        {
            Pack<T, kVEC> const p = *reinterpret_cast<Pack<T, kVEC> const*>(bias + i);
#pragma unroll
            for (int k = 0; k < kVEC; ++k)
            {
                out[k] = Cvt<T>::toF(p.v[k]);
            }
        }
        else
        {
            out[0] = Cvt<T>::toF(bias[i]);
        }
    }
    else
    {
        int64_t q = i / spec.inner;
        int64_t r = i - q * spec.inner;
        int64_t c = q % spec.channels;
#pragma unroll
        for (int k = 0; k < kVEC; ++k)
        {
            out[k] = Cvt<T>::toF(__ldg(bias + c));
            if (++r == spec.inner)
            {
                r = 0;
                if (++c == spec.channels)
                {
                    c = 0;
                }
            }
        }
    }
}

template <typename T, int kVEC, Mode kMODE>
__global__ void __launch_bounds__(kTHREADS) swishForwardKernel(T const* __restrict__ x, T const* __restrict__ bias,
    T* __restrict__ y, int64_t nPacks, BiasSpec spec, int64_t offset)
{
    using P = Pack<T, kVEC>;
    float const scalarBias = kMODE == Mode::kSCALAR ? Cvt<T>::toF(bias[0]) : 0.0f;
    P const* xp = reinterpret_cast<P const*>(x);
    P* yp = reinterpret_cast<P*>(y);
    int64_t const stride = static_cast<int64_t>(gridDim.x) * kTHREADS * kUNROLL;
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * kTHREADS * kUNROLL + threadIdx.x; base < nPacks;
         base += stride)
    {
        P in[kUNROLL];
#pragma unroll
        for (int u = 0; u < kUNROLL; ++u)
        {
            int64_t const p = base + static_cast<int64_t>(u) * kTHREADS;
            if (p < nPacks)
            {
                in[u] = xp[p];
            }
        }
#pragma unroll
        for (int u = 0; u < kUNROLL; ++u)
        {
            int64_t const p = base + static_cast<int64_t>(u) * kTHREADS;
            if (p < nPacks)
            {
                float b[kVEC];
                biasFor<T, kVEC, kMODE>(bias, scalarBias, offset + p * kVEC, spec, b);
                P out;
#pragma unroll
                for (int k = 0; k < kVEC; ++k)
                {
                    out.v[k] = Cvt<T>::fromF(swishBias(Cvt<T>::toF(in[u].v[k]), b[k]));
                }
                yp[p] = out;
            }
        }
    }
}

template <typename T, int kVEC>
__global__ void __launch_bounds__(kTHREADS) swishBackwardKernel(T const* __restrict__ g, T const* __restrict__ x,
    T* __restrict__ dx, int64_t nPacks)
{
    using P = Pack<T, kVEC>;
    P const* gp = reinterpret_cast<P const*>(g);
    P const* xp = reinterpret_cast<P const*>(x);
    P* dp = reinterpret_cast<P*>(dx);
    int64_t const stride = static_cast<int64_t>(gridDim.x) * kTHREADS * kUNROLL;
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * kTHREADS * kUNROLL + threadIdx.x; base < nPacks;
         base += stride)
    {
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
#pragma unroll
        for (int u = 0; u < kUNROLL; ++u)
        {
            int64_t const p = base + static_cast<int64_t>(u) * kTHREADS;
            if (p < nPacks)
            {
                P out;
#pragma unroll
                for (int k = 0; k < kVEC; ++k)
                {
                    out.v[k] = Cvt<T>::fromF(swishGrad(Cvt<T>::toF(gi[u].v[k]), Cvt<T>::toF(xi[u].v[k])));
                }
                dp[p] = out;
            }
        }
    }
}

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
void launchFwd(T const* x, T const* bias, T* y, int64_t nPacks, BiasSpec spec, int64_t offset, cudaStream_t stream)
{
    swishForwardKernel<T, kVEC, kMODE><<<gridFor(nPacks), kTHREADS, 0, stream>>>(x, bias, y, nPacks, spec, offset);
}

template <typename T, Mode kMODE>
void forwardMode(T const* x, T const* bias, T* y, int64_t n, BiasSpec spec, cudaStream_t stream)
{
    constexpr int kVEC = 16 / sizeof(T);
    bool const vec = aligned16(x) && aligned16(y) && (kMODE != Mode::kFULL || aligned16(bias));
    int64_t const head = vec ? (n / kVEC) * kVEC : 0;
    if (head > 0)
    {
        launchFwd<T, kVEC, kMODE>(x, bias, y, head / kVEC, spec, 0, stream);
    }
    if (n > head)
    {
        // Scalar tail, or the whole tensor when a pointer is misaligned (offset views).
        launchFwd<T, 1, kMODE>(x + head, bias, y + head, n - head, spec, head, stream);
    }
}

template <typename T>
cudaError_t forward(void const* x, void const* bias, void* y, int64_t n, BiasSpec spec, cudaStream_t stream)
{
    auto const* xt = static_cast<T const*>(x);
    auto const* bt = static_cast<T const*>(bias);
    auto* yt = static_cast<T*>(y);
    if (spec.channels == 1)
    {
        forwardMode<T, Mode::kSCALAR>(xt, bt, yt, n, spec, stream);
    }
    else if (spec.inner == 1 && spec.channels == n)
    {
        forwardMode<T, Mode::kFULL>(xt, bt, yt, n, spec, stream);
    }
    else
    {
        forwardMode<T, Mode::kPERIODIC>(xt, bt, yt, n, spec, stream);
    }
    return cudaGetLastError();
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
