#!/usr/bin/env bash
# Installs what ztrain needs to build, test and run its demo, when it is missing (`make deps`; make test,
# test-long, demo, demo-finetune, bench and mutate run it first; plain `make` never does).
#   Debian/Ubuntu (apt-get and dpkg-query present): installs the missing packages with apt-get (as root, or
#     through sudo); exits 1 if it cannot.
#   Elsewhere: installs nothing. Checks what the build needs the way the Makefile finds it (pkg-config modules
#     ZT_PKG_MODULES, mpicc, the BLAS header with the flags ZT_BLAS_CFLAGS, python3 with numpy), prints what is
#     missing and what else the chosen set uses, and exits 0 when the build's requirements are all found.
# Usage: scripts/install-deps.sh [build|test|demo|slurm|all]   (default: build)
# Environment (make deps sets them from the Makefile): ZT_PKG_MODULES (pkg-config modules), ZT_BLAS (blis or
# openblas), ZT_BLAS_CFLAGS (the BLAS compile flags), MPICC, CC.
set -euo pipefail
what="${1:-build}"

build_pkgs="openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools libconfig-dev libblis-dev libopenblas-dev pkg-config libpcre2-dev libssl-dev zlib1g-dev libzstd-dev python3-numpy"
test_pkgs="python3-matplotlib python3-h5py python3-torch python3-venv python3-pip zstd slurm-wlm munge clang libclang-rt-14-dev strace"
demo_pkgs="bible-kjv"
slurm_pkgs="slurm-wlm munge"

case "$what" in
  build) want="$build_pkgs" ;;
  test)  want="$build_pkgs $test_pkgs" ;;
  demo)  want="$build_pkgs $demo_pkgs" ;;
  slurm) want="$slurm_pkgs" ;;
  all)   want="$build_pkgs $test_pkgs $demo_pkgs $slurm_pkgs" ;;
  *) echo "install-deps.sh: unknown set '$what' (expected build|test|demo|slurm|all)" >&2; exit 2 ;;
esac

# ---------------------------------------------------------------- not Debian: check, print, install nothing
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
  missing=()
  if [ "$what" != slurm ]; then
    modules="${ZT_PKG_MODULES:-hdf5-openmpi libconfig libpcre2-8 libcrypto zlib libzstd}"
    if ! command -v pkg-config >/dev/null 2>&1; then
      missing+=("pkg-config (and the .pc files of: $modules)")
    else
      for m in $modules; do
        pkg-config --exists "$m" 2>/dev/null || missing+=("pkg-config module $m")
      done
    fi
    mpicc="${MPICC:-mpicc}"
    command -v "$mpicc" >/dev/null 2>&1 || missing+=("$mpicc (Open MPI with its development headers)")
    blas="${ZT_BLAS:-blis}"
    if [ "$blas" = openblas ]; then hdr=cblas.h; else hdr=blis.h; fi
    cc="${CC:-$mpicc}"
    command -v "$cc" >/dev/null 2>&1 || cc=cc
    # shellcheck disable=SC2086
    if ! printf '#include <%s>\n' "$hdr" | "$cc" ${ZT_BLAS_CFLAGS:-} -E -x c - >/dev/null 2>&1; then
      if [ "$blas" = openblas ]; then missing+=("OpenBLAS (pkg-config module openblas)")
      else missing+=("BLIS built with OpenMP: blis.h not found (pkg-config module blis-openmp or blis, or make BLIS_CFLAGS=... BLIS_LIBS=...)"); fi
    fi
    python3 -c 'import numpy' >/dev/null 2>&1 || missing+=("python3 with numpy (make writes data/tiny with tests/helpers/make_data.py)")
  fi
  case "$what" in
    test|all) extra="for the tests: python3 with venv and pip, h5py, torch 1.13+, matplotlib; clang with libFuzzer; strace; the zstd command; Slurm (slurmctld, slurmd) and munge" ;;
    demo) extra="for the demo: the King James Bible as Debian's bible-kjv package installs it" ;;
    slurm) extra="Slurm (slurmctld, slurmd, srun) and munge" ;;
    *) extra="" ;;
  esac
  echo "install-deps.sh: not a Debian-like system (no apt-get / dpkg-query): nothing installed." >&2
  echo "  Debian's packages for this set, for reference: $want" >&2
  [ -n "$extra" ] && echo "  Not checked here, needed $extra" >&2
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "  Missing for the build; please install:" >&2
    for m in "${missing[@]}"; do echo "    - $m" >&2; done
    exit 1
  fi
  [ "$what" != slurm ] && echo "  The build's requirements are all found (pkg-config, mpicc, BLAS headers, python3 + numpy)." >&2
  exit 0
fi

# ---------------------------------------------------------------- Debian / Ubuntu
missing=""
for p in $want; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
if [ -z "$missing" ]; then exit 0; fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps.sh: need root to install:$missing" >&2; exit 1; fi
fi
echo "install-deps.sh: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "install-deps.sh: done"
