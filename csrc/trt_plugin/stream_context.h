// Which CUDA context a launch goes to: enqueue runs in whatever context its caller left current, but the kernel must
// go to the stream's device. StreamContextScope makes the stream's context current around the launch, through the
// driver entry points of the already-loaded libcuda (stream_context.cpp says why not through the runtime).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

namespace torchtrt_swish {
namespace plugin {

//! Makes the stream's context current for its lifetime and restores the previous one; no-op when they match.
class StreamContextScope
{
public:
    explicit StreamContextScope(cudaStream_t stream) noexcept;
    ~StreamContextScope();
    StreamContextScope(StreamContextScope const&) = delete;
    StreamContextScope& operator=(StreamContextScope const&) = delete;

    //! CUDA_SUCCESS, or the driver call that failed to find or switch to the stream's context.
    CUresult error() const noexcept
    {
        return mError;
    }

private:
    bool mPushed{false};
    CUresult mError{CUDA_SUCCESS};
};

} // namespace plugin
} // namespace torchtrt_swish
