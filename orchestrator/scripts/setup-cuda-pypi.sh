#!/usr/bin/env bash
# The CUDA toolkit for a build-only CUDA cell, from PyPI's nvidia-* wheels: nvcc, the runtime,
# CCCL and cuBLAS, laid out as a toolkit prefix. No GPU, driver or root needed; nothing is
# installed system-wide. Prints the prefix (CUDA_HOME; nvcc is in its bin/).
#   usage: orchestrator/scripts/setup-cuda-pypi.sh DIR     (idempotent: a second run installs nothing)
set -euo pipefail

dest=${1:?usage: setup-cuda-pypi.sh DIR}
python=${PYTHON:-$(command -v python3 || command -v python)}
# One toolkit release (CUDA 13.0, the one the CUDA build-only cells were measured with): nvcc and
# what it compiles against (crt headers, nvvm's cicc, the runtime, CCCL), and cuBLAS to link.
packages=(nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88
          nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-cublas==13.0.2.14)
root="$dest/site/nvidia/cu13"

if [ ! -x "$root/bin/nvcc" ] || [ ! -e "$root/lib/libcublas.so.13" ]; then
    "$python" -m pip install --quiet --disable-pip-version-check --no-deps --upgrade \
        --target "$dest/site" "${packages[@]}" >&2
fi
[ -x "$root/bin/nvcc" ] || { echo "setup-cuda-pypi: no nvcc in $root/bin after installing ${packages[0]}" >&2; exit 1; }

# nvcc.profile looks for headers and libraries under targets/<arch>/; CMake links the unversioned
# names, which the wheels do not ship.
arch=x86_64-linux
[ "$(uname -m)" = aarch64 ] && arch=sbsa-linux
mkdir -p "$root/targets/$arch"
ln -sfn ../../include "$root/targets/$arch/include"
ln -sfn ../../lib "$root/targets/$arch/lib"
for lib in cudart cublas cublasLt; do
    ln -sfn "lib$lib.so.13" "$root/lib/lib$lib.so"
done
echo "$root"
