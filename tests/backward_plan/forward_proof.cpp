// The forward's launches walked on the CPU (csrc/kernels/swish_forward_plan.h): every block, thread and pack of each
// launch of the plan, through the functions the kernel calls. Checks that x and y are read and written inside
// their buffers (a thread past the end loads the last pack), every y element exactly once, that each element reads
// bias element (i / inner) % C and every bias load (16-byte packs included) stays inside the bias and on its
// alignment, that each launch has a kernel of its pack width and shape (and of its L1 policy), and that grids fit.
#include "proof.h"

#include <vector>

#include "kernels/swish_forward_plan.h"

namespace torchtrt_swish {
namespace proof {

using namespace detail;

namespace {

// The bias element of element k of pack p (first element i) in a launch, as the kernel's lookup for its mode
// (kNARROW: the 32-bit index math the kernel takes when fwdNarrow holds).
template <bool kNARROW>
int64_t biasIndexAs(FwdLaunch const& l, int64_t i, int64_t p, int k, uint32_t t, Report& r)
{
    FwdParams const& prm = l.prm;
    switch (l.mode)
    {
    case FwdMode::kSCALAR: return 0;
    case FwdMode::kFULL: return i + k;
    case FwdMode::kLAST_VEC:
    {
        int64_t const j = fwdLastVecBias<kNARROW>(prm, p, l.vec);
        if (j % l.vec != 0 || j + l.vec > prm.spec.channels)
        {
            r.fail("kLAST_VEC bias pack at " + std::to_string(j) + " of " + std::to_string(prm.spec.channels));
        }
        return j + k;
    }
    case FwdMode::kLAST_FIXED:
    {
        int64_t const c = fwdFixedBiasPack(prm, t);
        if ((c + 1) * l.vec > prm.spec.channels)
        {
            r.fail("kLAST_FIXED bias pack " + std::to_string(c) + " past " + std::to_string(prm.spec.channels));
        }
        return c * l.vec + k;
    }
    case FwdMode::kUNIFORM_VEC: return static_cast<int64_t>(fwdUniformBias<kNARROW>(prm, p));
    case FwdMode::kSPAN2:
    {
        FwdSpan const sp = fwdSpan2Bias<kNARROW>(prm, i);
        if (sp.split < 1 || static_cast<int64_t>(sp.c1) >= prm.spec.channels)
        {
            r.fail("kSPAN2 split " + std::to_string(sp.split) + ", next channel " + std::to_string(sp.c1));
        }
        return static_cast<int64_t>(k < sp.split ? sp.c : sp.c1);
    }
    case FwdMode::kPERIODIC:
    {
        FwdRun run = fwdPeriodicStart(prm, i);
        for (int e = 0; e < k; ++e)
        {
            fwdPeriodicNext(prm, run);
        }
        return run.c;
    }
    }
    r.fail("unknown mode");
    return -1;
}

// The kernel's lookup; a narrow launch's 32-bit lookups must also agree with the 64-bit ones.
int64_t biasIndex(FwdLaunch const& l, int64_t i, int64_t p, int k, uint32_t t, Report& r)
{
    if (fwdDividesPerPack(l.mode) && !fwdNarrow(l.prm, l.nPacks, l.vec))
    {
        return biasIndexAs<false>(l, i, p, k, t, r);
    }
    int64_t const narrow = biasIndexAs<true>(l, i, p, k, t, r);
    if (narrow != biasIndexAs<false>(l, i, p, k, t, r))
    {
        r.fail("32-bit bias lookup " + std::to_string(narrow) + " differs from the 64-bit one at pack "
            + std::to_string(p));
    }
    return narrow;
}

} // namespace

std::string proveForward(DType dtype, int64_t n, BiasSpec spec, bool io, bool biasAligned, int64_t l2Bytes, bool edges)
{
    Report r;
    FwdPlan const plan = planForward(dtype, n, spec, io, biasAligned, l2Bytes);
    int const vw = vecWidth(dtype);
    std::vector<uint8_t> written(edges ? 0 : static_cast<size_t>(n), 0);
    int64_t const biasLen = spec.channels; // a full bias has n elements: channels == n
    for (int li = 0; li < plan.count && r.ok(); ++li)
    {
        FwdLaunch const& l = plan.launch[li];
        // swish_forward.cu's launchShape: 256 x 1, 128 x 2, and 128 x 1 for vector packs that keep L1.
        bool const shape = l.threads == kTHREADS / l.ppt
            || (l.vec > 1 && !l.skipL1 && l.threads == kTHREADS / 2 && l.ppt == 1);
        bool const kernel = (l.vec == vw && (l.ppt == 1 || l.ppt == 2) && shape)
            || (l.vec == 1 && fwdHasScalarKernel(l.mode) && shape)
            || (vw == 8 && l.vec == 4 && l.ppt == 1 && fwdHasHalfNarrowKernel(l.mode));
        // Only the 16-byte kernels of 32-bit lookups have an L1-skipping copy (swish_forward.cu's launchMode).
        bool const skipKernel = l.vec == vw && !(fwdDividesPerPack(l.mode) && !fwdNarrow(l.prm, l.nPacks, l.vec));
        if (!kernel || (l.skipL1 && !skipKernel) || (l.vec > 1 && (!io || l.prm.offset % l.vec != 0)))
        {
            return "launch " + std::to_string(li) + ": mode " + std::to_string(static_cast<int>(l.mode)) + ", pack "
                + std::to_string(l.vec) + ", " + std::to_string(l.ppt) + " per thread"
                + (l.skipL1 ? ", skipping L1" : "") + ": no such kernel";
        }
        if ((l.mode == FwdMode::kFULL || l.mode == FwdMode::kLAST_VEC || l.mode == FwdMode::kLAST_FIXED)
            && l.vec > 1 && !biasAligned)
        {
            return "vector bias loads from a misaligned bias";
        }
        if (l.grid < 1 || l.nPacks < 1 || static_cast<int64_t>(l.grid) * l.threads * l.ppt < l.nPacks)
        {
            return "launch " + std::to_string(li) + ": grid of " + std::to_string(l.grid) + " for "
                + std::to_string(l.nPacks) + " packs";
        }
        // A narrow launch of a dividing mode takes its pack indices in 32 bits: its grid must stay below 2^32 packs.
        bool const n32 = fwd32BitLaunch(l);
        if (n32 && static_cast<int64_t>(l.grid) * l.threads * l.ppt > (int64_t{1} << 32))
        {
            return "launch " + std::to_string(li) + ": 32-bit pack indices for a grid past 2^32 packs";
        }
        // edges: the first two and the last two blocks only.
        for (uint32_t b = 0; b < l.grid && r.ok(); b = edges && b == 1 && l.grid > 4 ? l.grid - 2 : b + 1)
        {
            for (uint32_t t = 0; t < static_cast<uint32_t>(l.threads) && r.ok(); ++t)
            {
                for (int u = 0; u < l.ppt; ++u)
                {
                    int64_t const p = fwdPack(b, t, u, l.threads, l.ppt);
                    // The kernel loads x and the bias of pack fwdLoadPack(p) before it knows whether p is stored.
                    int64_t const q = fwdLoadPack(p, l.nPacks);
                    if (n32 && (fwdPack<true>(b, t, u, l.threads, l.ppt) != p || fwdLoadPack<true>(p, l.nPacks) != q))
                    {
                        return "launch " + std::to_string(li) + ": 32-bit pack index differs at pack "
                            + std::to_string(p);
                    }
                    if (q < 0 || q >= l.nPacks || (q != p && p < l.nPacks))
                    {
                        return "launch " + std::to_string(li) + ": pack " + std::to_string(p) + " loads pack "
                            + std::to_string(q) + " of " + std::to_string(l.nPacks);
                    }
                    if (p >= l.nPacks)
                    {
                        int64_t const iq = fwdElement(l.prm, q, l.vec);
                        for (int k = 0; k < l.vec && r.ok(); ++k)
                        {
                            int64_t const got = biasIndex(l, iq, q, k, t, r);
                            if (r.ok() && (got < 0 || got >= biasLen || iq + k >= n))
                            {
                                return "pack " + std::to_string(p) + " past the end loads bias["
                                    + std::to_string(got) + "] or x[" + std::to_string(iq + k) + "]";
                            }
                        }
                        continue;
                    }
                    int64_t const i = fwdElement(l.prm, p, l.vec);
                    for (int k = 0; k < l.vec && r.ok(); ++k)
                    {
                        int64_t const e = i + k;
                        if (e < 0 || e >= n || (!edges && written[static_cast<size_t>(e)]++))
                        {
                            return "y[" + std::to_string(e) + "] written twice or outside y";
                        }
                        int64_t const got = biasIndex(l, i, p, k, t, r);
                        int64_t const want = (e / spec.inner) % spec.channels;
                        if (r.ok() && (got != want || got < 0 || got >= biasLen))
                        {
                            return "y[" + std::to_string(e) + "] takes bias[" + std::to_string(got) + "], wants bias["
                                + std::to_string(want) + "] (mode " + std::to_string(static_cast<int>(l.mode)) + ")";
                        }
                    }
                }
            }
        }
    }
    for (int64_t e = 0; e < n && r.ok() && !edges; ++e)
    {
        if (written[static_cast<size_t>(e)] != 1)
        {
            r.fail("y[" + std::to_string(e) + "] never written");
        }
    }
    return r.first;
}

} // namespace proof
} // namespace torchtrt_swish
