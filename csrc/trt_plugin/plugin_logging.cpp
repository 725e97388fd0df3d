#include "plugin_logging.h"

#include <dlfcn.h>

#include <cstring>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <new>

#include "trt11_abi.h"

namespace torchtrt_swish {
namespace plugin {
namespace {

// The finder TensorRT handed over, and the major version whose layout it (and the loggers it returns) follows.
std::mutex gFinderMutex;
void* gLoggerFinder{nullptr};
int32_t gFinderMajor{-1};

int32_t gFinderVersion{-1};

// The TensorRT version whose refusal was last logged: one line per process, however many entry points refuse it.
std::atomic<int32_t> gRefusedVersion{-1};

// Runtime libraries that export getPluginRegistry/getLogger: those of the majors this library knows the layouts of,
// and TensorRT-RTX's, found only to be told apart (its version is checked before anything of it is called).
constexpr char const* kTRT_LIBRARIES[] = {"libnvinfer.so.10", "libnvinfer_lean.so.10", "libnvinfer_dispatch.so.10",
    "libnvinfer.so.11", "libnvinfer_lean.so.11", "libnvinfer_dispatch.so.11", "libtensorrt_rtx.so.1"};

using GetLoggerFn = void* (*) ();
using GetVersionFn = int32_t (*)();

char const* severityTag(Severity s) noexcept
{
    switch (s)
    {
    case Severity::kINTERNAL_ERROR: return "INTERNAL_ERROR";
    case Severity::kERROR: return "ERROR";
    case Severity::kWARNING: return "WARNING";
    case Severity::kINFO: return "INFO";
    case Severity::kVERBOSE: return "VERBOSE";
    }
    return "?";
}

void toStderr(Severity severity, std::string const& line) noexcept
{
    if (severity <= Severity::kWARNING)
    {
        std::fprintf(stderr, "[torchtrt_swish %s] %s\n", severityTag(severity), line.c_str());
    }
}

//! The file name (without its folder) of the loaded library containing `address`, or nullptr.
char const* libraryFileName(void const* address) noexcept
{
    Dl_info info{};
    if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr)
    {
        return nullptr;
    }
    char const* base = std::strrchr(info.dli_fname, '/');
    return base != nullptr ? base + 1 : info.dli_fname;
}

//! True when sym lives in a TensorRT library: a process-wide lookup of a generic name such as getLogger could
//! otherwise find some other library's function and call it with the wrong signature.
bool fromTensorRT(void* sym) noexcept
{
    char const* base = libraryFileName(sym);
    return base != nullptr && (std::strstr(base, "nvinfer") != nullptr || std::strstr(base, "tensorrt_rtx") != nullptr);
}

//! The finder's logger viewed through the layout of the finder's major.
LoggerRef findLogger(void* finder, int32_t major)
{
    if (major == kMAJOR_10)
    {
        return {static_cast<nvinfer1::ILoggerFinder*>(finder)->findLogger(), major};
    }
    if (major == kMAJOR_11)
    {
        return {static_cast<trt11::ILoggerFinder*>(finder)->findLogger(), major};
    }
    return {};
}

} // namespace

bool knownMajor(int32_t major) noexcept
{
    return major == kMAJOR_10 || major == kMAJOR_11;
}

int32_t tensorRTVersionAt(void const* address) noexcept
{
    Dl_info info{};
    if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr)
    {
        return -1;
    }
    void* handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr)
    {
        dlerror();
        return -1;
    }
    auto fn = reinterpret_cast<GetVersionFn>(dlsym(handle, "getInferLibVersion"));
    int32_t const v = fn != nullptr ? fn() : -1;
    dlerror();
    dlclose(handle);
    return v;
}

void setLoggerFinder(void* finder) noexcept
{
    int32_t version = -1;
    int32_t major = -1;
    if (finder != nullptr)
    {
        // Every finder is a polymorphic object: its first word points into the vtable of the library defining it.
        version = tensorRTVersionAt(*static_cast<void* const*>(finder));
        major = version < 0 ? -1 : version / 10000;
    }
    std::lock_guard<std::mutex> const lock(gFinderMutex);
    gLoggerFinder = knownMajor(major) ? finder : nullptr;
    gFinderMajor = major;
    gFinderVersion = version;
}

int32_t loggerFinderVersion() noexcept
{
    std::lock_guard<std::mutex> const lock(gFinderMutex);
    return gFinderVersion;
}

bool registersWith(int32_t version, void const* address, char const* where) noexcept
{
    if (version < 0 || knownMajor(version / 10000))
    {
        return true;
    }
    if (gRefusedVersion.exchange(version) != version)
    {
        try
        {
            char const* file = libraryFileName(address);
            // Through stderr only: the loggers of that TensorRT have layouts this library does not know either.
            toStderr(Severity::kWARNING,
                std::string("SwishBias: ") + where + ": not registering with the TensorRT of version "
                    + std::to_string(version) + (file != nullptr ? std::string(" (") + file + ")" : std::string())
                    + ": this library knows the plugin and logger layouts of TensorRT 10 and 11 only; TensorRT-RTX "
                      "and other majors are not supported");
        }
        catch (...)
        {
            // Out of memory while formatting: refusing is what matters.
        }
    }
    return false;
}

void* findTensorRTSymbol(char const* name) noexcept
{
    try
    {
        if (void* sym = dlsym(RTLD_DEFAULT, name); sym != nullptr && fromTensorRT(sym))
        {
            return sym;
        }
        dlerror();
        for (char const* lib : kTRT_LIBRARIES)
        {
            // RTLD_NOLOAD: only a library some other component already loaded; this never pulls TensorRT in.
            void* handle = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
            if (handle == nullptr)
            {
                dlerror(); // "not loaded" is the normal answer; leave no stale error for the host to find
                continue;
            }
            void* sym = dlsym(handle, name);
            // Dropping our reference keeps the symbol valid: the library stays loaded by whoever loaded it.
            dlclose(handle);
            if (sym != nullptr)
            {
                return sym;
            }
        }
    }
    catch (...)
    {
    }
    return nullptr;
}

LoggerRef currentLogger() noexcept
{
    try
    {
        void* finder = nullptr;
        int32_t major = -1;
        {
            std::lock_guard<std::mutex> const lock(gFinderMutex);
            finder = gLoggerFinder;
            major = gFinderMajor;
        }
        if (finder != nullptr)
        {
            // findLogger must run on the thread of the plugin call that logs, so it is never cached.
            if (LoggerRef const found = findLogger(finder, major); found.logger != nullptr)
            {
                return found;
            }
        }
        if (void* sym = findTensorRTSymbol("getLogger"))
        {
            int32_t const version = tensorRTVersionAt(sym);
            LoggerRef const global{reinterpret_cast<GetLoggerFn>(sym)(), version < 0 ? -1 : version / 10000};
            if (global.logger != nullptr && knownMajor(global.major))
            {
                return global;
            }
        }
    }
    catch (...)
    {
    }
    return {};
}

void logMessage(Severity severity, char const* where, std::string const& msg) noexcept
{
    try
    {
        std::string const line = std::string("SwishBias: ") + (where ? where : "?") + ": " + msg;
        LoggerRef const logger = currentLogger();
        if (logger.major == kMAJOR_10)
        {
            static_cast<nvinfer1::ILogger*>(logger.logger)->log(severity, line.c_str());
            return;
        }
        if (logger.major == kMAJOR_11)
        {
            static_cast<trt11::ILogger*>(logger.logger)->log(severity, line.c_str());
            return;
        }
        toStderr(severity, line);
    }
    catch (...)
    {
        // Out of memory while formatting: nothing sensible is left to report with.
    }
}

void logCurrentException(char const* where) noexcept
{
    try
    {
        throw;
    }
    catch (std::bad_alloc const&)
    {
        logMessage(Severity::kERROR, where, "out of host memory");
    }
    catch (std::exception const& e)
    {
        logMessage(Severity::kERROR, where, std::string("unexpected exception: ") + e.what());
    }
    catch (...)
    {
        logMessage(Severity::kERROR, where, "unexpected non-standard exception");
    }
}

} // namespace plugin
} // namespace torchtrt_swish
