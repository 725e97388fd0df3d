// The TensorRT 11 layouts of the interfaces this library calls into whose virtual-slot order differs from the
// TensorRT 10 headers it is built against.
//
// Declared from TensorRT 11's public headers (NVIDIA/TensorRT v11.0 and v11.1, include/NvInferRuntime.h and
// include/NvInferRuntimeCommon.h), and only as far as the last method called here: the slot order is all that
// matters, because these types are never instantiated; a pointer that a TensorRT 11 runtime hands over is viewed
// through them. What changed from 10.x, and why calling through the 10.x types would reach the wrong function:
//  * ILogger and ILoggerFinder derive from IVersionedInterface in 11 (getAPILanguage, getInterfaceInfo and the
//    destructor come first), so log() and findLogger() moved from slot 0 to slot 4;
//  * IPluginRegistry lost the deprecated registerCreator(IPluginCreator&), getPluginCreatorList, getPluginCreator
//    and deregisterCreator(IPluginCreator const&), and its destructor is now declared first.
// Everything else the plugin touches (IPluginV3 and its capabilities, IPluginCreatorV3One, IErrorRecorder,
// IPluginResourceContext, IDimensionExpr, the plugin structs and enums) kept its layout: 11.1 only renamed
// parameters or turned defaulted destructors into pure ones with a default definition.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>

namespace torchtrt_swish {
namespace plugin {
namespace trt11 {

//! v_1_0::ILogger in TensorRT 11: IVersionedInterface's slots, then log. Severity values are unchanged.
class ILogger : public nvinfer1::IVersionedInterface
{
public:
    virtual void log(nvinfer1::ILogger::Severity severity, char const* msg) noexcept = 0;

protected:
    ~ILogger() noexcept override = default;
};

//! v_1_0::ILoggerFinder in TensorRT 11: IVersionedInterface's slots, then findLogger.
class ILoggerFinder : public nvinfer1::IVersionedInterface
{
public:
    virtual ILogger* findLogger() = 0;

protected:
    ~ILoggerFinder() noexcept override = default;
};

//! IPluginRegistry in TensorRT 11, up to deregisterCreator (the last method this library calls).
class IPluginRegistry
{
public:
    IPluginRegistry(IPluginRegistry const&) = delete;
    IPluginRegistry& operator=(IPluginRegistry const&) = delete;

protected:
    IPluginRegistry() = default;
    virtual ~IPluginRegistry() noexcept = default;

public:
    virtual void setErrorRecorder(nvinfer1::IErrorRecorder* recorder) noexcept = 0;
    virtual nvinfer1::IErrorRecorder* getErrorRecorder() const noexcept = 0;
    virtual bool isParentSearchEnabled() const = 0;
    virtual void setParentSearchEnabled(bool enabled) = 0;
    virtual void* loadLibrary(char const* pluginPath) noexcept = 0;
    virtual void deregisterLibrary(void* handle) noexcept = 0;
    virtual bool registerCreator(nvinfer1::IPluginCreatorInterface& creator, char const* pluginNamespace) noexcept = 0;
    virtual nvinfer1::IPluginCreatorInterface* const* getAllCreators(int32_t* numCreators) const noexcept = 0;
    virtual nvinfer1::IPluginCreatorInterface* getCreator(
        char const* pluginName, char const* pluginVersion, char const* pluginNamespace) noexcept = 0;
    virtual bool deregisterCreator(nvinfer1::IPluginCreatorInterface const& creator) noexcept = 0;
};

} // namespace trt11
} // namespace plugin
} // namespace torchtrt_swish
