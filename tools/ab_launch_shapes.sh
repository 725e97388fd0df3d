#!/usr/bin/env bash
# One H200 call for issue 24's open rows ([64,256,14,14] fp16/bf16 forward + backward against inductor): build, the
# kernel tests, bench_layouts in CUDA graphs on the tree as committed (LAYOUTS_TIMEOUT=0: none), then an A/B of the
# launch shapes the open rows depend on. Each variant changes one constant of the committed tree (sed), is rebuilt
# (ninja: only the objects that include it) and timed per kernel by torch.profiler (tools/profile_driver.py),
# inductor's kernels beside the first; the tree is restored after each. Run it on a copy of the tree (the device
# tool's): a variant edits the sources in place. Logs: $OUT/logs.tgz (the device tool returns at most 8 files).
# Carry: third_party (TensorRT headers), .whl (onnx-graphsurgeon, polygraphy, scikit-build-core, pathspec).
set -uo pipefail
OUT=${OUT:-/tmp/out}
source tools/device_prelude.sh
collect_logs_on_exit
install_carried_wheels
build_from_source "$L"

xdist=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 4")
timeout 150 python3 -m pytest -q -p no:cacheprovider -m cuda -rs $xdist tests/test_ops.py tests/test_kernels_layouts.py \
    tests/test_backward_plan.py > "$L/pytest_kernels.log" 2>&1
echo "pytest -m cuda (kernel tests): exit $? :: $(tail -1 "$L/pytest_kernels.log")"
grep -E "^(FAILED|ERROR)" "$L/pytest_kernels.log" | head -20

if [ "${LAYOUTS_TIMEOUT:-120}" -gt 0 ]; then
    timeout ${LAYOUTS_TIMEOUT:-120} python3 benchmarks/bench_layouts.py --variants ours,compile --timing graph \
        --cases ${LAYOUT_CASES:-nchw_256x14x14_n64,nchw_1152x7x7_n128,tokens_8192x768} --dtypes fp16,bf16,fp32 \
        --out "$L/layouts.csv" > "$L/layouts.log" 2>&1
    echo "bench_layouts: exit $?"; grep -vE "^(wrote|/|  )" "$L/layouts.log" | head -40
fi

CASES=${PROFILE_CASES:-nchw_256x14x14_n64,nhwc_256x14x14_n64,nchw_1152x7x7_n128,nchw_240x28x28_n128,tokens_8192x768}
profile() {  # $1: label, $2...: extra profile_driver options
    local label=$1; shift
    { timeout 90 python3 tools/profile_driver.py --layouts "$CASES" --dtypes float16,bfloat16,float32 --torch-profiler \
          --reps 20 "$@"
      timeout 60 python3 tools/profile_driver.py --sizes 20,21,22,23,24 --dtypes float16,float32 --torch-profiler \
          --reps 20 "$@"; } > "$L/profile_$label.txt" 2>&1
    echo "== variant $label"; grep -E "^==" "$L/profile_$label.txt"
}
rebuild() {  # $1: label
    local start=$(date +%s)
    python3 -m pip install -q --no-build-isolation --no-deps -e . > "$L/build_$1.log" 2>&1 || { tail -20 "$L/build_$1.log"; return 1; }
    echo "rebuild $1: $(( $(date +%s) - start )) s"
}
variant() {  # $1: label, $2: file, $3: committed text, $4: variant text
    cp "$2" "$2.committed"
    sed -i "s|$3|$4|" "$2"
    if grep -qF "$4" "$2" && rebuild "$1"; then profile "$1"; else echo "variant $1: not applied"; fi
    mv "$2.committed" "$2"
    touch "$2"  # the copy's time stamp predates the variant's objects: without this ninja keeps them
}

profile committed --with-compile
FWD=csrc/kernels/swish_forward.cu
SUM=csrc/kernels/swish_backward_plan.h
variant fwd_bf16_span2_2e18 $FWD "int64_t{1} << 20 : int64_t{1} << 18" "int64_t{1} << 18 : int64_t{1} << 18"
for rows in ${SUM_LANE_ROWS_VARIANTS:-1 2 8}; do
    variant sum_lane_rows_$rows $SUM "kSUM_LANE_ROWS = 4;" "kSUM_LANE_ROWS = $rows;"
done
