// Logging and TensorRT symbol lookup for the SwishBias plugin library.
//
// The library has no link-time dependency on libnvinfer, so everything it needs from TensorRT at run time (the
// logger, the plugin registry) is either handed over (setLoggerFinder) or looked up with dlsym in the process.
#pragma once

#include <NvInferRuntime.h>

#include <exception>
#include <string>

namespace torchtrt_swish {
namespace plugin {

using Severity = nvinfer1::ILogger::Severity;

//! Store the finder TensorRT passes to setLoggerFinder (nullptr clears it). Thread-safe.
void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept;

//! The logger to use right now: the finder's logger, else TensorRT's global getLogger(), else nullptr.
nvinfer1::ILogger* currentLogger() noexcept;

//! Log "SwishBias: <where>: <msg>". Falls back to stderr (warnings and errors only) without a TensorRT logger.
void logMessage(Severity severity, char const* where, std::string const& msg) noexcept;

//! Log the exception currently being handled; call only from inside a catch block.
void logCurrentException(char const* where) noexcept;

//! Address of an extern "C" function exported by an already loaded TensorRT runtime library, or nullptr.
//! Looks in the global scope first, then in libnvinfer*.so.10 loaded privately (RTLD_LOCAL, as Python's
//! tensorrt module does), without ever loading a library that is not already resident.
void* findTensorRTSymbol(char const* name) noexcept;

//! Run body() and return its value; on any exception log it and return onError. For noexcept entry points.
template <typename R, typename F>
R guarded(char const* where, R onError, F&& body) noexcept
{
    try
    {
        return body();
    }
    catch (...)
    {
        logCurrentException(where);
    }
    return onError;
}

} // namespace plugin
} // namespace torchtrt_swish
