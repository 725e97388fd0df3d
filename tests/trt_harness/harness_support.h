// Stand-ins for the objects TensorRT hands to a plugin, so the plugin can be driven without TensorRT:
// a capturing logger and its finder, an error recorder, a plugin resource context, and an expression builder.
//
// IDimensionExpr and IExprBuilder are not abstract interfaces: they forward to an implementation object
// (apiv::VDimensionExpr / apiv::VExprBuilder) through the protected mImpl pointer. TensorRT asks applications
// not to derive from them; a harness has no other way to construct them, so it derives and sets mImpl.
#pragma once

#include <NvInferRuntime.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace torchtrt_swish {
namespace harness {

// ---------------------------------------------------------------- logging

class CapturingLogger : public nvinfer1::ILogger
{
public:
    void log(Severity severity, nvinfer1::AsciiChar const* msg) noexcept override
    {
        try
        {
            std::lock_guard<std::mutex> const lock(mMutex);
            mMessages.emplace_back(static_cast<int32_t>(severity), msg != nullptr ? msg : "<null>");
        }
        catch (...)
        {
        }
    }

    //! All messages since the last take(), oldest first; clears them.
    std::vector<std::pair<int32_t, std::string>> take()
    {
        std::lock_guard<std::mutex> const lock(mMutex);
        std::vector<std::pair<int32_t, std::string>> out;
        out.swap(mMessages);
        return out;
    }

private:
    std::mutex mMutex;
    std::vector<std::pair<int32_t, std::string>> mMessages;
};

class HarnessLoggerFinder : public nvinfer1::ILoggerFinder
{
public:
    nvinfer1::ILogger* findLogger() override
    {
        return &mLogger;
    }
    CapturingLogger& logger()
    {
        return mLogger;
    }
    ~HarnessLoggerFinder() override = default;

private:
    CapturingLogger mLogger;
};

//! Process-lifetime finder: the plugin library keeps the pointer we hand it, so it must never dangle.
inline HarnessLoggerFinder& loggerFinder()
{
    static auto* finder = new HarnessLoggerFinder(); // intentionally leaked
    return *finder;
}

// ---------------------------------------------------------------- error recorder and resource context

class RecordingErrorRecorder : public nvinfer1::IErrorRecorder
{
public:
    int32_t getNbErrors() const noexcept override
    {
        std::lock_guard<std::mutex> const lock(mMutex);
        return static_cast<int32_t>(mErrors.size());
    }
    nvinfer1::ErrorCode getErrorCode(int32_t i) const noexcept override
    {
        std::lock_guard<std::mutex> const lock(mMutex);
        return inRange(i) ? mErrors[static_cast<size_t>(i)].first : nvinfer1::ErrorCode::kINVALID_ARGUMENT;
    }
    ErrorDesc getErrorDesc(int32_t i) const noexcept override
    {
        std::lock_guard<std::mutex> const lock(mMutex);
        return inRange(i) ? mErrors[static_cast<size_t>(i)].second.c_str() : "";
    }
    bool hasOverflowed() const noexcept override
    {
        return false;
    }
    void clear() noexcept override
    {
        std::lock_guard<std::mutex> const lock(mMutex);
        mErrors.clear();
    }
    bool reportError(nvinfer1::ErrorCode val, ErrorDesc desc) noexcept override
    {
        try
        {
            std::lock_guard<std::mutex> const lock(mMutex);
            mErrors.emplace_back(val, desc != nullptr ? desc : "<null>");
        }
        catch (...)
        {
        }
        return false; // "not fatal": the caller decides
    }
    RefCount incRefCount() noexcept override
    {
        return ++mRefs;
    }
    RefCount decRefCount() noexcept override
    {
        return --mRefs;
    }
    std::vector<std::pair<int32_t, std::string>> errors() const
    {
        std::lock_guard<std::mutex> const lock(mMutex);
        std::vector<std::pair<int32_t, std::string>> out;
        for (auto const& e : mErrors)
        {
            out.emplace_back(static_cast<int32_t>(e.first), e.second);
        }
        return out;
    }

private:
    bool inRange(int32_t i) const noexcept
    {
        return i >= 0 && static_cast<size_t>(i) < mErrors.size();
    }
    mutable std::mutex mMutex;
    std::vector<std::pair<nvinfer1::ErrorCode, std::string>> mErrors;
    std::atomic<RefCount> mRefs{0};
};

class HarnessResourceContext : public nvinfer1::IPluginResourceContext
{
public:
    explicit HarnessResourceContext(bool withRecorder)
        : mWithRecorder(withRecorder)
    {
    }
    nvinfer1::IGpuAllocator* getGpuAllocator() const noexcept override
    {
        return nullptr; // TensorRT may also offer none; the plugin must cope
    }
    nvinfer1::IErrorRecorder* getErrorRecorder() const noexcept override
    {
        return mWithRecorder ? &mRecorder : nullptr;
    }
    RecordingErrorRecorder& recorder()
    {
        return mRecorder;
    }

private:
    bool mWithRecorder;
    mutable RecordingErrorRecorder mRecorder;
};

// ---------------------------------------------------------------- dimension expressions

class Expr : public nvinfer1::IDimensionExpr
{
public:
    //! A build-time constant.
    static std::unique_ptr<Expr> constant(int64_t v)
    {
        return std::unique_ptr<Expr>(new Expr(true, v, std::to_string(v), false));
    }
    //! A runtime dimension known by name only.
    static std::unique_ptr<Expr> symbol(std::string label, bool sizeTensor = false)
    {
        return std::unique_ptr<Expr>(new Expr(false, 0, std::move(label), sizeTensor));
    }
    ~Expr() override = default;

    std::string const& label() const noexcept
    {
        return mBody.label;
    }
    bool constantValue(int64_t& v) const noexcept
    {
        v = mBody.value;
        return mBody.isConst;
    }

private:
    struct Body : nvinfer1::apiv::VDimensionExpr
    {
        bool isConst{false};
        int64_t value{0};
        std::string label;
        bool sizeTensor{false};
        bool isConstant() const noexcept override
        {
            return isConst;
        }
        int64_t getConstantValue() const noexcept override
        {
            return isConst ? value : std::numeric_limits<int64_t>::min();
        }
        bool isSizeTensor() const noexcept override
        {
            return sizeTensor;
        }
    };

    Expr(bool isConst, int64_t v, std::string label, bool sizeTensor)
    {
        mBody.isConst = isConst;
        mBody.value = v;
        mBody.label = std::move(label);
        mBody.sizeTensor = sizeTensor;
        mImpl = &mBody;
    }
    Body mBody;
};

//! Owns every expression it hands out, like TensorRT's builder during one getOutputShapes call.
class ExprBuilder : public nvinfer1::IExprBuilder
{
public:
    ExprBuilder()
    {
        mBody.owner = this;
        mImpl = &mBody;
    }
    ~ExprBuilder() override = default;

    Expr const* adopt(std::unique_ptr<Expr> e)
    {
        mOwned.push_back(std::move(e));
        return mOwned.back().get();
    }
    //! True when e was made by this builder (the plugin must not invent expressions of its own).
    Expr const* own(nvinfer1::IDimensionExpr const* e) const noexcept
    {
        for (auto const& o : mOwned)
        {
            if (o.get() == e)
            {
                return o.get();
            }
        }
        return nullptr;
    }
    int32_t nbOperations() const noexcept
    {
        return mBody.nbOperations;
    }

private:
    struct Body : nvinfer1::apiv::VExprBuilder
    {
        ExprBuilder* owner{nullptr};
        int32_t nbOperations{0};

        nvinfer1::IDimensionExpr const* constant(int64_t value) noexcept override
        {
            try
            {
                return owner->adopt(Expr::constant(value));
            }
            catch (...)
            {
                return nullptr;
            }
        }
        nvinfer1::IDimensionExpr const* operation(nvinfer1::DimensionOperation op,
            nvinfer1::IDimensionExpr const& first, nvinfer1::IDimensionExpr const& second) noexcept override
        {
            try
            {
                ++nbOperations;
                Expr const* a = owner->own(&first);
                Expr const* b = owner->own(&second);
                if (a == nullptr || b == nullptr)
                {
                    return nullptr;
                }
                int64_t x = 0;
                int64_t y = 0;
                if (a->constantValue(x) && b->constantValue(y))
                {
                    int64_t r = 0;
                    if (!fold(op, x, y, r))
                    {
                        return nullptr;
                    }
                    return owner->adopt(Expr::constant(r));
                }
                return owner->adopt(Expr::symbol("(" + a->label() + opName(op) + b->label() + ")"));
            }
            catch (...)
            {
                return nullptr;
            }
        }
        nvinfer1::IDimensionExpr const* declareSizeTensor(int32_t outputIndex, nvinfer1::IDimensionExpr const&,
            nvinfer1::IDimensionExpr const&) noexcept override
        {
            try
            {
                return owner->adopt(Expr::symbol("size" + std::to_string(outputIndex), true));
            }
            catch (...)
            {
                return nullptr;
            }
        }

        static char const* opName(nvinfer1::DimensionOperation op) noexcept
        {
            switch (op)
            {
            case nvinfer1::DimensionOperation::kSUM: return "+";
            case nvinfer1::DimensionOperation::kPROD: return "*";
            case nvinfer1::DimensionOperation::kMAX: return " max ";
            case nvinfer1::DimensionOperation::kMIN: return " min ";
            case nvinfer1::DimensionOperation::kSUB: return "-";
            case nvinfer1::DimensionOperation::kEQUAL: return "==";
            case nvinfer1::DimensionOperation::kLESS: return "<";
            case nvinfer1::DimensionOperation::kFLOOR_DIV: return "//";
            case nvinfer1::DimensionOperation::kCEIL_DIV: return " ceildiv ";
            }
            return "?";
        }
        static bool fold(nvinfer1::DimensionOperation op, int64_t a, int64_t b, int64_t& r) noexcept
        {
            switch (op)
            {
            case nvinfer1::DimensionOperation::kSUM: r = a + b; return true;
            case nvinfer1::DimensionOperation::kPROD: r = a * b; return true;
            case nvinfer1::DimensionOperation::kMAX: r = a > b ? a : b; return true;
            case nvinfer1::DimensionOperation::kMIN: r = a < b ? a : b; return true;
            case nvinfer1::DimensionOperation::kSUB: r = a - b; return true;
            case nvinfer1::DimensionOperation::kEQUAL: r = a == b; return true;
            case nvinfer1::DimensionOperation::kLESS: r = a < b; return true;
            case nvinfer1::DimensionOperation::kFLOOR_DIV:
                if (b == 0)
                {
                    return false;
                }
                r = a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
                return true;
            case nvinfer1::DimensionOperation::kCEIL_DIV:
                if (b == 0)
                {
                    return false;
                }
                r = a / b + ((a % b != 0) && ((a < 0) == (b < 0)));
                return true;
            }
            return false;
        }
    };

    Body mBody;
    std::vector<std::unique_ptr<Expr>> mOwned;
};

} // namespace harness
} // namespace torchtrt_swish
