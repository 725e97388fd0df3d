#!/usr/bin/env bash
# The two-GPU checks in one device call (kind nvidia-h200-x2): build from source with the machine's torch, then the
# tests marked multi_gpu. Logs land in $OUT. Carry: third_party (the TensorRT headers that the plugin library and
# its conformance harness are built against).
# Usage: bash tools/multi_gpu_check.sh [pytest arguments...]   (TESTS overrides the test path)
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
export TORCHTRT_SWISH_NO_FETCH=1
# NVLink multicast stays off on these shared hosts (the device tool's KINDS.md); the tests' child processes inherit it.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}

{ nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.used --format=csv; nvidia-smi topo -m; } \
    > "$OUT/gpu.txt" 2>&1
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, "gpus", torch.cuda.device_count(),
"nccl", torch.cuda.nccl.version())' 2>&1 | tee -a "$OUT/gpu.txt"

t0=$(date +%s)
python3 -m pip install -q --no-build-isolation --no-deps -v -e . > "$OUT/build.log" 2>&1 \
    || { tail -40 "$OUT/build.log"; exit 1; }
grep -F "[torchtrt_swish build]" "$OUT/build.log"
echo "build: $(( $(date +%s) - t0 )) s"

# Only this file by default: other test modules import packages (onnx-graphsurgeon, polygraphy) the image lacks.
python3 -m pytest -p no:cacheprovider -m multi_gpu -v -rsw --durations=10 ${TESTS:-tests/test_multi_gpu.py} "$@" 2>&1 \
    | tee "$OUT/pytest_multi_gpu.log" | tail -70
rc=${PIPESTATUS[0]}
nvidia-smi --query-compute-apps=pid,gpu_bus_id,used_memory --format=csv > "$OUT/compute_apps_after.txt" 2>&1
exit "$rc"
