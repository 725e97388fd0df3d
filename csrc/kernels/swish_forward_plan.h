// The forward's plan (swish_forward.cu): which bias lookup, pack width and launch shape each part of a tensor gets,
// and the index math of the kernel (which packs a thread writes, which bias elements each pack reads). Plain C++,
// host and device: the kernel calls these functions and tests/backward_plan walks them on the CPU.
#pragma once

#include <cstdint>
#include <type_traits>

#include "bias_layout.h"
#include "launch_common.h"

namespace torchtrt_swish {
namespace detail {

//! How the forward finds the bias of a pack.
enum class FwdMode : int
{
    kSCALAR,      // one bias value
    kFULL,        // bias[i]
    kLAST_VEC,    // bias[i % C], C a multiple of the pack width: one 16-byte bias load per pack
    kLAST_FIXED,  // as kLAST_VEC with C / width dividing the block size: bias loaded once per thread
    kUNIFORM_VEC, // bias[(i / inner) % C], inner a multiple of the pack width: one bias value per pack
    kSPAN2,       // bias[(i / inner) % C], inner >= the pack width: a pack spans at most two channels
    kPERIODIC     // bias[(i / inner) % C], anything else: per-element lookup
};

//! What the kernel needs besides the pointers.
struct FwdParams
{
    BiasSpec spec;
    FastDiv byPacksPerRow; // kLAST_VEC, kLAST_FIXED: C / vec;  kUNIFORM_VEC: inner / vec;  kSPAN2: inner
    FastDiv byChannels;    // kUNIFORM_VEC, kSPAN2: C
    int64_t offset;        // flat index of the launch's element 0 (tail launches)
};

//! One launch: packs [0, nPacks) of vec elements from element `offset` (prm.offset), threads x ppt packs a block.
struct FwdLaunch
{
    FwdMode mode;
    int vec;
    int threads;
    int ppt;
    int64_t nPacks;
    unsigned grid; // 0: more blocks than a grid holds
    FwdParams prm;
    bool skipL1{false}; // x loads bypass L1 (fwdSkipsL1)
};

//! The vectorized body and the element-wise tail (or everything, misaligned): one or two launches.
struct FwdPlan
{
    int count{0};
    FwdLaunch launch[2]{};
};

// fp16/bf16 tensors of at most this many 16-byte packs (2^20 elements) with a scalar, fixed or uniform (dim-1) bias
// take 8-byte packs instead: twice the threads, each with half the math ahead of its store, for a launch that cannot
// fill the chip.
constexpr int64_t kFWD_HALF_NARROW_PACKS = int64_t{1} << 17;

//! Whether a mode has the fp16/bf16 8-byte-pack kernel (the lookups take the pack count of a row or plane).
TORCHTRT_SWISH_HOST_DEVICE constexpr bool fwdHasHalfNarrowKernel(FwdMode m)
{
    return m == FwdMode::kSCALAR || m == FwdMode::kLAST_FIXED || m == FwdMode::kUNIFORM_VEC;
}

//! Packs up to which a launch runs one pack per thread in 256-thread blocks (the most loads in flight for a tensor
//! that cannot fill the chip); above, two packs per thread in 128-thread blocks, or one once x streams from DRAM
//! (fwdStreams). bf16 kSPAN2 keeps one pack per thread longer (its two-pack kernel holds more registers).
inline int64_t fwdOnePackLimit(DType dtype, FwdMode mode)
{
    return dtype == DType::kBFLOAT16 && mode == FwdMode::kSPAN2 ? int64_t{1} << 20 : int64_t{1} << 18;
}

//! Whether a mode's lookup divides per pack in 32-bit arithmetic when the launch allows (fwdNarrow): those modes
//! have 32-bit and 64-bit kernels.
TORCHTRT_SWISH_HOST_DEVICE constexpr bool fwdDividesPerPack(FwdMode m)
{
    return m == FwdMode::kLAST_VEC || m == FwdMode::kUNIFORM_VEC || m == FwdMode::kSPAN2;
}

//! Whether a mode has an element-wise (pack width 1) kernel: the tail and misaligned launches use only these.
constexpr bool fwdHasScalarKernel(FwdMode m)
{
    return m == FwdMode::kSCALAR || m == FwdMode::kFULL || m == FwdMode::kPERIODIC;
}

//! Whether x of xBytes streams from DRAM on a device with l2Bytes of L2: past two thirds of it (x and y together
//! then overflow L2). There one pack a thread in 128-thread blocks (inductor's shape) was about 0.2 % faster than two
//! on an H100 (on 32-35 of 41 such rows), and the x loads keep L1 (performance notes, runs t6, t7).
TORCHTRT_SWISH_HOST_DEVICE constexpr bool fwdStreams(int64_t xBytes, int64_t l2Bytes)
{
    return xBytes > l2Bytes / 3 * 2;
}

//! A launch of nPacks packs of vec elements; streams: x streams from DRAM (fwdStreams).
inline FwdLaunch fwdLaunch(DType dtype, FwdMode mode, int vec, int64_t nPacks, FwdParams prm, bool streams)
{
    int const vw = vecWidth(dtype);
    if (vw == 8 && vec == 8 && fwdHasHalfNarrowKernel(mode) && nPacks <= kFWD_HALF_NARROW_PACKS)
    {
        // Same elements as 8-byte packs: a row or plane has twice the packs; for kLAST_FIXED that still divides the
        // 256-thread block (planForward checked that C / 8 divides 128).
        prm.byPacksPerRow = FastDiv::make(2 * static_cast<int64_t>(prm.byPacksPerRow.d));
        return FwdLaunch{mode, 4, kTHREADS, 1, 2 * nPacks, gridBlocks((2 * nPacks + kTHREADS - 1) / kTHREADS), prm};
    }
    bool const one = nPacks <= fwdOnePackLimit(dtype, mode);
    int const threads = one ? kTHREADS : kTHREADS / 2;
    int const ppt = one || streams ? 1 : 2;
    int64_t const perBlock = threads * ppt;
    return FwdLaunch{mode, vec, threads, ppt, nPacks, gridBlocks((nPacks + perBlock - 1) / perBlock), prm};
}

//! Whether the 16-byte x loads of a tensor of xBytes bypass L1 (ld.global.nc.L1::no_allocate) on a device with
//! l2Bytes of L2: faster while x takes more than two fifths and at most two thirds of L2; below, the plain load,
//! which keeps x in L2 from call to call, is about as fast or faster; slower once x streams from DRAM (performance
//! notes, runs l2, b1-b5, F9).
TORCHTRT_SWISH_HOST_DEVICE constexpr bool fwdSkipsL1(int64_t xBytes, int64_t l2Bytes)
{
    return xBytes > l2Bytes / 5 * 2 && !fwdStreams(xBytes, l2Bytes);
}

//! The plan for n > 0 elements. io: x and y start on 16 bytes; biasAligned: bias does; l2Bytes: the device's L2.
inline FwdPlan planForward(DType dtype, int64_t n, BiasSpec spec, bool io, bool biasAligned, int64_t l2Bytes)
{
    int const vw = vecWidth(dtype);
    FwdParams prm{spec, FastDiv{}, FastDiv{}, 0};
    FwdMode body = FwdMode::kPERIODIC;
    FwdMode tail = FwdMode::kPERIODIC;
    bool vecOk = io;
    if (spec.channels == 1)
    {
        body = tail = FwdMode::kSCALAR;
    }
    else if (spec.inner == 1 && spec.channels == n)
    {
        body = tail = FwdMode::kFULL;
        vecOk = io && biasAligned;
    }
    else if (spec.inner == 1 && spec.channels % vw == 0 && io && biasAligned)
    {
        prm.byPacksPerRow = FastDiv::make(spec.channels / vw);
        // Both forward block sizes (128, 256) multiples of the channel-pack count: a fixed bias per thread.
        body = (kTHREADS / 2) % (spec.channels / vw) == 0 ? FwdMode::kLAST_FIXED : FwdMode::kLAST_VEC;
    }
    else if (spec.inner % vw == 0 && io)
    {
        prm.byPacksPerRow = FastDiv::make(spec.inner / vw);
        prm.byChannels = FastDiv::make(spec.channels);
        body = FwdMode::kUNIFORM_VEC;
    }
    else if (spec.inner >= vw && io)
    {
        prm.byPacksPerRow = FastDiv::make(spec.inner);
        prm.byChannels = FastDiv::make(spec.channels);
        body = FwdMode::kSPAN2;
    }
    FwdPlan plan;
    int64_t const head = vecOk ? (n / vw) * vw : 0;
    if (head > 0)
    {
        int64_t const xBytes = n * elementBytes(dtype);
        FwdLaunch& l = plan.launch[plan.count++];
        l = fwdLaunch(dtype, body, vw, head / vw, prm, fwdStreams(xBytes, l2Bytes));
        l.skipL1 = l.vec == vw && fwdSkipsL1(xBytes, l2Bytes); // 16-byte packs only
    }
    if (n > head)
    {
        prm.offset = head; // the bias stays unshifted: lookups take the absolute element index
        plan.launch[plan.count++] = fwdLaunch(dtype, tail, 1, n - head, prm, false);
    }
    return plan;
}

// ------------------------------------------------------------------------------------------- the kernel's indices

//! Whether every element index of a launch (and so every dividend and divisor of its bias lookup) is below 2^31:
//! its lookups then take FastDiv::div31 (div32 for kLAST_VEC), with no per-division branch to the 64-bit path (which
//! serialized the packs' index math) and no 64-bit carry.
TORCHTRT_SWISH_HOST_DEVICE bool fwdNarrow(FwdParams const& prm, int64_t nPacks, int vec)
{
    return prm.offset + nPacks * vec <= int64_t{1} << 31;
}

//! Whether a launch's kernel takes its bias lookups (and, two packs a thread, its pack indices) in 32 bits: a
//! dividing mode, narrow.
TORCHTRT_SWISH_HOST_DEVICE bool fwd32BitLaunch(FwdLaunch const& l)
{
    return fwdDividesPerPack(l.mode) && fwdNarrow(l.prm, l.nPacks, l.vec);
}

//! A lookup's index type: 32 bits in a narrow launch (fwdNarrow), else 64.
template <bool kNARROW>
using FwdIdx = std::conditional_t<kNARROW, uint32_t, uint64_t>;

//! n / f.d, and n % f.d: FastDiv::div31 when the launch is narrow, else the general division.
template <bool kNARROW>
TORCHTRT_SWISH_HOST_DEVICE FwdIdx<kNARROW> fwdDiv(FastDiv const& f, FwdIdx<kNARROW> n)
{
    if constexpr (kNARROW)
    {
        return f.div31(n);
    }
    else
    {
        return f.div(n);
    }
}

template <bool kNARROW>
TORCHTRT_SWISH_HOST_DEVICE FwdIdx<kNARROW> fwdMod(FastDiv const& f, FwdIdx<kNARROW> n)
{
    return n - fwdDiv<kNARROW>(f, n) * static_cast<FwdIdx<kNARROW>>(f.d);
}

//! Pack u of thread t of block b in a launch of `threads` x `ppt` packs a block. kNARROW: in 32-bit arithmetic,
//! for a narrow launch of vector packs (its grid covers at most 2^32 packs; the proof checks both forms agree).
template <bool kNARROW = false>
TORCHTRT_SWISH_HOST_DEVICE int64_t fwdPack(uint32_t b, uint32_t t, int u, int threads, int ppt)
{
    if constexpr (kNARROW)
    {
        return b * static_cast<uint32_t>(threads * ppt) + t + static_cast<uint32_t>(u * threads);
    }
    else
    {
        return static_cast<int64_t>(b) * (threads * ppt) + t + static_cast<int64_t>(u) * threads;
    }
}

//! The pack a thread loads for pack p: p, or the last pack for a p past the end (a thread of the last block whose
//! result is not stored), so that the loads need no guard and are all issued before any is used.
template <bool kNARROW = false>
TORCHTRT_SWISH_HOST_DEVICE int64_t fwdLoadPack(int64_t p, int64_t nPacks)
{
    if constexpr (kNARROW)
    {
        auto const last = static_cast<uint32_t>(nPacks - 1);
        return static_cast<uint32_t>(p) < last ? static_cast<uint32_t>(p) : last;
    }
    else
    {
        return p < nPacks ? p : nPacks - 1;
    }
}

//! The flat index of pack p's first element (the launch's packs start at prm.offset).
TORCHTRT_SWISH_HOST_DEVICE int64_t fwdElement(FwdParams const& prm, int64_t p, int vec)
{
    return prm.offset + p * vec;
}

//! kLAST_VEC: the bias element of pack p's first element (its vec elements follow).
//! A narrow launch divides by FastDiv::div32 here: with div31, ptxas began the first pack's math before it issued the
//! second pack's loads (fp32, two packs a thread; performance notes).
template <bool kNARROW>
TORCHTRT_SWISH_HOST_DEVICE int64_t fwdLastVecBias(FwdParams const& prm, int64_t p, int vec)
{
    if constexpr (kNARROW)
    {
        auto const p32 = static_cast<uint32_t>(p);
        return static_cast<int64_t>(p32 - prm.byPacksPerRow.div32(p32) * static_cast<uint32_t>(prm.byPacksPerRow.d))
            * vec;
    }
    else
    {
        return static_cast<int64_t>(fwdMod<false>(prm.byPacksPerRow, static_cast<uint64_t>(p))) * vec;
    }
}

//! kLAST_FIXED: the bias pack of thread t (the channel-pack count is a power of two dividing the block: a mask).
TORCHTRT_SWISH_HOST_DEVICE uint32_t fwdFixedBiasPack(FwdParams const& prm, uint32_t t)
{
    return t & static_cast<uint32_t>(prm.byPacksPerRow.d - 1);
}

//! kUNIFORM_VEC: the one bias element of pack p.
template <bool kNARROW>
TORCHTRT_SWISH_HOST_DEVICE FwdIdx<kNARROW> fwdUniformBias(FwdParams const& prm, int64_t p)
{
    return fwdMod<kNARROW>(prm.byChannels, fwdDiv<kNARROW>(prm.byPacksPerRow, static_cast<FwdIdx<kNARROW>>(p)));
}

//! kSPAN2: the pack at element i takes bias c for its first `split` elements, c1 (the next channel) after.
struct FwdSpan
{
    uint64_t c;
    uint64_t c1;
    int64_t split;
};

template <bool kNARROW>
TORCHTRT_SWISH_HOST_DEVICE FwdSpan fwdSpan2Bias(FwdParams const& prm, int64_t i)
{
    using I = FwdIdx<kNARROW>;
    using S = std::make_signed_t<I>;
    I const e = static_cast<I>(i);
    I const q = fwdDiv<kNARROW>(prm.byPacksPerRow, e); // plane
    S const split = static_cast<S>(prm.spec.inner) - static_cast<S>(e - q * static_cast<I>(prm.byPacksPerRow.d));
    I const c = fwdMod<kNARROW>(prm.byChannels, q);
    return FwdSpan{c, c + 1 == static_cast<I>(prm.byChannels.d) ? 0 : c + 1, split};
}

//! kPERIODIC: the bias element of element i, and where it is in its run (then fwdPeriodicNext per element).
struct FwdRun
{
    int64_t r;
    int64_t c;
};

TORCHTRT_SWISH_HOST_DEVICE FwdRun fwdPeriodicStart(FwdParams const& prm, int64_t i)
{
    int64_t const q = i / prm.spec.inner;
    return FwdRun{i - q * prm.spec.inner, q % prm.spec.channels};
}

TORCHTRT_SWISH_HOST_DEVICE void fwdPeriodicNext(FwdParams const& prm, FwdRun& run)
{
    if (++run.r == prm.spec.inner)
    {
        run.r = 0;
        if (++run.c == prm.spec.channels)
        {
            run.c = 0;
        }
    }
}

} // namespace detail
} // namespace torchtrt_swish
