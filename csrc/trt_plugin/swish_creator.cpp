#include "swish_creator.h"

#include <cstring>
#include <new>
#include <string>

#include "plugin_logging.h"
#include "swish_plugin.h"

namespace torchtrt_swish {
namespace plugin {
namespace {

//! Parse a field collection into the field bias; "" on success, else why it is rejected.
std::string parseFields(nvinfer1::PluginFieldCollection const* fc, float& bias)
{
    bias = 0.0F; // the field is optional
    if (fc == nullptr)
    {
        return {}; // no collection means no fields: every field has a default
    }
    if (fc->nbFields < 0)
    {
        return "negative field count " + std::to_string(fc->nbFields);
    }
    if (fc->nbFields > 0 && fc->fields == nullptr)
    {
        return std::to_string(fc->nbFields) + " fields announced but the field array is null";
    }
    bool seenBias = false;
    for (int32_t i = 0; i < fc->nbFields; ++i)
    {
        nvinfer1::PluginField const& f = fc->fields[i];
        if (f.name == nullptr)
        {
            return "field " + std::to_string(i) + " has no name";
        }
        if (std::strcmp(f.name, kFIELD_BIAS) != 0)
        {
            return "unknown field '" + std::string(f.name) + "' (known fields: '" + kFIELD_BIAS + "')";
        }
        if (seenBias)
        {
            return "field 'bias' given more than once";
        }
        seenBias = true;
        if (f.type != nvinfer1::PluginFieldType::kFLOAT32)
        {
            return "field 'bias' must have type kFLOAT32, got PluginFieldType "
                + std::to_string(static_cast<int32_t>(f.type));
        }
        if (f.length != 1)
        {
            return "field 'bias' must have length 1, got " + std::to_string(f.length);
        }
        if (f.data == nullptr)
        {
            return "field 'bias' has no data";
        }
        std::memcpy(&bias, f.data, sizeof(float)); // no alignment assumption about the caller's buffer
    }
    return {};
}

} // namespace

SwishBiasCreator::SwishBiasCreator() noexcept
{
    // Advertised with null data: this describes the field, it is not a value.
    mFieldNames[0] = nvinfer1::PluginField(kFIELD_BIAS, nullptr, nvinfer1::PluginFieldType::kFLOAT32, 1);
    mFieldCollection.nbFields = 1;
    mFieldCollection.fields = mFieldNames;
}

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
            float bias = 0.0F;
            std::string const why = parseFields(fc, bias);
            if (!why.empty())
            {
                logMessage(Severity::kERROR, "createPlugin", layer + ": " + why);
                return nullptr;
            }
            return new SwishBiasPlugin(bias);
        });
}

nvinfer1::PluginFieldCollection const* SwishBiasCreator::getFieldNames() noexcept
{
    return &mFieldCollection; // built in the constructor: nothing here can throw
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
    // (it only fills two plain structs).
    alignas(SwishBiasCreator) static unsigned char storage[sizeof(SwishBiasCreator)];
    static SwishBiasCreator* const instance = new (storage) SwishBiasCreator();
    return *instance;
}

} // namespace plugin
} // namespace torchtrt_swish
