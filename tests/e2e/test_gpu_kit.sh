#!/usr/bin/env bash
# test: long
# The GPU check kit without a GPU (scripts/gpu-bundle.sh, scripts/gpu-check.sh: how ztrain ran on an H200,
# README "GPU status"). The bundle must run where Open MPI is not installed, so its runs here happen in a
# mount namespace with this machine's Open MPI plugin, help and config folders hidden (empty):
#  - bundle_self_contained   ldd resolves MPI, HDF5 and libconfig from the bundle's lib/
#  - bundle_singleton        a 1-rank tiny run, no mpirun (isolated singleton): params_hash = ./ztrain's run
#  - bundle_mpirun_2_ranks   the bundle's own mpirun, 2 ranks: params_hash = ./ztrain's (ranks bit-identical)
#  - bundle_no_gpu_error     selftest --device cuda from the bundle: the one-line CUDA error, exit 2
#  - gpu_check_no_gpu        scripts/gpu-check.sh runs to its end and writes its files (peers.txt too), measuring nothing
# SKIP without nvcc's build (build/ztrain-cuda) or without mount namespaces (unshare -m needs root).
# The peers benchmark's parts that need no GPU (benchmarks/bench_gpu_peers.sh), checked first, without either:
#  - peers_syntax            bash -n of bench_gpu_peers.sh, gpu-check.sh, gpu-bundle.sh
#  - llmc_data_roundtrip     benchmarks/llmc_data.py: a ztrain shard to llm.c's .bin, read back with numpy (header
#                            of 256 int32: 20240520, 1, count, zeros; the same uint16 tokens); 4-byte tokens refused
#  - torch_gpt2_cpu          benchmarks/torch_gpt2_gpu.py on the CPU, a tiny GPT-2 on the shard's tokens: one JSON line
#  - peers_no_gpu            bench_gpu_peers.sh where nvidia-smi lists no GPU: the one line, exit 0
#  - peers_table             bench_gpu_peers.sh --summarize on made-up logs in each runner's format: medians, MFU, ratios
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data

bad=""
for f in benchmarks/bench_gpu_peers.sh scripts/gpu-check.sh scripts/gpu-bundle.sh; do bash -n $f 2>/dev/null || bad="$bad $f"; done
[ -z "$bad" ] && pass "peers_syntax (bash -n: bench_gpu_peers.sh gpu-check.sh gpu-bundle.sh)" || fail "peers_syntax:$bad"

$PY tests/helpers/make_data.py $TMP/tok 50257 40000 >/dev/null
$PY benchmarks/llmc_data.py $TMP/tok/train.bin $TMP/llmc.bin > $TMP/llmc_data.log 2>&1; rc=$?
out=$($PY - $TMP/tok/train.bin $TMP/llmc.bin <<'EOF' 2>&1
import os, sys
import numpy as np
src, dst = sys.argv[1], sys.argv[2]
h = np.fromfile(dst, dtype="<i4", count=256)
toks = np.fromfile(dst, dtype="<u2", offset=1024)
ref = np.fromfile(src, dtype="<u2", offset=64)
ok = (h[0] == 20240520 and h[1] == 1 and h[2] == len(ref) and not h[3:].any() and np.array_equal(toks, ref)
      and os.path.getsize(dst) == 1024 + 2 * len(ref))
print(("ok" if ok else "BAD") + f" header {h[:3].tolist()}, {len(toks)} tokens")
EOF
)
$PY tests/helpers/make_data.py $TMP/tok4 70000 4000 >/dev/null
$PY benchmarks/llmc_data.py $TMP/tok4/train.bin $TMP/llmc4.bin > $TMP/llmc4.log 2>&1; rc4=$?
$PY benchmarks/llmc_data.py --read $TMP/llmc.bin > $TMP/llmc_read.log 2>&1; rcr=$?
[ $rc -eq 0 ] && [ "${out%% *}" == ok ] && [ $rc4 -ne 0 ] && [ ! -e $TMP/llmc4.bin ] && [ $rcr -eq 0 ] \
  && pass "llmc_data_roundtrip ($out; 4-byte tokens refused: $(tail -1 $TMP/llmc4.log | cut -c1-60)...)" \
  || fail "llmc_data_roundtrip: rc $rc, '$out', 4-byte rc $rc4, --read rc $rcr: $(tail -1 $TMP/llmc_data.log)"

TPY=""
for c in .venv-ref/bin/python /usr/bin/python3; do [ -x $c ] && $c -c "import torch" 2>/dev/null && { TPY=$c; break; }; done
if [ -z "$TPY" ]; then echo "SKIP torch_gpt2_cpu: no Python here imports torch"
else
  $TPY benchmarks/torch_gpt2_gpu.py --device cpu --n_layer 2 --n_embd 64 --n_head 2 --T 32 --B 2 --steps 3 --no-compile \
    --data $TMP/tok/train.bin > $TMP/torch.json 2> $TMP/torch.log; rc=$?
  out=$($PY - $TMP/torch.json <<'EOF' 2>&1
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
ok = r["finite"] and r["tokens_per_s"] > 0 and r["timed_steps"] == 1 and r["padded_vocab"] == 50304 and r["compile"] is False
print(("ok" if ok else "BAD") + f" torch {r['torch']}, {r['params']} params, attention {r['attention']}, "
      f"loss {r['loss_first']:.3f} -> {r['loss_last']:.3f}")
EOF
)
  [ $rc -eq 0 ] && [ "${out%% *}" == ok ] && pass "torch_gpt2_cpu (${out#ok })" \
    || fail "torch_gpt2_cpu: rc $rc, $out: $(tail -2 $TMP/torch.log | tr '\n' ' ')"
fi

mkdir -p $TMP/nogpu && printf '#!/bin/sh\nexit 9\n' > $TMP/nogpu/nvidia-smi && chmod +x $TMP/nogpu/nvidia-smi
out=$(PATH=$TMP/nogpu:$PATH benchmarks/bench_gpu_peers.sh --steps 3 --warmup 1 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$out" == "bench_gpu_peers.sh: no GPU here (nvidia-smi lists none): nothing measured" ] \
  && pass "peers_no_gpu (exit 0: $out)" || fail "peers_no_gpu: rc $rc: $out"

# a run's folder as bench_gpu_peers.sh leaves it, with made-up figures: steps 1-2 left out, medians of steps 3-6
P=$TMP/peers && mkdir -p $P/runs/ztrain
printf 'model=gpt2-124m\nL=12\nH=12\nC=768\nV=50257\nVP=50304\nB=16\nT=1024\nsteps=6\nwarmup=2\nfpt=798031872\npeak=989\ngpu=NVIDIA H100 80GB HBM3\nidle_mib=512\n' > $P/meta.txt
for r in ztrain llmc torch; do echo ok > $P/$r.status; done
i=0; for ms in 900 200 150 130 131 129; do i=$((i + 1))
  echo "{\"step\": $i, \"loss\": 10.9, \"tokens_per_s\": 1, \"step_ms\": $ms, \"gpu_mem_bytes\": 17072495616}" >> $P/runs/ztrain/metrics.jsonl; done
echo '{"tokens_per_s": 125000}' > $P/runs/ztrain/results.json
i=0; for ms in 1000.00 90.00 80.00 81.00 79.00 80.00; do i=$((i + 1))   # llm.c's printf of a step
  printf "step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s\n" \
    $i 6 10.9 0.5 1.2 -0.3 0.0006 $ms 40.0 204800 >> $P/llmc.log; done
echo '{"torch": "2.x", "compile": true, "attention": "sdpa", "optimizer": "AdamW(fused=True)", "ms_per_step": 100.0, "timed_steps": 4}' > $P/torch.json
printf '1000\n20000\n16000\n' > $P/ztrain.mem; printf '900\n12000\n' > $P/llmc.mem
out=$(benchmarks/bench_gpu_peers.sh --summarize $P 2>&1); rc=$?
z=$(echo "$out" | grep '^ztrain ' | awk '{print $2, $3, $4, $5}')
l=$(echo "$out" | grep '^llm.c ' | awk '{print $2, $3, $4, $5}')
t=$(echo "$out" | grep '^PyTorch ' | awk '{print $2, $3, $4, $5}')
[ $rc -eq 0 ] && [ "$z" == "125548 130.5 10.1 19.5" ] && [ "$l" == "204800 80.0 16.5 11.7" ] && [ "$t" == "163840 100.0 13.2 n/a" ] \
  && echo "$out" | grep -q "ztrain/llm.c 0.61, ztrain/PyTorch 0.77" \
  && pass "peers_table (tokens/s, ms, MFU%, GiB: ztrain $z, llm.c $l, PyTorch $t; ratios 0.61, 0.77)" \
  || fail "peers_table: rc $rc: ztrain '$z' llm.c '$l' PyTorch '$t': $(echo "$out" | tail -4 | tr '\n' ' ')"

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
[ $rc -eq 0 ] && grep -q "^== done" $TMP/check.log && [ "$files" == "bench.txt env.txt peers.txt resume.txt runs.tgz selftest.txt " ] \
  && grep -q "no GPU here" $TMP/check/bench.txt && grep -q "selftest rc=2" $TMP/check/selftest.txt \
  && grep -q "no GPU here" $TMP/check/peers.txt && grep -q "peers rc=0" $TMP/check/peers.txt \
  && pass "gpu_check_no_gpu (ran to its end: $files; selftest rc=2, bench and peers measured nothing)" \
  || fail "gpu_check_no_gpu: rc $rc, files '$files': $(tail -3 $TMP/check.log | tr '\n' ' ')"
finish
