// The index math of the fused backward's kernels: which elements a block and a thread touch, and which cell of the
// partial matrix (and of shared memory) each sum lands in. The kernels call these functions and
// tests/backward_plan walks them over the planner's whole decision space on the CPU, so the proof checks the
// formulas the GPU runs, not a copy. Plain C++ (host and device), no CUDA headers.
#pragma once

#include <cstdint>

#include "swish_backward_plan.h"

namespace torchtrt_swish {
namespace detail {

template <typename A>
TORCHTRT_SWISH_HOST_DEVICE A minOf(A a, A b)
{
    return b < a ? b : a;
}

// ---------------------------------------------------------------------------------------------------- rows kernel

//! Block b of the rows kernel: elements [begin, begin + count) of the one run, its sum at partial[b].
struct RowsBlock
{
    int64_t begin;
    int64_t count;
    int64_t cell;
};

TORCHTRT_SWISH_HOST_DEVICE RowsBlock rowsBlock(RowsPlan const& p, uint32_t b)
{
    int64_t const begin = static_cast<int64_t>(b) * p.chunkElems;
    return RowsBlock{begin, minOf(p.chunkElems, p.len - begin), static_cast<int64_t>(b)};
}

//! Pack u of an unrolled backward step starting at pack `base` (swish_backward_step.cuh; the rows kernel's threads
//! start at their index and stride kTHREADS * kUNROLL packs).
TORCHTRT_SWISH_HOST_DEVICE int64_t stepPack(int64_t base, int u)
{
    return base + static_cast<int64_t>(u) * kTHREADS;
}

// ------------------------------------------------------------------------------------------------- columns kernel

//! Block b of the columns kernel: rows [r0, r1) of column tile `tile`; its sums form partial row `rowChunk`.
struct ColsBlock
{
    uint32_t rowChunk;
    uint32_t tile;
    int64_t r0;
    int64_t r1;
};

TORCHTRT_SWISH_HOST_DEVICE ColsBlock colsBlock(ColsPlan const& p, uint32_t b)
{
    auto const tiles32 = static_cast<uint32_t>(p.tiles);
    uint32_t const rowChunk = b / tiles32;
    int64_t const r0 = static_cast<int64_t>(rowChunk) * p.rowsPerBlock;
    return ColsBlock{rowChunk, b - rowChunk * tiles32, r0, minOf(p.rows, r0 + p.rowsPerBlock)};
}

//! Thread t of a columns block: row lane tr (rows r0 + tr, + rowsPerStep, ...), pack tp of the tile, column pack col.
struct ColsThread
{
    int tr;
    int tp;
    int64_t col;
    bool active;
};

TORCHTRT_SWISH_HOST_DEVICE ColsThread colsThread(ColsPlan const& p, uint32_t tile, uint32_t t)
{
    // tilePacks <= kTHREADS: 32-bit division.
    auto const tilePacks32 = static_cast<uint32_t>(p.tilePacks);
    uint32_t const tr = t / tilePacks32;
    uint32_t const tp = t - tr * tilePacks32;
    int64_t const col = static_cast<int64_t>(tile) * p.tilePacks + tp;
    return ColsThread{static_cast<int>(tr), static_cast<int>(tp), col, tr < p.rowsPerStep && col < p.packsPerRow};
}

//! Pack index of (row, column pack) in x, g and dx.
TORCHTRT_SWISH_HOST_DEVICE int64_t colsPack(ColsPlan const& p, int64_t row, int64_t col)
{
    return row * p.packsPerRow + col;
}

//! Whether the block reduces with warp shuffles (a warp holds whole rows of the tile); else a shared-memory tree.
TORCHTRT_SWISH_HOST_DEVICE bool colsShuffles(ColsPlan const& p)
{
    return 32 % p.tilePacks == 0;
}

//! Shuffle reduction: the shared-memory word where warp `warp`'s sum of element k of tile pack `lane` goes.
TORCHTRT_SWISH_HOST_DEVICE int colsWarpSlot(ColsPlan const& p, int warp, int lane, int k, int vec)
{
    return warp * static_cast<int>(p.tilePacks) * vec + lane * vec + k;
}

//! Shuffle reduction: the shared-memory word column sum t adds from warp `warp` (colsWarpSlot's layout).
TORCHTRT_SWISH_HOST_DEVICE int colsSumSlot(ColsPlan const& p, int warp, int t, int vec)
{
    return warp * static_cast<int>(p.tilePacks) * vec + t;
}

//! Grouped: the shared-memory word (a column sum, stored at its column) that group thread t adds j-th.
TORCHTRT_SWISH_HOST_DEVICE int colsGroupSlot(ColsPlan const& p, int t, int j)
{
    return t * static_cast<int>(p.group) + j;
}

//! Shuffle reduction, ungrouped: the partial cell of the column sum thread t of block (rowChunk, tile) writes, or
//! -1 (t past the tile's sums, or the tile's part past the row).
TORCHTRT_SWISH_HOST_DEVICE int64_t colsColumnCell(ColsPlan const& p, uint32_t rowChunk, uint32_t tile, int t, int vec)
{
    int64_t const width = p.tilePacks * vec;
    int64_t const rowLen = p.packsPerRow * vec;
    int64_t const column = static_cast<int64_t>(tile) * width + t;
    return t < width && column < rowLen ? static_cast<int64_t>(rowChunk) * rowLen + column : -1;
}

//! Shuffle reduction, grouped (group > 1 consecutive columns share a bias element): the partial cell of the group
//! sum thread t writes, or -1. Tiles hold whole groups (planGroupedCols); the last tile of a row may hold fewer
//! groups than fit, and its threads past the row's groups write nothing.
TORCHTRT_SWISH_HOST_DEVICE int64_t colsGroupCell(ColsPlan const& p, uint32_t rowChunk, uint32_t tile, int t, int vec)
{
    int64_t const groups = p.tilePacks * vec / p.group;
    int64_t const rowGroups = p.packsPerRow * vec / p.group;
    int64_t const g = static_cast<int64_t>(tile) * groups + t;
    return t < groups && g < rowGroups ? static_cast<int64_t>(rowChunk) * rowGroups + g : -1;
}

//! Tree reduction ([k][row][tilePack] in shared memory): the word of element k of row lane `row`, tile pack tp.
TORCHTRT_SWISH_HOST_DEVICE int colsTreeSlot(ColsPlan const& p, int k, int row, int tp)
{
    return (k * static_cast<int>(p.rowsPerStep) + row) * static_cast<int>(p.tilePacks) + tp;
}

//! Tree reduction: the partial cell of element k of column pack col, written by row lane 0.
TORCHTRT_SWISH_HOST_DEVICE int64_t colsTreeCell(ColsPlan const& p, uint32_t rowChunk, int64_t col, int k, int vec)
{
    return static_cast<int64_t>(rowChunk) * p.packsPerRow * vec + col * vec + k;
}

// -------------------------------------------------------------------------------------------------- planes kernel

//! Block b of the planes kernel: elements [start, start + len) (pack-aligned), holding `planes` whole planes (kSPLIT:
//! piece `piece` of plane q).
struct PlanesBlock
{
    int64_t start;
    int64_t len;
    int64_t planes;
    uint32_t q;
    uint32_t piece;
};

TORCHTRT_SWISH_HOST_DEVICE PlanesBlock planesBlock(PlanesPlan const& p, uint32_t b)
{
    PlanesBlock k{0, 0, 1, 0, 0};
    if (p.shape == PlanesShape::kSPLIT)
    {
        auto const splits32 = static_cast<uint32_t>(p.splits);
        k.q = b / splits32;
        k.piece = b - k.q * splits32;
        int64_t const off = static_cast<int64_t>(k.piece) * p.blockElems;
        k.start = static_cast<int64_t>(k.q) * p.inner + off;
        k.len = minOf(p.blockElems, p.inner - off);
    }
    else
    {
        k.start = static_cast<int64_t>(b) * p.blockElems;
        k.len = minOf(p.blockElems, p.n - k.start);
        k.planes = minOf(p.blockPlanes, p.planes - static_cast<int64_t>(b) * p.blockPlanes);
    }
    return k;
}

//! Pack u of thread t of a planes block (kPLANE_PPT packs a thread, kTHREADS apart).
TORCHTRT_SWISH_HOST_DEVICE int planesPack(int t, int u)
{
    return t + u * kTHREADS;
}

//! The slot (channel or plane) thread t adds in the round starting at slot w0, and its lane within the slot: lanes
//! consecutive threads per slot (a power of two dividing the warp: the xor tree adds them).
TORCHTRT_SWISH_HOST_DEVICE int planesSlot(PlanesPlan const& p, int w0, int t)
{
    return w0 + t / p.lanes;
}

TORCHTRT_SWISH_HOST_DEVICE int planesLane(PlanesPlan const& p, int t)
{
    return t & (p.lanes - 1);
}

//! The next pack lane `lane` adds after pack pk of a plane.
TORCHTRT_SWISH_HOST_DEVICE int planesNextPack(PlanesPlan const& p, int pk)
{
    return pk + p.lanes;
}

//! Of the `count` elements of the pack at block-local element e0, how many lie in the plane e0 is in (its head;
//! the rest, its tail, lie in the next plane: inner >= the pack width).
TORCHTRT_SWISH_HOST_DEVICE int planesHeadCount(PlanesPlan const& p, uint32_t e0, int count)
{
    uint32_t const j = p.byInner.div32(e0);
    return static_cast<int>(minOf(static_cast<uint32_t>(count), static_cast<uint32_t>(p.inner) * (j + 1) - e0));
}

//! Block-local plane j's packs [first, last] (vec elements each).
TORCHTRT_SWISH_HOST_DEVICE int planesFirstPack(PlanesPlan const& p, int64_t j, int vec)
{
    return static_cast<int>(j * p.inner / vec);
}

TORCHTRT_SWISH_HOST_DEVICE int planesLastPack(PlanesPlan const& p, int64_t j, int vec)
{
    return static_cast<int>((j * p.inner + p.inner - 1) / vec);
}

//! Whether plane j takes pack pk's head (the pack starts inside or at the plane) or its tail (it starts before).
TORCHTRT_SWISH_HOST_DEVICE bool planesTakesHead(PlanesPlan const& p, int64_t j, int pk, int vec)
{
    return static_cast<int64_t>(pk) * vec >= j * p.inner;
}

//! kSPLIT: the partial cell of block (q, piece): row o * splits + piece, column c of plane q = o * C + c.
TORCHTRT_SWISH_HOST_DEVICE int64_t planesSplitCell(PlanesPlan const& p, uint32_t q, uint32_t piece)
{
    auto const c32 = static_cast<uint32_t>(p.channels);
    uint32_t const o = q / c32;
    uint32_t const c = q - o * c32;
    return (static_cast<int64_t>(o) * p.splits + piece) * p.channels + c;
}

//! kSAMPLES, kPLANES: the partial cell of slot w of block b (kSAMPLES: row b, channel w; kPLANES: plane
//! b * blockPlanes + w, i.e. row o, channel c), or -1 for a slot past the block's planes.
TORCHTRT_SWISH_HOST_DEVICE int64_t planesSlotCell(PlanesPlan const& p, uint32_t b, int w, int64_t blockPlanes)
{
    bool const written = w < p.slots && (p.shape == PlanesShape::kSAMPLES || w < blockPlanes);
    return written ? static_cast<int64_t>(b) * p.slots + w : -1;
}

// ------------------------------------------------------------------------------------------------ channels kernel

//! Thread t of channels block b: channel c (past the last channel: idle) and its lane in the channel's group.
struct ChannelsThread
{
    int64_t c;
    int lane;
};

TORCHTRT_SWISH_HOST_DEVICE ChannelsThread channelsThread(ChannelsPlan const& p, uint32_t b, int t)
{
    int const shift = log2Pow2(static_cast<uint32_t>(p.threads)); // threads: a power of two (planChannels)
    int64_t const groups = p.blockThreads >> shift;
    return ChannelsThread{static_cast<int64_t>(b) * groups + (t >> shift), t & (p.threads - 1)};
}

//! Column pack u of a lane: lanes take consecutive packs, u a group's width apart (coalesced loads).
TORCHTRT_SWISH_HOST_DEVICE int channelsColumnPack(ChannelsPlan const& p, int lane, int u)
{
    return lane + u * p.threads;
}

//! The column pack a lane loads as its u-th: its own, or past the column's end the last one (loads are unguarded).
TORCHTRT_SWISH_HOST_DEVICE int channelsLoadPack(ChannelsPlan const& p, int lane, int u)
{
    return minOf(channelsColumnPack(p, lane, u), p.columnPacks - 1);
}

static_assert(kCHANNELS_MOST < (int64_t{1} << 31), "channelsPack: div31 takes dividends and divisors below 2^31");

//! Where column pack j of channel c lies in x, g and dx, in packs: sample o = j / innerPacks, its plane o * C + c
//! (31 bits: the tensor has at most kCHANNELS_MOST elements, so div31's magic fits and needs no carry).
TORCHTRT_SWISH_HOST_DEVICE uint32_t channelsPack(ChannelsPlan const& p, int64_t c, int j)
{
    auto const ip = static_cast<uint32_t>(p.innerPacks);
    uint32_t const o = p.byInner.div31(static_cast<uint32_t>(j));
    return (o * static_cast<uint32_t>(p.channels) + static_cast<uint32_t>(c)) * ip + (static_cast<uint32_t>(j) - o * ip);
}

//! Shared word of warp w of a block (its sum); the group's first warp reads its group's words, lane l word
//! channelsGroupWord(t, l) for l < threads / 32.
TORCHTRT_SWISH_HOST_DEVICE int channelsGroupWord(ChannelsPlan const& p, int t, int l)
{
    return t / p.threads * (p.threads / 32) + l;
}

// ---------------------------------------------------------------------------------------------------- column sums

//! One launch of the column sums over in[rows][C]: a grid of blocks x slices, each block colsPer columns of rows
//! [y * sliceRows, +sliceRows), its sums at out[y][c].
struct SumStage
{
    SumShape shape;
    int64_t rows;
    int64_t sliceRows;
    unsigned slices;
    int64_t inOffset;  // floats into the workspace
    int64_t outOffset; // floats into the workspace, or -1: dbias
};

//! The plan's column-sum launches: none (the main kernel wrote dbias), one, or two over row slices (planSums).
inline int sumStages(FusedPlan const& plan, SumStage (&stages)[2])
{
    int64_t const R = plan.partialRows;
    int64_t const C = plan.channels;
    if (plan.sumSlices == 0)
    {
        return 0;
    }
    if (plan.sumSlices > 1)
    {
        int64_t const sliceRows = (R + plan.sumSlices - 1) / plan.sumSlices;
        auto const slices = static_cast<unsigned>(plan.sumSlices);
        stages[0] = SumStage{sumShape(sliceRows, C, kSUM_SLICE_LANE_ROWS), R, sliceRows, slices, 0, R * C};
        stages[1] = SumStage{sumShape(plan.sumSlices, C, kSUM_LANE_ROWS), plan.sumSlices, plan.sumSlices, 1, R * C,
            -1};
        return 2;
    }
    stages[0] = SumStage{sumShape(R, C, kSUM_LANE_ROWS), R, R, 1, 0, -1};
    return 1;
}

//! Thread `thread` of column-sum block (bx, by) with colsPer columns a block and `lanes` row lanes: column c, and
//! rows r0 + ty, + lanes, ... below r1.
struct SumThread
{
    int tx;
    int ty;
    int64_t c;
    int64_t r0;
    int64_t r1;
};

TORCHTRT_SWISH_HOST_DEVICE SumThread sumThread(int shift, int thread, uint32_t bx, uint32_t by, int64_t rows,
    int64_t sliceRows)
{
    // colsPer = 1 << shift: shifts, not the ~20 instructions of a run-time division each.
    int const colsPer = 1 << shift;
    int64_t const r0 = static_cast<int64_t>(by) * sliceRows;
    return SumThread{thread & (colsPer - 1), thread >> shift, static_cast<int64_t>(bx) * colsPer + (thread & (colsPer - 1)),
        r0, minOf(rows, r0 + sliceRows)};
}

//! Row k of a column-sum thread's first kSUM_MAX_LANE_ROWS (then every lanes-th after them).
TORCHTRT_SWISH_HOST_DEVICE int64_t sumRow(SumThread const& th, int k, int lanes)
{
    return th.r0 + th.ty + static_cast<int64_t>(k) * lanes;
}

//! The shared-memory word of warp `warp`'s sum of the block's column tx (kFINAL_THREADS / 32 * 8 words).
TORCHTRT_SWISH_HOST_DEVICE int sumWarpSlot(int warp, int colsPer, int tx)
{
    return warp * colsPer + tx;
}

} // namespace detail
} // namespace torchtrt_swish
