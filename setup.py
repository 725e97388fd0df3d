"""Build of torchtrt_swish: the torch extension ``_C`` plus the native targets in tools/native_build.py."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tools"))
import native_build  # noqa: E402

from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension  # noqa: E402
import torch  # noqa: E402


def _with_cuda() -> bool:
    if os.environ.get("TORCHTRT_SWISH_FORCE_CPU") == "1":
        return False
    if native_build.cuda_home() is None:
        native_build.log("nvcc not found: building the CPU op only")
        return False
    if torch.version.cuda is None:
        native_build.log("this torch is a CPU build: building the CPU op only (install a CUDA torch for the GPU op)")
        return False
    return True


WITH_CUDA = _with_cuda()
if WITH_CUDA:
    os.environ.setdefault("CUDA_HOME", str(native_build.cuda_home()))
    # torch's own flags are unused (no .cu in _C) but it warns when the list is unset and no GPU is visible.
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", native_build.arch_list())


class BuildNative(BuildExtension):
    """Run the ninja build of kernel object / plugin / harness first, then link _C against the kernel object."""

    def run(self):
        result = native_build.build(inplace=True) if WITH_CUDA else native_build.NativeResult(
            notes=["TensorRT plugin NOT built: CUDA disabled (no CUDA kernels or harness either)"])
        for ext in self.extensions:
            if WITH_CUDA and result.kernel_object:
                ext.extra_objects = [str(result.kernel_object)]
        super().run()
        if result.plugin_library and not self.inplace:
            dest = Path(self.build_lib) / "torchtrt_swish"
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(result.plugin_library, dest / result.plugin_library.name)
        for note in result.notes:
            native_build.log(note)


ext_kwargs = dict(
    name="torchtrt_swish._C",
    sources=["csrc/torch/swish_op.cpp", "csrc/torch/swish_autograd.cpp"]
    + (["csrc/torch/swish_cuda.cpp"] if WITH_CUDA else []),
    include_dirs=[str(ROOT / "csrc")],
    extra_compile_args={"cxx": ["-O3"]},
)
ext = CUDAExtension(**ext_kwargs) if WITH_CUDA else CppExtension(**ext_kwargs)

setup(
    ext_modules=[ext],
    cmdclass={"build_ext": BuildNative.with_options(use_ninja=True)},
    package_data={"torchtrt_swish": ["libtorchtrt_swish_plugin.so"]},
)
