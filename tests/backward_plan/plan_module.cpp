// _backward_plan: the fused backward's host-side planner (csrc/kernels/swish_backward_plan.h) as Python functions,
// so tests/test_backward_plan.py can check which plan a shape gets without a GPU. Built by CMakeLists.txt into
// build/native with a plain C++ compiler (no CUDA include path) and never installed.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>
#include <string>

#include "kernels/swish_backward_plan.h"
#include "kernels/swish_forward_plan.h"
#include "proof.h"

namespace py = pybind11;

namespace torchtrt_swish {
namespace detail {
namespace {

DType dtypeNamed(std::string const& name)
{
    DType t = DType::kFLOAT32;
    if (!dtypeFromName(name.c_str(), t))
    {
        throw py::value_error("dtype must be float32, float16 or bfloat16, got '" + name + "'");
    }
    return t;
}

char const* kindName(FusedKind k)
{
    switch (k)
    {
    case FusedKind::kNONE: return "none";
    case FusedKind::kROWS: return "rows";
    case FusedKind::kCOLS: return "cols";
    case FusedKind::kPLANES: return "planes";
    case FusedKind::kCHANNELS: return "channels";
    }
    return "unknown";
}

char const* shapeName(PlanesShape s)
{
    switch (s)
    {
    case PlanesShape::kSAMPLES: return "samples";
    case PlanesShape::kPLANES: return "planes";
    case PlanesShape::kSPLIT: return "split";
    }
    return "unknown";
}

// The plan as a dict; only the part of the kind's strategy ("rows", "cols", "planes" or "channels") is filled in.
py::dict planDict(FusedPlan const& p)
{
    py::dict d;
    d["kind"] = kindName(p.kind);
    d["vec"] = p.vec;
    d["channels"] = p.channels;
    d["partial_rows"] = p.partialRows;
    d["sum_slices"] = p.sumSlices;
    d["workspace"] = p.workspace;
    d["workspace_bytes"] = fusedWorkspaceBytes(p);
    if (p.kind == FusedKind::kNONE)
    {
        return d;
    }
    d["blocks"] = mainBlocks(p);
    if (p.kind == FusedKind::kROWS)
    {
        py::dict r;
        r["len"] = p.rows.len;
        r["chunks"] = p.rows.chunks;
        r["chunk_elems"] = p.rows.chunkElems;
        d["rows"] = r;
    }
    else if (p.kind == FusedKind::kCOLS)
    {
        py::dict c;
        c["rows"] = p.cols.rows;
        c["packs_per_row"] = p.cols.packsPerRow;
        c["tile_packs"] = p.cols.tilePacks;
        c["tiles"] = p.cols.tiles;
        c["rows_per_step"] = p.cols.rowsPerStep;
        c["rows_per_block"] = p.cols.rowsPerBlock;
        c["row_chunks"] = p.cols.rowChunks;
        c["group"] = p.cols.group;
        d["cols"] = c;
    }
    else if (p.kind == FusedKind::kCHANNELS)
    {
        py::dict c;
        c["inner_packs"] = p.chan.innerPacks;
        c["column_packs"] = p.chan.columnPacks;
        c["threads"] = p.chan.threads;
        c["block_threads"] = p.chan.blockThreads;
        c["inner_divisor"] = p.chan.byInner.d;
        d["channels_plan"] = c;
    }
    else
    {
        PlanesPlan const& q = p.planes;
        py::dict s;
        s["shape"] = shapeName(q.shape);
        s["planes"] = q.planes;
        s["block_elems"] = q.blockElems;
        s["block_planes"] = q.blockPlanes;
        s["splits"] = q.splits;
        s["slots"] = q.slots;
        s["lanes"] = q.lanes;
        s["inner_divisor"] = q.byInner.d;
        d["planes"] = s;
    }
    return d;
}

// The default l2_bytes of the forward plan's bindings: 50 MiB, the L2 of an H100 or H200 (SXM, 132 SMs).
constexpr int64_t kPROOF_L2 = int64_t{50} << 20;

} // namespace
} // namespace detail
} // namespace torchtrt_swish

PYBIND11_MODULE(_backward_plan, m)
{
    using namespace torchtrt_swish;
    using namespace torchtrt_swish::detail;
    m.doc() = "The fused backward's planner (csrc/kernels/swish_backward_plan.h), for tests.";
    m.def(
        "plan",
        [](std::string const& dtype, int64_t n, int64_t channels, int64_t inner, bool aligned, int sms)
        {
            if (sms < 1)
            {
                throw py::value_error("sms must be >= 1, got " + std::to_string(sms));
            }
            return planDict(planFused(dtypeNamed(dtype), n, BiasSpec{channels, inner}, aligned, sms));
        },
        py::arg("dtype"), py::arg("n"), py::arg("channels"), py::arg("inner"), py::arg("aligned") = true,
        py::arg("sms") = 132,
        "planFused for n elements of dtype with bias[(i / inner) % channels], as a dict.");
    m.def(
        "sum_shape",
        [](int64_t rows, int64_t channels, int64_t laneRows)
        {
            SumShape const s = sumShape(rows, channels, laneRows);
            py::dict d;
            d["cols_per"] = s.colsPer;
            d["threads"] = s.threads;
            d["blocks"] = s.blocks;
            return d;
        },
        py::arg("rows"), py::arg("channels"), py::arg("lane_rows") = kSUM_LANE_ROWS,
        "sumShape: the column-sum launch for a [rows][channels] partial matrix, about lane_rows rows per thread.");
    m.def(
        "prove_fused",
        [](py::list cases)
        {
            // cases: (dtype, n, channels, inner, aligned, sms) tuples; returns, per case, the plan family and the
            // first broken rule ("" when every rule holds), walked without the GIL.
            std::vector<std::tuple<DType, int64_t, BiasSpec, bool, int>> in;
            for (py::handle h : cases)
            {
                auto t = h.cast<py::tuple>();
                in.emplace_back(dtypeNamed(t[0].cast<std::string>()), t[1].cast<int64_t>(),
                    BiasSpec{t[2].cast<int64_t>(), t[3].cast<int64_t>()}, t[4].cast<bool>(), t[5].cast<int>());
            }
            std::vector<std::pair<std::string, std::string>> out(in.size());
            {
                py::gil_scoped_release release;
                // Cases are independent: walked on every core, in a fixed assignment (results do not depend on it).
                unsigned const workers = std::max(1U, std::thread::hardware_concurrency());
                std::vector<std::thread> pool;
                for (unsigned w = 0; w < workers; ++w)
                {
                    pool.emplace_back([&, w] {
                        for (size_t i = w; i < in.size(); i += workers)
                        {
                            auto const& [dt, n, spec, aligned, sms] = in[i];
                            FusedPlan plan;
                            std::string const why = proof::proveFused(dt, n, spec, aligned, sms, &plan);
                            out[i] = {planFamily(plan), why};
                        }
                    });
                }
                for (auto& t : pool)
                {
                    t.join();
                }
            }
            py::list result;
            for (auto const& [family, why] : out)
            {
                result.append(py::make_tuple(family, why));
            }
            return result;
        },
        py::arg("cases"), "Walks each case's fused backward plan (fused_proof.cpp): [(family, first broken rule)].");
    m.def(
        "prove_forward",
        [](py::list cases, bool edges, int64_t l2Bytes)
        {
            // cases: (dtype, n, channels, inner, io_aligned, bias_aligned); per case the first broken rule or "".
            std::vector<std::tuple<DType, int64_t, BiasSpec, bool, bool>> in;
            for (py::handle h : cases)
            {
                auto t = h.cast<py::tuple>();
                in.emplace_back(dtypeNamed(t[0].cast<std::string>()), t[1].cast<int64_t>(),
                    BiasSpec{t[2].cast<int64_t>(), t[3].cast<int64_t>()}, t[4].cast<bool>(), t[5].cast<bool>());
            }
            std::vector<std::string> out(in.size());
            {
                py::gil_scoped_release release;
                for (size_t i = 0; i < in.size(); ++i)
                {
                    auto const& [dt, n, spec, io, ba] = in[i];
                    out[i] = proof::proveForward(dt, n, spec, io, ba, l2Bytes, edges);
                }
            }
            return out;
        },
        py::arg("cases"), py::arg("edges") = false, py::arg("l2_bytes") = kPROOF_L2,
        "Walks each case's forward plan (forward_proof.cpp): [first broken rule or '']; edges: first and last blocks; "
        "l2_bytes: the device's L2.");
    m.def(
        "forward_plan",
        [](std::string const& dtype, int64_t n, int64_t channels, int64_t inner, bool io, bool biasAligned,
            int64_t l2Bytes)
        {
            FwdPlan const plan = planForward(dtypeNamed(dtype), n, BiasSpec{channels, inner}, io, biasAligned,
                l2Bytes);
            py::list launches;
            for (int k = 0; k < plan.count; ++k)
            {
                FwdLaunch const& l = plan.launch[k];
                py::dict d;
                d["mode"] = static_cast<int>(l.mode);
                d["vec"] = l.vec;
                d["ppt"] = l.ppt;
                d["threads"] = l.threads;
                d["packs"] = l.nPacks;
                d["offset"] = l.prm.offset;
                d["narrow"] = fwd32BitLaunch(l);
                d["skip_l1"] = l.skipL1;
                launches.append(d);
            }
            return launches;
        },
        py::arg("dtype"), py::arg("n"), py::arg("channels"), py::arg("inner"), py::arg("io") = true,
        py::arg("bias_aligned") = true, py::arg("l2_bytes") = kPROOF_L2,
        "planForward's launches as dicts (mode as FwdMode's value).");
    m.def(
        "prove_sums",
        [](int64_t rows, int64_t channels)
        {
            int64_t slices = 0;
            std::string why = proof::proveSums(rows, channels, &slices);
            return py::make_tuple(why, slices);
        },
        py::arg("rows"), py::arg("channels"),
        "The column sums of a [rows][channels] partial matrix walked (fused_proof.cpp): (first broken rule or '', "
        "first-stage slices; 1: one stage).");
    m.def(
        "prove_bias_runs",
        [](int64_t n, int64_t channels, int64_t inner, std::vector<int64_t> const& cuts) {
            return proof::proveBiasRuns(n, BiasSpec{channels, inner}, cuts);
        },
        py::arg("n"), py::arg("channels"), py::arg("inner"), py::arg("cuts"),
        "The CPU forward's bias runs over chunks cut at `cuts` (cpu_proof.cpp): the first broken rule or ''.");
    m.def(
        "prove_bias_grad", [](int64_t outer, int64_t channels, int64_t inner) {
            return proof::proveBiasGrad(outer, channels, inner);
        },
        py::arg("outer"), py::arg("channels"), py::arg("inner"),
        "The CPU bias gradient's task grid (cpu_proof.cpp): the first broken rule or ''.");
    m.def(
        "fast_div32", [](int64_t divisor, uint32_t n) { return FastDiv::make(divisor).div32(n); },
        py::arg("divisor"), py::arg("n"), "FastDiv::make(divisor).div32(n), the planes kernel's plane index.");
    m.def(
        "fast_div31", [](int64_t divisor, uint32_t n) { return FastDiv::make(divisor).div31(n); },
        py::arg("divisor"), py::arg("n"), "FastDiv::make(divisor).div31(n), the forward's narrow bias lookups.");
}
