#!/usr/bin/env bash
# One H200 call that verifies a change end to end within the device tool's 600 s: build from source with the
# machine's torch, the `cuda` suite (4 workers on cores 0-7) next to the CPU tests that matter on another torch and
# more cores (cores 8-15: thread scaling, compiled strides and cache keys, the backward planner), the doctor, the
# SASS load-order check, then the CPU benchmark alone on the host. Each step under a timeout, so a slow one costs its
# own rows only. Logs: $OUT/logs.tgz (the device tool returns at most 8 files).
# Carry: third_party (TensorRT headers), .whl (onnx-graphsurgeon, polygraphy, scikit-build-core, pathspec) and, optionally, .lean (one pinned
# TensorRT lean runtime's wheels for this Python, installed into build/trt-lean-<version> for the tensorrt_runtime
# cuda tests).
set -uo pipefail
OUT=${OUT:-/tmp/out}
source tools/device_prelude.sh
collect_logs_on_exit
install_carried_wheels
if [ -d .lean ]; then
    for v in $(awk '!/^#/ && NF {print $1}' tests/trt_lean_pins.txt | sort -u); do
        PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.lean timeout 60 python3 tests/trt_lean.py install "$v" 2>&1 | tail -1
    done
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'; } | tee "$L/machine.txt"

build_from_source "$L"

rc=0
xdist=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 4")
( taskset -c 8-15 timeout ${CPU_TIMEOUT:-200} python3 -m pytest -q -p no:cacheprovider -m "not cuda" -rs \
      ${CPU_TESTS:-tests/test_cpu_parallel.py tests/test_ops_compile.py tests/test_backward_plan.py tests/test_ops.py} \
      > "$L/pytest_cpu.log" 2>&1
  echo "pytest CPU tests (torch of this machine): exit $? :: $(tail -1 "$L/pytest_cpu.log")" ) &
cpu_pid=$!
taskset -c 0-7 timeout ${CUDA_TIMEOUT:-240} python3 -m pytest -q -p no:cacheprovider -m cuda -rs $xdist ${TESTS:-tests} \
    > "$L/pytest_cuda.log" 2>&1
prc=$?
grep -E "^(FAILED|ERROR)" "$L/pytest_cuda.log" | head -20
echo "pytest -m cuda: exit $prc :: $(tail -1 "$L/pytest_cuda.log")"
[ $prc -eq 0 ] || rc=1
wait $cpu_pid
grep -E "^(FAILED|ERROR)" "$L/pytest_cpu.log" | head -20

timeout 60 python3 -m torchtrt_swish.doctor --json "$L/doctor.json" > "$L/doctor.txt" 2>&1
echo "doctor: exit $?"; cat "$L/doctor.txt"
timeout 60 python3 benchmarks/kernel_report.py --check > "$L/kernel_report.md" 2>&1
echo "kernel_report --check: exit $?"
ext=$(python3 -c 'import torchtrt_swish._C as c; print(c.__file__)')
echo "OpenMP symbols of _C: $(nm -D --undefined-only "$ext" | grep -ciE 'gomp|omp_')"
timeout ${BENCH_CPU_TIMEOUT:-120} python3 benchmarks/bench_cpu.py ${CPU_BENCH_ARGS:---rounds 5} 2>&1 | tee "$L/bench_cpu.log"
exit $rc
