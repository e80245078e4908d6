#!/usr/bin/env bash
# test: long
# Mixed precision (precision = bf16 | fp16) on the cpu backend: the whole host path the GPU uses.
#  - loss curves: 300 tiny steps in bf16 and fp16 within a stated tolerance of fp32, and not equal
#    to it (the rounding happens);
#  - storage: a checkpoint's /model values are exactly the rounding of its fp32 /master weights, by
#    torch's bfloat16 and numpy's float16 conversions (independent of op_math.h);
#  - fp16 dynamic loss scaling: an injected overflow (ZTRAIN_TEST_OVERFLOW_STEP) skips exactly that
#    step (its checkpoint equals the previous one in master weights, parameters and moments), halves
#    the scale, and the scale sequence follows the growth/backoff rule recomputed here;
#  - gradients exchanged in 2 bytes (ordered, N > 1): bit-identical to 4 bytes, half the bytes sent, its buffers;
#    at stages 0-1 the micro-batch gradient stored as those words (grad16: also through devsim, its memory)
#  - bit-identical 1 vs 2 ranks (bf16 ZeRO-2, fp16 ZeRO-1 with the overflow), bit-exact resume (bf16;
#    fp16 across a scale growth), resume across precisions, export of a bf16 checkpoint = its master
#    weights, the memory plan's master weights, and config errors;
#  - 2-byte working parameters (train.param_storage = "precision"): bit-identical to float32 parameters (losses,
#    params_hash, samples, every checkpoint dataset, stages 0/1/2, bf16/fp16 with an overflow skip, async saves,
#    resume and --init-from across storage, devsim), a NaN in the state still refused by the save, and the bytes
#    (plan of GPT-2 124M, allocations of d6 runs) = words + window;
#  - 2-byte activation storage (train.act_storage = "auto"): bit-identical to 4-byte storage in bf16 and fp16,
#    with recompute gelu/layer, on 2 ranks and on devsim; the bytes it saves (plan and allocations) = the formula;
#  - reduced-precision base weights for QLoRA: `ztrain eval --quantize nf4|nf4_dq|int8` of the fp32
#    curve run's checkpoint: the loss moves (the weights were quantised) but stays within a stated
#    tolerance, and the storage per parameter is the format's.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data

base="-c inputs/tiny.cfg --set train.micro_batch=2 --set train.global_batch=8 --set train.log_every=1
      --set run.root=$TMP --set eval.every=0"

# ---------------------------------------------------------------- loss curves
common="$base --set run.session=curve --set train.steps=300"
for p in fp32 bf16 fp16; do run_named $p 1 --set precision=$p || fail "curve_$p: run failed"; done
curve=$($PY - $TMP/curve <<'PYEOF'
import json, sys
m = {p: [json.loads(l) for l in open(f"{sys.argv[1]}/{p}/metrics.jsonl")] for p in ("fp32", "bf16", "fp16")}
d = {p: [x["loss"] for x in v] for p, v in m.items()}
assert all(len(v) == 300 for v in d.values()), {p: len(v) for p, v in d.items()}
for p in ("bf16", "fp16"):
    # the reported gradient norm is the unscaled one (fp16's loss scale divided out): step 1 agrees
    g32, gp = m["fp32"][0]["grad_norm"], m[p][0]["grad_norm"]
    assert abs(gp - g32) / g32 < 2e-2, f"{p}: step-1 grad norm {gp} vs fp32 {g32}"
    rel = max(abs(a - b) / a for a, b in zip(d["fp32"], d[p]))
    tail = abs(sum(d[p][-50:]) - sum(d["fp32"][-50:])) / sum(d["fp32"][-50:])
    print(p, rel, tail, d["fp32"][-1], d[p][-1])
PYEOF
)
# tolerances: measured here max rel loss difference over 300 steps 2.5e-4 (bf16) and 2.7e-5 (fp16);
# limits ~8-10x that. The last-50-steps mean must agree within 0.2%.
check_curve() { # prec limit
  read -r _ rel tail l32 lp <<< "$(echo "$curve" | grep "^$1 ")"
  if [ -n "${rel:-}" ] && $PY -c "import sys; sys.exit(0 if 0 < $rel <= $2 and $tail <= 2e-3 else 1)"; then
    pass "${1}_curve_vs_fp32 (300 steps: max rel loss diff $rel <= $2 and > 0; last-50 mean within $tail; final $lp vs fp32 $l32)"
  else fail "${1}_curve_vs_fp32: max rel ${rel:-?} (limit $2, must be > 0), last-50 mean diff ${tail:-?}"; fi
}
check_curve bf16 2e-3
check_curve fp16 3e-4

# ---------------------------------------------------------------- storage = rounding of the master weights
# (the curve runs' final checkpoints)
if out=$($PY - $TMP/curve <<'PYEOF' 2>&1
import sys, h5py, numpy as np, torch
d = sys.argv[1]
for p in ("bf16", "fp16"):
    f = h5py.File(f"{d}/{p}/checkpoints/step_00000300.h5", "r")
    assert set(f.keys()) == {"model", "master", "optim"}, list(f.keys())
    n = exact = 0
    for k in f["model"]:
        w, m = f["model"][k][()], f["master"][k][()]
        assert w.dtype == np.float32 and m.dtype == np.float32
        if p == "bf16":
            r = torch.from_numpy(m).to(torch.bfloat16).to(torch.float32).numpy()
        else:
            r = m.astype(np.float16).astype(np.float32)
        assert np.array_equal(r, w), (p, k, np.abs(r - w).max())
        n += m.size
        exact += int(np.sum(r == m))
    assert exact < n, f"{p}: every master weight is already {p}: no master copy"
    print(f"{p}: {n} working parameters = {p}(master) exactly, {n - exact} master weights finer than {p}")
f = h5py.File(f"{d}/fp32/checkpoints/step_00000300.h5", "r")
assert set(f.keys()) == {"model", "optim"}, list(f.keys())
PYEOF
); then pass "storage_is_rounded_master ($(echo $out | tr '\n' ' '); fp32 files have no /master)"
else fail "storage_is_rounded_master: $(echo "$out" | tail -3 | tr '\n' ' ')"; fi

# ---------------------------------------------------------------- fp16 overflow skip and the scale rule
common="$base --set run.session=ovf --set train.steps=12 --set precision=fp16 --set fp16.growth_interval=3
        --set checkpoint.every=1 --set checkpoint.keep=0"
ZTRAIN_TEST_OVERFLOW_STEP=5 run_named inj2 2
ZTRAIN_TEST_OVERFLOW_STEP=5 run_named inj1 1 --set zero.stage=1 --set checkpoint.every=0
if out=$($PY - $TMP/ovf <<'PYEOF' 2>&1
import sys, json, h5py, numpy as np
d = sys.argv[1]
m = [json.loads(l) for l in open(f"{d}/inj2/metrics.jsonl")]
assert [x["step"] for x in m] == list(range(1, 13))
skipped = [x["step"] for x in m if x["skipped"]]
assert skipped == [5], f"skipped steps {skipped}, expected [5]"
assert m[4]["grad_norm"] is None
# the scale rule, recomputed: init 65536, x2 after 3 finite steps in a row, x0.5 on overflow
scale, good = 65536.0, 0
for x in m:
    assert x["loss_scale"] == scale, (x["step"], x["loss_scale"], scale)
    if x["skipped"]:
        scale, good = scale * 0.5, 0
    else:
        good += 1
        if good == 3:
            scale, good = scale * 2, 0
a, b, n6 = (h5py.File(f"{d}/inj2/checkpoints/step_{s:08d}.h5", "r") for s in (4, 5, 6))
for g in ("master", "model", "optim/exp_avg", "optim/exp_avg_sq"):
    assert all(np.array_equal(a[g][k][()], b[g][k][()]) for k in a[g]), f"step 5 changed {g}"
    assert any(not np.array_equal(b[g][k][()], n6[g][k][()]) for k in b[g]), f"step 6 did not change {g}"
assert b.attrs["loss_scale"] == a.attrs["loss_scale"] / 2
r = json.load(open(f"{d}/inj2/results.json"))
assert r["skipped_steps"] == 1 and r["loss_scale"] == scale, r
print(f"step 5 of 12 skipped, state unchanged by it, scale sequence as the rule, final scale {scale:g}")
PYEOF
); then pass "fp16_overflow_skips_that_step ($out)"
else fail "fp16_overflow_skips_that_step: $(echo "$out" | tail -3 | tr '\n' ' ')"; fi
grep -q "step 5: fp16 gradients overflowed at loss scale" $TMP/ovf/inj2/train.log 2>/dev/null || grep -q "step 5: fp16 gradients overflowed" $TMP/inj2.log \
  && pass "fp16_overflow_logged ($(grep -h -m1 'step 5: fp16' $TMP/inj2.log))" || fail "fp16_overflow_logged: no line in the log"
compare_runs $TMP/ovf/inj2 $TMP/ovf/inj1 fp16_overflow_2_ranks_zero2_vs_1_rank_zero1

# ---------------------------------------------------------------- ranks and resume
common="$base --set run.session=rk --set train.steps=12 --set precision=bf16 --set train.global_batch=12"
run_named b1 1 && run_named b3 3
compare_runs $TMP/rk/b3 $TMP/rk/b1 bf16_zero2_3_ranks_vs_1
run_named bres 2 --stop-after 6 --set zero.stage=1; run_named bres 1 --resume auto
compare_runs $TMP/rk/bres $TMP/rk/b1 bf16_resume_2_ranks_zero1_to_1_rank_bit_exact
common="$base --set run.session=rk16 --set train.steps=12 --set precision=fp16 --set fp16.growth_interval=4"
run_named f 1 && { run_named fres 2 --stop-after 6; run_named fres 1 --resume auto; }
compare_runs $TMP/rk16/fres $TMP/rk16/f fp16_resume_across_scale_growth_bit_exact
# power-of-2 scales commute with fp16 rounding, so losses alone cannot see a scaler state lost on resume
scales() { $PY -c 'import json,sys; print(" ".join("%g" % json.loads(l)["loss_scale"] for l in open(sys.argv[1])))' $1/metrics.jsonl; }
if [ -f $TMP/rk16/f/metrics.jsonl ] && [ -f $TMP/rk16/fres/metrics.jsonl ]; then
  sc=$(scales $TMP/rk16/f); sr=$(scales $TMP/rk16/fres)
  [[ "$sc" == *131072*262144* ]] && [ "$sc" == "$sr" ] && pass "fp16_scale_grew_and_resumed (scales: $sc)" \
    || fail "fp16_scale_grew_and_resumed: straight: $sc; resumed: $sr"
else fail "fp16_scale_grew_and_resumed: runs missing"; fi

# across precisions: bf16 -> fp32 (parameters = the master weights) and fp32 -> bf16 (master = parameters)
common="$base --set run.session=xp --set train.steps=8"
run_named x16 1 --set precision=bf16 --stop-after 4; run_named x16 1 --resume auto --set precision=fp32
run_named x32 1 --stop-after 4; run_named x32 1 --resume auto --set precision=bf16
if out=$($PY - $TMP/xp <<'PYEOF' 2>&1
import sys, h5py
d = sys.argv[1]
a = h5py.File(f"{d}/x16/checkpoints/step_00000008.h5", "r")
b = h5py.File(f"{d}/x32/checkpoints/step_00000008.h5", "r")
assert set(a.keys()) == {"model", "optim"}, f"fp32 continuation of a bf16 run: {list(a.keys())}"
assert set(b.keys()) == {"model", "master", "optim"}, f"bf16 continuation of an fp32 run: {list(b.keys())}"
print("bf16 -> fp32 and fp32 -> bf16 resumed and saved in the new precision")
PYEOF
) && grep -q "resumed from" $TMP/x16.log && grep -q "resumed from" $TMP/x32.log; then pass "resume_across_precisions ($out)"
else fail "resume_across_precisions: $(echo "$out" | tail -2 | tr '\n' ' ') $(grep -h 'error' $TMP/x16.log $TMP/x32.log | head -2)"; fi

# export of a bf16 checkpoint: the fp32 master weights (safetensors from the test venv, ZT_PY)
ck=$TMP/curve/bf16/checkpoints/step_00000300.h5
if $ZT export --checkpoint $ck --format safetensors --out $TMP/exp16 > $TMP/exp16.log 2>&1 && out=$("${ZT_PY:-.venv-ref/bin/python}" - $ck $TMP/exp16/model.safetensors <<'PYEOF' 2>&1
import sys, h5py, numpy as np
from safetensors.numpy import load_file
f = h5py.File(sys.argv[1], "r")
st = load_file(sys.argv[2])
k = "h.0.mlp.c_fc.weight"
key = next(s for s in st if s.endswith(k))
assert np.array_equal(st[key], f["master"][k][()]), "export is not the master weights"
assert not np.array_equal(st[key], f["model"][k][()])
print(f"{key} = /master exactly")
PYEOF
); then pass "export_bf16_checkpoint_gives_master ($out)"
else fail "export_bf16_checkpoint_gives_master: $(tail -2 $TMP/exp16.log) ${out:-}"; fi

# the memory plan counts the master weights: optimizer state / 2 per rank
e32=$($ZT estimate -c inputs/tiny.cfg --ranks 2 --set zero.stage=2 2>&1)
e16=$($ZT estimate -c inputs/tiny.cfg --ranks 2 --set zero.stage=2 --set precision=bf16 --set train.act_storage=fp32 2>&1)
opt=$(echo "$e16" | awk '/optimizer state/ {print $NF}'); mst=$(echo "$e16" | awk '/fp32 master weights/ {print $4}')
t32=$(echo "$e32" | awk '/^total/ {print $2}'); t16=$(echo "$e16" | awk '/^total/ {print $2}')
if [ -n "$mst" ] && $PY -c "import sys; sys.exit(0 if abs($opt/2 - $mst) < 0.06 and abs($t16 - $t32 - $mst) < 0.11 else 1)"; then
  pass "estimate_counts_master_weights (bf16, 2 ranks: master $mst MiB = optimizer $opt / 2; total $t32 -> $t16 MiB)"
else fail "estimate_counts_master_weights: master '$mst' optimizer '$opt' totals $t32 $t16"; fi

# ---------------------------------------------------------------- gradients on the wire in 2 bytes
# zero.grad_wire = precision (ordered, bf16/fp16, N > 1; zero.c wire16): each rank's part of a micro-batch gradient
# crosses as 2-byte words and is decoded exactly before the owner's fp32 sums in rank order: bit-identical to the
# 4-byte exchange (fp32) and to 1 rank, half the gradient bytes sent (results.json grad_bytes_sent)
common="$base --set run.session=wire --set train.steps=6 --set train.global_batch=12"
run_named bf16-1r 1 --set precision=bf16
sent() { $PY -c 'import json,sys; print(int(json.load(open(sys.argv[1] + "/results.json"))["grad_bytes_sent"]))' "$1" 2>/dev/null; }
for ps in bf16:0 bf16:1 bf16:2 fp16:2; do
  p=${ps%:*}; st=${ps#*:}
  run_named $p-$st-w16 2 --set precision=$p --set zero.stage=$st --set zero.grad_wire=precision
  run_named $p-$st-w32 2 --set precision=$p --set zero.stage=$st --set zero.grad_wire=fp32
  compare_runs $TMP/wire/$p-$st-w32 $TMP/wire/$p-$st-w16 grad_wire_2_bytes_bit_identical_${p}_stage$st
  b16=$(sent $TMP/wire/$p-$st-w16); b32=$(sent $TMP/wire/$p-$st-w32)
  if [ -n "$b16" ] && [ -n "$b32" ] && [ "$b16" -gt 0 ] && [ $((2 * b16)) -eq "$b32" ] &&
     grep -q "gradient exchange: $p words" $TMP/$p-$st-w16.log && ! grep -q "gradient exchange:" $TMP/$p-$st-w32.log; then
    pass "grad_wire_2_bytes_sent_${p}_stage$st (rank 0 sent $b16 gradient bytes, $b32 with 4 bytes)"
  else fail "grad_wire_2_bytes_sent_${p}_stage$st: bytes sent ${b16:-?} vs ${b32:-?} (4-byte), banner $(grep -c 'gradient exchange:' $TMP/$p-$st-w16.log)"; fi
done
compare_runs $TMP/wire/bf16-2-w16 $TMP/wire/bf16-1r grad_wire_2_bytes_2_ranks_vs_1_rank
# stages 0-1: the micro-batch gradient lives only as those words (zero.c grad16: backward writes an fp32 window, the
# after-hook packs each finished layer); the runs above compared it with float32; here through devsim (no host code
# reads the window or the words) and its banner
run_named bf16-1-w16ds 2 --set precision=bf16 --set zero.stage=1 --set zero.grad_wire=precision --set device=devsim
compare_runs $TMP/wire/bf16-1-w32 $TMP/wire/bf16-1-w16ds grad_wire_2_bytes_stage1_devsim
for st in 0 1; do
  grep -q "the micro-batch gradient is those words" $TMP/bf16-$st-w16.log && pass "grad16_banner_stage$st" ||
    fail "grad16_banner_stage$st: $(grep 'gradient exchange' $TMP/bf16-$st-w16.log)"
done
# its memory: GPT-2 124M stage 1 on 8 ranks, "micro-batch gradients" = the window (wte + wpe + ln_f + one layer) x 4
# bytes instead of the padded gradient x 4
mg() { $ZT estimate -c inputs/gpt2-124m.cfg --ranks 8 --set zero.stage=1 --set precision=bf16 "$@" | awk '/^micro-batch gradients/ {print $3}'; }
g16=$(mg); g32=$(mg --set zero.grad_wire=fp32)
if out=$($PY - "$g16" "$g32" <<'PYEOF' 2>&1
import sys
g16, g32 = map(float, sys.argv[1:3])
C, L, Vp, T = 768, 12, 50304, 1024
layer = 12 * C * C + 13 * C
total = Vp * C + T * C + L * layer + 2 * C
padded = -(-total // (8 * 4096)) * 8 * 4096
want16, want32 = (Vp * C + T * C + 2 * C + layer) * 4 / 2**20, padded * 4 / 2**20
assert abs(g16 - want16) < 0.1 and abs(g32 - want32) < 0.1, f"{g16} / {g32} MiB vs {want16:.1f} / {want32:.1f}"
print(f"124M stage 1 on 8 ranks: micro-batch gradients {g32:.1f} -> {g16:.1f} MiB")
PYEOF
); then pass "grad16_memory ($out)"; else fail "grad16_memory: $out"; fi
# its buffers in the plan (d6): stage 1 on 2 ranks, packed send + packed parts (2 x padded x 2 bytes) + one decoded
# shard (padded / 2 x 4) = 1.5 x the 4-byte exchange's receive buffer (padded x 4); auto = 2 bytes on cuda/cudasim only
cb() { $ZT estimate -c inputs/d6.cfg --ranks 2 --set train.global_batch=16 --set zero.stage=1 --set precision=bf16 "$@" |
  awk '/^communication buffers/ {print $3}'; }
c16=$(cb --set zero.grad_wire=precision); c32=$(cb --set zero.grad_wire=fp32)
cac=$(cb --set device=cpu); cag=$(cb --set device=cudasim)
if [ -n "$c16" ] && [ -n "$c32" ] && $PY -c "import sys; sys.exit(0 if abs($c16 - 1.5 * $c32) < 0.2 else 1)" &&
   [ "$cac" = "$c32" ] && [ "$cag" = "$c16" ]; then
  pass "grad_wire_2_bytes_plan (communication buffers $c32 -> $c16 MiB per rank: 1.5x; auto: cpu $cac, cudasim $cag)"
else fail "grad_wire_2_bytes_plan: communication buffers ${c16:-?} MiB, 4-byte ${c32:-?} MiB (expected 1.5x); auto: cpu ${cac:-?}, cudasim ${cag:-?}"; fi

# ---------------------------------------------------------------- 2-byte activation storage (train.act_storage)
# auto (the default) keeps each layer's internals as bf16/fp16 words: bit-identical to 4-byte storage, with
# every recompute mode, on 2 ranks and through the devsim backend (so no host code reads the device stash)
common="$base --set run.session=pk --set train.steps=10"
for p in bf16 fp16; do
  run_named $p-auto 1 --set precision=$p; run_named $p-fp32 1 --set precision=$p --set train.act_storage=fp32
  compare_runs $TMP/pk/$p-auto $TMP/pk/$p-fp32 act_storage_2_bytes_bit_identical_$p
done
for rc in gelu layer; do # gelu: the recomputed GELU output is rounded as the forward stored it
  run_named bf16-$rc 1 --set precision=bf16 --set train.recompute=$rc
  compare_runs $TMP/pk/bf16-$rc $TMP/pk/bf16-fp32 bf16_recompute_${rc}_bit_identical
done
run_named bf16-2r 2 --set precision=bf16; compare_runs $TMP/pk/bf16-2r $TMP/pk/bf16-auto act_storage_2_bytes_2_ranks
run_named bf16-ds 1 --set precision=bf16 --set device=devsim
compare_runs $TMP/pk/bf16-ds $TMP/pk/bf16-auto act_storage_2_bytes_devsim
# the memory: per layer and token the internals are 15 C + NH T values (ln1 C, qkv 3C, atty C, att NH T,
# residual2 C, ln2 C, fch 4C, GELU 4C); 4L bytes become 2L packed + 4 for the one fp32 working copy.
# Checked on the plan of GPT-2 124M and on the allocations of a d6 run (6 layers, C 384, NH 6, 2 x 256 tokens)
[ -f data/d6/train.bin ] || tests/helpers/make_data.py data/d6 50257 60000 >/dev/null
# (materialized attention: the preset says device = "cuda", whose fused attention keeps no att; checked below)
pa=$($ZT estimate -c inputs/gpt2-124m.cfg --set train.attention=materialized | awk '/^activations/ {print $4}')
pf=$($ZT estimate -c inputs/gpt2-124m.cfg --set train.attention=materialized --set train.act_storage=fp32 |
  awk '/^activations/ {print $4}')
d6="-c inputs/d6.cfg --set precision=bf16 --set train.steps=2 --set train.warmup_steps=1 --set train.micro_batch=2
    --set train.global_batch=2 --set train.seq_len=256 --set data.train=data/d6/train.bin --set data.val=
    --set run.root=$TMP --set run.session=pkmem"
$ZT train $d6 --set run.name=auto > $TMP/pkmem-auto.log 2>&1; $ZT train $d6 --set run.name=fp32 --set train.act_storage=fp32 > $TMP/pkmem-fp32.log 2>&1
if out=$($PY - "$pa" "$pf" $TMP/pkmem <<'PYEOF' 2>&1
import json, sys
pa, pf, d = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
def saved(B, T, L, C, NH): return B * T * (15 * C + NH * T) * (4 * L - 2 * L - 4)
want = saved(16, 1024, 12, 768, 12) / 2**20
assert abs((pf - pa) - want) < 0.005 * want, f"124M plan: {pf} - {pa} MiB vs {want:.1f} MiB"
ma, mf = (json.load(open(f"{d}/{r}/results.json"))["mem_alloc_bytes"] for r in ("auto", "fp32"))
w6 = saved(2, 256, 6, 384, 6)
assert abs((mf - ma) - w6) < 0.01 * w6, f"d6 allocations: {mf} - {ma} vs {w6}"
print(f"124M plan: activations {pf:.0f} -> {pa:.0f} MiB (-{want:.0f} predicted); d6 run: -{(mf - ma) / 2**20:.1f} MiB allocated (predicted {w6 / 2**20:.1f})")
PYEOF
); then pass "act_storage_2_bytes_memory ($out)"; else fail "act_storage_2_bytes_memory: $out"; fi
# the fused attention (device cuda, train.attention = auto): no att (B, NH, T, T) kept (2 bytes per layer in the
# stash, 4 in the one fp32 working copy) and no datt scratch (4); instead per layer the softmax statistics (B, NH, T, 2)
# fp32, and a scratch of D (B, NH, T), plus the dq parts (B, NH, T / 64, T, hs) where it runs on the CUDA cores
# (ZT_CUDA_ATTN_TC=0; the tensor-core backward has none). From the allocating code's plan of GPT-2 124M (estimate)
pz=$($ZT estimate -c inputs/gpt2-124m.cfg | awk '/^activations/ {print $4}')
pc=$(ZT_CUDA_ATTN_TC=0 $ZT estimate -c inputs/gpt2-124m.cfg | awk '/^activations/ {print $4}')
if out=$($PY - "$pa" "$pz" "$pc" <<'PYEOF' 2>&1
import sys
pa, pz, pc = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
B, T, L, NH, hs = 16, 1024, 12, 12, 64
want = (B * NH * T * T * (2 * L + 4 + 4) - B * NH * T * (8 * L + 4)) / 2**20
parts = B * NH * (T // 64) * T * hs * 4 / 2**20
assert abs((pa - pz) - want) < 0.005 * want, f"124M plan (tensor cores): {pa} - {pz} MiB vs {want:.1f} MiB"
assert abs((pa - pc) - (want - parts)) < 0.005 * want, f"124M plan (CUDA cores): {pa} - {pc} MiB vs {want - parts:.1f} MiB"
print(f"124M bf16 plan: activations {pa:.0f} -> {pz:.0f} MiB with the fused attention on tensor cores (-{want:.0f} "
      f"predicted), {pc:.0f} on CUDA cores (-{want - parts:.0f})")
PYEOF
); then pass "fused_attention_memory ($out)"; else fail "fused_attention_memory: $out"; fi

# ---------------------------------------------------------------- 2-byte working parameters (train.param_storage)
# precision: the parameters are bf16/fp16 words (zt_model_opts.params16), unpacked exactly into one fp32 window as
# forward and backward reach each tensor; ZeRO publishes them by pack16 of the master weights and gathers the words;
# /model in a checkpoint is the master weights rounded as they are written. Everything must be bit-identical to
# float32 storage: losses, params_hash, samples taken during training, every dataset of every checkpoint (sync and
# async saves), an fp16 overflow skip, resume and --init-from across storage and rank counts, and devsim (no host
# code reads the words or the window).
common="$base --set run.session=pw --set train.steps=8 --set train.global_batch=12 --set checkpoint.every=4
        --set sample.every=4 --set sample.tokens=8 --set eval.every=4 --set eval.sequences=8"
for ps in bf16:0:false bf16:1:true bf16:2:false fp16:2:true; do
  IFS=: read -r p st as <<< "$ps"
  for w in precision fp32; do
    ZTRAIN_TEST_OVERFLOW_STEP=$([ $p = fp16 ] && echo 3 || echo 0) run_named $p-$st-$w 2 --set precision=$p \
      --set zero.stage=$st --set train.param_storage=$w --set checkpoint.async=$as
  done
  compare_runs $TMP/pw/$p-$st-fp32 $TMP/pw/$p-$st-precision param_storage_2_bytes_bit_identical_${p}_stage$st
  if out=$($PY - $TMP/pw/$p-$st-precision $TMP/pw/$p-$st-fp32 $TMP/$p-$st-precision.log $TMP/$p-$st-fp32.log <<'PYEOF' 2>&1
import sys, json, h5py, numpy as np
a, b, la, lb = sys.argv[1:5]
assert "working parameters in 2-byte words" in open(la).read() and "2-byte words" not in open(lb).read(), "banner"
sa, sb = open(a + "/samples.txt").read(), open(b + "/samples.txt").read()
assert sa and sa == sb, "samples taken during training differ"
va, vb = ([(r["step"], r["val_loss"]) for r in map(json.loads, open(d + "/metrics.jsonl")) if "val_loss" in r] for d in (a, b))
assert len(va) == 2 and va == vb, f"validation losses {va} vs {vb}"
n = 0
for step in (4, 8):
    fa, fb = (h5py.File(f"{d}/checkpoints/step_{step:08d}.h5", "r") for d in (a, b))
    names = []
    fa.visititems(lambda k, o: names.append(k) if isinstance(o, h5py.Dataset) else None)
    assert any(k.startswith("model/") for k in names) and any(k.startswith("master/") for k in names)
    for k in names:
        assert np.array_equal(fa[k][()], fb[k][()]), f"step {step}: {k} differs"
        n += 1
print(f"{n} datasets of 2 checkpoints, the samples and 2 validation losses identical")
PYEOF
  ); then pass "param_storage_2_bytes_checkpoints_${p}_stage$st ($out; checkpoint.async = $as)"
  else fail "param_storage_2_bytes_checkpoints_${p}_stage$st: $out"; fi
done
sk=$(grep -c '"skipped": 1' $TMP/pw/fp16-2-precision/metrics.jsonl)
[ "$sk" = 1 ] && pass "param_storage_2_bytes_fp16_overflow_skipped (the injected overflow at step 3 skipped: $sk step)" \
  || fail "param_storage_2_bytes_fp16_overflow_skipped: $sk skipped steps"
common="$base --set run.session=pw --set train.steps=8 --set train.global_batch=12 --set precision=bf16"
# resume: the 2-byte run's step-4 checkpoint on 1 rank with float32 storage, and the float32 run's on 2 ranks
# with 2-byte storage (stage 2), both to step 8: the uninterrupted runs' parameters
run_named res-a 1 --set train.param_storage=fp32 --resume $TMP/pw/bf16-1-precision/checkpoints/step_00000004.h5
run_named res-b 2 --set train.param_storage=precision --resume $TMP/pw/bf16-1-fp32/checkpoints/step_00000004.h5
want=$(result $TMP/pw/bf16-1-fp32 params_hash 2>/dev/null); ha=$(result $TMP/pw/res-a params_hash 2>/dev/null); hb=$(result $TMP/pw/res-b params_hash 2>/dev/null)
[ -n "$want" ] && [ "$ha" = "$want" ] && [ "$hb" = "$want" ] \
  && pass "param_storage_resume_across (2-byte -> fp32 on 1 rank and fp32 -> 2-byte on 2 ranks: params_hash ${want:0:16}... of the uninterrupted run)" \
  || fail "param_storage_resume_across: ${ha:-?} / ${hb:-?} vs ${want:-?}"
# --init-from: the weights go to this rank's master range, then the words are published
run_named init-w 2 --set train.param_storage=precision --set train.steps=3 --set train.warmup_steps=1 --init-from $TMP/pw/bf16-2-fp32/checkpoints/step_00000008.h5
run_named init-f 2 --set train.param_storage=fp32 --set train.steps=3 --set train.warmup_steps=1 --init-from $TMP/pw/bf16-2-fp32/checkpoints/step_00000008.h5
compare_runs $TMP/pw/init-f $TMP/pw/init-w param_storage_init_from
run_named dev-w 1 --set train.param_storage=precision --set device=devsim
run_named dev-f 1 --set train.param_storage=fp32
compare_runs $TMP/pw/dev-f $TMP/pw/dev-w param_storage_2_bytes_devsim
# a NaN in the state (the master weights, which /model is written from) is still refused by the save
out=$(ZTRAIN_TEST_NAN_PARAM_STEP=4 timeout 120 $MPIRUN -np 2 -x ZTRAIN_TEST_NAN_PARAM_STEP $ZT train $common \
      --set run.name=nan-w --set train.param_storage=precision --set checkpoint.every=2 2>&1); rc=$?
files=$(ls $TMP/pw/nan-w/checkpoints 2>/dev/null | tr '\n' ' ')
if [ $rc -eq 2 ] && echo "$out" | grep -q "checkpoint of step 4 not written: the state holds non-finite values (NaN in /model/wte.weight\[0, 0\])" &&
   [ "$files" = "latest step_00000002.h5 " ]; then pass "param_storage_nan_state_not_saved (exit 2, the error names /model/wte.weight[0, 0]; files: $files)"
else fail "param_storage_nan_state_not_saved: exit $rc, files $files: $(echo "$out" | grep 'ztrain: error' | head -1)"; fi
# memory: the words (padded x 2) and the fp32 window (wte or a layer, whichever is larger, + wpe + ln_f) instead
# of padded x 4; the plan of GPT-2 124M on cuda (auto) and the allocations of d6 runs (precision forced: d6's wte is
# most of it, so its window costs more than the 2 bytes save, and auto keeps float32 there)
pe() { $ZT estimate -c "$@" | awk '/^parameters/ {print $2}'; }
q16=$(pe inputs/gpt2-124m.cfg --set precision=bf16); q32=$(pe inputs/gpt2-124m.cfg --set precision=bf16 --set train.param_storage=fp32)
qcpu=$(pe inputs/gpt2-124m.cfg --set precision=bf16 --set device=cpu); qd6=$(pe inputs/d6.cfg --set precision=bf16 --set device=cuda)
qd6f=$(pe inputs/d6.cfg --set precision=bf16 --set device=cuda --set train.param_storage=fp32)
$ZT train $d6 --set run.name=pw16 --set train.param_storage=precision > $TMP/pkmem-pw16.log 2>&1
if out=$($PY - "$q16" "$q32" "$qcpu" "$qd6" "$qd6f" $TMP/pkmem <<'PYEOF' 2>&1
import json, sys
q16, q32, qcpu, qd6, qd6f = map(float, sys.argv[1:6]); d = sys.argv[6]
def sizes(L, C, Vp, T):
    layer, wte, fixed = 12 * C * C + 13 * C, Vp * C, T * C + 2 * C
    total = wte + L * layer + fixed
    return total, max(wte, layer) + fixed
tot, win = sizes(12, 768, 50304, 1024)
padded = (tot + 4095) // 4096 * 4096
want16 = (padded * 2 + win * 4) / 2**20
assert abs(q16 - want16) < 0.1 and abs(q32 - padded * 4 / 2**20) < 0.1, f"124M plan {q16} / {q32} MiB vs {want16:.1f}"
assert qcpu == q32 and qd6 == qd6f, f"auto: cpu {qcpu}, d6 on cuda {qd6} vs {qd6f}"
tot6, win6 = sizes(6, 384, 50304, 1024)
p6 = (tot6 + 4095) // 4096 * 4096
ma, mf = (json.load(open(f"{d}/{r}/results.json"))["mem_alloc_bytes"] for r in ("pw16", "auto"))
want6 = win6 * 4 - p6 * 2
# resident-memory growth carries ~0.2 MB of noise between two runs (allocator and thread stacks): 2% of the 17 MiB
assert abs((ma - mf) - want6) < 0.02 * abs(want6) + 4096, f"d6 allocations: {ma} - {mf} vs {want6}"
print(f"124M plan: parameters {q32:.1f} -> {q16:.1f} MiB (auto on cuda; cpu keeps {qcpu:.1f}); d6 run: {(ma - mf) / 2**20:+.1f} MiB allocated (predicted {want6 / 2**20:+.1f}; auto keeps fp32 there)")
PYEOF
); then pass "param_storage_2_bytes_memory ($out)"; else fail "param_storage_2_bytes_memory: $out"; fi

# quantised base (QLoRA storage): the loss of the fp32 checkpoint with its linear weights through each format.
# Measured on this checkpoint: nf4 +3.5e-4, nf4_dq +3.8e-4, int8 -4.5e-6 relative; limits 1e-2 and 1e-3.
ck=$TMP/curve/fp32/checkpoints/step_00000300.h5
full=$($ZT eval --checkpoint $ck 2>&1 | awk '/^val loss/ {print $3}')
for q in nf4:1e-2:4.0:4.6 nf4_dq:1e-2:4.0:4.2 int8:1e-3:8.0:8.4; do
  IFS=: read -r fmt tol blo bhi <<< "$q"
  out=$($ZT eval --checkpoint $ck --quantize $fmt 2>&1)
  ql=$(echo "$out" | awk '/^val loss/ {print $3}')
  bits=$(echo "$out" | sed -n 's/.* at \([0-9.]*\) bits each.*/\1/p')
  if [ -n "$full" ] && [ -n "$ql" ] && [ -n "$bits" ] && $PY -c "
import sys; f, q, b = $full, $ql, $bits
sys.exit(0 if q != f and abs(q - f) / f <= $tol and $blo <= b <= $bhi else 1)"; then
    pass "eval_quantized_$fmt (val loss $ql vs fp32 $full, within $tol relative and not equal; $bits bits/param)"
  else fail "eval_quantized_$fmt: loss ${ql:-?} vs ${full:-?} (limit $tol), bits ${bits:-?} (expected $blo..$bhi): $(echo "$out" | tail -1)"; fi
done
$ZT eval --checkpoint $ck --quantize nf3 > $TMP/q.out 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "expected nf4, nf4_dq or int8" $TMP/q.out && pass "eval_quantize_bad_format (exit 2: $(head -1 $TMP/q.out))" \
  || fail "eval_quantize_bad_format: exit $rc: $(head -1 $TMP/q.out)"

# config errors: one line, exit 2
expect_err() { # name expected-substring args...
  local name=$1 want=$2; shift 2
  $ZT train -c inputs/tiny.cfg --set run.root=$TMP --set run.session=err "$@" > $TMP/$name.out 2>&1; rc=$?
  if [ $rc -eq 2 ] && [ "$(grep -c '^ztrain: error' $TMP/$name.out)" -eq 1 ] && grep -q -- "$want" $TMP/$name.out; then
    pass "$name ($(grep '^ztrain: error' $TMP/$name.out | cut -c1-150))"
  else fail "$name: exit $rc: $(head -2 $TMP/$name.out | tr '\n' ' ')"; fi
}
expect_err precision_unknown "precision" --set precision=fp8
expect_err fp16_backoff_range "fp16.backoff_factor" --set precision=fp16 --set fp16.backoff_factor=1
expect_err fp16_growth_interval_range "fp16.growth_interval" --set fp16.growth_interval=0
finish
