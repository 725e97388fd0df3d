# Sourced by the one-call device scripts (device_gpu_check.sh, device_verify.sh, ncu_open_rows.sh,
# multi_gpu_check.sh), from the repository root: the environment they share, and two steps each of them runs.
export PYTHONUNBUFFERED=1 CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
export TORCHTRT_SWISH_NO_FETCH=1

# The carried .whl wheels (onnx-graphsurgeon, polygraphy; scikit-build-core and pathspec for the build): the machine
# has no index to install them from.
install_carried_wheels() {
    if [ -d .whl ]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            .whl/*.whl && export PYTHONPATH=/tmp/site
    fi
}

# Build from source against the machine's torch, the log in $1/build.log; a failed build ends the script.
build_from_source() {
    local start log=$1/build.log
    start=$(date +%s)
    python3 -m pip install --no-build-isolation --no-deps -v -e . > "$log" 2>&1 || { tail -40 "$log"; exit 1; }
    grep -F "[torchtrt_swish build]" "$log"
    echo "build: $(( $(date +%s) - start )) s"
}

# The device tool returns at most 8 files: logs go to L=$OUT/logs, packed into $OUT/logs.tgz when the script exits.
collect_logs_on_exit() {
    L=$OUT/logs
    mkdir -p "$L"
    trap 'tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"' EXIT
}
