#!/usr/bin/env bash
# The CUDA cells, once, for real, on a machine with an NVIDIA GPU (issue 4, point 7).
#
# Two halves, so the GPU machine needs no Python, no network and no ggml-patch cache:
#   here (any machine with the warm cache):   scripts/cuda-device-check.sh prepare [DIR]
#       writes DIR (default device-carry/, git-ignored) with, per target, the patched tree
#       (git archive of the cell's patched commit) and the unfixed ggml-opt.cpp;
#   there (the GPU machine, DIR carried):     scripts/cuda-device-check.sh run [DIR] [OUT]
#       per target: configure with -DGGML_CUDA=ON for the local GPU's architecture, build
#       test-opt and test-opt-dynamic-accum, run both (CUDA0 and CPU), swap in the unfixed
#       ggml-opt.cpp (the control), rebuild, run both again; writes OUT/cuda-record.json and the
#       logs. Commit that record under records/cuda-<date>/.
# Not run yet: no task so far was lent a GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"; dir="${2:-device-carry}"; out="${3:-${OUT:-cuda-out}}"

prepare() {
    local cache="${GGML_PATCH_CACHE:-$HOME/.cache/ggml-patch}"
    mkdir -p "$dir"; dir="$(cd "$dir" && pwd)"; : > "$dir/targets.txt"
    for cell in ggml-cpu llama.cpp-cpu; do
        local state="$cache/cells/$cell/state.json" src="$cache/cells/$cell/src"
        [ -f "$state" ] || { echo "cuda-device-check: run 'ggml-patch matrix --backend cpu' first ($state missing)" >&2; exit 2; }
        local base head target="${cell%-cpu}"
        base=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['base'])" "$state")
        head=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['head'])" "$state")
        local opt=src/ggml-opt.cpp root=.
        [ "$target" = llama.cpp ] && { opt=ggml/src/ggml-opt.cpp; root=ggml; }
        # only ggml itself and tests/ travel: the carry limit is 64 MiB
        git -C "$src" archive --format=tar -o "$dir/$target.tar" "$head" "$root" tests
        git -C "$src" show "$base:$opt" > "$dir/$target-unfixed-ggml-opt.cpp"
        echo "$target $head $opt" >> "$dir/targets.txt"
    done
    cp native_tests/CMakeLists.txt "$dir/harness-CMakeLists.txt"
    sort -u -o "$dir/targets.txt" "$dir/targets.txt"
    echo "cuda-device-check: prepared $dir ($(du -sh "$dir" | cut -f1))"
}

run_tests() {  # $1 build dir, $2 log prefix -> prints "test exit" lines
    for t in test-opt test-opt-dynamic-accum; do
        set +e
        timeout 600 "$1/bin/$t" > "$2-$t.log" 2>&1
        echo "$t $?"
        set -e
    done
}

run() {
    command -v nvcc >/dev/null || { echo "cuda-device-check: no nvcc on PATH" >&2; exit 2; }
    nvidia-smi -L > /dev/null || { echo "cuda-device-check: nvidia-smi lists no GPU" >&2; exit 2; }
    mkdir -p "$out"
    local arch; arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
    local record="$out/cuda-record.json"
    { echo "{\"date\": \"$(date -u +%FT%TZ)\", \"gpu\": \"$(nvidia-smi -L | head -1)\", \"nvcc\": \"$(nvcc --version | tail -1)\", \"cells\": ["; } > "$record"
    local first=1
    while read -r target head opt; do
        local work="/tmp/cuda-$target"; rm -rf "$work"; mkdir -p "$work/src"
        tar -xf "$dir/$target.tar" -C "$work/src"
        local ggml_dir="$work/src"; [ "$target" = llama.cpp ] && ggml_dir="$work/src/ggml"
        mkdir -p "$work/harness"; cp "$dir/harness-CMakeLists.txt" "$work/harness/CMakeLists.txt"
        : > "$work/harness/extra-programs.cmake"
        cmake -S "$work/harness" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
            -DGGML_SOURCE_DIR="$ggml_dir" -DGGML_TESTS_DIR="$work/src/tests" -DGGML_CUDA=ON -DGGML_CPU=ON \
            -DCMAKE_CUDA_ARCHITECTURES="$arch" > "$out/$target-configure.log" 2>&1
        cmake --build "$work/build" -j "$(nproc)" --target test-opt test-opt-dynamic-accum > "$out/$target-build-patched.log" 2>&1
        local patched; patched=$(run_tests "$work/build" "$out/$target-patched" | tr '\n' ' ')
        cp "$dir/$target-unfixed-ggml-opt.cpp" "$work/src/$opt"
        cmake --build "$work/build" -j "$(nproc)" --target test-opt test-opt-dynamic-accum > "$out/$target-build-control.log" 2>&1
        local control; control=$(run_tests "$work/build" "$out/$target-control" | tr '\n' ' ')
        [ $first = 1 ] || echo "," >> "$record"; first=0
        echo "{\"target\": \"$target\", \"patched_commit\": \"$head\", \"patched_exit\": \"$patched\", \"control_exit\": \"$control\"}" >> "$record"
        grep -h "device=CUDA\|Backend CUDA" "$out/$target-patched-"*.log "$out/$target-control-"*.log || true
    done < "$dir/targets.txt"
    echo "]}" >> "$record"
    cat "$record"
}

case "$mode" in
    prepare) prepare ;;
    run) run ;;
    *) echo "usage: $0 prepare [DIR] | run [DIR] [OUT]" >&2; exit 2 ;;
esac
