// The SwishBias creator: no fields, and plugin construction for TensorRT's build and runtime phases.
#pragma once

#include <NvInferRuntime.h>

namespace torchtrt_swish {
namespace plugin {

class SwishBiasCreator : public nvinfer1::IPluginCreatorV3One
{
public:
    SwishBiasCreator() noexcept = default;
    SwishBiasCreator(SwishBiasCreator const&) = delete;
    SwishBiasCreator& operator=(SwishBiasCreator const&) = delete;
    ~SwishBiasCreator() override = default;

    // IPluginCreatorV3One
    nvinfer1::IPluginV3* createPlugin(nvinfer1::AsciiChar const* name, nvinfer1::PluginFieldCollection const* fc,
        nvinfer1::TensorRTPhase phase) noexcept override;
    nvinfer1::PluginFieldCollection const* getFieldNames() noexcept override;
    nvinfer1::AsciiChar const* getPluginName() const noexcept override;
    nvinfer1::AsciiChar const* getPluginVersion() const noexcept override;
    nvinfer1::AsciiChar const* getPluginNamespace() const noexcept override;

private:
    nvinfer1::PluginFieldCollection mNoFields{0, nullptr}; //!< what getFieldNames returns
};

//! The library's single creator. Intentionally never destroyed: a registry may still point at it during exit.
SwishBiasCreator& creatorInstance() noexcept;

} // namespace plugin
} // namespace torchtrt_swish
