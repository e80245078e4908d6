#!/usr/bin/env bash
# gpu-bundle.sh — packs a GPU build of ztrain with the shared libraries that a GPU machine's image may
# lack, so it runs on a machine that has only the NVIDIA driver and the CUDA libraries (cuBLAS/cuBLASLt,
# the CUDA runtime, NCCL: those are NOT packed, they are large and must match the driver there).
#
#   scripts/gpu-bundle.sh DIR [BINARY]      (BINARY: build/ztrain-cuda; build it with a portable
#                                            ARCH, e.g. make cuda ARCH=-march=x86-64-v3)
# DIR gets: ztrain (the binary), lib/ (every library ldd names except glibc's, libstdc++/libgcc_s
# and CUDA's), openmpi/ (Open MPI's plugin folder: MPI-IO, shared-memory transport...), bin/mpirun (for
# one rank per GPU on a node with several), and env.sh,
# which a shell on the GPU machine sources: it puts lib/ first on LD_LIBRARY_PATH, finds CUDA's
# libraries (the CUDA toolkit, or the NVIDIA wheels of a Python environment), points Open MPI at the
# packed plugins, and runs 1-rank jobs as isolated singletons (no mpirun, no orted needed).
# With LLMC=/path/to/llm.c it also builds llm.c's train_gpt2cu here (benchmarks/bench_gpu_peers.sh --build-llmc:
# nvcc, for compute capability LLMC_SM, default 90 = H100/H200) into DIR/llmc/, and env.sh points LLMC_BIN at
# it: benchmarks/bench_gpu_peers.sh then runs llm.c on a GPU machine that has no nvcc.
# scripts/gpu-check.sh uses it; docs/gpu-status.md says what ran this way.
set -eu
DIR=${1:?usage: $0 DIR [BINARY]}
BIN=${2:-build/ztrain-cuda}
[ -x "$BIN" ] || { echo "gpu-bundle.sh: $BIN: not an executable (make cuda ARCH=-march=x86-64-v3)" >&2; exit 2; }
rm -rf "$DIR"; mkdir -p "$DIR/lib"
cp "$BIN" "$DIR/ztrain"
skip='^(linux-vdso|libc\.so|libm\.so|libpthread|librt\.so|libdl\.so|ld-linux|libgcc_s|libstdc\+\+|libcublas|libcudart|libnccl|libcuda\.so)'
ldd "$BIN" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
  echo "$name" | grep -Eq "$skip" && continue
  cp -L "$path" "$DIR/lib/$name"
done
ompi_plugins=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
[ -d "$ompi_plugins" ] || { echo "gpu-bundle.sh: Open MPI's plugin folder not found (ompi_info)" >&2; exit 2; }
cp -rL "$ompi_plugins" "$DIR/openmpi"
# fabric transports (UCX, libfabric, PSM, verbs) and OpenSHMEM are not needed on one node and pull in
# 10 MB of libraries: shared memory (vader) and TCP remain
rm -f "$DIR"/openmpi/*ucx* "$DIR"/openmpi/*ofi* "$DIR"/openmpi/*psm* "$DIR"/openmpi/*openib* \
  "$DIR"/openmpi/*verbs* "$DIR"/openmpi/*usnic* "$DIR"/openmpi/*portals* "$DIR"/openmpi/mca_spml_* \
  "$DIR"/openmpi/mca_sshmem_* "$DIR"/openmpi/mca_scoll_* "$DIR"/openmpi/mca_atomic_* "$DIR"/openmpi/mca_memheap_*
# the plugins' own libraries (libmca_common_*, libpmix, ...) that the binary itself does not need
for so in "$DIR"/openmpi/*.so; do
  ldd "$so" 2>/dev/null | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    echo "$name" | grep -Eq "$skip" && continue
    [ -e "$DIR/lib/$name" ] || cp -L "$path" "$DIR/lib/$name"
  done
done
# Open MPI's launcher, for several GPUs on one node (it starts local ranks itself: no orted, no ssh)
mkdir -p "$DIR/bin"
cp -L "$(command -v orterun)" "$DIR/bin/mpirun"
cat > "$DIR/env.sh" <<'EOF'
# sourced on the GPU machine: ztrain's packed libraries first, then CUDA's wherever they are
ZB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
zb_cuda=""
for f in libcublasLt.so.13 libcudart.so.13 libnccl.so.2; do
  p=$(find /usr/local/cuda*/ /usr/lib /opt -name "$f" 2>/dev/null | head -1)
  [ -n "$p" ] && zb_cuda="$zb_cuda:$(dirname "$p")"
done
export LD_LIBRARY_PATH="$ZB/lib$zb_cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_MCA_mca_base_component_path="$ZB/openmpi"
export OMPI_MCA_mca_base_component_show_load_errors=0
export OMPI_MCA_ess_singleton_isolated=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ZTRAIN="$ZB/ztrain"
export PATH="$ZB/bin:$PATH"
if [ -x "$ZB/llmc/train_gpt2cu" ]; then export LLMC_BIN="$ZB/llmc/train_gpt2cu"; fi
EOF
if [ -n "${LLMC:-}" ]; then # llm.c's trainer for benchmarks/bench_gpu_peers.sh (built here: the GPU machine may lack nvcc)
  "$(dirname "$0")/../benchmarks/bench_gpu_peers.sh" --build-llmc "$LLMC"
  mkdir -p "$DIR/llmc"
  cp "$LLMC/train_gpt2cu" "$DIR/llmc/train_gpt2cu"
fi
du -sh "$DIR" | awk '{print "gpu-bundle.sh: " $2 ": " $1}'
