#!/usr/bin/env bash
# Installs what ztrain needs to build, test and run its demo, when it is missing.
# Debian/Ubuntu: apt-get (needs root). Other distributions: prints what to install.
# Usage: scripts/install-deps.sh [build|test|demo|slurm|all]   (default: build)
set -euo pipefail
what="${1:-build}"

build_pkgs="openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools libconfig-dev libblis-dev libopenblas-dev pkg-config libpcre2-dev libssl-dev python3-numpy"
test_pkgs="python3-matplotlib python3-h5py python3-torch python3-venv python3-pip slurm-wlm munge clang libclang-rt-14-dev strace"
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

missing=""
for p in $want; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
if [ -z "$missing" ]; then exit 0; fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps.sh: not a Debian-like system; please install the equivalents of:$missing" >&2
  echo "  (Open MPI + dev headers, parallel HDF5 built with MPI, libconfig, BLIS or OpenBLAS, PCRE2, OpenSSL, pkg-config)" >&2
  exit 1
fi
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
