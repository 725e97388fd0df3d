// Logging and TensorRT symbol lookup for the SwishBias plugin library.
//
// The library has no link-time dependency on libnvinfer, so everything it needs from TensorRT at run time (the
// logger, the plugin registry) is either handed over (setLoggerFinder) or looked up with dlsym in the process.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <exception>
#include <string>

namespace torchtrt_swish {
namespace plugin {

using Severity = nvinfer1::ILogger::Severity;

//! TensorRT major versions whose interface layouts this library knows (10: the headers it is built against;
//! 11: trt11_abi.h).
constexpr int32_t kMAJOR_10 = 10;
constexpr int32_t kMAJOR_11 = 11;

//! Whether this library can call into objects of TensorRT `major`.
bool knownMajor(int32_t major) noexcept;

//! getInferLibVersion() (e.g. 110400 for 11.4.0, 10701 for TensorRT-RTX 1.7.1) of the loaded library that contains
//! `address` (an exported function, a return address, or an object's vtable); -1 when it cannot be told.
int32_t tensorRTVersionAt(void const* address) noexcept;

//! Whether the library may register with (and call into) the TensorRT of `version` found at `address`: yes for
//! majors 10 and 11, and for -1 (no TensorRT to tell, e.g. a host calling getCreators itself). Any other (TensorRT-RTX
//! 1.x, a future 12) is refused with one warning line naming it, once per process and version.
bool registersWith(int32_t version, void const* address, char const* where) noexcept;

//! The version of the TensorRT whose finder setLoggerFinder was last handed (also one it refused to use); -1 if none.
int32_t loggerFinderVersion() noexcept;

//! A logger together with the TensorRT major whose ILogger layout it follows.
struct LoggerRef
{
    void* logger{nullptr};
    int32_t major{-1};
};

//! Store the finder TensorRT passes to setLoggerFinder (nullptr clears it). Its layout, and that of the loggers it
//! returns, is the one of the TensorRT that implements it, told from the library holding its vtable. A finder of
//! an unknown major is not used (getCreators, which loadLibrary calls next, says why). Thread-safe.
void setLoggerFinder(void* finder) noexcept;

//! The logger to use right now: the finder's logger, else TensorRT's global getLogger(), else none.
LoggerRef currentLogger() noexcept;

//! Log "SwishBias: <where>: <msg>" through TensorRT's logger; falls back to stderr (warnings and errors only)
//! without a TensorRT logger of a known major.
void logMessage(Severity severity, char const* where, std::string const& msg) noexcept;

//! Log the exception currently being handled; call only from inside a catch block.
void logCurrentException(char const* where) noexcept;

//! Address of an extern "C" function exported by an already loaded TensorRT runtime library, or nullptr.
//! Looks in the global scope first, then in libnvinfer*.so.10 / .so.11 loaded privately (RTLD_LOCAL, as Python's
//! tensorrt modules do), without ever loading a library that is not already resident.
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
