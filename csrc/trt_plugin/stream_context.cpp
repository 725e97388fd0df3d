#include "stream_context.h"

#include <dlfcn.h>

namespace torchtrt_swish {
namespace plugin {
namespace {

//! The few CUDA driver entry points enqueue needs, looked up in the already-loaded libcuda. Not through the runtime:
//! any runtime call from a thread with no current context creates one on the runtime's current device (0 unless set),
//! which is a device that may hold none of the engine's buffers. Not linked either: the library must still load on
//! machines without a driver.
struct DriverApi
{
    decltype(&::cuStreamIsCapturing) streamIsCapturing{nullptr};
    decltype(&::cuStreamGetCtx) streamGetCtx{nullptr};
    decltype(&::cuCtxGetCurrent) ctxGetCurrent{nullptr};
    decltype(&::cuCtxPushCurrent) ctxPushCurrent{nullptr};
    decltype(&::cuCtxPopCurrent) ctxPopCurrent{nullptr};

    static DriverApi const& get() noexcept
    {
        static DriverApi const api = load();
        return api;
    }
    bool complete() const noexcept
    {
        return streamIsCapturing && streamGetCtx && ctxGetCurrent && ctxPushCurrent && ctxPopCurrent;
    }

private:
    static DriverApi load() noexcept
    {
        DriverApi api;
        // RTLD_NOLOAD: a stream exists only once something loaded the driver; the handle stays valid because libcuda
        // is never unloaded while a context lives.
        void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (lib == nullptr)
        {
            return api;
        }
        // Exact ABI names: cuda.h maps the push/pop macros onto their _v2 symbols, the other three have one version.
        api.streamIsCapturing = reinterpret_cast<decltype(api.streamIsCapturing)>(dlsym(lib, "cuStreamIsCapturing"));
        api.streamGetCtx = reinterpret_cast<decltype(api.streamGetCtx)>(dlsym(lib, "cuStreamGetCtx"));
        api.ctxGetCurrent = reinterpret_cast<decltype(api.ctxGetCurrent)>(dlsym(lib, "cuCtxGetCurrent"));
        api.ctxPushCurrent = reinterpret_cast<decltype(api.ctxPushCurrent)>(dlsym(lib, "cuCtxPushCurrent_v2"));
        api.ctxPopCurrent = reinterpret_cast<decltype(api.ctxPopCurrent)>(dlsym(lib, "cuCtxPopCurrent_v2"));
        return api;
    }
};

} // namespace

StreamContextScope::StreamContextScope(cudaStream_t stream) noexcept
{
    DriverApi const& cu = DriverApi::get();
    // The legacy and per-thread default streams belong to whatever context is current: nothing to follow.
    if (!cu.complete() || stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
    {
        return;
    }
    auto const s = reinterpret_cast<CUstream>(stream);
    // Stream queries other than this one may invalidate a capture under way (driver 580 refuses
    // cudaStreamGetDevice then). A capture was begun by the caller on the stream's device, which is TensorRT's
    // contract for enqueueV3 anyway, so there is nothing to switch.
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    mError = cu.streamIsCapturing(s, &capture);
    if (mError != CUDA_SUCCESS || capture != CU_STREAM_CAPTURE_STATUS_NONE)
    {
        return; // a failed query is the first error, kept for error(): a later launch failure would hide its cause
    }
    CUcontext streamCtx = nullptr;
    CUcontext current = nullptr;
    mError = cu.streamGetCtx(s, &streamCtx);
    if (mError == CUDA_SUCCESS)
    {
        mError = cu.ctxGetCurrent(&current);
    }
    if (mError == CUDA_SUCCESS && streamCtx != current)
    {
        mError = cu.ctxPushCurrent(streamCtx);
        mPushed = mError == CUDA_SUCCESS;
    }
}

StreamContextScope::~StreamContextScope()
{
    if (mPushed)
    {
        CUcontext popped = nullptr;
        (void) DriverApi::get().ctxPopCurrent(&popped);
    }
}

} // namespace plugin
} // namespace torchtrt_swish
