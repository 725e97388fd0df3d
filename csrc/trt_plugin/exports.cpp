// The library's C entry points, and self-registration when it is merely dlopen'ed next to TensorRT.
//
// Three ways in, all supported at once:
//  * IPluginRegistry::loadLibrary / trtexec --dynamicPlugins: TensorRT calls setLoggerFinder and getCreators and
//    registers what getCreators returns;
//  * a plain dlopen / ctypes.CDLL into a process that already has TensorRT loaded (Polygraphy --plugins): the load
//    hook below finds TensorRT's getPluginRegistry with dlsym and registers the creator itself;
//  * a process without TensorRT (the conformance harness): the hook finds nothing and does nothing.
// loadLibrary refuses a library whose creators are already registered, and it dlopens the library (running the
// hook) before calling getCreators. So getCreators first withdraws the hook's own registration: whoever calls it
// takes over registering, and the creator is registered exactly once either way.
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include <NvInferRuntime.h>
#include <NvInferVersion.h>

#include "plugin_logging.h"
#include "swish_creator.h"
#include "swish_plugin.h"

#define TORCHTRT_SWISH_EXPORT extern "C" __attribute__((visibility("default")))

namespace torchtrt_swish {
namespace plugin {
namespace {

using GetRegistryFn = nvinfer1::IPluginRegistry* (*) ();
using GetVersionFn = int32_t (*)();

constexpr char const* kNO_AUTO_REGISTER_ENV = "TORCHTRT_SWISH_NO_AUTO_REGISTER";

std::atomic<bool> gLoadHookRan{false};
// The registry the load hook registered the creator into, until getCreators hands that over.
std::atomic<nvinfer1::IPluginRegistry*> gSelfRegistry{nullptr};

//! TensorRT's version from the same library that provides getPluginRegistry; -1 when it cannot be told.
int32_t tensorRTVersionNear(void* getRegistrySymbol) noexcept
{
    Dl_info info{};
    if (dladdr(getRegistrySymbol, &info) == 0 || info.dli_fname == nullptr)
    {
        return -1;
    }
    void* handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr)
    {
        return -1;
    }
    auto fn = reinterpret_cast<GetVersionFn>(dlsym(handle, "getInferLibVersion"));
    int32_t const v = fn != nullptr ? fn() : -1;
    dlclose(handle);
    return v;
}

//! Whether a SwishBias v1 creator of our namespace is registered. Scans getAllCreators rather than calling
//! getCreator, because TensorRT's getCreator logs an API usage error for every miss.
bool alreadyRegistered(nvinfer1::IPluginRegistry& registry) noexcept
{
    int32_t n = 0;
    nvinfer1::IPluginCreatorInterface* const* all = registry.getAllCreators(&n);
    for (int32_t i = 0; all != nullptr && i < n; ++i)
    {
        nvinfer1::IPluginCreatorInterface* c = all[i];
        if (c == nullptr)
        {
            continue;
        }
        nvinfer1::InterfaceInfo const info = c->getInterfaceInfo();
        if (info.kind == nullptr || std::strcmp(info.kind, "PLUGIN CREATOR_V3ONE") != 0)
        {
            continue;
        }
        auto* v3 = static_cast<nvinfer1::IPluginCreatorV3One*>(c);
        char const* name = v3->getPluginName();
        char const* version = v3->getPluginVersion();
        char const* ns = v3->getPluginNamespace();
        if (name != nullptr && version != nullptr && ns != nullptr && std::strcmp(name, kPLUGIN_NAME) == 0
            && std::strcmp(version, kPLUGIN_VERSION) == 0 && std::strcmp(ns, kPLUGIN_NAMESPACE) == 0)
        {
            return true;
        }
    }
    return false;
}

bool autoRegisterDisabled() noexcept
{
    char const* v = std::getenv(kNO_AUTO_REGISTER_ENV);
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

void registerWithLoadedTensorRT() noexcept
{
    try
    {
        if (gLoadHookRan.exchange(true) || autoRegisterDisabled())
        {
            return;
        }
        void* sym = findTensorRTSymbol("getPluginRegistry");
        if (sym == nullptr)
        {
            return; // no TensorRT in this process yet: loadLibrary / getCreators is the way in
        }
        int32_t const version = tensorRTVersionNear(sym);
        if (version < 0 || version / 10000 != NV_TENSORRT_MAJOR)
        {
            // An unknown version is refused too: the registry's layout is only known for our major version.
            logMessage(Severity::kWARNING, "load",
                "not registering: the loaded TensorRT is version "
                    + (version < 0 ? std::string("unknown") : std::to_string(version))
                    + ", this plugin was built for major version " + std::to_string(NV_TENSORRT_MAJOR));
            return;
        }
        nvinfer1::IPluginRegistry* registry = reinterpret_cast<GetRegistryFn>(sym)();
        if (registry == nullptr)
        {
            return;
        }
        if (alreadyRegistered(*registry))
        {
            // Another copy of this library (another path) got there first; a second one would only be refused.
            logMessage(Severity::kVERBOSE, "load", "SwishBias is already registered; not registering again");
            return;
        }
        if (registry->registerCreator(creatorInstance(), kPLUGIN_NAMESPACE))
        {
            gSelfRegistry.store(registry);
            logMessage(Severity::kVERBOSE, "load", "registered with the TensorRT plugin registry");
        }
        else
        {
            logMessage(Severity::kWARNING, "load", "the TensorRT plugin registry refused the creator");
        }
    }
    catch (...)
    {
        logCurrentException("load");
    }
}

// Runs when the library is loaded (dlopen, ctypes.CDLL, loadLibrary). Never throws.
__attribute__((constructor)) void onLibraryLoad() noexcept
{
    registerWithLoadedTensorRT();
}

} // namespace
} // namespace plugin
} // namespace torchtrt_swish

TORCHTRT_SWISH_EXPORT void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept
{
    torchtrt_swish::plugin::setLoggerFinder(finder);
}

TORCHTRT_SWISH_EXPORT nvinfer1::IPluginCreatorInterface* const* getCreators(int32_t& nbCreators) noexcept
{
    using namespace torchtrt_swish::plugin;
    try
    {
        static nvinfer1::IPluginCreatorInterface* const creators[] = {&creatorInstance()};
        if (nvinfer1::IPluginRegistry* registry = gSelfRegistry.exchange(nullptr))
        {
            // Hand registration over to the caller (see the top of this file).
            registry->deregisterCreator(creatorInstance());
        }
        nbCreators = 1;
        return creators;
    }
    catch (...)
    {
        logCurrentException("getCreators");
    }
    nbCreators = 0;
    return nullptr;
}
