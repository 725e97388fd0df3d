// Bias layout classification shared by every host (torch op, TensorRT plugin).
//
// Header-only, plain C++: no torch, no TensorRT, no CUDA. A bias that broadcasts to x is "periodic" when,
// right-aligned to x, its non-1 dimensions form one contiguous block equal to x's dimensions there. Then
// bias[(i / inner) % channels] is the bias of flat element i of a contiguous x, which one kernel handles for
// scalar (channels == 1), per-channel ([C] on the last dim, [C,1,..] / [1,C,1,..] on dim 1) and full shapes.
#pragma once

#include <cstdint>
#include <string>

namespace torchtrt_swish {

//! What the contract calls the layouts; kBLOCK is periodic but not one of the named layouts.
enum class BiasKind : int32_t { kSCALAR = 0, kPER_CHANNEL_DIM1 = 1, kPER_CHANNEL_LAST = 2, kFULL = 3, kBLOCK = 4 };

//! How the kernel finds the bias of flat element i: bias[(i / inner) % channels].
struct BiasSpec
{
    int64_t channels{1};
    int64_t inner{1};
};

//! Result of classifying a bias shape against an x shape.
struct BiasClass
{
    bool broadcastable{false}; //!< bias broadcasts to x without changing x's shape
    bool periodic{false};      //!< the kernel can index bias directly (no materialization needed)
    BiasKind kind{BiasKind::kBLOCK};
    BiasSpec spec{};
    std::string why; //!< reason when !broadcastable or !periodic
};

inline char const* biasKindName(BiasKind k)
{
    switch (k)
    {
    case BiasKind::kSCALAR: return "scalar";
    case BiasKind::kPER_CHANNEL_DIM1: return "per-channel (dim 1)";
    case BiasKind::kPER_CHANNEL_LAST: return "per-channel (last dim)";
    case BiasKind::kFULL: return "full";
    case BiasKind::kBLOCK: return "block";
    }
    return "unknown";
}

inline std::string shapeString(int64_t const* d, int32_t r)
{
    std::string s = "[";
    for (int32_t i = 0; i < r; ++i)
    {
        s += (i ? ", " : "") + std::to_string(d[i]);
    }
    return s + "]";
}

//! Classify bias shape b (rank br) against x shape x (rank xr). Never throws.
inline BiasClass classifyBias(int64_t const* x, int32_t xr, int64_t const* b, int32_t br)
{
    BiasClass c;
    if (br > xr)
    {
        c.why = "bias shape " + shapeString(b, br) + " has more dimensions than x " + shapeString(x, xr)
            + ", which would change the output shape";
        return c;
    }
    int32_t const off = xr - br; // bias dim j aligns with x dim j + off
    for (int32_t j = 0; j < br; ++j)
    {
        if (b[j] != 1 && b[j] != x[j + off])
        {
            c.why = "bias shape " + shapeString(b, br) + " does not broadcast to x shape " + shapeString(x, xr)
                + " without changing it (dim " + std::to_string(j) + ")";
            return c;
        }
    }
    c.broadcastable = true;

    // Find the block of x dims (aligned) where bias is not 1; dims of size 1 in x are neutral either way.
    int32_t first = -1;
    int32_t last = -1;
    for (int32_t j = 0; j < br; ++j)
    {
        if (b[j] != 1)
        {
            if (first < 0)
            {
                first = j + off;
            }
            last = j + off;
        }
    }
    if (first < 0)
    {
        c.periodic = true;
        c.kind = BiasKind::kSCALAR;
        c.spec = BiasSpec{1, 1};
        return c;
    }
    for (int32_t d = first; d <= last; ++d)
    {
        int64_t const bd = b[d - off];
        if (bd != x[d] && x[d] != 1)
        {
            c.why = "bias shape " + shapeString(b, br) + " is not a contiguous block of x shape " + shapeString(x, xr);
            return c;
        }
    }
    int64_t channels = 1;
    for (int32_t d = first; d <= last; ++d)
    {
        channels *= x[d];
    }
    int64_t inner = 1;
    for (int32_t d = last + 1; d < xr; ++d)
    {
        inner *= x[d];
    }
    int64_t outer = 1;
    for (int32_t d = 0; d < first; ++d)
    {
        outer *= x[d];
    }
    c.periodic = true;
    c.spec = BiasSpec{channels, inner};
    if (outer == 1 && inner == 1)
    {
        c.kind = BiasKind::kFULL;
    }
    else if (first == last && last == xr - 1)
    {
        c.kind = BiasKind::kPER_CHANNEL_LAST;
    }
    else if (first == last && first == 1)
    {
        c.kind = BiasKind::kPER_CHANNEL_DIM1;
    }
    else
    {
        c.kind = BiasKind::kBLOCK;
    }
    return c;
}

} // namespace torchtrt_swish
