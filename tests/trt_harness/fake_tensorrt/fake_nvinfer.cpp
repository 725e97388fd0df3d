// A stand-in for the few libnvinfer.so.10 entry points a plugin library may look up at load time
// (getPluginRegistry, getLogger, getInferLibVersion), built with soname libnvinfer.so.10.
//
// It lets the tests check the plugin's self-registration without TensorRT: load this first (RTLD_LOCAL as Python's
// tensorrt module does, or RTLD_GLOBAL), then the plugin, then inspect the recording registry through the
// fake_* C functions. fake_load_library mimics IPluginRegistry::loadLibrary: dlopen, setLoggerFinder, getCreators,
// register each creator, and fail when one is already registered. Only the registry methods a plugin library
// could reasonably call do real work; the rest answer "nothing".
#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <NvInferRuntime.h>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using namespace nvinfer1;

struct Entry
{
    IPluginCreatorInterface* creator;
    std::string ns;
};

class FakeLogger : public ILogger
{
public:
    void log(Severity severity, AsciiChar const* msg) noexcept override
    {
        std::lock_guard<std::mutex> const lock(mMutex);
        mMessages.emplace_back(static_cast<int32_t>(severity), msg != nullptr ? msg : "");
    }
    std::mutex mMutex;
    std::vector<std::pair<int32_t, std::string>> mMessages;
};

class FakeFinder : public ILoggerFinder
{
public:
    ILogger* findLogger() override
    {
        return nullptr; // so the plugin falls back to getLogger(), which the tests then observe
    }
};

FakeLogger& fakeLogger()
{
    static auto* l = new FakeLogger();
    return *l;
}

char const* creatorName(IPluginCreatorInterface* c)
{
    return static_cast<IPluginCreatorV3One*>(c)->getPluginName();
}
char const* creatorVersion(IPluginCreatorInterface* c)
{
    return static_cast<IPluginCreatorV3One*>(c)->getPluginVersion();
}

bool isV3One(IPluginCreatorInterface* c)
{
    InterfaceInfo const i = c->getInterfaceInfo();
    return i.kind != nullptr && std::strcmp(i.kind, "PLUGIN CREATOR_V3ONE") == 0;
}

class FakeRegistry : public IPluginRegistry
{
public:
    // ------------------------------------------------------------------ what plugin libraries use
    bool registerCreator(IPluginCreatorInterface& creator, AsciiChar const* const pluginNamespace) noexcept override
    {
        std::lock_guard<std::mutex> const lock(mMutex);
        ++mRegisterCalls;
        if (!isV3One(&creator) || findLocked(creatorName(&creator), creatorVersion(&creator), pluginNamespace))
        {
            return false;
        }
        mEntries.push_back(Entry{&creator, pluginNamespace != nullptr ? pluginNamespace : ""});
        return true;
    }
    IPluginCreatorInterface* getCreator(AsciiChar const* const pluginName, AsciiChar const* const pluginVersion,
        AsciiChar const* const pluginNamespace) noexcept override
    {
        IPluginCreatorInterface* c = nullptr;
        {
            std::lock_guard<std::mutex> const lock(mMutex);
            c = findLocked(pluginName, pluginVersion, pluginNamespace);
        }
        if (c == nullptr)
        {
            // TensorRT logs an API usage error for every miss; so does the stand-in, to keep plugins honest.
            fakeLogger().log(ILogger::Severity::kERROR, "IPluginRegistry::getCreator: Cannot find plugin");
        }
        return c;
    }
    bool deregisterCreator(IPluginCreatorInterface const& creator) noexcept override
    {
        std::lock_guard<std::mutex> const lock(mMutex);
        ++mDeregisterCalls;
        for (auto it = mEntries.begin(); it != mEntries.end(); ++it)
        {
            if (it->creator == &creator)
            {
                mEntries.erase(it);
                return true;
            }
        }
        return false;
    }
    IPluginCreatorInterface* const* getAllCreators(int32_t* const numCreators) const noexcept override
    {
        std::lock_guard<std::mutex> const lock(mMutex);
        mList.clear();
        for (auto const& e : mEntries)
        {
            mList.push_back(e.creator);
        }
        if (numCreators != nullptr)
        {
            *numCreators = static_cast<int32_t>(mList.size());
        }
        return mList.empty() ? nullptr : mList.data();
    }
    PluginLibraryHandle loadLibrary(AsciiChar const* pluginPath) noexcept override
    {
        void* h = dlopen(pluginPath, RTLD_LAZY | RTLD_LOCAL);
        if (h == nullptr)
        {
            return nullptr;
        }
        using GetCreators = IPluginCreatorInterface* const* (*) (int32_t&);
        using SetFinder = void (*)(ILoggerFinder*);
        auto getCreators = reinterpret_cast<GetCreators>(dlsym(h, "getCreators"));
        auto setFinder = reinterpret_cast<SetFinder>(dlsym(h, "setLoggerFinder"));
        if (getCreators == nullptr || setFinder == nullptr)
        {
            dlclose(h);
            return nullptr;
        }
        static FakeFinder finder;
        setFinder(&finder);
        int32_t n = 0;
        IPluginCreatorInterface* const* list = getCreators(n);
        for (int32_t i = 0; i < n; ++i)
        {
            IPluginCreatorInterface* c = list[i];
            if (!isV3One(c))
            {
                return nullptr;
            }
            // Like TensorRT: refuse the library if a creator of the same identity is already registered.
            if (!registerCreator(*c, static_cast<IPluginCreatorV3One*>(c)->getPluginNamespace()))
            {
                return nullptr;
            }
        }
        return h;
    }

    // ------------------------------------------------------------------ the rest: inert
    bool registerCreator(IPluginCreator&, AsciiChar const* const) noexcept override
    {
        return false;
    }
    IPluginCreator* const* getPluginCreatorList(int32_t* const numCreators) const noexcept override
    {
        if (numCreators != nullptr)
        {
            *numCreators = 0;
        }
        return nullptr;
    }
    IPluginCreator* getPluginCreator(AsciiChar const* const, AsciiChar const* const, AsciiChar const* const) noexcept
        override
    {
        return nullptr;
    }
    void setErrorRecorder(IErrorRecorder* const) noexcept override {}
    IErrorRecorder* getErrorRecorder() const noexcept override
    {
        return nullptr;
    }
    bool deregisterCreator(IPluginCreator const&) noexcept override
    {
        return false;
    }
    bool isParentSearchEnabled() const override
    {
        return false;
    }
    void setParentSearchEnabled(bool const) override {}
    void deregisterLibrary(PluginLibraryHandle) noexcept override {}
    IPluginResource* acquirePluginResource(AsciiChar const*, IPluginResource*) noexcept override
    {
        return nullptr;
    }
    int32_t releasePluginResource(AsciiChar const*) noexcept override
    {
        return 1;
    }
    IPluginCreatorInterface* const* getAllCreatorsRecursive(int32_t* const numCreators) noexcept override
    {
        return getAllCreators(numCreators);
    }

    // ------------------------------------------------------------------ inspection
    int32_t count() const
    {
        std::lock_guard<std::mutex> const lock(mMutex);
        return static_cast<int32_t>(mEntries.size());
    }
    std::string describe(int32_t i) const
    {
        std::lock_guard<std::mutex> const lock(mMutex);
        if (i < 0 || static_cast<size_t>(i) >= mEntries.size())
        {
            return {};
        }
        Entry const& e = mEntries[static_cast<size_t>(i)];
        auto* c = static_cast<IPluginCreatorV3One*>(e.creator);
        return std::string(c->getPluginName()) + "|" + c->getPluginVersion() + "|" + c->getPluginNamespace() + "|"
            + e.ns;
    }
    IPluginCreatorV3One* first() const
    {
        std::lock_guard<std::mutex> const lock(mMutex);
        return mEntries.empty() ? nullptr : static_cast<IPluginCreatorV3One*>(mEntries.front().creator);
    }
    int32_t mRegisterCalls{0};
    int32_t mDeregisterCalls{0};

private:
    IPluginCreatorInterface* findLocked(char const* name, char const* version, char const* ns) const
    {
        for (auto const& e : mEntries)
        {
            if (std::strcmp(creatorName(e.creator), name ? name : "") == 0
                && std::strcmp(creatorVersion(e.creator), version ? version : "") == 0 && e.ns == (ns ? ns : ""))
            {
                return e.creator;
            }
        }
        return nullptr;
    }
    mutable std::mutex mMutex;
    std::vector<Entry> mEntries;
    mutable std::vector<IPluginCreatorInterface*> mList;
};

FakeRegistry& registry()
{
    static auto* r = new FakeRegistry();
    return *r;
}

int32_t gVersion = static_cast<int32_t>(NV_TENSORRT_VERSION);

} // namespace

// ---------------------------------------------------------------- the libnvinfer entry points

FAKE_EXPORT nvinfer1::IPluginRegistry* getPluginRegistry() noexcept
{
    return &registry();
}

FAKE_EXPORT nvinfer1::ILogger* getLogger() noexcept
{
    return &fakeLogger();
}

FAKE_EXPORT int32_t getInferLibVersion() noexcept
{
    return gVersion;
}

// ---------------------------------------------------------------- inspection for the tests (ctypes)

FAKE_EXPORT void fake_set_version(int32_t v)
{
    gVersion = v;
}

FAKE_EXPORT int32_t fake_registry_count()
{
    return registry().count();
}

//! "name|version|creator namespace|registered namespace" of entry i into buf; returns its length or -1.
FAKE_EXPORT int32_t fake_registry_entry(int32_t i, char* buf, int32_t size)
{
    std::string const s = registry().describe(i);
    if (s.empty() || buf == nullptr || size <= static_cast<int32_t>(s.size()))
    {
        return -1;
    }
    std::memcpy(buf, s.c_str(), s.size() + 1);
    return static_cast<int32_t>(s.size());
}

FAKE_EXPORT int32_t fake_register_calls()
{
    return registry().mRegisterCalls;
}

FAKE_EXPORT int32_t fake_deregister_calls()
{
    return registry().mDeregisterCalls;
}

//! IPluginRegistry::loadLibrary as TensorRT does it; 1 when the library was accepted.
FAKE_EXPORT int32_t fake_load_library(char const* path)
{
    return registry().loadLibrary(path) != nullptr ? 1 : 0;
}

//! Create a plugin through the registered creator in an unknown phase; 1 when it was refused (nullptr).
FAKE_EXPORT int32_t fake_create_in_unknown_phase()
{
    IPluginCreatorV3One* c = registry().first();
    if (c == nullptr)
    {
        return -1;
    }
    IPluginV3* p = c->createPlugin("fake", nullptr, static_cast<TensorRTPhase>(7));
    delete p;
    return p == nullptr ? 1 : 0;
}

//! Number of messages at severity <= maxSeverity that reached getLogger()'s logger.
FAKE_EXPORT int32_t fake_log_count(int32_t maxSeverity)
{
    FakeLogger& l = fakeLogger();
    std::lock_guard<std::mutex> const lock(l.mMutex);
    int32_t n = 0;
    for (auto const& m : l.mMessages)
    {
        n += m.first <= maxSeverity ? 1 : 0;
    }
    return n;
}
