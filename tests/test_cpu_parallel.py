"""The CPU op on several threads: built against torch's OpenMP, work really spread over threads, the same bits on
any thread count, and every per-instruction-set copy of the kernels right.

at::parallel_for (OpenMP backend) cuts [0, n) into min(threads, ceil(n / grain)) chunks of ceil(n / chunks)
elements; the cases below are chosen so that on 2, 3 and 4 threads every chunk starts inside a bias run (mid-
channel) and off a 16-element vector boundary, where a wrong bias index or a tail computed differently would show.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torchtrt_swish
from test_ops import _assert_backward_close, _assert_close_to_reference

ROOT = Path(__file__).resolve().parent.parent
GRAIN = 32768  # kGRAIN of csrc/torch/swish_op.cpp: the elementwise at::parallel_for grain
THREADS = (2, 3, 4)
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]

# (label, x shape, bias shape, run length: how many consecutive elements share one bias pattern).
CASES = [
    ("dim1", (5, 7, 53, 53), (7, 1, 1), 53 * 53),
    ("lastdim", (131, 1001), (1001,), 1001),
    ("scalar", (98315,), (1,), 98315),
]
# Also a last-dim bias of few channels, which the forward repeats into runs of >= 256 (kMIN_RUN of swish_op.cpp), one
# whose dbias combine (76 partial rows: 600 channels a task) is split between threads mid-block of 256 channels, and
# planes shorter than 256 and 64 elements (the forward's bias pattern of swish_op.cpp, the fused backward's
# shortRunsTask of swish_cpu_vec.cpp, which lastdim7 takes too).
SAME_BITS_CASES = CASES + [("lastdim7", (14045, 7), (7,), 7), ("lastdim600", (2048, 600), (600,), 600),
                           ("planes7", (400, 13, 7), (13, 1), 7), ("planes49", (24, 96, 7, 7), (96, 1, 1), 49)]
OPENMP = "ATen parallel backend: OpenMP" in torch.__config__.parallel_info()
needs_openmp = pytest.mark.skipif(not OPENMP, reason="this torch's ATen does not parallelize with OpenMP")


def chunk_starts(n: int, threads: int) -> list[int]:
    """Where at::parallel_for's OpenMP chunks after the first start, for n elements on `threads` threads."""
    chunks = min(threads, -(-n // GRAIN))
    size = -(-n // chunks)
    return [k * size for k in range(1, chunks) if k * size < n]


def _inputs(shape, bshape, dtype, seed=24):
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=gen, dtype=torch.float64) * 4).to(dtype)
    b = torch.randn(bshape, generator=gen, dtype=torch.float64).to(dtype)
    g = (torch.randn(shape, generator=gen, dtype=torch.float64) + 0.25).to(dtype)
    return x, b, g


@pytest.mark.parametrize("label,shape,bshape,run", CASES, ids=[c[0] for c in CASES])
def test_cases_split_mid_run(label, shape, bshape, run):
    """Each case makes every chunk on 2-4 threads start inside a run and off a vector boundary."""
    n = torch.Size(shape).numel()
    assert n > GRAIN
    for t in THREADS:
        starts = chunk_starts(n, t)
        assert len(starts) == t - 1, f"{label}: {t} threads give {len(starts) + 1} chunks"
        for s in starts:
            assert 16 <= s % run <= run - 16 and s % 16, f"{label}: chunk start {s} on {t} threads is not mid-run"


@contextlib.contextmanager
def _num_threads(n: int):
    """torch's intra-op thread count set to n inside the block, the previous count restored after it."""
    saved = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


over_dtypes = pytest.mark.parametrize("dtype", DTYPES, ids=str)
over_same_bits_cases = pytest.mark.parametrize("label,shape,bshape,run", SAME_BITS_CASES,
                                               ids=[c[0] for c in SAME_BITS_CASES])


@needs_openmp
@over_dtypes
@over_same_bits_cases
def test_forward_same_bits_for_any_thread_count(label, shape, bshape, run, dtype):
    """y on 2, 3 and 4 threads equals y on 1 thread bit for bit, and each matches the fp64 reference."""
    x, b, _ = _inputs(shape, bshape, dtype)
    with _num_threads(1):
        y1 = torchtrt_swish.swish(x, b)
        _assert_close_to_reference(y1, x, b)
    for t in THREADS:
        with _num_threads(t):
            yt = torchtrt_swish.swish(x, b)
            _assert_close_to_reference(yt, x, b)
        assert torch.equal(yt, y1), f"{label} {dtype}: y on {t} threads differs from 1 thread"


@needs_openmp
@over_dtypes
@over_same_bits_cases
def test_backward_same_bits_for_any_thread_count(label, shape, bshape, run, dtype):
    """dx and dbias on 2, 3 and 4 threads equal 1 thread's bit for bit; 1 thread's match fp64 autograd."""
    x, b, g = _inputs(shape, bshape, dtype)
    with _num_threads(1):
        dx1, db1 = torch.ops.torchtrt_swish.swish_backward(g, x, b)
        _assert_backward_close(x, b, g, f"{label} 1 thread")
    for t in THREADS:
        with _num_threads(t):
            dx, db = torch.ops.torchtrt_swish.swish_backward(g, x, b)
        assert torch.equal(dx, dx1), f"{label} {dtype}: dx on {t} threads differs from 1 thread"
        assert torch.equal(db, db1), f"{label} {dtype}: dbias on {t} threads differs from 1 thread"


@over_dtypes
def test_result_does_not_depend_on_where_the_range_is_cut(dtype):
    """swish(x[s:e]) is swish(x)[s:e] bit for bit: an element gives the same bits in a full vector and in a tail.

    The 1-thread op on a slice runs the kernel on exactly that range, so random cuts move elements between the
    vector body and the partial-vector tail (what thread chunks and bias runs do at their edges).
    """
    gen = torch.Generator().manual_seed(5)
    x = (torch.randn(4096, generator=gen, dtype=torch.float64) * 8).to(dtype)
    b = torch.randn(1, generator=gen, dtype=torch.float64).to(dtype)
    g = torch.randn(4096, generator=gen, dtype=torch.float64).to(dtype)
    with _num_threads(1):
        y = torchtrt_swish.swish(x, b)
        dx = torch.ops.torchtrt_swish.swish_backward(g, x, b)[0]
        cuts = torch.randint(0, 4097, (300, 2), generator=gen).sort(dim=1).values.tolist()
        for s, e in cuts:
            assert torch.equal(torchtrt_swish.swish(x[s:e], b), y[s:e]), f"{dtype}: y of x[{s}:{e}]"
            assert torch.equal(torch.ops.torchtrt_swish.swish_backward(g[s:e], x[s:e], b)[0], dx[s:e]), (
                f"{dtype}: dx of x[{s}:{e}]")


# A fresh process, idle OpenMP threads asleep (not spinning): CPU time spent off the calling thread is our work.
_THREAD_PROBE = r"""
import sys, time, torch, torchtrt_swish
torch.set_num_threads(int(sys.argv[1]))
x = torch.randn(64, 64, 64, 64); g = torch.randn_like(x); b = torch.randn(64, 1, 1)
calls = {"forward": lambda: torchtrt_swish.swish(x, b),
         "backward": lambda: torch.ops.torchtrt_swish.swish_backward(g, x, b)}
for name, call in calls.items():
    call()
    p0, t0 = time.process_time(), time.thread_time()
    for _ in range(5):
        call()
    total, own = time.process_time() - p0, time.thread_time() - t0
    print(name, (total - own) / total)
"""


def _off_thread_share(threads: int) -> dict[str, float]:
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _THREAD_PROBE, str(threads)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return {name: float(v) for name, v in (line.split() for line in proc.stdout.splitlines())}


@needs_openmp
def test_work_runs_on_several_threads():
    """On 2 threads a good part of the op's CPU time is spent off the calling thread; on 1 thread none is."""
    serial, parallel = _off_thread_share(1), _off_thread_share(2)
    for name in ("forward", "backward"):
        assert serial[name] < 0.05, f"{name}: {serial[name]:.0%} off the calling thread with 1 thread"
        assert parallel[name] > 0.25, f"{name}: only {parallel[name]:.0%} off the calling thread with 2 threads"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"needs {name} (binutils), not on PATH")
    return path


def _needed(lib: str) -> list[str]:
    out = subprocess.run([_tool("readelf"), "-d", lib], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


@needs_openmp
def test_extension_links_torchs_openmp_runtime():
    """_C calls GOMP_parallel (at::parallel_for compiled with -fopenmp) from the OpenMP library libtorch_cpu loads."""
    ext = torchtrt_swish._C.__file__
    undefined = subprocess.run([_tool("nm"), "-D", "--undefined-only", ext], capture_output=True, text=True,
                               check=True).stdout
    assert re.search(r"\bGOMP_parallel\b", undefined), "_C has no OpenMP parallel region: built without -fopenmp?"
    torch_cpu = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    omp = [n for n in _needed(str(torch_cpu)) if re.match(r"lib(i?omp|gomp)", n)]
    ours = [n for n in _needed(ext) if re.match(r"lib(i?omp|gomp)", n)]
    assert omp and ours == omp, f"_C needs {ours}, libtorch_cpu needs {omp}"
    if Path("/proc/self/maps").exists():
        mapped = {line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
                  if re.search(r"/lib(i?omp|gomp)[^/]*$", line)}
        assert len(mapped) == 1, f"more than one OpenMP runtime loaded: {sorted(mapped)}"


@needs_openmp
def test_the_build_linked_the_runtime_libtorch_cpu_loads():
    """The same soname is not enough (torch 2.14 ships an unhashed libgomp.so.1, as the compiler's is named): the
    runtime the build linked is the very file libtorch_cpu's NEEDED entry loaded."""
    from tools_native import build_summary

    summary = build_summary()
    if "openmp_runtime" not in summary:
        pytest.skip("no build summary in build/native (run ./dev setup)")
    maps = Path("/proc/self/maps")
    if not maps.exists():
        pytest.skip("needs /proc/self/maps (Linux) to see which OpenMP runtime torch loaded")
    mapped = {Path(line.split()[-1]).resolve() for line in maps.read_text().splitlines()
              if re.search(r"/lib(i?omp|gomp)[^/]*$", line)}
    assert summary["openmp_runtime"], "the build did not find libtorch_cpu's OpenMP runtime (see its OpenMP line)"
    assert mapped == {Path(summary["openmp_runtime"]).resolve()}, (mapped, summary["openmp_runtime"])


def _capabilities() -> list[str]:
    import platform

    x86 = platform.machine().lower() in ("x86_64", "amd64")
    return ["default"] + (["avx2", "avx512"] if x86 else [])


# ATen's name for each level, as torch.backends.cpu.get_cpu_capability() reports it ("NO AVX" in some releases).
_ATEN_NAMES = {"default": ("DEFAULT", "NO AVX"), "avx2": ("AVX2",), "avx512": ("AVX512",)}


@pytest.mark.parametrize("capability", _capabilities())
def test_each_instruction_set_copy_matches_the_reference(capability):
    """Under ATEN_CPU_CAPABILITY=<set> (the op follows ATen's choice) the op runs that set's copy, which
    torchtrt_swish._C.cpu_kernels() names, and test_ops' CPU value tests pass with it."""
    env = dict(os.environ, ATEN_CPU_CAPABILITY=capability, PYTHONPATH=str(ROOT))
    probe = subprocess.run(
        [sys.executable, "-c", "import torch, torchtrt_swish; from torchtrt_swish import _C; "
                               "print(torch.backends.cpu.get_cpu_capability()); print(_C.cpu_kernels())"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr[-2000:]
    aten, ours = probe.stdout.split("\n")[:2]
    if aten not in _ATEN_NAMES[capability]:
        pytest.skip(f"this CPU does not run {capability} (ATen picks {aten})")
    assert ours == _ATEN_NAMES[capability][0], (capability, aten, ours)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_ops.py", "-k",
           "cpu and (forward_matches or backward_matches or special_values or nan_propagates)"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert re.search(r"\b([4-9]|\d\d+) passed", proc.stdout), proc.stdout[-2000:]


# The op faults in a fresh output (memory never written, as glibc maps blocks of 32 MB and more for each call) before
# its kernels write it: csrc/torch/swish_op.cpp, prefaultFresh. These check its decision and its effect on the pages.
PREFAULT_MIN_BYTES = 4 << 20  # kPREFAULT_MIN_BYTES of csrc/torch/swish_op.cpp
PAGE = os.sysconf("SC_PAGESIZE") if hasattr(os, "sysconf") else 4096


def _kernel_populates() -> bool:
    import platform

    nums = re.match(r"(\d+)\.(\d+)", platform.release())
    return sys.platform == "linux" and nums is not None and (int(nums[1]), int(nums[2])) >= (5, 14)


needs_populate = pytest.mark.skipif(not _kernel_populates(),
                                    reason="needs Linux 5.14 or later (MADV_POPULATE_WRITE, mincore, /proc/self/smaps)")


def _resident_bytes(buf) -> int:
    """Rss of the mapping that holds buf (an anonymous mmap), from /proc/self/smaps."""
    import ctypes

    view = (ctypes.c_char * 1).from_buffer(buf)
    addr = ctypes.addressof(view)
    del view
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        head = re.match(r"([0-9a-f]+)-([0-9a-f]+) ", line)
        if head and int(head[1], 16) <= addr < int(head[2], 16):
            rss = next(x for x in lines[i + 1:] if x.startswith("Rss:"))
            return int(rss.split()[1]) * 1024
    raise AssertionError(f"no mapping holds {addr:#x}")


@needs_populate
@pytest.mark.parametrize("size,fresh", [(PREFAULT_MIN_BYTES, True), (PREFAULT_MIN_BYTES - PAGE, False),
                                        (3 * PREFAULT_MIN_BYTES + 5 * PAGE, True)])
def test_a_fresh_output_is_faulted_in_whole_and_a_small_one_left(size, fresh):
    """A never-written block from the threshold up is faulted in, every page; below it, nothing is touched."""
    import mmap

    from torchtrt_swish import _C

    with mmap.mmap(-1, size) as buf:
        assert _resident_bytes(buf) == 0
        assert _C.prefault_output(buf) is fresh
        assert _resident_bytes(buf) == (size if fresh else 0)
        assert _C.prefault_output(buf) is False, "a block already faulted in was taken for fresh"


@needs_populate
@pytest.mark.parametrize("written,fresh", [("first", True), ("last", False)])
def test_freshness_is_read_from_the_last_page(written, fresh):
    """glibc writes a mapped block's header into its first page, so only the last page says whether the block is
    fresh; a block whose last page was written is taken for reused memory and left to fault at the stores."""
    import mmap

    from torchtrt_swish import _C

    size = 2 * PREFAULT_MIN_BYTES
    with mmap.mmap(-1, size) as buf:
        buf[0 if written == "first" else size - 1] = 1
        assert _C.prefault_output(buf) is fresh
        assert _resident_bytes(buf) == (size if fresh else PAGE)
        assert buf[0 if written == "first" else size - 1] == 1, "faulting in changed what the block holds"


# With glibc's defaults (no MALLOC_ variables), a 64 MB block is mapped fresh for every allocation.
_FRESH_OP = r"""
import torch, torchtrt_swish
from torchtrt_swish import _C
torch.set_num_threads(2)
x = torch.randn(64, 64, 64, 64, dtype=torch.float64); g = torch.randn_like(x); b = torch.randn(64, 1, 1).double()
probe = torch.empty(x.shape)
print("fresh", _C.prefault_output(probe.numpy()))
del probe
for dt in (torch.float32, torch.bfloat16):
    xs, gs, bs = x.to(dt), g.to(dt), b.to(dt)
    y = torchtrt_swish.swish(xs, bs)
    dx, db = torch.ops.torchtrt_swish.swish_backward(gs, xs, bs)
    same_y = all(torch.equal(y[i], torchtrt_swish.swish(xs[i], bs)) for i in range(64))
    same_dx = all(torch.equal(dx[i], torch.ops.torchtrt_swish.swish_backward(gs[i], xs[i], bs)[0]) for i in range(64))
    print(dt, same_y, same_dx)
"""


@needs_populate
def test_the_op_on_fresh_outputs_writes_what_it_writes_elsewhere():
    """In a process with glibc's defaults the op's 64 MB outputs are fresh (the probe is); y and dx equal the op's
    results for each sample alone (1 MB outputs, never faulted in ahead), fp32 and bf16 (outputs of 64 and 32 MB)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", _FRESH_OP], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "fresh True", "a 64 MB allocation was not fresh memory: the test would check nothing"
    assert lines[1:] == ["torch.float32 True True", "torch.bfloat16 True True"], lines


def test_page_prefetch_is_off_on_amd_only():
    """The streaming loops prefetch a page ahead of each stream except on AMD CPUs (cpu_vec::pagePrefetch): the
    vendor that /proc/cpuinfo names decides."""
    cpuinfo = Path("/proc/cpuinfo")
    vendors = ({line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                if line.startswith("vendor_id")} if cpuinfo.exists() else set())
    if not vendors:
        pytest.skip("no vendor_id in /proc/cpuinfo: not an x86 Linux machine")
    assert torchtrt_swish._C.cpu_page_prefetch() == ("AuthenticAMD" not in vendors), vendors


# AVX512_BF16's instructions (the AVX512 copy is built with -mavx512bf16 but runs on AVX512 CPUs without it too).
_BF16_ISA = ("vcvtne2ps2bf16", "vcvtneps2bf16", "vdpbf16ps")


def test_bf16_instructions_only_where_the_avx512_copy_rounds():
    """In the built _C, AVX512_BF16 instructions appear only as the AVX512 copy's VCVTNE2PS2BF16 (cpu_vec's narrow,
    behind avx512Bf16()), never where the compiler chose one itself: a CPU with AVX512 but not AVX512_BF16 would stop
    there with an illegal instruction."""
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("needs objdump (binutils) to disassemble _C")
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", "-C", torchtrt_swish._C.__file__],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    function, found = "", []
    for line in out.splitlines():
        if line.endswith(">:"):
            function = line
        elif any(m in line for m in _BF16_ISA):
            found.append((line.split()[1], function))
    if torchtrt_swish._C.cpu_bf16_instruction():
        assert found, "the AVX512 copy rounds bf16 with AVX512_BF16 here, but _C holds none of its instructions"
    assert all(m == "vcvtne2ps2bf16" and "cpu_vec::AVX512::" in f for m, f in found), found[:5]
