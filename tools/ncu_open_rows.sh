#!/usr/bin/env bash
# One H200 call for issue 24's two open rows: [64,256,14,14] fp16/bf16 forward + backward against inductor, and the
# column-sum finalize of a scalar bias against inductor's reduction. Kernel times by torch.profiler first (no
# replay), then one ncu profile of every kernel of those calls (clocks untouched, caches as the program leaves them,
# as in a network step). Also the plugin's capture tests and bench_plugin (issue 25's cost check). Logs in $OUT.
# Carry: third_party (TensorRT headers), .whl (onnx-graphsurgeon, polygraphy, scikit-build-core, pathspec).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source tools/device_prelude.sh
install_carried_wheels
build_from_source "$OUT"

ROWS="--layouts nchw_256x14x14_n64 --dtypes float16,bfloat16 --with-compile"
SCALAR="--sizes 20,24 --dtypes float16 --with-compile"
{
    timeout 120 python3 tools/profile_driver.py $ROWS --torch-profiler --reps 20
    timeout 120 python3 tools/profile_driver.py $SCALAR --torch-profiler --reps 20
} 2>&1 | tee "$OUT/kernels.txt" | grep -E "^==|us " | head -80

for what in rows scalar; do
    args=$ROWS; [ $what = scalar ] && args=$SCALAR
    timeout 200 ncu --clock-control none --cache-control none --kernel-name-base function \
        --kernel-name "regex:^(swish|finalize|triton_)" --launch-skip 0 \
        --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
        --section SchedulerStats --section MemoryWorkloadAnalysis \
        -o "$OUT/ncu_$what" python3 tools/profile_driver.py $args --reps 1 > "$OUT/ncu_$what.log" 2>&1
    echo "ncu $what: exit $?"
    ncu --import "$OUT/ncu_$what.ncu-rep" --page details --print-units base > "$OUT/ncu_${what}_details.txt" 2>&1
    grep -E "^  [A-Za-z_].*\(|Duration|Registers Per|Achieved Occupancy|Memory Throughput|Block Size|Grid Size|Waves Per SM" \
        "$OUT/ncu_${what}_details.txt" | head -120
done

timeout 100 python3 -m pytest -q -p no:cacheprovider -m cuda -rs tests/trt_plugin/test_enqueue_capture_gpu.py \
    tests/trt_plugin/test_enqueue_gpu.py 2>&1 | tail -5
timeout 90 python3 benchmarks/bench_plugin.py --out "$OUT/bench_plugin.csv" 2>&1 | tail -14
