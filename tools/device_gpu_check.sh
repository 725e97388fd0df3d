#!/usr/bin/env bash
# Everything one H200 call does, in one script (device time is scarce): build from source with the machine's
# torch, GPU tests, compute-sanitizer, benchmark. Logs land in $OUT. Carry: third_party (TensorRT headers),
# .whl (onnx-graphsurgeon, polygraphy, scikit-build-core, pathspec).
# Usage: bash tools/device_gpu_check.sh [tests|sanitize|bench|plugin|ncu|cpu|omp|debug|layouts|effnet|issue15|
#                                        issue24|hostops|all]...
#   omp: the CPU op on the host's cores (issue 24 item 5): _C's OpenMP symbols and runtime, tests/test_cpu_parallel.py
#        and test_ops' CPU tests, then benchmarks/bench_cpu.py at 1, 2 and all threads (CPU_BENCH_ARGS).
#   layouts: benchmarks/bench_layouts.py (LAYOUT_ARGS, default --quick)
#   effnet: benchmarks/bench_efficientnet.py (EFFNET_ARGS).
#   issue15: the checks and the layout table of issue 15 in one call of about 8 minutes with the build: `cuda` tests
#            (4 pytest workers) next to compute-sanitizer memcheck and racecheck on the layout paths, then the layout
#            table (three dtypes) alone on the GPU; each step under a timeout, so a slow one costs its rows, not the
#            call. The EfficientNet table needs a call of its own (`effnet`): with it the call passed 600 s.
#   issue24: the network tables of issue 24 (benchmarks/bench_networks.py; NETWORKS, default "transformer
#            regnet_y_400mf"; NETWORK_ARGS: options of both phases, e.g. --batch 64; NETWORK_ARGS_<network>: of one
#            network's table; NETWORK_SECONDS_<network>: its table's time), about 8-9 minutes with the build. First one compile-only process per network x
#            compiled dtype x task x mode fills inductor's caches in parallel (compiling is CPU work: 16 cores), with
#            TESTS_BESIDE=1 the `cuda` suite beside them, then each network's table runs alone on the GPU and loads its
#            compiled graphs from those caches.
#            Each step under a timeout (the tables share what is left of ISSUE24_BUDGET=550 s since the build
#            began), so a slow one costs rows (the CSV is rewritten after each), not the call.
#            SANITIZE_BESIDE=1: compute-sanitizer memcheck and racecheck of tools/sanitize_op.py beside them too.
#   issue30: the `cuda` suite beside compute-sanitizer memcheck (PYTORCH_NO_CUDA_MEMORY_CACHING=1) and racecheck over
#            the planner's switch points for this GPU and random layouts (tools/sanitize_op.py --switch-points), then
#            the layout table (LAYOUT_ARGS); memcheck also over the forward's L1-switch test. Issue 38's forward goal:
#            LAYOUT_ARGS="--passes fwd --timing graph --variants ours,compile" (its goal lines close the table).
#   hostops: tools/host_ops.py per ';'-separated argument set in HOST_OPS (after issue24, so alone on the GPU).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source tools/device_prelude.sh
steps=${*:-all}

install_carried_wheels
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' | tee -a "$OUT/gpu.txt"

t0=$(date +%s)  # ISSUE24_BUDGET counts from here
build_from_source "$OUT"

rc=0
if [[ $steps == *debug* ]]; then
    # C++ backtrace of a crashing test: cuda-gdb also debugs host code (there is no gdb on the machine).
    cuda-gdb -q -batch -ex "set pagination off" -ex run -ex bt -ex "info sharedlibrary" --args python3 -m pytest -x -q \
        -p no:cacheprovider ${DEBUG_TEST:-tests} > "$OUT/debug.log" 2>&1
    grep -E "^#|signal|SIG" "$OUT/debug.log" | head -40
fi
if [[ $steps == *cpu* ]]; then
    python3 -m pytest -q -p no:cacheprovider -m "not cuda" -x tests 2>&1 | tee "$OUT/pytest_cpu.log" | tail -8
fi
if [[ $steps == *omp* ]]; then
    ext=$(python3 -c 'import torchtrt_swish._C as c; print(c.__file__)')
    { nproc; python3 -c 'import torch; print(torch.__config__.parallel_info())'
      (nm -D --undefined-only "$ext" | grep -iE "gomp|omp_"; readelf -d "$ext" | grep -iE "NEEDED.*omp") 2>&1
    } | tee "$OUT/omp.txt"
    python3 -m pytest -q -p no:cacheprovider -m "not cuda" -rs tests/test_cpu_parallel.py tests/test_ops.py 2>&1 \
        | tee "$OUT/pytest_omp.log" | tail -8
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    timeout 240 python3 benchmarks/bench_cpu.py ${CPU_BENCH_ARGS:-} 2>&1 | tee "$OUT/bench_cpu.log"
fi
if [[ $steps == *all* || $steps == *tests* ]]; then
    python3 -m pytest -q -p no:cacheprovider -m cuda -rs ${TESTS:-tests} 2>&1 | tee "$OUT/pytest_cuda.log" | tail -25
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
fi
if [[ $steps == *all* || $steps == *sanitize* ]]; then
    for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --error-exitcode 3 python3 tools/sanitize_op.py > "$OUT/sanitize_op_$tool.log" 2>&1
        echo "sanitizer $tool (op): exit $? :: $(tail -1 "$OUT/sanitize_op_$tool.log")"
        if [ -d tests/trt_plugin ]; then
            compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -p no:cacheprovider -m cuda \
                tests/trt_plugin -k "${SANITIZE_K:-not huge}" > "$OUT/sanitize_plugin_$tool.log" 2>&1
            echo "sanitizer $tool (plugin harness): exit $? :: $(tail -1 "$OUT/sanitize_plugin_$tool.log")"
        fi
    done
fi
if [[ $steps == *ncu* ]]; then
    # Our forward kernels next to inductor's, one profile each (warm caches, clocks untouched), plus inductor's SASS.
    ncu --clock-control none --cache-control none --kernel-name-base function \
        --kernel-name "regex:swishForward|^triton_poi_fused_add_mul_sigmoid_0$" \
        --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats \
        --section WarpStateStats --section InstructionStats --section MemoryWorkloadAnalysis \
        -o "$OUT/fwd" python3 tools/profile_driver.py --forward-only --with-compile ${NCU_ARGS:---sizes 18,20 --reps 2} \
        > "$OUT/ncu.log" 2>&1
    echo "ncu: exit $?"
    ncu --import "$OUT/fwd.ncu-rep" --page details --print-units base > "$OUT/ncu_details.txt" 2>&1
    find / -name "triton_poi_fused_add_mul_sigmoid_0*.cubin" 2>/dev/null | while read -r f; do
        echo "== $f"; cuobjdump -sass "$f"; done > "$OUT/inductor_sass.txt"
    echo "inductor cubins: $(grep -c '^==' "$OUT/inductor_sass.txt")"
fi
if [[ $steps == *all* || $steps == *bench* ]]; then
    python3 benchmarks/bench_swish.py --out "$OUT/bench.csv" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" | tail -90
fi
layouts_bench() {
    # $1: seconds for the main table.
    timeout "$1" python3 benchmarks/bench_layouts.py --out "$OUT/layouts.csv" ${LAYOUT_ARGS:---quick --dtypes fp16,bf16,fp32} \
        2>&1 | tee -a "$OUT/benchmarks.log" | grep -v "^wrote"
}
effnet_bench() {
    timeout "$1" python3 benchmarks/bench_efficientnet.py --out "$OUT/efficientnet.csv" ${EFFNET_ARGS:-} 2>&1 \
        | tee -a "$OUT/benchmarks.log"
}
if [[ $steps == *issue15* ]]; then
    xdist=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 4")
    for tool in memcheck racecheck; do
        ( timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 python3 tools/sanitize_op.py --layouts-only \
            > "$OUT/sanitize_$tool.tmp" 2>&1
          echo "sanitizer $tool (layouts): exit $? :: $(tail -1 "$OUT/sanitize_$tool.tmp")" ) &
    done
    timeout 120 python3 -m pytest -q -p no:cacheprovider -m cuda -rs $xdist ${TESTS:-tests} > "$OUT/pytest_cuda.log" 2>&1
    prc=$?
    tail -15 "$OUT/pytest_cuda.log"
    echo "pytest -m cuda: exit $prc"
    [ $prc -eq 0 ] || rc=1
    wait
    cat "$OUT"/sanitize_*.tmp > "$OUT/sanitize.log"; rm -f "$OUT"/sanitize_*.tmp
    layouts_bench 170
fi
if [[ $steps == *issue30* ]]; then
    # Issue 30 in one call: the `cuda` suite (its property test included) beside compute-sanitizer memcheck, with
    # the caching allocator off (it keeps small tensors inside one block, where a write past one goes unseen), and
    # racecheck over this GPU's planner switch points and random layouts; then the layout table alone on the GPU.
    xdist=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 4")
    t30=$(date +%s)
    # One sanitizer run in the background ($1: its log's name, $2: the tool, $3: what it covers, then the command;
    # memcheck with the caching allocator off), its exit status in $OUT/sanitize_$1.rc.
    sanitize_bg() {
        local name=$1 tool=$2 what=$3
        shift 3
        ( [ "$tool" = memcheck ] && export PYTORCH_NO_CUDA_MEMORY_CACHING=1
          timeout -k 5 ${SANITIZE_TIMEOUT:-330} compute-sanitizer --tool "$tool" --error-exitcode 3 "$@" \
              > "$OUT/sanitize_$name.log" 2>&1
          r=$?; echo $r > "$OUT/sanitize_$name.rc"
          echo "sanitizer $tool ($what): exit $r :: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|sanitize_op:|passed|failed" \
              "$OUT/sanitize_$name.log" | tr '\n' ' ') at $(( $(date +%s) - t30 )) s" ) &
    }
    sanitize_bg memcheck memcheck "caching off, switch points + random" python3 tools/sanitize_op.py --switch-points \
        --max-elems $((1 << 23)) --random ${SANITIZE_RANDOM:-150}
    # The forward's L1 switches sit at two fifths and two thirds of L2, above the switch points' sizes: their test.
    sanitize_bg memcheck_l1 memcheck "caching off, the forward's L1 switches" python3 -m pytest -q -p no:cacheprovider \
        -m cuda -k l1_switches tests/test_kernels_layouts.py
    sanitize_bg racecheck racecheck "switch points + random" python3 tools/sanitize_op.py --switch-points \
        --max-elems $((1 << 19)) --random ${RACECHECK_RANDOM:-20}
    # The device-memory accounting test reads the whole GPU's free memory: it runs alone, after the others.
    alone=test_plugin_objects_keep_no_device_memory
    TORCHTRT_SWISH_PROPERTY_SECONDS=${PROPERTY_SECONDS:-60} timeout 340 python3 -m pytest -q -p no:cacheprovider -m cuda -rs \
        $xdist -k "not $alone" ${TESTS:-tests} > "$OUT/pytest_cuda.log" 2>&1
    prc=$?
    tail -15 "$OUT/pytest_cuda.log"
    echo "pytest -m cuda: exit $prc at $(( $(date +%s) - t30 )) s"
    [ $prc -eq 0 ] || rc=1
    wait
    timeout 120 python3 -m pytest -q -p no:cacheprovider -m cuda -k "$alone" tests/trt_plugin > "$OUT/pytest_alone.log" 2>&1
    prc=$?
    echo "pytest -m cuda -k $alone (alone on the GPU): exit $prc :: $(tail -1 "$OUT/pytest_alone.log")"
    [ $prc -eq 0 ] || rc=1
    for tool in memcheck memcheck_l1 racecheck; do
        [ "$(cat "$OUT/sanitize_$tool.rc" 2>/dev/null)" = 0 ] || { echo "sanitizer $tool failed"; rc=1; }
    done
    [ -n "${NO_LAYOUTS:-}" ] || layouts_bench ${LAYOUT_SECONDS:-150}
fi
if [[ $steps == *layouts* ]]; then
    layouts_bench 230
fi
if [[ $steps == *effnet* ]]; then
    effnet_bench 280
fi
if [[ $steps == *issue24* ]]; then
    nets=(${NETWORKS:-transformer regnet_y_400mf})
    cdt=${COMPILE_DTYPES:-bf16 fp32}
    t24=$(date +%s)
    if [ -n "${TESTS_BESIDE:-}" ]; then
        # The `cuda` suite next to the warm-ups (4 workers; the tables afterwards run alone on the GPU).
        xdist=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 4")
        ( timeout 240 python3 -m pytest -q -p no:cacheprovider -m cuda -rs $xdist tests > "$OUT/pytest_cuda.log" 2>&1
          echo "pytest -m cuda: exit $? :: $(tail -1 "$OUT/pytest_cuda.log") at $(( $(date +%s) - t24 )) s"
          grep -E "^(FAILED|ERROR)" "$OUT/pytest_cuda.log" | head -20 ) &
    fi
    if [ -n "${SANITIZE_BESIDE:-}" ]; then
        # compute-sanitizer memcheck and racecheck over tools/sanitize_op.py's cases, next to the tests.
        for tool in memcheck racecheck; do
            ( timeout -k 5 ${SANITIZE_TIMEOUT:-240} compute-sanitizer --tool $tool --error-exitcode 3 \
                  python3 tools/sanitize_op.py > "$OUT/sanitize_op_$tool.log" 2>&1
              echo "sanitizer $tool (op): exit $? :: $(tail -1 "$OUT/sanitize_op_$tool.log") at $(( $(date +%s) - t24 )) s" ) &
        done
    fi
    for net in "${nets[@]}"; do
        # NETWORK_ARGS_<network>: options of that network's table only (e.g. --modes eager: no warm-up for it).
        extra_var="NETWORK_ARGS_$net"
        [[ "${!extra_var:-}" == *"--modes eager"* ]] && continue
        for d in $cdt; do for task in train inference; do for mode in compile graphs; do
        # One process per mode as well: a RegNetY training step takes 110-130 s to compile per mode and dtype.
        ( TORCHINDUCTOR_COMPILE_THREADS=2 timeout -k 10 ${WARM_TIMEOUT:-130} python3 benchmarks/bench_networks.py \
              ${NETWORK_ARGS:-} --networks "$net" \
              --dtypes "$d" --compile-dtypes "$d" --tasks "$task" --modes $mode --compile-only \
              > "$OUT/warm_${net}_${d}_${task}_$mode.log" 2>&1
          echo "cache warm-up $net $d $task $mode: exit $? at $(( $(date +%s) - t24 )) s" ) &
    done; done; done; done
    wait
    for i in "${!nets[@]}"; do
        net=${nets[$i]}
        extra_var="NETWORK_ARGS_$net"
        # What is left of ISSUE24_BUDGET seconds since the build began, shared by the networks still to run; a
        # network with NETWORK_SECONDS_<network> set gets that many, held back for it from those before it.
        left=$(( ${ISSUE24_BUDGET:-550} - ($(date +%s) - t0) ))
        held=0 sharing=0
        for later in "${nets[@]:$i}"; do
            sv="NETWORK_SECONDS_$later"
            if [ -n "${!sv:-}" ]; then held=$(( held + ${!sv} )); else sharing=$(( sharing + 1 )); fi
        done
        sv="NETWORK_SECONDS_$net"
        if [ -n "${!sv:-}" ]; then per=${!sv}; else per=$(( (left - held) / sharing )); fi
        [ $per -ge 30 ] || per=30
        timeout -k 10 $per python3 benchmarks/bench_networks.py --networks "$net" --compile-dtypes "$(echo $cdt | tr ' ' ,)" \
            --out "$OUT/networks_$net.csv" ${NETWORK_ARGS:-} ${!extra_var:-} > "$OUT/networks_$net.log" 2>&1
        nrc=$?
        grep -E "^(\||device|CHECK|wrote|[a-z_0-9]+: batch)" "$OUT/networks_$net.log"
        echo "networks $net: exit $nrc after $per s allowed, at $(( $(date +%s) - t24 )) s"
        [ $nrc -eq 0 ] || rc=1
    done
fi
if [[ $steps == *hostops* ]]; then
    # tools/host_ops.py once per ';'-separated argument set of HOST_OPS (alone on the machine: host times).
    IFS=';' read -ra cases <<< "${HOST_OPS:---dtype bf16 --batch 8}"
    for c in "${cases[@]}"; do
        echo "== host_ops $c"
        timeout -k 5 ${HOST_OPS_TIMEOUT:-120} python3 tools/host_ops.py $c 2>&1 | grep -vE "Warning|warn" | tee -a "$OUT/host_ops.log"
    done
fi
if [[ $steps == *all* || $steps == *plugin* ]]; then
    python3 benchmarks/bench_plugin.py --out "$OUT/bench_plugin.csv" 2>&1 | tee "$OUT/bench_plugin.log" | tail -20
fi
exit $rc
