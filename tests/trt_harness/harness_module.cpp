// _trt_harness: drives a TensorRT IPluginV3 library the way TensorRT's builder and runtime do, without TensorRT.
//
// The library is dlopen'ed and reached only through its exported getCreators / setLoggerFinder and the public
// plugin interfaces, cast exactly as TensorRT casts them (interface kind checked, then static_cast). Python gets a
// small object model: Library -> Creator -> Plugin, plus TensorDesc and ResourceContext to feed the calls.
#include <dlfcn.h>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include <NvInferRuntime.h>

#include "harness_support.h"

namespace py = pybind11;
using namespace nvinfer1;

namespace torchtrt_swish {
namespace harness {
namespace {

// ---------------------------------------------------------------- enum names

std::vector<std::pair<char const*, DataType>> const kDATA_TYPES = {
    {"float32", DataType::kFLOAT},
    {"float16", DataType::kHALF},
    {"int8", DataType::kINT8},
    {"int32", DataType::kINT32},
    {"bool", DataType::kBOOL},
    {"uint8", DataType::kUINT8},
    {"fp8", DataType::kFP8},
    {"bfloat16", DataType::kBF16},
    {"int64", DataType::kINT64},
    {"int4", DataType::kINT4},
    {"fp4", DataType::kFP4},
    {"e8m0", DataType::kE8M0},
};

std::vector<std::pair<char const*, TensorFormat>> const kFORMATS = {
    {"linear", TensorFormat::kLINEAR},
    {"chw2", TensorFormat::kCHW2},
    {"hwc8", TensorFormat::kHWC8},
    {"chw4", TensorFormat::kCHW4},
    {"chw16", TensorFormat::kCHW16},
    {"chw32", TensorFormat::kCHW32},
    {"dhwc8", TensorFormat::kDHWC8},
    {"cdhw32", TensorFormat::kCDHW32},
    {"hwc", TensorFormat::kHWC},
    {"dla_linear", TensorFormat::kDLA_LINEAR},
    {"dla_hwc4", TensorFormat::kDLA_HWC4},
    {"hwc16", TensorFormat::kHWC16},
    {"dhwc", TensorFormat::kDHWC},
};

std::vector<std::pair<char const*, PluginFieldType>> const kFIELD_TYPES = {
    {"float16", PluginFieldType::kFLOAT16},
    {"float32", PluginFieldType::kFLOAT32},
    {"float64", PluginFieldType::kFLOAT64},
    {"int8", PluginFieldType::kINT8},
    {"int16", PluginFieldType::kINT16},
    {"int32", PluginFieldType::kINT32},
    {"char", PluginFieldType::kCHAR},
    {"dims", PluginFieldType::kDIMS},
    {"unknown", PluginFieldType::kUNKNOWN},
    {"bfloat16", PluginFieldType::kBF16},
    {"int64", PluginFieldType::kINT64},
    {"fp8", PluginFieldType::kFP8},
    {"int4", PluginFieldType::kINT4},
    {"fp4", PluginFieldType::kFP4},
};

char const* const kSEVERITIES[] = {"internal_error", "error", "warning", "info", "verbose"};

//! Accept a name from table or a raw integer (raw integers let tests pass out-of-range enum values).
template <typename E>
E enumFrom(py::handle h, std::vector<std::pair<char const*, E>> const& table, char const* what)
{
    if (py::isinstance<py::str>(h))
    {
        std::string const s = h.cast<std::string>();
        for (auto const& [name, v] : table)
        {
            if (s == name)
            {
                return v;
            }
        }
        throw py::value_error(std::string("unknown ") + what + " '" + s + "'");
    }
    return static_cast<E>(h.cast<int32_t>());
}

template <typename E>
py::object enumName(E v, std::vector<std::pair<char const*, E>> const& table)
{
    for (auto const& [name, e] : table)
    {
        if (e == v)
        {
            return py::str(name);
        }
    }
    return py::int_(static_cast<int32_t>(v));
}

template <typename E>
py::dict enumDict(std::vector<std::pair<char const*, E>> const& table)
{
    py::dict d;
    for (auto const& [name, v] : table)
    {
        d[name] = static_cast<int32_t>(v);
    }
    return d;
}

size_t fieldBytes(PluginFieldType t, int32_t length)
{
    if (length <= 0)
    {
        return 0;
    }
    auto const n = static_cast<size_t>(length);
    switch (t)
    {
    case PluginFieldType::kFLOAT16:
    case PluginFieldType::kINT16:
    case PluginFieldType::kBF16: return 2 * n;
    case PluginFieldType::kFLOAT32:
    case PluginFieldType::kINT32: return 4 * n;
    case PluginFieldType::kFLOAT64:
    case PluginFieldType::kINT64: return 8 * n;
    case PluginFieldType::kDIMS: return sizeof(Dims) * n;
    case PluginFieldType::kINT4:
    case PluginFieldType::kFP4: return (n + 1) / 2;
    default: return n;
    }
}

py::tuple interfaceTuple(InterfaceInfo const& info)
{
    return py::make_tuple(info.kind != nullptr ? std::string(info.kind) : std::string(), info.major, info.minor);
}

Dims toDims(std::vector<int64_t> const& v, std::optional<int32_t> rank = std::nullopt)
{
    Dims d{};
    if (v.size() > static_cast<size_t>(Dims::MAX_DIMS))
    {
        throw py::value_error("at most 8 dimensions");
    }
    d.nbDims = rank.value_or(static_cast<int32_t>(v.size()));
    for (size_t i = 0; i < v.size(); ++i)
    {
        d.d[i] = v[i];
    }
    return d;
}

// ---------------------------------------------------------------- tensor descriptions

struct TensorDesc
{
    DataType type{DataType::kFLOAT};
    TensorFormat format{TensorFormat::kLINEAR};
    std::vector<int64_t> dims;
    std::optional<std::vector<int64_t>> min;
    std::optional<std::vector<int64_t>> max;
    std::optional<std::vector<int64_t>> opt;
    std::optional<int32_t> rank; // overrides nbDims, to feed invalid ranks
    float scale{-1.0F};

    PluginTensorDesc plain() const
    {
        PluginTensorDesc p{};
        p.dims = toDims(dims, rank);
        p.type = type;
        p.format = format;
        p.scale = scale;
        return p;
    }
    DynamicPluginTensorDesc dynamic() const
    {
        DynamicPluginTensorDesc d{};
        d.desc = plain();
        // Without an explicit profile the bounds repeat the declared dims (-1 stays unknown).
        d.min = toDims(min.value_or(dims));
        d.max = toDims(max.value_or(dims));
        d.opt = toDims(opt.value_or(dims));
        return d;
    }
};

// Filler for positions a call should not read: values no plugin can mistake for a valid description.
DynamicPluginTensorDesc garbageDesc()
{
    DynamicPluginTensorDesc d{};
    d.desc.type = static_cast<DataType>(127);
    d.desc.format = static_cast<TensorFormat>(127);
    d.desc.dims.nbDims = -7;
    return d;
}

std::vector<DynamicPluginTensorDesc> dynamicDescs(std::vector<TensorDesc> const& v, size_t atLeast = 0)
{
    std::vector<DynamicPluginTensorDesc> out;
    for (auto const& t : v)
    {
        out.push_back(t.dynamic());
    }
    while (out.size() < atLeast)
    {
        out.push_back(garbageDesc());
    }
    return out;
}

std::vector<PluginTensorDesc> plainDescs(std::vector<TensorDesc> const& v)
{
    std::vector<PluginTensorDesc> out;
    for (auto const& t : v)
    {
        out.push_back(t.plain());
    }
    return out;
}

template <typename T>
T const* dataOrNull(std::vector<T> const& v)
{
    return v.empty() ? nullptr : v.data();
}

// ---------------------------------------------------------------- library, creator, plugin

struct LibraryState
{
    using GetCreatorsFn = IPluginCreatorInterface* const* (*) (int32_t&);
    using SetLoggerFinderFn = void (*)(ILoggerFinder*);

    std::string path;
    void* handle{nullptr};
    GetCreatorsFn getCreators{nullptr};
    SetLoggerFinderFn setLoggerFinder{nullptr};

    ~LibraryState()
    {
        if (handle != nullptr)
        {
            dlclose(handle);
        }
    }
};

class Plugin;

class Creator
{
public:
    Creator(std::shared_ptr<LibraryState> lib, IPluginCreatorInterface* c)
        : mLib(std::move(lib))
        , mCreator(c)
    {
    }

    py::tuple interfaceInfo() const
    {
        return interfaceTuple(mCreator->getInterfaceInfo());
    }
    int32_t apiLanguage() const
    {
        return static_cast<int32_t>(mCreator->getAPILanguage());
    }
    //! The creator as TensorRT uses it: only after its interface kind says it is a V3One creator.
    IPluginCreatorV3One* v3() const
    {
        InterfaceInfo const info = mCreator->getInterfaceInfo();
        if (info.kind == nullptr || std::strcmp(info.kind, "PLUGIN CREATOR_V3ONE") != 0 || info.major != 1)
        {
            throw std::runtime_error("creator is not an IPluginCreatorV3One (interface "
                + std::string(info.kind ? info.kind : "<null>") + ")");
        }
        return static_cast<IPluginCreatorV3One*>(mCreator);
    }
    std::string name() const
    {
        return str(v3()->getPluginName());
    }
    std::string version() const
    {
        return str(v3()->getPluginVersion());
    }
    std::string pluginNamespace() const
    {
        return str(v3()->getPluginNamespace());
    }
    py::object fieldNames() const
    {
        PluginFieldCollection const* fc = v3()->getFieldNames();
        if (fc == nullptr)
        {
            return py::none();
        }
        py::list out;
        for (int32_t i = 0; i < fc->nbFields; ++i)
        {
            PluginField const& f = fc->fields[i];
            out.append(py::make_tuple(f.name ? py::object(py::str(f.name)) : py::object(py::none()),
                enumName(f.type, kFIELD_TYPES), f.length, f.data != nullptr));
        }
        return std::move(out);
    }

    std::optional<Plugin> create(std::optional<std::string> const& name, std::optional<py::list> const& fields,
        py::handle phase, bool nullCollection, std::optional<int32_t> nbFieldsOverride);

    //! create/clone/attach/delete n times in C++ (fast enough to expose a per-object leak through RSS).
    int64_t churn(int64_t n);

private:
    static std::string str(char const* s)
    {
        return s != nullptr ? std::string(s) : std::string("<null>");
    }
    std::shared_ptr<LibraryState> mLib;
    IPluginCreatorInterface* mCreator;
};

class ResourceContext
{
public:
    explicit ResourceContext(bool withRecorder)
        : mCtx(std::make_shared<HarnessResourceContext>(withRecorder))
    {
    }
    std::vector<std::pair<int32_t, std::string>> errors() const
    {
        return mCtx->recorder().errors();
    }
    std::shared_ptr<HarnessResourceContext> const& get() const
    {
        return mCtx;
    }

private:
    std::shared_ptr<HarnessResourceContext> mCtx;
};

class Plugin
{
public:
    Plugin(std::shared_ptr<LibraryState> lib, IPluginV3* p, std::shared_ptr<HarnessResourceContext> ctx = nullptr)
        : mLib(std::move(lib))
        , mPlugin(p, [](IPluginV3* q) { delete q; })
        , mCtx(std::move(ctx))
    {
    }

    void close()
    {
        mPlugin.reset();
    }
    bool closed() const
    {
        return !mPlugin;
    }
    py::tuple interfaceInfo() const
    {
        return interfaceTuple(live()->getInterfaceInfo());
    }

    //! getCapabilityInterface as TensorRT calls it; returns the capability's interface info, or None for nullptr.
    py::object capability(py::handle type) const
    {
        PluginCapabilityType t;
        if (py::isinstance<py::str>(type))
        {
            std::string const s = type.cast<std::string>();
            t = s == "core" ? PluginCapabilityType::kCORE
                            : (s == "build" ? PluginCapabilityType::kBUILD
                                            : (s == "runtime" ? PluginCapabilityType::kRUNTIME
                                                              : throw py::value_error("unknown capability " + s)));
        }
        else
        {
            t = static_cast<PluginCapabilityType>(type.cast<int32_t>());
        }
        IPluginCapability* cap = live()->getCapabilityInterface(t);
        if (cap == nullptr)
        {
            return py::none();
        }
        return interfaceTuple(cap->getInterfaceInfo());
    }

    // ------------------------------------------------------------------ core
    std::string name() const
    {
        return s(core()->getPluginName());
    }
    std::string version() const
    {
        return s(core()->getPluginVersion());
    }
    std::string pluginNamespace() const
    {
        return s(core()->getPluginNamespace());
    }

    // ------------------------------------------------------------------ build
    int32_t nbOutputs() const
    {
        return build()->getNbOutputs();
    }

    py::tuple outputDataTypes(py::list inputTypes, int32_t nbOutputs, bool nullArrays) const
    {
        std::vector<DataType> in;
        for (auto h : inputTypes)
        {
            in.push_back(enumFrom(h, kDATA_TYPES, "data type"));
        }
        std::vector<DataType> out(static_cast<size_t>(std::max(nbOutputs, 0)), static_cast<DataType>(127));
        int32_t const rc = build()->getOutputDataTypes(nullArrays ? nullptr : out.data(), nbOutputs,
            nullArrays ? nullptr : dataOrNull(in), static_cast<int32_t>(in.size()));
        py::list types;
        for (auto t : out)
        {
            types.append(enumName(t, kDATA_TYPES));
        }
        return py::make_tuple(rc, types);
    }

    //! inputs: per input a list of dims, each an int (a constant; -1 makes an anonymous symbol) or a str (a
    //! named symbol; equal names share one expression). Returns (rc, outputs, all_from_builder).
    py::tuple outputShapes(py::list inputs, int32_t nbOutputs, int32_t nbShapeInputs) const
    {
        ExprBuilder builder;
        std::map<std::string, Expr const*> symbols;
        std::vector<DimsExprs> in;
        int32_t i = 0;
        for (auto inp : inputs)
        {
            DimsExprs e{};
            py::list dims = inp.cast<py::list>();
            if (dims.size() > static_cast<size_t>(Dims::MAX_DIMS))
            {
                throw py::value_error("at most 8 dimensions");
            }
            e.nbDims = static_cast<int32_t>(dims.size());
            int32_t j = 0;
            for (auto d : dims)
            {
                std::string label;
                if (py::isinstance<py::str>(d))
                {
                    label = d.cast<std::string>();
                }
                else if (d.cast<int64_t>() < 0)
                {
                    label = "in" + std::to_string(i) + ".d" + std::to_string(j);
                }
                if (label.empty())
                {
                    e.d[j] = builder.adopt(Expr::constant(d.cast<int64_t>()));
                }
                else
                {
                    auto it = symbols.find(label);
                    if (it == symbols.end())
                    {
                        it = symbols.emplace(label, builder.adopt(Expr::symbol(label))).first;
                    }
                    e.d[j] = it->second;
                }
                ++j;
            }
            in.push_back(e);
            ++i;
        }
        std::vector<DimsExprs> shapeIn(static_cast<size_t>(std::max(nbShapeInputs, 0)));
        std::vector<DimsExprs> out(static_cast<size_t>(std::max(nbOutputs, 0)));
        for (auto& o : out)
        {
            o.nbDims = -1;
            std::fill(std::begin(o.d), std::end(o.d), nullptr);
        }
        int32_t const rc = build()->getOutputShapes(dataOrNull(in), static_cast<int32_t>(in.size()),
            dataOrNull(shapeIn), nbShapeInputs, out.empty() ? nullptr : out.data(), nbOutputs, builder);
        py::list outputs;
        bool allOwned = true;
        for (auto const& o : out)
        {
            if (o.nbDims < 0 || o.nbDims > Dims::MAX_DIMS)
            {
                outputs.append(py::none());
                continue;
            }
            py::list dims;
            for (int32_t k = 0; k < o.nbDims; ++k)
            {
                Expr const* e = builder.own(o.d[k]);
                if (e == nullptr)
                {
                    allOwned = false;
                    dims.append(py::none());
                    continue;
                }
                int64_t v = 0;
                if (e->constantValue(v))
                {
                    dims.append(v);
                }
                else
                {
                    dims.append(e->label());
                }
            }
            outputs.append(dims);
        }
        return py::make_tuple(rc, outputs, allOwned);
    }

    bool supports(int32_t pos, std::vector<TensorDesc> const& descs, int32_t nbInputs, int32_t nbOutputs,
        bool nullDescs) const
    {
        size_t const need = static_cast<size_t>(std::max({nbInputs + nbOutputs, pos + 1, 1}));
        std::vector<DynamicPluginTensorDesc> all = dynamicDescs(descs, need);
        return build()->supportsFormatCombination(pos, nullDescs ? nullptr : all.data(), nbInputs, nbOutputs);
    }

    int32_t configure(std::vector<TensorDesc> const& inputs, std::vector<TensorDesc> const& outputs) const
    {
        auto in = dynamicDescs(inputs);
        auto out = dynamicDescs(outputs);
        return build()->configurePlugin(dataOrNull(in), static_cast<int32_t>(in.size()), dataOrNull(out),
            static_cast<int32_t>(out.size()));
    }

    size_t workspaceSize(std::vector<TensorDesc> const& inputs, std::vector<TensorDesc> const& outputs) const
    {
        auto in = dynamicDescs(inputs);
        auto out = dynamicDescs(outputs);
        return build()->getWorkspaceSize(dataOrNull(in), static_cast<int32_t>(in.size()), dataOrNull(out),
            static_cast<int32_t>(out.size()));
    }

    int32_t nbTactics() const
    {
        return build()->getNbTactics();
    }
    py::tuple validTactics(int32_t n) const
    {
        std::vector<int32_t> t(static_cast<size_t>(std::max(n, 0)), 0);
        int32_t const rc = build()->getValidTactics(t.empty() ? nullptr : t.data(), n);
        return py::make_tuple(rc, t);
    }
    py::object timingCacheId() const
    {
        char const* id = build()->getTimingCacheID();
        return id ? py::object(py::str(id)) : py::object(py::none());
    }
    py::object metadataString() const
    {
        char const* m = build()->getMetadataString();
        return m ? py::object(py::str(m)) : py::object(py::none());
    }
    int32_t formatCombinationLimit() const
    {
        return build()->getFormatCombinationLimit();
    }

    // ------------------------------------------------------------------ runtime
    int32_t setTactic(int32_t t) const
    {
        return runtime()->setTactic(t);
    }

    int32_t onShapeChange(std::vector<TensorDesc> const& inputs, std::vector<TensorDesc> const& outputs) const
    {
        auto in = plainDescs(inputs);
        auto out = plainDescs(outputs);
        return runtime()->onShapeChange(dataOrNull(in), static_cast<int32_t>(in.size()), dataOrNull(out),
            static_cast<int32_t>(out.size()));
    }

    int32_t enqueue(std::vector<TensorDesc> const& inputs, std::vector<TensorDesc> const& outputs,
        std::vector<uintptr_t> const& inputPtrs, std::vector<uintptr_t> const& outputPtrs, uintptr_t workspace,
        uintptr_t stream, bool nullArrays) const
    {
        auto in = plainDescs(inputs);
        auto out = plainDescs(outputs);
        std::vector<void const*> ip;
        for (auto p : inputPtrs)
        {
            ip.push_back(reinterpret_cast<void const*>(p));
        }
        std::vector<void*> op;
        for (auto p : outputPtrs)
        {
            op.push_back(reinterpret_cast<void*>(p));
        }
        IPluginV3OneRuntime* rt = runtime();
        py::gil_scoped_release const release; // lets two Python threads enqueue concurrently
        return rt->enqueue(nullArrays ? nullptr : dataOrNull(in), nullArrays ? nullptr : dataOrNull(out),
            nullArrays ? nullptr : dataOrNull(ip), nullArrays ? nullptr : (op.empty() ? nullptr : op.data()),
            reinterpret_cast<void*>(workspace), reinterpret_cast<cudaStream_t>(stream));
    }

    std::optional<Plugin> attachToContext(std::optional<ResourceContext> const& ctx) const
    {
        std::shared_ptr<HarnessResourceContext> c = ctx ? ctx->get() : nullptr;
        IPluginV3* p = runtime()->attachToContext(c.get());
        if (p == nullptr)
        {
            return std::nullopt;
        }
        return Plugin(mLib, p, c);
    }

    py::object fieldsToSerialize() const
    {
        PluginFieldCollection const* fc = runtime()->getFieldsToSerialize();
        if (fc == nullptr)
        {
            return py::none();
        }
        py::list out;
        for (int32_t i = 0; i < fc->nbFields; ++i)
        {
            PluginField const& f = fc->fields[i];
            py::object data = py::none();
            if (f.data != nullptr)
            {
                data = py::bytes(static_cast<char const*>(f.data), fieldBytes(f.type, f.length));
            }
            out.append(py::make_tuple(f.name ? py::object(py::str(f.name)) : py::object(py::none()),
                enumName(f.type, kFIELD_TYPES), data, f.length));
        }
        return std::move(out);
    }

    std::optional<Plugin> clone() const
    {
        IPluginV3* p = live()->clone();
        if (p == nullptr)
        {
            return std::nullopt;
        }
        return Plugin(mLib, p);
    }

    std::vector<std::pair<int32_t, std::string>> contextErrors() const
    {
        return mCtx ? mCtx->recorder().errors() : std::vector<std::pair<int32_t, std::string>>{};
    }

private:
    static std::string s(char const* v)
    {
        return v != nullptr ? std::string(v) : std::string("<null>");
    }
    IPluginV3* live() const
    {
        if (!mPlugin)
        {
            throw std::runtime_error("plugin is closed");
        }
        return mPlugin.get();
    }
    //! A capability as TensorRT obtains it: ask, check the interface kind and major version, then static_cast.
    template <typename T>
    T* capabilityAs(PluginCapabilityType t, char const* kind) const
    {
        IPluginCapability* cap = live()->getCapabilityInterface(t);
        if (cap == nullptr)
        {
            throw std::runtime_error(std::string("plugin returned no ") + kind + " capability");
        }
        InterfaceInfo const info = cap->getInterfaceInfo();
        if (info.kind == nullptr || std::strcmp(info.kind, kind) != 0 || info.major != 1)
        {
            throw std::runtime_error(std::string("capability is not ") + kind);
        }
        return static_cast<T*>(cap);
    }
    IPluginV3OneCore* core() const
    {
        return capabilityAs<IPluginV3OneCore>(PluginCapabilityType::kCORE, "PLUGIN_V3ONE_CORE");
    }
    IPluginV3OneBuild* build() const
    {
        return capabilityAs<IPluginV3OneBuild>(PluginCapabilityType::kBUILD, "PLUGIN_V3ONE_BUILD");
    }
    IPluginV3OneRuntime* runtime() const
    {
        return capabilityAs<IPluginV3OneRuntime>(PluginCapabilityType::kRUNTIME, "PLUGIN_V3ONE_RUNTIME");
    }

    std::shared_ptr<LibraryState> mLib;
    std::shared_ptr<IPluginV3> mPlugin;
    std::shared_ptr<HarnessResourceContext> mCtx;
};

std::optional<Plugin> Creator::create(std::optional<std::string> const& name, std::optional<py::list> const& fields,
    py::handle phase, bool nullCollection, std::optional<int32_t> nbFieldsOverride)
{
    TensorRTPhase ph;
    if (py::isinstance<py::str>(phase))
    {
        std::string const p = phase.cast<std::string>();
        if (p != "build" && p != "runtime")
        {
            throw py::value_error("phase must be 'build' or 'runtime'");
        }
        ph = p == "build" ? TensorRTPhase::kBUILD : TensorRTPhase::kRUNTIME;
    }
    else
    {
        ph = static_cast<TensorRTPhase>(phase.cast<int32_t>());
    }
    // Field storage outlives the call; each entry: (name or None, type, bytes or None, length).
    std::vector<std::optional<std::string>> names;
    std::vector<std::optional<std::string>> datas;
    std::vector<PluginField> pf;
    if (fields)
    {
        for (auto item : *fields)
        {
            py::tuple t = item.cast<py::tuple>();
            if (t.size() != 4)
            {
                throw py::value_error("a field is (name, type, data, length)");
            }
            names.push_back(t[0].is_none() ? std::nullopt : std::optional<std::string>(t[0].cast<std::string>()));
            datas.push_back(t[2].is_none() ? std::nullopt : std::optional<std::string>(t[2].cast<std::string>()));
        }
        size_t k = 0;
        for (auto item : *fields)
        {
            py::tuple t = item.cast<py::tuple>();
            pf.emplace_back(names[k] ? names[k]->c_str() : nullptr, datas[k] ? datas[k]->data() : nullptr,
                enumFrom(t[1], kFIELD_TYPES, "field type"), t[3].cast<int32_t>());
            ++k;
        }
    }
    PluginFieldCollection fc{};
    fc.nbFields = nbFieldsOverride.value_or(static_cast<int32_t>(pf.size()));
    fc.fields = dataOrNull(pf);
    IPluginV3* p = v3()->createPlugin(name ? name->c_str() : nullptr, nullCollection ? nullptr : &fc, ph);
    if (p == nullptr)
    {
        return std::nullopt;
    }
    return Plugin(mLib, p);
}

int64_t Creator::churn(int64_t n)
{
    IPluginCreatorV3One* c = v3();
    PluginFieldCollection fc{0, nullptr};
    HarnessResourceContext ctx(true);
    int64_t ok = 0;
    for (int64_t i = 0; i < n; ++i)
    {
        std::unique_ptr<IPluginV3> p(c->createPlugin("churn", &fc, i % 2 ? TensorRTPhase::kRUNTIME : TensorRTPhase::kBUILD));
        if (!p)
        {
            continue;
        }
        std::unique_ptr<IPluginV3> q(p->clone());
        auto* rt = static_cast<IPluginV3OneRuntime*>(p->getCapabilityInterface(PluginCapabilityType::kRUNTIME));
        std::unique_ptr<IPluginV3> r(rt != nullptr ? rt->attachToContext(&ctx) : nullptr);
        ok += (q && r) ? 1 : 0;
    }
    return ok;
}

class Library
{
public:
    explicit Library(std::string const& path)
    {
        auto st = std::make_shared<LibraryState>();
        st->path = path;
        // RTLD_LOCAL: like TensorRT's loadLibrary, nothing of the plugin leaks into the global symbol scope.
        st->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (st->handle == nullptr)
        {
            char const* err = dlerror();
            throw std::runtime_error("dlopen(" + path + ") failed: " + (err ? err : "?"));
        }
        st->getCreators = reinterpret_cast<LibraryState::GetCreatorsFn>(dlsym(st->handle, "getCreators"));
        st->setLoggerFinder = reinterpret_cast<LibraryState::SetLoggerFinderFn>(dlsym(st->handle, "setLoggerFinder"));
        if (st->getCreators == nullptr || st->setLoggerFinder == nullptr)
        {
            throw std::runtime_error(path + " does not export getCreators and setLoggerFinder");
        }
        // As loadLibrary does: the logger finder first, so anything logged while creating goes to our logger.
        st->setLoggerFinder(&loggerFinder());
        mState = std::move(st);
    }

    std::vector<Creator> creators() const
    {
        auto const& st = state();
        int32_t n = -1;
        IPluginCreatorInterface* const* list = st->getCreators(n);
        if (list == nullptr || n < 0)
        {
            throw std::runtime_error("getCreators returned no creator list");
        }
        std::vector<Creator> out;
        for (int32_t i = 0; i < n; ++i)
        {
            if (list[i] == nullptr)
            {
                throw std::runtime_error("getCreators returned a null creator");
            }
            out.emplace_back(st, list[i]);
        }
        return out;
    }
    uintptr_t handle() const
    {
        return reinterpret_cast<uintptr_t>(state()->handle);
    }
    std::string path() const
    {
        return state()->path;
    }
    void close()
    {
        mState.reset(); // dlclose once the last creator/plugin made from it is gone
    }

private:
    std::shared_ptr<LibraryState> const& state() const
    {
        if (!mState)
        {
            throw std::runtime_error("library is closed");
        }
        return mState;
    }
    std::shared_ptr<LibraryState> mState;
};

py::list takeLogs()
{
    py::list out;
    for (auto const& [sev, msg] : loggerFinder().logger().take())
    {
        py::object name = sev >= 0 && sev < 5 ? py::object(py::str(kSEVERITIES[sev])) : py::object(py::int_(sev));
        out.append(py::make_tuple(name, msg));
    }
    return out;
}

} // namespace
} // namespace harness
} // namespace torchtrt_swish

// The harness plays TensorRT for the plugin, so like TensorRT's runtime libraries it exports its version: the plugin
// reads getInferLibVersion() from the library that implements the logger finder it is handed, to call the finder
// and its loggers through that major's interface layout (the harness's are the headers it is built against).
extern "C" __attribute__((visibility("default"))) int32_t getInferLibVersion() noexcept
{
    return static_cast<int32_t>(NV_TENSORRT_VERSION);
}

PYBIND11_MODULE(_trt_harness, m)
{
    using namespace torchtrt_swish::harness;
    m.doc() = "TensorRT-free conformance harness for IPluginV3 plugin libraries (dlopen + public interfaces only).";

    m.attr("DATA_TYPES") = enumDict(kDATA_TYPES);
    m.attr("TENSOR_FORMATS") = enumDict(kFORMATS);
    m.attr("FIELD_TYPES") = enumDict(kFIELD_TYPES);
    m.attr("TRT_HEADER_VERSION")
        = py::make_tuple(NV_TENSORRT_MAJOR, NV_TENSORRT_MINOR, NV_TENSORRT_PATCH);
    m.def("take_logs", &takeLogs, "Messages the plugin logged through the harness logger since the last call.");

    py::class_<TensorDesc>(m, "TensorDesc", "A tensor as TensorRT describes it to a plugin.")
        .def(py::init(
                 [](py::handle type, std::vector<int64_t> dims, py::handle format, std::optional<std::vector<int64_t>> min,
                     std::optional<std::vector<int64_t>> max, std::optional<std::vector<int64_t>> opt,
                     std::optional<int32_t> rank)
                 {
                     TensorDesc t;
                     t.type = enumFrom(type, kDATA_TYPES, "data type");
                     t.format = enumFrom(format, kFORMATS, "tensor format");
                     t.dims = std::move(dims);
                     t.min = std::move(min);
                     t.max = std::move(max);
                     t.opt = std::move(opt);
                     t.rank = rank;
                     toDims(t.dims);
                     return t;
                 }),
            py::arg("type"), py::arg("dims"), py::arg("format") = "linear", py::arg("min") = py::none(),
            py::arg("max") = py::none(), py::arg("opt") = py::none(), py::arg("rank") = py::none())
        .def_property_readonly("type", [](TensorDesc const& t) { return enumName(t.type, kDATA_TYPES); })
        .def_property_readonly("format", [](TensorDesc const& t) { return enumName(t.format, kFORMATS); })
        .def_readonly("dims", &TensorDesc::dims)
        .def("__repr__",
            [](TensorDesc const& t)
            {
                return "TensorDesc(" + py::repr(enumName(t.type, kDATA_TYPES)).cast<std::string>() + ", "
                    + py::repr(py::cast(t.dims)).cast<std::string>() + ", "
                    + py::repr(enumName(t.format, kFORMATS)).cast<std::string>() + ")";
            });

    py::class_<ResourceContext>(m, "ResourceContext", "An IPluginResourceContext for attachToContext.")
        .def(py::init<bool>(), py::arg("error_recorder") = true)
        .def("errors", &ResourceContext::errors, "(ErrorCode, description) pairs reported to the error recorder.");

    py::class_<Plugin>(m, "Plugin", "An IPluginV3 object; deleted on close() or garbage collection.")
        .def_property_readonly("interface_info", &Plugin::interfaceInfo)
        .def("capability", &Plugin::capability, py::arg("type"),
            "getCapabilityInterface('core'|'build'|'runtime'|int) -> interface info tuple or None.")
        .def_property_readonly("name", &Plugin::name)
        .def_property_readonly("version", &Plugin::version)
        .def_property_readonly("namespace", &Plugin::pluginNamespace)
        .def("nb_outputs", &Plugin::nbOutputs)
        .def("output_data_types", &Plugin::outputDataTypes, py::arg("input_types"), py::arg("nb_outputs") = 1,
            py::arg("null_arrays") = false)
        .def("output_shapes", &Plugin::outputShapes, py::arg("inputs"), py::arg("nb_outputs") = 1,
            py::arg("nb_shape_inputs") = 0)
        .def("supports", &Plugin::supports, py::arg("pos"), py::arg("descs"), py::arg("nb_inputs"),
            py::arg("nb_outputs") = 1, py::arg("null_descs") = false)
        .def("configure", &Plugin::configure, py::arg("inputs"), py::arg("outputs"))
        .def("workspace_size", &Plugin::workspaceSize, py::arg("inputs"), py::arg("outputs"))
        .def("nb_tactics", &Plugin::nbTactics)
        .def("valid_tactics", &Plugin::validTactics, py::arg("n"))
        .def("timing_cache_id", &Plugin::timingCacheId)
        .def("metadata_string", &Plugin::metadataString)
        .def("format_combination_limit", &Plugin::formatCombinationLimit)
        .def("set_tactic", &Plugin::setTactic, py::arg("tactic"))
        .def("on_shape_change", &Plugin::onShapeChange, py::arg("inputs"), py::arg("outputs"))
        .def("enqueue", &Plugin::enqueue, py::arg("inputs"), py::arg("outputs"), py::arg("input_ptrs"),
            py::arg("output_ptrs"), py::arg("workspace") = 0, py::arg("stream") = 0, py::arg("null_arrays") = false,
            "enqueue with raw device pointers and a cudaStream_t handle (ints); releases the GIL.")
        .def("attach_to_context", &Plugin::attachToContext, py::arg("context") = py::none())
        .def("fields_to_serialize", &Plugin::fieldsToSerialize,
            "getFieldsToSerialize as [(name, type, data bytes, length)], ready for Creator.create(fields=...).")
        .def("clone", &Plugin::clone)
        .def("context_errors", &Plugin::contextErrors)
        .def("close", &Plugin::close)
        .def_property_readonly("closed", &Plugin::closed)
        .def("__enter__", [](Plugin& p) -> Plugin& { return p; })
        .def("__exit__", [](Plugin& p, py::args) { p.close(); });

    py::class_<Creator>(m, "Creator", "An IPluginCreatorInterface returned by getCreators.")
        .def_property_readonly("interface_info", &Creator::interfaceInfo)
        .def_property_readonly("api_language", &Creator::apiLanguage)
        .def_property_readonly("name", &Creator::name)
        .def_property_readonly("version", &Creator::version)
        .def_property_readonly("namespace", &Creator::pluginNamespace)
        .def("field_names", &Creator::fieldNames, "getFieldNames as [(name, type, length, has_data)].")
        .def("create", &Creator::create, py::arg("name") = "swish", py::arg("fields") = py::none(),
            py::arg("phase") = "build", py::arg("null_collection") = false, py::arg("nb_fields") = py::none(),
            "createPlugin; fields are (name, type, data bytes, length) tuples. None when the plugin refuses.")
        .def("churn", &Creator::churn, py::arg("n"),
            "create + clone + attachToContext + delete, n times, in C++.");

    py::class_<Library>(m, "Library", "A plugin library opened with dlopen (RTLD_LOCAL).")
        .def(py::init<std::string const&>(), py::arg("path"))
        .def("creators", &Library::creators)
        .def_property_readonly("handle", &Library::handle)
        .def_property_readonly("path", &Library::path)
        .def("close", &Library::close)
        .def("__enter__", [](Library& l) -> Library& { return l; })
        .def("__exit__", [](Library& l, py::args) { l.close(); });
}
