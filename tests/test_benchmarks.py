"""benchmarks/bench_networks.py on the CPU: its smoke table, and that its opaque-op check finds the op when it stays.

The H200 numbers come from the same code (tools/device_gpu_check.sh issue24); here the networks are tiny, so what is
checked is the table and the checks, not the timings."""
from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

import torchtrt_swish
from benchmarks import bench_networks, networks


class _Event:
    """What summarize_events reads of a kineto event."""

    def __init__(self, name, start=0, end=0, device="cpu", thread=1, end_thread=None, activity="cpu_op",
                 annotation=False):
        self._v = dict(name=name, start_ns=start, end_ns=end, duration_ns=end - start, start_thread_id=thread,
                       end_thread_id=thread if end_thread is None else end_thread, is_async=False,
                       activity_type=activity, is_user_annotation=annotation,
                       device_type=getattr(torch.autograd.DeviceType, device.upper()))

    def __getattr__(self, k):
        return lambda: self._v[k]


def test_summarize_events_per_step():
    """Device time sums GPU activities; host time is what a thread's CPU events cover (nested ones once), without
    the final wait for the GPU, the profiler's overhead or its step spans, across threads; a record_function range's
    GPU span is no GPU work of its own; opaque calls go by exact name (not the autograd node)."""
    events = [_Event("aten::mm", 0, 300_000), _Event("cudaLaunchKernel", 100_000, 200_000),  # nested: counted once
              _Event("aten::add", 250_000, 400_000),  # overlaps the end of aten::mm
              _Event("cudaDeviceSynchronize", 400_000, 5_400_000),
              _Event("torchtrt_swish::swish", 500_000, 540_000), _Event("torchtrt_swish::SwishBackward"),
              _Event("torchtrt_swish::swish_backward", 600_000, 660_000, thread=2),  # the backward thread
              _Event("cross-thread", 0, 10_000_000, end_thread=3),  # async: no thread's time
              _Event("flush", 0, 9_000_000, activity="overhead"),  # the profiler's own work
              # the schedule's span around a whole step
              _Event("ProfilerStep#1", 0, 9_000_000, activity="user_annotation", annotation=True),
              _Event("gemm_kernel", 0, 700_000, "cuda", activity="kernel"),
              _Event("Memcpy DtoD", 0, 100_000, "cuda", activity="gpu_memcpy"),
              _Event("## Call CompiledFxGraph ##", 0, 800_000, "cuda", activity="gpu_user_annotation",
                     annotation=True)]  # spans the kernels above
    s = bench_networks.summarize_events(events, steps=2)
    assert s == {"device_ms": 0.4, "kernels": 1.0, "host_ms": 0.25, "opaque_calls": 1.0}


def test_host_time_is_the_profilers_self_cpu_total():
    """On a real profile the union of intervals equals torch.profiler's own self-CPU total (FunctionEvent tree)."""
    net = networks.NETWORKS["transformer"]
    models, _ = networks.build_variants(net, "cpu", smoke=True)
    x, target = networks.make_batch(net, 2, "cpu", True, False)
    step = bench_networks.make_step(models["ours"], "train", x, target, networks.loss_fn(net),
                                    bench_networks.contextlib.nullcontext, False)
    step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
    ours = bench_networks.summarize_events(bench_networks.raw_events(prof), 1)["host_ms"]
    assert ours == pytest.approx(prof.key_averages().self_cpu_time_total / 1e3, rel=1e-6)


@pytest.mark.parametrize("steps", [1, 3])
def test_profile_steps_reports_only_the_profiled_steps(steps):
    """One op call per step, two in the first: a count of 1 per step exactly means the first call is the discarded
    warm-up and every profiled step is in the profile."""
    x, b = torch.randn(4, 8), torch.randn(8)
    calls = []

    def step():
        for _ in range(2 if not calls else 1):
            torchtrt_swish.swish(x, b)
        calls.append(1)
    s = bench_networks.profile_steps(step, steps, "cpu")
    assert len(calls) == steps + 1
    assert s["opaque_calls"] == 1.0


def test_profile_steps_host_time_leaves_out_the_step_spans():
    """A step that sleeps 30 ms between two small ops: the schedule's ProfilerStep# span covers the sleep, the host
    time (the ops' own intervals) must not."""
    import time

    x = torch.randn(64, 64)

    def step():
        x.mm(x)
        time.sleep(0.03)
        x.add(1)
    s = bench_networks.profile_steps(step, 2, "cpu")
    assert 0 < s["host_ms"] < 10


def test_profile_steps_drains_the_gpu_after_the_warm_up_and_the_last_step(monkeypatch):
    """The trace starts at the prof.step() after the warm-up and keeps every kernel that runs after that, so the
    warm-up's queued work is waited for first; the last step's too, before the trace ends."""
    events = []
    monkeypatch.setattr(bench_networks, "_sync", lambda device: lambda: events.append("sync"))
    bench_networks.profile_steps(lambda: events.append("step"), 3, "cpu")
    assert events == ["step", "sync", "step", "step", "step", "sync"]


def test_no_gpu_activity_is_nan_not_zero():
    """A profile without GPU events (a CPU run, or kernels the profiler missed) has no device time."""
    s = bench_networks.summarize_events([_Event("aten::mm", 0, 10_000)], steps=1)
    assert math.isnan(s["device_ms"]) and s["kernels"] == 0


def test_opaque_in_code_finds_python_and_cpp_wrapper_calls():
    """Inductor's Python wrapper calls torch.ops.torchtrt_swish.<op>, its C++ wrapper the schema name."""
    assert bench_networks.opaque_in_code(["buf1 = torch.ops.torchtrt_swish.swish.default(buf0, arg1_1)\n"
                                          "buf2 = torch.ops.torchtrt_swish.swish.default(buf1, arg1_1)"]) == 2
    assert bench_networks.opaque_in_code(['aoti_torch_call_dispatcher("torchtrt_swish::swish_backward", "")']) == 1
    assert bench_networks.opaque_in_code(["triton_poi_fused_add_mul_sigmoid_0  # swish, silu", ""]) == 0
    # Inductor names the op in comments and quoted metadata too: those are no calls.
    assert bench_networks.opaque_in_code([
        "    # Topologically Sorted Source Nodes: [mul, swish], Original ATen: [aten.mul, torchtrt_swish.swish]",
        "    assert_tensor_metadata(buf1, (3, 4), (4, 1), torch.float32, 'torch.ops.torchtrt_swish.swish.default')",
        "    # buffer buf1 (op: torch.ops.torchtrt_swish.swish.default) is assumed to be not aligned",
        "    # File: torchtrt_swish/ops.py:200 in swish, code: return torch.ops.torchtrt_swish.swish(x, bias)",
        "    // C++: torchtrt_swish::swish"]) == 0


def _row(mode, **kw):
    row = {"network": "n", "dtype": "fp32", "mode": mode, "task": "train"}
    row.update(kw)
    return row


def test_row_problems():
    """A compiled row needs compiled code and no opaque call; an eager row of ours exactly one per swish use."""
    clean = dict(plain_graphs=2, ours_graphs=2, plain_opaque_in_code=0, ours_opaque_in_code=0,
                 plain_opaque_calls=0.0, ours_opaque_calls=0.0)
    assert bench_networks.row_problems(_row("compile", **clean), swaps=3) == []
    assert len(bench_networks.row_problems(_row("graphs", **{**clean, "ours_opaque_in_code": 1}), 3)) == 1
    assert len(bench_networks.row_problems(_row("compile", **{**clean, "plain_opaque_calls": 1.0}), 3)) == 1
    assert "proved nothing" in bench_networks.row_problems(_row("compile", **{**clean, "ours_graphs": 0}), 3)[0]
    assert bench_networks.row_problems(_row("eager", ours_opaque_calls=6.0, plain_opaque_calls=0.0), 3) == []
    assert len(bench_networks.row_problems(_row("eager", ours_opaque_calls=5.0, plain_opaque_calls=0.0), 3)) == 1
    inference = {**_row("eager", ours_opaque_calls=3.0, plain_opaque_calls=0.0), "task": "inference"}
    assert bench_networks.row_problems(inference, 3) == []


def test_row_notes_say_when_a_row_is_not_what_it_claims():
    """CUDA graphs skipped, graph breaks and compiles during the timed rounds show next to the mode."""
    assert bench_networks.row_notes(_row("graphs", plain_cudagraph_skips=0, ours_cudagraph_skips=0)) == ""
    assert bench_networks.row_notes(_row("graphs", plain_cudagraph_skips=1, ours_cudagraph_skips=1,
                                         ours_graph_breaks=3, late_compiles=1)) == \
        " (cudagraphs skipped 2, graph breaks 3, compiles while timed 1)"


def test_smoke_table_eager(tmp_path, capsys):
    """The CPU smoke run: one row per dtype x task, the counter sees each swish use (2 blocks: 2 forward calls,
    2 more in the backward), plain none; wall and host times are finite, device time n/a on the CPU."""
    out = tmp_path / "nets.csv"
    assert bench_networks.main(["--device", "cpu", "--smoke", "--networks", "transformer", "--modes", "eager",
                                "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [(r["dtype"], r["task"]) for r in rows] == [(d, t) for d in ("bf16", "fp32", "amp")
                                                       for t in ("train", "inference")]
    for r in rows:
        assert float(r["ours_opaque_calls"]) == (4 if r["task"] == "train" else 2), r
        assert float(r["plain_opaque_calls"]) == 0, r
        for k in ("plain_wall_ms", "ours_wall_ms", "plain_host_ms", "ours_host_ms", "wall_ratio", "host_ratio"):
            assert math.isfinite(float(r[k])) and float(r[k]) > 0, (k, r)
        assert math.isnan(float(r["ours_device_ms"]))
    table = out.with_suffix(".md").read_text().splitlines()
    assert table[2].startswith("| network | dtype | mode | task |")
    assert len([line for line in table if line.startswith("| transformer |")]) == 6
    assert "4/step (eager)" in table[4] and "2/step (eager)" in table[5]


def test_a_backend_that_keeps_the_op_fails_the_check(tmp_path, capsys):
    """aot_eager does not decompose: the profiler sees the op in every compiled step of ours (2 blocks: 4 calls),
    and there is no inductor code to search, so the run fails with both findings."""
    rc = bench_networks.main(["--device", "cpu", "--smoke", "--networks", "transformer", "--modes", "compile",
                              "--backend", "aot_eager", "--dtypes", "fp32", "--tasks", "train", "--rounds", "1",
                              "--out", str(tmp_path / "nets.csv")])
    failed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("CHECK FAILED")]
    assert rc == 1
    assert any("4 torchtrt_swish call(s) per compiled step (ours)" in line for line in failed), failed
    assert not any("per compiled step (plain)" in line for line in failed), failed
    assert sum("proved nothing" in line for line in failed) == 2, failed


@pytest.fixture
def inductor_without_our_decompositions():
    """Inductor with torchtrt_swish's entries taken out of its decomposition table, and its caches off (their keys
    do not include the table, so a cached decomposed program would be served)."""
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config
    from torch._inductor import decomposition

    torchtrt_swish.ops.register_inductor_decompositions()
    ops = (torch.ops.torchtrt_swish.swish.default, torch.ops.torchtrt_swish.swish_backward.default)
    saved = {op: decomposition.decompositions.pop(op) for op in ops}
    caches = (inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache)
    inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache = False, False
    decomposition.fast_random_decomps.cache_clear()
    try:
        yield
    finally:
        decomposition.decompositions.update(saved)
        inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache = caches
        decomposition.fast_random_decomps.cache_clear()
        torch._dynamo.reset()


def test_op_left_in_inductor_code_is_found(inductor_without_our_decompositions):
    """Without our decompositions inductor calls the op as an extern kernel: the row counts one call per use in the
    generated code and reports it."""
    net = networks.NETWORKS["transformer"]
    models, swaps = networks.build_variants(net, "cpu", smoke=True)
    x, target = networks.make_batch(net, 2, "cpu", True, False)
    args = bench_networks.parse_args(["--device", "cpu", "--smoke", "--compile-only"])
    row = bench_networks.measure_row({"ours": models["ours"]}, "compile", "inference", x, target,
                                     networks.loss_fn(net), bench_networks.contextlib.nullcontext, args, "cpu")
    row.update(network="transformer", dtype="fp32", mode="compile", task="inference")
    assert row["ours_graphs"] == 1 and row["ours_opaque_in_code"] == swaps, row
    assert any("left in ours's compiled code" in p for p in bench_networks.row_problems(row, swaps))


def _layout_row(ours, compile_us, pas="fwd", case="c"):
    return {"case": case, "dtype": "fp32", "pass": pas, "timing": "graph", "ours_us": ours, "compile_us": compile_us}


def test_layout_goal_counts_rows_behind_compile_beyond_the_noise(capsys):
    """Issue 38's GPU goal line: compile faster than ours by more than half a percent is behind, by less is level;
    a NaN or inf time on either side is behind; each pass counts apart, rows without compile not at all."""
    from benchmarks import bench_layouts

    rows = [_layout_row(100.0, 99.51, case="level"), _layout_row(100.0, 99.49, case="behind"),
            _layout_row(100.0, 130.0, case="ahead"), _layout_row(100.0, 99.49, pas="fwd+bwd", case="bwd"),
            {"case": "ours only", "pass": "fwd", "timing": "graph", "ours_us": 1.0}]
    rows += [_layout_row(a, c, case=f"nonfinite {a} {c}")
             for a, c in ((math.nan, 1.0), (1.0, math.nan), (math.inf, 1.0), (1.0, math.inf))]
    goal = bench_layouts.behind_compile(rows)
    assert set(goal) == {("fwd", "graph"), ("fwd+bwd", "graph")}
    count, behind = goal[("fwd", "graph")]
    assert count == 7
    assert [r["case"] for r in behind] == ["behind"] + [r["case"] for r in rows[5:]]
    assert [r["case"] for r in goal[("fwd+bwd", "graph")][1]] == ["bwd"]
    bench_layouts.print_goal(rows)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "goal no fwd graph row behind compile by more than 0.5 %: 5 of 7 behind"
    assert out[1] == "  behind fp32: ours 100.00 us, compile 99.49 us"


@pytest.mark.parametrize("count", [2, 5, 6])
def test_rounds_balance_places_and_predecessors(count):
    """benchmarks/rounds.py: in each block (as many rounds as variants, twice as many for an odd count) every
    variant runs equally often in every place and right after every other one (a fixed order handicapped the variant
    after the copy; rotations alone left predecessors unbalanced); the blocks differ; seeded."""
    from benchmarks.rounds import round_orders

    names = ["copy", "pre", "tree", "op", "compile", "pre2"][:count]
    size = count * (2 if count % 2 else 1)
    rounds = round_orders(names, 4 * size - 1)  # rounded up to whole blocks
    assert len(rounds) == 4 * size and all(sorted(o) == sorted(names) for o in rounds)
    for block in range(0, len(rounds), size):
        part = rounds[block:block + size]
        for place in range(count):
            assert sorted(o[place] for o in part) == sorted(names * (size // count)), (block, place)
        pairs = [(o[i], o[i + 1]) for o in part for i in range(count - 1)]
        assert sorted(pairs) == sorted([(a, b) for a in names for b in names if a != b] * (size // count)), block
    assert count == 2 or len({tuple(rounds[b][:2]) for b in range(0, len(rounds), size)}) > 1  # blocks differ
    assert round_orders(names, size + 1) == rounds[:2 * size]  # seeded: a rerun times the same sequence
    assert round_orders(names[:1], 3) == [names[:1]] * 3 and round_orders([], 3) == []  # time_graph's one variant


def test_interleaved_timing_takes_the_balanced_rounds(monkeypatch):
    """bench_layouts' graph and loop timings run their variants in round_orders' sequence (a fixed order, ours before
    compile, favoured compile on rows that fit in L2), with every round's time going to its own variant."""
    from benchmarks import bench_swish

    ran: list = []
    names = ["ours", "eager", "compile"]
    fns = {name: (lambda name=name: ran.append(name)) for name in names}
    monkeypatch.setattr(bench_swish, "capture_graph", lambda fn, k, stream=None: types.SimpleNamespace(replay=fn))
    monkeypatch.setattr(bench_swish, "timed_round", lambda body, k, queued=False: (body(), float(ran[-1] == "ours"))[1])
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    expected = [name for order in bench_swish.round_orders(names, 5) for name in order]
    assert bench_swish.time_graphs_interleaved(fns, 1, 5) == {"ours": 1.0, "eager": 0.0, "compile": 0.0}
    assert ran == expected
    ran.clear()
    assert bench_swish.time_loops_interleaved(fns, 1, 5) == {"ours": 1.0, "eager": 0.0, "compile": 0.0}
    assert ran == [name for name in names for _ in range(3)] + expected  # three warm-up calls each, then the rounds


def test_bench_cpu_rounds_take_the_balanced_orders():
    """bench_cpu's steps run in round_orders' sequence after their warm-up calls (a rotation left each step behind the
    same predecessor), every round's time going to its own step."""
    from benchmarks import bench_cpu
    from benchmarks.rounds import round_orders

    ran: list = []
    names = ["copy_", "ORT", "ours fwd", "ours fwd+bwd", "bf16 fwd"]
    steps = {name: (lambda name=name: ran.append(name)) for name in names}
    faults: dict = {}
    assert set(bench_cpu.median_ms(steps, 7, 2, faults)) == set(names)
    assert ran == [name for name in names for _ in range(2)] + [n for order in round_orders(names, 7) for n in order]
    assert set(faults) == set(names)


def test_bench_cpu_anchor_is_onnx_runtimes_fused_kernel(tmp_path):
    """The CPU table's anchor: ONNX Runtime's optimizer still turns Mul(x, Sigmoid(x)) into one QuickGelu node (MLAS);
    bench_cpu.py marks the ORT target FAIL where it does not."""
    pytest.importorskip("onnxruntime", reason="needs onnxruntime (the onnx extra)")
    from benchmarks import bench_cpu

    _, ops = bench_cpu.ort_session(1, tmp_path)
    assert ops == ["com.microsoft.QuickGelu"]


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--threads", "0"], ["--cases", "nope"], ["--memory", "reused,nope"]])
def test_bench_cpu_rejects_bad_arguments(argv, capsys):
    """Exit 2 with one line on stderr, before any timing."""
    from benchmarks import bench_cpu

    assert bench_cpu.main(argv) == 2
    assert capsys.readouterr().err.startswith("bench_cpu: ")


def test_bench_cpu_l2_table(capsys):
    """--l2: one row of ns per element for copy_, ORT, the forward, the backward and the bf16 forward, each finite and
    positive, at 1 thread (the in-L2 figures of the performance notes)."""
    pytest.importorskip("onnxruntime", reason="needs onnxruntime (the onnx extra)")
    from benchmarks import bench_cpu

    threads = torch.get_num_threads()
    try:
        assert bench_cpu.main(["--l2", "--rounds", "1"]) == 0
    finally:
        torch.set_num_threads(threads)
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("in L2: [64, 64, 64] fp32"))
    assert lines[at + 1] == "| copy_ | ORT | fwd | bwd (dx, dbias) | bf16 fwd |", lines
    values = [float(v) for v in lines[at + 3].strip("| ").split(" | ")]
    assert len(values) == 5 and all(0 < v < 1e3 for v in values), values


def test_bench_cpu_child_env_blocks_idle_workers_and_keeps_one_memory_mode():
    """Each memory mode's process gets only its own malloc settings, and OpenMP workers that block when idle (a
    spinning team took ORT's cores), unless the caller chose a wait policy."""
    from benchmarks import bench_cpu

    parent = {"PATH": "/bin", "MALLOC_MMAP_MAX_": "0", "THP_MEM_ALLOC_ENABLE": "1"}
    fresh = bench_cpu.child_env("fresh", parent)
    assert fresh == {"PATH": "/bin", "OMP_WAIT_POLICY": "PASSIVE"}, fresh
    reused = bench_cpu.child_env("reused", parent)
    assert reused["MALLOC_MMAP_MAX_"] == "0" and "THP_MEM_ALLOC_ENABLE" not in reused, reused
    assert bench_cpu.child_env("thp", {**parent, "OMP_WAIT_POLICY": "ACTIVE"})["OMP_WAIT_POLICY"] == "ACTIVE"


_REUSED_FWD_BWD = """
import torch, torchtrt_swish
from benchmarks import bench_cpu as B
torch.set_num_threads(1)
B.grow_heap(B.POOL_BYTES)
x, b = torch.randn(B.SHAPE).requires_grad_(), torch.randn(B.BIAS_SHAPE).requires_grad_()
g = torch.randn(B.SHAPE)
faults = {}
B.median_ms({"fwd+bwd": lambda: torch.autograd.grad(torchtrt_swish.swish(x, b), (x, b), g)}, 10, 2, faults)
print(faults["fwd+bwd"])
"""


def test_bench_cpu_reused_memory_takes_no_fresh_blocks_once_the_heap_is_grown():
    """--memory reused times the kernels without the kernel's page faults, as ORT's arena: glibc (2.36 here) keeps
    freed memory, but c10's 64-byte aligned requests do not fit a freed block of exactly their size, so a forward +
    backward now and then lands its 64 MB output past the freed blocks, on fresh pages (16384 faults; 5-7 blocks in
    these ten rounds without grow_heap, performance notes v2), unless grow_heap made them resident first. A few
    faults of small allocations are allowed; one fresh block is not."""
    from benchmarks import bench_cpu

    root = Path(__file__).resolve().parent.parent
    env = bench_cpu.child_env("reused", os.environ)
    proc = subprocess.run([sys.executable, "-c", _REUSED_FWD_BWD], cwd=root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    faults = int(proc.stdout.split()[-1])
    assert faults < 1024, faults
