#!/usr/bin/env bash
# test: long
# The GPU check kit without a GPU (scripts/gpu-bundle.sh, scripts/gpu-check.sh: how ztrain ran on an H200,
# README "GPU status"). The bundle must run where Open MPI is not installed, so its runs here happen in a
# mount namespace with this machine's Open MPI plugin, help and config folders hidden (empty):
#  - bundle_self_contained   ldd resolves MPI, HDF5 and libconfig from the bundle's lib/
#  - bundle_singleton        a 1-rank tiny run, no mpirun (isolated singleton): params_hash = ./ztrain's run
#  - bundle_mpirun_2_ranks   the bundle's own mpirun, 2 ranks: params_hash = ./ztrain's (ranks bit-identical)
#  - bundle_no_gpu_error     selftest --device cuda from the bundle: the one-line CUDA error, exit 2
#  - gpu_check_no_gpu        scripts/gpu-check.sh runs to its end and writes its files, measuring nothing
# SKIP without nvcc's build (build/ztrain-cuda) or without mount namespaces (unshare -m needs root).
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
BIN=build/ztrain-cuda
if [ ! -x $BIN ]; then echo "SKIP gpu kit: no $BIN (nvcc missing)"; finish; fi
if ! unshare -m true 2>/dev/null; then echo "SKIP gpu kit: unshare -m not permitted here"; finish; fi
B=$TMP/bundle
scripts/gpu-bundle.sh $B $BIN > $TMP/bundle.log 2>&1 || { fail "bundle: $(tail -2 $TMP/bundle.log)"; finish; }
mkdir -p $TMP/empty
ompi_lib=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
hide="mount --bind $TMP/empty $ompi_lib"
for d in /usr/share/openmpi /etc/openmpi; do [ -d $d ] && hide="$hide && mount --bind $TMP/empty $d"; done
# in_bundle CMD: CMD in a shell with the bundle's environment and the system's Open MPI folders hidden
in_bundle() { unshare -m bash -c "$hide && source $B/env.sh && $1"; }

libs=$(in_bundle 'ldd $ZTRAIN' 2>&1)
mine=$(echo "$libs" | grep -cE "^\s+lib(mpi|hdf5_openmpi|config|open-pal|open-rte)\.so[^ ]* => $B/lib/")
others=$(echo "$libs" | grep -E "^\s+lib(mpi|hdf5_openmpi|config|open-pal|open-rte)\.so" | grep -vc "$B/lib/")
[ "$mine" -eq 5 ] && [ "$others" -eq 0 ] && pass "bundle_self_contained (MPI, Open MPI's runtime, parallel HDF5, libconfig from the bundle: $(du -sh $B | cut -f1))" \
  || fail "bundle_self_contained: $mine from the bundle, $others elsewhere: $(echo "$libs" | grep -E 'mpi|hdf5|config' | tr '\n' ' ')"

common="-c inputs/tiny.cfg --set train.steps=6 --set run.root=$TMP --set run.session=kit"
$ZT train $common --set run.name=ref > $TMP/ref.log 2>&1
in_bundle "\$ZTRAIN train $common --set run.name=single" > $TMP/single.log 2>&1
in_bundle "mpirun --oversubscribe --bind-to none -np 2 \$ZTRAIN train $common --set run.name=two" > $TMP/two.log 2>&1
ref=$(result $TMP/kit/ref params_hash 2>/dev/null)
for r in single:bundle_singleton two:bundle_mpirun_2_ranks; do
  h=$(result $TMP/kit/${r%%:*} params_hash 2>/dev/null)
  [ -n "$ref" ] && [ "$h" == "$ref" ] && pass "${r#*:} (params_hash ${h:0:23}... as ./ztrain's)" \
    || fail "${r#*:}: '$h' vs '$ref': $(tail -2 $TMP/${r%%:*}.log | tr '\n' ' ')"
done

out=$(in_bundle '$ZTRAIN selftest --device cuda' 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "no usable GPU" \
  && pass "bundle_no_gpu_error (exit 2: $out)" || fail "bundle_no_gpu_error: rc $rc: $out"

scripts/gpu-check.sh $TMP/check $B > $TMP/check.log 2>&1; rc=$?
files=$(cd $TMP/check 2>/dev/null && ls | tr '\n' ' ')
[ $rc -eq 0 ] && grep -q "^== done" $TMP/check.log && [ "$files" == "bench.txt env.txt resume.txt runs.tgz selftest.txt " ] \
  && grep -q "no GPU here" $TMP/check/bench.txt && grep -q "selftest rc=2" $TMP/check/selftest.txt \
  && pass "gpu_check_no_gpu (ran to its end: $files; selftest rc=2, bench measured nothing)" \
  || fail "gpu_check_no_gpu: rc $rc, files '$files': $(tail -3 $TMP/check.log | tr '\n' ' ')"
finish
