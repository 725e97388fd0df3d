#!/usr/bin/env bash
# One H200 call for a forward-kernel change: the op built from the tree (no plugin) while the variants' libraries
# build and parallel processes fill inductor's caches; then the op's GPU tests beside compute-sanitizer memcheck
# (caching allocator off) over the planner's switch points; then, alone on the GPU, tools/ab_forward/ab_forward.py
# with the baseline's launcher (BASE: a folder holding the old swish_forward.cu and swish_forward_plan.h), the tree's,
# the op and compile, forward and forward + backward; bench_layouts last if time is left. Logs: $OUT/logs.tgz.
# CASES: bench_layouts case names; BUDGET: seconds the whole script may take.
set -uo pipefail
OUT=${OUT:-/tmp/out}
source tools/device_prelude.sh
collect_logs_on_exit
export TORCHTRT_SWISH_SKIP_PLUGIN=${TORCHTRT_SWISH_SKIP_PLUGIN:-1} TORCHINDUCTOR_COMPILE_THREADS=1
t0=$(date +%s)
left() { echo $(( ${BUDGET:-420} - $(date +%s) + t0 )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > "$L/gpu.txt"
AB=/tmp/ab
mkdir -p "$AB"
for v in "base:-I${BASE:?folder of the baseline swish_forward.cu}" "tree:"; do
    nvcc -std=c++17 -O3 -arch=sm_90 -shared -Xcompiler -fPIC -Xptxas -v ${v#*:} -Icsrc/kernels -Icsrc \
        tools/ab_forward/ab_forward.cu -o "$AB/${v%%:*}.so" > "$L/build_${v%%:*}.log" 2>&1 &
done
IFS=',' read -ra cs <<< "${CASES:?case names}"
for dt in fp32 fp16 bf16; do
    for ((i = 0; i < ${#cs[@]}; i += 4)); do
        group=$(IFS=,; echo "${cs[*]:i:4}")
        nice -n 10 timeout 240 python3 tools/ab_forward/ab_forward.py --prewarm --backward --cases "$group" \
            --dtypes $dt > "$L/prewarm_${dt}_$i.log" 2>&1 &
    done
done
build_from_source "$L"
echo "op built at $(( $(date +%s) - t0 )) s"

xdist=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 4")
( PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout -k 5 ${SANITIZE_SECONDS:-150} compute-sanitizer --tool memcheck \
      --error-exitcode 3 python3 tools/sanitize_op.py --switch-points --max-elems $((1 << ${SANITIZE_LOG2:-21})) \
      --random ${SANITIZE_RANDOM:-40} > "$L/sanitize_memcheck.log" 2>&1
  echo "memcheck (caching off, switch points + random): exit $? :: $(grep -E "ERROR SUMMARY|sanitize_op:" \
      "$L/sanitize_memcheck.log" | tr '\n' ' ')" ) &
TORCHTRT_SWISH_PROPERTY_SECONDS=${PROPERTY_SECONDS:-30} timeout ${TEST_SECONDS:-170} python3 -m pytest -q \
    -p no:cacheprovider -m cuda -rs $xdist ${TESTS:-tests/test_kernels_layouts.py tests/test_kernels_property_gpu.py \
    tests/test_ops.py} > "$L/pytest_cuda.log" 2>&1
echo "pytest -m cuda: exit $? :: $(tail -1 "$L/pytest_cuda.log")"
grep -E "^(FAILED|ERROR)" "$L/pytest_cuda.log" | head -10
wait
echo "checks done at $(( $(date +%s) - t0 )) s"
grep -l "Traceback" "$L"/prewarm_*.log 2>/dev/null | head -2 | while read -r f; do echo "== $f"; tail -3 "$f"; done

timeout $(( $(left) - 10 )) python3 tools/ab_forward/ab_forward.py --variants "base=$AB/base.so,tree=$AB/tree.so" \
    --op --backward --cases "$CASES" --dtypes ${DTYPES:-bf16,fp16,fp32} --out "$OUT/ab.csv" ${AB_ARGS:-} \
    2>&1 | tee "$L/ab.log"
echo "A/B done at $(( $(date +%s) - t0 )) s"
if [ "$(left)" -gt 60 ] && [ -n "${LAYOUT_CASES:-}" ]; then
    timeout $(( $(left) - 5 )) python3 benchmarks/bench_layouts.py --variants ours,compile --timing graph \
        --cases "$LAYOUT_CASES" --dtypes fp32,fp16,bf16 --label tree --out "$OUT/layouts.csv" > "$L/layouts.log" 2>&1
    echo "bench_layouts: exit $? at $(( $(date +%s) - t0 )) s"
    grep -vE "^(wrote|device)" "$L/layouts.log" | head -80
fi
