#!/usr/bin/env bash
# One H200 call: build forward-kernel variants as shared libraries (tools/ab_forward/ab_forward.cu, nvcc in
# parallel), fill inductor's caches for torch.compile's column from parallel processes meanwhile, then time every
# variant against copy and compile (tools/ab_forward/ab_forward.py) alone on the GPU; inductor's chosen configs and
# its kernels' registers last. Logs: $OUT/logs.tgz. The op is built from the tree meanwhile (without the plugin): the
# timing checks every variant's output through benchmarks/bench_swish, which imports it. Carry: .whl.
# VARIANTS: "name:nvcc flags;..." (a flag -Idir puts that folder's swish_forward.cu first; default: the tree's).
# AB_CASES, AB_DTYPES, AB_ARGS: ab_forward.py's --cases, --dtypes and other options.
set -uo pipefail
OUT=${OUT:-/tmp/out}
source tools/device_prelude.sh
collect_logs_on_exit
export TORCHTRT_SWISH_SKIP_PLUGIN=${TORCHTRT_SWISH_SKIP_PLUGIN:-1}
install_carried_wheels
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv | tee "$L/gpu.txt"
AB=/tmp/ab
mkdir -p "$AB"
t0=$(date +%s)
names=()
IFS=';' read -ra items <<< "${VARIANTS:?name:flags;...}"
for item in "${items[@]}"; do
    name=${item%%:*}
    flags=${item#*:}
    names+=("$name")
    # shellcheck disable=SC2086
    nvcc -std=c++17 -O3 -arch=sm_90 -shared -Xcompiler -fPIC -Xptxas -v $flags -Icsrc/kernels -Icsrc \
        tools/ab_forward/ab_forward.cu -o "$AB/$name.so" > "$L/build_$name.log" 2>&1 &
done
CASES=${AB_CASES:?case names}
IFS=',' read -ra cs <<< "$CASES"
for dt in ${AB_DTYPES//,/ }; do
    for ((i = 0; i < ${#cs[@]}; i += 3)); do
        group=$(IFS=,; echo "${cs[*]:i:3}")
        TORCHINDUCTOR_COMPILE_THREADS=1 timeout 200 python3 tools/ab_forward/ab_forward.py --prewarm --cases "$group" \
            --dtypes "$dt" > "$L/prewarm_${dt}_$i.log" 2>&1 &
    done
done
build_from_source "$L"
wait
echo "builds and prewarm: $(( $(date +%s) - t0 )) s"
spec=""
for name in "${names[@]}"; do
    [ -f "$AB/$name.so" ] || { echo "variant $name did not build:"; tail -5 "$L/build_$name.log"; continue; }
    spec+="${spec:+,}$name=$AB/$name.so"
done
grep -l "Error\|error" "$L"/prewarm_*.log 2>/dev/null | head -3 | while read -r f; do echo "== $f"; tail -5 "$f"; done
# shellcheck disable=SC2086
TORCHINDUCTOR_COMPILE_THREADS=1 timeout ${AB_SECONDS:-300} python3 tools/ab_forward/ab_forward.py --variants "$spec" \
    --cases "$CASES" \
    --dtypes "$AB_DTYPES" --out "$OUT/ab.csv" ${AB_ARGS:-} 2>&1 | tee "$L/ab.log"
echo "timed: $(( $(date +%s) - t0 )) s"
{ for f in $(find / -name "*.best_config" -path "*torchinductor*" 2>/dev/null); do echo "$f $(cat "$f")"; done
  for f in $(find / -name "triton_poi*.cubin" 2>/dev/null | head -60); do
      echo "== $f"; cuobjdump --dump-resource-usage "$f" | grep -E "REG|Function"; done
  for name in "${names[@]}"; do
      echo "== $name"; grep -E "Used [0-9]+ registers|spill" "$L/build_$name.log" | sort | uniq -c | sort -rn | head -12
  done
} > "$L/inductor_configs.txt" 2>&1
grep -h "best_config" "$L/inductor_configs.txt" | sed 's/.*{/{/' | sort | uniq -c | head -20
