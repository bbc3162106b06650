#!/usr/bin/env bash
# Scratch checks of the CUDA C service layer (headers + core kernels), no GPU needed.
#   tests/cuda_host_harness/run.sh [math_stride]   (stride 1 = exhaustive, ~8 min on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/../.."
INC=warp_drive/cuda/include
OUT=${TMPDIR:-/tmp}/wd_harness
mkdir -p "$OUT"
if command -v nvcc >/dev/null; then
  for f in warp_drive/cuda/kernels/*.cu tests/cuda_host_harness/use_all_helpers.cu; do
    nvcc -cubin -arch=sm_90 --fmad=false -Werror all-warnings -I "$INC" -o "$OUT/$(basename "$f").cubin" "$f"
    echo "nvcc ok: $f"
  done
fi
if [ -f warp_drive/cuda/cpu/cuda_emulation.h ]; then
  for f in warp_drive/cuda/kernels/*.cu tests/cuda_host_harness/use_all_helpers.cu; do
    g++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -include warp_drive/cuda/cpu/cuda_emulation.h -I "$INC" -x c++ "$f"
    echo "g++ (emulation header) ok: $f"
  done
fi
g++ -std=c++17 -O2 -ffp-contract=off -I "$INC" tests/cuda_host_harness/check_kernels.cpp -o "$OUT/check_kernels"
"$OUT/check_kernels"
g++ -std=c++17 -O2 -ffp-contract=off -pthread -I "$INC" tests/cuda_host_harness/check_math.cpp -o "$OUT/check_math"
"$OUT/check_math" "${1:-97}"
