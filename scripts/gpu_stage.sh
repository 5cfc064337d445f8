#!/usr/bin/env bash
# Builds the GPU suite here (nvcc needs no GPU) and stages it for a lent GPU machine, so that its
# minutes go to running rather than compiling:
#   scripts/gpu_stage.sh [ARCH]     ARCH: CUDA architecture, default 90 (H100, H200)
# makes .deps/ (scripts/gpu_deps.sh) and build-gpu/, then copies the suite's programs and the libraries
# they load, host debug information stripped, packed as .gpurun/build-gpu.tar.xz (ignored by git; about
# 15 MiB, where the files are about 90; the lent machine takes 64 MiB in all, of which .deps/root is 14).
# There, with .deps/root and .gpurun carried, e.g. (tests/gpu/run.sh lists its parts and steps):
#   tar xJf .gpurun/build-gpu.tar.xz && GPU_STEP_TIMEOUT=100 tests/gpu/run.sh --deadline 530 test bench
# Build-tree run paths are made relative ($ORIGIN), so the programs find our libraries wherever the
# tree lands; UCX comes from .deps through tests/gpu/run.sh's LD_LIBRARY_PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-90}
[ -e .deps/root/usr/lib/x86_64-linux-gnu/libgtest.a ] || bash scripts/gpu_deps.sh
prefix=$PWD/.deps/root/usr
export PKG_CONFIG_PATH=$prefix/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
# GoogleTest lists each program's tests by running it at build time; libucp needs libuct and the rest of
# UCX through no run path of its own, so on a machine without Debian's UCX they come from here.
export LD_LIBRARY_PATH=$prefix/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  -DCOLLIE_WITH_MPI=OFF -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON -DCMAKE_PREFIX_PATH="$prefix" \
  -DGTest_DIR="$prefix/lib/x86_64-linux-gnu/cmake/GTest" >/dev/null
targets=(collectives_gpu_test program_cache_gpu_test reduce_ops_gpu_test collectives_gpu_mp faults_gpu_mp collie-run
  nccl_gpu_test collie-bench soak_test launch_floor exchange_floor ceilings collectives_mp direct_gpu_mp)
cmake --build build-gpu -j "$(nproc)" --target "${targets[@]}"
rm -rf .gpurun
mkdir -p .gpurun/build-gpu
cp build-gpu/CMakeCache.txt .gpurun/build-gpu/
# The programs, and every library of ours they load (found through their run paths).
files=(tests/collectives_gpu_test tests/program_cache_gpu_test tests/reduce_ops_gpu_test tests/collectives_gpu_mp
  tests/faults_gpu_mp tools/collie-run tests/nccl/nccl_gpu_test bench/collie-bench tests/soak_test tests/launch_floor
  tests/exchange_floor tests/ceilings tests/collectives_mp)
for f in "${files[@]}"; do
  for lib in $(ldd "build-gpu/$f" 2>/dev/null | awk -v b="$PWD/build-gpu/" 'index($3, b) == 1 {print $3}'); do
    files+=("${lib#"$PWD"/build-gpu/}")
  done
done
for f in $(printf '%s\n' "${files[@]}" | sort -u); do
  mkdir -p ".gpurun/build-gpu/$(dirname "$f")"
  cp -a "build-gpu/$f" ".gpurun/build-gpu/$f"
  # A library's SONAME link (libnccl.so.2 -> libnccl.so.2.x) needs the file it names.
  if [ -L "build-gpu/$f" ]; then
    t=$(readlink -f "build-gpu/$f")
    cp "$t" ".gpurun/build-gpu/$(dirname "$f")/"
  fi
done
find .gpurun -type f -perm -u+x -exec strip --strip-debug {} + 2>/dev/null || true
find .gpurun -name '*.so*' -type f -exec strip --strip-debug {} + 2>/dev/null || true
tar -C .gpurun -cJf .gpurun/build-gpu.tar.xz build-gpu
rm -rf .gpurun/build-gpu
echo "staged: $(du -h .gpurun/build-gpu.tar.xz | cut -f1) in .gpurun/build-gpu.tar.xz (carry .deps/root and .gpurun)"
