// One build of the forward launcher for tools/ab_forward.py: whichever swish_forward.cu comes first on the include
// path (the tree's, or a saved baseline's), with the -D switches of its variant, behind a C entry point for ctypes.
#include "swish_forward.cu"

extern "C" int abSwishForward(int dtype, void const* x, void const* bias, void* y, long long n, long long channels,
    long long inner, void* stream)
{
    torchtrt_swish::BiasSpec const spec{channels, inner};
    return static_cast<int>(torchtrt_swish::launchSwishForward(static_cast<torchtrt_swish::DType>(dtype), x, bias, y,
        n, spec, static_cast<cudaStream_t>(stream)));
}
