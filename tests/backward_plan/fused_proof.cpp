// The fused backward's kernels walked on the CPU: for one plan, every block and thread of the main kernel and of the
// column sums, through the index functions the kernels call (csrc/kernels/swish_backward_index.h). Checks that
// every access is inside its buffer (x, g, dx, the workspace, shared memory), that every dx element is written once,
// that every g element is summed once into a partial cell of its own bias element, that every partial cell is
// written once before the sums read it, that every dbias element is written once, and that grids fit their limits.
// A plan without column sums (sumStages: none) has its main kernel write dbias: its "partial matrix" is dbias, one
// row, and needs no workspace.
#include "proof.h"

#include <algorithm>
#include <climits>
#include <vector>

#include "kernels/swish_backward_index.h"

namespace torchtrt_swish {
namespace proof {
namespace {

using namespace detail;

// Where each element's g went and what was written, for one plan.
struct Trace
{
    Trace(int64_t n, int64_t cells) : dxWrites(n, 0), cellOf(n, -1), cellWrites(cells, 0) {}
    std::vector<uint8_t> dxWrites;
    std::vector<int64_t> cellOf; // partial cell the element's g is summed into
    std::vector<uint8_t> cellWrites;
};

class FusedProof
{
public:
    FusedProof(FusedPlan const& plan, int64_t n, BiasSpec spec, Report& report)
        : mPlan(plan), mN(n), mSpec(spec), mR(report), mCells(plan.partialRows * plan.channels), mT(n, mCells)
    {
    }

    void run()
    {
        int64_t const blocks = mainBlocks(mPlan);
        if (blocks < 1 || blocks > INT_MAX)
        {
            return mR.fail("main grid of " + std::to_string(blocks) + " blocks");
        }
        if (sumsInMain() ? mPlan.partialRows != 1 : static_cast<size_t>(mCells) * sizeof(float) > mPlan.workspace)
        {
            return mR.fail("partial matrix " + std::to_string(mCells) + " floats past the workspace of "
                + std::to_string(mPlan.workspace) + " bytes" + (sumsInMain() ? ", or not dbias" : ""));
        }
        for (int64_t b = 0; b < blocks && mR.ok(); ++b)
        {
            auto const b32 = static_cast<uint32_t>(b);
            switch (mPlan.kind)
            {
            case FusedKind::kROWS: rowsBlockWalk(b32); break;
            case FusedKind::kCOLS: colsBlockWalk(b32); break;
            case FusedKind::kPLANES: planesBlockWalk(b32); break;
            case FusedKind::kCHANNELS: channelsBlockWalk(b32); break;
            case FusedKind::kNONE: return mR.fail("no fused plan");
            }
        }
        if (!mR.ok())
        {
            return;
        }
        checkMain();
        if (mR.ok())
        {
            sums();
        }
    }

    //! The column sums alone, over a partial matrix the main kernel is taken to have written whole.
    void runSums()
    {
        sums();
    }

private:
    bool sumsInMain() const
    {
        SumStage stages[2];
        return sumStages(mPlan, stages) == 0;
    }

    // dx element i written, its g summed into `cell`.
    void element(int64_t i, int64_t cell)
    {
        if (i < 0 || i >= mN)
        {
            return mR.fail("element " + std::to_string(i) + " outside x of " + std::to_string(mN));
        }
        if (++mT.dxWrites[i] > 1)
        {
            return mR.fail("dx[" + std::to_string(i) + "] written twice");
        }
        mT.cellOf[i] = cell;
    }

    void cellWrite(int64_t cell, char const* what)
    {
        if (cell < 0 || cell >= mCells)
        {
            return mR.fail(std::string(what) + " writes partial cell " + std::to_string(cell) + " outside the "
                + std::to_string(mPlan.partialRows) + " x " + std::to_string(mPlan.channels) + " matrix");
        }
        if (++mT.cellWrites[cell] > 1)
        {
            mR.fail(std::string(what) + " writes partial cell " + std::to_string(cell) + " twice");
        }
    }

    void rowsBlockWalk(uint32_t b)
    {
        int const vec = mPlan.vec;
        RowsBlock const blk = rowsBlock(mPlan.rows, b);
        if (blk.begin % vec != 0 || blk.count < 1)
        {
            return mR.fail("rows block " + std::to_string(b) + " starts at " + std::to_string(blk.begin)
                + " with " + std::to_string(blk.count) + " elements");
        }
        int64_t const nPacks = blk.count / vec;
        for (int t = 0; t < kTHREADS; ++t)
        {
            for (int64_t base = t; base < nPacks; base += static_cast<int64_t>(kTHREADS) * kUNROLL)
            {
                for (int u = 0; u < kUNROLL; ++u)
                {
                    int64_t const p = stepPack(base, u);
                    for (int k = 0; p < nPacks && k < vec; ++k)
                    {
                        element(blk.begin + p * vec + k, blk.cell);
                    }
                }
            }
            for (int64_t i = nPacks * vec + t; i < blk.count; i += kTHREADS)
            {
                element(blk.begin + i, blk.cell);
            }
        }
        cellWrite(blk.cell, "rows block");
    }

    // The kernel's shuffle reduction: xor offsets tilePacks, 2 tilePacks, ... below 32 must add exactly the lanes
    // of a warp that hold the same tile pack, and lane l < tilePacks must hold tile pack l (it writes that slot).
    bool shuffleTreeHolds(ColsPlan const& c, uint32_t tile)
    {
        int const tilePacks = static_cast<int>(c.tilePacks);
        for (int w = 0; w < kWARPS; ++w)
        {
            uint32_t reach[32];
            int tp[32];
            for (int l = 0; l < 32; ++l)
            {
                reach[l] = 1U << l;
                tp[l] = colsThread(c, tile, static_cast<uint32_t>(w * 32 + l)).tp;
            }
            for (int o = tilePacks; o < 32; o *= 2)
            {
                uint32_t next[32];
                for (int l = 0; l < 32; ++l)
                {
                    next[l] = reach[l] | reach[l ^ o];
                }
                std::copy(next, next + 32, reach);
            }
            for (int l = 0; l < 32; ++l)
            {
                uint32_t same = 0;
                for (int m = 0; m < 32; ++m)
                {
                    same |= tp[m] == tp[l] ? 1U << m : 0U;
                }
                if (reach[l] != same || (l < tilePacks && tp[l] != l))
                {
                    mR.fail("columns shuffle: lane " + std::to_string(l) + " of warp " + std::to_string(w)
                        + " adds other lanes than those of its tile pack (" + std::to_string(tilePacks) + "-pack tiles)");
                    return false;
                }
            }
        }
        return true;
    }

    void colsBlockWalk(uint32_t b)
    {
        ColsPlan const& c = mPlan.cols;
        int const vec = mPlan.vec;
        ColsBlock const blk = colsBlock(c, b);
        if (blk.rowChunk >= c.rowChunks || blk.tile >= c.tiles || blk.r0 >= blk.r1)
        {
            return mR.fail("columns block " + std::to_string(b) + ": row chunk " + std::to_string(blk.rowChunk)
                + ", tile " + std::to_string(blk.tile) + ", rows [" + std::to_string(blk.r0) + ", "
                + std::to_string(blk.r1) + ")");
        }
        int const words = kTHREADS * vec; // the kernel's shared memory
        std::vector<int64_t> wordCell(words, -1);
        int const width = static_cast<int>(c.tilePacks) * vec;
        bool const shuffles = colsShuffles(c);
        if (shuffles && !shuffleTreeHolds(c, blk.tile))
        {
            return;
        }
        if (shuffles)
        {
            // Column sum t adds word w * width + t of every warp; ungrouped it is cell colsColumnCell, grouped it is
            // copied to smem[t] and group thread t' adds smem[t' * group + j].
            std::vector<int64_t> sumCell(kTHREADS, -1);
            if (c.group == 1)
            {
                for (int t = 0; t < kTHREADS; ++t)
                {
                    int64_t const cell = colsColumnCell(c, blk.rowChunk, blk.tile, t, vec);
                    if (cell >= 0)
                    {
                        if (t >= width)
                        {
                            return mR.fail("columns thread " + std::to_string(t) + " writes a sum it has not added");
                        }
                        sumCell[t] = cell;
                        cellWrite(cell, "columns block");
                    }
                }
            }
            else
            {
                for (int t = 0; t < kTHREADS; ++t)
                {
                    int64_t const cell = colsGroupCell(c, blk.rowChunk, blk.tile, t, vec);
                    if (cell < 0)
                    {
                        continue;
                    }
                    for (int j = 0; j < static_cast<int>(c.group); ++j)
                    {
                        int64_t const w = colsGroupSlot(c, t, j);
                        if (w >= width || sumCell[w] >= 0)
                        {
                            return mR.fail("grouped columns: group thread " + std::to_string(t) + " reads sum "
                                + std::to_string(w) + " of " + std::to_string(width));
                        }
                        sumCell[w] = cell;
                    }
                    cellWrite(cell, "grouped columns block");
                }
            }
            for (int w = 0; w < kWARPS; ++w)
            {
                for (int t = 0; t < width; ++t)
                {
                    int const word = colsSumSlot(c, w, t, vec);
                    if (word < 0 || word >= words || wordCell[word] != -1)
                    {
                        return mR.fail("columns: column sum " + std::to_string(t) + " reads shared word "
                            + std::to_string(word) + " of another sum or outside the block's");
                    }
                    wordCell[word] = sumCell[t];
                }
            }
        }
        else
        {
            if (c.group != 1)
            {
                return mR.fail("grouped columns without whole rows per warp");
            }
            // The tree adds row lanes (k, tr, tp) into (k, 0, tp), which row lane 0 writes.
            for (int t = 0; t < kTHREADS; ++t)
            {
                ColsThread const th = colsThread(c, blk.tile, t);
                if (th.tr != 0 || th.col >= c.packsPerRow)
                {
                    continue;
                }
                for (int k = 0; k < vec; ++k)
                {
                    int64_t const cell = colsTreeCell(c, blk.rowChunk, th.col, k, vec);
                    wordCell[colsTreeSlot(c, k, 0, th.tp)] = cell;
                    cellWrite(cell, "columns block (tree)");
                }
            }
        }
        std::vector<uint8_t> wordTaken(words, 0);
        for (int t = 0; t < kTHREADS && mR.ok(); ++t)
        {
            ColsThread const th = colsThread(c, blk.tile, t);
            if (!th.active)
            {
                continue;
            }
            int const warp = t / 32;
            for (int k = 0; k < vec; ++k)
            {
                int const from = shuffles ? colsWarpSlot(c, warp, th.tp, k, vec) : colsTreeSlot(c, k, th.tr, th.tp);
                if (from < 0 || from >= words)
                {
                    return mR.fail("columns thread " + std::to_string(t) + " uses shared word " + std::to_string(from));
                }
                if (!shuffles && wordTaken[from]++)
                {
                    return mR.fail("columns tree: two threads share shared word " + std::to_string(from));
                }
            }
            for (int64_t r = blk.r0 + th.tr; r < blk.r1; r += c.rowsPerStep * kUNROLL)
            {
                for (int u = 0; u < kUNROLL; ++u)
                {
                    int64_t const rr = r + u * c.rowsPerStep;
                    if (rr >= blk.r1)
                    {
                        continue;
                    }
                    int64_t const pack = colsPack(c, rr, th.col);
                    for (int k = 0; k < vec; ++k)
                    {
                        int const from = shuffles ? colsWarpSlot(c, warp, th.tp, k, vec) : colsTreeSlot(c, k, 0, th.tp);
                        element(pack * vec + k, wordCell[from]);
                    }
                }
            }
        }
    }

    void planesBlockWalk(uint32_t b)
    {
        PlanesPlan const& p = mPlan.planes;
        int const vec = mPlan.vec;
        bool const split = p.shape == PlanesShape::kSPLIT;
        PlanesBlock const blk = planesBlock(p, b);
        if (blk.start % vec != 0 || blk.len < 1 || (split && (blk.q >= p.planes || blk.piece >= p.splits)))
        {
            return mR.fail("planes block " + std::to_string(b) + " starts at " + std::to_string(blk.start) + " with "
                + std::to_string(blk.len) + " elements");
        }
        int64_t const nFull = blk.len / vec;
        int64_t const rem = blk.len - nFull * vec;
        int64_t const packs = nFull + (rem > 0 ? 1 : 0);
        if (packs > kPLANE_PACKS)
        {
            return mR.fail("planes block " + std::to_string(b) + " holds " + std::to_string(packs)
                + " packs, shared memory " + std::to_string(kPLANE_PACKS));
        }
        if (p.lanes < 1 || p.lanes > 32 || (p.lanes & (p.lanes - 1)) != 0)
        {
            return mR.fail("planes lanes " + std::to_string(p.lanes));
        }
        // head[pk] / tail[pk] -> the partial cell of the slot that adds them.
        std::vector<int64_t> headCell(packs, -1);
        std::vector<int64_t> tailCell(packs, -1);
        if (split)
        {
            int64_t const cell = planesSplitCell(p, blk.q, blk.piece);
            cellWrite(cell, "planes block (split)");
            std::fill(headCell.begin(), headCell.end(), cell);
            std::fill(tailCell.begin(), tailCell.end(), cell);
        }
        else
        {
            int const groups = kTHREADS / p.lanes;
            std::vector<uint8_t> slotWritten(static_cast<size_t>(p.slots), 0);
            for (int w0 = 0; w0 < p.slots; w0 += groups)
            {
                for (int t = 0; t < kTHREADS; ++t)
                {
                    int const w = planesSlot(p, w0, t);
                    int const lane = planesLane(p, t);
                    int64_t const cell = planesSlotCell(p, b, w, blk.planes);
                    if (w >= p.slots)
                    {
                        if (cell >= 0)
                        {
                            return mR.fail("planes slot " + std::to_string(w) + " past the slots writes");
                        }
                        continue;
                    }
                    if (lane == 0 && cell >= 0)
                    {
                        cellWrite(cell, "planes block");
                        slotWritten[static_cast<size_t>(w)] = 1;
                    }
                    for (int64_t j = w; j < blk.planes; j += p.slots)
                    {
                        int const pb = planesLastPack(p, j, vec);
                        for (int pk = planesFirstPack(p, j, vec) + lane; pk <= pb; pk = planesNextPack(p, pk))
                        {
                            if (pk < 0 || pk >= packs)
                            {
                                return mR.fail("planes plane " + std::to_string(j) + " reads pack "
                                    + std::to_string(pk) + " of " + std::to_string(packs) + " written");
                            }
                            int64_t& to = planesTakesHead(p, j, pk, vec) ? headCell[pk] : tailCell[pk];
                            if (to >= 0)
                            {
                                return mR.fail("planes pack " + std::to_string(pk) + " added twice");
                            }
                            to = cell;
                        }
                    }
                }
            }
            for (int w = 0; w < p.slots && w < blk.planes; ++w)
            {
                if (!slotWritten[static_cast<size_t>(w)])
                {
                    return mR.fail("planes slot " + std::to_string(w) + " of block " + std::to_string(b)
                        + " adds planes but writes no partial");
                }
            }
        }
        auto place = [&](int64_t pk, int k, int nHead) {
            element(blk.start + pk * vec + k, k < nHead ? headCell[pk] : tailCell[pk]);
        };
        for (int t = 0; t < kTHREADS; ++t)
        {
            for (int u = 0; u < kPLANE_PPT; ++u)
            {
                int64_t const pk = planesPack(t, u);
                if (pk < nFull)
                {
                    int const nHead = split ? vec : planesHeadCount(p, static_cast<uint32_t>(pk * vec), vec);
                    for (int k = 0; k < vec; ++k)
                    {
                        place(pk, k, nHead);
                    }
                }
            }
            if (rem > 0 && t == nFull % kTHREADS)
            {
                auto const e0 = static_cast<uint32_t>(nFull * vec);
                int const nHead = split ? static_cast<int>(rem) : planesHeadCount(p, e0, static_cast<int>(rem));
                for (int k = 0; k < rem; ++k)
                {
                    place(nFull, k, nHead);
                }
            }
        }
    }

    // The channels kernel: thread t of block b adds its lane's packs of channel c's column (every sample's plane c),
    // the warp's lanes by an xor tree over all 32 (a group is whole warps of one channel), and where a group has
    // several warps, the group's first warp adds their shared words; lane 0 of the group writes dbias[c].
    void channelsBlockWalk(uint32_t b)
    {
        ChannelsPlan const& c = mPlan.chan;
        int const vec = mPlan.vec;
        int const per = channelThreadPacks(vec);
        if (c.threads < 32 || c.threads > kCHANNEL_THREADS || (c.threads & (c.threads - 1)) != 0
            || c.blockThreads < c.threads || c.blockThreads > kCHANNEL_THREADS || c.blockThreads % c.threads != 0
            || static_cast<int64_t>(c.threads) * per < c.columnPacks || c.innerPacks * vec != mSpec.inner
            || static_cast<int64_t>(c.columnPacks) * vec * mSpec.channels != mN || mN > kCHANNELS_MOST)
        {
            return mR.fail("channels plan: " + std::to_string(c.threads) + " threads a channel in blocks of "
                + std::to_string(c.blockThreads) + ", " + std::to_string(c.columnPacks) + " packs a column of "
                + std::to_string(per) + " a thread");
        }
        int const words = c.blockThreads / 32; // the kernel's shared words (a warp each)
        std::vector<int> wordReads(words, 0);
        for (int t = 0; t < c.blockThreads; ++t)
        {
            ChannelsThread const th = channelsThread(c, b, t);
            ChannelsThread const first = channelsThread(c, b, t & ~31);
            if (th.c != first.c || th.lane != first.lane + (t & 31))
            {
                return mR.fail("channels warp " + std::to_string(t / 32) + " holds more than one channel's lanes");
            }
            if (th.c >= c.channels)
            {
                continue;
            }
            if (th.lane == 0)
            {
                cellWrite(th.c, "channels group");
            }
            if (c.threads > 32 && th.lane < c.threads / 32)
            {
                int const word = channelsGroupWord(c, t, th.lane);
                if (word < 0 || word >= words || channelsThread(c, b, word * 32).c != th.c)
                {
                    return mR.fail("channels group of channel " + std::to_string(th.c) + " reads shared word "
                        + std::to_string(word) + ", not one of its warps'");
                }
                ++wordReads[word];
            }
            for (int u = 0; u < per; ++u)
            {
                int const load = channelsLoadPack(c, th.lane, u);
                int64_t const at = load >= 0 ? static_cast<int64_t>(channelsPack(c, th.c, load)) : -1;
                if (load < 0 || load >= c.columnPacks || at < 0 || (at + 1) * vec > mN)
                {
                    return mR.fail("channels lane " + std::to_string(th.lane) + " of channel " + std::to_string(th.c)
                        + " loads column pack " + std::to_string(load) + " of " + std::to_string(c.columnPacks));
                }
                int const j = channelsColumnPack(c, th.lane, u);
                if (j >= c.columnPacks)
                {
                    continue;
                }
                int64_t const pk = channelsPack(c, th.c, j);
                for (int k = 0; k < vec; ++k)
                {
                    element(pk * vec + k, th.c);
                }
            }
        }
        for (int w = 0; w < words && c.threads > 32; ++w)
        {
            if (channelsThread(c, b, w * 32).c < c.channels && wordReads[w] != 1)
            {
                return mR.fail("channels warp " + std::to_string(w) + "'s sum read " + std::to_string(wordReads[w])
                    + " times");
            }
        }
    }

    // After the main kernel: every element once, into a cell of its bias element; every cell written.
    void checkMain()
    {
        int64_t const C = mPlan.channels;
        for (int64_t i = 0; i < mN; ++i)
        {
            if (mT.dxWrites[i] != 1)
            {
                return mR.fail("dx[" + std::to_string(i) + "] not written");
            }
            int64_t const cell = mT.cellOf[i];
            int64_t const want = (i / mSpec.inner) % mSpec.channels;
            if (cell < 0 || cell % C != want)
            {
                return mR.fail("g[" + std::to_string(i) + "] (bias element " + std::to_string(want) + ") summed into "
                    + (cell < 0 ? std::string("no partial cell") : "partial column " + std::to_string(cell % C)));
            }
            if (mT.cellWrites[cell] != 1)
            {
                return mR.fail("g[" + std::to_string(i) + "] summed into partial cell " + std::to_string(cell)
                    + ", which no block writes");
            }
        }
        for (int64_t cell = 0; cell < mCells; ++cell)
        {
            if (mT.cellWrites[cell] != 1)
            {
                return mR.fail("partial cell " + std::to_string(cell) + " read by the sums, never written");
            }
        }
    }

    // The column sums: each stage reads its input rows once per column, writes its output once per cell.
    void sums()
    {
        int64_t const C = mPlan.channels;
        SumStage stages[2];
        int const count = sumStages(mPlan, stages);
        if (count == 0)
        {
            // The main kernel wrote dbias: checkMain saw every channel's cell written once.
            bool const oneChunk = mPlan.kind == FusedKind::kCOLS && mPlan.cols.rowChunks == 1;
            if (mPlan.kind != FusedKind::kCHANNELS && !oneChunk)
            {
                mR.fail("no column sums after a main kernel that writes partial sums");
            }
            return;
        }
        int64_t const wsFloats = static_cast<int64_t>(mPlan.workspace / sizeof(float));
        std::vector<uint8_t> written(wsFloats, 0); // workspace floats written so far
        for (int64_t cell = 0; cell < mCells; ++cell)
        {
            written[cell] = 1;
        }
        std::vector<uint8_t> dbias(C, 0);
        for (int s = 0; s < count && mR.ok(); ++s)
        {
            SumStage const& st = stages[s];
            SumShape const& sh = st.shape;
            if (sh.colsPer < 1 || sh.colsPer > 8 || (sh.colsPer & (sh.colsPer - 1)) != 0 || sh.threads < 32
                || sh.threads > kFINAL_THREADS || (sh.threads & (sh.threads - 1)) != 0 || sh.blocks < 1
                || st.slices < 1 || st.slices > 65535)
            {
                return mR.fail("column-sum stage " + std::to_string(s) + ": " + std::to_string(sh.blocks) + " x "
                    + std::to_string(st.slices) + " blocks of " + std::to_string(sh.threads) + " threads, "
                    + std::to_string(sh.colsPer) + " columns each");
            }
            int const shift = __builtin_ctz(static_cast<unsigned>(sh.colsPer)); // colsPer >= 1 from here
            int const lanes = sh.threads >> shift;
            std::vector<uint8_t> reads(static_cast<size_t>(st.rows * C), 0);
            std::vector<uint8_t> outs(static_cast<size_t>(st.slices) * C, 0);
            for (unsigned by = 0; by < st.slices; ++by)
            {
                for (unsigned bx = 0; bx < sh.blocks; ++bx)
                {
                    for (int t = 0; t < sh.threads; ++t)
                    {
                        SumThread const th = sumThread(shift, t, bx, by, st.rows, st.sliceRows);
                        if (sumWarpSlot(t / 32, sh.colsPer, t & 31 & (sh.colsPer - 1)) >= kFINAL_THREADS / 32 * 8)
                        {
                            return mR.fail("column sums: shared word past the block's");
                        }
                        if (th.c >= C)
                        {
                            continue;
                        }
                        for (int k = 0; k < kSUM_MAX_LANE_ROWS; ++k)
                        {
                            int64_t const r = sumRow(th, k, lanes);
                            if (r < th.r1)
                            {
                                readCell(reads, written, st, r, th.c);
                            }
                        }
                        for (int64_t r = sumRow(th, kSUM_MAX_LANE_ROWS, lanes); r < th.r1; r += lanes)
                        {
                            readCell(reads, written, st, r, th.c);
                        }
                        if (t < 32 && (t & 31) < sh.colsPer)
                        {
                            int64_t const o = static_cast<int64_t>(by) * C + th.c;
                            if (++outs[o] > 1)
                            {
                                return mR.fail("column sums write output " + std::to_string(o) + " twice");
                            }
                        }
                    }
                }
            }
            for (int64_t i = 0; i < st.rows * C; ++i)
            {
                if (reads[i] != 1)
                {
                    return mR.fail("column-sum stage " + std::to_string(s) + " reads row " + std::to_string(i / C)
                        + " of column " + std::to_string(i % C) + " " + std::to_string(reads[i]) + " times");
                }
            }
            for (int64_t o = 0; o < static_cast<int64_t>(st.slices) * C; ++o)
            {
                if (outs[o] != 1)
                {
                    return mR.fail("column-sum stage " + std::to_string(s) + " leaves output " + std::to_string(o));
                }
                if (st.outOffset < 0)
                {
                    if (o >= C)
                    {
                        return mR.fail("the last column-sum stage writes dbias[" + std::to_string(o) + "] of "
                            + std::to_string(C));
                    }
                    dbias[o] = 1;
                }
                else if (st.outOffset + o >= wsFloats)
                {
                    return mR.fail("column-sum stage " + std::to_string(s) + " writes workspace float "
                        + std::to_string(st.outOffset + o) + " of " + std::to_string(wsFloats));
                }
                else
                {
                    written[st.outOffset + o] = 1;
                }
            }
        }
        if (mR.ok() && stages[count - 1].outOffset >= 0)
        {
            mR.fail("the last column-sum stage does not write dbias");
        }
    }

    void readCell(std::vector<uint8_t>& reads, std::vector<uint8_t> const& written, SumStage const& st, int64_t r,
        int64_t c)
    {
        int64_t const C = mPlan.channels;
        int64_t const at = st.inOffset + r * C + c;
        if (r < 0 || r >= st.rows || at >= static_cast<int64_t>(written.size()) || !written[at])
        {
            return mR.fail("column sums read workspace float " + std::to_string(at) + " before it is written");
        }
        ++reads[r * C + c];
    }

    FusedPlan const& mPlan;
    int64_t mN;
    BiasSpec mSpec;
    Report& mR;
    int64_t mCells;
    Trace mT;
};

} // namespace

std::string proveSums(int64_t rows, int64_t channels, int64_t* slices)
{
    Report r;
    FusedPlan plan;
    plan.kind = FusedKind::kCOLS;
    plan.channels = channels;
    plan.partialRows = rows;
    planSums(plan);
    *slices = plan.sumSlices;
    FusedProof(plan, 0, BiasSpec{channels, 1}, r).runSums();
    return r.first;
}

std::string proveFused(DType dtype, int64_t n, BiasSpec spec, bool aligned, int sms, FusedPlan* out)
{
    Report r;
    FusedPlan const plan = planFused(dtype, n, spec, aligned, sms);
    if (out != nullptr)
    {
        *out = plan;
    }
    if (plan.kind == FusedKind::kNONE)
    {
        if (n > 0 && n % (spec.channels * spec.inner) == 0)
        {
            r.fail("no fused path for a whole number of bias periods");
        }
        return r.first;
    }
    // Packs of 16 bytes; the channels kernel's may be narrower (a power of two dividing a plane: its walk checks that),
    // and the ungrouped columns kernel has fp16/bf16 kernels of 8-byte packs.
    bool const narrower = (plan.kind == FusedKind::kCHANNELS && vecWidth(dtype) % plan.vec == 0)
        || (plan.kind == FusedKind::kCOLS && plan.cols.group == 1 && vecWidth(dtype) == 8 && plan.vec == 4);
    if (plan.vec != 1 && (!aligned || (plan.vec != vecWidth(dtype) && !narrower)))
    {
        r.fail("pack width " + std::to_string(plan.vec) + (aligned ? "" : " on misaligned pointers"));
        return r.first;
    }
    FusedProof(plan, n, spec, r).run();
    return r.first;
}

} // namespace proof
} // namespace torchtrt_swish
