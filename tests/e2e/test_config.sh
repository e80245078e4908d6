#!/usr/bin/env bash
# test: heavy
# test_config.sh — `ztrain config` / `ztrain help config`: every error class of the config
# schema (message text and exit code 2), --set overrides, int/float handling, big integers,
# and that the printed config parses back to the identical text.
# One line per case: "PASS name" or "FAIL name: reason"; exits non-zero if any case failed.
# ZTRAIN=path overrides the binary (default ./ztrain, run from the repository root).
set -u
cd "$(dirname "$0")/../.." || exit 1
ZT=${ZTRAIN:-./ztrain}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
nfail=0

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; nfail=$((nfail + 1)); }

if [ ! -x "$ZT" ]; then
    fail config_binary "$ZT not built (run make)"
    exit 1
fi

# run ARGS...: sets rc, out, errout
run() {
    "$ZT" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    out=$(cat "$T/out")
    errout=$(cat "$T/err")
}

# expect_err NAME SUBSTRING ARGS...: exit 2, "ztrain: error: ...SUBSTRING..." on stderr, nothing on stdout
expect_err() {
    local name=$1 want=$2
    shift 2
    run "$@"
    if [ "$rc" -ne 2 ]; then fail "$name" "exit code $rc, expected 2 (stderr: ${errout:0:200})"
    elif ! grep -qF "ztrain: error: " "$T/err"; then fail "$name" "no 'ztrain: error: ' line: ${errout:0:200}"
    elif ! grep -qF -- "$want" "$T/err"; then fail "$name" "stderr lacks '$want': ${errout:0:300}"
    elif [ -n "$out" ]; then fail "$name" "printed something on stdout on error"
    else pass "$name"; fi
}

# expect_ok NAME ARGS...: exit 0
expect_ok() {
    local name=$1
    shift
    run "$@"
    if [ "$rc" -ne 0 ]; then fail "$name" "exit code $rc: ${errout:0:300}"; return 1; fi
    return 0
}

# expect_line NAME REGEX ARGS...: exit 0 and a stdout line matching REGEX (grep -E)
expect_line() {
    local name=$1 re=$2
    shift 2
    expect_ok "$name" "$@" || return
    if grep -qE -- "$re" "$T/out"; then pass "$name"; else fail "$name" "no line matching '$re' in output"; fi
}

cfg() { # cfg NAME: write stdin to $T/NAME.cfg
    cat >"$T/$1.cfg"
}

# ---------------------------------------------------------------- good configs
if expect_ok defaults config; then
    if grep -qE '^  n_embd = 64;' "$T/out" && grep -qE '^device = "cpu";' "$T/out"; then pass defaults
    else fail defaults "default values missing from output"; fi
fi
for f in inputs/*.cfg; do
    expect_ok "input_$(basename "$f" .cfg)" config -c "$f" && pass "input_$(basename "$f" .cfg)"
done

# round trip: print -> parse -> print gives identical text (floats, big longs, escaped strings)
roundtrip() {
    local name=$1
    shift
    expect_ok "$name" config "$@" || return
    cp "$T/out" "$T/rt1.cfg"
    expect_ok "$name" config -c "$T/rt1.cfg" || return
    if cmp -s "$T/out" "$T/rt1.cfg"; then pass "$name"; else fail "$name" "text differs after re-parsing: $(diff "$T/rt1.cfg" "$T/out" | head -5 | tr '\n' ' ')"; fi
}
roundtrip roundtrip_defaults
roundtrip roundtrip_tiny -c inputs/tiny.cfg
roundtrip roundtrip_gpt2 -c inputs/gpt2-124m.cfg
tab=$(printf '\t')
roundtrip roundtrip_odd_values --set train.lr=0.1 --set train.min_lr=1e-300 --set train.eps=3.0000000000000004e-9 \
    --set train.steps=3000000000 --set train.seed=9000000000000000000 --set "data.train=a \"q\" b\\c${tab}d" \
    --set 'sample.prompt=line1
line2' --set model.init_std=1e-7

# --set overrides the file, later --set wins, ints accepted for floats
expect_line set_overrides_file '^  lr = 0\.01;' config -c inputs/tiny.cfg --set train.lr=0.01
expect_line set_last_wins '^  n_layer = 5;' config -c inputs/tiny.cfg --set model.n_layer=3 --set model.n_layer=5
expect_line set_string '^  name = "hello world";' config --set 'run.name=hello world'
expect_line set_int_for_float '^  lr = 1\.0;' config --set train.lr=1
cfg intfloat <<'EOF'
train = { lr = 1; grad_clip = 0; };
EOF
expect_line file_int_for_float '^  lr = 1\.0;' config -c "$T/intfloat.cfg"
cfg integral <<'EOF'
train = { steps = 1e3; global_batch = 8.0; };
EOF
expect_line file_integral_float_for_int '^  steps = 1000;' config -c "$T/integral.cfg"
expect_line set_integral_float_for_int '^  steps = 2000;' config --set train.steps=2e3

# ---------------------------------------------------------------- unknown keys
cfg unknown <<'EOF'
# comment
train = {
  lrr = 0.001;
};
EOF
expect_err unknown_key_file "$T/unknown.cfg:3: unknown key 'train.lrr' (did you mean 'train.lr'?)" config -c "$T/unknown.cfg"
cfg badgroup <<'EOF'
trian = { lr = 0.001; };
EOF
expect_err unknown_group_file "$T/badgroup.cfg:1: unknown key 'trian' (did you mean 'train'?)" config -c "$T/badgroup.cfg"
cfg toplevel <<'EOF'
seq_len = 32;
EOF
expect_err unknown_key_wrong_group "unknown key 'seq_len' (did you mean 'train.seq_len'?)" config -c "$T/toplevel.cfg"
expect_err unknown_key_set "unknown key 'train.lrr' (did you mean 'train.lr'?)" config --set train.lrr=1
expect_err unknown_key_set_far "unknown key 'completely.different'" config --set completely.different=1
expect_err set_group_as_key "'train' is a group" config --set train=1
expect_err set_no_equals "expected key=value" config --set train.lr

# ---------------------------------------------------------------- type errors
cfg typeerr <<'EOF'
train = {
  steps = 10;
  lr = "fast";
};
EOF
expect_err type_error_file "$T/typeerr.cfg:3: train.lr: expected a number, got a string" config -c "$T/typeerr.cfg"
expect_err type_error_set "train.lr: expected a number, got 'abc'" config --set train.lr=abc
expect_err type_error_set_trailing "train.steps: expected an integer, got '10x'" config --set train.steps=10x
expect_err type_error_set_empty "train.steps: expected an integer, got ''" config --set train.steps=
expect_err type_error_nan "train.lr: expected a finite number" config --set train.lr=nan
cfg fracint <<'EOF'
model = { n_layer = 2.5; };
EOF
expect_err float_for_int_file "$T/fracint.cfg:1: model.n_layer: expected an integer, got 2.5" config -c "$T/fracint.cfg"
expect_err float_for_int_set "model.n_layer: expected an integer, got 2.5" config --set model.n_layer=2.5
cfg strint <<'EOF'
device = 1;
EOF
expect_err int_for_string_file "device: expected a string, got an integer" config -c "$T/strint.cfg"
cfg groupscalar <<'EOF'
train = 5;
EOF
expect_err scalar_for_group_file "$T/groupscalar.cfg:1: train: expected a group" config -c "$T/groupscalar.cfg"
cfg groupforkey <<'EOF'
train = { lr = { x = 1; }; };
EOF
expect_err group_for_key_file "train.lr: expected a number, got a group" config -c "$T/groupforkey.cfg"

# ---------------------------------------------------------------- ranges and enums
expect_err range_set "train.lr = -1: must be >= 0" config --set train.lr=-1
expect_err range_set_int "model.n_embd = 0: must be >= 1" config --set model.n_embd=0
expect_err range_open "train.beta2 = 1: must be < 1" config --set train.beta2=1
cfg range <<'EOF'

zero = { stage = 4; };
EOF
expect_err range_file "$T/range.cfg:2: zero.stage = 4: must be <= 3" config -c "$T/range.cfg"
expect_err enum_set "zero.reduce: 'fast' is not one of ordered, native" config --set zero.reduce=fast
cfg enum <<'EOF'
device = "gpu";
EOF
expect_err enum_file "$T/enum.cfg:1: device: 'gpu' is not one of cpu, cuda, devsim, cudasim" config -c "$T/enum.cfg"
expect_err empty_name "run.name: must not be empty" config --set run.name=
long=$(printf 'x%.0s' $(seq 1 600))
expect_err string_too_long "data.train: value too long" config --set "data.train=$long"

# ---------------------------------------------------------------- file errors
cfg syntax <<'EOF'
train = {
  lr = 0.001;
  steps = ;
};
EOF
expect_err syntax_error "$T/syntax.cfg:3: syntax error (libconfig:" config -c "$T/syntax.cfg"
cfg dup <<'EOF'
train = { lr = 0.1; lr = 0.2; };
EOF
expect_err duplicate_key "$T/dup.cfg:1: syntax error (libconfig: duplicate setting" config -c "$T/dup.cfg"
expect_err missing_file "$T/nope.cfg: cannot open: No such file or directory" config -c "$T/nope.cfg"

# ---------------------------------------------------------------- cross-key consistency
expect_err embd_head "model.n_embd = 64 is not divisible by model.n_head = 3" config --set model.n_head=3
expect_err seq_gt_block "train.seq_len = 128 exceeds model.block_size = 64" config --set train.seq_len=128
expect_err global_batch_div "train.global_batch = 10 is not a multiple of train.micro_batch * world size = 4 * 1 = 4 (valid global batches: 8 or 12" \
    config --set train.global_batch=10
expect_err global_batch_small "valid global batches: 4, 8 or 16" config --set train.micro_batch=4 --set train.global_batch=2
expect_err padded_vocab "model.padded_vocab = 256 is smaller than model.vocab_size = 512" config --set model.padded_vocab=256
expect_err min_lr_gt_lr "train.min_lr = 0.01 is above train.lr = 0.001" config --set train.lr=1e-3 --set train.min_lr=0.01
expect_err warmup_gt_steps "train.warmup_steps = 200 exceeds train.steps = 100" config --set train.warmup_steps=200
# validation sees values from every source: file value fixed by a later --set is fine
expect_line validate_after_sets '^  n_head = 4;' config --set model.n_head=3 --set model.n_head=4

# ---------------------------------------------------------------- big integers
cfg bigwrap <<'EOF'
train = {
  steps = 3000000000;
};
EOF
expect_err bigint_no_suffix "$T/bigwrap.cfg:2: train.steps = 3000000000 does not fit in 32 bits: libconfig needs an L suffix (3000000000L)" \
    config -c "$T/bigwrap.cfg"
cfg bigwrap2 <<'EOF'
model = { n_layer = 4294967298; };
EOF
expect_err bigint_wraps_into_range "model.n_layer = 4294967298 does not fit in 32 bits" config -c "$T/bigwrap2.cfg"
cfg bigok <<'EOF'
train = { steps = 3000000000L; seed = 12345678901L; warmup_steps = 10L; };
EOF
expect_line bigint_L_suffix '^  steps = 3000000000L;' config -c "$T/bigok.cfg"
expect_line bigint_small_long_no_L '^  warmup_steps = 10;' config -c "$T/bigok.cfg"
expect_line bigint_set '^  steps = 3000000000L;' config --set train.steps=3000000000
expect_line bigint_set_L '^  seed = 5000000000L;' config --set train.seed=5000000000L
expect_err bigint_for_int "model.n_layer = 3000000000: must be <= 128" config --set model.n_layer=3000000000
cfg bigint64 <<'EOF'
model = { n_embd = 3000000000L; };
EOF
expect_err bigint64_for_int_file "model.n_embd = 3000000000: must be <= 65536" config -c "$T/bigint64.cfg"
expect_err bigint_overflow "train.steps = 99999999999999999999: out of range" config --set train.steps=99999999999999999999

# ---------------------------------------------------------------- help
if expect_ok help_config help config && expect_ok help_config config; then
    keys=$(awk '/^[a-z_][a-z_0-9]* = \{$/ { g = $1; next } /^\};$/ { g = ""; next }
                /^ *[a-z_0-9]+ = / { k = $1; print (g != "" ? g "." k : k) }' "$T/out")
    n=0 missing=""
    "$ZT" help config >"$T/help" 2>&1
    for k in $keys; do
        n=$((n + 1))
        grep -qE "^$k[[:space:]]" "$T/help" || missing="$missing $k"
    done
    if [ "$n" -lt 40 ]; then fail help_config "only $n keys found in config output"
    elif [ -n "$missing" ]; then fail help_config "help lacks:$missing"
    else pass help_config; fi
    # every key printed by `config` can be set back to its printed value: all in one `config` call (the
    # first failure names its key); key by key only when that fails, to list every bad one
    sets=()
    for k in $keys; do
        g=${k%%.*} l=${k#*.}
        [ "$g" = "$k" ] && g=""
        v=$(awk -v g="$g" -v l="$l" '/^[a-z_][a-z_0-9]* = \{$/ { cg = $1; next } /^\};$/ { cg = ""; next }
              cg == g && $1 == l { sub(/^[^=]*= /, ""); if (!sub(/; *#.*$/, "")) sub(/;[^;]*$/, ""); print; exit }' "$T/out")
        case "$v" in \"*\") v=${v#\"}; v=${v%\"} ;; esac
        sets+=(--set "$k=$v")
    done
    bad=""
    if ! "$ZT" config "${sets[@]}" >/dev/null 2>"$T/err"; then
        for ((i = 1; i < ${#sets[@]}; i += 2)); do
            "$ZT" config --set "${sets[$i]}" >/dev/null 2>"$T/err" || bad="$bad ${sets[$i]%%=*}($(head -c 100 "$T/err"))"
        done
        [ -n "$bad" ] || bad=" (all at once: $(head -c 200 "$T/err"))"
    fi
    if [ -n "$bad" ]; then fail set_every_key "could not set:$bad"
    else pass "set_every_key ($((${#sets[@]} / 2)) keys set back to their printed values in one call)"; fi
fi

# ---------------------------------------------------------------- per-command help, bad topics
bad=""
for c in train launch prepare eval sample export import estimate hwinfo selftest config; do
  run $c --help
  if [ "$rc" -ne 0 ] || ! grep -q "usage: ztrain $c" "$T/out"; then bad="$bad $c(rc=$rc)"; fi
  [ $c = config ] && continue # `help config` lists the config keys (checked above)
  run help $c
  if [ "$rc" -ne 0 ] || ! grep -q "usage: ztrain $c" "$T/out"; then bad="$bad help:$c(rc=$rc)"; fi
done
[ -z "$bad" ] && pass "command_help (11 commands: --help and help CMD print usage, exit 0)" || fail command_help "$bad"
expect_err help_bogus "no command or topic 'bogus'" help bogus
expect_err unknown_command "unknown command 'frobnicate'" frobnicate
bad=""
for c in train eval sample export import estimate hwinfo selftest config prepare launch; do
  run $c --no-such-option
  [ "$rc" -eq 2 ] && grep -q "no-such-option" "$T/err" || bad="$bad $c(rc=$rc)"
done
[ -z "$bad" ] && pass "unknown_option_every_command (exit 2, names the option)" || fail unknown_option_every_command "$bad"

# ---------------------------------------------------------------- presets: parse, and train or say what to do
bad=""
for f in inputs/*.cfg; do
  run config -c "$f"
  [ "$rc" -eq 0 ] || bad="$bad $f:config(rc=$rc: ${errout:0:120})"
  # without data a preset must fail in one line naming the data and what to run; with data it trains
  tr=$(sed -n 's/^ *train = "\(.*\)";/\1/p' "$f" | head -1)
  if ! compgen -G "$tr" > /dev/null; then
    run train -c "$f" --set run.root="$T/presets"
    [ "$rc" -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -qE "ztrain prepare|ztrain import|set precision|set device=cpu" "$T/err" || bad="$bad $f:nodata(rc=$rc: ${errout:0:160})"
  fi
done
[ -z "$bad" ] && pass "presets (every inputs/*.cfg parses; one that cannot run as shipped says in one line what to do)" || fail presets "$bad"

# ---------------------------------------------------------------- estimate: measured collectives (--comm), --mem-bw
# a synthetic bench_comm --json: the prediction must take the all-to-all + ordered sum time at the gradient
# buffer's size from it (log-log between the two sizes), checked against the interpolation done here
printf '{"ranks": 2, "nodes": 1, "results": [\n' > "$T/comm2.json"
for op in reduce_scatter:3 rs_ordered:1 rs_owners:2 all_gather:0.5; do # each op its own times (x 3, 1, 2, 0.5)
  f=${op#*:}; op=${op%:*}
  printf '{"op": "%s", "size": 1000000, "time_us": %s},\n{"op": "%s", "size": 1000000000, "time_us": %s},\n' \
    $op $(awk -v f=$f 'BEGIN { print 1000 * f }') $op $(awk -v f=$f 'BEGIN { print 400000 * f }') >> "$T/comm2.json"
done
sed -i '$ s/,$//' "$T/comm2.json"; echo '], "wrong": 0}' >> "$T/comm2.json"
est="-c inputs/d6.cfg --set train.micro_batch=2 --set train.global_batch=8 --set train.threads=1 --set zero.stage=1 --set zero.reduce=ordered --ranks 2 --flops 50"
P=$("$ZT" estimate $est | awk '/^config:/ { for (i = 1; i <= NF; i++) if ($i ~ /^params/) print $(i-1) }')
for red in ordered:1:1 native:1:3 ordered:2:1 native:2:2; do # the exchange: ordered = rs_ordered's row, native =
  f=${red##*:}; st=$(echo $red | cut -d: -f2); red=${red%%:*}       # reduce_scatter's (stage 1), rs_owners' (stage 2)
  if expect_ok estimate_comm_${red}_$st estimate $est --set zero.reduce=$red --set zero.stage=$st --comm "$T/comm2.json" --json; then
    r=$(tail -1 "$T/out" | /usr/bin/python3 -c '
import json, math, sys
j = json.load(sys.stdin); P = int(sys.argv[1]); f = float(sys.argv[2]); b = 4.0 * P
t = math.exp(math.log(1e-3) + math.log(b / 1e6) / math.log(1e3) * (math.log(0.4) - math.log(1e-3)))
ok = j["comm_measured"] and abs(j["grad_comm_s"] - 2 * f * t) <= 2e-3 * j["grad_comm_s"] and abs(j["gather_s"] - t / 2) <= 1e-3 + 2e-3 * t
print("ok" if ok else "grad_comm_s %g gather_s %g, expected %g and %g" % (j["grad_comm_s"], j["gather_s"], 2 * f * t, t / 2))' "$P" $f)
    [ "$r" = ok ] && pass "estimate_comm_${red}_$st (2 exchanges + the all-gather at the interpolated measured times)" || fail estimate_comm_${red}_$st "$r"
  fi
done
expect_err estimate_comm_ranks "measured on 2 ranks of one node, but the prediction is for 4 ranks" estimate -c inputs/d6.cfg --set train.micro_batch=2 --set train.global_batch=16 --ranks 4 --flops 50 --comm "$T/comm2.json"
expect_err estimate_comm_missing "$T/none.json: cannot open" estimate -c inputs/d6.cfg --set train.micro_batch=2 --set train.global_batch=16 --ranks 2 --flops 50 --comm "$T/none.json"
echo '{"ranks": 2' > "$T/trunc.json"
expect_err estimate_comm_not_json "--comm $T/trunc.json: not bench_comm --json output" estimate -c inputs/d6.cfg --set train.micro_batch=2 --set train.global_batch=16 --ranks 2 --flops 50 --comm "$T/trunc.json"
echo '{"ranks": 2, "nodes": 1, "results": [{"op": "all_gather", "size": 10, "time_us": 1}]}' > "$T/partial.json"
expect_err estimate_comm_rows "has no reduce_scatter rows" estimate -c inputs/d6.cfg --set train.micro_batch=2 --set train.global_batch=16 --ranks 2 --flops 50 --comm "$T/partial.json"
expect_err estimate_mem_bw "--mem-bw fast: expected GB/s" estimate -c inputs/d6.cfg --set train.micro_batch=2 --set train.global_batch=16 --ranks 2 --flops 50 --mem-bw fast
# zero.grad_wire in the model: ordered bf16 on GPUs (auto = precision) exchanges 2-byte words: less exchange time and
# fewer bytes between nodes than with fp32; native is untouched by the key
gw() { "$ZT" estimate -c inputs/gpt2-124m.cfg --set train.micro_batch=8 --ranks 64 --nodes 8 --hw h100 --json "$@" | tail -1; }
r=$(printf '%s\n%s\n%s\n%s\n%s\n' "$(gw)" "$(gw --set zero.grad_wire=precision)" "$(gw --set zero.grad_wire=fp32)" \
      "$(gw --set zero.reduce=native --set zero.grad_wire=precision)" "$(gw --set zero.reduce=native --set zero.grad_wire=fp32)" |
    /usr/bin/python3 -c '
import json, sys
a, p, f, np_, nf = (json.loads(l) for l in sys.stdin.read().split("\n")[:5])
ok = a == p and p["grad_comm_s"] < f["grad_comm_s"] and p["inter_node_bytes"] < f["inter_node_bytes"] and p["step_s"] < f["step_s"] and np_ == nf
print("ok %.4f %.4f" % (p["grad_comm_s"], f["grad_comm_s"]) if ok else "auto %s precision %s fp32 %s native %s / %s" % (a, p, f, np_, nf))' 2>&1)
case "$r" in ok*) pass "estimate_grad_wire (124M on 64 H100s, ordered exchange ${r#ok }: 2 bytes vs fp32, s per step)" ;;
  *) fail estimate_grad_wire "$r" ;; esac
# --device is --hw's other name: the same prediction, and one clear error for an unknown or a conflicting name
g="-c inputs/gpt2-124m.cfg --set train.micro_batch=8 --ranks 64 --nodes 8"
if expect_ok estimate_device_hw estimate $g --hw h100 --json; then
  want=$(tail -1 "$T/out")
  if expect_ok estimate_device estimate $g --device h100 --json; then
    [ "$(tail -1 "$T/out")" = "$want" ] && echo "$want" | grep -q '"step_s"' && pass "estimate_device (--device h100 == --hw h100)" ||
      fail estimate_device "--device h100 printed $(tail -1 "$T/out" | head -c 200), --hw h100 $(echo "$want" | head -c 200)"
  fi
fi
expect_err estimate_device_unknown "--hw / --device tpu: expected cpu (the host it runs on, measured), h100 or h200" estimate $g --device tpu
expect_err estimate_device_conflict "--device h200 and --hw h100: give one" estimate $g --device h200 --hw h100

[ "$nfail" -eq 0 ]
