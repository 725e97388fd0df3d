#include "swish_layout.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

namespace torchtrt_swish {
namespace plugin {
namespace {

using nvinfer1::Dims;

constexpr int64_t kUNBOUNDED = std::numeric_limits<int64_t>::max();

// classifyBias depends on x's dimensions only through "is it 1" and "does it equal the bias dimension", so trying
// a 1 and a non-1 value for each unknown dimension (paired consistently with the aligned bias dimension) covers
// every runtime shape in the ranges.
struct DimRange
{
    int64_t lo;
    int64_t hi;
    bool contains(int64_t v) const noexcept { return lo <= v && v <= hi; }
    bool hasNonOne() const noexcept { return lo < 1 || hi > 1; }
    //! Some value in range other than 1 (the range must have one).
    int64_t nonOne() const noexcept { return std::max<int64_t>(lo, 2) <= hi ? std::max<int64_t>(lo, 2) : 0; }
    //! One value of the range, other than 1 where it has one.
    int64_t representative() const noexcept { return lo == hi ? lo : (hasNonOne() ? nonOne() : 1); }
};

DimRange rangeOf(int64_t dim, Dims const* minD, Dims const* maxD, int32_t i) noexcept
{
    if (dim >= 0)
    {
        return DimRange{dim, dim};
    }
    int64_t lo = 0;
    int64_t hi = kUNBOUNDED;
    if (minD != nullptr && i < minD->nbDims && minD->d[i] >= 0)
    {
        lo = minD->d[i];
    }
    if (maxD != nullptr && i < maxD->nbDims && maxD->d[i] >= 0)
    {
        hi = std::max(maxD->d[i], lo);
    }
    return DimRange{lo, hi};
}

//! Candidate (x value, bias value) pairs for one x dimension; bias range {1} where x's dim has no bias dim.
std::vector<std::pair<int64_t, int64_t>> candidates(DimRange const& xr, DimRange const& br)
{
    std::vector<std::pair<int64_t, int64_t>> opt;
    if (br.contains(1))
    {
        if (xr.contains(1))
        {
            opt.emplace_back(1, 1);
        }
        if (xr.hasNonOne())
        {
            opt.emplace_back(xr.lo == xr.hi ? xr.lo : xr.nonOne(), 1);
        }
    }
    if (br.hasNonOne())
    {
        DimRange const both{std::max(xr.lo, br.lo), std::min(xr.hi, br.hi)}; // a non-1 bias dim must equal x's
        if (both.lo <= both.hi && both.hasNonOne())
        {
            int64_t const val = both.lo == both.hi ? both.lo : both.nonOne();
            opt.emplace_back(val, val);
        }
    }
    if (opt.empty())
    {
        // No runtime shape broadcasts here: one representative pair lets classifyBias give the reason.
        opt.emplace_back(xr.representative(), br.representative());
    }
    return opt;
}

} // namespace

bool acceptedLayout(BiasClass const& c) noexcept
{
    return c.broadcastable && c.periodic && c.kind != BiasKind::kBLOCK;
}

std::string layoutRejection(BiasClass const& c, int64_t const* x, int32_t xr, int64_t const* b, int32_t br)
{
    if (!c.why.empty() && (!c.broadcastable || !c.periodic))
    {
        return c.why;
    }
    return "bias shape " + shapeString(b, br) + " broadcasts to x shape " + shapeString(x, xr)
        + " as a block layout; SwishBias supports scalar, per-channel (dim 1 or last dim) and full-shape bias";
}

std::string dimsString(Dims const& d)
{
    if (d.nbDims < 0 || d.nbDims > Dims::MAX_DIMS)
    {
        return "<invalid rank " + std::to_string(d.nbDims) + ">";
    }
    return shapeString(d.d, d.nbDims);
}

LayoutVerdict assessLayout(TensorRanges const& x, TensorRanges const& b)
{
    LayoutVerdict v;
    int32_t const xr = x.dims.nbDims;
    int32_t const br = b.dims.nbDims;
    int64_t xs[Dims::MAX_DIMS] = {};
    int64_t bs[Dims::MAX_DIMS] = {};
    if (br > xr)
    {
        // classifyBias refuses any such pair: one representative shape gives its reason.
        for (int32_t d = 0; d < xr; ++d)
        {
            xs[d] = rangeOf(x.dims.d[d], x.min, x.max, d).representative();
        }
        for (int32_t d = 0; d < br; ++d)
        {
            bs[d] = rangeOf(b.dims.d[d], b.min, b.max, d).representative();
        }
        v.allAccepted = false;
        v.why = layoutRejection(classifyBias(xs, xr, bs, br), xs, xr, bs, br);
        return v;
    }
    int32_t const off = xr - br;
    std::vector<std::vector<std::pair<int64_t, int64_t>>> options(static_cast<size_t>(xr));
    for (int32_t d = 0; d < xr; ++d)
    {
        DimRange const brng = d >= off ? rangeOf(b.dims.d[d - off], b.min, b.max, d - off) : DimRange{1, 1};
        options[static_cast<size_t>(d)] = candidates(rangeOf(x.dims.d[d], x.min, x.max, d), brng);
    }
    // Odometer over the candidate combinations (at most 3^8).
    std::vector<size_t> idx(static_cast<size_t>(xr), 0);
    while (true)
    {
        for (int32_t d = 0; d < xr; ++d)
        {
            auto const& p = options[static_cast<size_t>(d)][idx[static_cast<size_t>(d)]];
            xs[d] = p.first;
            if (d >= off)
            {
                bs[d - off] = p.second;
            }
        }
        BiasClass const c = classifyBias(xs, xr, bs, br);
        if (acceptedLayout(c))
        {
            v.anyAccepted = true;
        }
        else if (v.allAccepted)
        {
            v.allAccepted = false;
            v.why = layoutRejection(c, xs, xr, bs, br);
        }
        int32_t d = xr - 1;
        for (; d >= 0; --d)
        {
            auto& i = idx[static_cast<size_t>(d)];
            if (++i < options[static_cast<size_t>(d)].size())
            {
                break;
            }
            i = 0;
        }
        if (d < 0)
        {
            break;
        }
    }
    return v;
}

} // namespace plugin
} // namespace torchtrt_swish
