// The fused backward's rows and columns kernels (planning: swish_backward_plan.h; launch and column sums:
// swish_backward_fused.cu). Rows: a scalar bias, the whole tensor one run split in chunks, one partial sum per
// block. Columns: a bias per column of x viewed as [rows, C] (per-channel on the last dim, full, trailing blocks, and
// grouped columns for short fp16/bf16 planes), each thread summing its column over many rows in registers.
// No torch, no TensorRT.
#include "swish_backward_fused.cuh"
#include "swish_backward_index.h"

namespace torchtrt_swish {
namespace detail {
namespace {

// One block reduces one chunk of the run and writes dx; its sum goes to partial[chunk] (rowsBlock).
template <typename T, int kVEC>
__global__ void __launch_bounds__(kTHREADS, kMIN_BLOCKS) swishBackwardRowsKernel(T const* __restrict__ g, T const* __restrict__ x,
    T* __restrict__ dx, RowsPlan plan, float* __restrict__ partial)
{
    allowDependentLaunch();
    __shared__ float smem[kWARPS];
    using P = Pack<T, kVEC>;
    RowsBlock const blk = rowsBlock(plan, fromTheEnd());
    int64_t const begin = blk.begin;
    int64_t const count = blk.count;
    int64_t const nPacks = count / kVEC; // begin is pack-aligned: chunks are whole packs
    P const* gp = reinterpret_cast<P const*>(g + begin);
    P const* xp = reinterpret_cast<P const*>(x + begin);
    P* dp = reinterpret_cast<P*>(dx + begin);
    float acc = 0.0f;
    for (int64_t base = threadIdx.x; base < nPacks; base += static_cast<int64_t>(kTHREADS) * kUNROLL)
    {
        acc += backwardStep<T, kVEC>(gp, xp, dp, base, nPacks);
    }
    // Tail of a run whose length is not a multiple of kVEC (the last chunk only).
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
        partial[blk.cell] = total;
    }
}


// Block (rowChunk, tile): rows [rowChunk * rowsPerBlock, +rowsPerBlock) x the tile's column packs.
// partial[rowChunk][column] = sum of g over those rows; with one row chunk, dbias[column] (no column sums follow).
template <typename T, int kVEC>
__global__ void __launch_bounds__(kTHREADS, kMIN_BLOCKS) swishBackwardColsKernel(T const* __restrict__ g, T const* __restrict__ x,
    T* __restrict__ dx, ColsPlan plan, float* __restrict__ partial, T* __restrict__ dbias)
{
    allowDependentLaunch();
    __shared__ float smem[kTHREADS * kVEC];
    auto const store = [&](int64_t cell, float v) {
        if (colsWritesBias(plan))
        {
            dbias[cell] = Cvt<T>::fromF(v);
        }
        else
        {
            partial[cell] = v;
        }
    };
    using P = Pack<T, kVEC>;
    ColsBlock const blk = colsBlock(plan, blockIdx.x);
    ColsThread const th = colsThread(plan, blk.tile, threadIdx.x);
    int const tr = th.tr;
    int const tp = th.tp;
    int64_t const col = th.col; // column pack index
    bool const active = th.active;
    uint32_t const rowChunk = blk.rowChunk;
    uint32_t const tile = blk.tile;
    int64_t const r0 = blk.r0;
    int64_t const r1 = blk.r1;
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
                    gi[u] = gp[colsPack(plan, rr, col)];
                    xi[u] = xp[colsPack(plan, rr, col)];
                }
            }
#pragma unroll
            for (int u = 0; u < kUNROLL; ++u)
            {
                int64_t const rr = r + u * step;
                if (rr < r1)
                {
                    float gf[kVEC];
                    dp[colsPack(plan, rr, col)] = gradPack<T, kVEC>(gi[u], xi[u], gf);
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
    if (colsShuffles(plan))
    {
        // A warp holds 32 / tilePacks whole rows of the tile: add them with shuffles (a fixed xor tree), then one
        // barrier and the warps' sums in warp order, so the result stays deterministic (a shared-memory tree needs
        // a barrier per level).
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
                smem[colsWarpSlot(plan, warp, lane, k, kVEC)] = acc[k];
            }
        }
        __syncthreads();
        int const t = static_cast<int>(threadIdx.x);
        float sum = 0.0f;
        if (t < width)
        {
#pragma unroll
            for (int w = 0; w < kWARPS; ++w)
            {
                sum += smem[colsSumSlot(plan, w, t, kVEC)];
            }
        }
        if (plan.group == 1)
        {
            int64_t const cell = colsColumnCell(plan, rowChunk, tile, t, kVEC);
            if (cell >= 0)
            {
                store(cell, sum);
            }
            return;
        }
        // Groups of columns share a bias element: tiles hold whole groups (planner), so each group's column sums
        // are added here in column order and the partial row has one sum per bias element.
        int const group = static_cast<int>(plan.group);
        __syncthreads(); // every warp's sums read
        if (t < width)
        {
            smem[t] = sum;
        }
        __syncthreads();
        int64_t const cell = colsGroupCell(plan, rowChunk, tile, t, kVEC);
        if (cell >= 0)
        {
            float s = 0.0f;
            for (int j = 0; j < group; ++j)
            {
                s += smem[colsGroupSlot(plan, t, j)];
            }
            store(cell, s);
        }
        return;
    }
    // Other tile widths (never grouped: planGroupedCols): combine the rowsPerStep threads that share a column element
    // with a fixed tree over the rows, in smem laid out [k][row][tilePack]: a warp's threads touch consecutive words
    // at every step (a [row][tilePack][k] layout has bank conflicts).
    int const rps = static_cast<int>(plan.rowsPerStep);
    auto at = [&](int k, int row) -> float& { return smem[colsTreeSlot(plan, k, row, tp)]; };
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
            store(colsTreeCell(plan, rowChunk, col, k, kVEC), at(k, 0));
        }
    }
}

} // namespace

template <typename T>
void launchRowsKernel(MainLaunch<T> const& l)
{
    byPackWidth(l, [&](auto v) {
        swishBackwardRowsKernel<T, decltype(v)::value><<<l.grid, kTHREADS, 0, l.stream>>>(l.g, l.x, l.dx, l.plan.rows, l.partial);
    });
}

template <typename T>
void launchColsKernel(MainLaunch<T> const& l)
{
    auto const launch = [&](auto v) {
        swishBackwardColsKernel<T, decltype(v)::value><<<l.grid, kTHREADS, 0, l.stream>>>(l.g, l.x, l.dx, l.plan.cols, l.partial,
            l.dbias);
    };
    if constexpr (sizeof(T) == 2)
    {
        constexpr int kHALF = 16 / sizeof(T) / 2; // small tensors' 8-byte packs (planCols)
        if (l.plan.vec == kHALF)
        {
            launch(std::integral_constant<int, kHALF>{});
            return;
        }
    }
    byPackWidth(l, launch);
}

template void launchRowsKernel(MainLaunch<float> const&);
template void launchRowsKernel(MainLaunch<__half> const&);
template void launchRowsKernel(MainLaunch<__nv_bfloat16> const&);
template void launchColsKernel(MainLaunch<float> const&);
template void launchColsKernel(MainLaunch<__half> const&);
template void launchColsKernel(MainLaunch<__nv_bfloat16> const&);

} // namespace detail
} // namespace torchtrt_swish
