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
// The registry and the logger are reached through the layout of the TensorRT major that owns them, told from its
// getInferLibVersion(): 10 (the headers this library is built against) or 11 (trt11_abi.h). Any other (TensorRT-RTX
// 1.x, a future 12) gets no creator on either way in, and one line saying why: TensorRT-RTX 1.7 aborts the process
// right after createPlugin of a plugin it loaded, so its parser must rather not find one.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include <NvInferRuntime.h>

#include "plugin_logging.h"
#include "swish_creator.h"
#include "swish_plugin.h"
#include "trt11_abi.h"

#define TORCHTRT_SWISH_EXPORT extern "C" __attribute__((visibility("default")))

namespace torchtrt_swish {
namespace plugin {
namespace {

using GetRegistryFn = void* (*) ();

constexpr char const* kNO_AUTO_REGISTER_ENV = "TORCHTRT_SWISH_NO_AUTO_REGISTER";

std::atomic<bool> gLoadHookRan{false};
// The registry the load hook registered the creator into (until getCreators hands that over), and its major.
std::atomic<void*> gSelfRegistry{nullptr};
std::atomic<int32_t> gSelfMajor{-1};

//! Whether a SwishBias v1 creator of our namespace is registered. Scans getAllCreators rather than calling
//! getCreator, because TensorRT's getCreator logs an API usage error for every miss. `Registry` is the registry
//! layout of the TensorRT major in the process (nvinfer1::IPluginRegistry or trt11::IPluginRegistry).
template <typename Registry>
bool alreadyRegistered(Registry& registry) noexcept
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

template <typename Registry>
void registerInto(Registry& registry, int32_t major)
{
    if (alreadyRegistered(registry))
    {
        // Another copy of this library (another path) got there first; a second one would only be refused.
        logMessage(Severity::kVERBOSE, "load", "SwishBias is already registered; not registering again");
        return;
    }
    if (registry.registerCreator(creatorInstance(), kPLUGIN_NAMESPACE))
    {
        gSelfMajor.store(major);
        gSelfRegistry.store(&registry);
        logMessage(Severity::kVERBOSE, "load",
            "registered with the plugin registry of TensorRT " + std::to_string(major));
    }
    else
    {
        logMessage(Severity::kWARNING, "load", "the TensorRT plugin registry refused the creator");
    }
}

template <typename Registry>
void withdrawFrom(void* registry)
{
    static_cast<Registry*>(registry)->deregisterCreator(creatorInstance());
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
        int32_t const version = tensorRTVersionAt(sym);
        // Calling into a registry whose layout is unknown would reach arbitrary functions.
        if (version < 0 || !registersWith(version, sym, "load"))
        {
            return;
        }
        int32_t const major = version / 10000;
        void* registry = reinterpret_cast<GetRegistryFn>(sym)();
        if (registry == nullptr)
        {
            return;
        }
        if (major == kMAJOR_10)
        {
            registerInto(*static_cast<nvinfer1::IPluginRegistry*>(registry), major);
        }
        else
        {
            registerInto(*static_cast<trt11::IPluginRegistry*>(registry), major);
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

// Declared with TensorRT 10's type; the object is TensorRT 10's or 11's ILoggerFinder (see plugin_logging.h).
TORCHTRT_SWISH_EXPORT void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept
{
    torchtrt_swish::plugin::setLoggerFinder(finder);
}

TORCHTRT_SWISH_EXPORT nvinfer1::IPluginCreatorInterface* const* getCreators(int32_t& nbCreators) noexcept
{
    using namespace torchtrt_swish::plugin;
    nbCreators = 0;
    try
    {
        static nvinfer1::IPluginCreatorInterface* const creators[] = {&creatorInstance()};
        // The caller is the TensorRT loading the library (IPluginRegistry::loadLibrary); where it cannot be told, the
        // one that handed over its logger finder just before.
        void const* caller = __builtin_return_address(0);
        int32_t const callerVersion = tensorRTVersionAt(caller);
        int32_t const version = callerVersion >= 0 ? callerVersion : loggerFinderVersion();
        if (!registersWith(version, callerVersion >= 0 ? caller : nullptr, "getCreators"))
        {
            return creators;
        }
        if (void* registry = gSelfRegistry.exchange(nullptr))
        {
            // Hand registration over to the caller (see the top of this file).
            if (gSelfMajor.load() == kMAJOR_10)
            {
                withdrawFrom<nvinfer1::IPluginRegistry>(registry);
            }
            else
            {
                withdrawFrom<trt11::IPluginRegistry>(registry);
            }
        }
        nbCreators = 1;
        return creators;
    }
    catch (...)
    {
        logCurrentException("getCreators");
    }
    return nullptr;
}
