#!/usr/bin/env bash
# test: long
# test: alone
# Two "nodes" on this machine: two network namespaces joined by a veth pair, each with its own
# hostname (unshare --uts), Open MPI over TCP between them (/work/shared/RECIPES.md: 'Two "nodes"
# on one machine'). mpirun runs inside the first namespace; an rsh agent starts the second node's
# orted inside the second one. The tiny model, micro_batch 2 (global 8), 30 steps, a checkpoint
# every 10 steps:
#  0. the two nodes are up: a probe through the same mpirun puts ranks 0,1 on node 1 and 2,3 on node 2.
#  1. reference: the same run on 1 rank (plain, no namespaces).
#  2. the 2x2 run: rank 0 prints "4 ranks = 2 nodes x 2" once, and nothing is printed twice (only
#     rank 0 talks); results.json has nodes 2, world_size 4.
#  3. threads per rank follow the node's cores: the rule of src/core/dist/dist.c (online cores / ranks on
#     the node, at most the cores the rank may run on, at least 1), computed here from getconf/nproc,
#     against results.json for 2 nodes x 2, 2 nodes x 1 (a short run) and 1 rank.
#  4. checkpoints written from both nodes: step 10/20/30 files are complete ztrain checkpoints whose
#     every dataset (parameters and both AdamW moments) is bit-identical to the 1-rank run's, including
#     the flat range [2*shard, total) that only ranks 2 and 3 (on node 2) own and write under ZeRO-2;
#     resuming the 2x2 run's step-10 file on 1 rank, and its step-20 file on 2x2, ends at the
#     reference params_hash.
#  5. bit-identical: the 2x2 params_hash equals the 1-rank one, and so do the metrics.jsonl lines
#     (step, loss, lr, grad_norm, val_loss).
# Needs root (ip netns, unshare). If the namespaces cannot be made, it says why in a FAIL line.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
T0=$(date +%s)
el() { echo "at $(( $(date +%s) - T0 )) s"; }
# a private copy of the binary and the data: every run here uses the same bytes even if the checkout
# is rebuilt or data/tiny is remade meanwhile (the ranks on both nodes read them from $TMP)
ZTABS=$TMP/ztrain
cp "$(readlink -f $ZT)" $ZTABS && mkdir -p $TMP/data && cp data/tiny/train.bin data/tiny/val.bin $TMP/data/ \
  || { fail "setup: cannot copy $ZT and data/tiny to $TMP"; finish; }

# ---- the two nodes. Names carry this shell's PID; a previous run's leftovers (its PID gone) are removed.
NET=10.231.77                      # only ever used inside the two namespaces made here
IP1=$NET.1 IP2=$NET.2
NS1=ztmn1-$$ NS2=ztmn2-$$ V1=ztmv1-$$ V2=ztmv2-$$
H1=ztmnode1 H2=ztmnode2
net_down() {
  ip netns pids $NS1 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns pids $NS2 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del $NS1 2>/dev/null; ip netns del $NS2 2>/dev/null
  ip link del $V1 2>/dev/null; ip link del $V2 2>/dev/null
  true
}
trap 'net_down; rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^ztmn[12]-[0-9]+$'); do
  pid=${ns#ztmn?-}; kill -0 $pid 2>/dev/null && continue
  ip netns pids $ns 2>/dev/null | xargs -r kill -9 2>/dev/null; ip netns del $ns 2>/dev/null
done
for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E '^ztmv[12]-[0-9]+$'); do
  pid=${l#ztmv?-}; kill -0 $pid 2>/dev/null || ip link del $l 2>/dev/null
done
net_up() {
  ip netns add $NS1 && ip netns add $NS2 && ip link add $V1 type veth peer name $V2 \
  && ip link set $V1 netns $NS1 && ip link set $V2 netns $NS2 \
  && ip -n $NS1 addr add $IP1/24 dev $V1 && ip -n $NS2 addr add $IP2/24 dev $V2 \
  && ip -n $NS1 link set lo up && ip -n $NS1 link set $V1 up && ip -n $NS2 link set lo up && ip -n $NS2 link set $V2 up \
  && ip netns exec $NS1 unshare --uts /bin/true
}
if ! net_up > $TMP/net.log 2>&1; then
  fail "namespaces: cannot make two network namespaces joined by a veth pair (needs root, ip netns, unshare): $(tr '\n' ' ' < $TMP/net.log)"
  finish
fi

# rsh agent: [options] HOST COMMAND... -> the command in HOST's namespace, under its own hostname
AGENT=$TMP/rsh_agent.sh
cat > $AGENT <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift;; *) break;; esac; done
host=\$1; shift
case "\$host" in
  $IP1|$H1) ns=$NS1; name=$H1;;
  $IP2|$H2) ns=$NS2; name=$H2;;
  *) echo "rsh agent: unknown host \$host" >&2; exit 1;;
esac
exec ip netns exec "\$ns" unshare --uts /bin/sh -c "hostname \$name; \$*"
EOF
chmod +x $AGENT
HF=$TMP/hosts
printf '%s slots=2\n%s slots=2\n' $IP1 $IP2 > $HF
# mpirun inside node 1 (own hostname); PER=ranks per node; the rest is the program and its arguments.
# Both "nodes" share this machine's cores, which Open MPI cannot see: ranks yield while they wait.
mpirun2() {
  local per=$1; shift
  timeout -k 5 120 ip netns exec $NS1 unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' $H1 \
    $MPIRUN -np $((2 * per)) --hostfile $HF --map-by ppr:$per:node --mca plm_rsh_agent $AGENT \
    --mca btl self,vader,tcp --mca btl_tcp_if_include $NET.0/24 --mca oob_tcp_if_include $NET.0/24 \
    --mca mpi_yield_when_idle 1 "$@"
}

# ---- 0. the nodes are up: where each rank runs
mpirun2 2 /bin/sh -c 'echo "rank $OMPI_COMM_WORLD_RANK local $OMPI_COMM_WORLD_LOCAL_RANK on $(hostname)"' > $TMP/probe.log 2>&1
PROBE=$(grep '^rank ' $TMP/probe.log | sort | tr '\n' ',' | sed 's/,$//')
if [ "$PROBE" = "rank 0 local 0 on $H1,rank 1 local 1 on $H1,rank 2 local 0 on $H2,rank 3 local 1 on $H2" ]; then
  pass "two_nodes (veth $IP1 <-> $IP2, ranks 0,1 on $H1 and 2,3 on $H2; $(el))"
else
  fail "two_nodes: probe gave '$PROBE': $(tail -5 $TMP/probe.log | tr '\n' ' ')"
  finish
fi

ARGS="-c inputs/tiny.cfg --set data.train=$TMP/data/train.bin --set data.val=$TMP/data/val.bin --set train.micro_batch=2 --set train.steps=30 --set checkpoint.every=10 --set checkpoint.keep=0 --set eval.every=0 --set run.root=$TMP --set run.session=mn"
# ---- 1. reference: 1 rank
$ZTABS train $ARGS --set run.name=ref > $TMP/ref.log 2>&1
REF=$TMP/mn/ref
H0=$(result $REF params_hash 2>/dev/null)
if [ -n "$H0" ] && [ "$(result $REF world_size)" = 1 ] && [ -f $REF/checkpoints/step_00000010.h5 ]; then
  pass "reference (1 rank, 30 steps: ${H0:0:20}...; $(el))"
else fail "reference: $(tail -3 $TMP/ref.log | tr '\n' ' ')"; finish; fi

# ---- 2. the 2x2 run
mpirun2 2 $ZTABS train $ARGS --set run.name=n2x2 > $TMP/n2x2.log 2>&1; rc=$?
R=$TMP/mn/n2x2
nlay=$(grep -c '4 ranks = 2 nodes x 2' $TMP/n2x2.log)
dups=$(grep -v -e '^\[' -e '^\s*$' $TMP/n2x2.log | sort | uniq -d | head -3 | tr '\n' '|')
if [ $rc = 0 ] && [ -f $R/results.json ] && [ "$(result $R nodes)" = 2 ] && [ "$(result $R world_size)" = 4 ] \
   && [ "$(result $R layout)" = "4 ranks = 2 nodes x 2" ] && [ $nlay = 1 ] \
   && grep -q '^ztrain train: 4 ranks = 2 nodes x 2,' $TMP/n2x2.log \
   && [ "$(grep -o 'params_hash sha256' $TMP/n2x2.log | wc -l)" = 1 ] && [ "$(grep -o 'done: step 30/30 ' $TMP/n2x2.log | wc -l)" = 1 ] \
   && [ "$(grep -o 'checkpoint /[^ ]*/step_000000[123]0.h5' $TMP/n2x2.log | wc -l)" = 3 ] && [ -z "$dups" ]; then
  pass "run_2x2 (rank 0 prints '$(grep -o 'ztrain train: 4 ranks = 2 nodes x 2' $TMP/n2x2.log)' once, no line twice; results.json nodes 2, world_size 4; $(el))"
else
  fail "run_2x2: rc $rc, layout lines $nlay, duplicated lines '$dups', results $(result $R layout 2>/dev/null): $(tail -4 $TMP/n2x2.log | tr '\n' ' ')"
fi

# ---- 3. threads per rank = online cores / ranks on the node, capped by the cores a rank may run on, >= 1
ONLN=$(getconf _NPROCESSORS_ONLN); AFF=$(nproc)     # --bind-to none: a rank may run where this shell may
want_threads() { local t=$(( ONLN / $1 )); [ $t -gt $AFF ] && t=$AFF; [ $t -lt 1 ] && t=1; echo $t; }
mpirun2 1 $ZTABS train $ARGS --set train.steps=6 --set checkpoint.every=0 --set run.name=n2x1 > $TMP/n2x1.log 2>&1
t22=$(result $R threads_per_rank 2>/dev/null); t21=$(result $TMP/mn/n2x1 threads_per_rank 2>/dev/null)
t11=$(result $REF threads_per_rank 2>/dev/null); l21=$(result $TMP/mn/n2x1 layout 2>/dev/null)
if [ "$t22" = "$(want_threads 2)" ] && [ "$t21" = "$(want_threads 1)" ] && [ "$t11" = "$(want_threads 1)" ] \
   && [ "$l21" = "2 ranks = 2 nodes x 1" ]; then
  pass "threads_per_rank ($ONLN cores per node, $AFF usable: 2 nodes x 2 -> $t22, 2 nodes x 1 -> $t21, 1 rank -> $t11)"
else
  fail "threads_per_rank: 2x2 '$t22' (want $(want_threads 2)), 2x1 '$t21' layout '$l21' (want $(want_threads 1)), 1 rank '$t11' (want $(want_threads 1)): $(grep -v -e '^\[' -e '^--' $TMP/n2x1.log | tail -4 | tr '\n' ' ')"
fi

# ---- 4. checkpoints written from both nodes
CK=$TMP/ckcheck.py
cat > $CK <<'EOF'
import sys, h5py, numpy as np
ref_dir, run_dir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
# the flat parameter order (src/iface/param_table.c) and the ZeRO shard size (zt_shard_layout_of)
def order(L):
    per = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
           "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
           "mlp.c_proj.weight", "mlp.c_proj.bias"]
    return ["wte.weight", "wpe.weight"] + ["h.%d.%s" % (l, p) for l in range(L) for p in per] + ["ln_f.weight", "ln_f.bias"]
msgs, node2_elems, node2_nonzero = [], 0, 0
for step in (10, 20, 30):
    name = "checkpoints/step_%08d.h5" % step
    with h5py.File("%s/%s" % (run_dir, name), "r") as f, h5py.File("%s/%s" % (ref_dir, name), "r") as g:
        a = f.attrs
        if a["format"] not in (b"ztrain", "ztrain") or a["complete"] != 1 or a["step"] != step or a["world_size"] != n:
            sys.exit("%s: attrs format/complete/step/world_size %r %r %r %r" % (name, a["format"], a["complete"], a["step"], a["world_size"]))
        if g.attrs["world_size"] != 1: sys.exit("reference %s: world_size %r" % (name, g.attrs["world_size"]))
        L = max(int(k.split(".")[1]) for k in f["model"] if k.startswith("h.")) + 1
        names = order(L)
        total = int(a["n_params"])
        unit = n * 4096
        shard = (total + unit - 1) // unit * unit // n
        lo2 = 2 * shard                    # ranks 2 and 3 (node 2) own flat elements [2*shard, total)
        for grp in ("model", "optim/exp_avg", "optim/exp_avg_sq"):
            if sorted(f[grp].keys()) != sorted(names): sys.exit("%s /%s: datasets %s" % (name, grp, sorted(f[grp].keys())))
            off = 0
            for t in names:
                x, y = f[grp][t], g[grp][t]
                if x.shape != y.shape or x.dtype != np.float32: sys.exit("%s /%s/%s: shape %s dtype %s vs %s" % (name, grp, t, x.shape, x.dtype, y.shape))
                xa, ya = x[()].ravel(), y[()].ravel()
                if xa.tobytes() != ya.tobytes():
                    bad = np.nonzero(xa.view(np.uint32) != ya.view(np.uint32))[0]
                    sys.exit("%s /%s/%s: %d of %d elements differ from the 1-rank checkpoint (first at flat %d)" % (name, grp, t, len(bad), xa.size, off + bad[0]))
                s = max(lo2 - off, 0)
                if s < xa.size and step == 10:
                    node2_elems += xa.size - s
                    node2_nonzero += int(np.count_nonzero(xa[s:]))
                off += xa.size
            if off != total: sys.exit("%s /%s: %d elements, n_params %d" % (name, grp, off, total))
# unwritten space reads back as zeros (fallocate, fill time never): node 2's part must be there
if node2_elems == 0 or node2_nonzero < 0.99 * node2_elems:
    sys.exit("node 2's range: %d of %d elements nonzero" % (node2_nonzero, node2_elems))
print("3 files x 3 groups x %d tensors equal to the 1-rank checkpoints bit for bit; step 10: node 2's flat range [%d, %d) "
      "in /model + both moments = %d elements, %d nonzero" % (len(names), lo2, total, node2_elems, node2_nonzero))
EOF
if msg=$($PY $CK $REF $R 4 2>&1); then pass "checkpoints_both_nodes ($msg)"
else fail "checkpoints_both_nodes: $(echo "$msg" | tail -2 | tr '\n' ' ')"; fi
# resume the 2x2 run's files: step 10 on 1 rank, step 20 on 2 nodes x 2
$ZTABS train $ARGS --set run.name=res1 --resume $R/checkpoints/step_00000010.h5 > $TMP/res1.log 2>&1
mpirun2 2 $ZTABS train $ARGS --set run.name=res2x2 --resume $R/checkpoints/step_00000020.h5 > $TMP/res2x2.log 2>&1
h1=$(result $TMP/mn/res1 params_hash 2>/dev/null); h2=$(result $TMP/mn/res2x2 params_hash 2>/dev/null)
if [ -n "$h1" ] && [ "$h1" = "$H0" ] && [ "$h2" = "$H0" ] && grep -q 'resumed from .*step_00000010.h5 at step 10 (saved by 4 ranks)' $TMP/res1.log \
   && grep -q 'resumed from .*step_00000020.h5 at step 20 (saved by 4 ranks)' $TMP/res2x2.log; then
  pass "resume_from_2x2 (step 10 on 1 rank and step 20 on 2 nodes x 2 both end at the reference params_hash; $(el))"
else
  fail "resume_from_2x2: 1 rank '$h1', 2x2 '$h2' vs reference '$H0': 1 rank: $(grep -v '^\[' $TMP/res1.log | tail -3 | tr '\n' ' ') 2x2: $(grep -v '^\[' $TMP/res2x2.log | tail -3 | tr '\n' ' ')"
fi

# ---- 5. bit-identical to 1 rank
H4=$(result $R params_hash 2>/dev/null)
fields() { $PY -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l); print(d["step"], d["loss"], d["lr"], d["grad_norm"], d.get("val_loss"))' "$1/metrics.jsonl"; }
if [ -n "$H4" ] && [ "$H4" = "$H0" ]; then pass "bitwise_params (2 nodes x 2 params_hash == 1 rank: ${H0:0:20}...)"
else fail "bitwise_params: 2x2 '$H4' vs 1 rank '$H0'"; fi
if [ -s $R/metrics.jsonl ] && [ "$(fields $R | wc -l)" = 30 ] && cmp -s <(fields $REF) <(fields $R); then
  pass "bitwise_metrics (30 metrics.jsonl lines: step, loss, lr, grad_norm, val_loss identical; final loss $(result $R final_loss))"
else fail "bitwise_metrics: $(diff <(fields $REF) <(fields $R) 2>&1 | head -4 | tr '\n' ' ')"; fi
echo "total $(( $(date +%s) - T0 )) s"
finish
