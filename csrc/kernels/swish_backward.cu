// The input-gradient launcher launchSwishBackward (swish_kernel.h): a grid-stride kernel over (g, x).
// No torch, no TensorRT: the torch extension links this object.
#include "swish_backward_step.cuh"

namespace torchtrt_swish {
namespace {

using namespace detail;

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

// Grid of the unfused backward's grid-stride kernel: kUNROLL packs per thread, capped at INT_MAX blocks.
unsigned gridFor(int64_t nPacks)
{
    int64_t const perBlock = static_cast<int64_t>(kTHREADS) * kUNROLL;
    int64_t const blocks = (nPacks + perBlock - 1) / perBlock;
    // Grid-stride loops cover whatever a capped grid leaves over.
    return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(blocks, 1), INT_MAX));
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
