// The fused backward (swish_kernel.h: swishBackwardFusedWorkspace, launchSwishBackwardFused): dx and dbias from
// one read of (g, x). Here: the plan for the device (swish_backward_plan.h), the main kernel of its strategy
// (swish_backward_rows_cols.cu, swish_backward_planes.cu, swish_backward_channels.cu), then the fixed-order column
// sums of the partial matrix (none after the channels kernel, which writes dbias).
// No torch, no TensorRT: the torch extension links this object.
#include "swish_backward_fused.cuh"
#include "swish_backward_index.h"

namespace torchtrt_swish {
namespace {

using namespace detail;

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
    awaitPrerequisiteGrids(); // launched early behind the kernel that wrote `partial` (sumColumns)
    int const shift = __ffs(colsPer) - 1;
    SumThread const th = sumThread(shift, static_cast<int>(threadIdx.x), blockIdx.x, blockIdx.y, R, sliceRows);
    int const tx = th.tx;
    int const lanes = static_cast<int>(blockDim.x) >> shift;
    int64_t const c = th.c;
    int64_t const r1 = th.r1;
    float s = 0.0f;
    if (c < C)
    {
        // A one-stage sum and the first of two give a thread at most kSUM_MAX_LANE_ROWS rows (planSums), loaded all
        // at once before the first add (a run-time trip count leaves rows to a serial remainder loop, one L2 round
        // trip each). Absent rows add +0, which leaves every sum as it was (s starts at +0). The loop after them
        // serves second stages past kSUM_MAX_LANE_ROWS x lanes slices and first stages of slices over 65535 x
        // kSUM_SLICE_LANE_ROWS x lanes rows.
        float v[kSUM_MAX_LANE_ROWS];
#pragma unroll
        for (int k = 0; k < kSUM_MAX_LANE_ROWS; ++k)
        {
            int64_t const r = sumRow(th, k, lanes);
            v[k] = r < r1 ? partial[r * C + c] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < kSUM_MAX_LANE_ROWS; ++k)
        {
            s += v[k];
        }
        for (int64_t r = sumRow(th, kSUM_MAX_LANE_ROWS, lanes); r < r1; r += lanes)
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
        smem[sumWarpSlot(static_cast<int>(threadIdx.x / 32), colsPer, lane)] = s;
    }
    __syncthreads();
    if (threadIdx.x < 32)
    {
        // The warps' sums by one warp: lane l adds warps l / colsPer, + 32 / colsPer, ... of its column, then an xor
        // tree over the column's lanes (a fixed order), instead of one thread waiting on each shared load in turn.
        float total = 0.0f;
        for (int w = lane >> shift; w < warps; w += 32 >> shift)
        {
            total += smem[sumWarpSlot(w, colsPer, tx)];
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

// Multiprocessors of the current device: the fused backward sizes its blocks so small tensors still spread over the
// whole chip.
cudaError_t smCount(int& sms)
{
    static std::atomic<int> cache[64];
    return perDevice(cache, sms, [](int dev, int& v) {
        return cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev);
    });
}

// Whether the column-sum kernel this device runs has its wait: griddepcontrol exists from PTX 9.0, and a build that
// reaches the device through older PTX (an arch list without 9.0) compiles the wait out, so its sums must not start
// before the main kernel ends.
template <typename TOut>
cudaError_t sumsWaitForMain(bool& waits)
{
    static std::atomic<int> cache[64]; // 2: waits, 1: does not
    int v = 0;
    cudaError_t const e = perDevice(cache, v, [](int, int& out) {
        cudaFuncAttributes a{};
        cudaError_t const fe = cudaFuncGetAttributes(&a, finalizeColumnsKernel<TOut>);
        out = a.ptxVersion >= 90 ? 2 : 1;
        return fe;
    });
    waits = v == 2;
    return e;
}

// One column-sum launch, as a programmatic dependent of the kernel before it (ours: the main kernel or the first
// stage) where the kernel waits for it.
template <typename TOut>
cudaError_t launchSums(dim3 grid, unsigned threads, cudaStream_t stream, float const* partial, int64_t R, int64_t C,
    int colsPer, int64_t sliceRows, TOut* out)
{
    bool waits = false;
    cudaError_t const e = sumsWaitForMain<TOut>(waits);
    if (e != cudaSuccess)
    {
        return e;
    }
    cudaLaunchAttribute pdl{};
    pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    pdl.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(threads);
    cfg.stream = stream;
    cfg.attrs = &pdl;
    cfg.numAttrs = waits ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, finalizeColumnsKernel<TOut>, partial, R, C, colsPer, sliceRows, out);
}

cudaError_t planFor(FusedPlan& plan, DType dtype, int64_t n, BiasSpec spec, void const* g, void const* x,
    void const* dx)
{
    int sms = 0;
    cudaError_t const e = smCount(sms);
    if (e == cudaSuccess)
    {
        plan = planFused(dtype, n, spec, aligned16(g) && aligned16(x) && aligned16(dx), sms);
    }
    return e;
}

// dbias from the partial matrix ws[partialRows][channels]: one launch, or two over row slices (sumStages).
template <typename T>
cudaError_t sumColumns(FusedPlan const& plan, float* ws, T* dbias, cudaStream_t stream)
{
    SumStage stages[2];
    int const count = sumStages(plan, stages);
    for (int i = 0; i < count; ++i)
    {
        SumStage const& st = stages[i];
        if (st.shape.blocks == 0)
        {
            return cudaErrorInvalidConfiguration;
        }
        dim3 const grid(st.shape.blocks, st.slices);
        auto const threads = static_cast<unsigned>(st.shape.threads);
        cudaError_t const e = st.outOffset >= 0
            ? launchSums<float>(grid, threads, stream, ws + st.inOffset, st.rows, plan.channels, st.shape.colsPer,
                  st.sliceRows, ws + st.outOffset)
            : launchSums<T>(grid, threads, stream, ws + st.inOffset, st.rows, plan.channels, st.shape.colsPer,
                  st.sliceRows, dbias);
        if (e != cudaSuccess)
        {
            return e;
        }
    }
    return cudaGetLastError();
}

template <typename T>
cudaError_t fused(FusedPlan const& plan, void const* g, void const* x, void* dx, void* dbias, float* ws,
    cudaStream_t stream)
{
    unsigned const grid = gridBlocks(mainBlocks(plan));
    if (grid == 0)
    {
        return cudaErrorInvalidConfiguration;
    }
    MainLaunch<T> const launch{plan, grid, static_cast<T const*>(g), static_cast<T const*>(x), static_cast<T*>(dx),
        ws, static_cast<T*>(dbias), stream};
    switch (plan.kind)
    {
    case FusedKind::kROWS: launchRowsKernel(launch); break;
    case FusedKind::kCOLS: launchColsKernel(launch); break;
    case FusedKind::kCHANNELS: launchChannelsKernel(launch); break;
    default: launchPlanesKernel(launch); break;
    }
    return sumColumns(plan, ws, static_cast<T*>(dbias), stream);
}

} // namespace

size_t swishBackwardFusedWorkspace(DType dtype, int64_t n, BiasSpec spec, void const* grad, void const* x,
    void const* dx) noexcept
{
    FusedPlan plan;
    return planFor(plan, dtype, n, spec, grad, x, dx) == cudaSuccess ? fusedWorkspaceBytes(plan) : 0;
}

cudaError_t launchSwishBackwardFused(DType dtype, void const* grad, void const* x, void* dx, void* dbias, int64_t n,
    BiasSpec spec, void* workspace, size_t workspaceBytes, cudaStream_t stream) noexcept
{
    FusedPlan plan;
    cudaError_t const e = planFor(plan, dtype, n, spec, grad, x, dx);
    if (e != cudaSuccess)
    {
        return e;
    }
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
