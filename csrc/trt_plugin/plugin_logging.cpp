#include "plugin_logging.h"

#include <dlfcn.h>

#include <cstring>

#include <atomic>
#include <cstdio>
#include <new>

namespace torchtrt_swish {
namespace plugin {
namespace {

std::atomic<nvinfer1::ILoggerFinder*> gLoggerFinder{nullptr};

// Runtime libraries that export getPluginRegistry/getLogger in TensorRT 10. Only major 10: the plugin is compiled
// against the 10.x headers, whose interfaces a different major version need not keep.
constexpr char const* kTRT_LIBRARIES[] = {"libnvinfer.so.10", "libnvinfer_lean.so.10", "libnvinfer_dispatch.so.10"};

using GetLoggerFn = nvinfer1::ILogger* (*) ();

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

} // namespace

void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept
{
    gLoggerFinder.store(finder);
}

namespace
{

//! True when sym lives in a TensorRT library: a process-wide lookup of a generic name such as getLogger could
//! otherwise find some other library's function and call it with the wrong signature.
bool fromTensorRT(void* sym) noexcept
{
    Dl_info info{};
    if (dladdr(sym, &info) == 0 || info.dli_fname == nullptr)
    {
        return false;
    }
    char const* base = std::strrchr(info.dli_fname, '/');
    base = base != nullptr ? base + 1 : info.dli_fname;
    return std::strstr(base, "nvinfer") != nullptr;
}

} // namespace

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

nvinfer1::ILogger* currentLogger() noexcept
{
    try
    {
        if (nvinfer1::ILoggerFinder* finder = gLoggerFinder.load())
        {
            // findLogger must run on the thread of the plugin call that logs, so it is never cached.
            if (nvinfer1::ILogger* logger = finder->findLogger())
            {
                return logger;
            }
        }
        if (auto fn = reinterpret_cast<GetLoggerFn>(findTensorRTSymbol("getLogger")))
        {
            return fn();
        }
    }
    catch (...)
    {
    }
    return nullptr;
}

void logMessage(Severity severity, char const* where, std::string const& msg) noexcept
{
    try
    {
        std::string const line = std::string("SwishBias: ") + (where ? where : "?") + ": " + msg;
        if (nvinfer1::ILogger* logger = currentLogger())
        {
            logger->log(severity, line.c_str());
            return;
        }
        if (severity <= Severity::kWARNING)
        {
            std::fprintf(stderr, "[torchtrt_swish %s] %s\n", severityTag(severity), line.c_str());
        }
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
