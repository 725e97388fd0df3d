// The fused backward (swish_kernel.h: swishBackwardFusedWorkspace, launchSwishBackwardFused): dx and dbias from
// one read of (g, x), with its planning (rows, planes, columns) and the fixed-order column sums.
// No torch, no TensorRT: the torch extension links this object.
#include "swish_backward_step.cuh"

namespace torchtrt_swish {
namespace {

using namespace detail;

// ----------------------------------------------------------------------------- fused backward
//
// dx and dbias in one read of (g, x). Every block writes fp32 partial sums of g to a workspace laid out as a
// matrix partial[R][C] (C = bias elements), and dbias[c] is the sum of column c, added in a fixed order
// (deterministic, no floating-point atomics). Three shapes of the main work, all views of x as [outer, C, inner]:
// "rows" (a scalar bias: the tensor is one run), "planes" (inner > 1: per-channel on dim 1, blocks before the last
// dim) and "columns" (inner == 1: per-channel on the last dim, full, trailing blocks;
// and short planes of fp16/bf16 as groups of columns, planGroupedCols).
//

constexpr int kWARPS = kTHREADS / 32;
// Elements one block of the rows kernel reduces: enough work per block to amortize its partial write.
constexpr int64_t kROW_CHUNK_PACKS = static_cast<int64_t>(kTHREADS) * kUNROLL * 2;
// Legacy layouts only: dim-1 runs this long took the rows kernel (one block per run), shorter ones the unfused path.
constexpr int64_t kMIN_ROW_INNER = 512;
// Elements per block in the columns kernel.
constexpr int64_t kCOL_BLOCK_ELEMS = 65536; // amortizes the per-block reduction and partial write
constexpr int kFINAL_THREADS = 1024;

// The block index that the rows and planes kernels work on: the grid walks the tensor from its end. The backward
// usually runs right after something that went through x or g from the start (the forward just read x; the layer
// after wrote g), so the last part of them may still be in L2 and is read first, before the first part's misses
// evict it. Without such reuse the order costs nothing. Partial sums keep their slots (same bits).
__device__ __forceinline__ uint32_t fromTheEnd()
{
    return gridDim.x - 1U - blockIdx.x;
}

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
    __shared__ float smem[kFINAL_THREADS / 32 * 8]; // a sum per warp and column (colsPer <= 8)
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
    // The lanes of a column inside a warp (same tx) by an xor tree, then the warps' sums in warp order: one barrier,
    // where a shared-memory tree needs one per level (ten for 1024 lanes), which dominated small column sums.
    for (int o = colsPer; o < 32; o <<= 1)
    {
        s += __shfl_xor_sync(0xffffffffU, s, o);
    }
    int const lane = static_cast<int>(threadIdx.x) & 31;
    int const warps = static_cast<int>(blockDim.x) / 32; // blockDim.x is a power of two >= 32 (sumShape)
    if (lane < colsPer)
    {
        smem[(threadIdx.x / 32) * colsPer + lane] = s;
    }
    __syncthreads();
    if (threadIdx.x < 32)
    {
        // The warps' sums by one warp: lane l adds warps l / colsPer, + 32 / colsPer, ... of its column, then an xor
        // tree over the column's lanes (a fixed order), instead of one thread waiting on each shared load in turn.
        float total = 0.0f;
        for (int w = lane / colsPer; w < warps; w += 32 / colsPer)
        {
            total += smem[w * colsPer + tx];
        }
        for (int o = colsPer; o < 32; o <<= 1)
        {
            total += __shfl_xor_sync(0xffffffffU, total, o);
        }
        if (lane < colsPer && c < C)
        {
            out[blockIdx.y * C + c] = Cvt<TOut>::fromF(total);
        }
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
    uint32_t const b = fromTheEnd();
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
    int64_t group;        // consecutive columns that share one bias element (1: a bias per column)
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
        float sum = 0.0f;
        if (t < width && out < C)
        {
#pragma unroll
            for (int w = 0; w < kWARPS; ++w)
            {
                sum += smem[w * width + t];
            }
            if (plan.group == 1)
            {
                partial[rowChunk * C + out] = sum;
            }
        }
        if (plan.group > 1)
        {
            // Groups of columns share a bias element: tiles hold whole groups (planner), so each group's column
            // sums are added here in column order and the partial row has one sum per bias element.
            int const group = static_cast<int>(plan.group);
            __syncthreads(); // every warp's sums read
            if (t < width)
            {
                smem[t] = sum;
            }
            __syncthreads();
            int const groups = width / group;
            if (t < groups)
            {
                float s = 0.0f;
                for (int j = 0; j < group; ++j)
                {
                    s += smem[t * group + j];
                }
                partial[rowChunk * (C / group) + tile * groups + t] = s;
            }
        }
        return;
    }
    // Other tile widths (never grouped: planGroupedCols): combine the rowsPerStep threads that share a column element
    // with a fixed tree over the rows, in smem laid out [k][row][tilePack]: a warp's threads touch consecutive words
    // at every step (a [row][tilePack][k] layout had 4- to 8-way bank conflicts, which cost small tensors
    // microseconds).
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
    uint32_t const b = fromTheEnd();
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
    if (nFull > 0)
    {
        // All loads first, unconditionally: a thread past the block's last pack reloads that pack (same cache line,
        // result unused). Behind `if (p < nFull)` the compiler placed the bf16 conversions (integer shifts) right
        // after each load pair, so each pair waited for the one before: 0.91 of the floor instead of fp16's 1.01.
#pragma unroll
        for (int u = 0; u < kPLANE_PPT; ++u)
        {
            int const p = min(t + u * kTHREADS, nFull - 1);
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

// rowLen: elements per row (C for a bias on the last dim, C * inner for grouped columns); group: columns per bias
// element (planGroupedCols).
void planCols(FusedPlan& plan, int64_t n, int64_t rowLen, int64_t group, bool aligned, int vw)
{
    ColsPlan& c = plan.cols;
    plan.vec = aligned && rowLen % vw == 0 ? vw : 1;
    c.group = group;
    c.packsPerRow = rowLen / plan.vec;
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

// Short planes in half types as grouped columns: x viewed as [outer, C * inner] rows whose columns come in groups of
// `inner` that share a bias element. Each thread keeps its column's sum over many rows in registers and the block
// adds the groups once, where the planes kernel spends a reduction per block of a few samples; fp16 and bf16 carry
// twice the elements per byte of fp32, and that reduction makes them issue-bound, while fp32 streams at the floor
// through the planes kernel (docs/performance-notes.md). Needs whole packs per plane and tiles of whole planes whose
// warps hold whole rows (the shuffle reduction of the columns kernel).
bool planGroupedCols(FusedPlan& plan, int64_t n, BiasSpec spec, bool aligned, int vw)
{
    int64_t const rowLen = spec.channels * spec.inner;
    if (vw != vecWidth(DType::kFLOAT16) || !aligned || spec.inner % vw != 0) // fp16 and bf16 only
    {
        return false;
    }
    int64_t const tilePacks = colTilePacks(rowLen / vw);
    // Fewer rows than a block steps over at once would leave most of its threads idle.
    if (32 % tilePacks != 0 || (tilePacks * vw) % spec.inner != 0 || n / rowLen < kTHREADS / tilePacks)
    {
        return false;
    }
    plan.cols.rows = n / rowLen;
    planCols(plan, n, rowLen, spec.inner, aligned, vw);
    return true;
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
        planCols(plan, n, spec.channels, 1, aligned, vw);
        plan.kind = FusedKind::kCOLS;
    }
    else if (!legacy && planGroupedCols(plan, n, spec, aligned, vw))
    {
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

} // namespace

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

} // namespace torchtrt_swish
