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

bool aligned16(void const* p);

// ----------------------------------------------------------------------------- fused backward
//
// dx and dbias in one read of (g, x): each block writes fp32 partial sums of g per bias element to a workspace,
// and a small finalize kernel adds the partials in a fixed order (deterministic, no atomics). Two shapes of
// the work: "rows" (bias constant along runs of `inner` elements: scalar, per-channel on dim 1) and "columns"
// (inner == 1: per-channel on the last dim, full, trailing blocks), both views of x as [outer, C, inner].

constexpr int kWARPS = kTHREADS / 32;
// Elements one block of the rows kernel reduces: enough work per block to amortize its partial write.
constexpr int64_t kROW_CHUNK_PACKS = static_cast<int64_t>(kTHREADS) * kUNROLL * 2;
// Rows-kernel threshold: shorter runs would leave most of a block idle, so they take the unfused path.
constexpr int64_t kMIN_ROW_INNER = 512;
// Elements per block in the columns kernel.
constexpr int64_t kCOL_BLOCK_ELEMS = 16384;

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

struct RowsPlan
{
    int64_t rows;   // outer * C
    int64_t len;    // elements per row (inner; n for a scalar bias)
    int64_t chunks; // chunks per row
    int64_t chunkElems;
};

// One block reduces one chunk of one row: partial[row * chunks + chunk] = sum of g over it, and writes dx.
template <typename T, int kVEC>
__global__ void __launch_bounds__(kTHREADS) swishBackwardRowsKernel(T const* __restrict__ g, T const* __restrict__ x,
    T* __restrict__ dx, RowsPlan plan, float* __restrict__ partial)
{
    __shared__ float smem[kWARPS];
    using P = Pack<T, kVEC>;
    int64_t const b = blockIdx.x;
    int64_t const row = b / plan.chunks;
    int64_t const chunk = b - row * plan.chunks;
    int64_t const begin = row * plan.len + chunk * plan.chunkElems;
    int64_t const count = min(plan.chunkElems, plan.len - chunk * plan.chunkElems);
    int64_t const nPacks = count / kVEC; // begin is pack-aligned when kVEC > 1 (len % kVEC == 0)
    P const* gp = reinterpret_cast<P const*>(g + begin);
    P const* xp = reinterpret_cast<P const*>(x + begin);
    P* dp = reinterpret_cast<P*>(dx + begin);
    float acc = 0.0f;
    for (int64_t base = threadIdx.x; base < nPacks; base += static_cast<int64_t>(kTHREADS) * kUNROLL)
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
                    float const gv = Cvt<T>::toF(gi[u].v[k]);
                    acc += gv;
                    out.v[k] = Cvt<T>::fromF(swishGrad(gv, Cvt<T>::toF(xi[u].v[k])));
                }
                dp[p] = out;
            }
        }
    }
    // Tail of a chunk whose length is not a multiple of kVEC (only the last chunk of a scalar-bias tensor).
    for (int64_t i = nPacks * kVEC + threadIdx.x; i < count; i += kTHREADS)
    {
        float const gv = Cvt<T>::toF(g[begin + i]);
        acc += gv;
        dx[begin + i] = Cvt<T>::fromF(swishGrad(gv, Cvt<T>::toF(x[begin + i])));
    }
    float const total = blockSum(acc, smem);
    if (threadIdx.x == 0)
    {
        partial[b] = total;
    }
}

// dbias[c] = sum over o < outer, k < chunks of partial[(o * C + c) * chunks + k]; one block per channel.
template <typename T>
__global__ void __launch_bounds__(kTHREADS) finalizeRowsKernel(float const* __restrict__ partial, T* __restrict__ dbias,
    int64_t channels, int64_t outer, int64_t chunks)
{
    __shared__ float smem[kWARPS];
    int64_t const c = blockIdx.x;
    float acc = 0.0f;
    for (int64_t i = threadIdx.x; i < outer * chunks; i += kTHREADS)
    {
        int64_t const o = i / chunks;
        acc += partial[(o * channels + c) * chunks + (i - o * chunks)];
    }
    float const total = blockSum(acc, smem);
    if (threadIdx.x == 0)
    {
        dbias[c] = Cvt<T>::fromF(total);
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
// partial[rowChunk * C + column] = sum of g over those rows.
template <typename T, int kVEC>
__global__ void __launch_bounds__(kTHREADS) swishBackwardColsKernel(T const* __restrict__ g, T const* __restrict__ x,
    T* __restrict__ dx, ColsPlan plan, float* __restrict__ partial)
{
    __shared__ float smem[kTHREADS * kVEC];
    using P = Pack<T, kVEC>;
    int64_t const b = blockIdx.x;
    int64_t const rowChunk = b / plan.tiles;
    int64_t const tile = b - rowChunk * plan.tiles;
    int const tp = static_cast<int>(threadIdx.x % plan.tilePacks);
    int const tr = static_cast<int>(threadIdx.x / plan.tilePacks);
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
                    P out;
#pragma unroll
                    for (int k = 0; k < kVEC; ++k)
                    {
                        float const gv = Cvt<T>::toF(gi[u].v[k]);
                        acc[k] += gv;
                        out.v[k] = Cvt<T>::fromF(swishGrad(gv, Cvt<T>::toF(xi[u].v[k])));
                    }
                    dp[rr * plan.packsPerRow + col] = out;
                }
            }
        }
    }
    // Combine the rowsPerStep threads that share a column pack.
#pragma unroll
    for (int k = 0; k < kVEC; ++k)
    {
        smem[threadIdx.x * kVEC + k] = acc[k];
    }
    __syncthreads();
    if (tr == 0 && col < plan.packsPerRow)
    {
        int64_t const C = plan.packsPerRow * kVEC;
#pragma unroll
        for (int k = 0; k < kVEC; ++k)
        {
            float s = 0.0f;
            for (int j = 0; j < plan.rowsPerStep; ++j)
            {
                s += smem[(j * plan.tilePacks + tp) * kVEC + k];
            }
            partial[rowChunk * C + col * kVEC + k] = s;
        }
    }
}

// dbias[c] = sum over rowChunks of partial[rc * C + c]: one thread per column when few chunks, else a block.
template <typename T>
__global__ void __launch_bounds__(kTHREADS) finalizeColsThreadKernel(float const* __restrict__ partial,
    T* __restrict__ dbias, int64_t channels, int64_t rowChunks)
{
    int64_t const c = static_cast<int64_t>(blockIdx.x) * kTHREADS + threadIdx.x;
    if (c < channels)
    {
        float s = 0.0f;
        for (int64_t rc = 0; rc < rowChunks; ++rc)
        {
            s += partial[rc * channels + c];
        }
        dbias[c] = Cvt<T>::fromF(s);
    }
}

template <typename T>
__global__ void __launch_bounds__(kTHREADS) finalizeColsBlockKernel(float const* __restrict__ partial,
    T* __restrict__ dbias, int64_t channels, int64_t rowChunks)
{
    __shared__ float smem[kWARPS];
    int64_t const c = blockIdx.x;
    float acc = 0.0f;
    for (int64_t rc = threadIdx.x; rc < rowChunks; rc += kTHREADS)
    {
        acc += partial[rc * channels + c];
    }
    float const total = blockSum(acc, smem);
    if (threadIdx.x == 0)
    {
        dbias[c] = Cvt<T>::fromF(total);
    }
}

enum class FusedKind : int { kNONE, kROWS, kCOLS };

struct FusedPlan
{
    FusedKind kind{FusedKind::kNONE};
    int vec{1};
    RowsPlan rows{};
    ColsPlan cols{};
    int64_t channels{1};
    int64_t outer{1};
    size_t workspace{0};
};

int vecWidth(DType t)
{
    return t == DType::kFLOAT32 ? 4 : 8;
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
    plan.channels = spec.channels;
    plan.outer = n / (spec.channels * spec.inner);
    if (spec.channels == 1 || spec.inner >= kMIN_ROW_INNER)
    {
        RowsPlan& r = plan.rows;
        r.len = spec.channels == 1 ? n : spec.inner;
        r.rows = n / r.len;
        plan.vec = (aligned && r.len % vw == 0) || (aligned && r.rows == 1) ? vw : 1;
        r.chunkElems = kROW_CHUNK_PACKS * plan.vec;
        r.chunks = (r.len + r.chunkElems - 1) / r.chunkElems;
        plan.outer = spec.channels == 1 ? 1 : plan.outer;
        plan.kind = FusedKind::kROWS;
        plan.workspace = static_cast<size_t>(r.rows * r.chunks) * sizeof(float);
        return plan;
    }
    if (spec.inner == 1)
    {
        ColsPlan& c = plan.cols;
        plan.vec = aligned && spec.channels % vw == 0 ? vw : 1;
        c.rows = plan.outer;
        c.packsPerRow = spec.channels / plan.vec;
        c.tilePacks = std::min<int64_t>(c.packsPerRow, kTHREADS);
        c.tiles = (c.packsPerRow + c.tilePacks - 1) / c.tilePacks;
        c.rowsPerStep = kTHREADS / c.tilePacks;
        int64_t const perStep = c.rowsPerStep * c.tilePacks * plan.vec;
        int64_t const steps = std::max<int64_t>(1, kCOL_BLOCK_ELEMS / perStep);
        c.rowsPerBlock = c.rowsPerStep * steps;
        c.rowChunks = (c.rows + c.rowsPerBlock - 1) / c.rowsPerBlock;
        plan.kind = FusedKind::kCOLS;
        plan.workspace = static_cast<size_t>(c.rowChunks * spec.channels) * sizeof(float);
        return plan;
    }
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
    if (plan.kind == FusedKind::kROWS)
    {
        RowsPlan const& r = plan.rows;
        int64_t const blocks = r.rows * r.chunks;
        if (blocks > INT_MAX)
        {
            return cudaErrorInvalidConfiguration;
        }
        swishBackwardRowsKernel<T, kVEC><<<static_cast<unsigned>(blocks), kTHREADS, 0, stream>>>(gt, xt, dt, r, ws);
        finalizeRowsKernel<T><<<static_cast<unsigned>(plan.channels), kTHREADS, 0, stream>>>(
            ws, bt, plan.channels, plan.outer, r.chunks);
    }
    else
    {
        ColsPlan const& c = plan.cols;
        int64_t const blocks = c.rowChunks * c.tiles;
        if (blocks > INT_MAX)
        {
            return cudaErrorInvalidConfiguration;
        }
        swishBackwardColsKernel<T, kVEC><<<static_cast<unsigned>(blocks), kTHREADS, 0, stream>>>(gt, xt, dt, c, ws);
        if (c.rowChunks <= 64)
        {
            auto const fb = static_cast<unsigned>((plan.channels + kTHREADS - 1) / kTHREADS);
            finalizeColsThreadKernel<T><<<fb, kTHREADS, 0, stream>>>(ws, bt, plan.channels, c.rowChunks);
        }
        else
        {
            finalizeColsBlockKernel<T><<<static_cast<unsigned>(plan.channels), kTHREADS, 0, stream>>>(
                ws, bt, plan.channels, c.rowChunks);
        }
    }
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
