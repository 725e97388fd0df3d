// SwishBias: y = x * sigmoid(x) + bias as a TensorRT IPluginV3 around the shared CUDA launcher.
//
// Inputs (x, bias), bias broadcast by the layouts the kernel indexes directly (scalar, per-channel on dim 1 or the
// last dim, full); a fixed bias arrives as a constant tensor. The plugin has no fields.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <string>

#include "kernels/bias_layout.h"
#include "kernels/swish_kernel.h"

namespace torchtrt_swish {
namespace plugin {

constexpr char const* kPLUGIN_NAME = "SwishBias";
constexpr char const* kPLUGIN_VERSION = "1";
constexpr char const* kPLUGIN_NAMESPACE = "torchtrt_swish";
constexpr int32_t kNB_INPUTS = 2; //!< x, bias

//! Everything enqueue needs, derived from concrete tensor descriptions (onShapeChange).
struct LaunchPlan
{
    bool valid{false};
    nvinfer1::DataType type{nvinfer1::DataType::kFLOAT};
    nvinfer1::Dims xDims{};
    nvinfer1::Dims biasDims{};
    int64_t numel{0};
    BiasSpec spec{};
};

class SwishBiasPlugin : public nvinfer1::IPluginV3,
                        public nvinfer1::IPluginV3OneCore,
                        public nvinfer1::IPluginV3OneBuild,
                        public nvinfer1::IPluginV3OneRuntime
{
public:
    SwishBiasPlugin() = default;
    SwishBiasPlugin(SwishBiasPlugin const&) = delete;
    SwishBiasPlugin& operator=(SwishBiasPlugin const&) = delete;
    ~SwishBiasPlugin() override = default;

    // IPluginV3
    nvinfer1::IPluginCapability* getCapabilityInterface(nvinfer1::PluginCapabilityType type) noexcept override;
    nvinfer1::IPluginV3* clone() noexcept override;

    // IPluginV3OneCore
    nvinfer1::AsciiChar const* getPluginName() const noexcept override;
    nvinfer1::AsciiChar const* getPluginVersion() const noexcept override;
    nvinfer1::AsciiChar const* getPluginNamespace() const noexcept override;

    // IPluginV3OneBuild
    int32_t configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept override;
    int32_t getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs,
        nvinfer1::DataType const* inputTypes, int32_t nbInputs) const noexcept override;
    int32_t getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs const* shapeInputs,
        int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t nbOutputs,
        nvinfer1::IExprBuilder& exprBuilder) noexcept override;
    bool supportsFormatCombination(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs,
        int32_t nbOutputs) noexcept override;
    int32_t getNbOutputs() const noexcept override;
    size_t getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* outputs, int32_t nbOutputs) const noexcept override;

    // IPluginV3OneRuntime
    int32_t onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out,
        int32_t nbOutputs) noexcept override;
    int32_t enqueue(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) noexcept override;
    nvinfer1::IPluginV3* attachToContext(nvinfer1::IPluginResourceContext* context) noexcept override;
    nvinfer1::PluginFieldCollection const* getFieldsToSerialize() noexcept override;

private:
    //! Report a runtime failure to the logger and, when attached to a context, to its error recorder.
    void reportRuntimeError(char const* where, nvinfer1::ErrorCode code, std::string const& msg) const noexcept;

    LaunchPlan mPlan{};
    nvinfer1::IErrorRecorder* mErrorRecorder{nullptr}; // borrowed from the execution context we are attached to

    nvinfer1::PluginFieldCollection mNoFields{0, nullptr}; //!< what getFieldsToSerialize returns
};

} // namespace plugin
} // namespace torchtrt_swish
