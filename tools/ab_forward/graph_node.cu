// What one graph node of the forward costs beside a kernel that does next to nothing (performance notes, h3/h4: the
// smallest rows' kernels are level with compile's by duration but not per node in a graph). Times a CUDA graph of
// 50 back-to-back launches each of: an empty kernel, a float4 add over the same bytes, and the launcher of whichever
// swish_forward.cu comes first on the include path (the tree's, or a variant folder's, as ab_forward.cu) on fp32 and
// fp16 [2,16,56,56] with a per-channel bias and fp32 with a scalar one; and, to tell shape from math from parameters,
// the op's exact math and inductor's in inductor's launch shape and the exact math in the op's shape with pointer
// parameters. Prints the best of 30 replays per node.
// H200: nvcc -std=c++17 -O3 -arch=sm_90 [-Ivariant] -Icsrc/kernels -Icsrc tools/ab_forward/graph_node.cu -o /tmp/gn
#include "swish_forward.cu"

#include <cstdio>
#include <cstdlib>
#include <functional>

namespace {

// Ends the program on a CUDA error: a failed launch or capture would otherwise print a time for nothing.
void check(cudaError_t e, char const* what)
{
    if (e != cudaSuccess)
    {
        std::fprintf(stderr, "graph_node: %s: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
}

__global__ void emptyKernel() {}

__global__ void __launch_bounds__(256) addKernel(float4 const* __restrict__ x, float4* __restrict__ y, int n, float b)
{
    int const i = blockIdx.x * 256 + threadIdx.x;
    if (i < n)
    {
        float4 a = x[i];
        a.x += b;
        a.y += b;
        a.z += b;
        a.w += b;
        y[i] = a;
    }
}

// NCHW [2,16,56,56]'s channel of element i with the plane size as a compile-time constant, as inductor specializes it.
__device__ __forceinline__ int channelOf(int i)
{
    return (i / (56 * 56)) % 16;
}

// Two elements a thread in 256-thread blocks (inductor's shape for this tensor), the op's exact fp32 math or
// inductor's (exp2 and reciprocal estimates): which of shape and math sets the cost of a node.
template <bool kEXACT>
__global__ void __launch_bounds__(256) swish2Kernel(float2 const* __restrict__ x, float const* __restrict__ bias,
    float2* __restrict__ y, int n2)
{
    int const i = blockIdx.x * 256 + threadIdx.x;
    if (i < n2)
    {
        float2 const a = x[i];
        float v[2] = {a.x, a.y};
        float b[2] = {bias[channelOf(2 * i)], bias[channelOf(2 * i + 1)]};
        if constexpr (kEXACT)
        {
            torchtrt_swish::detail::swishBiasAll<float>(v, b);
        }
        else
        {
#pragma unroll
            for (int k = 0; k < 2; ++k)
            {
                v[k] = v[k] * __fdividef(1.0f, 1.0f + __expf(-v[k])) + b[k]; // ex2.approx, div.full
            }
        }
        y[i] = make_float2(v[0], v[1]);
    }
}

// The op's exact math on one 16-byte pack a thread in its 256-thread blocks, with three pointer parameters and a
// constant plane size: the launcher's kernel less its parameter block and run-time lookups.
__global__ void __launch_bounds__(256) swish4Kernel(float4 const* __restrict__ x, float const* __restrict__ bias,
    float4* __restrict__ y, int n4)
{
    int const i = blockIdx.x * 256 + threadIdx.x;
    if (i < n4)
    {
        float4 const a = x[i];
        float const c = bias[channelOf(4 * i)];
        float v[4] = {a.x, a.y, a.z, a.w};
        float b[4] = {c, c, c, c};
        torchtrt_swish::detail::swishBiasAll<float>(v, b);
        y[i] = make_float4(v[0], v[1], v[2], v[3]);
    }
}

float usPerNode(std::function<void(cudaStream_t)> const& launch, cudaStream_t s)
{
    constexpr int kNODES = 50;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "capture");
    for (int r = 0; r < kNODES; ++r)
    {
        launch(s);
    }
    check(cudaStreamEndCapture(s, &g), "capture");
    check(cudaGraphInstantiate(&ge, g, 0), "instantiate");
    cudaEvent_t a, b;
    check(cudaEventCreate(&a), "event");
    check(cudaEventCreate(&b), "event");
    for (int w = 0; w < 3; ++w)
    {
        cudaGraphLaunch(ge, s);
    }
    float best = 1e9f;
    for (int r = 0; r < 30; ++r)
    {
        cudaEventRecord(a, s);
        cudaGraphLaunch(ge, s);
        cudaEventRecord(b, s);
        check(cudaEventSynchronize(b), "replay");
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        best = ms < best ? ms : best;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return best * 1000.0f / kNODES;
}

} // namespace

int main()
{
    using torchtrt_swish::BiasSpec;
    using torchtrt_swish::DType;
    int const n = 2 * 16 * 56 * 56;
    float *x, *y, *bias;
    check(cudaMalloc(&x, n * sizeof(float)), "malloc");
    check(cudaMalloc(&y, n * sizeof(float)), "malloc");
    check(cudaMalloc(&bias, 16 * sizeof(float)), "malloc");
    cudaMemset(x, 0, n * sizeof(float));
    cudaMemset(bias, 0, 16 * sizeof(float));
    cudaStream_t s;
    cudaStreamCreate(&s);
    auto forward = [&](DType t, BiasSpec spec) {
        return [=](cudaStream_t st) {
            check(torchtrt_swish::launchSwishForward(t, x, bias, y, n, spec, st), "forward");
        };
    };
    auto two = [&](decltype(&swish2Kernel<true>) kernel) {
        return [=](cudaStream_t st) {
            kernel<<<(n / 2 + 255) / 256, 256, 0, st>>>(reinterpret_cast<float2 const*>(x), bias,
                reinterpret_cast<float2*>(y), n / 2);
        };
    };
    for (int round = 0; round < 3; ++round)
    {
        std::printf("us per node: empty 196 blocks %.3f, 2-element exact %.3f, 2-element inductor math %.3f, "
                    "4-element exact, pointer parameters %.3f\n",
            usPerNode([](cudaStream_t st) { emptyKernel<<<196, 256, 0, st>>>(); }, s),
            usPerNode(two(swish2Kernel<true>), s), usPerNode(two(swish2Kernel<false>), s),
            usPerNode([&](cudaStream_t st) {
                swish4Kernel<<<(n / 4 + 255) / 256, 256, 0, st>>>(reinterpret_cast<float4 const*>(x), bias,
                    reinterpret_cast<float4*>(y), n / 4);
            }, s));
        std::printf("us per node: empty %.3f, float4 add %.3f, fp32 per-channel %.3f, fp32 scalar %.3f, "
                    "fp16 per-channel %.3f\n",
            usPerNode([](cudaStream_t st) { emptyKernel<<<98, 256, 0, st>>>(); }, s),
            usPerNode([&](cudaStream_t st) {
                addKernel<<<(n / 4 + 255) / 256, 256, 0, st>>>(reinterpret_cast<float4*>(x),
                    reinterpret_cast<float4*>(y), n / 4, 1.0f);
            }, s),
            usPerNode(forward(DType::kFLOAT32, BiasSpec{16, 56 * 56}), s),
            usPerNode(forward(DType::kFLOAT32, BiasSpec{1, 1}), s),
            usPerNode(forward(DType::kFLOAT16, BiasSpec{16, 56 * 56}), s));
    }
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
