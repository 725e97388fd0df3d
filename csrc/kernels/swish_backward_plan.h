// Host-side planning of the fused backward (swish_backward_fused.cu): which kernel, which pack width and block
// shape a layout gets, how many partial sums it writes and how they are added, and the workspace that takes.
//
// Plain C++, header-only: no CUDA. Everything the planner depends on besides the shape (the pointers' alignment,
// the multiprocessor count) is an argument, so tests/backward_plan can check the
// choices without a GPU. The kernels read these structs as their launch parameters.
//
// Every block of the main kernel writes fp32 partial sums of g to a workspace laid out as a matrix partial[R][C]
// (C = bias elements), and dbias[c] is the sum of column c, added in a fixed order (deterministic, no
// floating-point atomics). Four shapes of the main work, all views of x as [outer, C, inner]: "rows" (a scalar
// bias: the tensor is one run), "planes" (inner > 1: per-channel on dim 1, blocks before the last dim), "columns"
// (inner == 1: per-channel on the last dim, full, trailing blocks; and short planes of fp16/bf16 as groups of
// columns, planGroupedCols; a columns plan whose blocks each take every row writes dbias itself) and "channels"
// (inner > 1 in small tensors: a group of threads per channel adds its column over all samples and writes dbias
// itself, with no partial matrix and no column-sum launch).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>

#include "bias_layout.h"
#include "launch_common.h"

namespace torchtrt_swish {
namespace detail {

// Elements one block of the rows kernel reduces: enough work per block to amortize its partial write.
constexpr int64_t kROW_CHUNK_PACKS = static_cast<int64_t>(kTHREADS) * kUNROLL * 2;
// Elements per block in the columns kernel.
constexpr int64_t kCOL_BLOCK_ELEMS = 65536; // amortizes the per-block reduction and partial write
constexpr int64_t kCOL_BLOCKS_PER_SM = 3;    // the columns kernel's resident blocks (kMIN_BLOCKS)
constexpr int64_t kSECTOR_BYTES = 32;        // one L2 sector: the narrowest column tile that wastes no load
constexpr int64_t kWHOLE_COLUMN_ELEMS = 16;  // a thread's elements over whole columns (32 in fp16/bf16 were slower)
constexpr int kFINAL_THREADS = 1024;
constexpr int kPLANE_PPT = 4;
constexpr int kPLANE_PACKS = kTHREADS * kPLANE_PPT; // packs per block of the planes kernel at the most
constexpr int kCHANNEL_ELEMS = 16;     // elements a thread of the channels kernel loads of x and of g (one round)
constexpr int kCHANNEL_THREADS = 1024; // threads per channel at the most
constexpr int kCHANNEL_BLOCK = 128;    // threads per block at the least (one-warp groups share a block)
// The channels kernel's tensors: it saves the column sums' launch, which counts at launch-bound sizes only (larger
// tensors lost to the planes kernel), and its pack offsets fit 32 bits; with fewer channels most SMs idle (16 is the
// fewest measured). Measurements: docs/performance-notes.md, "The channels kernel".
constexpr int64_t kCHANNELS_MOST = int64_t{1} << 22;
constexpr int64_t kCHANNELS_FEWEST = 16;

//! Packs a thread of the channels kernel loads (of x and of g), packs of vec elements.
TORCHTRT_SWISH_HOST_DEVICE constexpr int channelThreadPacks(int vec)
{
    return kCHANNEL_ELEMS / vec;
}

// A scalar bias: the whole tensor is one run, split in chunks of chunkElems (whole packs), one block each.
struct RowsPlan
{
    int64_t len; // n
    int64_t chunks;
    int64_t chunkElems;
};

struct ColsPlan
{
    int64_t rows;         // outer
    int64_t packsPerRow;  // C / kVEC
    int64_t tilePacks;    // packs of one column tile (<= kTHREADS)
    int64_t tiles;        // column tiles
    int64_t rowsPerStep;  // kTHREADS / tilePacks
    int64_t rowsPerBlock; // multiple of rowsPerStep
    int64_t rowChunks;
    int64_t group;        // consecutive columns that share one bias element (1: a bias per column)
};

// Block shapes of the planes kernel (swish_backward_planes.cu):
//   kSAMPLES: m whole samples ([C, inner] each): C sums per block, partial[block][c] (small planes: few partials);
//   kPLANES:  k whole planes: one sum per plane, at its plane index, i.e. partial[o][c];
//   kSPLIT:   planes longer than a block, split in `splits` pieces: partial[o * splits + s][c].
enum class PlanesShape : int { kSAMPLES, kPLANES, kSPLIT };

struct PlanesPlan
{
    int64_t n;
    int64_t inner;
    int64_t channels;
    int64_t planes;      // n / inner
    int64_t blockElems;  // elements per block (the last one may have fewer)
    int64_t blockPlanes; // kSAMPLES, kPLANES: whole planes per block
    int64_t splits;      // kSPLIT: blocks per plane
    int32_t slots;       // kSAMPLES: C; kPLANES: blockPlanes
    int32_t lanes;       // threads per slot in the block's reduction (a power of two <= 32)
    PlanesShape shape;
    FastDiv byInner;     // block-local element -> block-local plane
};

// Whole channels (swish_backward_channels.cu): a group of `threads` threads (whole warps) per channel takes the
// channel's column, its plane of every sample (columnPacks packs), in one round of loads, writes dx, and adds the
// column by shuffles (and one shared word per warp where the group has several) into dbias itself: one launch, no
// partial matrix.
struct ChannelsPlan
{
    int64_t channels;
    int64_t innerPacks;   // packs per plane
    int32_t columnPacks;  // outer * innerPacks <= threads * channelThreadPacks(vec)
    int32_t threads;      // per channel: a power of two, 32 ... kCHANNEL_THREADS
    int32_t blockThreads; // a group per block, or several groups of one warp (kCHANNEL_BLOCK threads)
    FastDiv byInner;      // column pack -> sample
};

enum class FusedKind : int { kNONE, kROWS, kCOLS, kPLANES, kCHANNELS };

struct FusedPlan
{
    FusedKind kind{FusedKind::kNONE};
    int vec{1};
    RowsPlan rows{};
    ColsPlan cols{};
    PlanesPlan planes{};
    ChannelsPlan chan{};
    int64_t channels{1};
    int64_t partialRows{0}; // R of the partial matrix [R][channels]
    int64_t sumSlices{1};   // > 1: two column-sum stages over this many row slices; 0: none (colsWritesBias, kCHANNELS)
    size_t workspace{0};
};


//! Whether a columns plan's blocks each take every row (one row chunk): their sums are dbias, written by the main
//! kernel, and no column sums follow.
TORCHTRT_SWISH_HOST_DEVICE bool colsWritesBias(ColsPlan const& c)
{
    return c.rowChunks == 1;
}

// Column tiles of the columns kernel: 8 packs (128 bytes of a row, whole sectors) when the row divides into them,
// so a block spans the most rows and writes the fewest partial sums; otherwise the whole row (up to a block) or
// 32-pack tiles (measured: docs/performance-notes.md).
inline int64_t colTilePacks(int64_t packsPerRow)
{
    if (packsPerRow % 8 == 0)
    {
        return 8;
    }
    return packsPerRow <= kTHREADS ? packsPerRow : 32;
}

// rowLen: elements per row (C for a bias on the last dim, C * inner for grouped columns); group: columns per bias
// element (planGroupedCols).
inline void planCols(FusedPlan& plan, int64_t n, int64_t rowLen, int64_t group, bool aligned, int vw, int sms)
{
    ColsPlan& c = plan.cols;
    plan.vec = aligned && rowLen % vw == 0 ? vw : 1;
    // About three blocks per SM for small tensors (the most that stay resident, so the most loads in flight),
    // rounded up so the grid fits in one wave (a second, partial wave is mostly idle), 64K elements per block at the
    // most. fp16/bf16 tensors so small that even blocks of 8-byte packs sit at their floor (a pack a thread) take
    // those: twice the blocks for the same packs a thread (where 8-byte packs only halved the pack, they lost:
    // performance notes).
    int64_t const want = n / (kCOL_BLOCKS_PER_SM * sms);
    if (plan.vec == vecWidth(DType::kFLOAT16) && group == 1 && want < kTHREADS * plan.vec / 2)
    {
        plan.vec = 4;
    }
    c.group = group;
    c.packsPerRow = rowLen / plan.vec;
    int64_t const blockElems = std::clamp<int64_t>(want, kTHREADS * plan.vec, kCOL_BLOCK_ELEMS);
    c.tilePacks = colTilePacks(c.packsPerRow);
    c.tiles = (c.packsPerRow + c.tilePacks - 1) / c.tilePacks;
    c.rowsPerStep = kTHREADS / c.tilePacks;
    int64_t const perStep = c.rowsPerStep * c.tilePacks * plan.vec;
    int64_t const steps = std::max<int64_t>(1, (blockElems + perStep - 1) / perStep);
    c.rowsPerBlock = c.rowsPerStep * steps;
    c.rowChunks = (c.rows + c.rowsPerBlock - 1) / c.rowsPerBlock;
    // Few rows of many columns (channels_last late stages at small batches): a block per 32-byte tile of every row,
    // in one round of at most kWHOLE_COLUMN_ELEMS elements a thread, when that still gives every SM a block. Its sums
    // are then dbias: no partial matrix and no column-sum launch, whose wait and latency took longer than the sums
    // (performance notes, b1 and b2).
    int64_t const sectorPacks = std::max<int64_t>(1, kSECTOR_BYTES / (16 / vw * plan.vec)); // 16 / vw: element bytes
    int64_t const sectorSteps = (c.rows + kTHREADS / sectorPacks - 1) / (kTHREADS / sectorPacks);
    if (c.rowChunks > 1 && group == 1 && plan.vec > 1 && c.packsPerRow % sectorPacks == 0 && sectorSteps <= kUNROLL
        && sectorSteps * plan.vec <= kWHOLE_COLUMN_ELEMS && c.packsPerRow / sectorPacks >= sms)
    {
        c.tilePacks = sectorPacks;
        c.tiles = c.packsPerRow / sectorPacks;
        c.rowsPerStep = kTHREADS / sectorPacks;
        c.rowsPerBlock = c.rowsPerStep * sectorSteps;
        c.rowChunks = 1;
    }
    plan.partialRows = c.rowChunks;
}

// Short planes in half types as grouped columns: x viewed as [outer, C * inner] rows whose columns come in groups of
// `inner` that share a bias element. Each thread keeps its column's sum over many rows in registers and the block
// adds the groups once, where the planes kernel spends a reduction per block of a few samples; fp16 and bf16 carry
// twice the elements per byte of fp32, and that reduction makes them issue-bound, while fp32 streams at the floor
// through the planes kernel (docs/performance-notes.md). Needs whole packs per plane and tiles of whole planes whose
// warps hold whole rows (the shuffle reduction of the columns kernel).
inline bool planGroupedCols(FusedPlan& plan, int64_t n, BiasSpec spec, bool aligned, int vw, int sms)
{
    int64_t const rowLen = spec.channels * spec.inner;
    if (vw != vecWidth(DType::kFLOAT16) || !aligned || spec.inner % vw != 0) // fp16 and bf16 only
    {
        return false;
    }
    int64_t const tilePacks = colTilePacks(rowLen / vw);
    // Fewer rows than a block steps over at once would leave most of its threads idle.
    if (32 % tilePacks != 0 || (tilePacks * vw) % spec.inner != 0 || n / rowLen < kTHREADS / tilePacks)
    {
        return false;
    }
    plan.cols.rows = n / rowLen;
    planCols(plan, n, rowLen, spec.inner, aligned, vw, sms);
    return true;
}

// Whole-channel plan (swishBackwardChannelsKernel): the widest packs that divide a plane (16 bytes at the most), and
// the fewest threads per channel (whole warps, a power of two) that load its column in one round; false where that
// takes more than kCHANNEL_THREADS, or the tensor has more than kCHANNELS_MOST elements or fewer than
// kCHANNELS_FEWEST channels.
inline bool planChannels(FusedPlan& plan, int64_t n, BiasSpec spec, bool aligned, int vw)
{
    if (n > kCHANNELS_MOST || spec.channels < kCHANNELS_FEWEST)
    {
        return false;
    }
    int64_t const outer = n / (spec.channels * spec.inner);
    int vec = aligned ? vw : 1;
    while (spec.inner % vec != 0)
    {
        vec /= 2;
    }
    int64_t const column = outer * spec.inner / vec;
    int64_t const perThread = channelThreadPacks(vec);
    int64_t threads = 32;
    while (threads * perThread < column && threads < kCHANNEL_THREADS)
    {
        threads *= 2;
    }
    if (threads * perThread < column)
    {
        return false;
    }
    ChannelsPlan& c = plan.chan;
    plan.vec = vec;
    c.channels = spec.channels;
    c.innerPacks = spec.inner / vec;
    c.columnPacks = static_cast<int32_t>(column);
    c.threads = static_cast<int32_t>(threads);
    c.blockThreads = static_cast<int32_t>(std::max<int64_t>(threads, kCHANNEL_BLOCK));
    c.byInner = FastDiv::make(c.innerPacks);
    plan.partialRows = 1; // the "partial matrix" is dbias
    return true;
}

// Planes-kernel plan (swishBackwardPlanesKernel): the widest packs whose blocks can start on plane boundaries, and
// the block shape that writes the fewest partial sums.
inline void planPlanes(FusedPlan& plan, int64_t n, BiasSpec spec, bool aligned, int vw, int sms)
{
    PlanesPlan& p = plan.planes;
    int64_t const inner = spec.inner;
    int64_t const sample = spec.channels * inner;
    p.n = n;
    p.inner = inner;
    p.channels = spec.channels;
    p.planes = n / inner;
    p.splits = 1;
    for (int64_t vec = aligned && inner >= vw ? vw : 1;; vec = 1)
    {
        int64_t const most = int64_t{kPLANE_PACKS} * vec;
        // About two blocks per SM for small tensors, as the rows kernel; whole packs; one block at the most.
        // A plane longer than that is split even where a block could hold it, so that a small tensor fills the SMs.
        int64_t const want = std::clamp<int64_t>(n / (2 * sms) / vec * vec, int64_t{kTHREADS} * vec, most);
        int64_t const planeGroup = vec / std::gcd(inner, vec);   // planes that add up to whole packs
        int64_t const sampleGroup = vec / std::gcd(sample, vec); // samples that add up to whole packs
        if (sampleGroup * sample <= want)
        {
            int64_t const m = want / sample / sampleGroup * sampleGroup;
            p.shape = PlanesShape::kSAMPLES;
            p.blockPlanes = m * spec.channels;
            p.slots = static_cast<int32_t>(spec.channels);
        }
        else if (planeGroup * inner <= most && (planeGroup * inner <= want || inner % vec != 0))
        {
            p.shape = PlanesShape::kPLANES;
            p.blockPlanes = std::max(planeGroup, want / inner / planeGroup * planeGroup);
            p.slots = static_cast<int32_t>(p.blockPlanes);
        }
        else if (inner % vec == 0)
        {
            // Even pieces of whole packs; recounted so that no piece is empty.
            int64_t const splits = (inner + want - 1) / want;
            p.shape = PlanesShape::kSPLIT;
            p.blockPlanes = 0;
            p.blockElems = ((inner + splits - 1) / splits + vec - 1) / vec * vec;
            p.splits = (inner + p.blockElems - 1) / p.blockElems;
            p.slots = 1;
        }
        else
        {
            continue; // vec > 1 here: single elements always divide
        }
        if (p.shape != PlanesShape::kSPLIT)
        {
            p.blockElems = p.blockPlanes * inner;
        }
        plan.vec = static_cast<int>(vec);
        break;
    }
    int64_t const perPlane = inner / plan.vec + 1; // packs a plane touches at the most
    p.lanes = 1;
    while (p.lanes < 32 && p.lanes * 2 * p.slots <= kTHREADS && p.lanes < perPlane)
    {
        p.lanes *= 2;
    }
    p.byInner = FastDiv::make(inner);
    int64_t const outer = n / sample;
    plan.partialRows = p.shape == PlanesShape::kSAMPLES ? (p.planes + p.blockPlanes - 1) / p.blockPlanes
        : p.shape == PlanesShape::kPLANES               ? outer
                                                        : outer * p.splits;
}

// A thread of the column sums loads its rows at once and adds them in order. A one-stage sum gives each about
// kSUM_LANE_ROWS rows: with one row a thread the launch is spent in warps that each add one value. Past
// kSUM_MAX_LANE_ROWS rows per thread in the widest block a tall partial matrix (small planes in a large tensor) takes
// longer to add up than to write, so it is summed in two stages, the first over row slices of kSUM_SLICE_LANE_ROWS
// rows per thread in parallel blocks (measurements: docs/performance-notes.md).
constexpr int64_t kSUM_LANE_ROWS = 4;
constexpr int64_t kSUM_MAX_LANE_ROWS = 8;
constexpr int64_t kSUM_SLICE_LANE_ROWS = 4;
static_assert(kSUM_LANE_ROWS <= kSUM_MAX_LANE_ROWS, "planSums: one stage only when the lanes are capped");

// Column-sum launch: colsPer columns per block (a power of two <= 8) and a power of two of row lanes for about
// laneRows rows each (at least one warp, at most kFINAL_THREADS threads).
struct SumShape
{
    int colsPer;
    int threads;
    unsigned blocks;
};

inline SumShape sumShape(int64_t rows, int64_t channels, int64_t laneRows)
{
    SumShape s{1, 0, 0};
    while (s.colsPer < 8 && s.colsPer < channels)
    {
        s.colsPer *= 2;
    }
    int64_t const want = (rows + laneRows - 1) / laneRows;
    int lanes = 1;
    while (lanes < want && lanes * s.colsPer < kFINAL_THREADS)
    {
        lanes *= 2;
    }
    s.threads = std::max(lanes * s.colsPer, 32);
    s.blocks = gridBlocks((channels + s.colsPer - 1) / s.colsPer);
    return s;
}

inline void planSums(FusedPlan& plan)
{
    if (plan.kind == FusedKind::kCHANNELS || (plan.kind == FusedKind::kCOLS && colsWritesBias(plan.cols)))
    {
        plan.sumSlices = 0;
        plan.workspace = 0;
        return;
    }
    int64_t const R = plan.partialRows;
    SumShape const one = sumShape(R, plan.channels, kSUM_LANE_ROWS);
    int64_t const lanes = one.threads / one.colsPer;
    plan.sumSlices = 1;
    if (R > kSUM_MAX_LANE_ROWS * lanes)
    {
        int64_t const sliceRows = std::max<int64_t>(kSUM_SLICE_LANE_ROWS * lanes, (R + 65534) / 65535);
        plan.sumSlices = (R + sliceRows - 1) / sliceRows;
    }
    plan.workspace = static_cast<size_t>((R + (plan.sumSlices > 1 ? plan.sumSlices : 0)) * plan.channels)
        * sizeof(float);
}

// The fused backward's plan for n elements of dtype with this bias, or kind kNONE when it has no fused path.
// aligned: g, x and dx all start on 16 bytes; sms: multiprocessors of the device.
inline FusedPlan planFused(DType dtype, int64_t n, BiasSpec spec, bool aligned, int sms)
{
    FusedPlan plan;
    if (n <= 0 || spec.channels < 1 || spec.inner < 1 || n % (spec.channels * spec.inner) != 0)
    {
        return plan;
    }
    int const vw = vecWidth(dtype);
    int64_t const outer = n / (spec.channels * spec.inner);
    plan.channels = spec.channels;
    if (spec.channels == 1)
    {
        RowsPlan& r = plan.rows;
        r.len = n;
        plan.vec = aligned ? vw : 1; // one run: the tail of a length that is not whole packs is the last chunk's
        // Aim for at least two blocks per SM, one pack per thread at the least, kROW_CHUNK_PACKS at the most.
        int64_t const want = (n / plan.vec + 2 * sms - 1) / (2 * sms);
        int64_t const chunkPacks = std::clamp<int64_t>((want + kTHREADS - 1) / kTHREADS * kTHREADS, kTHREADS,
            kROW_CHUNK_PACKS);
        r.chunkElems = chunkPacks * plan.vec;
        r.chunks = (r.len + r.chunkElems - 1) / r.chunkElems;
        plan.kind = FusedKind::kROWS;
        plan.partialRows = r.chunks;
    }
    else if (spec.inner == 1)
    {
        plan.cols.rows = outer;
        planCols(plan, n, spec.channels, 1, aligned, vw, sms);
        plan.kind = FusedKind::kCOLS;
    }
    else if (planGroupedCols(plan, n, spec, aligned, vw, sms))
    {
        plan.kind = FusedKind::kCOLS;
    }
    else if (planChannels(plan, n, spec, aligned, vw))
    {
        plan.kind = FusedKind::kCHANNELS;
    }
    else
    {
        planPlanes(plan, n, spec, aligned, vw, sms);
        plan.kind = FusedKind::kPLANES;
    }
    planSums(plan);
    return plan;
}

// Blocks of the plan's main kernel (the grid is gridBlocks of it).
inline int64_t mainBlocks(FusedPlan const& plan)
{
    PlanesPlan const& pp = plan.planes;
    ChannelsPlan const& cp = plan.chan;
    return plan.kind == FusedKind::kROWS ? plan.rows.chunks
        : plan.kind == FusedKind::kCOLS  ? plan.cols.rowChunks * plan.cols.tiles
        : plan.kind == FusedKind::kCHANNELS ? (cp.channels * cp.threads + cp.blockThreads - 1) / cp.blockThreads
        : pp.shape == PlanesShape::kSPLIT ? pp.planes * pp.splits
                                          : (pp.planes + pp.blockPlanes - 1) / pp.blockPlanes;
}

//! The plan's family by name: "rows", "cols", "grouped_cols", "planes_samples", "planes_planes", "planes_split",
//! "channels" or "none" (the doctor's switch points and the planner's tests use these names).
inline char const* planFamily(FusedPlan const& plan)
{
    switch (plan.kind)
    {
    case FusedKind::kROWS: return "rows";
    case FusedKind::kCOLS: return plan.cols.group > 1 ? "grouped_cols" : "cols";
    case FusedKind::kCHANNELS: return "channels";
    case FusedKind::kPLANES:
        return plan.planes.shape == PlanesShape::kSAMPLES ? "planes_samples"
            : plan.planes.shape == PlanesShape::kPLANES   ? "planes_planes"
                                                          : "planes_split";
    case FusedKind::kNONE: break;
    }
    return "none";
}

// What swishBackwardFusedWorkspace reports for a plan: 0 (the API's "no fused path") without one, else at least one
// float.
inline size_t fusedWorkspaceBytes(FusedPlan const& plan)
{
    return plan.kind == FusedKind::kNONE ? 0 : std::max<size_t>(plan.workspace, sizeof(float));
}

} // namespace detail
} // namespace torchtrt_swish
