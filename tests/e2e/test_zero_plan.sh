#!/usr/bin/env bash
# The memory plan of ZeRO stage 3 and zero.offload against what devsim really allocates, the host-memory refusal,
# and the performance model's stage-3 and offload terms (`ztrain estimate`, src/core/dist/zero_plan.c,
# src/core/diag/mem_check.c, src/core/diag/perf_model.c).
#  plan_device_*   d6 on 2 devsim ranks, 1 step: the peak of the bytes devsim has allocated (its readable-writable
#                  mappings: devsim_mem.c makes exactly an allocation's pages accessible, sampled every 20 ms from
#                  /proc/PID/maps, the largest over ranks) within 5% of the estimate's device bytes per rank
#  plan_host_*     the same runs: the peak of the anonymous readable-writable host mappings less the same rank's in
#                  the run without offload (what only the offloaded state adds) within 5% of the estimate's offloaded
#                  bytes
#  plan_table      the estimate's stage x offload table: the combinations the config checks allow (8 for a full
#                  model, 3 with LoRA), the config's own row equal to its "per rank" line
#  host_refusal    ZTRAIN_MEM_LIMIT between what 2 ranks need without and with the offloaded state: exit 2 on every
#                  rank, one "ztrain: error" line naming the offloaded state's size, the need and the limit, the run
#                  directory it would resume untouched; the same limit without offload runs
#  perf_*          the model's terms move the way the code does: offload adds its copies and host AdamW and removes
#                  the device's AdamW; a slower host link costs more; optimizer+params costs each gather a copy up
#                  and saves the update's; stage 3's gathers are hidden behind compute on GPUs (exposed < in
#                  flight) and not on a cpu whose cores all compute; its gather count is L + (K-1)(L-2) + K(L-2)
#                  + the 4 tensors outside the layers
# About 20 s on 2 idle cores. ZT_LONG=1 adds stage 1 + optimizer and stage 3 + optimizer+params in fp32.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
[ -f data/d6/train.bin ] || tests/helpers/make_data.py data/d6 50257 60000 >/dev/null
TOL=0.05

# peak allocated bytes per ztrain process under a command: "device:host" per rank on stderr's last line
cat > $TMP/peak.py <<'EOF'
import os, subprocess, sys, time
def ranks(root):
    procs = []
    for d in os.listdir('/proc'):
        if d.isdigit():
            try:
                st = open('/proc/%s/stat' % d).read()
                procs.append((int(d), int(st[st.rindex(')') + 2:].split()[1]), st[st.index('(') + 1:st.rindex(')')]))
            except Exception: pass
    kids, res, pending = {}, [], [root]
    for p, pp, c in procs: kids.setdefault(pp, []).append((p, c))
    while pending:  # every descendant of root, depth first
        for p, c in kids.get(pending.pop(), []):
            if c == 'ztrain': res.append(p)
            pending.append(p)
    return res
def sizes(pid):  # (bytes devsim has allocated, anonymous readable-writable host bytes)
    try:
        v = []
        for line in open('/proc/%d/maps' % pid):
            f = line.split()
            a, b = (int(x, 16) for x in f[0].split('-'))
            v.append((a, b, f[1], len(f) < 6))
    except Exception: return None
    # devsim's reservation: device addresses [a, a + span), never accessible, then their real memory; its first
    # mapping is the largest inaccessible one (span, a power of two, or more while the real half starts free)
    real = (0, 0)
    big = max((m for m in v if m[2] == '---p'), key=lambda m: m[1] - m[0], default=None)
    if big and big[1] - big[0] >= 1 << 30:
        span, ends = 1 << ((big[1] - big[0]).bit_length() - 1), {m[1] for m in v}
        while span >= 1 << 30 and big[0] + 2 * span not in ends: span //= 2
        if span >= 1 << 30: real = (big[0] + span, big[0] + 2 * span)
    dev = host = 0
    for a, b, perm, anon in v:
        if perm.startswith('rw'):
            if real[0] <= a and b <= real[1]: dev += b - a
            elif anon: host += b - a
    return dev, host
p = subprocess.Popen(sys.argv[1:])
peak = {}
while p.poll() is None:
    for q in ranks(p.pid):
        s = sizes(q)
        if s: peak[q] = tuple(max(x, y) for x, y in zip(peak.get(q, (0, 0)), s))
    time.sleep(0.02)
print('peak ' + ' '.join('%d:%d' % peak[k] for k in sorted(peak)), file=sys.stderr)
sys.exit(p.returncode)
EOF

d6="-c inputs/d6.cfg --set device=devsim --set train.micro_batch=1 --set train.global_batch=2 --set train.seq_len=32
    --set train.threads=1 --set train.warmup_steps=0 --set train.steps=1 --set sample.every=0 --set eval.every=0
    --set checkpoint.every=0 --set data.train=data/d6/train.bin --set data.val="
common="--set run.root=$TMP --set run.session=zp --set train.log_every=1"
# mem NAME SETS...: one 2-rank run; its per-rank peaks into $TMP/NAME.peak ("device host" per line)
mem() {
  local name=$1; shift
  if ! $PY $TMP/peak.py $MPIRUN -np 2 $ZT train $d6 $common --set run.name=$name "$@" > $TMP/$name.log 2>&1; then
    echo "run $name failed: $(grep -m1 'error' $TMP/$name.log)"; return 1
  fi
  grep '^peak ' $TMP/$name.log | tail -1 | tr ' ' '\n' | grep : | tr : ' ' > $TMP/$name.peak
}
# est SETS...: "device host offloaded" bytes per rank from `ztrain estimate` (its "per rank" and "offloaded" lines)
est() {
  $ZT estimate $d6 --ranks 2 "$@" | awk '/^per rank:/ { d = $4; h = $7 } /^offloaded/ { o = $4 }
    END { printf "%.0f %.0f %.0f\n", d * 1048576, h * 1048576, o * 1048576 }'
}
within() { awk -v m=$1 -v p=$2 -v t=$TOL 'BEGIN { e = (p - m) / m; exit !(e <= t && e >= -t) }'; }
pct() { awk -v m=$1 -v p=$2 'BEGIN { printf "%+.2f%%", 100 * (p - m) / m }'; }
mib() { awk -v b=$1 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

# ---------------------------------------------------------------- the plan against devsim's allocations
# name:baseline:sets (baseline: the same run without offload, for the host bytes)
cases="s3:-:zero.stage=3 s3_opt:s3:zero.stage=3,zero.offload=optimizer s3_bf16:-:zero.stage=3,precision=bf16
       s3_bf16_opt_params:s3_bf16:zero.stage=3,precision=bf16,zero.offload=optimizer+params
       s2_bf16_opt:s3_bf16:zero.stage=2,precision=bf16,zero.offload=optimizer"
[ -n "${ZT_LONG:-}" ] && cases="$cases s1_opt:s3:zero.stage=1,zero.offload=optimizer
       s3_opt_params:s3:zero.stage=3,zero.offload=optimizer+params"
echo "# case                      device measured  estimated    error |  host offloaded  estimated    error"
for cs in $cases; do
  IFS=: read name base sets <<< "$cs"
  set -- $(echo ",$sets" | sed 's/,/ --set /g')
  if ! why=$(mem $name "$@"); then fail "plan_device_$name: $why"; continue; fi
  read pd ph po <<< "$(est "$@")"
  md=$(awk '{ if ($1 > m) m = $1 } END { print m }' $TMP/$name.peak)
  line="device: measured $(mib $md), estimated $(mib $pd), $(pct $md $pd)"
  within $md $pd && pass "plan_device_$name ($line)" || fail "plan_device_$name: $line"
  hline=""
  if [ "$base" != - ]; then
    # what only the offloaded state adds to each rank's host mappings (the host baseline does not depend on the
    # stage or the precision: checked by the runs above)
    mh=$(paste $TMP/$name.peak $TMP/$base.peak | awk '{ d = $2 - $4; if (d > m) m = d } END { print m }')
    hline="host offloaded: measured $(mib $mh), estimated $(mib $po), $(pct $mh $po)"
    within $mh $po && pass "plan_host_$name ($hline)" || fail "plan_host_$name: $hline"
  fi
  printf "# %-24s %12s %12s %8s | %12s %12s %8s\n" $name "$(mib $md)" "$(mib $pd)" $(pct $md $pd) \
    "$([ "$base" != - ] && mib $mh)" "$([ "$base" != - ] && mib $po)" "$([ "$base" != - ] && pct $mh $po)"
  rm -rf $TMP/zp/$name
done

# ---------------------------------------------------------------- the stage x offload table
tab=$($ZT estimate $d6 --ranks 2 --set zero.stage=3 --set zero.offload=optimizer)
rows=$(echo "$tab" | awk '/^ZeRO stage x offload/ { on = 1; next } on && /^  [0-9] / { n++ } END { print n + 0 }')
mine=$(echo "$tab" | awk '/<- this config/ { print $3 }')
line=$(echo "$tab" | awk '/^per rank:/ { print $4 }')
lora=$($ZT estimate -c inputs/finetune_lora.cfg --ranks 2 2>&1 | awk '/^ZeRO stage x offload/ { on = 1; next } on && /^  [0-9] / { n++ } END { print n + 0 }')
[ "$rows" = 8 ] && [ -n "$mine" ] && [ "$mine" = "$line" ] && [ "$lora" = 3 ] \
  && pass "plan_table (d6: 8 combinations, this config's row $mine MiB = its per-rank line; LoRA: $lora, stages 0-2 without offload)" \
  || fail "plan_table: $rows rows, this config's '$mine' vs per-rank line '$line', LoRA rows '$lora': $(echo "$tab" | tail -12 | tr '\n' '|')"

# ---------------------------------------------------------------- the host-memory refusal
tiny="-c inputs/tiny.cfg --set device=devsim --set train.threads=1 --set train.steps=2 --set train.warmup_steps=0
      --set checkpoint.every=1 --set eval.every=0 --set sample.every=0 $common --set run.name=refuse"
# need per rank = everything the plan puts in memory on devsim (the total, less the data's index) + the offloaded state
read td th to <<< "$($ZT estimate $tiny --ranks 2 --set zero.stage=3 --set zero.offload=optimizer | awk '
  /^per rank:/ { d = $4; h = $7 } /^offloaded/ { o = $4 } /^data / { x = $2 }
  END { printf "%.0f %.0f %.0f\n", d * 1048576, (h - x) * 1048576, o * 1048576 }')"
limit=$(awk -v d=$td -v h=$th -v o=$to 'BEGIN { printf "%.0f", 2 * (d + h - o) + o }') # between 2 x without and 2 x with
if $MPIRUN -np 2 $ZT train $tiny --set zero.stage=3 > $TMP/refuse0.err 2>&1 && env ZTRAIN_MEM_LIMIT=$limit \
     $MPIRUN -np 2 $ZT train $tiny --set zero.stage=3 --set train.steps=3 --resume auto > $TMP/fits.log 2>&1; then
  before=$(find $TMP/zp -printf '%p %s %T@\n' | sort; find $TMP/zp -type f -exec sha256sum {} + | sort)
  ZTRAIN_MEM_LIMIT=$limit timeout 60 $MPIRUN -x ZTRAIN_MEM_LIMIT -np 2 sh -c "$ZT train $(echo $tiny) --set zero.stage=3 \
    --set zero.offload=optimizer --set train.steps=4 --resume auto; echo \$? > $TMP/rc.\$OMPI_COMM_WORLD_RANK" \
    > $TMP/refuse.log 2>&1
  after=$(find $TMP/zp -printf '%p %s %T@\n' | sort; find $TMP/zp -type f -exec sha256sum {} + | sort)
  n=$(grep -c 'ztrain: error' $TMP/refuse.log); l=$(grep -m1 'ztrain: error' $TMP/refuse.log)
  offs=$(awk -v o=$to 'BEGIN { printf "%.1f MiB", o / 1048576 }')
  if [ "$(cat $TMP/rc.0 $TMP/rc.1 2>/dev/null | tr '\n' ' ')" != "2 2 " ]; then
    fail "host_refusal: rank exit codes '$(cat $TMP/rc.* 2>/dev/null | tr '\n' ' ')', expected 2 on both: $l"
  elif [ "$n" -ne 1 ]; then fail "host_refusal: $n error lines: $(grep 'ztrain: error' $TMP/refuse.log | cut -c1-200)"
  elif ! echo "$l" | grep -qE "offloaded optimizer state [0-9.]+ [KMG]iB" || ! echo "$l" | grep -q "(ZTRAIN_MEM_LIMIT)" ||
       ! echo "$l" | grep -qF 'zero.offload = "none"'; then fail "host_refusal: the line lacks the offloaded state ($offs), the limit or the hint: $l"
  elif [ "$before" != "$after" ]; then fail "host_refusal: the run directory changed: $(diff <(echo "$before") <(echo "$after") | head -3 | tr '\n' ' ')"
  else pass "host_refusal (limit $limit bytes, both ranks exit 2, run directory untouched; without offload the same limit runs: $(echo "$l" | cut -c1-230)...)"; fi
else fail "host_refusal: the runs without offload failed: $(grep -m1 error $TMP/refuse.log $TMP/fits.log $TMP/refuse0.err 2>/dev/null)"; fi

# ---------------------------------------------------------------- the performance model's terms
j() { $ZT estimate -c inputs/gpt2-124m.cfg --ranks 8 --json "$@" | tail -1; }
key() { $PY -c 'import json, sys; d = json.loads(sys.argv[1]); print(" ".join(str(d[k]) for k in sys.argv[2:]))' "$@"; }
h2=$(j --hw h100 --set zero.stage=2); h2o=$(j --hw h100 --set zero.stage=2 --set zero.offload=optimizer)
h2s=$(j --hw h100 --set zero.stage=2 --set zero.offload=optimizer --host-bw 25)
read s2 o2 <<< "$(key "$h2" step_s optim_s)"; read s2o o2o off2o x2o <<< "$(key "$h2o" step_s optim_s offload_s offload_xfer_s)"
read s2s x2s <<< "$(key "$h2s" step_s offload_xfer_s)"
awk -v a=$s2 -v b=$s2o -v oa=$o2 -v ob=$o2o -v f=$off2o -v x=$x2o -v xs=$x2s -v ss=$s2s 'BEGIN {
  d = b - a - (f - (oa - ob)); exit !(b > a && d < 1e-5 && d > -1e-5 && xs > 1.99 * x && xs < 2.01 * x && ss > b) }' \
  && pass "perf_offload (124M, 8 H100s, stage 2: step $s2 -> $s2o s = + host update $off2o s (copies $x2o s) - device AdamW; PCIe at 25 GB/s: copies $x2s s)" \
  || fail "perf_offload: step $s2 -> $s2o, host $off2o, optim $o2 -> $o2o, copies $x2o -> $x2s at 25 GB/s, step $s2s"
h3o=$(j --hw h100 --set zero.stage=3 --set zero.offload=optimizer); h3p=$(j --hw h100 --set zero.stage=3 --set zero.offload=optimizer+params)
read s3o g3o x3o <<< "$(key "$h3o" step_s param_gather_s offload_xfer_s)"
read s3p g3p x3p <<< "$(key "$h3p" step_s param_gather_s offload_xfer_s)"
# optimizer+params: every gather copies its own part up first (more in flight), the update copies nothing up
awk -v ga=$g3o -v gb=$g3p -v xa=$x3o -v xb=$x3p 'BEGIN { exit !(gb > ga && xb < xa && xb > 0) }' \
  && pass "perf_offload_params (124M, 8 H100s, stage 3 with optimizer+params: gathers in flight $g3o -> $g3p s, update copies $x3o -> $x3p s, step $s3o -> $s3p s)" \
  || fail "perf_offload_params: gathers $g3o -> $g3p, copies $x3o -> $x3p, step $s3o -> $s3p"
# gathers per step: 124M (L 12) on 8 ranks, K micro-batches per rank
h3=$(j --hw h100 --set zero.stage=3); c3=$(j --flops 50 --set device=cpu --set precision=fp32 --set zero.stage=3)
read n3 g3 e3 <<< "$(key "$h3" param_gathers param_gather_s param_gather_exposed_s)"
read gc ec <<< "$(key "$c3" param_gather_s param_gather_exposed_s)"
read mb gb <<< "$($ZT config -c inputs/gpt2-124m.cfg | awk '$1 == "micro_batch" { m = $3 + 0 } $1 == "global_batch" { g = $3 + 0 }
  END { print m, g }')"
K=$((gb / (mb * 8))); want=$((12 + (K - 1) * 10 + K * 10 + 4))
awk -v n=$n3 -v w=$want -v g=$g3 -v e=$e3 -v gc=$gc -v ec=$ec 'BEGIN { exit !(n == w && e < g && ec == gc && gc > 0) }' \
  && pass "perf_stage3_gathers (124M on 8 ranks, K $K: $n3 gathers per step; H100: $e3 of $g3 s exposed; cpu: all $ec s)" \
  || fail "perf_stage3_gathers: $n3 gathers (want $want), H100 exposed $e3 of $g3, cpu $ec of $gc"
finish
