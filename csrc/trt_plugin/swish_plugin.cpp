#include "swish_plugin.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

#include "plugin_logging.h"
#include "stream_context.h"
#include "swish_layout.h"

namespace torchtrt_swish {
namespace plugin {
namespace {

// ============================================================================ shared checks

using nvinfer1::DataType;
using nvinfer1::Dims;
using nvinfer1::ErrorCode;
using nvinfer1::TensorFormat;

bool isSupportedType(DataType t) noexcept
{
    return t == DataType::kFLOAT || t == DataType::kHALF || t == DataType::kBF16;
}

DType toKernelType(DataType t) noexcept
{
    return t == DataType::kHALF ? DType::kFLOAT16 : (t == DataType::kBF16 ? DType::kBFLOAT16 : DType::kFLOAT32);
}

std::string typeName(DataType t)
{
    switch (t)
    {
    case DataType::kFLOAT: return "kFLOAT";
    case DataType::kHALF: return "kHALF";
    case DataType::kBF16: return "kBF16";
    default: return "DataType(" + std::to_string(static_cast<int32_t>(t)) + ")";
    }
}

bool validRank(Dims const& d) noexcept
{
    return d.nbDims >= 0 && d.nbDims <= Dims::MAX_DIMS;
}

bool sameDims(Dims const& a, Dims const& b) noexcept
{
    return validRank(a) && a.nbDims == b.nbDims && std::equal(a.d, a.d + a.nbDims, b.d);
}

//! "" when the plugin can have this many inputs/outputs, else why not.
std::string checkCounts(int32_t nbInputs, int32_t nbOutputs)
{
    if (nbInputs != kNB_INPUTS)
    {
        return "expected 2 inputs (x, bias), got " + std::to_string(nbInputs);
    }
    if (nbOutputs != 1)
    {
        return "expected 1 output, got " + std::to_string(nbOutputs);
    }
    return {};
}

//! "" when x has a supported type and every tensor (desc(0) .. desc(n - 1): inputs, then outputs) has x's type, the
//! linear format and a valid rank, else why not. The one statement of these rules for configurePlugin and
//! onShapeChange/enqueue.
template <typename Desc>
std::string checkTensors(int32_t n, Desc const& desc)
{
    DataType const t = desc(0).type;
    if (!isSupportedType(t))
    {
        return "x has unsupported type " + typeName(t) + " (supported: kFLOAT, kHALF, kBF16)";
    }
    for (int32_t i = 0; i < n; ++i)
    {
        nvinfer1::PluginTensorDesc const& d = desc(i);
        if (d.type != t)
        {
            return "tensor " + std::to_string(i) + " has type " + typeName(d.type) + ", expected x's type "
                + typeName(t);
        }
        if (d.format != TensorFormat::kLINEAR)
        {
            return "tensor " + std::to_string(i) + " has format " + std::to_string(static_cast<int32_t>(d.format))
                + ", expected kLINEAR";
        }
        if (!validRank(d.dims))
        {
            return "tensor " + std::to_string(i) + " has invalid rank " + std::to_string(d.dims.nbDims);
        }
    }
    return {};
}

//! Build a launch plan from concrete descriptions; "" on success, else why not.
std::string makePlan(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out,
    int32_t nbOutputs, LaunchPlan& plan)
{
    std::string why = checkCounts(nbInputs, nbOutputs);
    if (!why.empty())
    {
        return why;
    }
    if (in == nullptr || out == nullptr)
    {
        return "null tensor descriptions";
    }
    nvinfer1::PluginTensorDesc const& x = in[0];
    why = checkTensors(nbInputs + nbOutputs, [&](int32_t i) -> nvinfer1::PluginTensorDesc const& {
        return i < nbInputs ? in[i] : out[i - nbInputs];
    });
    if (!why.empty())
    {
        return why;
    }
    for (int32_t i = 0; i < nbInputs + nbOutputs; ++i)
    {
        nvinfer1::PluginTensorDesc const& t = i < nbInputs ? in[i] : out[i - nbInputs];
        for (int32_t d = 0; d < t.dims.nbDims; ++d)
        {
            if (t.dims.d[d] < 0)
            {
                return "tensor " + std::to_string(i) + " has unresolved dimensions " + dimsString(t.dims);
            }
        }
    }
    if (!sameDims(out[0].dims, x.dims))
    {
        return "output shape " + dimsString(out[0].dims) + " differs from x shape " + dimsString(x.dims);
    }
    int64_t numel = 1;
    for (int32_t d = 0; d < x.dims.nbDims; ++d)
    {
        int64_t const e = x.dims.d[d];
        if (e != 0 && numel > std::numeric_limits<int64_t>::max() / e)
        {
            return "x shape " + dimsString(x.dims) + " has more elements than int64 can count";
        }
        numel *= e;
    }
    LaunchPlan p;
    p.type = x.type;
    p.xDims = x.dims;
    p.numel = numel;
    p.biasDims = in[1].dims;
    BiasClass const c = classifyBias(x.dims.d, x.dims.nbDims, in[1].dims.d, in[1].dims.nbDims);
    if (!acceptedLayout(c))
    {
        return layoutRejection(c, x.dims.d, x.dims.nbDims, in[1].dims.d, in[1].dims.nbDims);
    }
    p.spec = c.spec;
    p.valid = true;
    plan = p;
    return {};
}

bool planMatches(LaunchPlan const& p, nvinfer1::PluginTensorDesc const* in, nvinfer1::PluginTensorDesc const* out)
    noexcept
{
    return p.valid && in[0].type == p.type && out[0].type == p.type && sameDims(in[0].dims, p.xDims)
        && sameDims(out[0].dims, p.xDims) && in[1].type == p.type && sameDims(in[1].dims, p.biasDims)
        && in[0].format == TensorFormat::kLINEAR && out[0].format == TensorFormat::kLINEAR
        && in[1].format == TensorFormat::kLINEAR;
}

std::string cudaErrorText(cudaError_t e)
{
    return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

} // namespace

// ============================================================================ error reporting

void SwishBiasPlugin::reportRuntimeError(char const* where, ErrorCode code, std::string const& msg) const noexcept
{
    logMessage(Severity::kERROR, where, msg);
    if (mErrorRecorder != nullptr)
    {
        try
        {
            std::string desc = std::string("SwishBias: ") + where + ": " + msg;
            if (desc.size() > nvinfer1::IErrorRecorder::kMAX_DESC_LENGTH)
            {
                desc.resize(nvinfer1::IErrorRecorder::kMAX_DESC_LENGTH);
            }
            mErrorRecorder->reportError(code, desc.c_str());
        }
        catch (...)
        {
        }
    }
}

// ============================================================================ IPluginV3

nvinfer1::IPluginCapability* SwishBiasPlugin::getCapabilityInterface(nvinfer1::PluginCapabilityType type) noexcept
{
    return guarded<nvinfer1::IPluginCapability*>("getCapabilityInterface", nullptr,
        [&]() -> nvinfer1::IPluginCapability*
        {
            switch (type)
            {
            case nvinfer1::PluginCapabilityType::kCORE: return static_cast<nvinfer1::IPluginV3OneCore*>(this);
            case nvinfer1::PluginCapabilityType::kBUILD: return static_cast<nvinfer1::IPluginV3OneBuild*>(this);
            case nvinfer1::PluginCapabilityType::kRUNTIME: return static_cast<nvinfer1::IPluginV3OneRuntime*>(this);
            }
            logMessage(Severity::kERROR, "getCapabilityInterface",
                "unknown PluginCapabilityType " + std::to_string(static_cast<int32_t>(type)));
            return nullptr;
        });
}

nvinfer1::IPluginV3* SwishBiasPlugin::clone() noexcept
{
    return guarded<nvinfer1::IPluginV3*>("clone", nullptr,
        [&]
        {
            // Configuration only: the clone is attached to no context.
            auto* p = new SwishBiasPlugin();
            p->mPlan = mPlan;
            return p;
        });
}

// ============================================================================ IPluginV3OneCore

nvinfer1::AsciiChar const* SwishBiasPlugin::getPluginName() const noexcept
{
    return kPLUGIN_NAME; // constants: nothing here can throw
}

nvinfer1::AsciiChar const* SwishBiasPlugin::getPluginVersion() const noexcept
{
    return kPLUGIN_VERSION;
}

nvinfer1::AsciiChar const* SwishBiasPlugin::getPluginNamespace() const noexcept
{
    return kPLUGIN_NAMESPACE;
}

// ============================================================================ IPluginV3OneBuild

int32_t SwishBiasPlugin::configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
    nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept
{
    return guarded<int32_t>("configurePlugin", 1,
        [&]() -> int32_t
        {
            std::string why = checkCounts(nbInputs, nbOutputs);
            if (why.empty() && (in == nullptr || out == nullptr))
            {
                why = "null tensor descriptions";
            }
            if (why.empty())
            {
                why = checkTensors(nbInputs + nbOutputs, [&](int32_t i) -> nvinfer1::PluginTensorDesc const& {
                    return i < nbInputs ? in[i].desc : out[i - nbInputs].desc;
                });
            }
            if (why.empty() && out[0].desc.dims.nbDims != in[0].desc.dims.nbDims)
            {
                why = "output rank " + std::to_string(out[0].desc.dims.nbDims) + " differs from x rank "
                    + std::to_string(in[0].desc.dims.nbDims);
            }
            if (why.empty())
            {
                LayoutVerdict const v = assessLayout(TensorRanges{in[0].desc.dims, &in[0].min, &in[0].max},
                    TensorRanges{in[1].desc.dims, &in[1].min, &in[1].max});
                // Each dim's range is judged on its own, so a dynamic bias (e.g. full shape [-1, C, H]) would be
                // tried as 1 against a non-1 x although at run time it equals x: for such a bias only reject
                // layouts no profile shape can satisfy (onShapeChange checks the concrete shapes).
                bool biasDynamic = false;
                for (int32_t d = 0; d < in[1].desc.dims.nbDims; ++d)
                {
                    biasDynamic = biasDynamic || in[1].desc.dims.d[d] < 0;
                }
                if (biasDynamic ? !v.anyAccepted : !v.allAccepted)
                {
                    why = v.why;
                    if (v.anyAccepted)
                    {
                        why += " (a shape allowed by the optimization profile: x " + dimsString(in[0].desc.dims)
                            + " in [" + dimsString(in[0].min) + ", " + dimsString(in[0].max) + "])";
                    }
                }
            }
            if (!why.empty())
            {
                logMessage(Severity::kERROR, "configurePlugin", why);
                return 1;
            }
            return 0;
        });
}

int32_t SwishBiasPlugin::getOutputDataTypes(DataType* outputTypes, int32_t nbOutputs, DataType const* inputTypes,
    int32_t nbInputs) const noexcept
{
    return guarded<int32_t>("getOutputDataTypes", 1,
        [&]() -> int32_t
        {
            std::string why = checkCounts(nbInputs, nbOutputs);
            if (why.empty() && (outputTypes == nullptr || inputTypes == nullptr))
            {
                why = "null type arrays";
            }
            if (why.empty() && !isSupportedType(inputTypes[0]))
            {
                why = "x has unsupported type " + typeName(inputTypes[0]) + " (supported: kFLOAT, kHALF, kBF16)";
            }
            if (!why.empty())
            {
                logMessage(Severity::kERROR, "getOutputDataTypes", why);
                return 1;
            }
            // The bias type is settled by supportsFormatCombination: in weakly typed networks TensorRT may cast it.
            outputTypes[0] = inputTypes[0];
            return 0;
        });
}

int32_t SwishBiasPlugin::getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs,
    nvinfer1::DimsExprs const* /*shapeInputs*/, int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t nbOutputs,
    nvinfer1::IExprBuilder& /*exprBuilder*/) noexcept
{
    return guarded<int32_t>("getOutputShapes", 1,
        [&]() -> int32_t
        {
            std::string why = checkCounts(nbInputs, nbOutputs);
            if (why.empty() && nbShapeInputs != 0)
            {
                why = "expected no shape inputs, got " + std::to_string(nbShapeInputs);
            }
            if (why.empty() && (inputs == nullptr || outputs == nullptr))
            {
                why = "null dimension expressions";
            }
            Dims known[2]{};
            for (int32_t i = 0; why.empty() && i < nbInputs; ++i)
            {
                known[i].nbDims = inputs[i].nbDims;
                if (!validRank(known[i]))
                {
                    why = "input " + std::to_string(i) + " has invalid rank " + std::to_string(inputs[i].nbDims);
                    break;
                }
                for (int32_t d = 0; d < inputs[i].nbDims; ++d)
                {
                    nvinfer1::IDimensionExpr const* e = inputs[i].d[d];
                    if (e == nullptr)
                    {
                        why = "input " + std::to_string(i) + " has a null dimension expression";
                        break;
                    }
                    known[i].d[d] = e->isConstant() ? e->getConstantValue() : -1;
                }
            }
            if (why.empty())
            {
                // Reject only what no runtime shape could satisfy; the profile ranges arrive in configurePlugin.
                LayoutVerdict const v = assessLayout(TensorRanges{known[0]}, TensorRanges{known[1]});
                if (!v.anyAccepted)
                {
                    why = v.why;
                }
            }
            if (!why.empty())
            {
                logMessage(Severity::kERROR, "getOutputShapes", why);
                return 1;
            }
            outputs[0].nbDims = inputs[0].nbDims;
            for (int32_t d = 0; d < inputs[0].nbDims; ++d)
            {
                outputs[0].d[d] = inputs[0].d[d];
            }
            return 0;
        });
}

bool SwishBiasPlugin::supportsFormatCombination(
    int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs, int32_t nbOutputs) noexcept
{
    return guarded<bool>("supportsFormatCombination", false,
        [&]
        {
            std::string why = checkCounts(nbInputs, nbOutputs);
            if (why.empty() && inOut == nullptr)
            {
                why = "null tensor descriptions";
            }
            if (why.empty() && (pos < 0 || pos >= nbInputs + nbOutputs))
            {
                why = "position " + std::to_string(pos) + " out of range [0, " + std::to_string(nbInputs + nbOutputs)
                    + ")";
            }
            if (!why.empty())
            {
                logMessage(Severity::kERROR, "supportsFormatCombination", why);
                return false;
            }
            // Decide from inOut[0..pos] only, as TensorRT requires: later entries hold no valid values yet.
            nvinfer1::PluginTensorDesc const& d = inOut[pos].desc;
            if (d.format != TensorFormat::kLINEAR)
            {
                return false;
            }
            return pos == 0 ? isSupportedType(d.type) : d.type == inOut[0].desc.type;
        });
}

int32_t SwishBiasPlugin::getNbOutputs() const noexcept
{
    return 1; // a constant: nothing here can throw
}

size_t SwishBiasPlugin::getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* /*inputs*/, int32_t /*nbInputs*/,
    nvinfer1::DynamicPluginTensorDesc const* /*outputs*/, int32_t /*nbOutputs*/) const noexcept
{
    return 0; // elementwise kernel, no scratch memory; a constant, nothing here can throw
}

// ============================================================================ IPluginV3OneRuntime

int32_t SwishBiasPlugin::onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs,
    nvinfer1::PluginTensorDesc const* out, int32_t nbOutputs) noexcept
{
    return guarded<int32_t>("onShapeChange", 1,
        [&]() -> int32_t
        {
            LaunchPlan plan;
            std::string const why = makePlan(in, nbInputs, out, nbOutputs, plan);
            if (!why.empty())
            {
                mPlan.valid = false;
                reportRuntimeError("onShapeChange", ErrorCode::kINVALID_ARGUMENT, why);
                return 1;
            }
            mPlan = plan;
            return 0;
        });
}

int32_t SwishBiasPlugin::enqueue(nvinfer1::PluginTensorDesc const* inputDesc,
    nvinfer1::PluginTensorDesc const* outputDesc, void const* const* inputs, void* const* outputs, void* /*workspace*/,
    cudaStream_t stream) noexcept
{
    return guarded<int32_t>("enqueue", 1,
        [&]() -> int32_t
        {
            if (!mPlan.valid)
            {
                reportRuntimeError("enqueue", ErrorCode::kINVALID_STATE,
                    "called before a successful onShapeChange");
                return 1;
            }
            if (inputDesc == nullptr || outputDesc == nullptr || inputs == nullptr || outputs == nullptr)
            {
                reportRuntimeError("enqueue", ErrorCode::kINVALID_ARGUMENT, "null descriptions or buffer arrays");
                return 1;
            }
            LaunchPlan plan = mPlan;
            if (!planMatches(plan, inputDesc, outputDesc))
            {
                // Shapes changed without onShapeChange: plan afresh rather than index with stale sizes.
                std::string const why = makePlan(inputDesc, kNB_INPUTS, outputDesc, 1, plan);
                if (!why.empty())
                {
                    reportRuntimeError("enqueue", ErrorCode::kINVALID_ARGUMENT, why);
                    return 1;
                }
            }
            if (plan.numel == 0)
            {
                return 0; // empty tensors may come with null buffers
            }
            void const* x = inputs[0];
            void* y = outputs[0];
            if (x == nullptr || y == nullptr || inputs[1] == nullptr)
            {
                reportRuntimeError("enqueue", ErrorCode::kINVALID_ARGUMENT, "null input or output buffer");
                return 1;
            }
            // A launch must go to the stream's device even when the caller left another device current: launching
            // into a foreign device's stream fails, and any allocation would land on the wrong device.
            StreamContextScope const onStreamContext(stream);
            if (onStreamContext.error() != CUDA_SUCCESS)
            {
                reportRuntimeError("enqueue", ErrorCode::kFAILED_EXECUTION,
                    "cannot make the stream's context current: CUresult " + std::to_string(onStreamContext.error()));
                return 1;
            }
            cudaError_t const e
                = launchSwishForward(toKernelType(plan.type), x, inputs[1], y, plan.numel, plan.spec, stream);
            if (e != cudaSuccess)
            {
                reportRuntimeError("enqueue", ErrorCode::kFAILED_EXECUTION, "kernel launch failed: " + cudaErrorText(e));
                return 1;
            }
            return 0;
        });
}

nvinfer1::IPluginV3* SwishBiasPlugin::attachToContext(nvinfer1::IPluginResourceContext* context) noexcept
{
    return guarded<nvinfer1::IPluginV3*>("attachToContext", nullptr,
        [&]
        {
            auto* p = new SwishBiasPlugin();
            p->mPlan = mPlan;
            p->mErrorRecorder = context != nullptr ? context->getErrorRecorder() : nullptr;
            return p;
        });
}

nvinfer1::PluginFieldCollection const* SwishBiasPlugin::getFieldsToSerialize() noexcept
{
    return &mNoFields; // the plugin has no fields; nothing here can throw
}

} // namespace plugin
} // namespace torchtrt_swish
