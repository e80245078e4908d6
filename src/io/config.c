/* config.c — the configuration schema, parsing and validation (what the values mean beyond that: config_derive.c).
 *
 * ONE table (cfg_schema[] below) lists every key: dotted name, type, field offset, default,
 * range or allowed values, and a one-line help. Defaults, libconfig parsing (with unknown-key
 * detection and "did you mean"), --set overrides, range checks, `ztrain config` output and
 * `ztrain help config` all walk that table; nothing else knows the key names except the
 * cross-key checks in zt_config_validate.
 *
 * libconfig 1.5 quirks handled here: it does not report unknown keys (we walk the tree), it
 * keeps ints and floats apart (we accept both for float keys, and integral floats for int keys),
 * and it silently wraps integer literals above 2^31-1 written without an L suffix (we re-read
 * the literal from the source line and refuse a value that wrapped).
 */
#include "io/config.h"
#include "io/config_internal.h"
#include "iface/param_table.h"
#include "util/util.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <libconfig.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------- the schema */

#define FLD(m) offsetof(zt_config, m), sizeof(((zt_config *)0)->m)
#define INT(k, m, d, lo, hi, h) { k, K_INT, FLD(m), d, NULL, lo, hi, 0, NULL, h }
#define LONG(k, m, d, lo, hi, h) { k, K_LONG, FLD(m), d, NULL, lo, hi, 0, NULL, h }
#define FLT(k, m, d, lo, hi, fl, h) { k, K_FLOAT, FLD(m), d, NULL, lo, hi, fl, NULL, h }
#define BOOL(k, m, d, h) { k, K_BOOL, FLD(m), d, NULL, 0, 1, 0, NULL, h }
#define STR(k, m, d, minlen, h) { k, K_STRING, FLD(m), 0, d, minlen, 0, 0, NULL, h }
#define ENUM(k, m, d, h, ...) \
    { k, K_ENUM, FLD(m), 0, d, 0, 0, 0, (const char *const[]){ __VA_ARGS__, NULL }, h }

const key_def cfg_schema[] = {
    ENUM("device", device, "cpu",
         "compute backend (for tests: devsim = the cpu arithmetic behind device-only memory, cudasim = the CUDA "
         "kernels run on the CPU)", "cpu", "cuda", "devsim", "cudasim"),
    ENUM("comm", comm, "auto", "gradient communicator (auto: mpi for cpu, nccl for cuda, devsim for devsim and cudasim)", "auto",
         "mpi", "nccl", "devsim"),
    ENUM("precision", precision, "fp32",
         "working precision: bf16/fp16 round every stored parameter, activation and gradient to it (fp32 "
         "arithmetic) and keep fp32 master weights and Adam moments in each rank's shard, fp16 with dynamic loss scaling",
         "fp32", "bf16", "fp16"),
    FLT("fp16.init_scale", fp16.init_scale, 65536, 1, 1e30, 0, "fp16: the first loss scale"),
    FLT("fp16.growth_factor", fp16.growth_factor, 2, 1, 1e6, MIN_OPEN,
        "fp16: the scale is multiplied by this after growth_interval finite steps in a row"),
    FLT("fp16.backoff_factor", fp16.backoff_factor, 0.5, 0, 1, MIN_OPEN | MAX_OPEN,
        "fp16: the scale is multiplied by this when a step's gradients overflow (that step is skipped)"),
    LONG("fp16.growth_interval", fp16.growth_interval, 2000, 1, 1000000000L, "fp16: finite steps before the scale grows"),

    INT("model.n_layer", model.n_layer, 2, 1, ZT_MAX_LAYERS, "transformer blocks"),
    INT("model.n_head", model.n_head, 2, 1, 4096, "attention heads (must divide n_embd)"),
    INT("model.n_embd", model.n_embd, 64, 1, 65536, "embedding width C"),
    INT("model.vocab_size", model.vocab_size, 512, 2, 1 << 24, "real tokens in the vocabulary"),
    INT("model.padded_vocab", model.padded_vocab, 0, 0, 1 << 24,
        "vocab rows allocated (0 = vocab_size rounded up to 128)"),
    INT("model.block_size", model.block_size, 64, 1, 1 << 20, "max sequence length (position embeddings)"),
    FLT("model.init_std", model.init_std, 0.02, 0, 10, 0, "std of the normal weight init"),
    ENUM("model.family", model.family, "gpt2",
         "the block's description: gpt2 = LayerNorm, learned positions, GELU MLP, biases, tied LM head; llama and "
         "mistral = RMSNorm, rotary positions, SwiGLU MLP, no biases, a separate LM head; qwen2 = llama's with q, k, v "
         "biases and norm_eps 1e-6. The model.* keys below override single choices",
         "gpt2", "llama", "mistral", "qwen2"),
    INT("model.n_kv_head", model.n_kv_head, 0, 0, 4096,
        "key/value heads (grouped-query attention; 1 = multi-query; must divide n_head); 0 = n_head"),
    INT("model.intermediate_size", model.intermediate_size, 0, 0, 1 << 20,
        "the MLP's hidden size (config.json's intermediate_size); 0 = 4 * n_embd, GELU only"),
    ENUM("model.norm", model.norm, "auto", "normalisation: auto = the family's", "auto", "layernorm", "rmsnorm"),
    ENUM("model.position", model.position, "auto", "positions: auto = the family's; rope = rotary",
         "auto", "learned", "rope"),
    ENUM("model.mlp", model.mlp, "auto", "MLP: auto = the family's", "auto", "gelu", "swiglu"),
    STR("model.bias", model.bias, "auto", 1,
        "linear layers with a bias: auto = the family's, none, all, or a comma list of qkv, proj, fc, fcproj"),
    ENUM("model.tie_embeddings", model.tie_embeddings, "auto", "the LM head is the token embedding: auto = the family's",
         "auto", "true", "false"),
    FLT("model.norm_eps", model.norm_eps, 0, 0, 1, 0, "RMSNorm's epsilon (0 = the family's: 1e-5, qwen2 1e-6)"),
    FLT("model.rope_theta", model.rope_theta, 0, 0, 1e12, 0, "rotary base (0 = 10000)"),
    ENUM("model.rope_scaling", model.rope_scaling, "none",
         "rotary frequency scaling: llama3 = Llama 3.1's (rope_factor, rope_*_freq_factor, rope_original_max_position)",
         "none", "llama3"),
    FLT("model.rope_factor", model.rope_factor, 8, 1, 1e6, 0, "llama3 scaling: factor"),
    FLT("model.rope_low_freq_factor", model.rope_low_freq_factor, 1, 0, 1e6, MIN_OPEN, "llama3 scaling: low_freq_factor"),
    FLT("model.rope_high_freq_factor", model.rope_high_freq_factor, 4, 0, 1e6, MIN_OPEN,
        "llama3 scaling: high_freq_factor"),
    INT("model.rope_original_max_position", model.rope_original_max_position, 8192, 1, 1 << 24,
        "llama3 scaling: original_max_position_embeddings"),

    INT("train.micro_batch", train.micro_batch, 4, 0, 1 << 20,
        "sequences per micro-batch per rank, or \"auto\" (stored as 0): the largest that fits train.mem_limit"),
    STR("train.mem_limit", train.mem_limit, "", 0,
        "memory per rank for micro_batch auto, e.g. 8G (\"\" = the node's available memory / its ranks, x 0.9)"),
    ENUM("train.recompute", train.recompute, "none",
         "activations recomputed in backward instead of kept (bit-identical results): gelu = the GELU outputs, layer = all but each layer's output",
         "none", "gelu", "layer"),
    ENUM("train.act_storage", train.act_storage, "auto",
         "activations kept for backward: auto = 2 bytes each in a bf16/fp16 run (exact: they hold values of the precision), fp32 = 4 bytes",
         "auto", "fp32"),
    ENUM("train.param_storage", train.param_storage, "auto",
         "working parameters of a bf16/fp16 run (not LoRA): precision = 2-byte words, unpacked into one fp32 window "
         "(wte or a layer) as forward and backward reach them (exact, bit-identical), fp32 = float32 buffers holding values "
         "of the precision, auto = precision on cuda/cudasim where it takes fewer bytes (the window under half the "
         "parameters), fp32 on cpu/devsim (unpacking costs ~7% of a d6 step there)", "auto", "precision", "fp32"),
    ENUM("train.attention", train.attention, "auto",
         "causal attention in training: auto = without the (T, T) matrices where the backend can (cuda, head size 32 or 64: "
         "each layer keeps its softmax statistics and backward recomputes the probabilities), materialized = "
         "scores and probabilities kept for backward (what the cpu backend always does)",
         "auto", "materialized"),
    INT("train.global_batch", train.global_batch, 4, 1, 1 << 30, "sequences per optimizer step, all ranks"),
    INT("train.seq_len", train.seq_len, 64, 1, 1 << 20, "tokens per training sequence (<= block_size)"),
    LONG("train.steps", train.steps, 100, 0, BIG, "optimizer steps"),
    FLT("train.lr", train.lr, 3e-4, 0, 10, 0, "peak learning rate"),
    FLT("train.min_lr", train.min_lr, 0, 0, 10, 0, "final learning rate (absolute, <= lr)"),
    LONG("train.warmup_steps", train.warmup_steps, 0, 0, BIG, "linear warmup steps (<= steps)"),
    ENUM("train.schedule", train.schedule, "cosine", "lr decay after warmup", "cosine", "linear", "constant"),
    FLT("train.weight_decay", train.weight_decay, 0.1, 0, 100, 0, "AdamW decoupled weight decay"),
    FLT("train.beta1", train.beta1, 0.9, 0, 1, MAX_OPEN, "AdamW beta1"),
    FLT("train.beta2", train.beta2, 0.95, 0, 1, MAX_OPEN, "AdamW beta2"),
    FLT("train.eps", train.eps, 1e-8, 0, 1, MIN_OPEN, "AdamW epsilon"),
    FLT("train.grad_clip", train.grad_clip, 1.0, 0, 1e9, 0, "max global grad norm (0 = off)"),
    LONG("train.seed", train.seed, 1337, 0, BIG, "seed of init, data order and sampling"),
    INT("train.threads", train.threads, 0, 0, 4096, "threads per rank (0 = auto: cores / local ranks)"),
    INT("train.log_every", train.log_every, 1, 1, 1 << 30, "log a metrics line every N steps"),

    STR("data.train", data.train, "", 0,
        "training shard file, a glob of shard files, or a weighted mixture \"W1 PATH1 W2 PATH2 ...\""),
    STR("data.val", data.val, "", 0, "validation shard file (\"\" = no validation)"),
    STR("data.tokenizer", data.tokenizer, "", 0, "tokenizer file (\"\" = sampling prints token ids)"),
    BOOL("data.shuffle", data.shuffle, 1, "windows in a seeded permutation per epoch (false: in file order)"),
    BOOL("data.stream", data.stream, 0,
         "data.train is text / JSON Lines files tokenized as they are read with data.tokenizer (in order; no prepare)"),
    STR("data.field", data.field, "text", 1, "data.stream: the JSON Lines field holding the text"),

    LONG("eval.every", eval.every, 0, 0, BIG, "validate every N steps (0 = only at the end)"),
    INT("eval.sequences", eval.sequences, 32, 1, 1 << 30,
        "validation sequences per evaluation (the first N windows of data.val, whatever micro_batch and ranks)"),
    INT("eval.batches", eval.batches, 0, 0, 1 << 30,
        "obsolete (older configs): > 0 scores batches x micro_batch sequences instead of eval.sequences"),

    LONG("sample.every", sample.every, 0, 0, BIG, "sample every N steps (0 = off)"),
    INT("sample.tokens", sample.tokens, 64, 1, 1 << 24, "tokens to generate"),
    FLT("sample.temperature", sample.temperature, 1.0, 0, 100, MIN_OPEN, "softmax temperature"),
    INT("sample.top_k", sample.top_k, 40, 0, 1 << 24, "sample from the k most likely (0 = all, 1 = greedy)"),
    STR("sample.prompt", sample.prompt, "", 0, "prompt text (\"\" = start from end-of-text)"),

    INT("zero.stage", zero.stage, 2, 0, 3,
        "0 = plain DP, 1 = shard optimizer, 2 = + shard gradients, 3 = + shard parameters (gathered per layer)"),
    ENUM("zero.offload", zero.offload, "none",
         "optimizer state in host memory, the update on the host: none, optimizer (master weights and Adam moments), "
         "optimizer+params (stage 3: the parameter shard too)", "none", "optimizer", "optimizer+params"),
    ENUM("zero.reduce", zero.reduce, "ordered", "gradient reduction: ordered = bitwise N-rank == 1-rank",
         "ordered", "native"),
    FLT("zero.bucket_mb", zero.bucket_mb, 25, 0, 1e6, MIN_OPEN, "gradient bucket size in MiB"),
    ENUM("zero.grad_wire", zero.grad_wire, "auto",
         "bf16/fp16 gradients in the ordered exchange: precision = 2-byte words (exact, half the bytes, the owner sums "
         "fp32), fp32 = 4 bytes, auto = precision on cuda/cudasim, fp32 on cpu/devsim (one CPU node: packing costs "
         "more than the bytes saved)", "auto", "precision", "fp32"),

    LONG("checkpoint.every", checkpoint.every, 0, 0, BIG, "checkpoint every N steps (0 = only the final one)"),
    INT("checkpoint.keep", checkpoint.keep, 3, 0, 1 << 20, "checkpoints to keep (0 = all)"),
    BOOL("checkpoint.async", checkpoint.async, 0,
         "write checkpoints in the background: each rank copies its shard to host staging (its size is counted by estimate) and training goes on"),
    BOOL("checkpoint.direct_io", checkpoint.direct_io, 1,
         "write and read checkpoint data with O_DIRECT where the file system allows it (no page cache)"),
    STR("checkpoint.dir", checkpoint.dir, "", 0, "directory (\"\" = <run dir>/checkpoints)"),
    INT("checkpoint.signal_exit_code", checkpoint.signal_exit_code, 0, 0, 255,
        "exit code after a SIGUSR1/SIGTERM checkpoint (e.g. 3 to make a Slurm script requeue)"),

    STR("run.root", run.root, "runs", 1, "directory that holds sessions"),
    STR("run.session", run.session, "default", 1,
        "session: a group of runs compared together (a directory name: no '/', not '.' or '..')"),
    STR("run.name", run.name, "run", 1,
        "run name (numeric suffix added if it exists), a directory name: no '/', not '.' or '..'"),

    BOOL("metrics.tensorboard", metrics.tensorboard, 0,
         "rank 0 also writes TensorBoard event files (events.out.tfevents.*) in the run directory"),

    BOOL("lora.enabled", lora.enabled, 0,
         "LoRA fine-tuning: train low-rank adapters on the frozen weights of lora.base (its model.* shape is used)"),
    STR("lora.base", lora.base, "", 0, "checkpoint with the frozen base weights (e.g. from `ztrain import`)"),
    INT("lora.rank", lora.rank, 8, 1, 4096, "adapter rank r"),
    FLT("lora.alpha", lora.alpha, 16, 0, 1e6, MIN_OPEN, "adapter scaling alpha / r (alpha / sqrt(r) with lora.rslora)"),
    BOOL("lora.rslora", lora.rslora, 0, "rank-stabilised scaling alpha / sqrt(r)"),
    FLT("lora.dropout", lora.dropout, 0, 0, 1, MAX_OPEN, "dropout probability on the adapter input"),
    STR("lora.targets", lora.targets, "all", 1,
        "adapted linear layers: comma list of qkv (attn.c_attn), proj (attn.c_proj), fc (mlp.c_fc), fcproj "
        "(mlp.c_proj) for GPT-2; q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj (PEFT's names) for the "
        "Llama family; or all"),
    ENUM("lora.quant", lora.quant, "none",
         "QLoRA: the frozen base's linear weights stored quantised (nf4: 4-bit NormalFloat, blocks of 64, nf4_dq: with "
         "double-quantised block scales, int8: per-row absmax) and dequantised on the fly", "none", "nf4", "nf4_dq", "int8"),
};

const int cfg_n_keys = (int)(sizeof cfg_schema / sizeof cfg_schema[0]);

/* ---------------------------------------------------------------- small helpers */

static void *field(zt_config *c, const key_def *k) { return (char *)c + k->off; }
const void *cfg_cfield(const zt_config *c, const key_def *k) { return (const char *)c + k->off; }

static const key_def *find_key(const char *name) {
    for (int i = 0; i < N_KEYS; i++)
        if (strcmp(cfg_schema[i].key, name) == 0) return &cfg_schema[i];
    return NULL;
}

/* length of the group part of a key ("train.lr" -> 5), 0 for a top-level key */
size_t cfg_group_len(const char *key) {
    const char *dot = strchr(key, '.');
    return dot ? (size_t)(dot - key) : 0;
}

static int is_group(const char *name) {
    size_t n = strlen(name);
    for (int i = 0; i < N_KEYS; i++)
        if (cfg_group_len(cfg_schema[i].key) == n && strncmp(cfg_schema[i].key, name, n) == 0) return 1;
    return 0;
}

static int levenshtein(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    if (na > 127 || nb > 127) return 1 << 20;
    int row[128];
    for (size_t j = 0; j <= nb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int up = row[j];
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int best = diag + cost;
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

const char *cfg_leaf(const char *key) {
    const char *dot = strrchr(key, '.');
    return dot ? dot + 1 : key;
}

/* " (did you mean 'train.lr'?)" or "" : nearest key or group name */
static void did_you_mean(const char *name, char *out, size_t n) {
    char best[ZT_NAME_MAX] = "";
    int best_d = 1 << 20;
    for (int i = 0; i < N_KEYS; i++) {
        const char *k = cfg_schema[i].key;
        int d = levenshtein(name, k);
        if (strcmp(cfg_leaf(name), cfg_leaf(k)) == 0 && d > 1) d = 1; /* right key, wrong/missing group */
        if (d < best_d) { best_d = d; snprintf(best, sizeof best, "%s", k); }
        size_t gl = cfg_group_len(k);
        if (gl > 0 && gl < sizeof best) {
            char g[ZT_NAME_MAX];
            memcpy(g, k, gl);
            g[gl] = 0;
            d = levenshtein(name, g);
            if (d < best_d) { best_d = d; snprintf(best, sizeof best, "%s", g); }
        }
    }
    int limit = (int)strlen(name) / 3;
    if (limit < 2) limit = 2;
    if (best_d <= limit) snprintf(out, n, " (did you mean '%s'?)", best);
    else if (n) out[0] = 0;
}

static int unknown_key(const char *loc, const char *name, char *err, size_t n) {
    char hint[ZT_NAME_MAX + 32];
    did_you_mean(name, hint, sizeof hint);
    return zt_errf(err, n, "%s: unknown key '%s'%s (see `ztrain help config`)", loc, name, hint);
}

/* shortest "%.Ng" that reads back as exactly v */
void cfg_fmt_double(double v, char *out, size_t n) {
    if (v == floor(v) && fabs(v) < 1e15) { snprintf(out, n, "%.0f", v); return; } /* 10, not 1e+01 */
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, n, "%.*g", prec, v);
        if (strtod(out, NULL) == v) return;
    }
}

/* a libconfig float literal: must contain '.' or an exponent, or it would parse as an int */
void cfg_fmt_float_literal(double v, char *out, size_t n) {
    cfg_fmt_double(v, out, n);
    if (!strpbrk(out, ".eEn")) {
        size_t l = strlen(out);
        if (l + 2 < n) memcpy(out + l, ".0", 3);
    }
}

const char *cfg_type_name(key_type t) {
    switch (t) {
    case K_INT: return "int";
    case K_LONG: return "long";
    case K_FLOAT: return "float";
    case K_STRING: return "string";
    case K_ENUM: return "enum";
    case K_BOOL: return "bool";
    }
    return "?";
}

static const char *expected_name(key_type t) {
    switch (t) {
    case K_INT:
    case K_LONG: return "an integer";
    case K_FLOAT: return "a number";
    case K_STRING:
    case K_ENUM: return "a string";
    case K_BOOL: return "a boolean (true or false)";
    }
    return "?";
}

void cfg_allowed_list(const key_def *k, const char *sep, char *out, size_t n) {
    size_t used = 0;
    out[0] = 0;
    for (const char *const *a = k->allowed; *a && used < n; a++) {
        int w = snprintf(out + used, n - used, "%s%s", a == k->allowed ? "" : sep, *a);
        if (w < 0) break;
        used += (size_t)w;
    }
}

/* ---------------------------------------------------------------- checking and storing values */

/* range check of a number; vtext is how the value is shown in the message */
static int check_range(const key_def *k, double v, const char *vtext, const char *loc, char *err, size_t n) {
    char lim[64];
    const char *pre = loc ? loc : "", *colon = loc ? ": " : "";
    if ((k->flags & MIN_OPEN) ? !(v > k->min) : !(v >= k->min)) {
        cfg_fmt_double(k->min, lim, sizeof lim);
        return zt_errf(err, n, "%s%s%s = %s: must be %s %s", pre, colon, k->key, vtext,
                    (k->flags & MIN_OPEN) ? ">" : ">=", lim);
    }
    if ((k->flags & MAX_OPEN) ? !(v < k->max) : !(v <= k->max)) {
        cfg_fmt_double(k->max, lim, sizeof lim);
        return zt_errf(err, n, "%s%s%s = %s: must be %s %s", pre, colon, k->key, vtext,
                    (k->flags & MAX_OPEN) ? "<" : "<=", lim);
    }
    return 0;
}

static int store_integer(zt_config *c, const key_def *k, long long v, const char *loc, char *err, size_t n) {
    char txt[32];
    snprintf(txt, sizeof txt, "%lld", v);
    if (k->type == K_FLOAT) {
        if (check_range(k, (double)v, txt, loc, err, n)) return 1;
        *(double *)field(c, k) = (double)v;
        return 0;
    }
    if (k->type != K_INT && k->type != K_LONG)
        return zt_errf(err, n, "%s: %s: expected %s, got an integer", loc, k->key, expected_name(k->type));
    if (check_range(k, (double)v, txt, loc, err, n)) return 1;
    if (k->type == K_INT) *(int *)field(c, k) = (int)v;
    else *(long *)field(c, k) = (long)v;
    return 0;
}

static int store_double(zt_config *c, const key_def *k, double v, const char *loc, char *err, size_t n) {
    char txt[40];
    cfg_fmt_double(v, txt, sizeof txt);
    if (!isfinite(v)) return zt_errf(err, n, "%s: %s: expected a finite number, got %s", loc, k->key, txt);
    if (k->type == K_INT || k->type == K_LONG) {
        if (v != floor(v))
            return zt_errf(err, n, "%s: %s: expected an integer, got %s", loc, k->key, txt);
        if (fabs(v) >= 9.2e18) return zt_errf(err, n, "%s: %s = %s: out of range", loc, k->key, txt);
        return store_integer(c, k, (long long)v, loc, err, n);
    }
    if (k->type != K_FLOAT)
        return zt_errf(err, n, "%s: %s: expected %s, got a number", loc, k->key, expected_name(k->type));
    if (check_range(k, v, txt, loc, err, n)) return 1;
    *(double *)field(c, k) = v;
    return 0;
}

static int check_string(const key_def *k, const char *s, const char *loc, char *err, size_t n) {
    const char *pre = loc ? loc : "", *colon = loc ? ": " : "";
    size_t len = strnlen(s, k->size);
    if (len >= k->size)
        return zt_errf(err, n, "%s%s%s: value too long (at most %zu characters)", pre, colon, k->key, k->size - 1);
    if (k->type == K_ENUM) {
        for (const char *const *a = k->allowed; *a; a++)
            if (strcmp(*a, s) == 0) return 0;
        char list[256];
        cfg_allowed_list(k, ", ", list, sizeof list);
        return zt_errf(err, n, "%s%s%s: '%s' is not one of %s", pre, colon, k->key, s, list);
    }
    if (len < (size_t)k->min)
        return zt_errf(err, n, "%s%s%s: must not be empty", pre, colon, k->key);
    return 0;
}

static int store_string(zt_config *c, const key_def *k, const char *s, const char *loc, char *err, size_t n) {
    if (k->type == K_INT && strcmp(k->key, "train.micro_batch") == 0 && strcmp(s, "auto") == 0) {
        *(int *)field(c, k) = 0; /* resolved at start-up (zt_zero_auto_micro_batch) */
        return 0;
    }
    if (k->type != K_STRING && k->type != K_ENUM)
        return zt_errf(err, n, "%s: %s: expected %s, got a string", loc, k->key, expected_name(k->type));
    if (check_string(k, s, loc, err, n)) return 1;
    snprintf((char *)field(c, k), k->size, "%s", s);
    return 0;
}

static int store_bool(zt_config *c, const key_def *k, int v, const char *loc, char *err, size_t n) {
    if (k->type != K_BOOL)
        return zt_errf(err, n, "%s: %s: expected %s, got a boolean", loc, k->key, expected_name(k->type));
    *(int *)field(c, k) = v != 0;
    return 0;
}

/* ---------------------------------------------------------------- defaults */

void zt_config_defaults(zt_config *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < N_KEYS; i++) {
        const key_def *k = &cfg_schema[i];
        switch (k->type) {
        case K_INT:
        case K_BOOL:
            if (k->size != sizeof(int)) abort(); /* schema bug: field type disagrees with the table */
            *(int *)field(c, k) = (int)k->def;
            break;
        case K_LONG:
            if (k->size != sizeof(long)) abort();
            *(long *)field(c, k) = (long)k->def;
            break;
        case K_FLOAT:
            if (k->size != sizeof(double)) abort();
            *(double *)field(c, k) = k->def;
            break;
        case K_STRING:
        case K_ENUM: snprintf((char *)field(c, k), k->size, "%s", k->sdef); break;
        }
    }
}

/* ---------------------------------------------------------------- libconfig files */

static const char *setting_type_name(int t) {
    switch (t) {
    case CONFIG_TYPE_GROUP: return "a group";
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64: return "an integer";
    case CONFIG_TYPE_FLOAT: return "a floating-point number";
    case CONFIG_TYPE_STRING: return "a string";
    case CONFIG_TYPE_BOOL: return "a boolean";
    case CONFIG_TYPE_ARRAY: return "an array";
    case CONFIG_TYPE_LIST: return "a list";
    }
    return "nothing";
}

/* libconfig 1.5 turns "x = 3000000000" into a wrapped 32-bit int. Re-read the decimal literal
   of `name` on source line `line` and return it in *out (1), or 0 when it cannot be found. */
static int raw_int_literal(const char *file, int line, const char *name, long long *out, char *text, size_t tn) {
    if (!file) return 0; /* parsed from a string (zt_config_load_string): ztrain wrote it with L suffixes */
    FILE *f = fopen(file, "r");
    if (!f) return 0;
    char buf[4096];
    int ch = 0;
    for (int ln = 1; ln < line && ch != EOF;) /* skip to the line (any length) */
        if ((ch = fgetc(f)) == '\n') ln++;
    int found = ch != EOF && fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!found) return 0;
    size_t nl = strlen(name);
    for (char *p = strstr(buf, name); p; p = strstr(p + 1, name)) {
        if (p > buf && (isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '-' || p[-1] == '*')) continue;
        char *q = p + nl;
        while (*q == ' ' || *q == '\t') q++;
        if (*q != '=' && *q != ':') continue;
        q++;
        while (*q == ' ' || *q == '\t') q++;
        char *d = q + (*q == '-' || *q == '+');
        if (!isdigit((unsigned char)*d) || (d[0] == '0' && (d[1] == 'x' || d[1] == 'X'))) return 0;
        errno = 0;
        char *end;
        long long v = strtoll(q, &end, 10);
        if (errno == ERANGE) v = v > 0 ? LLONG_MAX : LLONG_MIN;
        *out = v;
        snprintf(text, tn, "%.*s", (int)(end - q), q);
        return 1;
    }
    return 0;
}

static int apply_setting(zt_config *c, const key_def *k, config_setting_t *s, const char *loc,
                         const char *file, char *err, size_t n) {
    int t = config_setting_type(s);
    switch (t) {
    case CONFIG_TYPE_INT: {
        long long v = config_setting_get_int(s), raw;
        char txt[64];
        /* flag only a literal outside 32 bits that libconfig wrapped (or saturated) to v */
        if (raw_int_literal(file, config_setting_source_line(s), config_setting_name(s), &raw, txt,
                            sizeof txt) &&
            (raw > INT32_MAX || raw < INT32_MIN) &&
            (raw == LLONG_MAX || raw == LLONG_MIN || (int32_t)(uint32_t)(unsigned long long)raw == v))
            return zt_errf(err, n,
                        "%s: %s = %s does not fit in 32 bits: libconfig needs an L suffix (%sL)",
                        loc, k->key, txt, txt);
        return store_integer(c, k, v, loc, err, n);
    }
    case CONFIG_TYPE_INT64: return store_integer(c, k, config_setting_get_int64(s), loc, err, n);
    case CONFIG_TYPE_FLOAT: return store_double(c, k, config_setting_get_float(s), loc, err, n);
    case CONFIG_TYPE_STRING: return store_string(c, k, config_setting_get_string(s), loc, err, n);
    case CONFIG_TYPE_BOOL: return store_bool(c, k, config_setting_get_bool(s), loc, err, n);
    default:
        return zt_errf(err, n, "%s: %s: expected %s, got %s", loc, k->key, expected_name(k->type),
                    setting_type_name(t));
    }
}

/* walk a group (root: prefix NULL) against the schema; path NULL: parsed from a string */
static int walk_group(zt_config *c, config_setting_t *g, const char *prefix, const char *path, char *err,
                      size_t n) {
    int len = config_setting_length(g);
    for (int i = 0; i < len; i++) {
        config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
        const char *name = config_setting_name(s);
        const char *file = config_setting_source_file(s);
        if (!file) file = path;
        char loc[ZT_PATH_MAX + 32], key[2 * ZT_NAME_MAX];
        snprintf(loc, sizeof loc, "%s:%d", file ? file : "config text", (int)config_setting_source_line(s));
        snprintf(key, sizeof key, "%s%s%s", prefix ? prefix : "", prefix ? "." : "", name ? name : "?");
        const key_def *k = find_key(key);
        int t = config_setting_type(s);
        if (k) {
            if (apply_setting(c, k, s, loc, file, err, n)) return 1;
        } else if (!prefix && is_group(key)) {
            if (t != CONFIG_TYPE_GROUP)
                return zt_errf(err, n, "%s: %s: expected a group (%s = { ... };), got %s", loc, key, key,
                            setting_type_name(t));
            if (walk_group(c, s, key, path, err, n)) return 1;
        } else {
            return unknown_key(loc, key, err, n);
        }
    }
    return 0;
}

/* libconfig 1.5 opens @include files itself (no hook): their types are checked first, recursively (a
   named pipe would block its open, a directory kills the process from inside libconfig's scanner) */
static int check_includes(const char *path, int depth, char *err, size_t n) {
    if (depth > 10) return zt_errf(err, n, "%s: @include nested more than 10 deep", path);
    FILE *f = fopen(path, "r");
    if (!f) return 0; /* reported by libconfig in its words */
    char line[4096];
    int ln = 0, rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        ln++;
        char *p = line;
        while (isspace((unsigned char)*p)) p++;
        if (strncmp(p, "@include", 8) != 0) continue;
        p += 8;
        while (isspace((unsigned char)*p)) p++;
        char *q = *p == '"' ? strchr(p + 1, '"') : NULL;
        if (!q) continue;
        *q = 0;
        char e[ZT_ERR_BUF];
        if (zt_check_input_file(p + 1, "a libconfig file", e, sizeof e))
            rc = zt_errf(err, n, "%s:%d: @include: %s", path, ln, e);
        else
            rc = check_includes(p + 1, depth + 1, err, n);
    }
    fclose(f);
    return rc;
}

static int load_file(zt_config *c, const char *path, char *err, size_t n) {
    /* before any open: fopen of a named pipe would block until a writer appears */
    if (zt_check_input_file(path, "a libconfig config file", err, n) || check_includes(path, 0, err, n)) return 1;
    FILE *f = fopen(path, "r");
    if (!f) return zt_errf(err, n, "%s: cannot open: %s", path, strerror(errno));
    fclose(f);
    config_t cf;
    config_init(&cf);
    int rc = 0;
    if (!config_read_file(&cf, path)) {
        if (config_error_type(&cf) == CONFIG_ERR_FILE_IO)
            rc = zt_errf(err, n, "%s: cannot read: %s", path, config_error_text(&cf));
        else
            rc = zt_errf(err, n, "%s:%d: syntax error (libconfig: %s)",
                      config_error_file(&cf) ? config_error_file(&cf) : path, config_error_line(&cf),
                      config_error_text(&cf));
    } else {
        rc = walk_group(c, config_root_setting(&cf), NULL, path, err, n);
    }
    config_destroy(&cf);
    return rc;
}

/* the same parse over a string (a checkpoint's stored config) */
static int load_text(zt_config *c, const char *text, char *err, size_t n) {
    config_t cf;
    config_init(&cf);
    int rc = 0;
    if (!config_read_string(&cf, text))
        rc = zt_errf(err, n, "config text:%d: syntax error (libconfig: %s)", config_error_line(&cf),
                  config_error_text(&cf));
    else
        rc = walk_group(c, config_root_setting(&cf), NULL, NULL, err, n);
    config_destroy(&cf);
    return rc;
}

/* ---------------------------------------------------------------- --set key=value */

static void trim(char *s) {
    size_t l = strlen(s), b = 0;
    while (l > 0 && isspace((unsigned char)s[l - 1])) s[--l] = 0;
    while (isspace((unsigned char)s[b])) b++;
    memmove(s, s + b, l - b + 1);
}

/* strict integer: decimal or 0x hex, optional L / LL suffix; 1 on success */
static int parse_ll(const char *s, long long *out, int *overflow) {
    const char *d = s + (*s == '-' || *s == '+');
    int hex = d[0] == '0' && (d[1] == 'x' || d[1] == 'X');
    if (!(hex ? isxdigit((unsigned char)d[2]) : isdigit((unsigned char)*d))) return 0;
    char *end;
    errno = 0;
    *out = strtoll(s, &end, hex ? 16 : 10);
    *overflow = errno == ERANGE;
    if (*end == 'L') end += 1 + (end[1] == 'L');
    return *end == 0;
}

static int parse_double(const char *s, double *out) {
    if (!*s) return 0;
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return *end == 0;
}

int zt_config_set(zt_config *c, const char *assignment, char *err, size_t errlen) {
    const char *loc = "--set";
    const char *eq = strchr(assignment, '=');
    if (!eq) return zt_errf(err, errlen, "%s: '%s': expected key=value (e.g. train.lr=3e-4)", loc, assignment);
    char key[2 * ZT_NAME_MAX], val[ZT_PATH_MAX + 16];
    size_t kl = (size_t)(eq - assignment);
    if (kl >= sizeof key) kl = sizeof key - 1;
    memcpy(key, assignment, kl);
    key[kl] = 0;
    trim(key);
    if (strlen(eq + 1) >= sizeof val) {
        const key_def *k = find_key(key);
        return zt_errf(err, errlen, "%s: %s: value too long (at most %zu characters)", loc, key,
                    k && k->size < sizeof val ? k->size - 1 : sizeof val - 1);
    }
    snprintf(val, sizeof val, "%s", eq + 1);
    const key_def *k = find_key(key);
    if (!k) {
        if (is_group(key))
            return zt_errf(err, errlen, "%s: '%s' is a group, not a key: set one of its keys, e.g. %s.<key>", loc,
                        key, key);
        return unknown_key(loc, key, err, errlen);
    }
    if (k->type == K_STRING || k->type == K_ENUM) return store_string(c, k, val, loc, err, errlen);
    trim(val);
    if (k->type == K_INT && (!strcmp(val, "auto") || !strcmp(val, "\"auto\""))) return store_string(c, k, "auto", loc, err, errlen);
    if (k->type == K_BOOL) {
        if (!strcasecmp(val, "true") || !strcmp(val, "1")) return store_bool(c, k, 1, loc, err, errlen);
        if (!strcasecmp(val, "false") || !strcmp(val, "0")) return store_bool(c, k, 0, loc, err, errlen);
        return zt_errf(err, errlen, "%s: %s: expected true or false, got '%s'", loc, k->key, val);
    }
    long long iv;
    int overflow = 0;
    double dv;
    if (parse_ll(val, &iv, &overflow)) {
        if (overflow) return zt_errf(err, errlen, "%s: %s = %s: out of range", loc, k->key, val);
        return store_integer(c, k, iv, loc, err, errlen);
    }
    if (parse_double(val, &dv)) return store_double(c, k, dv, loc, err, errlen);
    return zt_errf(err, errlen, "%s: %s: expected %s, got '%s'", loc, k->key, expected_name(k->type), val);
}

/* ---------------------------------------------------------------- load and validate */

int zt_config_load(zt_config *c, const char *path, int n_sets, char *const *sets, char *err, size_t errlen) {
    zt_config_defaults(c);
    if (path && load_file(c, path, err, errlen)) return 1;
    for (int i = 0; i < n_sets; i++)
        if (zt_config_set(c, sets[i], err, errlen)) return 1;
    return zt_config_validate(c, 1, err, errlen);
}

int zt_config_load_string(zt_config *c, const char *text, char *err, size_t errlen) {
    zt_config_defaults(c);
    if (load_text(c, text ? text : "", err, errlen)) return 1;
    return zt_config_validate(c, 1, err, errlen);
}

/* value of a number key as double and as text */
static double num_value(const zt_config *c, const key_def *k, char *txt, size_t n) {
    switch (k->type) {
    case K_INT:
    case K_BOOL: snprintf(txt, n, "%d", *(const int *)cfg_cfield(c, k)); return *(const int *)cfg_cfield(c, k);
    case K_LONG: snprintf(txt, n, "%ld", *(const long *)cfg_cfield(c, k)); return (double)*(const long *)cfg_cfield(c, k);
    case K_FLOAT: cfg_fmt_double(*(const double *)cfg_cfield(c, k), txt, n); return *(const double *)cfg_cfield(c, k);
    default: txt[0] = 0; return 0;
    }
}

/* a single path component: no '/', not "." or "..", no control characters */
static int check_dir_name(const char *key, const char *v, char *err, size_t errlen) {
    if (strcmp(v, ".") == 0 || strcmp(v, "..") == 0 || strchr(v, '/'))
        return zt_errf(err, errlen, "%s = \"%s\": must be a plain directory name (no '/', not '.' or '..'): the run "
                       "directory is run.root/run.session/run.name and must stay inside run.root", key, v);
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return zt_errf(err, errlen, "%s: contains a control character (0x%02x): must be a plain directory name",
                           key, *p);
    return 0;
}

int zt_config_validate(const zt_config *c, int world_size, char *err, size_t errlen) {
    for (int i = 0; i < N_KEYS; i++) {
        const key_def *k = &cfg_schema[i];
        if (k->type == K_STRING || k->type == K_ENUM) {
            if (check_string(k, (const char *)cfg_cfield(c, k), NULL, err, errlen)) return 1;
        } else if (k->type != K_BOOL) {
            char txt[40];
            double v = num_value(c, k, txt, sizeof txt);
            if (k->type == K_FLOAT && !isfinite(v))
                return zt_errf(err, errlen, "%s = %s: expected a finite number", k->key, txt);
            if (check_range(k, v, txt, NULL, err, errlen)) return 1;
        }
    }
    if (world_size < 1) return zt_errf(err, errlen, "world size %d: must be >= 1", world_size);
    const typeof(c->model) *m = &c->model;
    const typeof(c->train) *t = &c->train;
    /* lora.enabled: model.* are replaced by lora.base's (zt_lora_base_shape checks seq_len against it) */
    zt_model_shape shape;
    if (!c->lora.enabled && zt_config_shape(c, &shape, err, errlen)) return 1;

    if (!c->lora.enabled && t->seq_len > m->block_size)
        return zt_errf(err, errlen, "train.seq_len = %d exceeds model.block_size = %d (the positions the model has)",
                    t->seq_len, m->block_size);
    if (m->padded_vocab && m->padded_vocab < m->vocab_size)
        return zt_errf(err, errlen, "model.padded_vocab = %d is smaller than model.vocab_size = %d (0 = auto)",
                    m->padded_vocab, m->vocab_size);
    long long per_step = (long long)(t->micro_batch > 0 ? t->micro_batch : 1) * world_size; /* 0 = auto */
    if (t->global_batch % per_step) {
        long long lo = t->global_batch / per_step * per_step, hi = lo + per_step;
        char alt[96];
        if (lo > 0) snprintf(alt, sizeof alt, "%lld or %lld", lo, hi);
        else snprintf(alt, sizeof alt, "%lld, %lld or %lld", hi, 2 * hi, 4 * hi);
        return zt_errf(err, errlen,
                    "train.global_batch = %d is not a multiple of train.micro_batch * world size = %d * %d = %lld "
                    "(valid global batches: %s; or change train.micro_batch)",
                    t->global_batch, t->micro_batch, world_size, per_step, alt);
    }
    if (t->min_lr > t->lr) {
        char a[40], b[40];
        cfg_fmt_double(t->min_lr, a, sizeof a);
        cfg_fmt_double(t->lr, b, sizeof b);
        return zt_errf(err, errlen, "train.min_lr = %s is above train.lr = %s (min_lr is an absolute rate)", a, b);
    }
    if (t->warmup_steps > t->steps)
        return zt_errf(err, errlen, "train.warmup_steps = %ld exceeds train.steps = %ld", t->warmup_steps, t->steps);
    /* the obsolete eval.batches counts micro-batches: its sequences must stay in eval.sequences' range */
    const key_def *es = find_key("eval.sequences");
    if (c->eval.batches > 0 && (double)c->eval.batches * t->micro_batch > es->max)
        return zt_errf(err, errlen,
                       "eval.batches = %d x train.micro_batch = %d = %.0f validation sequences: must be <= %.0f "
                       "(eval.batches is obsolete: set eval.sequences and eval.batches = 0)",
                       c->eval.batches, t->micro_batch, (double)c->eval.batches * t->micro_batch, es->max);
    if (c->lora.enabled) {
        if (!c->lora.base[0])
            return zt_errf(err, errlen, "lora.enabled = true needs lora.base: the checkpoint with the frozen base weights "
                           "(e.g. made by `ztrain import`)");
        if (!zt_config_lora_targets(c->lora.targets, err, errlen)) return 1;
    }
    if (zt_config_check_zero(c, err, errlen)) return 1;
    /* run.session and run.name are one directory level each under run.root */
    if (check_dir_name("run.session", c->run.session, err, errlen) || check_dir_name("run.name", c->run.name, err, errlen))
        return 1;
    return 0;
}
