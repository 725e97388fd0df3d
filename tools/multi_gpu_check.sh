#!/usr/bin/env bash
# The two-GPU checks in one device call (kind nvidia-h200-x2): build from source with the machine's torch, then the
# tests marked multi_gpu. Logs land in $OUT. Carry: third_party (the TensorRT headers that the plugin library and
# its conformance harness are built against), .whl (scikit-build-core and pathspec for the build).
# Usage: bash tools/multi_gpu_check.sh [pytest arguments...]   (TESTS overrides the test path)
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source tools/device_prelude.sh
# NVLink multicast stays off on these shared hosts (the device tool's KINDS.md); the tests' child processes inherit it.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}

{ nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.used --format=csv; nvidia-smi topo -m; } \
    > "$OUT/gpu.txt" 2>&1
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, "gpus", torch.cuda.device_count(),
"nccl", torch.cuda.nccl.version())' 2>&1 | tee -a "$OUT/gpu.txt"

install_carried_wheels
build_from_source "$OUT"

# Only this file by default: other test modules import packages (onnx-graphsurgeon, polygraphy) the image lacks.
python3 -m pytest -p no:cacheprovider -m multi_gpu -v -rsw --durations=10 ${TESTS:-tests/test_multi_gpu.py} "$@" 2>&1 \
    | tee "$OUT/pytest_multi_gpu.log" | tail -70
rc=${PIPESTATUS[0]}
nvidia-smi --query-compute-apps=pid,gpu_bus_id,used_memory --format=csv > "$OUT/compute_apps_after.txt" 2>&1
exit "$rc"
