// A stand-in for the five libcuda.so.1 entry points the plugin's StreamContextScope looks up
// (csrc/trt_plugin/stream_context.cpp), built with soname libcuda.so.1. cuStreamIsCapturing answers
// CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (906), one of the results the driver API documents for it (a query of a stream
// while a capture in relaxed/global mode runs), so a test can check that the plugin reports the driver's first error.
// The other four succeed and do nothing. Loaded only into a test's own process, before the plugin.
#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT int cuStreamIsCapturing(void* /*stream*/, int* status)
{
    if (status != nullptr)
    {
        *status = 0;
    }
    return 906;
}

FAKE_EXPORT int cuStreamGetCtx(void* /*stream*/, void** ctx)
{
    *ctx = nullptr;
    return 0;
}

FAKE_EXPORT int cuCtxGetCurrent(void** ctx)
{
    *ctx = nullptr;
    return 0;
}

FAKE_EXPORT int cuCtxPushCurrent_v2(void* /*ctx*/)
{
    return 0;
}

FAKE_EXPORT int cuCtxPopCurrent_v2(void** ctx)
{
    *ctx = nullptr;
    return 0;
}
