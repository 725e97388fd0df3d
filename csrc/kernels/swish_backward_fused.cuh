// What the fused backward's kernel files share (swish_backward_fused.cu launches, swish_backward_rows_cols.cu,
// swish_backward_planes.cu and swish_backward_channels.cu hold the main kernels by strategy): block reductions, the
// block order, and each strategy's launch. The plans themselves are plain C++ in swish_backward_plan.h.
#pragma once

#include <type_traits>

#include "swish_backward_plan.h"
#include "swish_backward_step.cuh"

namespace torchtrt_swish {
namespace detail {

// The block index that the rows and planes kernels work on: the grid walks the tensor from its end. The backward
// usually runs right after something that went through x or g from the start (the forward just read x; the layer
// after wrote g), so the last part of them may still be in L2 and is read first, before the first part's misses
// evict it. Without such reuse the order costs nothing. Partial sums keep their slots (same bits).
__device__ __forceinline__ uint32_t fromTheEnd()
{
    return gridDim.x - 1U - blockIdx.x;
}

// Programmatic dependent launch (sm_90 and later; no-ops before): a main kernel lets the column sums that follow it
// be launched while it runs, and they wait for its partial sums before reading them, so that the sums' launch
// latency is hidden behind the main kernel instead of following it.
__device__ __forceinline__ void allowDependentLaunch()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

__device__ __forceinline__ void awaitPrerequisiteGrids()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
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

//! One launch of a strategy's main kernel on `grid` blocks (mainBlocks of the plan): dx, and the plan's partial sums
//! of g into partial[partialRows][channels]. The kernel's pack width is plan.vec (16 / sizeof(T) or 1; the channels
//! kernel's also 2 or 4 elements).
template <typename T>
struct MainLaunch
{
    FusedPlan const& plan;
    unsigned grid;
    T const* g;
    T const* x;
    T* dx;
    float* partial;
    T* dbias; // written by the main kernel only where the plan has no column sums (sumStages)
    cudaStream_t stream;
};

//! Calls launch(std::integral_constant<int, V>{}) with the plan's pack width V (16 / sizeof(T) or 1): the kernels
//! are templates over it, and each strategy's launcher instantiates both.
template <typename T, typename Launch>
void byPackWidth(MainLaunch<T> const& l, Launch&& launch)
{
    constexpr int kV = 16 / sizeof(T);
    if (l.plan.vec == kV)
    {
        launch(std::integral_constant<int, kV>{});
    }
    else
    {
        launch(std::integral_constant<int, 1>{});
    }
}

//! The rows kernel (swish_backward_rows_cols.cu), for plans of kind kROWS.
template <typename T>
void launchRowsKernel(MainLaunch<T> const& l);

//! The columns kernel (swish_backward_rows_cols.cu), for plans of kind kCOLS.
template <typename T>
void launchColsKernel(MainLaunch<T> const& l);

//! The planes kernel (swish_backward_planes.cu), for plans of kind kPLANES.
template <typename T>
void launchPlanesKernel(MainLaunch<T> const& l);

//! The channels kernel (swish_backward_channels.cu), for plans of kind kCHANNELS.
template <typename T>
void launchChannelsKernel(MainLaunch<T> const& l);

} // namespace detail
} // namespace torchtrt_swish
