#include "swish_creator.h"

#include <new>
#include <string>

#include "plugin_logging.h"
#include "swish_plugin.h"

namespace torchtrt_swish {
namespace plugin {
namespace {

//! Warn about every field in fc: SwishBias has none, so they change nothing (TensorRT's field-less creators ignore
//! their collection; the warning names what a caller expected to matter, e.g. a former scalar `bias` field).
void warnAboutFields(std::string const& layer, nvinfer1::PluginFieldCollection const* fc)
{
    if (fc == nullptr || fc->nbFields == 0)
    {
        return;
    }
    if (fc->nbFields < 0 || fc->fields == nullptr)
    {
        logMessage(Severity::kWARNING, "createPlugin",
            layer + ": ignoring a malformed field collection (" + std::to_string(fc->nbFields)
                + " fields, array " + (fc->fields == nullptr ? "null" : "set") + "); SwishBias has no fields");
        return;
    }
    for (int32_t i = 0; i < fc->nbFields; ++i)
    {
        char const* name = fc->fields[i].name;
        logMessage(Severity::kWARNING, "createPlugin",
            layer + ": ignoring field '" + (name != nullptr ? std::string(name) : std::string("<no name>"))
                + "': SwishBias has no fields (its bias is the second input tensor)");
    }
}

} // namespace

nvinfer1::IPluginV3* SwishBiasCreator::createPlugin(
    nvinfer1::AsciiChar const* name, nvinfer1::PluginFieldCollection const* fc, nvinfer1::TensorRTPhase phase) noexcept
{
    return guarded<nvinfer1::IPluginV3*>("createPlugin", nullptr,
        [&]() -> nvinfer1::IPluginV3*
        {
            std::string const layer = name != nullptr ? std::string(name) : std::string("<unnamed>");
            if (phase != nvinfer1::TensorRTPhase::kBUILD && phase != nvinfer1::TensorRTPhase::kRUNTIME)
            {
                logMessage(Severity::kERROR, "createPlugin",
                    layer + ": unknown TensorRTPhase " + std::to_string(static_cast<int32_t>(phase)));
                return nullptr;
            }
            warnAboutFields(layer, fc);
            return new SwishBiasPlugin();
        });
}

nvinfer1::PluginFieldCollection const* SwishBiasCreator::getFieldNames() noexcept
{
    return &mNoFields; // the plugin has no fields; nothing here can throw
}

nvinfer1::AsciiChar const* SwishBiasCreator::getPluginName() const noexcept
{
    return kPLUGIN_NAME; // constants: nothing here can throw
}

nvinfer1::AsciiChar const* SwishBiasCreator::getPluginVersion() const noexcept
{
    return kPLUGIN_VERSION;
}

nvinfer1::AsciiChar const* SwishBiasCreator::getPluginNamespace() const noexcept
{
    return kPLUGIN_NAMESPACE;
}

SwishBiasCreator& creatorInstance() noexcept
{
    // Placement-new into static storage: constructed on first use, never destroyed, so a registry that still
    // holds the pointer while the process exits never sees a destroyed object. The constructor cannot throw
    // (it has only a plain struct).
    alignas(SwishBiasCreator) static unsigned char storage[sizeof(SwishBiasCreator)];
    static SwishBiasCreator* const instance = new (storage) SwishBiasCreator();
    return *instance;
}

} // namespace plugin
} // namespace torchtrt_swish
